"""Analytic FLOP counts from layer shapes.

The zoo counts a multiply-accumulate as two FLOPs and counts only the matrix
multiplies and convolutions, because those are what an accelerator's matrix
units do and what the compiler's cost model reports as the bulk of the work.
Elementwise ops, pooling and normalization are left out (they add well under
one percent for the zoo's models).

    >>> conv2d(224, 224, 3, 64, kernel=3, stride=1, padding=1)
    (173408256, 224, 224)
    >>> dense(4096, 1000)
    8192000
"""

from __future__ import annotations


def conv_output_size(size: int, kernel: int, stride: int, padding: int) -> int:
    """The spatial size after a convolution or pooling window, as PyTorch computes it.

    >>> conv_output_size(224, kernel=7, stride=2, padding=3)
    112
    """
    return (size + 2 * padding - kernel) // stride + 1


def conv2d(
    height: int,
    width: int,
    in_channels: int,
    out_channels: int,
    *,
    kernel: int,
    stride: int = 1,
    padding: int = 0,
) -> tuple[int, int, int]:
    """FLOPs of one example through a square 2-D convolution, and its output size.

    Returns ``(flops, out_height, out_width)``.
    """
    out_h = conv_output_size(height, kernel, stride, padding)
    out_w = conv_output_size(width, kernel, stride, padding)
    flops = 2 * out_h * out_w * out_channels * kernel * kernel * in_channels
    return flops, out_h, out_w


def dense(in_features: int, out_features: int, tokens: int = 1) -> int:
    """FLOPs of one example through a dense layer applied to ``tokens`` positions."""
    return 2 * tokens * in_features * out_features
