"""Lowered ops XLA fused into an optimized op: *fused into* ``fusion.N``, not removed.

`_diff_parts` finds the many optimized ops XLA made of one lowered op; this is the other
way: many lowered ops (an ``abs``, the ``broadcast`` of a constant, a ``multiply``) that
XLA fused into one optimized fusion. Only one of them (or none) can be the fusion's pair;
the others would be shown as removed although their work is in the fusion. The evidence
is the fusion's body: XLA keeps each fused instruction's ``op_name`` and source place, so
the lowered op whose full ``op_name`` (`_diff_parts.full_name`) and place a fused
instruction carries was fused into that fusion (or, for an op's own metadata, merged
into that op: XLA sorts two arrays of one ``jnp.sort`` and one ``jnp.argsort`` in one
``sort``). Never shape or place in the program.

Only when ``b`` is what XLA compiled of ``a`` (`_diff_parts.compiled_from`). The rules
(`find_fused`), for each lowered op left removed:

- its full ``op_name`` and its source place (when both modules say one) are those of an
  instruction inside an optimized fusion (nested fusions opened), or of an optimized op
  (or an element of its tuple): it was fused into that op. Several fusions carry them: the ones its data flows with are kept (the fusion
  is the pair of an op it feeds or reads, or a part or fusion of one, or is next to
  one). Several still: fused into each of them when no other lowered op carries that
  ``op_name`` and place (XLA copied it into each: it fuses a cheap op into every
  consumer), else into *one of* them, said so, never one picked;
- no optimized instruction carries its ``op_name``, or it has none (XLA rewrote it
  away: the ``real`` of an ``fft`` XLA expanded into real arithmetic, a ``reduce_max``
  made a ``reduce-window``; JAX names no scalar's ``broadcast``): taken with the other
  such ops it feeds or reads (a chain), it was fused into the optimized op that stands
  for an op the chain feeds, when that op also stands for, or reads what stands for, an
  op the chain reads (nothing else can hold its work). A chain that reads only
  constants (an ``iota``, a scalar's ``broadcast``) was fused into each op that stands
  for one it feeds (XLA makes such a value in each consumer). A chain whose data flow
  says nothing stays removed.

When no optimized place is a lowered one (`_diff_places.places_agree`: a persistent-cache
hit keeps an earlier compile's places), places are not compared: ``op_name`` and data
flow decide, and `ProgramMatch.places_unread` says so.

An op "stands for" a lowered op when it is its pair, one of its parts, an op it was
fused into, for a call what stands for its result, and for a parameter of the entry
computation the parameter of that number.

    >>> from tpukit.graph._diff_view import diff_graph
    >>> lowered = jax.jit(lambda x: jnp.abs(x) * 2 + 1).lower(jnp.ones(8))
    >>> view = diff_graph(lowered.as_text(dialect="hlo", debug_info=True),
    ...                   lowered.compile().as_text(), labels=("lowered", "optimized"))
    >>> view.matched_ops, view.ops_removed  # XLA fused all five into one fusion
    ({'add.1': 'broadcast_add_fusion'}, [])
    >>> sorted(view.fused_ops)  # the constants' broadcasts, abs and mul are in it
    ['abs.1', 'broadcast.2', 'broadcast.3', 'mul.1']
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from tpukit.graph._diff_groups import PLUMBING
from tpukit.graph._diff_parts import Wires, compiled_from, full_name, fused_body
from tpukit.graph._diff_places import Places

if TYPE_CHECKING:
    from tpukit.graph._diff_groups import ProgramGroups


def find_fused(
    a: ProgramGroups,
    b: ProgramGroups,
    pairs: dict[int, int],
    parts: dict[int, tuple[int, ...]],
    removed: list[int],
    *,
    places: tuple[Places, Places] | None = None,
) -> tuple[dict[int, tuple[int, ...]], frozenset[int], list[int]]:
    """``({a node: (b ops it was fused into)}, a nodes copied into each, removed left)``:
    the module docstring's rules, for the lowered ops in ``removed``. ``places``: both
    sides' place tables (built here when not given); tables that do not read places
    (`_diff_places.places_agree` said no): by ``op_name`` and data flow, places unread."""
    if not removed or not compiled_from(a, b):
        return {}, frozenset(), removed
    places_a, places_b = places or (Places(a), Places(b))
    place = places_a.of
    flow_a, flow_b = Wires(a), Wires(b)
    held = _held_names(b, flow_b, places_b)
    stands: dict[int, set[int]] = defaultdict(set)  # a node -> the b nodes that stand for it
    for x, y in pairs.items():
        stands[x].add(y)
    for y, wholes in parts.items():
        for x in wholes:
            stands[x].add(y)
    for x, y in _entry_parameters(a, b):
        stands[x].add(y)
    evidence: dict[tuple[str, tuple], int] = defaultdict(int)  # (name, place) -> lowered ops
    for node in a.ops:
        evidence[(full_name(a, node), place(node))] += 1
    found: dict[int, list[int]] = {}
    unnamed: list[int] = []
    for node in removed:
        name = full_name(a, node)
        if not name:
            unnamed.append(node)
            continue
        here = place(node)
        holders = [op for op, where in held.get(name, ()) if not here or not where or where == here]
        if holders:
            found[node] = list(dict.fromkeys(holders))
            if len(found[node]) == 1:
                stands[node].update(found[node])
        elif name not in held:
            unnamed.append(node)
    copied: set[int] = set()
    for _ in range(4):  # each op the flow settles can settle its neighbours
        settled = False
        for node, holders in found.items():
            if len(holders) == 1:
                continue
            near = {y for x in flow_a.near(node) for y in stands.get(x, ())}
            kept = [op for op in holders if op in near]
            alone = evidence[(full_name(a, node), place(node))] == 1
            if len(kept) > 1 or (alone and not kept):
                copied.add(node)  # it feeds or reads each, or no other op carries its name
            kept = kept or [op for op in holders if flow_b.near(op) & near] or holders
            if len(kept) < len(holders):
                found[node], settled = kept, True
                if len(kept) == 1:
                    stands[node].update(kept)
        if not settled:
            break
    fused = {node: tuple(holders) for node, holders in found.items()}
    for node, holders in found.items():  # each may hold it (for the chains below)
        stands[node].update(holders)
    for x, y in _call_results(a, flow_a):  # a call stands for what its result's op does
        stands[x].update(stands.get(y, ()))
    for chain in _chains(unnamed, flow_a):  # the names gone: by what stands around them
        inputs = {x for node in chain for x in flow_a.inputs(node)} - chain
        before = {y for x in inputs for y in stands.get(x, ())}
        after = {y for node in chain for x in flow_a.users(node) - chain for y in stands.get(x, ())}
        ops = sorted(op for op in after if not inputs or op in before or flow_b.inputs(op) & before)
        for node in sorted(chain) if ops else ():
            fused[node] = tuple(ops)
            stands[node].update(ops)
            if not inputs and len(ops) > 1:
                copied.add(node)  # made of constants only: XLA makes it in each user
    copied &= {node for node, holders in fused.items() if len(holders) > 1}
    return fused, frozenset(copied), [node for node in removed if node not in fused]


def _chains(nodes: list[int], flow: Wires) -> list[set[int]]:
    """``nodes`` in groups that feed each other (an ``iota``, its ``reshape`` and the
    ``broadcast`` of that): a group's work went wherever what stands around it went."""
    left, chains = set(nodes), []
    while left:
        stack, chain = [min(left)], set()
        while stack:
            node = stack.pop()
            if node in chain:
                continue
            chain.add(node)
            stack.extend(flow.near(node) & left - chain)
        left -= chain
        chains.append(chain)
    return chains


