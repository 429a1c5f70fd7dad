"""The drawing's units and the first view's frame, as the page draws them.

One place for the sizes that `_graph_frame` (the drawing's estimated size) and
`_graph_parts` (groups cut into stages that fit) both read, with no imports of the
graph's own modules, so that neither imports the other's dependencies. The page's own
sizes are in graph_shared.js and graph_layout.js; the frame travels to it in the payload.

    >>> FRAME_W / WIDTH_SLACK > 600  # what a closed group's children may take, wide
    True
    >>> LAYOUT.sub("", "f32[8,128]{1,0}")
    'f32[8,128]'
"""

from __future__ import annotations

import re

# Drawing units, as graph_shared.js and graph_layout.js draw.
NODE_H, CHAR_W, HEADER_H, PAD, MAX_CHARS, RANK_SEP = 36, 6.7, 24, 10, 40, 34
NODE_SEP, EDGE_SEP = 18, 8
#: The first view's frame: the drawing fits this box (drawing units at the page's readable
#: scale, a notebook output about 900 pixels wide), and the view grows to its height.
FRAME_W, FRAME_H = 900, 760
#: dagre's placement aligns boxes across ranks and is wider than its widest rank: by
#: 1.0-1.41x on the modules of benchmarks/hlo_first_views.py (its ``size`` and ``est.``).
WIDTH_SLACK = 1.45
LAYOUT = re.compile(r"\{[^{}]*\}")  # a shape's layout: the page leaves it out (shortShape)
