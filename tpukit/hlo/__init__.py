"""Read the HLO that XLA produces: a small graph model, op counts and FLOP/byte estimates.

>>> from tpukit.hlo import parse_hlo, op_counts, dot_conv_flops
>>> f = lambda x, w: jnp.tanh(x @ w)
>>> x, w = jnp.ones((8, 16)), jnp.ones((16, 4))
>>> module = parse_hlo(jax.jit(f).lower(x, w).compile().as_text())
>>> op_counts(module).most_common(3)
[('parameter', 5), ('fusion', 2), ('dot', 1)]
>>> dot_conv_flops(module)  # 2 x multiply-adds of every dot and convolution
1024
>>> graph(module)  # in a notebook: the interactive graph (see `tpukit.hlo._graph_view`)
"""

from tpukit.hlo._cost import (
    dot_conv_flops,
    instruction_bytes,
    instruction_flops,
    op_category,
    op_counts,
)
from tpukit.hlo._diff import DiffRow, HloDiff, diff
from tpukit.hlo._model import (
    ComputationRef,
    HloComputation,
    HloEdge,
    HloInstruction,
    HloMetadata,
    HloModule,
    HloShape,
    HloSourceFrame,
)
from tpukit.hlo._parser import parse_hlo, parse_shape
from tpukit.hlo._plots import plot_fusions, plot_ops, plot_roofline

__all__ = [
    "ComputationRef",
    "DiffRow",
    "HloDiff",
    "HloComputation",
    "HloEdge",
    "HloInstruction",
    "HloMetadata",
    "HloModule",
    "HloShape",
    "HloSourceFrame",
    "diff",
    "dot_conv_flops",
    "instruction_bytes",
    "instruction_flops",
    "op_category",
    "op_counts",
    "parse_hlo",
    "parse_shape",
    "plot_fusions",
    "plot_ops",
    "plot_roofline",
    "graph",
    "HloGraph",
]


def __getattr__(name: str) -> object:
    # The graph viewer (and its bundled JavaScript) loads on first use only.
    if name in ("graph", "HloGraph"):
        from tpukit.hlo import _graph_view

        return getattr(_graph_view, name)
    raise AttributeError(f"module 'tpukit.hlo' has no attribute {name!r}")
