"""Count what an HLO module does: op counts, matmul FLOPs, bytes, op categories.

XLA's own ``compiled.cost_analysis()`` misses the work hidden in library calls:
on GPU, convolutions become ``custom-call``s to cuDNN and matmuls to cuBLAS, and
VGG-19 on 100 images reports about 7e9 FLOPs where about 4e12 are done. The
functions here count from the shapes in the HLO text instead, so every
backend's module is measured the same way.

What XLA's CPU compiler (JAX 0.10) makes of ``jnp.tanh(x @ w)``:

    >>> from tpukit.hlo import parse_hlo
    >>> module = parse_hlo('''
    ... HloModule jit__lambda, is_scheduled=true
    ... fused_computation {
    ...   param_0 = f32[8,16]{1,0} parameter(0)
    ...   param_1 = f32[16,4]{1,0} parameter(1)
    ...   ROOT dot_general.0 = f32[8,4]{1,0} dot(param_0, param_1), lhs_contracting_dims={1},
    ...     rhs_contracting_dims={0}
    ... }
    ... wrapped_tanh_computation {
    ...   param_0.1 = f32[8,4]{1,0} parameter(0)
    ...   ROOT tanh.0 = f32[8,4]{1,0} tanh(param_0.1)
    ... }
    ... ENTRY main.1 {
    ...   x.1 = f32[8,16]{1,0} parameter(0)
    ...   w.1 = f32[16,4]{1,0} parameter(1)
    ...   ynn_fusion = f32[8,4]{1,0} fusion(x.1, w.1), kind=kCustom, calls=fused_computation
    ...   ROOT wrapped_tanh = f32[8,4]{1,0} fusion(ynn_fusion), kind=kLoop,
    ...     calls=wrapped_tanh_computation
    ... }''')
    >>> op_counts(module)["dot"]
    1
    >>> dot_conv_flops(module)  # 2 x multiply-adds of every dot and convolution: 2*8*4*16
    1024
    >>> op_category("all-gather-start"), op_category("reshape")
    ('collective', 'data_movement')
"""

from __future__ import annotations

from collections import Counter
from operator import attrgetter

from tpukit.hlo.analysis._loops import trip_count
from tpukit.hlo.analysis._matmul_flops import (
    first_array,
    is_matmul_call,
    operand_shape,
    own_dot_conv_flops,
)
from tpukit.hlo.text import HloComputation, HloInstruction, HloModule, HloShape

#: The categories `op_category` returns, and the opcodes in each.
MATMUL_OPS = frozenset({"dot", "convolution", "ragged-dot", "scaled-dot"})
ELEMENTWISE_OPS = frozenset(
    "abs acos acosh add and asin asinh atan atan2 atanh batch-norm-inference "
    "bitcast-convert cbrt ceil clamp clz count-leading-zeros compare complex convert cosh "
    "cosine divide erf exponential exponential-minus-one floor imag is-finite log "
    "log-plus-one logistic map maximum minimum mulhi multiply negate not or popcnt power "
    "real reduce-precision remainder round-nearest-afz round-nearest-even rsqrt select "
    "shift-left shift-right-arithmetic shift-right-logical sign sine sinh sqrt "
    "stochastic-convert subtract tan tanh xor".split()
)
REDUCTION_OPS = frozenset(
    "reduce reduce-window select-and-scatter all-reduce-scatter batch-norm-training "
    "batch-norm-grad".split()
)
DATA_MOVEMENT_OPS = frozenset(
    "bitcast broadcast concatenate copy copy-start copy-done dynamic-reshape dynamic-slice "
    "dynamic-update-slice gather get-dimension-size get-tuple-element pad reshape reverse "
    "scatter set-dimension-size shuffle slice sort topk transpose tuple".split()
)
CONTROL_FLOW_OPS = frozenset(
    "while conditional call scan async-start async-update async-done after-all "
    "add-dependency opt-barrier optimization-barrier domain".split()
)
COLLECTIVE_OPS = frozenset(
    f"{op}{suffix}"
    for op in (
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "all-to-all",
        "ragged-all-to-all",
        "collective-permute",
        "collective-broadcast",
        "collective-reduce",
        "send",
        "recv",
    )
    for suffix in ("", "-start", "-update", "-done")
)
PARAMETER_CONSTANT_OPS = frozenset({"parameter", "constant", "iota", "partition-id", "replica-id"})
#: Opcodes that are ``"other"`` on purpose: linear algebra and FFTs (their FLOPs are not
#: counted), random numbers, host transfers, and library calls that are not a matmul.
OTHER_OPS = frozenset(
    "cholesky triangular-solve fft rng rng-bit-generator rng-get-and-update-state infeed "
    "outfeed custom-call".split()
)

