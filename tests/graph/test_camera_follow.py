"""A group opened in the graph's view comes into view, in headless Chromium.

A group opens in place: its top-left stays where its closed box was, so the eye stays on
what it clicked (``graph_camera.js``, ``GraphCamera.follow``). Where the open group fits
there, nothing moves; where it runs past the view's edges, the view slides, and zooms out
only as far as needed and never below the readable scale, until the whole group shows; a
group bigger than the view even so shows its start. Each test puts the closed group where
opening it runs past an edge (a drag, a zoom, a shorter view), opens it and waits for the
camera's move to end (the root's ``data-camera``), never for a time. The MLP's optimized
step (`tests.graph.conftest.mlp_graph`); its ``dense_1`` scope opens to about 300 x 140
drawing units. The diff's ring on the other side is in test_diff_follow.py, whose
JupyterLab-like page (the notebook scrolls in a panel) one test here borrows.
"""

import pytest

from tests._support.graph_page import LABEL_PX, Page, open_graph
from tests._support.notebook_page import ORIGIN
from tests.graph.test_diff_follow import LAB_PAGE

GROUP = "dense_1"

# The box of the drawn node or group `name` (its frame) and of the view, on the page.
_BOXES = """name => {
  const root = document.querySelector('.tkg-root');
  const view = root.querySelector('.tkg-viewport').getBoundingClientRect();
  const held = root.querySelector(`[data-name="${name}"] > rect`).getBoundingClientRect();
  const box = b => ({left: b.left, top: b.top, right: b.right, bottom: b.bottom});
  return {node: box(held), view: box(view), scale: +root.dataset.scale,
          follow: root.dataset.follow || null, hint: root.querySelector('.tkg-hint').textContent};
}"""
MARGIN = 16  # graph_shared.js: the view's margin around the drawing


def boxes(page, name=GROUP):
    return page.page.evaluate(_BOXES, name)


def open_group(page, name=GROUP, via=None):
    """Opens the closed group `name` with its toggle (or the panel's button, `via`) and
    waits until the camera stands still."""
    (via or page.page.locator(f'.tkg-node[data-name="{name}"] .tkg-toggle')).click()
    page.page.wait_for_selector(f'.tkg-group[data-name="{name}"]')
    page.page.wait_for_function(
        "() => document.querySelector('.tkg-root').dataset.camera !== 'moving'"
    )
    return boxes(page, name)


def drag(page, dx, dy):
    """Pans the view by (dx, dy) pixels: a drag from the corner of the view it moves away
    from, so that the pointer stays in the view."""
    view = boxes(page)["view"]
    x = view["left"] + 6 if dx >= 0 else view["right"] - 6
    y = view["top"] + 6 if dy >= 0 else view["bottom"] - 6
    page.page.mouse.move(x, y)
    page.page.mouse.down()
    page.page.mouse.move(x + dx, y + dy, steps=4)
    page.page.mouse.up()


def inside(box, view, margin=MARGIN - 1):
    return (
        box["left"] >= view["left"] + margin
        and box["top"] >= view["top"] + margin
        and box["right"] <= view["right"] - margin
        and box["bottom"] <= view["bottom"] - margin
    )


def corner(box):
    return box["left"], box["top"]


def near(a, b, tolerance=1.0):
    return all(abs(p - q) <= tolerance for p, q in zip(a, b))


def test_a_group_that_fits_where_it_opens_keeps_the_clicked_box_still(browser, mlp_graph):
    page = open_graph(browser, [mlp_graph], "notebook")
    closed = boxes(page)
    opened = open_group(page)
    assert opened["follow"] == "kept"
    assert near(corner(opened["node"]), corner(closed["node"]))
    assert opened["scale"] == closed["scale"]
    assert page.errors == []


@pytest.mark.parametrize("mode", ["standalone", "notebook"])
def test_a_group_opened_past_the_right_and_bottom_edges_slides_into_view(browser, mlp_graph, mode):
    page = open_graph(browser, [mlp_graph], mode)
    closed = boxes(page)
    node, view = closed["node"], closed["view"]
    drag(page, view["right"] - 30 - node["right"], view["bottom"] - 30 - node["bottom"])
    closed = boxes(page)
    assert inside(closed["node"], closed["view"])  # the closed box, near the corner
    opened = open_group(page)
    assert inside(opened["node"], opened["view"]), opened
    assert opened["follow"] == "moved"
    assert opened["scale"] == closed["scale"]  # it fits at this scale: a slide, no zoom
    # closing it moves nothing: the closed box takes the open group's top-left
    page.page.locator(f'.tkg-group[data-name="{GROUP}"] .tkg-header .tkg-toggle').click()
    page.page.wait_for_selector(f'.tkg-node[data-name="{GROUP}"]')
    shut = boxes(page)
    assert near(corner(shut["node"]), corner(opened["node"])) and shut["scale"] == opened["scale"]
    assert page.page.locator(".tkg-root").get_attribute("data-camera") == "still"
    assert page.errors == []


