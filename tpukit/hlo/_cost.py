"""Count what an HLO module does: op counts, matmul FLOPs, bytes, op categories.

XLA's own ``compiled.cost_analysis()`` misses the work hidden in library calls:
on GPU, convolutions become ``custom-call``s to cuDNN and matmuls to cuBLAS, and
VGG-19 on 100 images reports about 7e9 FLOPs where about 4e12 are done. The
functions here count from the shapes in the HLO text instead, so every
backend's module is measured the same way.

    >>> x, w = jnp.ones((8, 16)), jnp.ones((16, 4))
    >>> module = parse_hlo(jax.jit(lambda x, w: jnp.tanh(x @ w)).lower(x, w).compile().as_text())
    >>> op_counts(module)["dot"]
    1
    >>> dot_conv_flops(module)  # 2 x multiply-adds of every dot and convolution: 2*8*4*16
    1024
    >>> op_category("all-gather-start"), op_category("reshape")
    ('collective', 'data_movement')
"""

from __future__ import annotations

import math
import re
from collections import Counter

from tpukit.hlo._model import HloComputation, HloInstruction, HloModule, HloShape

#: The categories `op_category` returns, and the opcodes in each.
MATMUL_OPS = frozenset({"dot", "convolution", "ragged-dot", "scaled-dot"})
ELEMENTWISE_OPS = frozenset(
    "abs add and atan2 bitcast-convert cbrt ceil clamp clz compare complex convert cosine "
    "divide erf exponential exponential-minus-one floor imag is-finite log log-plus-one "
    "logistic map maximum minimum multiply negate not or popcnt power real reduce-precision "
    "remainder round-nearest-afz round-nearest-even rsqrt select shift-left "
    "shift-right-arithmetic shift-right-logical sign sine sqrt stochastic-convert subtract "
    "tan tanh xor".split()
)
REDUCTION_OPS = frozenset({"reduce", "reduce-window", "select-and-scatter", "all-reduce-scatter"})
DATA_MOVEMENT_OPS = frozenset(
    "bitcast broadcast concatenate copy copy-start copy-done dynamic-reshape dynamic-slice "
    "dynamic-update-slice gather get-tuple-element pad reshape reverse scatter slice sort "
    "transpose tuple".split()
)
CONTROL_FLOW_OPS = frozenset(
    "while conditional call async-start async-update async-done after-all add-dependency "
    "optimization-barrier domain".split()
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
        "send",
        "recv",
    )
    for suffix in ("", "-start", "-update", "-done")
)
PARAMETER_CONSTANT_OPS = frozenset({"parameter", "constant", "iota"})

_CONV_TARGETS = {
    "__cudnn$convForward": "forward",
    "__cudnn$convBiasActivationForward": "forward",
    "__cudnn$convBackwardInput": "backward_input",
    "__cudnn$convBackwardFilter": "backward_filter",
}
# Computation roles that execute as program, not as a per-element reducer/comparator.
_RUN_ROLES = frozenset({"calls", "body", "condition", "branch", "called_computations"})
_PROGRAM_KINDS = frozenset({"entry", "while_body", "while_condition", "branch", "called", "async"})
_NO_TRAFFIC = frozenset(
    "parameter constant tuple get-tuple-element bitcast after-all add-dependency "
    "optimization-barrier".split()
)
_TRIP_COUNT = re.compile(r'known_trip_count\\?"\s*:\s*\{\s*\\?"n\\?"\s*:\s*\\?"?(\d+)')
_LHS_CONTRACTING = re.compile(r'lhs_contracting_dimensions\\?"\s*:\s*\[([^\]]*)\]')


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
        if op.opcode == "custom-call" and _is_matmul_call(op.custom_call_target):
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


def _is_matmul_call(target: str) -> bool:
    return target.startswith("__cublas") or target in _CONV_TARGETS


def op_counts(module: HloModule, open_fusions: bool = True) -> Counter[str]:
    """How many instructions of each opcode the module runs, as a `Counter`.

    Counts the computations that execute as program: the entry, while bodies
    and conditions, conditional branches, called and async computations and,
    when ``open_fusions`` is true, the fused computations inside ``fusion``
    instructions (the ``fusion`` instructions themselves are counted either
    way). Scalar reducers and comparators (the ``to_apply`` of reduce, sort,
    scatter, all-reduce, ...) are not counted: they describe one element's
    arithmetic, not program steps. Each computation counts once, however many
    times a loop runs it.

        >>> op_counts(module).most_common(3)  # the tanh(x @ w) module above
        [('parameter', 5), ('fusion', 2), ('dot', 1)]
        >>> op_counts(module, open_fusions=False)["dot"]  # the dot sits in a fusion
        0
    """
    kinds = (_PROGRAM_KINDS | {"fusion"}) if open_fusions else _PROGRAM_KINDS
    counts: Counter[str] = Counter()
    for comp in module.computations.values():
        if comp.kind in kinds:
            counts.update(instr.opcode for instr in comp.instructions)
    return counts


