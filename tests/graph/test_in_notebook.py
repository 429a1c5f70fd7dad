"""The HLO graph as a notebook user meets it, in headless Chromium: in a scrolling
JupyterLab-like notebook, narrow or hidden when drawn, resized, in light and dark themes,
in the sandboxed iframe Colab puts outputs in, and the tutorial's own training step.
Each check writes a screenshot to ``out/screenshots/graph_*.png``. (Clicking, search,
the panel and stale payloads are in graph/test_browser.py.) Without Chromium these tests
skip, except under CI=true, where they fail.
"""

import html
import re

import jax
import pytest
from flax import nnx

import tpukit
from tests._support.graph_page import LABEL_PX, Page, screenshot
from tests._support.notebook_page import (
    FIRST_VIEW_DRAWN,
    JUPYTERLAB_THEMES,
    LAB_PAGE,
    NOTEBOOK_PAGE,
    ORIGIN,
)
from tests._support.steps import tutorial_train_step
from tpukit.graph._first_view import first_view

SCALE = "() => +document.querySelector('.tkg-root').dataset.scale"
TRANSFORM = "() => document.querySelector('.tkg-scene').getAttribute('transform')"
SCROLL = "() => document.getElementById('panel').scrollTop"
EDGE_DIRECTIONS = """() => {
  let down = 0, up = 0;
  for (const p of document.querySelectorAll('.tkg-root path.tkg-edge')) {
    const a = p.getPointAtLength(0), b = p.getPointAtLength(p.getTotalLength());
    if (b.y > a.y) down++; else up++;
  }
  return [down, up];
}"""
LEGEND_OVERLAPS = """() => {
  const legend = document.querySelector('.tkg-legend').getBoundingClientRect();
  const view = document.querySelector('.tkg-viewport').getBoundingClientRect();
  let shown = 0, overlaps = 0;
  for (const rect of document.querySelectorAll('.tkg-node rect.tkg-box')) {
    const b = rect.getBoundingClientRect();  // the part of the box inside the drawing's clip
    const x0 = Math.max(b.left, view.left), x1 = Math.min(b.right, view.right);
    const y0 = Math.max(b.top, view.top), y1 = Math.min(b.bottom, view.bottom);
    if (x1 <= x0 || y1 <= y0) continue;
    shown++;
    if (x0 < legend.right && x1 > legend.left && y0 < legend.bottom && y1 > legend.top) overlaps++;
  }
  return {shown, overlaps, below: legend.top >= view.bottom - 0.5};
}"""
COLOURS = """() => {
  const root = document.querySelector('.tkg-root'), input = root.querySelector('.tkg-search');
  const nodes = Array.from(root.querySelectorAll('.tkg-node'), n => [
    getComputedStyle(n.querySelector('rect.tkg-box')).fill,
    getComputedStyle(n.querySelector('text')).fill,
    getComputedStyle(n.querySelector('text.tkg-sub')).fill]);
  return {paper: getComputedStyle(root).backgroundColor,
          canvas: getComputedStyle(root.querySelector('.tkg-viewport')).backgroundColor,
          ink: getComputedStyle(root.querySelector('.tkg-title')).color,
          field: getComputedStyle(input).backgroundColor,
          placeholder: getComputedStyle(input, '::placeholder').color, nodes};
}"""


class Mlp(nnx.Module):
    """The MNIST MLP of notebook 01 (784-128-64-10, ReLU), here so that no zoo change can
    move this test's target."""

    def __init__(self, rngs: nnx.Rngs):
        self.dense_1 = nnx.Linear(784, 128, rngs=rngs)
        self.dense_2 = nnx.Linear(128, 64, rngs=rngs)
        self.dense_3 = nnx.Linear(64, 10, rngs=rngs)

    def __call__(self, x):
        x = jax.nn.relu(self.dense_1(x))
        return self.dense_3(jax.nn.relu(self.dense_2(x)))


def mlp_train_step():
    """The training step of notebook 01: an MLP, optax Adam, compiled by tpukit."""
    model = Mlp(nnx.Rngs(0))
    train_step, opt_state = tutorial_train_step(model)
    x, y = tpukit.shape("f32[128,784]"), tpukit.shape("s32[128]")
    return tpukit.compile(train_step, model, opt_state, x, y)


