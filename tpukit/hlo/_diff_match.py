"""How two HLO programs correspond: their groups matched by place, their ops by what they are.

`match_programs` is the comparison behind `_diff_view.diff_graph`. Each program is read
as the tree of groups its graph shows (`_graph_data`, node kinds from `_graph_nodes`): a group's key is the path of its
labels from the top (``("forward", "layers[0] (Linear)")``), looking through the
consecutive parts of big groups, with XLA's numbers taken out of loop and call names and
``#2`` added to a scope that appears twice in one place. Equal keys match; a key on one
side only is an added or removed group.

A working op (a fusion, a dot, a custom call, a collective; not plumbing such as
parameters or tuples) is matched by its signature: the scope of its ``op_name``, its
opcode and fusion kind, the ops at its fused root and the heavy ops inside. XLA numbers
fusions as it makes them, so names are only a tie-break among equal signatures (the same
name first, then the same name without its number, then program order).

    >>> match = match_programs(graph(a), graph(b))  # doctest: +SKIP
    >>> [g.name for g in match.groups if g.status == "added"]  # doctest: +SKIP
    ['forward › layers[2] (Linear)', 'backward › layers[2] (Linear) backward']
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from tpukit.hlo._cost import op_counts
from tpukit.hlo._executed import executed
from tpukit.hlo._graph_nodes import COMPUTATION, INSTRUCTION, PART, SCOPE
from tpukit.hlo._graph_payload import graph_payload
from tpukit.hlo._graph_view import HloGraph
from tpukit.hlo._model import HloInstruction
from tpukit.hlo._user_scopes import parse_scope, split_scope

ADDED, REMOVED, CHANGED, SAME = "added", "removed", "changed", "same"
#: Ops that do no work of their own: never matched, never added or removed.
_PLUMBING = frozenset(
    "parameter constant get-tuple-element tuple bitcast opt-barrier after-all "
    "add-dependency domain".split()
)
# Ops inside a fusion that say what it is, beyond its root.
_HEAVY = frozenset(
    "dot convolution reduce reduce-window scatter gather sort custom-call all-reduce "
    "all-gather reduce-scatter all-to-all collective-permute".split()
)
_NUMBER = re.compile(r"\.\d+\b")
_DIGITS = re.compile(r"\d+")
_WHOLE = ("flops", "bytes", "instructions")


@dataclass(frozen=True)
class GroupDiff:
    """One group of either program: its place, its status and its cost in ``a`` and ``b``.

    ``path`` is the group's labels from the top (``("forward", "layers[0] (Linear)")``;
    ``()`` is the whole program). Each figure is an ``(a, b)`` pair, ``None`` on the side
    that lacks the group (and for ``time`` on a side that was not profiled). ``ops_added``
    and ``ops_removed`` count the fusions and other working ops inside it that only ``b``
    or only ``a`` has. ``nodes`` are the group's node ids in each side's graph.
    """

    path: tuple[str, ...]
    status: str
    flops: tuple[int | None, int | None]
    bytes: tuple[int | None, int | None]
    instructions: tuple[int | None, int | None]
    time: tuple[float | None, float | None]
    ops_added: int
    ops_removed: int
    nodes: tuple[int | None, int | None]

    @property
    def name(self) -> str:
        """``forward › layers[0] (Linear)``, or ``whole program`` for the top."""
        return " › ".join(self.path) or "whole program"

    def delta(self, metric: str) -> int | float | None:
        """``b - a`` of ``"flops"``, ``"bytes"``, ``"instructions"`` or ``"time"``.

        A side without the group counts as 0; time needs both sides profiled.
        """
        a, b = getattr(self, metric)
        if metric == "time":
            return None if a is None or b is None else b - a
        return (b or 0) - (a or 0)


class ProgramGroups:
    """One program's graph, its groups by key and its working ops by signature."""

    def __init__(self, view: HloGraph) -> None:
        self.graph = view
        data = self.data = view._data
        self.payload = graph_payload(data, view.title, view.stage, view.times)
        n = len(data.kind)
        self.group_of = [0] * n  # each node's nearest group (itself for a group)
        self.groups: dict[tuple[str, ...], int] = {(): 0}
        self.children: dict[tuple[str, ...], list[tuple[str, ...]]] = defaultdict(list)
        self.ops: list[int] = []
        key_of: dict[int, tuple[str, ...]] = {0: ()}
        # the loops, calls and branches around each group (its key without the scopes)
        self.structure: dict[int, tuple[str, ...]] = {0: ()}
        seen: dict[tuple, int] = defaultdict(int)
        inside = [False] * n  # inside a fusion (or another op's own computation)
        for node in range(1, n):
            parent = data.parent[node]
            if inside[parent] or (data.kind[parent] == INSTRUCTION and parent not in key_of):
                inside[node] = True
                continue
            kind, instr = data.kind[node], data.instr[node]
            if kind == PART:
                key_of[node] = key_of[parent]
                self.structure[node] = self.structure[parent]
                self.group_of[node] = self.group_of[parent]
                continue
            if kind in (SCOPE, COMPUTATION) or (
                instr is not None and data.children[node] and instr.opcode != "fusion"
            ):
                label = data.label[node] if kind == SCOPE else _NUMBER.sub("", data.label[node])
                base = key_of[parent]
                seen[(base, label)] += 1
                if seen[(base, label)] > 1:
                    label = f"{label} #{seen[(base, label)]}"
                key_of[node] = (*base, label)
                self.structure[node] = self.structure[parent] + (() if kind == SCOPE else (label,))
                self.groups[key_of[node]] = node
                self.children[base].append(key_of[node])
                self.group_of[node] = node
                continue
            self.group_of[node] = self.group_of[parent]
            if instr is not None and instr.opcode not in _PLUMBING:
                self.ops.append(node)
        self.key_of = key_of

    def whole(self, name: str) -> int:
        """A whole-program figure as ``tpukit.diff`` counts it (`tpukit.hlo._executed`):
        instructions as written (fusions opened), FLOPs and bytes as executed."""
        module = self.data.module
        if name == "instructions":
            return sum(op_counts(module).values())
        run = executed(module)
        return run.dot_flops if name == "flops" else run.bytes

    def figure(self, name: str, node: int | None) -> int | float | None:
        if node is None:
            return None
        values = self.payload.get(name)
        return None if values is None else values[node]

    def signature(self, node: int) -> tuple:
        """What an op is, independent of the number XLA gave it (see the module docstring)."""
        instr = self.data.instr[node]
        module = self.data.module
        direction, names = parse_scope(split_scope(instr.metadata.op_name)[:-1])
        group = self.group_of[node]
        # An op without a scope of its own is told apart by the group it sits in.
        context = self.structure[group] if names else self.key_of[group]
        roots: tuple[str, ...] = ()
        heavy: tuple[str, ...] = ()
        if instr.opcode == "fusion":
            called = module.called(instr)
            if called and called[0].root is not None:
                root = called[0].root
                operands = [called[0].get(o) for o in root.operands]
                roots = (
                    tuple(sorted(o.opcode for o in operands if o is not None))
                    if root.opcode == "tuple"
                    else (root.opcode,)
                )
                heavy = tuple(sorted({i.opcode for c in called for i in c if i.opcode in _HEAVY}))
        return (
            context,
            direction,
            names,
            instr.opcode,
            instr.fusion_kind if instr.opcode == "fusion" else "",
            instr.custom_call_target if instr.opcode == "custom-call" else "",
            roots,
            heavy,
        )


