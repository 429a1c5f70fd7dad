"""Scopes that are one piece are found in one pass, and group as the search groups them.

`GraphTree._place` makes a group per connected piece of a scope's ops (`_scope_pieces`);
`_whole_scopes` finds the scopes whose ops are all one piece from the computation's links
at once, so that those are placed with no search. These tests hold the tree to the one the
search alone makes (every scope searched), on random modules whose scopes nest, share
reads, and hold constants with and without users in them.
"""

from __future__ import annotations

import random

import pytest

from tests._support.hlo_texts import named_module
from tpukit.graph._graph_data import SCOPE, GraphTree, _trie_members
from tpukit.hlo import parse_hlo

_SCOPES = [f"l{k}{sub}" for k in range(4) for sub in ("", "/mlp", "/mlp/up", "/mlp/act", "/attn")]


def _random_module(seed: int, runs: int = 60) -> str:
    """Runs of ops in nested scopes (layers, their sub-scopes), most going on from their
    scope's last op, each op reading the op before it and some a constant made for it (a
    kernel) or a value made anywhere before (reads shared across scopes); a few constants
    used nowhere, a few ops unnamed (placed by their neighbours)."""
    rng = random.Random(seed)
    lines = ["HloModule random_scopes", "", "ENTRY main {", "  p0 = f32[4] parameter(0)"]
    lines.append("  x = f32[4] negate(p0)")
    names = ["x"]
    last: dict[str, str] = {}  # each scope's last op: most runs go on from it
    for k in range(runs):
        scope = rng.choice(_SCOPES)
        meta = f', metadata={{op_name="jit(f)/{scope}/op{k}"}}' if rng.random() < 0.9 else ""
        prev = last.get(scope, "x") if rng.random() < 0.9 else rng.choice(names)
        for j in range(rng.randint(1, 4)):
            name, other = f"v{k}_{j}", None
            if rng.random() < 0.3:
                other = f"c{k}_{j}"
                lines.append(f"  {other} = f32[4] constant({{1, 2, 3, 4}}){meta}")
            elif rng.random() < 0.05:
                lines.append(f"  u{k}_{j} = f32[4] constant({{1, 2, 3, 4}}){meta}")  # unused
            elif rng.random() < 0.2:
                other = rng.choice(names)
            operands = f"{prev}, {other}" if other else prev
            lines.append(f"  {name} = f32[4] {'add' if other else 'negate'}({operands}){meta}")
            names.append(name)
            prev = name
        last[scope] = prev
    lines += [f"  ROOT out = f32[4] negate({names[-1]})", "}", ""]
    return "\n".join(lines)


def _tree(data: GraphTree) -> tuple:
    return (
        list(data.kind),
        list(data.parent),
        list(data.label),
        list(data.order),
        [list(k) for k in data.children],
    )


@pytest.mark.parametrize("seed", range(40))
def test_scopes_found_whole_group_as_the_search_groups_them(seed, monkeypatch):
    module = parse_hlo(_random_module(seed))
    found = _tree(GraphTree(module))
    monkeypatch.setattr(GraphTree, "_whole_scopes", lambda self, trie: set())
    assert found == _tree(GraphTree(module))  # every scope searched for its pieces


@pytest.mark.parametrize("seed", range(40))
def test_the_scopes_found_whole_are_those_the_search_finds_one_piece(seed, monkeypatch):
    checked = []
    find = GraphTree._whole_scopes

    def whole_scopes(self, trie):
        found = find(self, trie)
        stack = [trie]
        while stack:
            scope = stack.pop()
            stack.extend(scope["/"].values())
            ops = _trie_members(scope)
            one = len(ops) > 1 and len(self._connected_pieces(ops)) == 1
            checked.append((one, id(scope) in found))
        return found

    monkeypatch.setattr(GraphTree, "_whole_scopes", whole_scopes)
    GraphTree(parse_hlo(_random_module(seed)))
    assert [one for one, _ in checked] == [found for _, found in checked]
    assert any(one for one, _ in checked) and not all(one for one, _ in checked)


def test_a_scope_of_one_piece_is_not_searched(monkeypatch):
    searched = []
    search = GraphTree._connected_pieces
    monkeypatch.setattr(
        GraphTree,
        "_connected_pieces",
        lambda self, nodes: searched.append(nodes) or search(self, nodes),
    )
    data = GraphTree(parse_hlo(named_module(layers=3, rope=4, filler=6)))
    assert SCOPE in data.kind  # scope groups were made
    assert searched == []