@pytest.fixture(scope="module")
def step_graph():
    return mlp_train_step().graph()


def open_in_lab(browser, g, *, theme="light", scheme="light", body=None, hidden=False, width=1000):
    """The graph as the output of a cell in a JupyterLab-like page that scrolls in a panel."""
    if body is None:
        body = f'data-jp-theme-light="{"true" if theme == "light" else "false"}"'
    variables = JUPYTERLAB_THEMES.get(theme, "")
    page = Page(
        browser,
        {"/lab.html": LAB_PAGE % {"variables": variables, "body": body}},
        color_scheme=scheme,
    )
    page.page.goto(f"{ORIGIN}/lab.html")
    page.page.evaluate(
        "([w, hidden]) => { const out = document.getElementById('out');"
        " out.style.width = w + 'px'; out.style.display = hidden ? 'none' : 'block'; }",
        [width, hidden],
    )
    page.page.evaluate("html => window.showOutput(html)", g._repr_html_())
    return page.ready()


def set_output(page: Page, **style):
    page.page.evaluate(
        "style => Object.assign(document.getElementById('out').style, style)",
        {k: str(v) for k, v in style.items()},
    )


def settle(page: Page):
    """Wait two frames: ResizeObserver callbacks and scrolling run before the second."""
    page.page.evaluate(
        "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
    )


def contrast(first: str, second: str) -> float:
    """WCAG contrast ratio of two CSS colours written as rgb()/rgba() (alpha ignored)."""

    def luminance(colour: str) -> float:
        channels = [float(c) / 255 for c in re.findall(r"[\d.]+", colour)[:3]]
        linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(first), luminance(second)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def drawn_as(g, node: int) -> int:
    """The node that stands for ``node`` in the first view: itself or its closed ancestor."""
    data = g._data
    shown, _ = data.visible(set(first_view(data)))
    while node not in shown:
        node = data.parent[node]
    return node


def test_the_wheel_scrolls_the_notebook_until_ctrl_or_a_click(browser, mlp_graph):
    page = open_in_lab(browser, mlp_graph)
    p = page.page
    hint = p.locator(".tkg-hint")
    assert hint.is_visible() and "Ctrl+scroll or click to zoom" in hint.inner_text()

    def corner():
        """Scroll the notebook back to the top; the canvas's empty top-left corner."""
        p.evaluate("() => { document.getElementById('panel').scrollTop = 0; }")
        settle(page)
        view = p.locator(".tkg-viewport").bounding_box()
        return view["x"] + 8, view["y"] + 8

    def wheel_scrolls_the_page():
        scale, before = p.evaluate(SCALE), p.evaluate(SCROLL)
        p.mouse.wheel(0, 100)
        p.wait_for_function(f"({SCROLL})() > {before}")
        return p.evaluate(SCALE) == scale

    def wheel_zooms():
        scale, before = p.evaluate(SCALE), p.evaluate(SCROLL)
        p.mouse.wheel(0, -100)
        settle(page)
        return p.evaluate(SCALE) > scale and p.evaluate(SCROLL) == before

    p.mouse.move(*corner())
    assert wheel_scrolls_the_page()  # a plain wheel: the notebook scrolls, the zoom stays

    p.mouse.move(*corner())
    p.keyboard.down("Control")  # Ctrl + wheel zooms, the notebook stays
    assert wheel_zooms()
    p.keyboard.up("Control")

    pinched = p.evaluate(  # a touchpad pinch: small wheel steps with ctrlKey
        """() => { const vp = document.querySelector('.tkg-viewport'), r = vp.getBoundingClientRect();
          const before = +document.querySelector('.tkg-root').dataset.scale;
          const event = new WheelEvent('wheel', {deltaY: -6, ctrlKey: true, bubbles: true,
            cancelable: true, clientX: r.left + 50, clientY: r.top + 50});
          vp.dispatchEvent(event);
          return [event.defaultPrevented, +document.querySelector('.tkg-root').dataset.scale / before]; }"""
    )
    assert pinched[0] and 1.03 < pinched[1] < 1.1

    p.mouse.click(*corner())  # a click inside: now a plain wheel zooms
    assert "Esc" in hint.inner_text()
    assert wheel_zooms()
    screenshot(page, "wheel_zoom_after_click")
    p.keyboard.press("Escape")  # Escape gives the wheel back to the notebook
    assert "Ctrl+scroll or click to zoom" in hint.inner_text()
    assert wheel_scrolls_the_page()

    x, y = corner()
    p.mouse.click(x, y)
    p.mouse.move(x, y - 30)  # leaving the drawing ends it too
    p.mouse.move(x, y)
    assert wheel_scrolls_the_page()

    p.mouse.click(*corner())
    p.mouse.click(x, y - 30)  # and so does a click elsewhere
    p.mouse.move(x, y)
    assert wheel_scrolls_the_page()
    assert page.errors == []


