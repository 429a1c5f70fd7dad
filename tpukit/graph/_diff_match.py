"""How two HLO programs correspond: their groups matched by place, their ops by what they are.

`match_programs` is the comparison behind `_diff_view.diff_graph`. Each program is read
as the tree of groups its graph shows (`_graph_data`, node kinds from `_graph_nodes`): a group's key is the path of its
labels from the top (``("forward", "layers[0] (Linear)")``), looking through the
consecutive parts of big groups, with XLA's numbers and ``.clone`` suffixes taken out of
loop, call and conditional names, a loop's or conditional's computations named by their
role (``body``, ``condition``, ``branch``), and ``#2`` added to a scope that appears twice
in one place. Equal keys match; a key on one side only is an added or removed group.

A working op (a fusion, a dot, a custom call, a collective; not plumbing such as
parameters or tuples) is matched by its signature: the scope of its ``op_name``, its
opcode and fusion kind, the ops at its fused root and the heavy ops inside. XLA numbers
fusions as it makes them, so names are only a tie-break among equal signatures (the same
name first, then the same name without its number, then program order). What is left
pairs by what it does (`_pair_by_shape`): the work inside, dimensions, operands already
paired, and place; never by shape alone.

    >>> from tpukit.hlo import graph
    >>> def layers(depth):  # a program of ``depth`` layers, each under its own name scope
    ...     def f(x):
    ...         for k in range(depth):
    ...             with jax.named_scope(f"layers[{k}]"):
    ...                 x = jnp.tanh(x @ x)
    ...         return x.sum()
    ...     return jax.jit(f).lower(jnp.ones((8, 8))).compile().as_text()
    >>> match = match_programs(graph(layers(2)), graph(layers(3)))
    >>> [g.name for g in match.groups if g.status == "added"]
    ['layers[2]']
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from tpukit.graph._diff_fused import find_fused
from tpukit.graph._diff_groups import NUMBER, PLUMBING, ProgramGroups
from tpukit.graph._diff_parts import Wires, compiled_from, find_parts, fused_body
from tpukit.graph._diff_places import Places, places_agree
from tpukit.graph._graph_view import HloGraph
from tpukit.hlo.text import HloComputation, HloInstruction, HloModule

ADDED, REMOVED, CHANGED, SAME = "added", "removed", "changed", "same"
# A call of ``a`` that ``b`` lacks, whose ops are all in ``b`` (paired, split into parts or
# fused): XLA inlined it, nothing of it was removed.
INLINED = "inlined"
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
    """Pair the ops left over when names and scopes fail (PyTorch/XLA renumbers its op
    names per stage; XLA drops the ``op_name`` of a fusion it rebuilt) by what they are.

    Each op of ``a``, in program order, takes the free op of ``b`` with the same opcode
    (or the fusion that holds its opcode: stages before and after fusion) that scores
    best (`_likeness`): the same work inside (a fusion's ops other than
    conversions and plumbing), the same dimensions and element type, operands made by
    ops already paired with each other, the same group and a near place in the program.
    A shape alone never pairs two ops: bf16's input convert is f32[512,1024] like f32's
    ReLU, and does other work.
    """
    if not removed or not added:
        return removed, added
    facts_a, facts_b = _OpFacts(a), _OpFacts(b)
    free: dict[tuple[str, str], list[int]] = defaultdict(list)
    for node in added:
        free[facts_b.kind(node)].append(node)
        if facts_b.kind(node)[0] in _STANDS_FOR_OPS:  # a fusion can stand for one op it
            for op in facts_b.work(node):  # fused, a custom-call for the op it names
                free[(op, "")].append(node)
    # XLA rewrites some ops into others (select-and-scatter into a scatter fusion): an op
    # may also pair with one that kept the JAX primitive it came from in its op_name.
    by_source: dict[str, list[int]] = defaultdict(list)
    for node in added:
        if b.data.instr[node].metadata.op_name:
            by_source[_source_op(b.data.instr[node])].append(node)
    taken: set[int] = set()

    def best_of(node: int) -> tuple[int | None, float]:
        kind = facts_a.kind(node)
        options = list(free.get(kind, []))
        if a.data.instr[node].metadata.op_name:
            options += by_source.get(_source_op(a.data.instr[node]), [])
        if kind[0] in _STANDS_FOR_OPS:  # an op of the other stage this fusion fused
            for op in facts_a.work(node):
                options += free.get((op, ""), [])
        best, score = None, _LEAST_LIKENESS
        for other in options:
            if other in taken:
                continue
            value = _likeness(facts_a, node, facts_b, other, pairs)
            if value > score:
                best, score = other, value
        return best, score

    # First the ops that are each other's best: an op of ``b`` goes to the op of ``a`` it
    # is most like, not to the first in program order that would take it (a lowered
    # reduce_max must not take the reduce_sum fusion that the reduce_sum after it is).
    wanted: dict[int, tuple[float, int]] = {}
    for node in removed:
        best, score = best_of(node)
        if best is not None and (best not in wanted or score > wanted[best][0]):
            wanted[best] = (score, node)
    for other, (_, node) in wanted.items():
        pairs[node] = other
        taken.add(other)
    # Then the rest in program order, with the operands those pairs made alike.
    left = []
    for node in removed:
        if node in pairs:
            continue
        best, _ = best_of(node)
        if best is None:
            left.append(node)
            continue
        pairs[node] = best
        taken.add(best)
    return left, [n for n in added if n not in taken]


# Ops that can stand for an op of the other stage: a fusion for those it holds, a
# custom-call for the op its target names (XLA's ``TopK`` for ``topk``).
_STANDS_FOR_OPS = frozenset({"fusion", "custom-call"})
_NOT_NAME = re.compile(r"[^a-z0-9]")
# An op pairs with a leftover of the other side only if it scores more than this.
_LEAST_LIKENESS = 2.5
# Ops inside a fusion that say nothing of its work (they convert, move or name values).
_NO_WORK = PLUMBING | frozenset(
    "convert broadcast reshape copy transpose slice concatenate iota".split()
)


class _OpFacts:
    """What one side's ops are, for `_likeness`: their work, operands and place."""

    def __init__(self, side: ProgramGroups) -> None:
        self.side = side
        self.place = {node: k / max(1, len(side.ops) - 1) for k, node in enumerate(side.ops)}
        self.wires = Wires(side)  # ``wires.inputs(node)``: the ops making its operands
        self._work: dict[int, frozenset[str]] = {}

    def kind(self, node: int) -> tuple[str, str]:
        instr = self.side.data.instr[node]
        target = instr.custom_call_target if instr.opcode == "custom-call" else ""
        return _as_work(instr.opcode), target

    def work(self, node: int) -> frozenset[str]:
        """The opcodes that do its work (`_as_work`): its own, those a fusion holds,
        nested fusions opened (conversions and moves left out, unless that is all it
        does: then its root's), or for a custom-call its target as an opcode (``TopK``:
        ``topk``)."""
        found = self._work.get(node)
        if found is None:
            instr = self.side.data.instr[node]
            found = frozenset({_as_work(instr.opcode)})
            if instr.opcode == "custom-call" and instr.custom_call_target:
                found = frozenset({_NOT_NAME.sub("", instr.custom_call_target.lower())})
            if instr.opcode == "fusion":  # what it holds, else how it moves data, else
                called = self.side.data.module.called(instr)  # what its root does
                held = _held(self.side.data.module, called)
                found = frozenset(held - _NO_WORK) or frozenset(held - PLUMBING - {"copy"})
                if not found and called and called[0].root is not None:
                    found = frozenset({called[0].root.opcode})
            self._work[node] = found
        return found


