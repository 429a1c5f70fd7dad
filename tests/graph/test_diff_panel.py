"""The node panel on the diff's half-width sides leaves the node just clicked in sight.

Each side of the diff is half the page; a node's panel opens at its right, up to 60% of
the side wide. A node the view had centred (a search, a click on the other side) sat
half under it: the view now slides left until the clicked node stands clear of the panel
(``diff_view.js``, ``DiffSide.clearOfPanel``).
"""

import os

from tests.graph.test_diff_fused_tpu import fft_view
from tests.graph.test_diff_view import open_view, side


def test_the_panel_of_a_node_just_clicked_does_not_cover_it(browser):
    page, _, errors = open_view(browser, fft_view(), "standalone")
    lowered = side(page, 0)
    search = lowered.locator("input.tkg-search")
    search.fill("abs.1")
    search.press("Enter")  # the view centres it: the panel's half of the side
    node = lowered.locator('.tkg-node[data-name="abs.1"]')
    node.click()
    panel = lowered.locator(".tkg-panel")
    assert panel.is_visible()
    box, cover = node.bounding_box(), panel.bounding_box()
    view = lowered.locator(".tkg-viewport").bounding_box()
    assert view["x"] <= box["x"] and box["x"] + box["width"] <= cover["x"], (box, cover)
    assert lowered.get_attribute("data-cleared") == lowered.get_attribute("data-linked")
    shots = os.environ.get("TPUKIT_SHOTS")  # to look at: TPUKIT_SHOTS=folder pytest ...
    if shots:
        page.screenshot(path=os.path.join(shots, "diff_panel_clear.png"))
    assert not errors, errors