def test_a_group_opened_from_the_panel_lands_clear_of_the_panel(browser, mlp_graph):
    page = open_graph(browser, [mlp_graph], "notebook")
    closed = boxes(page)
    node, view = closed["node"], closed["view"]
    drag(page, view["right"] - 30 - node["right"], 0)
    page.page.locator(f'.tkg-node[data-name="{GROUP}"]').click(position={"x": 60, "y": 18})
    panel = page.page.locator(".tkg-panel")
    assert panel.is_visible()
    button = panel.locator(".tkg-panel-toggle")
    button.focus()  # the keyboard's way: Tab to the panel's button, then Enter
    opened = open_group(page, via=_Enter(button))
    room = dict(opened["view"], right=panel.bounding_box()["x"])
    assert inside(opened["node"], room) and opened["follow"] == "moved", (opened, room)
    assert page.errors == []


class _Enter:
    """A locator's ``click`` that presses Enter on it instead (a keyboard user)."""

    def __init__(self, locator):
        self.locator = locator

    def click(self):
        self.locator.press("Enter")


def test_a_group_too_big_at_this_scale_zooms_out_only_as_far_as_it_needs(browser, mlp_graph):
    page = open_graph(browser, [mlp_graph], "notebook")
    toggle = page.page.locator(f'.tkg-node[data-name="{GROUP}"] .tkg-toggle').bounding_box()
    page.page.mouse.move(toggle["x"] + 7, toggle["y"] + 7)
    page.page.keyboard.down("Control")
    for _ in range(4):  # zoom in about the toggle: it stays under the pointer
        page.page.mouse.wheel(0, -250)
    page.page.keyboard.up("Control")
    page.page.wait_for_function(
        "() => document.querySelector('.tkg-root').dataset.scale === '4.000'"
    )
    opened = open_group(page)
    view, box = opened["view"], opened["node"]
    assert inside(box, view), opened
    assert opened["follow"] == "moved"
    assert 1 <= opened["scale"] < 4
    # as far as needed: the group fills the view's width or height, margins kept
    room = (view["right"] - view["left"] - 2 * MARGIN, view["bottom"] - view["top"] - 2 * MARGIN)
    size = (box["right"] - box["left"], box["bottom"] - box["top"])
    assert min(room[0] - size[0], room[1] - size[1]) < 2, (room, size)
    assert page.errors == []


def test_a_group_bigger_than_the_view_at_a_readable_scale_shows_its_start(browser, mlp_graph):
    page = open_graph(browser, [mlp_graph], "notebook")
    closed = boxes(page)
    node, view = closed["node"], closed["view"]
    drag(page, view["left"] + 60 - node["left"], view["top"] + 40 - node["top"])
    page.page.locator(".tkg-viewport").evaluate("v => { v.style.height = '150px'; }")
    opened = open_group(page)
    view, box = opened["view"], opened["node"]
    assert view["bottom"] - view["top"] == 150
    # too tall: its top (header, first ranks) at the view's top; it fits the width, and its
    # left edge, in the view, stays where the closed box's was
    assert near(corner(box), (view["left"] + 60, view["top"] + MARGIN)), opened
    assert opened["follow"] == "start"
    assert page.page.evaluate(LABEL_PX) >= 11  # never below the readable scale
    assert f"{GROUP} is bigger than the view" in opened["hint"]
    drag(page, -20, -20)  # the user moves: the hint says how to zoom again
    assert "bigger" not in boxes(page)["hint"]
    assert page.errors == []


def open_below_the_fold(browser, graph):
    """`graph` in a notebook that scrolls in a panel, in a window 600 px high, scrolled so
    that the view starts 60 px down: its foot, 620 px down, lies below the window's."""
    page = Page(browser, {"/lab.html": LAB_PAGE})
    page.page.set_viewport_size({"width": 1200, "height": 600})
    page.page.goto(f"{ORIGIN}/lab.html")
    page.page.evaluate("html => window.showOutput(html)", graph._repr_html_())
    page.ready()
    page.page.evaluate(
        """() => {
      const top = document.querySelector('.tkg-viewport').getBoundingClientRect().top;
      document.getElementById('panel').scrollTop += top - 60; }"""
    )
    return page


def test_a_group_opened_above_the_notebooks_fold_stays_above_it(browser, mlp_graph):
    page = open_below_the_fold(browser, mlp_graph)
    closed = boxes(page)
    node, view = closed["node"], closed["view"]
    assert abs(view["top"] - 60) < 1 and view["bottom"] > 600
    drag(page, 0, view["top"] + 420 - node["top"])  # its top 420 px down the view
    opened = open_group(page)
    # it would fit the view there, but not above the fold: it slides up, to show it whole
    assert opened["node"]["bottom"] <= 600 - MARGIN + 1 and opened["node"]["top"] >= 60, opened
    assert opened["follow"] == "moved" and opened["scale"] == closed["scale"]
    assert page.errors == []


def test_search_centres_its_hit_in_the_part_of_the_view_above_the_fold(browser, mlp_graph):
    page = open_below_the_fold(browser, mlp_graph)
    search = page.page.locator(".tkg-search")
    search.fill("dense_2")
    search.press("Enter")
    hit = page.page.locator(".tkg-root .tkg-hit").bounding_box()
    centre = hit["y"] + hit["height"] / 2
    assert abs(centre - (60 + 600) / 2) < 5, hit  # not 60 + 620 / 2, the whole view's
    assert page.errors == []
