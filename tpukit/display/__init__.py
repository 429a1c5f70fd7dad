"""How tpukit's outputs look in notebooks and terminals, shared by every part.

Imports: nothing of tpukit's (the bottom layer, no JAX either).

Cell names for source lines (``_cells.py``), figures shown once whatever the line
ends with (``_figures.py``), the one description of a result's output that renders
to text and HTML (``_table.py``), table styles that hold against the frontends' CSS
(``_html_style.py``) and units (``_units.py``). This face is what tpukit's other
packages import; ``new_figure`` loads matplotlib on first use.
"""

from typing import Any

from tpukit.display._cells import (
    CellLine,
    cell_line,
    describe_location,
    is_cell_file,
    kernel_shell,
)
from tpukit.display._html_style import BORDER_COLOR, MUTED_COLOR, root_classes, table_style
from tpukit.display._table import Column, Figure, Line, Report, Row, Section, Table, fact_table
from tpukit.display._units import format_bytes, format_count, format_flops, format_seconds

__all__ = [
    "BORDER_COLOR",
    "CellLine",
    "Column",
    "Figure",
    "Line",
    "MUTED_COLOR",
    "Report",
    "Row",
    "Section",
    "Table",
    "cell_line",
    "describe_location",
    "fact_table",
    "format_bytes",
    "format_count",
    "format_flops",
    "format_seconds",
    "is_cell_file",
    "kernel_shell",
    "new_figure",
    "root_classes",
    "table_style",
]


def __getattr__(name: str) -> Any:
    if name == "new_figure":  # matplotlib loads with the first figure, not with tpukit
        from tpukit.display._figures import new_figure

        return new_figure
    raise AttributeError(f"module 'tpukit.display' has no attribute {name!r}")
