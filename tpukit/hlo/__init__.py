"""The pure HLO layer: read HLO text and answer questions about it, without JAX.

Parse a module, walk its computations and instructions, count ops, estimate FLOPs
and bytes, list its fusions and collectives, and draw it as an interactive graph.
Nothing here imports JAX or knows how the text was made, so it works as well on a
dump from another machine (``--xla_dump_to``) as on a program compiled here::

    >>> from tpukit.hlo import parse_hlo, op_counts, dot_conv_flops
    >>> module = parse_hlo('''
    ... HloModule f
    ... ENTRY main {
    ...   x = f32[8,16]{1,0} parameter(0)
    ...   w = f32[16,4]{1,0} parameter(1)
    ...   ROOT d = f32[8,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    ... }
    ... ''')
    >>> op_counts(module)
    Counter({'parameter': 2, 'dot': 1})
    >>> dot_conv_flops(module)  # 2 x multiply-adds of every dot and convolution
    1024
    >>> view = graph(module)  # in a notebook: the interactive graph  # doctest: +SKIP

Reports about a whole compilation (``tpukit.diff``, the plots) live beside
``tpukit.Compiled``, which uses this layer. It imports only ``tpukit.display`` and
``tpukit._errors`` (``tests/test_architecture.py`` checks this).
"""

from tpukit.hlo._cost import (
    dot_conv_flops,
    instruction_bytes,
    instruction_flops,
    op_category,
    op_counts,
)
from tpukit.hlo._fusions import Collective, Fusion, collectives_of, fusions_of
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

__all__ = [
    "Collective",
    "ComputationRef",
    "Fusion",
    "HloComputation",
    "HloEdge",
    "HloInstruction",
    "HloMetadata",
    "HloModule",
    "HloShape",
    "HloSourceFrame",
    "collectives_of",
    "dot_conv_flops",
    "fusions_of",
    "instruction_bytes",
    "instruction_flops",
    "op_category",
    "op_counts",
    "parse_hlo",
    "parse_shape",
    "graph",
    "HloGraph",
]


def __getattr__(name: str) -> object:
    # The graph viewer (and its bundled JavaScript) loads on first use only.
    if name in ("graph", "HloGraph"):
        from tpukit.hlo import _graph_view

        return getattr(_graph_view, name)
    raise AttributeError(f"module 'tpukit.hlo' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
