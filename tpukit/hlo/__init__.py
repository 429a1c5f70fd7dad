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

A ``tpukit.Compiled`` has one of these programs (``compiled.program``), made from what
JAX lowered and XLA optimized, with XLA's own cost figures in its `Cost`. How a source
line is named (a notebook cell's ``In [7], line 3``) is handed in by the layer that
knows the running shell (`name_locations_with`); here a file keeps its base name.

Imports: ``tpukit.display``, ``tpukit._errors`` (``tests/test_architecture.py`` checks).
"""

from tpukit._errors import old_names
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
from tpukit.hlo._graph_schema import FUSION_COLOURED_BY as FUSION_COLOURED_BY
from tpukit.hlo._graph_schema import PLOT_COLOURS as PLOT_COLOURS
from tpukit.hlo._graph_view import HloGraph
from tpukit.hlo._memory_ranges import LiveRanges as LiveRanges
from tpukit.hlo._memory_ranges import dump_memory_files as dump_memory_files
from tpukit.hlo._memory_ranges import estimate_live_ranges as estimate_live_ranges
from tpukit.hlo._memory_ranges import read_live_ranges as read_live_ranges
from tpukit.hlo._memory_view import MemoryView
from tpukit.hlo._memory_view import parse_bytes as parse_bytes
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
from tpukit.hlo._program import Cost, HloProgram, as_program, check_stage, graph, open
from tpukit.hlo._progress import progress as progress
from tpukit.hlo._sources import describe_location, is_user_file, name_locations_with
from tpukit.hlo._user_scopes import SECTIONS as SECTIONS
from tpukit.hlo._user_scopes import place_label as place_label
from tpukit.hlo._user_scopes import plan_scopes as plan_scopes

# Names imported `as` themselves are for tpukit's other packages, not public API: the plots'
# colours, XLA's memory ranges, progress lines and the profile's scope plan.
__all__ = [
    "Collective",
    "ComputationRef",
    "Cost",
    "Fusion",
    "HloComputation",
    "HloEdge",
    "HloInstruction",
    "HloMetadata",
    "HloModule",
    "HloProgram",
    "HloShape",
    "MemoryView",
    "HloSourceFrame",
    "as_program",
    "check_stage",
    "collectives_of",
    "describe_location",
    "is_user_file",
    "name_locations_with",
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


__getattr__ = old_names(__name__, {"HloCost": "tpukit.hlo.Cost"})  # renamed when programs came


def __dir__() -> list[str]:
    return sorted(__all__)
