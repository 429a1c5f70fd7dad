"""The interactive HLO graph: the tree of groups, its payload, the page, the diff view.

This room draws what ``tpukit.hlo.text`` read and ``tpukit.hlo.analysis`` counted: the
tree of the user's layers and sections (`_graph_data`), the first view (`_first_view`),
the payload and its packed wire form (`_graph_payload`, `_graph_wire`), the page with
the viewer's scripts and styles (`_graph_page`; the JavaScript and CSS in ``assets/``,
their map in ``assets/README.md``) and two programs side by side (`_diff_view`).
Users reach it through ``tpukit.hlo.graph`` and ``HloProgram.graph()``::

    >>> from tpukit.graph import graph
    >>> view = graph('''
    ... HloModule f
    ... ENTRY main {
    ...   ROOT x = f32[8,16]{1,0} parameter(0)
    ... }
    ... ''')
    >>> type(view).__name__
    'HloGraph'

Imports: ``tpukit.hlo.text``, ``tpukit.hlo.analysis``, ``tpukit.display``,
``tpukit._errors`` (``tests/test_architecture.py`` checks).
"""

from tpukit.graph._diff_view import HloDiffView, diff_graph
from tpukit.graph._graph_data import ARGUMENT_NAMES as ARGUMENT_NAMES
from tpukit.graph._graph_schema import FUSION_COLOURED_BY as FUSION_COLOURED_BY
from tpukit.graph._graph_schema import PLOT_COLOURS as PLOT_COLOURS
from tpukit.graph._graph_view import HloGraph, graph

# Names imported `as` themselves serve the rooms above (memory, the program, the plots).
__all__ = ["HloDiffView", "HloGraph", "diff_graph", "graph"]