def test_first_view_of_a_training_step_is_readable_flows_down_and_keeps_the_legend_aside(
    browser, step_graph
):
    page = open_in_lab(browser, step_graph)
    p = page.page
    screenshot(page, "first_view_light")
    assert p.evaluate(LABEL_PX) >= 11
    legend = p.evaluate(LEGEND_OVERLAPS)
    assert legend["shown"] >= 5 and legend["overlaps"] == 0 and legend["below"]

    down, up = p.evaluate(EDGE_DIRECTIONS)
    assert down >= 0.9 * (down + up), (down, up)
    data, entry = step_graph._data, step_graph.module.entry
    ids = {instr.name: i for i, instr in enumerate(data.instr) if instr is not None}
    batch = next(x for x in entry.parameters if str(x.shape).startswith("f32[128,784]"))
    loss = entry.get(entry.root.operands[0])

    def box(name):
        node = drawn_as(step_graph, ids[name])
        return p.locator(f'.tkg-root [data-node="{node}"] rect').first.bounding_box()

    assert box(batch.name)["y"] + box(batch.name)["height"] <= box(loss.name)["y"]
    assert page.errors == []


def test_a_step_too_big_to_show_its_layers_opens_on_all_its_sections_readable(browser, step_graph):
    """Issue 24: the first view shows every section of the step at once, at a readable
    size, instead of a corner of one open pass; a pass opens on its layers in one click."""
    page = open_in_lab(browser, step_graph)
    p = page.page
    data = step_graph._data
    assert {"inputs", "forward", "backward", "outputs"} <= set(data.section.values())
    view = p.locator(".tkg-viewport").bounding_box()
    for group in data.section:
        box = p.locator(f'.tkg-root [data-node="{group}"]').first.bounding_box()
        assert view["x"] <= box["x"] and box["x"] + box["width"] <= view["x"] + view["width"]
        assert view["y"] <= box["y"] and box["y"] + box["height"] <= view["y"] + view["height"]
    assert p.evaluate(LABEL_PX) >= 11
    backward = next(g for g, name in data.section.items() if name == "backward")
    before = page.nodes()
    p.locator(f'.tkg-root .tkg-node[data-node="{backward}"] .tkg-toggle').click()
    assert page.nodes() == before - 1 + len(data.children[backward])
    p.locator(".tkg-reset").click()  # Collapse: the sections again
    assert page.nodes() == before and p.evaluate(LABEL_PX) >= 11
    assert page.errors == []


def test_title_names_the_program_and_its_stage_once(browser, step_graph):
    page = open_in_lab(browser, step_graph)
    assert page.page.locator(".tkg-title").inner_text() == "train_step"
    toolbar = page.page.locator(".tkg-toolbar").inner_text()
    assert toolbar.count("optimized") == 1, toolbar


