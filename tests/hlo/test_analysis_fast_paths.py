"""The analysis's fast paths give what its exact, slower paths give (issue 38).

A dot's ``lhs_contracting_dims`` is read from its line without splitting its attributes
where that cannot differ from the split (`_matmul_flops._lhs_contracting`); a scope whose
last component has no bracket is parsed from its parent's parse
(`_user_scopes._parse_closed_scope`); a fusion whose body names no scope is placed by its
own ``op_name`` without weighing its body (`_fused_work.names_a_scope`). Each test also
checks that the fast path was taken: the old code took the slow one everywhere.
"""

from __future__ import annotations

import itertools

import pytest

from tpukit.hlo import parse_hlo
from tpukit.hlo.analysis import (
    _fused_work,
    _matmul_flops,
    _user_scopes,
    dot_conv_flops,
    instruction_flops,
)
from tpukit.hlo.analysis._matmul_flops import _dims_attr, _lhs_contracting
from tpukit.hlo.text import _model
from tpukit.hlo.text._attributes import split_attributes as _split

_DOT = """HloModule m
ENTRY e {{
  x = f32[8,16,4] parameter(0)
  w = f32[16,4,2] parameter(1)
  ROOT d = f32[8,2] dot(x, w){rest}
}}
"""

# (the attributes after a dot's operands, whether the line alone can tell)
DOTS = [
    (", lhs_contracting_dims={1}, rhs_contracting_dims={0}", True),
    (", lhs_contracting_dims = {1} , rhs_contracting_dims={0}", True),
    (', lhs_contracting_dims={1,2}, metadata={op_name="a/b"}', True),
    (", lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}", True),
    (", rhs_contracting_dims={0}", True),
    (", lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_contracting_dims={0}", False),
    (', backend_config="lhs_contracting_dims={0}", lhs_contracting_dims={1}', False),
    (", xlhs_contracting_dims={1}, rhs_contracting_dims={0}", False),
    (", lhs_contracting_dims={1}x, rhs_contracting_dims={0}", False),
    (", lhs_batch_dims={0}, sharding={replicated}, lhs_contracting_dims={2}", False),
]


@pytest.mark.parametrize(("rest", "alone"), DOTS)
def test_a_dots_contracting_dims_read_from_its_line_are_the_split_attributes(
    rest, alone, monkeypatch
):
    text = _DOT.format(rest=rest)
    split = parse_hlo(text).instruction("d")
    expected = _dims_attr(split.attributes.get("lhs_contracting_dims"))
    dot = parse_hlo(text).instruction("d")
    splits = []
    monkeypatch.setattr(_model, "split_attributes", lambda t: splits.append(t) or _split(t))
    assert _lhs_contracting(dot) == expected
    assert (not splits) == alone  # read from the line alone: nothing split
    assert dot._attributes is None  # either way, no dict kept with the module


class _CountedPieces:
    """`_matmul_flops._PLAIN_PIECES`, counting the texts it is asked to read."""

    def __init__(self) -> None:
        self.read = 0
        self._pieces = _matmul_flops._PLAIN_PIECES

    def fullmatch(self, text, *args):
        self.read += 1
        return self._pieces.fullmatch(text, *args)


@pytest.mark.parametrize(
    ("pieces", "alone"), [("lhs_batch_dims={0}, ", True), ("sharding={replicated}, ", False)]
)
def test_the_pieces_before_a_dots_contracting_dims_are_read_once_for_dots_writing_them_alike(
    pieces, alone, monkeypatch
):
    # (each dot's own metadata after them: the line differs, what decides does not)
    dots = [
        parse_hlo(
            _DOT.format(rest=f', {pieces}lhs_contracting_dims={{2}}, metadata={{op_name="a/{k}"}}')
        ).instruction("d")
        for k in range(3)
    ]
    counted = _CountedPieces()
    monkeypatch.setattr(_matmul_flops, "_PLAIN_PIECES", counted)
    monkeypatch.setattr(_matmul_flops, "_READ", {}, raising=False)  # (none kept before)
    splits = []
    monkeypatch.setattr(_model, "split_attributes", lambda t: splits.append(t) or _split(t))
    assert [_lhs_contracting(dot) for dot in dots] == [(2,)] * 3
    assert counted.read == 1
    assert len(splits) == (0 if alone else 3)  # (not plain: every dot's attributes read)


HEADS = [
    "/".join(parts)
    for n in (1, 2, 3, 4)
    for parts in itertools.product(
        ["jit(f)", "jvp(m)", "transpose(jvp(m))", "layers[0]", "a", "while", "body", "", "x (T)"],
        repeat=n,
    )
] + ["jit(f)/transpose(jvp(m)/a", "a/b(c", "a)/b", "a/b]/c", "/a/b", "a//b"]


def test_a_scope_parsed_from_its_parent_is_parsed_as_a_whole():
    _user_scopes.forget_parsed_scopes()
    for head in HEADS:
        whole = head.count("(") + head.count("[") <= head.count(")") + head.count("]")
        expected = _user_scopes.parse_scope(_user_scopes.split_scope(head)) if whole else None
        assert _user_scopes._parse_closed_scope(head) == expected, head
    _user_scopes.forget_parsed_scopes()
    _user_scopes._parse_closed_scope("jit(f)/jvp(m)/layers[0]")
    splits = _user_scopes._split_scope.cache_info().misses
    for name in ("dense", "attn", "mlp/up", "mlp/down"):  # below a parsed parent: no split
        assert _user_scopes._parse_closed_scope(f"jit(f)/jvp(m)/layers[0]/{name}")[1][-1] in name
    assert _user_scopes._split_scope.cache_info().misses == splits
    _user_scopes.forget_parsed_scopes()


