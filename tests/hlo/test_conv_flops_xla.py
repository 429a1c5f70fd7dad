"""Convolution FLOPs agree with XLA's own cost analysis, case by case.

XLA's ``HloCostAnalysis::GetConvolutionFlops`` counts, per output element, the kernel
taps that read a real input element: not the padding (negative padding crops), not the
holes ``lhs_dilate`` puts between elements, with strides, kernel dilation and feature and
batch groups. Each case below is one ``lax.conv_general_dilated`` (or a transposed
convolution, or a gradient of a strided one) compiled on CPU; tpukit's count of its
lowered and of its optimized module must equal ``cost_analysis()['flops']`` of each.
The optimized module may hold another convolution than the lowered one -- XLA:CPU writes
a batch-grouped convolution as one with an extra input-dilated spatial dim -- and both
sides count that same instruction. The counted modules hold convolutions and data
movement only, so XLA's total is the convolutions' FLOPs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from tpukit.hlo import dot_conv_flops, parse_hlo

NHWC = ("NHWC", "HWIO", "NHWC")
X, W = (2, 9, 10, 3), (3, 3, 3, 4)
DILATED_X, DILATED_W = (2, 7, 8, 3), (3, 2, 3, 4)


def conv(strides, padding, lhs_dilation=None, rhs_dilation=None, dims=NHWC, groups=(1, 1)):
    def f(x, w):
        return lax.conv_general_dilated(
            x, w, strides, padding, lhs_dilation, rhs_dilation, dims, *groups
        )

    return f


def transposed(strides, padding, dims=NHWC):
    return lambda x, w: lax.conv_transpose(x, w, strides, padding, dimension_numbers=dims)


def gradient(padding, of):
    """The input (``of="x"``) or kernel gradient of a stride-2 3x3 convolution, alone."""
    x, w = jnp.ones((2, 16, 16, 8)), jnp.ones((3, 3, 8, 4))
    forward = conv((2, 2), padding)
    out = jax.eval_shape(forward, x, w).shape
    if of == "x":
        return (lambda ct, w: jax.linear_transpose(lambda x: forward(x, w), x)(ct)[0]), (
            out,
            w.shape,
        )
    return (lambda x, ct: jax.linear_transpose(lambda w: forward(x, w), w)(ct)[0]), (x.shape, out)


ZERO = ((0, 0), (0, 0))
CASES = {
    "valid stride 2": (conv((2, 2), "VALID"), (X, W)),
    "same stride 1": (conv((1, 1), "SAME"), (X, W)),
    "same stride 2": (conv((2, 2), "SAME"), (X, W)),
    "explicit padding stride 3": (conv((3, 3), ((1, 2), (0, 1))), (X, W)),
    "negative padding": (conv((2, 2), ((-1, 0), (2, -1))), (X, W)),
    "lhs dilation": (conv((1, 2), ZERO, (2, 2)), (DILATED_X, DILATED_W)),
    "lhs and rhs dilation, padded": (
        conv((1, 2), ((2, 2), (1, 3)), (3, 3), (2, 2)),
        (DILATED_X, DILATED_W),
    ),
    "a window meeting only holes": (
        conv((1, 2), ((2, 2), (1, 3)), (2, 2), (2, 2)),
        (DILATED_X, DILATED_W),
    ),
    "1-d same stride 2": (conv((2,), "SAME", dims=("NWC", "WIO", "NWC")), ((3, 17, 4), (5, 4, 6))),
    "1-d lhs dilation 3 stride 2": (
        conv((2,), ((4, 4),), (3,), (2,), ("NWC", "WIO", "NWC")),
        ((3, 6, 4), (4, 4, 6)),
    ),
    "3-d same": (
        conv((2, 1, 2), "SAME", dims=("NDHWC", "DHWIO", "NDHWC")),
        ((1, 6, 5, 7, 2), (3, 2, 3, 2, 3)),
    ),
    "3-d dilated, negative padding": (
        conv(
            (1, 2, 1), ((1, 1), (0, 2), (-1, 1)), (2, 1, 1), (1, 2, 1), ("NDHWC", "DHWIO", "NDHWC")
        ),
        ((1, 4, 6, 5, 2), (2, 3, 2, 2, 3)),
    ),
    "feature groups": (conv((1, 1), "SAME", groups=(2, 1)), ((2, 8, 8, 4), (3, 3, 2, 6))),
    "depthwise stride 2": (conv((2, 2), "SAME", groups=(4, 1)), ((2, 9, 9, 4), (3, 3, 1, 4))),
    "batch groups": (conv((1, 1), "SAME", groups=(1, 2)), ((4, 8, 8, 3), (3, 3, 3, 4))),
    "NCHW same stride 2": (
        conv((2, 2), "SAME", dims=("NCHW", "OIHW", "NCHW")),
        ((2, 3, 16, 16), (8, 3, 3, 3)),
    ),
    "transposed stride 2": (transposed((2, 2), "SAME"), ((2, 8, 8, 3), (3, 3, 3, 4))),
    "transposed 1-d stride 3": (
        transposed((3,), "SAME", ("NWC", "WIO", "NWC")),
        ((2, 7, 3), (4, 3, 4)),
    ),
    "input gradient, stride 2, valid": gradient("VALID", "x"),
    "input gradient, stride 2, same": gradient("SAME", "x"),
    "kernel gradient, stride 2, same": gradient("SAME", "w"),
    # XLA:TPU's batched matmuls (attention's QK^T and PV in examples/v6e-1/attention.after.hlo
    # of Junyi-99/hlo-visualizer): the batch dims (2, 4) spatial and input-dilated.
    "batched matmul as TPU writes QK^T": (
        conv((1, 3), ZERO, (2, 4), dims=("01NC", "01OI", "01NC")),
        ((2, 4, 16, 8), (2, 4, 12, 8)),
    ),
    "batched matmul as TPU writes PV": (
        conv((2, 4), ((1, 1), (3, 3)), (1, 3), dims=("01CN", "01OI", "01CN")),
        ((2, 4, 16, 12), (2, 4, 8, 16)),
    ),
}


def xla_flops(stage) -> int:
    cost = stage.cost_analysis()
    if isinstance(cost, (list, tuple)):  # older JAX: one dict per program
        (cost,) = cost
    return int(cost.get("flops", 0))  # XLA leaves out a property that is 0


@pytest.mark.parametrize("name", CASES)
def test_convolution_flops_are_what_xla_counts(name):
    f, shapes = CASES[name]
    lowered = jax.jit(f).lower(*(jnp.ones(s) for s in shapes))
    module = parse_hlo(lowered.as_text(dialect="hlo"))
    assert [i.opcode for i in module.instructions()].count("convolution") == 1
    assert dot_conv_flops(module) == xla_flops(lowered)
    compiled = lowered.compile()
    assert dot_conv_flops(parse_hlo(compiled.as_text())) == xla_flops(compiled)