def _untiled(instr: HloInstruction) -> tuple:
    """Its element types, dimensions and dimension order, without the tiling and memory
    space a device adds (``f32[8,64]{1,0:T(8,128)S(1)}`` on TPU is ``f32[8,64]{1,0}``; a
    scalar's ``{:T(128)}`` is no layout): those say nothing of what an op is."""
    return tuple(
        (leaf.dtype, leaf.dims, (leaf.layout or "").split(":")[0]) for leaf in instr.shape.leaves()
    )


def _as_work(opcode: str) -> str:
    """An opcode as the work it does: an async ``X-start`` does X (XLA:TPU splits a
    lowered ``slice`` into ``slice-start`` and ``slice-done``), and a ``dot`` is a
    contraction like a ``convolution`` (XLA:TPU emits every dot as one)."""
    opcode = opcode.removesuffix("-start")
    return "convolution" if opcode == "dot" else opcode


def _held(module: HloModule, called: list[HloComputation]) -> set[str]:
    """The work opcodes (`_as_work`) inside a fusion's computations, nested fusions
    opened (XLA:TPU wraps each operand of a dot in a ``bitcast_fusion`` inside its fusion)."""
    return {_as_work(i.opcode) for i in fused_body(module, called) if i.opcode != "fusion"}


def _likeness(fa: _OpFacts, node: int, fb: _OpFacts, other: int, pairs: dict[int, int]) -> float:
    """How alike op ``node`` of ``a`` and op ``other`` of ``b`` are (see `_pair_by_shape`)."""
    ka = fa.side.key_of[fa.side.group_of[node]]
    kb = fb.side.key_of[fb.side.group_of[other]]
    ia, ib = fa.side.data.instr[node], fb.side.data.instr[other]
    staged = (ia.opcode == "fusion") != (ib.opcode == "fusion")  # an op, the fusion holding it
    if not staged and ka not in fb.side.groups and kb not in fa.side.groups:
        return -1.0  # a layer only a has and one only b has: different layers
    wa, wb = fa.work(node), fb.work(other)
    if wa == wb:
        score = 3.0 if wa else 1.0
    elif staged and (wa <= wb or wb <= wa):
        score = 1.5
    else:
        score = -3.0
    score += 1.5 * (ia.shape.dims == ib.shape.dims) + (_untiled(ia) == _untiled(ib))
    mine = {pairs.get(k) for k in fa.wires.inputs(node)} - {None}
    score += 1.5 * len(mine & fb.wires.inputs(other))
    score += ka == kb
    score += 3.0 * (_source_op(ia) == _source_op(ib))
    return score - 2 * abs(fa.place.get(node, 0.0) - fb.place.get(other, 0.0))


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


