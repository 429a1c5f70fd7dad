"""What a fusion does, by the name scopes of the ops it runs: `_user_scopes._owner` reads
it to put a fusion where most of its work is.

`fused_work` walks the fused computation once: FLOPs and op counts by ``op_name``, and
the bytes at its boundary, each to the named op that reads or makes them.
`names_a_scope` says first whether there is anything to weigh: a fusion whose body
names no scope (XLA's own fusions in a module without metadata inside them, a generated
module) is placed by its own ``op_name``, with no walk.
"""

from __future__ import annotations

from collections import defaultdict

from tpukit.hlo.analysis._cost import instruction_flops, keep_leaf_flops, run_computations
from tpukit.hlo.text import HloComputation, HloInstruction, HloModule


def names_a_scope(called: list[HloComputation], module: HloModule) -> bool:
    """Whether any op ``called`` runs (nested fusions' too) has an ``op_name``: a fusion
    whose body names none (a generated or hand-written module, XLA's own fusions) has
    no work or traffic to weigh, and `fused_work`'s walk of its readers (up to 8 deep
    per parameter) would find nothing."""
    stack, seen = list(called), set()
    while stack:
        comp = stack.pop()
        if comp.name in seen:
            continue
        seen.add(comp.name)
        for inner in comp.instructions:
            if inner.metadata.op_name:
                return True
            if inner.opcode == "fusion":
                stack.extend(module.called(inner))
    return False


def fused_work(
    called: list[HloComputation], module: HloModule
) -> tuple[dict[str, list[int]], list[tuple[HloInstruction, int, bool]]]:
    """What a fusion running ``called`` does, from one pass over its instructions.

    First ``[FLOPs, ops]`` by op_name of the named ops it runs (nested fusions too), in
    the order they first appear (each name is parsed later, once); then the traffic at
    the boundary of its fused computation, ``(op, bytes, written)``: a parameter's
    bytes go to the first op with a name scope that reads it (through plumbing such
    as bitcasts and broadcasts), the result's to the op that makes it (each element
    of a multi-output fusion's tuple to its own maker).
    """
    work: dict[str, list[int]] = {}
    if not called:
        return work, []
    fused = called[0]
    params = fused.parameters
    first_user: dict[str, HloInstruction] = {}
    unread = {param.name for param in params}  # parameters whose first reader is not seen yet
    for inner in fused.instructions:
        if not unread:
            break
        for operand in inner.operands:
            if operand in unread:
                unread.discard(operand)
                first_user[operand] = inner
    stack = list(called)
    while stack:
        _add_work(stack.pop(), module, work, stack)
    if all(user.metadata.op_name for user in first_user.values()):
        readers = [first_user.get(param.name) for param in params]
    else:  # through users without a name scope
        readers = _readers(fused, params)
    traffic = [
        (found, param.shape.nbytes, False)
        for param, found in zip(params, readers)
        if found is not None
    ]
    root = fused.root
    makers = [fused.get(o) for o in root.operands] if root and root.opcode == "tuple" else [root]
    for maker in makers:
        if maker is not None and maker.metadata.op_name:
            traffic.append((maker, maker.shape.nbytes, True))
    return work, traffic


def _add_work(
    comp: HloComputation,
    module: HloModule,
    work: dict[str, list[int]],
    stack: list[HloComputation],
) -> None:
    """Add ``comp``'s ``[FLOPs, ops]`` by op_name to ``work`` (new names in first-use
    order); the computations of the fusions it holds go on ``stack`` (their ops count
    too, after these). One plain loop: quicker than counting in C and then looking for
    the ops with FLOPs, on bodies of a dozen ops.

    Every op with FLOPs of its own is costed, named or not: where none of the ops runs a
    computation (a nested fusion, a call), their sum is ``comp``'s FLOPs whoever asks
    first, and is kept (`keep_leaf_flops`), so the fusion's own FLOPs take no second walk
    of its body (the tree's parts weigh it next: `_graph_parts._weight`)."""
    total, leaves = 0, True
    for inner in comp.instructions:
        opcode = inner.opcode
        if inner.called_computations or opcode in _WEIGHED_OPS:  # (few: most ops go on)
            if opcode == "fusion":
                stack.extend(module.called(inner))
                leaves = False
                continue
            flops = 0
            if inner.called_computations and run_computations(inner, module):
                leaves = False
                if not inner.metadata.op_name:  # (asked where named alone, as ever: through
                    continue  # a malformed cycle of calls, the order asked in tells the count)
                flops = instruction_flops(inner, module)
            elif opcode in _OWN_FLOPS:
                flops = instruction_flops(inner, module)
            # (else none: a reduce's region runs per element, `instruction_flops` gives 0)
            total += flops
        else:
            flops = 0
        op_name = inner.metadata.op_name
        if not op_name or opcode == "parameter":
            continue
        totals = work.get(op_name)
        if totals is None:
            totals = work[op_name] = [0, 0]
        if flops:
            totals[0] += flops
        totals[1] += 1
    if leaves:
        keep_leaf_flops(comp, module, total)


# The ops `instruction_flops` counts FLOPs of by themselves; others count only what they call.
_OWN_FLOPS = frozenset({"dot", "convolution", "custom-call"})
# The ops `_add_work` looks at twice: those with FLOPs of their own, and nested fusions.
_WEIGHED_OPS = _OWN_FLOPS | {"fusion"}


def _readers(
    fused: HloComputation, parameters: list[HloInstruction]
) -> list[HloInstruction | None]:
    """For each of ``parameters``, the first op of ``fused`` with a name scope that reads
    it: users in program order, depth first through users without one (at most 8 deep).
    (`_reader`, no closure: a recursive one keeps ``users`` in a cycle, uncollected.)"""
    users: dict[str, list[HloInstruction]] = defaultdict(list)
    for inner in fused.instructions:
        for operand in inner.operands:
            users[operand].append(inner)
    return [_reader(users, param.name, 0) for param in parameters]


def _reader(users: dict[str, list[HloInstruction]], name: str, depth: int) -> HloInstruction | None:
    for user in users[name]:
        if user.metadata.op_name:
            return user
        if depth < 8 and (found := _reader(users, user.name, depth + 1)) is not None:
            return found
    return None
