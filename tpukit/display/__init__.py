"""How tpukit's outputs look in notebooks and terminals, shared by every part.

Cell names for source lines (``_cells.py``), figures shown once whatever the line
ends with (``_figures.py``), the one description of a result's output that renders
to text and HTML (``_table.py``), table styles that hold against the frontends' CSS
(``_html_style.py``) and units (``_units.py``). No JAX here.
"""
