"""Questions about a parsed HLO module: costs, loops, executed counts, fusions, scopes.

Each answer is a function of an `HloModule` (``tpukit.hlo.text``), with no JAX and no
drawing: op counts and categories, FLOPs and bytes (`_cost`), loop trip counts
(`_loops`), what a run executes once loops are unrolled (`_executed`), fusions and
collectives (`_fusions`), and the user's layers and sections named in the metadata
(`_user_scopes`; what a fusion's ops weigh there: `_fused_work`)::

    >>> from tpukit.hlo.text import parse_hlo
    >>> from tpukit.hlo.analysis import op_counts
    >>> op_counts(parse_hlo('''
    ... HloModule f
    ... ENTRY main {
    ...   x = f32[8]{0} parameter(0)
    ...   ROOT e = f32[8]{0} exponential(x)
    ... }
    ... '''))
    Counter({'parameter': 1, 'exponential': 1})

Imports: ``tpukit.hlo.text`` (``tests/test_architecture.py`` checks).
"""

from tpukit.hlo.analysis._cost import FLOP_OPS as FLOP_OPS
from tpukit.hlo.analysis._cost import OWN_BYTES as OWN_BYTES
from tpukit.hlo.analysis._cost import PARAMETER_CONSTANT_OPS as PARAMETER_CONSTANT_OPS
from tpukit.hlo.analysis._cost import SUMMED_BYTES as SUMMED_BYTES
from tpukit.hlo.analysis._cost import bytes_rule as bytes_rule
from tpukit.hlo.analysis._cost import bytes_with_operands as bytes_with_operands
from tpukit.hlo.analysis._cost import computation_bytes as computation_bytes
from tpukit.hlo.analysis._cost import (
    dot_conv_flops,
    instruction_bytes,
    instruction_flops,
    op_category,
    op_counts,
)
from tpukit.hlo.analysis._cost import instruction_count as instruction_count
from tpukit.hlo.analysis._cost import run_computations as run_computations
from tpukit.hlo.analysis._executed import RUNS_COMPUTATIONS as RUNS_COMPUTATIONS
from tpukit.hlo.analysis._executed import Tally, executed
from tpukit.hlo.analysis._executed import executed_bytes as executed_bytes
from tpukit.hlo.analysis._executed import fft_flops as fft_flops
from tpukit.hlo.analysis._fusions import Collective, Fusion, collectives_of, fusions_of
from tpukit.hlo.analysis._loops import repeated_loops as repeated_loops
from tpukit.hlo.analysis._loops import trip_count as trip_count
from tpukit.hlo.analysis._user_scopes import BACKWARD as BACKWARD
from tpukit.hlo.analysis._user_scopes import BACKWARD_SUFFIX as BACKWARD_SUFFIX
from tpukit.hlo.analysis._user_scopes import FORWARD as FORWARD
from tpukit.hlo.analysis._user_scopes import INPUTS as INPUTS
from tpukit.hlo.analysis._user_scopes import OUTPUTS as OUTPUTS
from tpukit.hlo.analysis._user_scopes import SECTION_NOTES as SECTION_NOTES
from tpukit.hlo.analysis._user_scopes import SECTIONS as SECTIONS
from tpukit.hlo.analysis._user_scopes import forget_parsed_scopes as forget_parsed_scopes
from tpukit.hlo.analysis._user_scopes import function_name as function_name
from tpukit.hlo.analysis._user_scopes import parse_scope as parse_scope
from tpukit.hlo.analysis._user_scopes import place_label as place_label
from tpukit.hlo.analysis._user_scopes import plan_scopes as plan_scopes
from tpukit.hlo.analysis._user_scopes import split_scope as split_scope
from tpukit.hlo.analysis._user_scopes import user_path as user_path

# Names imported `as` themselves serve the rooms above (the graph, memory, the program).
__all__ = [
    "Collective",
    "Fusion",
    "Tally",
    "collectives_of",
    "dot_conv_flops",
    "executed",
    "fusions_of",
    "instruction_bytes",
    "instruction_flops",
    "op_category",
    "op_counts",
]
