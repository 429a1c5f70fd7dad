"""The pure HLO layer: read HLO text and answer questions about it, without JAX.

Parse a module, walk its computations and instructions, count ops, estimate FLOPs
and bytes, list its fusions and collectives, and draw it as an interactive graph.
Nothing here imports JAX or knows how the text was made, so it works as well on a
dump from another machine (``--xla_dump_to``) as on a program compiled here::

    >>> from tpukit.hlo import dot_conv_flops, graph, op_counts, parse_hlo
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

    >>> from tpukit.hlo import open
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

The layer is four rooms, each with its face: ``tpukit.hlo.text`` reads the text into
the model, ``tpukit.hlo.analysis`` answers questions about it, ``tpukit.graph`` draws it
and ``tpukit.memory`` shows what fills the device. This face and `HloProgram`
(``_program``) sit above all four and name everything public; the graph's and memory's
names, and ``open``'s program, load on first use (PEP 562).

Imports: ``tpukit.hlo.text``, ``tpukit.hlo.analysis``, ``tpukit.graph``,
``tpukit.memory``, ``tpukit.display``, ``tpukit._errors`` (``tests/test_architecture.py``
checks).
"""

from typing import Any

from tpukit._errors import old_names
from tpukit.hlo.analysis import SECTIONS as SECTIONS
from tpukit.hlo.analysis import (
    Collective,
    Fusion,
    Tally,
    collectives_of,
    dot_conv_flops,
    executed,
    fusions_of,
    instruction_bytes,
    instruction_flops,
    op_category,
    op_counts,
)
from tpukit.hlo.analysis import place_label as place_label
from tpukit.hlo.analysis import plan_scopes as plan_scopes
from tpukit.hlo.analysis import user_path as user_path
from tpukit.hlo.text import (
    ComputationRef,
    HloComputation,
    HloEdge,
    HloInstruction,
    HloMetadata,
    HloModule,
    HloShape,
    HloSourceFrame,
    describe_location,
    is_user_file,
    name_locations_with,
    parse_hlo,
    parse_shape,
)
from tpukit.hlo.text import progress as progress

# Loaded on first use, by the module that holds them: the program (which draws and shows
# memory), the graph viewer and memory. Those not in `__all__` serve tpukit's other
# packages: the plots' colours, XLA's memory ranges.
_PROGRAM = ("Cost", "HloProgram", "as_program", "check_stage", "graph", "open")
_GRAPH = ("HloGraph", "HloDiffView", "diff_graph", "FUSION_COLOURED_BY", "PLOT_COLOURS")
_MEMORY = (
    "MemoryView",
    "LiveRanges",
    "dump_memory_files",
    "estimate_live_ranges",
    "parse_bytes",
    "read_live_ranges",
)

# Names imported `as` themselves are for tpukit's other packages, not public API: progress
# lines and the profile's scope plan.
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


_old_name = old_names(__name__, {"HloCost": "tpukit.hlo.Cost"})  # renamed when programs came


def __getattr__(name: str) -> Any:
    if name in _PROGRAM:
        import tpukit.hlo._program as holder
    elif name in _GRAPH:
        import tpukit.graph as holder
    elif name in _MEMORY:
        import tpukit.memory as holder
    else:
        return _old_name(name, depth=3)
    value = globals()[name] = getattr(holder, name)
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