def _pair_ops(a: ProgramGroups, b: ProgramGroups) -> tuple[dict[int, int], list[int], list[int]]:
    """Match the working ops of ``a`` and ``b``: ``({a node: b node}, removed, added)``."""
    buckets: dict[tuple, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for side, index in ((a, 0), (b, 1)):
        for node in side.ops:
            buckets[side.signature(node)][index].append(node)
    pairs: dict[int, int] = {}
    removed, added = [], []
    for left, right in buckets.values():
        free = list(right)
        for name_of in (_exact_name, _unnumbered_name, None):
            for node in list(left):
                if node in pairs:
                    continue
                wanted = name_of(a.data.instr[node]) if name_of else None
                for other in free:
                    if name_of is None or name_of(b.data.instr[other]) == wanted:
                        pairs[node] = other
                        free.remove(other)
                        break
        removed += [node for node in left if node not in pairs]
        added += free
    return pairs, sorted(removed), sorted(added)


def _pair_by_shape(
    a: ProgramGroups,
    b: ProgramGroups,
    pairs: dict[int, int],
    removed: list[int],
    added: list[int],
) -> tuple[list[int], list[int]]:
    """Pair the ops left over when names fail (PyTorch/XLA renumbers its op names per
    stage): same group, opcode, fusion kind and result shape, in data-flow order."""
    buckets: dict[tuple, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for side, nodes, index in ((a, removed, 0), (b, added, 1)):
        for node in nodes:
            buckets[_loose_signature(side, node)][index].append(node)
    for left, right in buckets.values():
        for node, other in zip(left, right):
            pairs[node] = other
    paired = set(pairs.values())
    return [n for n in removed if n not in pairs], [n for n in added if n not in paired]


def _loose_signature(side: ProgramGroups, node: int) -> tuple:
    instr = side.data.instr[node]
    return (
        side.key_of[side.group_of[node]],
        instr.opcode,
        instr.fusion_kind,
        instr.custom_call_target if instr.opcode == "custom-call" else "",
        str(instr.shape),
    )


def _align_renumbered(a: ProgramGroups, b: ProgramGroups) -> None:
    """Give ``a``'s groups ``b``'s keys where their labels differ only in numbers.

    A group of ``a`` whose key ``b`` lacks takes, in order, the first unclaimed key of
    ``b`` under the same parent whose label reads the same with its numbers taken out
    (``aten__addmm.171`` and ``aten__addmm.98``); the others keep theirs.
    """
    rename: dict[tuple[str, ...], tuple[str, ...]] = {(): ()}
    children: dict[tuple[str, ...], list[tuple[str, ...]]] = defaultdict(list)
    stack: list[tuple[str, ...]] = [()]
    while stack:
        key_a = stack.pop()
        key_b = rename[key_a]
        kids_b = list(b.children.get(key_b, ()))
        kids_a = a.children.get(key_a, ())
        direct = {(*key_b, kid[-1]) for kid in kids_a}
        spare = [k for k in kids_b if k not in direct]
        for kid in kids_a:
            new = (*key_b, kid[-1])
            if new not in kids_b:
                digits = _DIGITS.sub("#", kid[-1])
                found = next((k for k in spare if _DIGITS.sub("#", k[-1]) == digits), None)
                if found is not None:
                    spare.remove(found)
                    new = found
            rename[kid] = new
            children[key_b].append(new)
            stack.append(kid)
    a.groups = {rename.get(k, k): v for k, v in a.groups.items()}
    a.children = children
    a.key_of = {n: rename.get(k, k) for n, k in a.key_of.items()}


def _exact_name(instr: HloInstruction) -> str:
    return instr.name


def _unnumbered_name(instr: HloInstruction) -> str:
    return _NUMBER.sub("", instr.name)


def _merged_keys(a: ProgramGroups, b: ProgramGroups) -> list[tuple[str, ...]]:
    """Every group key of both sides, depth first; ``b``'s order, ``a``'s only ones beside theirs."""
    order: list[tuple[str, ...]] = []
    stack: list[tuple[str, ...]] = [()]
    while stack:
        key = stack.pop()
        order.append(key)
        kids = list(b.children.get(key, ()))
        previous = None
        for kid in a.children.get(key, ()):
            if kid not in kids:
                at = kids.index(previous) + 1 if previous in kids else 0
                kids.insert(at, kid)
            previous = kid
        stack.extend(reversed(kids))
    return order


def _count_up(side: ProgramGroups, nodes: list[int]) -> dict[int, int]:
    """How many of ``nodes`` each group holds, at any depth."""
    counts: dict[int, int] = defaultdict(int)
    parent = side.data.parent
    for node in nodes:
        group = side.group_of[node]
        while group >= 0:
            if side.group_of[group] == group:
                counts[group] += 1
            group = parent[group]
    return counts


@dataclass
class ProgramMatch:
    """Both programs' groups and ops, and how they correspond (see `match_programs`).

    ``sides`` are the two programs' `ProgramGroups`; ``groups`` a `GroupDiff` per group
    of either, depth first; ``pairs`` maps each matched op's node in ``a`` to its node
    in ``b``; ``removed`` and ``added`` are the nodes of the ops only ``a`` or ``b`` has.
    """

    sides: tuple[ProgramGroups, ProgramGroups]
    groups: list[GroupDiff]
    pairs: dict[int, int]
    removed: list[int]
    added: list[int]


def match_programs(a: HloGraph, b: HloGraph) -> ProgramMatch:
    """Match the groups and working ops of two programs' graphs (module docstring)."""
    side_a, side_b = ProgramGroups(a), ProgramGroups(b)
    _align_renumbered(side_a, side_b)
    pairs, removed, added = _pair_ops(side_a, side_b)
    removed, added = _pair_by_shape(side_a, side_b, pairs, removed, added)
    lost, new = _count_up(side_a, removed), _count_up(side_b, added)
    groups: list[GroupDiff] = []
    for key in _merged_keys(side_a, side_b):
        na, nb = side_a.groups.get(key), side_b.groups.get(key)
        figures = {
            name: (side_a.figure(field, na), side_b.figure(field, nb))
            for name, field in (
                ("flops", "flops"),
                ("bytes", "bytes"),
                ("instructions", "count"),
                ("time", "time"),
            )
        }
        if key == ():  # the whole program: the text diff's figures, by the same rules
            figures.update({name: (side_a.whole(name), side_b.whole(name)) for name in _WHOLE})
        ops_added = new.get(nb, 0) if nb is not None else 0
        ops_removed = lost.get(na, 0) if na is not None else 0
        if na is None:
            status = ADDED
        elif nb is None:
            status = REMOVED
        elif (
            ops_added
            or ops_removed
            or any(figures[m][0] != figures[m][1] for m in ("flops", "bytes", "instructions"))
        ):
            status = CHANGED
        else:
            status = SAME
        groups.append(
            GroupDiff(
                key,
                status,
                ops_added=ops_added,
                ops_removed=ops_removed,
                nodes=(na, nb),
                **figures,
            )
        )
    return ProgramMatch((side_a, side_b), groups, pairs, removed, added)
