"""The contract between the Python that builds an HLO graph and the JavaScript that draws it.

Everything both sides must agree on lives here, once: the payload's schema version,
the node kinds, the colour categories with their fills in the light and the dark
theme, and the heat scale of measured time. `_graph_payload` sends `schema_payload()`
inside every payload, so the viewer (``assets/graph_view.js``) reads kinds and colours
from the data it draws instead of keeping copies; the only thing it keeps is the
schema number it was written for, and a payload of another schema gets a one-line
"re-run the cell" message instead of a wrong drawing. The matplotlib plots
(`tpukit.compilation`) take each category's ``plot`` tone from here: the same hue as
the graph's fill, darker, so a bar reads on white.

Change `SCHEMA` whenever a field the viewer reads changes meaning or goes away (and
the ``SCHEMA`` line of ``graph_view.js`` with it; a test keeps the two equal).

    >>> SCHEMA
    2
    >>> KINDS[INSTRUCTION], CATEGORIES[0], COLOURS["matmul"].light
    ('instruction', 'matmul', '#f6b26b')
    >>> schema_payload()["palette"]["dark"][0]
    '#774510'
"""

from __future__ import annotations

from typing import NamedTuple

#: The payload's schema version; ``graph_view.js`` draws only this one.
SCHEMA = 2

#: Node kinds: a node's ``kind`` in the payload is an index into this tuple.
KINDS = ("instruction", "scope", "part", "computation")
INSTRUCTION, SCOPE, PART, COMPUTATION = range(len(KINDS))
#: What the viewer's panel calls each kind (in the order of `KINDS`).
KIND_LABELS = ("instruction", "name scope", "part of a group", "computation")


class CategoryColours(NamedTuple):
    """One colour category: its node fill in each theme and its tone for plots.

    ``label`` is what the legend says (None: not in the legend). ``light`` and ``dark``
    fill nodes on a light or dark page (text on them keeps a 4.5:1 contrast);
    ``plot`` is the same hue darker, for bars and lines on a white figure.
    """

    name: str
    label: str | None
    light: str
    dark: str
    plot: str


_TABLE = (
    CategoryColours("matmul", "matmul / conv", "#f6b26b", "#774510", "#e69138"),
    CategoryColours("elementwise", "elementwise", "#b6d7a8", "#33592c", "#6aa84f"),
    CategoryColours("reduction", "reduction", "#9fc5e8", "#284f78", "#3d85c6"),
    CategoryColours("data_movement", "data movement", "#d9cdee", "#4f4180", "#8e7cc3"),
    CategoryColours("control_flow", "control flow", "#ffe599", "#5c4f0c", "#bf9000"),
    CategoryColours("collective", "collective", "#ea9999", "#7d2f2f", "#cc0000"),
    CategoryColours("parameter/constant", "parameter / constant", "#eeeeee", "#3b4049", "#999999"),
    CategoryColours("other", None, "#ffffff", "#2b2f36", "#666666"),
    CategoryColours("group", None, "#eef1f6", "#30353e", "#98a2b3"),
)
#: Colour categories, in legend order; a node's ``cat`` in the payload indexes this tuple.
CATEGORIES = tuple(entry.name for entry in _TABLE)
#: Each category's colours by name.
COLOURS = {entry.name: entry for entry in _TABLE}
#: What the legend calls each category that it shows (in the order above).
CATEGORY_LABELS = {entry.name: entry.label for entry in _TABLE if entry.label is not None}
#: Bar colours of the plots by op category (`tpukit.hlo.op_category`). The graph
#: colours a fusion by what it fuses; an opcode chart keeps ``fusion`` apart, teal.
PLOT_COLOURS = {**{entry.name: entry.plot for entry in _TABLE}, "fusion": "#45818e"}

#: A fusion is coloured by the first of these categories among the ops it fuses.
FUSION_COLOURED_BY = ("matmul", "collective", "reduction", "elementwise", "data_movement")

#: The heat scale of measured time, low share to high (ColorBrewer YlOrRd, 9 classes).
HEAT = (
    "#ffffcc",
    "#ffeda0",
    "#fed976",
    "#feb24c",
    "#fd8d3c",
    "#fc4e2a",
    "#e31a1c",
    "#bd0026",
    "#800026",
)
#: From this position on the heat scale (0 to 1) the fill is dark and its text white.
HEAT_DARK_FROM = 0.55


def schema_payload() -> dict:
    """The schema's part of every payload: version, kinds, categories, legend, colours."""
    return {
        "schema": SCHEMA,
        "kinds": [list(pair) for pair in zip(KINDS, KIND_LABELS)],
        "categories": list(CATEGORIES),
        "legend": [list(item) for item in CATEGORY_LABELS.items()],
        "palette": {
            "light": [entry.light for entry in _TABLE],
            "dark": [entry.dark for entry in _TABLE],
        },
        "heat": {"colours": list(HEAT), "darkFrom": HEAT_DARK_FROM},
    }
