"""FLOPs of one dot, convolution or cuBLAS/cuDNN call, worked out from its shapes.

The per-instruction half of tpukit's FLOP count (`tpukit.hlo.analysis._cost` sums it over a
module, as executed). A dot is ``2 * output elements * contracted size``; a convolution
``2 * output elements * kernel input features * kernel window``, with only the taps on
real input elements counted when the input is dilated; a cuBLAS gemm reads its
contracting dimensions from its backend config; cuDNN's backward convolutions move the
roles of input, kernel and output.

    >>> from tpukit.hlo import parse_hlo
    >>> module = parse_hlo('''
    ... HloModule m
    ... ENTRY e {
    ...   x = f32[8,16] parameter(0)
    ...   w = f32[16,4] parameter(1)
    ...   ROOT d = f32[8,4] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    ... }''')
    >>> own_dot_conv_flops(module.instruction("d"), module)  # 2 * (8*4) * 16
    1024
"""

from __future__ import annotations

import math
import re

from tpukit.hlo.text import HloInstruction, HloModule, HloShape

#: cuDNN convolution calls, and the convolution direction each computes.
_CONV_TARGETS = {
    "__cudnn$convForward": "forward",
    "__cudnn$convBiasActivationForward": "forward",
    "__cudnn$convBackwardInput": "backward_input",
    "__cudnn$convBackwardFilter": "backward_filter",
}


_WINDOW_FIELD = re.compile(r"(\w+)=([\d_x-]+)")
_LHS_CONTRACTING = re.compile(r'lhs_contracting_dimensions\\?"\s*:\s*\[([^\]]*)\]')


def is_matmul_call(target: str) -> bool:
    """Whether a custom-call target is a cuBLAS gemm or a cuDNN convolution."""
    return target.startswith("__cublas") or target in _CONV_TARGETS


def own_dot_conv_flops(instr: HloInstruction, module: HloModule) -> int:
    """FLOPs of a dot, convolution or cuBLAS/cuDNN call itself (0 for any other op)."""
    opcode = instr.opcode
    if opcode == "dot":
        return _dot_flops(instr, module, _lhs_contracting(instr))
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
    return 0


def _lhs_contracting(instr: HloInstruction) -> tuple[int, ...]:
    """A dot's ``lhs_contracting_dims``, read from its line where the parser left its
    attributes unsplit and the key is written once, first among them or after plain
    pieces (as XLA writes a dot: ``lhs_batch_dims={0}``): a large module's tens of thousands of dots
    then keep no dict of attributes each (what ``attributes`` would split and keep).

    What decides it lies between the operands and the end of the key's value (the pieces
    before the key, the value): read once per distinct such text (`_READ`), since the
    dots of a module write few (what follows, the metadata, is each dot's own)."""
    if instr._attributes is None:
        text, start = instr.text, instr._rest_at
        at = text.find(_LHS_KEY, start)
        if at < 0:
            return ()  # not in the line: no split could find it
        found = _DIMS_VALUE.match(text, at + len(_LHS_KEY))
        if found is not None and text.find(_LHS_KEY, at + 1) < 0:
            head = text[start : found.end()]
            dims = _READ.get(head, _UNREAD)
            if dims is _UNREAD:
                if len(_READ) >= _READ_KEPT:
                    _READ.clear()
                dims = _READ[head] = _plain_dims(head, at - start, found.group(1))
            if dims is not None:
                return dims
    return _dims_attr(instr.attribute("lhs_contracting_dims"))


def _plain_dims(head: str, at: int, value: str) -> tuple[int, ...] | None:
    """The dims ``value`` of the key at ``at`` in ``head`` (the text after a dot's operands
    to the end of that value) where only plain pieces come before the key, else None."""
    if _PLAIN_PIECES.fullmatch(head, 0, at) is not None and head[:at].rstrip()[-1:] in ("", ","):
        return _dims_attr(value)
    return None


_LHS_KEY = "lhs_contracting_dims"
# ``=``, a value of digits in braces, then the piece's end: the next comma, or the line's.
_DIMS_VALUE = re.compile(r"\s*=\s*(\{[\d,\s]*\})\s*(?:,|$)")
# Pieces before the key that cannot hold it: no string, no bracket but braces of digits
# (``lhs_batch_dims={0}``).
_PLAIN_PIECES = re.compile(r'[^\[\](){}"]*(?:\{[\d,\s]*\}[^\[\](){}"]*)*')
#: `_lhs_contracting`'s reads by the text from a dot's operands to its key's value (None:
#: not plain), emptied past `_READ_KEPT` texts (a module's dots write a handful).
_READ: dict[str, tuple[int, ...] | None] = {}
_READ_KEPT = 1024
_UNREAD = object()


def _dims_attr(value: str | None) -> tuple[int, ...]:
    return tuple(int(d) for d in re.findall(r"\d+", value or ""))


def operand_shape(instr: HloInstruction, module: HloModule, index: int) -> HloShape | None:
    """The shape of operand ``index`` of ``instr``, or None when it cannot be found."""
    if index >= len(instr.operands):
        return None
    comp = module.computations.get(instr.computation)
    operand = comp.get(instr.operands[index]) if comp is not None else None
    return operand.shape if operand is not None else None