# Computation roles that execute as program, not as a per-element reducer/comparator.
_RUN_ROLES = frozenset({"calls", "body", "condition", "branch", "called_computations"})


def run_computations(instr: HloInstruction, module: HloModule) -> list[tuple[HloComputation, str]]:
    """``(computation, role)`` for each computation ``instr`` runs as program (a loop's
    body and condition, a call's or conditional's computations), not its reducers nor a
    custom-call's per-element comparator (TopK's: ``kind`` ``applied``)."""
    found = []
    for ref in instr.called_computations:
        comp = module.computations.get(ref.name)
        if comp is not None and (
            (ref.role in _RUN_ROLES and comp.kind != "applied")
            or (ref.role == "to_apply" and instr.opcode == "call")
        ):
            found.append((comp, ref.role))
    return found


_PROGRAM_KINDS = frozenset({"entry", "while_body", "while_condition", "branch", "called", "async"})
_NO_TRAFFIC = frozenset(
    "parameter constant tuple get-tuple-element bitcast after-all add-dependency "
    "opt-barrier optimization-barrier domain".split()
)
# The second half of an async pair: its bytes are counted once, at the start.
_ASYNC_DONE = frozenset(
    {
        f"{op}-{half}"
        for op in ("copy", "all-reduce", "all-gather", "collective-permute")
        for half in ("done", "update")
    }
    | {"async-update", "async-done"}
)
# What `instruction_bytes` counts as 0 bytes, by opcode.
_NO_BYTES = _NO_TRAFFIC | _ASYNC_DONE
# Library calls whose tuple result ends in a scratch buffer (cuBLAS's s8 workspace).
_SCRATCH_TARGETS = ("__cublas", "__cudnn")
#: The opcodes `own_dot_conv_flops` counts: an instruction of another opcode that calls
#: no computation has no FLOPs (`instruction_flops` gives 0).
FLOP_OPS = frozenset({"dot", "convolution", "custom-call"})


def op_category(op: str | HloInstruction) -> str:
    """The family an opcode belongs to, for colouring graphs and summing costs.

    Returns one of ``"matmul"`` (dot, convolution, and the cuBLAS/cuDNN
    custom-calls when given an instruction), ``"elementwise"``, ``"reduction"``,
    ``"data_movement"``, ``"control_flow"``, ``"collective"``, ``"fusion"``,
    ``"parameter/constant"`` or ``"other"``. The opcode lists are the module
    constants ``MATMUL_OPS``, ``ELEMENTWISE_OPS``, ``REDUCTION_OPS``,
    ``DATA_MOVEMENT_OPS``, ``CONTROL_FLOW_OPS``, ``COLLECTIVE_OPS`` and
    ``PARAMETER_CONSTANT_OPS``. A fusion's own kind (kLoop, kInput, kOutput,
    kCustom) is `HloInstruction.fusion_kind`.

        >>> op_category("dot"), op_category("tanh"), op_category("all-reduce-done")
        ('matmul', 'elementwise', 'collective')
    """
    if isinstance(op, HloInstruction):
        if op.opcode == "custom-call" and is_matmul_call(op.custom_call_target):
            return "matmul"
        op = op.opcode
    if op in MATMUL_OPS:
        return "matmul"
    if op in ELEMENTWISE_OPS:
        return "elementwise"
    if op in REDUCTION_OPS:
        return "reduction"
    if op in DATA_MOVEMENT_OPS:
        return "data_movement"
    if op in COLLECTIVE_OPS:
        return "collective"
    if op in CONTROL_FLOW_OPS:
        return "control_flow"
    if op == "fusion":
        return "fusion"
    if op in PARAMETER_CONSTANT_OPS:
        return "parameter/constant"
    return "other"


