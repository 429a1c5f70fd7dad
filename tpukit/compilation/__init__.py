"""Compiling a call for the device, and everything said about the result.

Imports: ``tpukit.measure``, ``tpukit.runtime``, ``tpukit.hlo``, ``tpukit.memory``, ``tpukit.display``, ``tpukit._errors``, ``tpukit._counts``, ``tpukit._compat``, ``tpukit._interrupts``.

``tpukit.compile`` (``_compiled.py``) turns a function and its arguments' shapes into a
``Compiled``: the executable, what the call is (``_signature.py``, ``_call_line.py``,
``_shapes.py``, ``_placement.py`` for meshes and partition specs), what compiling said
(``_analysis.py``: XLA's cost analysis and memory) and the program itself, a
``tpukit.hlo.HloProgram``. Beside it: the summary (``_summary.py``), ``diff`` and the
plots (``_diff.py``, ``_plots.py``), which take programs; the memory view and what
would fit (``_memory.py``, ``_out_of_memory.py``), the persistent cache
(``_compile_cache.py``), random data for abstract arguments (``_sample_data.py``) and
compile errors at the user's line (``_user_errors.py``), the ledger of every compile
in the process with why each happened (``_ledger.py``, ``_ledger_arguments.py``,
``_ledger_report.py``: ``compiles``, ``no_recompile``) and where one compile's time
goes (``_compile_phases.py``), and ``find_nan``, where a call's first NaN or infinity
was made (``_nan_search.py``, run by ``_nan_program.py``, named by ``_nan_names.py``,
recorded as ``_nan_origin.NanOrigin``). Timing and profiling are
``tpukit.measure``'s. This face is what tpukit's other packages import.
"""

from tpukit._errors import RecompileError
from tpukit.compilation._analysis import Memory
from tpukit.compilation._call_line import CallSpec, parse_call_line
from tpukit.compilation._compile_cache import enable_compile_cache
from tpukit.compilation._compile_phases import CompilePhases
from tpukit.compilation._compiled import Calling, Compiled, compile, compile_lowering
from tpukit.compilation._diff import HloDiff, diff
from tpukit.compilation._diff_row import DiffRow
from tpukit.compilation._ledger import CompileRecord, no_recompile, record_count
from tpukit.compilation._ledger_arguments import LEAF_NAMES
from tpukit.compilation._ledger_report import Compiles, compiles
from tpukit.compilation._memory import device_capacity, set_device_memory
from tpukit.compilation._module_scopes import module_scopes
from tpukit.compilation._nan_origin import NanOrigin, ValueRange
from tpukit.compilation._nan_search import find_nan, search
from tpukit.compilation._out_of_memory import explain, measuring, needed_bytes
from tpukit.compilation._placement import parse_mesh, parse_partition_spec
from tpukit.compilation._plots import plot_fusions, plot_ops, plot_roofline
from tpukit.compilation._shapes import SHAPE_LITERAL, format_shape, shape
from tpukit.compilation._signature import Signature, bind_arguments
from tpukit.memory import Fix, search_batch

__all__ = [
    "CallSpec",
    "Calling",
    "LEAF_NAMES",
    "CompilePhases",
    "CompileRecord",
    "Compiled",
    "Compiles",
    "DiffRow",
    "Fix",
    "HloDiff",
    "Memory",
    "RecompileError",
    "NanOrigin",
    "SHAPE_LITERAL",
    "Signature",
    "ValueRange",
    "bind_arguments",
    "compile",
    "compile_lowering",
    "compiles",
    "device_capacity",
    "diff",
    "enable_compile_cache",
    "explain",
    "find_nan",
    "format_shape",
    "measuring",
    "module_scopes",
    "needed_bytes",
    "no_recompile",
    "parse_call_line",
    "parse_mesh",
    "parse_partition_spec",
    "plot_fusions",
    "plot_ops",
    "plot_roofline",
    "record_count",
    "search",
    "search_batch",
    "set_device_memory",
    "shape",
]