def _call_results(side: ProgramGroups, flow: Wires) -> list[tuple[int, int]]:
    """``(call node, node of its computation's root)`` for each call of one side."""
    found = []
    module = side.data.module
    for node, instr in enumerate(side.data.instr):
        if instr is None or instr.opcode != "call":
            continue
        for computation in module.called(instr)[:1]:
            root = computation.root
            if root is not None and (computation.name, root.name) in flow.node_of:
                found.append((node, flow.node_of[(computation.name, root.name)]))
    return found


def _entry_parameters(a: ProgramGroups, b: ProgramGroups) -> list[tuple[int, int]]:
    """The two entry computations' parameters, ``(a node, b node)`` by number: XLA keeps
    the entry's parameters (a step's weights and optimizer state are read from them)."""
    found: list[dict[int, int]] = [{}, {}]
    for index, side in enumerate((a, b)):
        entry = side.data.module.entry
        for node, instr in enumerate(side.data.instr):
            if instr is not None and instr.opcode == "parameter" and entry is not None:
                if instr.computation == entry.name and instr.parameter_number is not None:
                    found[index][instr.parameter_number] = node
    return [(x, found[1][k]) for k, x in found[0].items() if k in found[1]]


def _held_names(
    b: ProgramGroups, flow: Wires, places: Places
) -> dict[str, list[tuple[int, tuple]]]:
    """``{full op_name: [(b op, source place)]}``: each optimized op's own metadata, that
    of every instruction inside a fusion (nested fusions opened), and that of a tuple's
    ``get-tuple-element`` for the op it reads (XLA merged two sorts into one, whose
    elements keep each sort's op_name)."""
    data, module = b.data, b.data.module
    held: dict[str, list[tuple[int, tuple]]] = defaultdict(list)
    for node in b.ops:
        instr = data.instr[node]
        own = places.of(node)
        inside = fused_body(module, module.called(instr)) if instr.opcode == "fusion" else []
        for inner in [instr, *inside]:
            if inner.opcode in PLUMBING or not inner.metadata.op_name:
                continue
            name = full_name(b, node, inner.metadata.op_name)
            held[name].append((node, places.own(inner) or own))
    ops = set(b.ops)
    for node, instr in enumerate(data.instr):
        if instr is None or instr.opcode != "get-tuple-element" or not instr.metadata.op_name:
            continue
        if (instr.computation, instr.name) not in flow.node_of:
            continue  # not drawn in the graph
        for op in flow.inputs(node) & ops:
            name = full_name(b, op, instr.metadata.op_name)
            held[name].append((op, places.own(instr) or places.of(op)))
    return held