_FUSIONS = """HloModule m

fused {{
  p = f32[8] parameter(0)
  e = f32[8] exponential(p){inner}
  ROOT n = f32[8] negate(e){outer}
}}

ENTRY main {{
  x = f32[8] parameter(0), metadata={{op_name="jit(f)/layer/x"}}
  ROOT f = f32[8] fusion(x), kind=kLoop, calls=fused, metadata={{op_name="jit(f)/layer/exp"}}
}}
"""


@pytest.mark.parametrize("named", [False, True])
def test_a_fusion_whose_body_names_no_scope_is_placed_by_its_own_name(monkeypatch, named):
    inner = ', metadata={op_name="jit(f)/inner/exp"}' if named else ""
    outer = ', metadata={op_name="jit(f)/outer/neg"}' if named else ""
    module = parse_hlo(_FUSIONS.format(inner=inner, outer=outer))
    walked = []
    real = _fused_work.fused_work
    monkeypatch.setattr(
        _user_scopes, "fused_work", lambda called, m: walked.append(called) or real(called, m)
    )
    plan = _user_scopes.plan_scopes(module.entry, module, None)
    # (two scopes inside: the one making its result wins, and the fusion says so)
    assert plan.path["f"] == (["outer"] if named else ["layer"])
    assert ("f" in plan.notes) == named
    assert walked == ([[module.computations["fused"]]] if named else [[]])


_WEIGHED = """HloModule m

region {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

inner {
  q = f32[8,16] parameter(0)
  w = f32[16,4] parameter(1)
  ROOT d2 = f32[8,4] dot(q, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/head/dot"}
}

mixed {
  p = f32[8,16] parameter(0)
  w = f32[16,4] parameter(1)
  z = f32[] constant(0)
  d = f32[8,4] dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dense/dot"}
  u = f32[8,4] dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r = f32[8] reduce(d, z), dimensions={1}, to_apply=region, metadata={op_name="jit(f)/norm/sum"}
  ROOT t = f32[8,4] tanh(u), metadata={op_name="jit(f)/act/tanh"}
}

nesting {
  p = f32[8,16] parameter(0)
  w = f32[16,4] parameter(1)
  f = f32[8,4] fusion(p, w), kind=kOutput, calls=inner
  ROOT e = f32[8,4] exponential(f), metadata={op_name="jit(f)/act/exp"}
}

ENTRY main {
  x = f32[8,16] parameter(0)
  w = f32[16,4] parameter(1)
  a = f32[8,4] fusion(x, w), kind=kOutput, calls=mixed, metadata={op_name="jit(f)/dense/dot"}
  ROOT b = f32[8,4] fusion(x, w), kind=kOutput, calls=nesting, metadata={op_name="jit(f)/act/exp"}
}
"""


def test_the_flops_a_fusions_weighing_walk_keeps_are_its_bodys_flops():
    module = parse_hlo(_WEIGHED)
    plan = _user_scopes.plan_scopes(module.entry, module, None)
    assert plan.path["a"] == ["dense"]  # (its dot's FLOPs weighed: a fusion of three scopes)
    # The walk kept the FLOPs of a body whose ops run no computation (an unnamed dot's
    # too), not of one holding a fusion; the nested body's own, once walked, as well.
    assert module._flops == {"mixed": 2 * 2 * 8 * 4 * 16, "inner": 2 * 8 * 4 * 16}
    fresh = parse_hlo(_WEIGHED)  # (nothing kept before: `instruction_flops` walks them)
    for name in ("a", "b"):
        assert instruction_flops(module.instruction(name), module) == instruction_flops(
            fresh.instruction(name), fresh
        )
    assert dot_conv_flops(module) == dot_conv_flops(fresh) == 3 * 2 * 8 * 4 * 16


_CYCLE = """HloModule m

back {
  q = f32[8,16] parameter(0)
  w = f32[16,4] parameter(1)
  ROOT c = f32[8,4] call(q, w), to_apply=calling
}

calling {
  p = f32[8,16] parameter(0)
  w = f32[16,4] parameter(1)
  d = f32[8,4] dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dense/dot"}
  k = f32[8,4] call(p, w), to_apply=back
  ROOT t = f32[8,4] add(d, k), metadata={op_name="jit(f)/act/add"}
}

ENTRY main {
  x = f32[8,16] parameter(0)
  w = f32[16,4] parameter(1)
  ROOT a = f32[8,4] fusion(x, w), kind=kOutput, calls=calling
}
"""


def test_the_weighing_walk_asks_no_flops_of_an_unnamed_op_that_runs_a_computation(monkeypatch):
    # In a (malformed) cycle of calls the FLOPs found depend on the order they are asked
    # in: the walk asks those of the named ops alone, as ever, and keeps no sum.
    module = parse_hlo(_CYCLE)
    asked = []
    real = _fused_work.instruction_flops
    monkeypatch.setattr(
        _fused_work, "instruction_flops", lambda i, m: asked.append(i.name) or real(i, m)
    )
    _user_scopes.plan_scopes(module.entry, module, None)
    assert asked == ["d"]
    assert "calling" not in module._flops