def op_counts(module: HloModule, open_fusions: bool = True) -> Counter[str]:
    """How many instructions of each opcode the module runs, as a `Counter`.

    Counts the computations that execute as program: the entry, while bodies
    and conditions, conditional branches, called and async computations and,
    when ``open_fusions`` is true, the fused computations inside ``fusion``
    instructions (the ``fusion`` instructions themselves are counted either
    way). Scalar reducers and comparators (the ``to_apply`` of reduce, sort,
    scatter, all-reduce, ...) are not counted: they describe one element's
    arithmetic, not program steps. Instructions count *as written*: each computation
    once, however many places call it or times a loop runs it; computations ENTRY
    never reaches are left out.

        >>> op_counts(module).most_common(3)  # the tanh(x @ w) module above
        [('parameter', 5), ('fusion', 2), ('dot', 1)]
        >>> op_counts(module, open_fusions=False)["dot"]  # the dot sits in a fusion
        0
    """
    counts: Counter[str] = Counter()
    for comp in _counted_computations(module, open_fusions):
        counts.update(instr.opcode for instr in comp.instructions)
    return counts


def instruction_count(module: HloModule) -> int:
    """``sum(op_counts(module).values())``, without counting each opcode."""
    return sum(len(comp.instructions) for comp in _counted_computations(module, True))


def _counted_computations(module: HloModule, open_fusions: bool) -> list[HloComputation]:
    """The computations `op_counts` counts: those that run as program (and fused ones)."""
    kinds = (_PROGRAM_KINDS | {"fusion"}) if open_fusions else _PROGRAM_KINDS
    reached = module.reachable()
    return [
        comp for comp in module.computations.values() if comp.kind in kinds and comp.name in reached
    ]


def dot_conv_flops(module: HloModule) -> int:
    """FLOPs (2 x multiply-adds) of every dot and convolution the module runs.

    Counts ``dot``, ``convolution``, cuBLAS gemm and cuDNN convolution
    custom-calls from their shapes, *as executed*: inside fusions and calls (at every
    call site), while bodies times their trip count (``known_trip_count``, else read
    from the loop counter by `tpukit.hlo.analysis._loops.trip_count`; once when neither
    gives it), conditions one time more, and for a conditional its most expensive
    branch.

        >>> x, w = jnp.ones((8, 16)), jnp.ones((16, 4))
        >>> dot_conv_flops(parse_hlo(jax.jit(jnp.dot).lower(x, w).as_text(dialect="hlo")))
        1024
    """
    return _computation_flops(module.entry, module, module._flops)


def instruction_flops(instr: HloInstruction, module: HloModule) -> int:
    """FLOPs (2 x multiply-adds) of the dots and convolutions one instruction runs.

    A dot, convolution or cuBLAS/cuDNN custom-call gives its own count; a
    fusion, call, while or conditional gives what runs inside it (see
    `dot_conv_flops`); every other instruction gives 0.

    Dot: ``2 * output elements * product of the lhs contracting dims``.
    Convolution: ``2 * output elements * kernel input features * kernel window
    size``, where the kernel's input-feature dimension already divides by
    ``feature_group_count``; padding positions are counted, as in the usual
    model FLOP formula (XLA's cost analysis skips them, so it reads a little lower).

        >>> instruction_flops(module.instruction("ynn_fusion"), module)  # holds the dot
        1024
    """
    return _instruction_flops(instr, module, module._flops)  # each computation counted once