def dot_conv_flops(module: HloModule) -> int:
    """FLOPs (2 x multiply-adds) of every dot and convolution the module runs.

    Counts ``dot``, ``convolution``, cuBLAS gemm and cuDNN convolution
    custom-calls from their shapes, inside fusions and calls, while bodies times
    their ``known_trip_count`` (once when XLA does not know it) and, for a
    conditional, its most expensive branch.

        >>> x, w = jnp.ones((8, 16)), jnp.ones((16, 4))
        >>> dot_conv_flops(parse_hlo(jax.jit(jnp.dot).lower(x, w).as_text(dialect="hlo")))
        1024
    """
    return _computation_flops(module.entry, module, {})


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
    return _instruction_flops(instr, module, {})


def _computation_flops(comp: HloComputation, module: HloModule, cache: dict[str, int]) -> int:
    if comp.name not in cache:
        cache[comp.name] = 0  # guards against a (malformed) recursive call graph
        cache[comp.name] = sum(_instruction_flops(i, module, cache) for i in comp.instructions)
    return cache[comp.name]


def _instruction_flops(instr: HloInstruction, module: HloModule, cache: dict[str, int]) -> int:
    opcode = instr.opcode
    if opcode == "dot":
        return _dot_flops(instr, module, _dims_attr(instr.attributes.get("lhs_contracting_dims")))
    if opcode == "convolution":
        return _conv_flops(instr, module, "forward")
    if opcode == "custom-call":
        target = instr.custom_call_target
        if target in _CONV_TARGETS:
            return _conv_flops(instr, module, _CONV_TARGETS[target])
        if target.startswith("__cublas"):
            found = _LHS_CONTRACTING.search(instr.attributes.get("backend_config", ""))
            dims = tuple(int(d) for d in re.findall(r"\d+", found.group(1))) if found else (1,)
            return _dot_flops(instr, module, dims)
    called = [
        (module.computations[ref.name], ref.role)
        for ref in instr.called_computations
        if ref.name in module.computations
        and (ref.role in _RUN_ROLES or (ref.role == "to_apply" and opcode == "call"))
    ]
    if not called:
        return 0
    if opcode == "conditional":
        return max(_computation_flops(c, module, cache) for c, _ in called)
    total = sum(_computation_flops(c, module, cache) for c, _ in called)
    if opcode == "while":
        found = _TRIP_COUNT.search(instr.attributes.get("backend_config", ""))
        total *= int(found.group(1)) if found else 1
    return total


def _dims_attr(value: str | None) -> tuple[int, ...]:
    return tuple(int(d) for d in re.findall(r"\d+", value or ""))


def _operand_shape(instr: HloInstruction, module: HloModule, index: int) -> HloShape | None:
    if index >= len(instr.operands):
        return None
    comp = module.computations.get(instr.computation)
    operand = comp.get(instr.operands[index]) if comp is not None else None
    return operand.shape if operand is not None else None


def _first_array(shape: HloShape | None) -> HloShape | None:
    """The shape itself, or the first element of a tuple result like (out, scratch)."""
    while shape is not None and shape.is_tuple:
        shape = shape.elements[0] if shape.elements else None
    return shape


def _dot_flops(instr: HloInstruction, module: HloModule, contracting: tuple[int, ...]) -> int:
    lhs = _first_array(_operand_shape(instr, module, 0))
    out = _first_array(instr.shape)
    if lhs is None or out is None:
        return 0
    k = math.prod(lhs.dims[d] for d in contracting if d < lhs.rank)
    return 2 * out.num_elements * k


def _conv_flops(instr: HloInstruction, module: HloModule, direction: str) -> int:
    """``2 * output elements * kernel input features * kernel window size``.

    The ``dim_labels`` (``b01f_01io->b01f``) always describe the forward
    convolution input x kernel -> output. cuDNN's backward calls move those
    roles: backward-input computes the input gradient from (output gradient,
    kernel); backward-filter computes the kernel from (input, output gradient).
    """
    labels = instr.attributes.get("dim_labels", "")
    kernel_labels = labels.partition("_")[2].partition("->")[0]
    result = _first_array(instr.shape)
    if direction == "backward_filter":
        kernel, output = result, _operand_shape(instr, module, 1)
    elif direction == "backward_input":
        kernel, output = _operand_shape(instr, module, 1), _operand_shape(instr, module, 0)
    else:
        kernel, output = _operand_shape(instr, module, 1), result
    if kernel is None or output is None or len(kernel_labels) != kernel.rank:
        return 0
    in_features = kernel.dims[kernel_labels.index("i")] if "i" in kernel_labels else 1
    window = math.prod(kernel.dims[k] for k, c in enumerate(kernel_labels) if c.isdigit())
    return 2 * output.num_elements * in_features * window


def instruction_bytes(instr: HloInstruction, module: HloModule) -> int:
    """Bytes an instruction reads and writes: its operands' bytes plus its output's.

    Instructions that move no data give 0: parameter, constant, tuple,
    get-tuple-element, bitcast, after-all, add-dependency, optimization-barrier.
    For a fusion this is the traffic at its boundary, which is what fusion saves.

        >>> instruction_bytes(module.instruction("ynn_fusion"), module)  # 512 + 256 in, 128 out
        896
    """
    if instr.opcode in _NO_TRAFFIC:
        return 0
    reads = 0
    for index in range(len(instr.operands)):
        shape = _operand_shape(instr, module, index)
        reads += shape.nbytes if shape is not None else 0
    return reads + instr.shape.nbytes