def _source_op(instr: HloInstruction) -> str:
    """The primitive an op came from: the last part of its ``op_name`` (JAX's
    ``jit(f)/reduce_sum``), or without one its name less XLA's number (a lowered module
    printed without metadata names its ops by primitive: ``reduce_sum.7``)."""
    name = instr.metadata.op_name
    return name.rsplit("/", 1)[-1] if name else NUMBER.sub("", instr.name)


def _exact_name(instr: HloInstruction) -> str:
    return instr.name


def _unnumbered_name(instr: HloInstruction) -> str:
    return NUMBER.sub("", instr.name)


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


def _is_call(side: ProgramGroups, node: int) -> bool:
    instr = side.data.instr[node]
    return instr is not None and instr.opcode == "call"


@dataclass
class ProgramMatch:
    """Both programs' groups and ops, and how they correspond (see `match_programs`).

    ``sides`` are the two programs' `ProgramGroups`; ``groups`` a `GroupDiff` per group
    of either, depth first; ``pairs`` maps each matched op's node in ``a`` to its node
    in ``b``; ``parts`` maps each op of ``b`` that is a part of an op XLA expanded
    (`_diff_parts`) to that op's node in ``a`` (several when the evidence names several);
    ``fused`` maps each op of ``a`` that XLA fused into an op of ``b`` (`_diff_fused`) to
    that op's node in ``b`` (several: one of them, or each of them for the ops in
    ``copied``, which XLA copied into each); ``removed`` and ``added`` are the nodes of the
    ops only ``a`` or ``b`` has. ``places_unread`` is true when ``b`` is what XLA compiled
    of ``a`` but none of its source places is one of ``a``'s (`_diff_places.places_agree`:
    a persistent-cache hit keeps an earlier compile's places), or ``b`` is known to come
    from that cache (``match_programs(from_cache=True)``): parts and fused ops were then
    found by ``op_name`` and data flow alone, and the view says so.
    """

    sides: tuple[ProgramGroups, ProgramGroups]
    groups: list[GroupDiff]
    pairs: dict[int, int]
    removed: list[int]
    added: list[int]
    parts: dict[int, tuple[int, ...]]
    fused: dict[int, tuple[int, ...]] = field(default_factory=dict)
    copied: frozenset[int] = frozenset()
    places_unread: bool = False


def match_programs(a: HloGraph, b: HloGraph, *, from_cache: bool = False) -> ProgramMatch:
    """Match the groups and working ops of two programs' graphs (module docstring).

    ``from_cache``: ``b``'s executable came from JAX's persistent compile cache (the
    ledger knows: ``tpukit.Compiled.from_cache``), so its source places may be an earlier
    compile's even where some still agree with ``a``'s (only a helper's lines moved):
    they are not read, as when `_diff_places.places_agree` finds none shared."""
    side_a, side_b = ProgramGroups(a), ProgramGroups(b)
    _align_renumbered(side_a, side_b)
    pairs, removed, added = _pair_ops(side_a, side_b)
    removed, added = _pair_by_shape(side_a, side_b, pairs, removed, added)
    places = Places(side_a), Places(side_b)  # each place read once, for both finds
    unread = compiled_from(side_a, side_b) and (from_cache or not places_agree(*places))
    if unread:
        places = Places(side_a, read=False), Places(side_b, read=False)
    parts, removed, added = find_parts(side_a, side_b, pairs, removed, added, places=places)
    fused, copied, removed = find_fused(side_a, side_b, pairs, parts, removed, places=places)
    lost, new = _count_up(side_a, removed), _count_up(side_b, added)
    split = {x for wholes in parts.values() for x in wholes}
    kept = _count_up(side_a, [*pairs, *fused, *(x for x in split if x in side_a.ops)])
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
            if not ops_removed and (na in split or kept.get(na)) and _is_call(side_a, na):
                status = INLINED
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
    return ProgramMatch(
        (side_a, side_b), groups, pairs, removed, added, parts, fused, copied, unread
    )