def keep_leaf_flops(comp: HloComputation, module: HloModule, flops: int) -> None:
    """Keep ``flops``, the sum of `instruction_flops` over ``comp``'s instructions, as
    ``comp``'s FLOPs (what `dot_conv_flops` and a caller's `instruction_flops` read), from
    a walk that costed them already (`_fused_work`'s of a fusion's body): for a
    computation none of whose instructions runs another as program, so that the sum is
    the same whenever it is made (a call graph's cycles guard nothing in it). A figure
    kept already stays."""
    module._flops.setdefault(comp.name, flops)


def _computation_flops(comp: HloComputation, module: HloModule, cache: dict[str, int]) -> int:
    if comp.name not in cache:
        cache[comp.name] = 0  # guards against a (malformed) recursive call graph
        cache[comp.name] = sum(
            [
                _instruction_flops(i, module, cache)
                for i in comp.instructions
                if i.called_computations or i.opcode in FLOP_OPS  # the others count none
            ]
        )
    return cache[comp.name]


def _instruction_flops(instr: HloInstruction, module: HloModule, cache: dict[str, int]) -> int:
    if not instr.called_computations:
        if instr.opcode not in FLOP_OPS:
            return 0  # most instructions: nothing to count, nothing to look up
        # A dot's or convolution's own count, worked out once: a fused dot is counted for
        # its fusion, for its own node in the graph and for its layer's scope.
        counted = module._analysis.setdefault("own_flops", {})
        own = counted.get(id(instr))
        if own is None:
            own = counted[id(instr)] = own_dot_conv_flops(instr, module)
        return own
    own = own_dot_conv_flops(instr, module)
    if own:
        return own
    opcode = instr.opcode
    called = run_computations(instr, module)
    if not called:
        return 0
    if opcode == "conditional":
        return max(_computation_flops(c, module, cache) for c, _ in called)
    if opcode == "while":
        trips = trip_count(instr, module)
        return sum(
            _computation_flops(c, module, cache)
            * (1 if trips is None else trips + (role == "condition"))
            for c, role in called
        )
    return sum(_computation_flops(c, module, cache) for c, _ in called)


def instruction_bytes(instr: HloInstruction, module: HloModule) -> int:
    """Bytes an instruction reads and writes: its operands' bytes plus its output's.

    Instructions that move no data give 0: parameter, constant, tuple,
    get-tuple-element, bitcast, after-all, add-dependency, opt-barrier, domain.
    For a fusion this is the traffic at its boundary, which is what fusion saves.
    An asynchronous pair (``copy-start``/``copy-done``, ``all-gather-start``/...)
    counts once, at its start: what it reads and the result it makes, not the
    buffers its start hands to its done. A cuBLAS or cuDNN call's scratch
    workspace (the ``s8[...]``/``u8[...]`` last in its result) is not traffic.

        >>> instruction_bytes(module.instruction("ynn_fusion"), module)  # 512 + 256 in, 128 out
        896
    """
    if instr.opcode in _NO_BYTES:
        return 0
    comp = module.computations.get(instr.computation)  # `operand_shape`, for all at once
    operands = []
    for name in instr.operands:
        operand = comp.get(name) if comp is not None else None
        operands.append(operand.shape if operand is not None else None)
    return _traffic(instr, module, operands)


def _traffic(instr: HloInstruction, module: HloModule, operands: list[HloShape | None]) -> int:
    """`instruction_bytes` of an instruction that moves data, its operands' shapes given."""
    reads = 0
    partial = _partial_reads(instr, module)
    for index, shape in enumerate(operands):
        full = shape.nbytes if shape is not None else 0
        reads += min(full, partial[index]) if index in partial else full
    return reads + _written(instr, operands).nbytes


