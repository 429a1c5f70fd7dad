"""Ops XLA made several of: an optimized op that is a *part of* a lowered op.

`_diff_match` pairs ops one to one. XLA:TPU expands some lowered ops into several: an
``fft`` into DFT matmuls with iota, sine and cosine fusions, a ``gather`` into the gather
and a fusion preparing its indices, a ``slice`` into ``slice-start`` and ``slice-done``.
Only one of them (or none) can be the op's pair; the others would be shown as added. They
keep the op's ``op_name``, and that is the evidence used here, never shape or place.

Only when ``b`` is what XLA compiled of ``a`` (`compiled_from`): between two programs a
shared ``op_name`` need not mean one op. The rule (`find_parts`): an optimized op left unpaired is a part of the lowered op whose
full ``op_name`` equals its own, or of the lowered ``call`` its ``op_name`` equals or lies
under (XLA inlines a call and names what it made of it by the call's ``op_name``). A full
``op_name`` is the op's own with those of the calls around it put in front: inside a
called computation JAX names ops from the call (``fft``); once inlined, XLA names them in
full (``jit(f)/jit(fft)/fft``). The deepest such ``op_name`` is taken. When several
lowered ops or calls carry it (three ``jnp.fft`` calls are all ``jit(f)/jit(fft)``), the
ops' source places decide: a place is the whole call stack of the op's stack frame with
lines and columns (`_diff_places.Places`: two modules number their frames apart), an
op inside a call having the call's. If the places leave more than one (or say nothing),
the op is a part of all of them, shown so ("part of one of ..."): never one picked at
random. An op without an ``op_name`` is never a part. When no optimized place is a lowered
one (`_diff_places.places_agree`: JAX's persistent cache served an earlier compile, whose
metadata keeps that compile's places), places are not compared at all, and the view says so.

A lowered op that has parts, and every op inside a lowered call that has parts, is no
longer *removed*: its work is in the parts.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from tpukit.graph._diff_groups import PLUMBING
from tpukit.graph._diff_places import Places
from tpukit.graph._graph_nodes import INSTRUCTION
from tpukit.hlo.analysis import split_scope

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tpukit.graph._diff_groups import ProgramGroups
    from tpukit.hlo.text import HloComputation, HloInstruction, HloModule


def find_parts(
    a: ProgramGroups,
    b: ProgramGroups,
    pairs: dict[int, int],
    removed: list[int],
    added: list[int],
    *,
    places: tuple[Places, Places] | None = None,
) -> tuple[dict[int, tuple[int, ...]], list[int], list[int]]:
    """``({b node: (a nodes it is a part of)}, removed, added)``: the parts of lowered ops
    among ``added`` (see the module docstring), and ``removed`` and ``added`` without the
    lowered ops that have parts (or lie in a call that has) and without the parts.
    ``places``: both sides' place tables (built here when not given); tables that do not
    read places (`_diff_places.places_agree` said no): source places are not compared."""
    if not compiled_from(a, b):
        return {}, removed, added
    places_a, places_b = places or (Places(a), Places(b))
    wholes: dict[str, list[int]] = defaultdict(list)  # full op_name -> lowered ops, calls
    calls: set[str] = set()
    ops = set(a.ops)
    for node in range(len(a.data.kind)):
        instr = a.data.instr[node]
        if instr is None or a.data.kind[node] != INSTRUCTION:
            continue
        is_call = instr.opcode == "call" and bool(a.data.children[node])
        if is_call or node in ops:
            name = full_name(a, node)
            if name:
                wholes[name].append(node)
                if is_call:
                    calls.add(name)
    parts: dict[int, tuple[int, ...]] = {}
    flow = _Flow(b)
    for node in added:
        name = full_name(b, node)
        if not name:
            continue
        found = _deepest(name, wholes, calls)
        if not found:
            continue
        place = places_b.of(node)
        found = [whole for whole in found if place and places_a.of(whole) == place] or found
        if len(found) > 1:  # the one whose pair feeds this op or takes what it makes
            near = flow.near(node)
            found = [whole for whole in found if pairs.get(whole) in near] or found
        parts[node] = tuple(found)
    if not parts:
        return parts, removed, added
    split = {whole for held in parts.values() for whole in held}
    left = [node for node in removed if not _inside(a, node, split)]
    return parts, left, [node for node in added if node not in parts]


def compiled_from(a: ProgramGroups, b: ProgramGroups) -> bool:
    """Whether ``b`` is what XLA compiled of ``a``: their stages say lowered and optimized,
    or, stages unknown, ``a`` is unscheduled and ``b`` scheduled, both of one name. Only
    then does a shared op_name mean one op: two programs (2 and 3 layers) share op_names
    between ops of their own (each ``relu`` of a Python loop is ``jit(f)/relu``)."""
    stages = (a.graph.stage, b.graph.stage)
    if all(stages):
        return stages == ("lowered", "optimized")
    ma, mb = a.data.module, b.data.module
    scheduled = [m.attributes.get("is_scheduled") == "true" for m in (ma, mb)]
    return scheduled == [False, True] and ma.name == mb.name


def _deepest(name: str, wholes: dict[str, list[int]], calls: set[str]) -> list[int]:
    """The lowered ops whose full op_name is ``name``, else the calls it lies deepest under."""
    if name in wholes:
        return wholes[name]
    pieces = split_scope(name)
    for depth in range(len(pieces) - 1, 0, -1):
        scope = "/".join(pieces[:depth])
        if scope in calls:
            return wholes[scope]
    return []


def full_name(side: ProgramGroups, node: int, name: str | None = None) -> str:
    """The op's ``op_name`` (or ``name``, of an instruction inside the op's fusion) with
    those of the calls around the op in front (module docstring); a name already written
    in full (older JAX) is kept as it is."""
    data = side.data
    name = data.instr[node].metadata.op_name if name is None else name
    if not name:
        return ""
    parent = data.parent[node]
    while parent > 0:
        caller = data.instr[parent]
        if caller is not None and caller.opcode == "call" and caller.metadata.op_name:
            scope = caller.metadata.op_name
            if name != scope and not name.startswith(scope + "/"):
                name = f"{scope}/{name}"
        parent = data.parent[parent]
    return name


def fused_body(module: HloModule, called: Iterable[HloComputation]) -> list[HloInstruction]:
    """Every instruction of a fusion's computations ``called``, those of the fusions nested
    in them opened too (XLA:TPU wraps each operand of a dot in a ``bitcast_fusion`` inside
    its fusion), each computation read once: what the fusion holds."""
    found: list[HloInstruction] = []
    stack, seen = list(called), set()
    while stack:
        computation = stack.pop()
        if id(computation) in seen:
            continue
        seen.add(id(computation))
        for instr in computation:
            found.append(instr)
            if instr.opcode == "fusion":
                stack.extend(module.called(instr))
    return found


class Users:
    """Who reads each instruction, per computation: ``users(computation)`` is
    ``{instruction name: names of the instructions whose operand it is}``, built the
    first time that computation is asked for."""

    def __init__(self) -> None:
        self._of: dict[str, dict[str, list[str]]] = {}

    def __call__(self, computation: HloComputation) -> dict[str, list[str]]:
        users = self._of.get(computation.name)
        if users is None:
            users = self._of[computation.name] = defaultdict(list)
            for other in computation:
                for operand in other.operands:
                    users[operand].append(other.name)
        return users


class Wires:
    """Which instructions of one side feed an instruction and take its result, looking
    through plumbing (`_diff_groups.PLUMBING`: tuples, bitcasts; a parameter is an
    input): every instruction, calls included, by node. Each node's two walks are made
    once (`_diff_match` asks an op's inputs for every op it might pair with).

    ``inputs(node)`` and ``users(node)`` are frozensets of nodes; ``near`` is both.
    """

    def __init__(self, side: ProgramGroups) -> None:
        self.side = side
        self.node_of: dict[tuple[str, str], int] = {}
        for node, instr in enumerate(side.data.instr):
            if instr is not None and instr.computation:
                self.node_of[(instr.computation, instr.name)] = node
        self._users = Users()
        self._inputs_of: dict[int, frozenset[int]] = {}
        self._users_of: dict[int, frozenset[int]] = {}

    def inputs(self, node: int) -> frozenset[int]:
        found = self._inputs_of.get(node)
        if found is None:
            found = self._inputs_of[node] = self._walk(
                node, lambda comp, name: comp.get(name).operands
            )
        return found

    def users(self, node: int) -> frozenset[int]:
        found = self._users_of.get(node)
        if found is None:
            found = self._users_of[node] = self._walk(
                node, lambda comp, name: self._users(comp).get(name, [])
            )
        return found

    def near(self, node: int) -> frozenset[int]:
        return self.inputs(node) | self.users(node)

    def _walk(self, node: int, step) -> frozenset[int]:
        instr = self.side.data.instr[node]
        comp = self.side.data.module.computations.get(instr.computation)
        if comp is None:
            return frozenset()
        found: set[int] = set()
        stack, seen = list(step(comp, instr.name)), {instr.name}
        while stack:
            name = stack.pop()
            other = comp.get(name)
            if name in seen or other is None:
                continue
            seen.add(name)
            if other.opcode in PLUMBING and other.opcode != "parameter":
                stack.extend(step(comp, name))
            elif (comp.name, name) in self.node_of:
                found.add(self.node_of[(comp.name, name)])
        return frozenset(found)


# Ops a value passes through unchanged, between an op and the ops it feeds.
_THROUGH = frozenset({"bitcast", "get-tuple-element", "tuple", "opt-barrier"})


class _Flow:
    """Which working ops of one side feed an op or take its result, looking through
    plumbing (bitcasts, tuples): each computation's users read once, when first asked."""

    def __init__(self, side: ProgramGroups) -> None:
        self.side = side
        self.node_of: dict[tuple[str, str], int] = {}
        for node in side.ops:
            instr = side.data.instr[node]
            self.node_of[(instr.computation, instr.name)] = node
        self.users = Users()

    def near(self, node: int) -> set[int]:
        instr = self.side.data.instr[node]
        comp = self.side.data.module.computations.get(instr.computation)
        if comp is None:
            return set()
        users = self.users(comp)
        found: set[int] = set()
        for step in (lambda name: comp.get(name).operands, users.__getitem__):
            stack, seen = list(step(instr.name)), {instr.name}
            while stack:
                name = stack.pop()
                if name in seen or comp.get(name) is None:
                    continue
                seen.add(name)
                if (comp.name, name) in self.node_of:
                    found.add(self.node_of[(comp.name, name)])
                elif comp.get(name).opcode in _THROUGH:
                    stack.extend(step(name))
        return found


def _inside(side: ProgramGroups, node: int, split: set[int]) -> bool:
    """Whether ``node`` is one of ``split`` or lies inside one of them (a call)."""
    while node >= 0:
        if node in split:
            return True
        node = side.data.parent[node]
    return False
