"""Reading HLO text: the parser, the module it makes, and where the text comes from.

This room turns text into an `HloModule` (computations, instructions, shapes, metadata,
source frames) and reads it from a string, a file or a dump folder; it knows nothing
of costs, graphs or memory, which sit above it::

    >>> from tpukit.hlo.text import parse_hlo
    >>> module = parse_hlo('''
    ... HloModule f
    ... ENTRY main {
    ...   ROOT x = f32[8,16]{1,0} parameter(0)
    ... }
    ... ''')
    >>> module.entry.root.opcode, str(module.entry.root.shape)
    ('parameter', 'f32[8,16]{1,0}')

Imports: ``tpukit._errors`` (``tests/test_architecture.py`` checks).
"""

from tpukit.hlo.text._hlo_source import PATH_MAX as PATH_MAX
from tpukit.hlo.text._hlo_source import STAGES as STAGES
from tpukit.hlo.text._hlo_source import parse_dump_name as parse_dump_name
from tpukit.hlo.text._hlo_source import pick_module as pick_module
from tpukit.hlo.text._hlo_source import read_hlo_source as read_hlo_source
from tpukit.hlo.text._metadata import METADATA_VALUE as METADATA_VALUE
from tpukit.hlo.text._metadata import metadata_text as metadata_text
from tpukit.hlo.text._model import (
    ComputationRef,
    HloComputation,
    HloEdge,
    HloInstruction,
    HloMetadata,
    HloModule,
    HloShape,
    HloSourceFrame,
)
from tpukit.hlo.text._parsed_rows import parsed_text as parsed_text
from tpukit.hlo.text._parser import parse_hlo
from tpukit.hlo.text._parser import paused_gc as paused_gc
from tpukit.hlo.text._parser import split_modules as split_modules
from tpukit.hlo.text._progress import progress as progress
from tpukit.hlo.text._shape_text import parse_shape
from tpukit.hlo.text._sources import describe_location, is_user_file, name_locations_with

# Names imported `as` themselves serve the rooms above (the analysis, the graph, memory).
__all__ = [
    "ComputationRef",
    "HloComputation",
    "HloEdge",
    "HloInstruction",
    "HloMetadata",
    "HloModule",
    "HloShape",
    "HloSourceFrame",
    "describe_location",
    "is_user_file",
    "name_locations_with",
    "parse_hlo",
    "parse_shape",
]