def bytes_with_operands(instr: HloInstruction, module: HloModule, operand_bytes: int) -> int:
    """`instruction_bytes` of ``instr``, given ``operand_bytes``: the bytes of its operands
    that its computation holds, each counted as often as the operand list names it.

    Most instructions, fusions among them, read their operands whole and write their
    whole result: their bytes are that result's and ``operand_bytes``, with no operand
    looked up. The others (a slice, a fusion whose parameter is read in part, an async
    start's or a library call's tuple) are costed as `instruction_bytes` costs them.
    """
    opcode = instr.opcode
    if opcode in _NO_BYTES:
        return 0
    shape = instr.shape
    if opcode in _PART_READERS or (
        shape.dtype == "tuple" and (opcode == "custom-call" or opcode.endswith("-start"))
    ):  # reads part of an operand, or may write part of its result (`_written`)
        return instruction_bytes(instr, module)
    if opcode == "fusion" and _partial_reads(instr, module):
        return instruction_bytes(instr, module)
    return shape.nbytes + operand_bytes


#: `bytes_rule`'s answers: no bytes, a sum of the result's and the operands', neither.
NO_BYTES, SUMMED_BYTES, OWN_BYTES = 0, 1, 2


def bytes_rule(opcode: str) -> int:
    """How `bytes_with_operands` costs every instruction of ``opcode`` whose result is an
    array (no tuple): `NO_BYTES` (0: a parameter, a constant, plumbing, an async pair's
    second half), `SUMMED_BYTES` (its result's bytes and ``operand_bytes``: an opcode
    that reads its operands whole and runs no computation) or `OWN_BYTES` (a fusion, a
    slice, an async start, a library call: ask `bytes_with_operands`). A column of many
    instructions' bytes is then a sum where it can be.

        >>> bytes_rule("parameter"), bytes_rule("add"), bytes_rule("slice")
        (0, 1, 2)
    """
    if opcode in _NO_BYTES:
        return NO_BYTES
    if opcode in _PART_READERS or opcode in ("fusion", "custom-call") or opcode.endswith("-start"):
        return OWN_BYTES
    return SUMMED_BYTES


def computation_bytes(comp: HloComputation, module: HloModule) -> dict[int, int]:
    """`instruction_bytes` of every instruction of ``comp``, by the instruction's ``id``.

    The same figures, computed for a whole computation at once (the graph costs every
    instruction of a module): operands are looked up in one table, and an instruction
    that writes one array and reads its operands whole (most of them) is summed inline.
    """
    by_name = {instr.name: instr for instr in comp.instructions}
    found: dict[int, int] = {}
    for instr in comp.instructions:
        opcode = instr.opcode
        if opcode in _NO_BYTES:
            found[id(instr)] = 0
            continue
        shape = instr.shape
        if shape.dtype == "tuple" or opcode in _PART_READERS or opcode == "fusion":
            operands = []
            for name in instr.operands:
                operand = by_name.get(name)
                if operand is None and name[:1] == "%":  # (`HloComputation.get`'s rule)
                    operand = comp.get(name)
                operands.append(operand.shape if operand is not None else None)
            found[id(instr)] = _traffic(instr, module, operands)
            continue
        total: int | None = shape.nbytes
        for name in instr.operands:
            operand = by_name.get(name)
            if operand is not None:
                total += operand.shape.nbytes  # type: ignore[operator]
            elif name[:1] == "%":  # looked up again without the % (`HloComputation.get`)
                total = None
                break
        found[id(instr)] = instruction_bytes(instr, module) if total is None else total
    return found


#: Ops that read only part of their first operand: as much as they produce.
_PART_READERS = frozenset({"gather", "dynamic-slice", "slice"})
_OPCODE = attrgetter("opcode")


def _partial_reads(instr: HloInstruction, module: HloModule) -> dict[int, int]:
    """Bytes read of operands that ``instr`` reads only in part, by operand index.

    A gather, dynamic-slice or slice reads what it produces of its first operand (a
    batch out of a device-resident data set, not the whole set); so does a fusion
    whose parameter is used only as the first operand of such ops.
    """
    if instr.opcode in _PART_READERS:
        return {0: instr.shape.nbytes}
    if instr.opcode != "fusion":
        return {}
    found: dict[int, int] = {}
    for body in module.called(instr):
        found.update(_parameters_read_in_part(body))
    return found


