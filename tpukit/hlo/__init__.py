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
    >>> view = graph(module)  # in a notebook: the interactive graph

``open`` reads any program the same way, from HLO text, a file or a dump folder
(``XLA_FLAGS=--xla_dump_to=DIR``), into an ``HloProgram`` with a ``Compiled``'s
analysis surface::

    >>> program = open('''
    ... HloModule g, is_scheduled=true
    ... ENTRY main {
    ...   ROOT x = f32[8,16]{1,0} parameter(0)
    ... }
    ... ''')
    >>> program.name, program.stages, program.op_counts()
    ('g', ('optimized',), Counter({'parameter': 1}))

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
from tpukit.hlo._diff_view import HloDiffView, diff_graph
from tpukit.hlo._executed import Tally, executed
from tpukit.hlo._fusions import Collective, Fusion, collectives_of, fusions_of
from tpukit.hlo._graph_view import HloGraph, graph
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
from tpukit.hlo._program import HloCost, HloProgram, open

__all__ = [
    "Collective",
    "ComputationRef",
    "Fusion",
    "HloComputation",
    "HloEdge",
    "HloInstruction",
    "HloMetadata",
    "HloCost",
    "HloModule",
    "HloProgram",
    "HloShape",
    "HloSourceFrame",
    "collectives_of",
    "dot_conv_flops",
    "executed",
    "Tally",
    "fusions_of",
    "instruction_bytes",
    "instruction_flops",
    "op_category",
    "op_counts",
    "open",
    "parse_hlo",
    "parse_shape",
    "graph",
    "HloGraph",
    "diff_graph",
    "HloDiffView",
]


def __dir__() -> list[str]:
    return sorted(__all__)
