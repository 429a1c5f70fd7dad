"""FLOPs of one dot, convolution or cuBLAS/cuDNN call, worked out from its shapes.

The per-instruction half of tpukit's FLOP count (`tpukit.hlo.analysis._cost` sums it over a
module, as executed). A dot is ``2 * output elements * contracted size``; a convolution
``2 * kernel input features * (output element, kernel tap) pairs``, counting only the taps
that read a real input element (not padding, not the holes of ``lhs_dilate``), as XLA's
own cost analysis does; a cuBLAS gemm reads its contracting dimensions from its backend
config; cuDNN's backward convolutions move the roles of input, kernel and output.

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
    """``2 * kernel input features * (output element, kernel tap) pairs on real input``.

    The ``dim_labels`` (``b01f_01io->b01f``) and the window always describe the forward
    convolution input x kernel -> output. cuDNN's backward calls move those roles:
    backward-input computes the input from (output, kernel); backward-filter computes the
    kernel from (input, output). Each does the forward convolution's multiply-adds.

    A tap counts where it reads a real input element, not the padding around the input
    nor the holes ``lhs_dilate`` puts between its elements, as XLA's own cost analysis
    (``HloCostAnalysis::GetConvolutionFlops``) counts: a SAME-padded convolution's edge
    outputs do fewer multiply-adds, a transposed convolution (the input gradient of a
    strided one) counts what the strided convolution counts, and XLA:TPU's batched
    matmul written as a convolution (its batch dims spatial, ``lhs_dilate`` the batch
    size, so one tap per output meets a real element) counts as the matmul. Without a
    readable window or input, every tap counts.
    """
    labels = instr.attributes.get("dim_labels", "")
    lhs_labels, _, rest = labels.partition("_")
    kernel_labels, _, out_labels = rest.partition("->")
    result = first_array(instr.shape)
    first, second = operand_shape(instr, module, 0), operand_shape(instr, module, 1)
    if direction == "backward_filter":
        lhs, kernel, output = first, result, second
    elif direction == "backward_input":
        lhs, kernel, output = result, second, first
    else:
        lhs, kernel, output = first, second, result
    if kernel is None or output is None or len(kernel_labels) != kernel.rank:
        return 0
    in_features = kernel.dims[kernel_labels.index("i")] if "i" in kernel_labels else 1
    window = math.prod(kernel.dims[k] for k, c in enumerate(kernel_labels) if c.isdigit())
    pairs = output.num_elements * window
    taps = _real_taps(instr.attributes.get("window", ""), labels, lhs, kernel, output)
    if taps is not None:
        real, spatial_outputs = taps
        pairs = output.num_elements // spatial_outputs * real if spatial_outputs else 0
    return 2 * in_features * pairs


def _real_taps(
    window: str, labels: str, lhs: HloShape | None, kernel: HloShape, out: HloShape
) -> tuple[int, int] | None:
    """``(real pairs, output positions)`` over the spatial dimensions: the (output
    position, kernel tap) pairs that read a real input element, and the output's spatial
    size. Dimensions are independent, so both multiply over them. None when the window,
    the labels or the input's shape cannot be read."""
    fields = dict(_WINDOW_FIELD.findall(window))
    lhs_labels, _, rest = labels.partition("_")
    kernel_labels, _, out_labels = rest.partition("->")
    if lhs is None or (len(lhs_labels), len(out_labels)) != (lhs.rank, out.rank):
        return None
    spatial = sorted(c for c in lhs_labels if c.isdigit())
    if any(
        sorted(c for c in other if c.isdigit()) != spatial for other in (kernel_labels, out_labels)
    ):
        return None

    def per_dim(name: str, default: int) -> list[int]:
        values = fields.get(name, "")
        return [int(v) for v in values.split("x")] if values else [default] * len(spatial)

    try:
        stride, lhs_dilate = per_dim("stride", 1), per_dim("lhs_dilate", 1)
        rhs_dilate = per_dim("rhs_dilate", 1)
        pads = fields.get("pad", "")
        pad_low = [int(p.split("_")[0]) for p in pads.split("x")] if pads else [0] * len(spatial)
    except ValueError:
        return None
    steps = stride + lhs_dilate + rhs_dilate
    if len(steps) != 3 * len(spatial) or len(pad_low) != len(spatial) or min(steps, default=1) < 1:
        return None
    real, outputs = 1, 1
    for d, label in enumerate(spatial):
        size = out.dims[out_labels.index(label)]
        real *= _taps_on_real_elements(
            size,
            kernel.dims[kernel_labels.index(label)],
            stride[d],
            pad_low[d],
            lhs_dilate[d],
            rhs_dilate[d],
            lhs.dims[lhs_labels.index(label)],
        )
        outputs *= size
    return real, outputs


def _taps_on_real_elements(
    outputs: int, taps: int, stride: int, pad_low: int, dilate: int, rhs_dilate: int, size: int
) -> int:
    """How many (output position, tap) pairs of one dimension read a real input element.

    Output ``i`` and tap ``k`` read position ``p = i * stride + k * rhs_dilate - pad_low``
    of the padded, dilated input: a real element when ``0 <= p <= (size - 1) * dilate``
    and ``dilate`` divides ``p``. For each tap the outputs inside form a range, and those
    whose ``p`` is a multiple of ``dilate`` one residue class modulo
    ``dilate / gcd(stride, dilate)`` (none when the gcd does not divide the offset)."""
    if size < 1 or outputs < 1:
        return 0
    last = (size - 1) * dilate  # the last real element's position
    common = math.gcd(stride, dilate)
    period = dilate // common
    step = pow(stride // common, -1, period)  # solves i * stride = -offset (mod dilate)
    total = 0
    for k in range(taps):
        offset = k * rhs_dilate - pad_low  # p = i * stride + offset
        low = max(0, -(offset // stride))
        high = min(outputs - 1, (last - offset) // stride)
        if low > high or offset % common:
            continue
        residue = -offset // common * step % period
        first = low + (residue - low) % period
        if first <= high:
            total += (high - first) // period + 1
    return total