def test_narrow_or_hidden_when_drawn_refits_when_resized_until_the_user_zooms(browser, step_graph):
    page = open_in_lab(browser, step_graph, width=320)  # drawn narrow: readable, not shrunk
    p = page.page
    assert p.evaluate(LABEL_PX) >= 11
    screenshot(page, "narrow_when_drawn")
    narrow = p.evaluate(TRANSFORM)
    set_output(page, width="1000px")  # widened: the ResizeObserver refits
    p.wait_for_function(f"({TRANSFORM})() !== {narrow!r}")
    settle(page)
    assert p.evaluate(LABEL_PX) >= 11
    frame = p.locator('.tkg-group[data-node="0"] rect.tkg-frame').bounding_box()
    view = p.locator(".tkg-viewport").bounding_box()
    assert view["x"] <= frame["x"] and frame["x"] + frame["width"] <= view["x"] + view["width"]
    assert view["y"] <= frame["y"] <= view["y"] + 20  # too tall for the view: its top shows
    screenshot(page, "refit_after_widening")

    p.keyboard.down("Control")  # once the user zooms, a resize leaves the view alone
    p.mouse.move(view["x"] + 40, view["y"] + 40)
    p.mouse.wheel(0, -100)
    p.keyboard.up("Control")
    zoomed = p.evaluate(TRANSFORM)
    set_output(page, width="700px")
    settle(page)
    assert p.evaluate(TRANSFORM) == zoomed
    p.locator(".tkg-fit").click()  # Fit shows the whole graph, and resizes refit again
    fitted = p.evaluate(TRANSFORM)
    assert fitted != zoomed
    set_output(page, width="1000px")
    p.wait_for_function(f"({TRANSFORM})() !== {fitted!r}")
    settle(page)
    frame = p.locator('.tkg-group[data-node="0"] rect.tkg-frame').bounding_box()
    view = p.locator(".tkg-viewport").bounding_box()
    assert view["x"] <= frame["x"] and frame["x"] + frame["width"] <= view["x"] + view["width"]
    assert frame["y"] + frame["height"] <= view["y"] + view["height"]
    p.locator(".tkg-reset").click()  # Collapse: the first view again
    assert p.evaluate(LABEL_PX) >= 11

    hidden = open_in_lab(browser, step_graph, hidden=True)  # drawn while hidden
    set_output(hidden, display="block")
    hidden.page.wait_for_function(f"({SCALE})() > 0")
    settle(hidden)
    assert hidden.page.evaluate(LABEL_PX) >= 11
    assert hidden.page.evaluate(TRANSFORM) == p.evaluate(TRANSFORM)  # as if drawn at this size
    screenshot(hidden, "hidden_when_drawn")
    assert page.errors == [] and hidden.errors == []


THEMES = {  # name: (page, prefers-color-scheme, dark expected)
    "dark_system": ("plain", "dark", True),
    "dark_jupyterlab": ("dark", "light", True),
    "dark_jupyterlab_without_theme_attribute": ("dark-no-attribute", "light", True),
    "light_jupyterlab_on_a_dark_system": ("light", "dark", False),
    "dark_vscode": ("vscode-dark", "light", True),
}


@pytest.mark.parametrize("name", THEMES)
def test_colours_follow_the_frontends_theme(browser, step_graph, name):
    kind, scheme, dark = THEMES[name]
    if kind == "plain":  # a page that says nothing, as Colab's transparent sandboxed outputs
        page = Page(browser, {"/notebook.html": NOTEBOOK_PAGE}, color_scheme=scheme)
        page.page.goto(f"{ORIGIN}/notebook.html")
        page.page.evaluate("html => window.showOutput(html)", step_graph._repr_html_())
        page.ready()
    elif kind == "vscode-dark":
        body = 'class="vscode-dark" style="--vscode-editor-background:#1e1e1e;--vscode-editor-foreground:#d4d4d4"'
        page = open_in_lab(browser, step_graph, theme="none", scheme=scheme, body=body)
    elif kind == "dark-no-attribute":
        page = open_in_lab(browser, step_graph, theme="dark", scheme=scheme, body="")
    else:
        page = open_in_lab(browser, step_graph, theme=kind, scheme=scheme)
    colours = page.page.evaluate(COLOURS)
    screenshot(page, name)
    white = "rgb(255, 255, 255)"
    assert (contrast(colours["paper"], white) > 10) is dark, colours["paper"]
    assert (contrast(colours["canvas"], white) > 10) is dark, colours["canvas"]
    if kind == "dark":
        assert colours["paper"] == "rgb(17, 17, 17)"  # --jp-layout-color0
    if kind == "vscode-dark":
        assert colours["paper"] == "rgb(30, 30, 30)"  # --vscode-editor-background
    assert contrast(colours["ink"], colours["paper"]) >= 7
    assert contrast(colours["placeholder"], colours["field"]) >= 3, colours
    assert colours["nodes"]
    for fill, text, sub in colours["nodes"]:
        assert contrast(text, fill) >= 4.5 and contrast(sub, fill) >= 4.5, (fill, text, sub)
    assert page.errors == []


