"""What fills the device: live ranges along a program's schedule, and who holds the peak.

This room reads XLA's buffer assignment and live ranges, or estimates them from HLO
text (`_memory_ranges`), and joins them with the program's layers and source lines in
a `MemoryView` (`_memory_view`), which draws on the graph's groups, and says what would
fit (`_what_fits`: the fixes, the batch search and the out-of-memory message, each
measurement handed in). It never compiles:
what a compiler measures (``tpukit.compilation``) and what training does about it
(``tpukit.train``) sit above::

    >>> from tpukit.hlo import parse_hlo
    >>> from tpukit.memory import estimate_live_ranges
    >>> estimate_live_ranges(parse_hlo('''
    ... HloModule f, is_scheduled=true
    ... ENTRY main {
    ...   x = f32[256]{0} parameter(0)
    ...   ROOT e = f32[256]{0} exponential(x)
    ... }
    ... ''')).peak_bytes
    2048

Imports: ``tpukit.hlo.text``, ``tpukit.hlo.analysis``, ``tpukit.graph``,
``tpukit.display``, ``tpukit._errors`` (``tests/test_architecture.py`` checks).
"""

from tpukit.memory._memory_ranges import (
    LiveRanges,
    dump_memory_files,
    estimate_live_ranges,
    read_live_ranges,
)
from tpukit.memory._memory_view import MemoryView, parse_bytes
from tpukit.memory._what_fits import BatchSearch, Fix, out_of_memory_message, search_batch

__all__ = [
    "BatchSearch",
    "Fix",
    "LiveRanges",
    "MemoryView",
    "dump_memory_files",
    "estimate_live_ranges",
    "out_of_memory_message",
    "parse_bytes",
    "read_live_ranges",
    "search_batch",
]
