"""The diff's ring on the other side is in sight, in headless Chromium.

A click on a node of one side rings its match on the other and centres the match in that
side's view (``diff_view.js``, ``DiffSide.reveal``) -- in the part of it the page shows
(``GraphCamera.centerOn``): a side can be taller than the window (a tall first view; the
user dragged its resize handle), and the centre of the whole view can lie below the fold.
A side scrolled (nearly) out of sight has no such part: the page then scrolls -- the
notebook's scrolled panel, or the window of a saved page -- as little as shows the ringed
node, never the graph's own view. The lowered and optimized FFT of
``test_diff_fused_tpu`` (``abs.1`` is fused into ``add_add_fusion``) in a window 700 high.
"""

import pytest

from tests._support.notebook_page import ORIGIN, SHOW_OUTPUT, serve
from tests.graph.test_diff_fused_tpu import fft_view

# JupyterLab's notebook: the cells scroll inside a panel as tall as the window; the body,
# as JupyterLab's, has overflow hidden and no height (the window clips, not the body).
LAB_PAGE = (
    """<!DOCTYPE html><html><head><meta charset="utf-8"><style>
body {margin: 0; height: 0; overflow: hidden;} #panel {height: 100vh; overflow-y: auto;}
.cell {padding: 8px 16px 8px 60px;}</style></head><body><div id="panel">
<div class="cell" style="height: 300px">a cell above</div><div class="cell" id="out"></div>
<div class="cell" style="height: 1500px">a cell below</div></div><script>
"""
    + SHOW_OUTPUT
    + """</script></body></html>"""
)

# Where the ringed node of side b lies: its box, the window's height and the panel's box.
_RINGED = """() => {
  const ring = document.querySelector('.tkd-side[data-side="1"] .tkd-linked');
  const panel = document.getElementById('panel');
  const box = b => ({top: b.top, bottom: b.bottom});
  return {ring: ring && box(ring.getBoundingClientRect()), height: window.innerHeight,
          panel: panel ? box(panel.getBoundingClientRect()) : {top: 0, bottom: window.innerHeight},
          view: box(ring.closest('.tkg-viewport').getBoundingClientRect())};
}"""


def side_a_at(y):
    """Scrolls the page (the panel, or the window) so that side a's view starts y px down."""
    return f"""() => {{
  const panel = document.getElementById('panel');
  const top = document.querySelector('.tkd-side[data-side="0"] .tkg-viewport').getBoundingClientRect().top;
  if (panel) panel.scrollTop += top - {y}; else window.scrollBy(0, top - {y});
}}"""


def open_diff(browser, mode):
    view = fft_view()
    page = browser.new_page(viewport={"width": 1300, "height": 700})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    pages = {"/view.html": view.to_html(), "/lab.html": LAB_PAGE}
    serve(page, pages)
    if mode == "standalone":
        page.goto(f"{ORIGIN}/view.html")
    else:
        page.goto(f"{ORIGIN}/lab.html")
        page.evaluate("html => window.showOutput(html)", view._repr_html_())
    page.wait_for_function(
        "() => document.querySelectorAll('.tkd-side[data-state=ready]').length === 2"
    )
    return page, errors


@pytest.mark.parametrize("mode", ["notebook", "standalone"])
def test_the_ring_on_a_side_taller_than_the_window_is_centred_in_what_the_page_shows(browser, mode):
    page, errors = open_diff(browser, mode)
    tall = page.locator('.tkd-side[data-side="1"] .tkg-viewport')
    tall.evaluate("v => { v.style.height = '1600px'; }")  # as the user's drag of its handle
    page.evaluate(side_a_at(10))
    clicked = page.locator('.tkd-side[data-side="0"] .tkg-node[data-name="abs.1"]')
    box = clicked.bounding_box()
    assert 0 <= box["y"] and box["y"] + box["height"] <= 700  # in sight: the click scrolls nothing
    page.mouse.click(box["x"] + 30, box["y"] + 12)
    where = page.evaluate(_RINGED)
    ring, shown = where["ring"], where["panel"]
    assert page.locator('.tkd-side[data-side="1"] .tkd-linked').get_attribute("data-name") == (
        "add_add_fusion"
    )
    # its view runs below the window: the ring is centred in the part above the fold
    assert where["view"]["bottom"] > where["height"]
    assert shown["top"] <= ring["top"] and ring["bottom"] <= min(shown["bottom"], where["height"])
    assert page.locator('.tkd-side[data-side="1"]').get_attribute("data-scrolled") == "0"
    assert errors == []
    page.close()


@pytest.mark.parametrize("mode", ["notebook", "standalone"])
def test_a_ring_on_a_side_scrolled_nearly_out_of_sight_is_scrolled_into_sight(browser, mode):
    page, errors = open_diff(browser, mode)
    page.evaluate(side_a_at(600))  # the sides start 100 px above the window's foot
    clicked = page.locator('.tkd-side[data-side="0"] .tkg-node[data-name="x"]')
    box = clicked.bounding_box()
    assert box["y"] + box["height"] <= 700
    page.mouse.click(box["x"] + 30, box["y"] + 12)
    assert page.locator('.tkd-side[data-side="1"]').get_attribute("data-linked") != "-1"
    where = page.evaluate(_RINGED)
    ring, shown = where["ring"], where["panel"]
    assert shown["top"] <= ring["top"] and ring["bottom"] <= min(shown["bottom"], where["height"])
    assert int(page.locator('.tkd-side[data-side="1"]').get_attribute("data-scrolled")) > 0
    assert errors == []
    page.close()


@pytest.mark.parametrize("mode", ["notebook", "standalone"])
def test_a_table_rows_rings_below_the_window_are_scrolled_into_sight_keeping_the_row(browser, mode):
    page, errors = open_diff(browser, mode)
    page.evaluate(side_a_at(760))  # the sides start below the window: the table in sight
    row = page.locator(".tkd-table tbody tr").first
    before = row.bounding_box()
    assert before["y"] >= 0 and before["y"] + before["height"] <= 700
    row.click()
    for side in ("0", "1"):
        if page.locator(f'.tkd-side[data-side="{side}"] .tkd-linked').count():
            break
    scrolled = page.locator(f'.tkd-side[data-side="{side}"]').get_attribute("data-scrolled")
    assert int(scrolled or 0) > 0
    ring = page.locator(f'.tkd-side[data-side="{side}"] .tkd-linked').bounding_box()
    shown = page.evaluate(
        "() => { const p = document.getElementById('panel');"
        " const b = p ? p.getBoundingClientRect() : {top: 0, bottom: innerHeight};"
        " return {top: Math.max(0, b.top), bottom: Math.min(innerHeight, b.bottom)}; }"
    )
    assert shown["top"] <= ring["y"] and ring["y"] + ring["height"] <= shown["bottom"]
    after = row.bounding_box()  # the row clicked stays in sight: both fit in 700 px
    assert shown["top"] <= after["y"] and after["y"] + after["height"] <= shown["bottom"]
    assert errors == []
    page.close()