def test_in_a_sandboxed_iframe_as_colab_shows_outputs(browser, forward_graph):
    document = (
        '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>'
        f"{forward_graph._repr_html_()}</body></html>"
    )
    outer = (
        '<!DOCTYPE html><html><body style="margin:0"><iframe sandbox="allow-scripts" '
        f'style="width:1100px;height:760px;border:0" srcdoc="{html.escape(document)}"></iframe>'
        "</body></html>"
    )
    page = Page(browser, {"/colab.html": outer})
    page.page.goto(f"{ORIGIN}/colab.html")
    frame = page.page.frame_locator("iframe")
    frame.locator(".tkg-root[data-state=ready]").wait_for(timeout=15000)
    data = forward_graph._data
    fusion = next(
        i
        for i in forward_graph._data.visible(set(first_view(data)))[0]
        if data.instr[i] is not None and data.instr[i].opcode == "fusion"
    )
    frame.locator(f'.tkg-node[data-node="{fusion}"]').click(position={"x": 60, "y": 18})
    panel = frame.locator(".tkg-panel")
    assert panel.is_visible()
    hlo_text = panel.locator("pre.tkg-hlo").inner_text()
    assert re.match(rf"(ROOT )?%{re.escape(data.label[fusion])} = ", hlo_text)
    assert frame.locator(".tkg-root").evaluate("r => r.getAttribute('data-scale')") is not None
    screenshot(page, "sandboxed_iframe")
    assert page.errors == [] and page.requests == [f"{ORIGIN}/colab.html"]


def test_the_programs_title_stays_inside_a_view_too_narrow_for_the_drawing(browser, step_graph):
    """Issue 20: a drawing wider than the view shows its busiest column, and the title
    heading the outermost box slides along instead of being cut at the left edge."""
    page = open_in_lab(browser, step_graph, width=320)
    p = page.page
    view = p.locator(".tkg-root .tkg-viewport").bounding_box()
    title = p.locator('.tkg-root .tkg-group[data-node="0"] .tkg-header text').first
    drawing = p.locator('.tkg-root .tkg-group[data-node="0"] .tkg-frame').first.bounding_box()
    assert drawing["x"] < view["x"], "the drawing is wider than the view and starts off screen"
    assert title.bounding_box()["x"] >= view["x"]
    assert page.errors == []


def test_the_tutorial_step_opens_with_its_linear_layers_drawn_as_counted(browser, step_graph):
    """Issue 38: the page draws what view_counts says, the forward pass open on its layers,
    every box inside the view at a readable size; a click on an instruction shows its HLO."""
    lab = open_in_lab(browser, step_graph)
    drawn = lab.page.evaluate(FIRST_VIEW_DRAWN)
    nodes, edges = step_graph.view_counts()
    assert (drawn["nodes"], drawn["boxes"], drawn["edges"]) == (nodes, nodes, edges)
    assert drawn["cut"] == 0 and drawn["scale"] >= 1.0
    page = lab.page
    screenshot(lab, "tutorial_step_first_view")
    for layer in ("dense_1 (Linear)", "dense_2 (Linear)", "dense_3 (Linear)"):
        assert page.locator(f'.tkg-root .tkg-node[data-name="{layer}"]').count() == 1, layer
    # an instruction drawn in the first view: a click shows its HLO text
    data = step_graph._data
    shown, _ = data.visible(set(first_view(data)))
    fusion = next(
        k for k in shown if data.instr[k] is not None and data.instr[k].opcode == "fusion"
    )
    page.locator(f'.tkg-root .tkg-node[data-node="{fusion}"]').click(position={"x": 60, "y": 18})
    text = page.locator(".tkg-panel pre.tkg-hlo").inner_text()
    assert text.startswith(f"%{data.instr[fusion].name} = ") or text.startswith("ROOT"), text
    assert lab.errors == []