def _parameters_read_in_part(body: HloComputation) -> dict[int, int]:
    """`_partial_reads` of one fused computation: its parameters that every use reads in part."""
    if _PART_READERS.isdisjoint(map(_OPCODE, body.instructions)):
        return {}  # most fusions: none of their ops reads in part
    params = [i for i in body.instructions if i.opcode == "parameter"]
    usage = {p.name: [0, 0, True] for p in params}  # [uses, bytes they produce, in part]
    for inner in body.instructions:
        for name in inner.operands:
            used = usage.get(name)
            if used is None:
                continue
            used[0] += 1  # one use per mention, as the operand list says
            if inner.opcode in _PART_READERS and inner.operands[0] == name:
                used[1] += inner.shape.nbytes
            else:
                used[2] = False
    found: dict[int, int] = {}
    for param in params:
        uses, nbytes, in_part = usage[param.name]
        if uses and in_part:  # (the number read last: most parameters are read whole)
            number = param.parameter_number
            if number is not None:
                found[number] = nbytes
    return found


def _written(instr: HloInstruction, operands: list[HloShape | None]) -> HloShape:
    """The part of an instruction's result that it writes."""
    shape = instr.shape
    if not shape.is_tuple or not shape.elements:
        return shape
    elements = list(shape.elements)
    if instr.opcode.endswith("-start"):
        if elements[0].is_tuple:  # async-start: ((operands), result, context)
            return elements[1] if len(elements) > 1 else shape
        skip = 0  # copy-start: (destination, source, context); all-gather-start: (in, out)
        while skip < min(len(operands), len(elements) - 1) and _same_array(
            elements[skip], operands[skip]
        ):
            skip += 1
        return elements[skip] if skip else shape
    if instr.opcode == "custom-call" and instr.custom_call_target.startswith(_SCRATCH_TARGETS):
        last = elements[-1]
        if len(elements) > 1 and last.dtype in ("s8", "u8") and last.rank == 1:
            return HloShape("tuple", elements=tuple(elements[:-1]))
    return shape


def _same_array(a: HloShape, b: HloShape | None) -> bool:
    return b is not None and a.dtype == b.dtype and a.dims == b.dims


#: Collectives whose result is as large as their operands (bytes = every element).
_SAME_SIZE = ("all-reduce", "collective-broadcast", "all-to-all", "ragged-all-to-all")


def collective_bytes(instr: HloInstruction, module: HloModule) -> int:
    """Bytes a collective delivers per device: every array of its result, tokens as 0.

    A combined all-reduce of ``(f32[1024], f32[256])`` carries 5,120 bytes; an async
    ``-start`` counts the results its pair makes (not the operands it also holds);
    ``send``/``recv`` count the data they carry (the first element of their
    ``(data, context, token)`` result).

        >>> ar = parse_hlo('''
        ... HloModule m
        ... ENTRY e {
        ...   a = f32[1024] parameter(0)
        ...   b = f32[256] parameter(1)
        ...   ROOT ar = (f32[1024], f32[256]) all-reduce(a, b)
        ... }''')
        >>> collective_bytes(ar.instruction("ar"), ar)
        5120
    """
    opcode = instr.opcode.removesuffix("-start")
    shape = instr.shape
    if opcode in ("send", "recv"):
        if opcode == "send":
            data = operand_shape(instr, module, 0)
            if data is not None:
                return data.nbytes
        return first_array(shape).nbytes if first_array(shape) is not None else 0
    if not shape.is_tuple or opcode in _SAME_SIZE or not instr.opcode.endswith("-start"):
        return shape.nbytes
    comp = module.computations.get(instr.computation)
    operands = [
        (comp.get(name).shape if comp is not None and comp.get(name) else None)
        for name in instr.operands
    ]
    return _written(instr, operands).nbytes
