"""The graph from the keyboard, in headless Chromium (``graph_keys.js``).

The drawing is one stop in the page's Tab order and a tree for screen readers (WAI-ARIA's
tree view): the arrows move among the nodes drawn, Right and Left open and close groups,
Enter shows a node's panel, Space opens or closes a group, Escape closes the panel; keys
pressed there never reach the notebook (JupyterLab's d-d would delete the cell). A node
moved to out of sight is slid into view; a click moves nothing. The MLP's optimized step
(`tests.graph.conftest.mlp_graph`): its ``dense_1`` scope holds the layer's fusions.
Every wait is on the page's state (the focus, ``data-camera``), never on time.
"""

from tests._support.graph_page import open_graph, screenshot

# What the keyboard is on: its node, name, role, level, state and ring.
_FOCUS = """() => {
  const at = document.activeElement, rect = at && at.querySelector(':scope > rect');
  const scene = document.querySelector('.tkg-scene');
  return {inside: scene.contains(at), node: at.getAttribute('data-node'),
          name: at.getAttribute('data-name'), role: at.getAttribute('role'),
          level: +at.getAttribute('aria-level'), expanded: at.getAttribute('aria-expanded'),
          label: at.getAttribute('aria-label'),
          stops: scene.querySelectorAll('[tabindex="0"]').length,
          dashed: rect ? getComputedStyle(rect).strokeDasharray : null};
}"""
# Counts the keys that reach the page past the drawing (a notebook's shortcuts listen there).
_LISTEN = (
    "() => { window.leaked = []; document.addEventListener('keydown', e => leaked.push(e.key)); }"
)
_VIEW = "() => document.querySelector('.tkg-scene').getAttribute('transform')"


def focus(page):
    return page.page.evaluate(_FOCUS)


def tab_into_drawing(page):
    page.page.locator(".tkg-search").focus()
    for _ in range(6):
        page.page.keyboard.press("Tab")
        if focus(page)["inside"]:
            return focus(page)
    raise AssertionError("Tab never reached the drawing")


def press(page, key, until=None):
    """Presses ``key`` (once, or until ``until(focus)`` holds, at most 40 times)."""
    for _ in range(40 if until else 1):
        page.page.keyboard.press(key)
        page.page.wait_for_function(
            "() => document.querySelector('.tkg-root').dataset.camera !== 'moving'"
        )
        if until is None or until(focus(page)):
            return focus(page)
    raise AssertionError(f"{key} never reached the node asked for")


def test_the_keyboard_walks_the_drawing_as_a_tree_and_keeps_its_keys_from_the_notebook(
    browser, mlp_graph
):
    page = open_graph(browser, [mlp_graph], "notebook")
    at = tab_into_drawing(page)
    assert at["node"] == "0" and at["role"] == "treeitem" and at["level"] == 1
    assert at["stops"] == 1  # the drawing is one stop in the Tab order
    assert page.page.locator(".tkg-scene").get_attribute("role") == "tree"
    page.page.evaluate(_LISTEN)
    at = press(page, "ArrowDown")
    assert at["level"] == 2 and at["node"] != "0" and at["stops"] == 1
    assert at["dashed"] not in (None, "none")  # the keyboard's ring shows
    at = press(page, "ArrowDown", until=lambda f: f["name"] == "dense_1")
    assert at["expanded"] == "false" and "dense_1" in at["label"]
    level = at["level"]
    at = press(page, " ")  # Space opens the group; the focus stays on it
    assert page.page.locator('.tkg-group[data-name="dense_1"]').count() == 1
    assert at["name"] == "dense_1" and at["expanded"] == "true" and at["stops"] == 1
    at = press(page, "ArrowRight")  # into the open group
    assert at["level"] == level + 1
    at = press(page, "Enter")  # its panel, with its HLO
    panel = page.page.locator(".tkg-panel")
    assert panel.is_visible() and f"%{at['name']} =" in page.page.locator(".tkg-hlo").inner_text()
    press(page, "Escape")
    assert not panel.is_visible()
    at = press(page, "ArrowLeft")  # to the group it is in
    assert at["name"] == "dense_1" and at["expanded"] == "true"
    at = press(page, "ArrowLeft")  # closes it
    assert page.page.locator('.tkg-group[data-name="dense_1"]').count() == 0
    assert at["name"] == "dense_1" and at["expanded"] == "false"
    assert press(page, "Home")["node"] == "0"
    assert page.page.evaluate("() => window.leaked") == []
    page.page.keyboard.press("Alt+s")  # (the page's own: Ctrl+S saves, Shift+Enter runs)
    assert page.page.evaluate("() => window.leaked") == ["Alt", "s"]
    screenshot(page, "keys_ring")
    assert page.errors == []
    page.page.close()


def test_a_node_moved_to_out_of_sight_slides_into_view_and_a_click_moves_nothing(
    browser, mlp_graph
):
    page = open_graph(browser, [mlp_graph], "standalone")
    view = page.page.locator(".tkg-viewport").bounding_box()
    page.page.mouse.move(view["x"] + 20, view["y"] + 20)  # the drawing dragged off to the right
    page.page.mouse.down()
    page.page.mouse.move(view["x"] + view["width"] - 40, view["y"] + 20, steps=4)
    page.page.mouse.up()
    tab_into_drawing(page)
    before = page.page.evaluate(_VIEW)
    at = press(page, "End")  # the last node drawn: out of sight now
    box = page.page.locator(f'.tkg-scene [data-node="{at["node"]}"] > rect').first.bounding_box()
    assert page.page.evaluate(_VIEW) != before
    assert view["x"] <= box["x"] and box["x"] + min(box["width"], 100) <= view["x"] + view["width"]
    assert view["y"] <= box["y"] and box["y"] + min(box["height"], 30) <= view["y"] + view["height"]
    still = page.page.evaluate(_VIEW)
    page.page.locator(f'.tkg-scene [data-node="{at["node"]}"] > rect').first.click()
    assert page.page.evaluate(_VIEW) == still
    assert page.page.locator(".tkg-root").get_attribute("data-camera") == "still"
    assert focus(page)["node"] == at["node"] and focus(page)["stops"] == 1
    assert page.errors == []
    page.page.close()