def first_array(shape: HloShape | None) -> HloShape | None:
    """The shape itself, or the first element of a tuple result like (out, scratch)."""
    while shape is not None and shape.is_tuple:
        shape = shape.elements[0] if shape.elements else None
    return shape


def _dot_flops(instr: HloInstruction, module: HloModule, contracting: tuple[int, ...]) -> int:
    lhs = first_array(operand_shape(instr, module, 0))
    out = first_array(instr.shape)
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

    An input-dilated convolution (``lhs_dilate`` in its window: a transposed
    convolution, or the input gradient of a strided one) multiplies most window
    taps by the zeros put between the input's elements. Only real elements count:
    each meets every tap once, as each output of the forward convolution meets every
    tap (padding included), so a stride-2 convolution's input gradient counts what
    the convolution itself counts.
    """
    labels = instr.attributes.get("dim_labels", "")
    kernel_labels = labels.partition("_")[2].partition("->")[0]
    result = first_array(instr.shape)
    if direction == "backward_filter":
        kernel, output = result, operand_shape(instr, module, 1)
    elif direction == "backward_input":
        kernel, output = operand_shape(instr, module, 1), operand_shape(instr, module, 0)
    else:
        kernel, output = operand_shape(instr, module, 1), result
    if kernel is None or output is None or len(kernel_labels) != kernel.rank:
        return 0
    in_features = kernel.dims[kernel_labels.index("i")] if "i" in kernel_labels else 1
    window = math.prod(kernel.dims[k] for k, c in enumerate(kernel_labels) if c.isdigit())
    flops = 2 * output.num_elements * in_features * window
    if direction == "forward" and "lhs_dilate" in instr.attributes.get("window", ""):
        taps = _real_taps(instr, module, labels, kernel)
        if taps is not None:
            flops = flops * taps[0] // taps[1]
    return flops


def _real_taps(
    instr: HloInstruction, module: HloModule, labels: str, kernel: HloShape
) -> tuple[int, int] | None:
    """``(taps on real input elements, all taps)`` over the spatial dimensions.

    In a dilated dimension with window stride 1, every real input element meets
    every tap: ``input size * window size``. With a larger stride, output position
    ``i`` and tap ``k`` read position ``p = i * stride + k * rhs_dilate - pad_low``
    of the dilated input (``(size - 1) * lhs_dilate + 1`` long), a real element when
    ``p`` lies inside and is a multiple of ``lhs_dilate``; those pairs are counted.
    Other dimensions count ``output size * window size``, as undilated convolutions
    do. Dimensions are independent, so the counts multiply. None when the window or
    the labels cannot be read.
    """
    fields = dict(_WINDOW_FIELD.findall(instr.attributes.get("window", "")))
    lhs_labels, _, rest = labels.partition("_")
    out_labels = rest.partition("->")[2]
    lhs, out = operand_shape(instr, module, 0), first_array(instr.shape)
    if lhs is None or out is None or len(lhs_labels) != lhs.rank or len(out_labels) != out.rank:
        return None
    spatial = sorted(c for c in lhs_labels if c.isdigit())

    def per_dim(name: str, default: int) -> list[int]:
        values = fields.get(name, "")
        return [int(v) for v in values.split("x")] if values else [default] * len(spatial)

    try:
        size, stride = per_dim("size", 1), per_dim("stride", 1)
        lhs_dilate, rhs_dilate = per_dim("lhs_dilate", 1), per_dim("rhs_dilate", 1)
        pads = fields.get("pad", "")
        pad_low = [int(p.split("_")[0]) for p in pads.split("x")] if pads else [0] * len(spatial)
    except ValueError:
        return None
    real, every = 1, 1
    for d, label in enumerate(spatial):
        outputs = out.dims[out_labels.index(label)]
        inputs = lhs.dims[lhs_labels.index(label)]
        if lhs_dilate[d] == 1:
            real *= outputs * size[d]
        elif stride[d] == 1:
            real *= inputs * size[d]
        else:
            real *= _taps_on_real_elements(
                outputs, size[d], stride[d], pad_low[d], lhs_dilate[d], rhs_dilate[d], inputs
            )
        every *= outputs * size[d]
    return (real, every) if every else None


def _taps_on_real_elements(
    outputs: int, taps: int, stride: int, pad_low: int, dilate: int, rhs_dilate: int, size: int
) -> int:
    """How many (output position, tap) pairs of one dimension read a real input element."""
    length = (size - 1) * dilate + 1
    period = dilate // math.gcd(stride, dilate)
    total = 0
    for k in range(taps):
        offset = k * rhs_dilate - pad_low  # p = i * stride + offset
        low = max(0, -(offset // stride))
        high = min(outputs - 1, (length - 1 - offset) // stride)
        for residue in range(period):
            if (residue * stride + offset) % dilate:
                continue
            first = low + (residue - low) % period
            if first <= high:
                total += (high - first) // period + 1
    return total
