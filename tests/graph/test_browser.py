"""The HLO graph clicked in headless Chromium, as a saved page and as a notebook output.

Each test loads the HTML twice over: as the page `HloGraph.save` writes, and as a
fragment put into a page the way JupyterLab does it (``innerHTML``, then every
``<script>`` re-created so that it runs). The second half looks at the graph as a
notebook user meets it: in a scrolling notebook, narrow or hidden when drawn, resized,
in dark themes, and in the sandboxed iframe Colab puts outputs in; each of those checks
writes a screenshot to ``out/screenshots/graph_*.png``. Without Chromium these tests
skip, except under CI=true, where they fail.
"""

import base64
import html
import json
import pathlib
import re
import zlib

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

import tpukit
from tests._support.fixtures import mlp_hlo
from tests._support.graph_page import LABEL_PX, Page, node, open_graph
from tests._support.notebook_page import (
    FIRST_VIEW_DRAWN,
    JUPYTERLAB_THEMES,
    LAB_PAGE,
    NOTEBOOK_PAGE,
    ORIGIN,
)
from tests._support.steps import tutorial_train_step
from tpukit.display import format_bytes
from tpukit.graph._first_view import first_view
from tpukit.graph._graph_costs import node_costs
from tpukit.graph._graph_payload import graph_payload
from tpukit.graph._graph_schema import SCHEMA
from tpukit.graph._graph_wire import read_wire
from tpukit.hlo import diff_graph, graph, parse_hlo

EVIL = "</script><img src=x onerror=alert(1)>"


def mlp_loss(x, w1, w2):
    """`tests._support.fixtures.mlp_loss`, written here so that its source lines are in this file."""
    with jax.named_scope("dense_1"):
        h = jax.nn.relu(x @ w1)
    with jax.named_scope("dense_2"):
        return jnp.tanh(h @ w2).sum()


@pytest.fixture(scope="module")
def mlp_graph():
    return graph(mlp_hlo(), title="mlp", stage="optimized")


@pytest.fixture(scope="module")
def forward_graph():
    """The MLP's forward pass: its first view shows the scopes open and their fusions."""
    args = (jnp.ones((8, 16)), jnp.ones((16, 32)), jnp.ones((32, 4)))
    text = jax.jit(mlp_loss).lower(*args).compile().as_text()
    return graph(text, title="mlp", stage="optimized")


MODES = ["standalone", "notebook"]


@pytest.mark.parametrize("mode", MODES)
def test_opens_without_errors_or_requests_showing_the_collapsed_view(browser, mlp_graph, mode):
    page = open_graph(browser, [mlp_graph], mode)
    nodes, edges = mlp_graph.view_counts()
    assert page.nodes() == nodes
    assert page.page.locator(".tkg-root .tkg-node").count() == nodes
    assert page.page.locator(".tkg-root path.tkg-edge").count() == edges
    assert page.page.locator(".tkg-legend").inner_text().count("matmul") == 1
    assert page.errors == []
    assert page.requests == [f"{ORIGIN}/{'graph' if mode == 'standalone' else 'notebook'}.html"]


@pytest.mark.parametrize("mode", MODES)
def test_a_fusion_opens_in_place_and_closes(browser, forward_graph, mode):
    page = open_graph(browser, [forward_graph], mode)
    data = forward_graph._data
    fusion = next(
        i for i, ins in enumerate(data.instr) if ins is not None and ins.opcode == "fusion"
    )
    before = page.nodes()
    name = data.label[fusion]
    box = node(page, name)
    position = box.bounding_box()
    box.locator(".tkg-toggle").click()
    assert page.nodes() == before - 1 + len(data.children[fusion])
    group = page.page.locator(f'.tkg-group[data-node="{fusion}"]')
    assert group.count() == 1
    after = group.bounding_box()
    assert abs(after["x"] - position["x"]) < 2 and abs(after["y"] - position["y"]) < 2  # stays put
    group.locator(".tkg-header .tkg-toggle").click()
    assert page.nodes() == before
    assert page.errors == []


@pytest.mark.parametrize("mode", MODES)
def test_a_scope_group_closes_and_opens(browser, forward_graph, mode):
    page = open_graph(browser, [forward_graph], mode)
    data = forward_graph._data
    scope = next(i for i in first_view(data) if "dense_1" in data.label[i])
    before = page.nodes()
    page.page.locator(f'.tkg-group[data-node="{scope}"] .tkg-header .tkg-toggle').click()
    assert page.nodes() == before - len(data.children[scope]) + 1
    closed = page.page.locator(f'.tkg-node[data-node="{scope}"]')
    assert "dense_1" in closed.text_content()
    closed.dblclick()
    assert page.nodes() == before


@pytest.mark.parametrize("mode", MODES)
def test_search_expands_centres_and_highlights_the_hit(browser, mlp_graph, mode):
    page = open_graph(browser, [mlp_graph], mode)
    data = mlp_graph._data
    hidden = next(  # an instruction inside a fusion: hidden until its fusion opens
        i
        for i, ins in enumerate(data.instr)
        if ins is not None and data.instr[data.parent[i]] is not None
    )
    search = page.page.locator(".tkg-search")
    search.fill(data.label[hidden])
    search.press("Enter")
    hit = page.page.locator(f'.tkg-node.tkg-hit[data-node="{hidden}"]')
    assert hit.count() == 1
    box, view = hit.bounding_box(), page.page.locator(".tkg-viewport").bounding_box()
    centre = (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    assert abs(centre[0] - (view["x"] + view["width"] / 2)) < 5
    assert abs(centre[1] - (view["y"] + view["height"] / 2)) < 5
    assert re.match(r"1 of \d+", page.page.locator(".tkg-hits").inner_text())
    search.fill("no-such-op-anywhere")
    search.press("Enter")
    assert page.page.locator(".tkg-hits").inner_text() == "no match"


@pytest.mark.parametrize("mode", MODES)
def test_clicking_a_node_shows_its_hlo_and_source_line(browser, forward_graph, mode):
    page = open_graph(browser, [forward_graph], mode)
    data = forward_graph._data
    target = next(
        i
        for i, ins in enumerate(data.instr)
        if ins is not None
        and data.parent[i] in first_view(data)
        and ins.opcode == "fusion"
        and ins.metadata.source_file.endswith("test_browser.py")
    )
    node(page, data.label[target]).click(position={"x": 60, "y": 18})
    panel = page.page.locator(".tkg-panel")
    assert panel.is_visible()
    instr = data.instr[target]
    source = panel.locator('[data-field="source"]').inner_text()
    assert source.endswith(f"test_browser.py:{instr.metadata.source_line}")
    assert panel.locator('[data-field="shape"]').inner_text() == str(instr.shape)
    assert panel.locator('[data-field="dtype"]').inner_text() == instr.shape.dtype
    assert "FLOP" in panel.locator('[data-field="FLOPs (est.)"]').inner_text()
    assert panel.locator('[data-field="contents"]').inner_text().endswith("instructions")
    assert re.match(
        rf"(ROOT )?%{re.escape(instr.name)} = ", panel.locator("pre.tkg-hlo").inner_text()
    )
    panel.locator(".tkg-close").click()
    assert not panel.is_visible()


# Records the length of every text that a TextDecoder decodes, before the page's scripts run.
_COUNT_DECODED = """(() => {
  const decode = TextDecoder.prototype.decode;
  window.decodedLengths = [];
  TextDecoder.prototype.decode = function (bytes, options) {
    const text = decode.call(this, bytes, options);
    window.decodedLengths.push(text.length);
    return text;
  };
})();"""


def test_the_hlo_texts_are_decoded_when_the_panel_first_shows_one(browser, forward_graph):
    """The first view draws no instruction's HLO text, so the page leaves that column (a
    third of a training step's payload) undecoded until a panel shows one; then the text
    is the instruction's, and the column is decoded once."""
    html_page = forward_graph.to_html()
    texts = read_wire(zlib.decompress(base64.b64decode(forward_graph._payload_b64)))["text"]
    column = len("\n".join(texts))
    page = Page(browser, {"/graph.html": html_page})
    page.page.add_init_script(_COUNT_DECODED)
    page.page.goto(f"{ORIGIN}/graph.html")
    page.ready()
    assert column not in page.page.evaluate("window.decodedLengths")
    data = forward_graph._data
    opened = first_view(data)
    target = next(
        i for i, ins in enumerate(data.instr) if ins is not None and data.parent[i] in opened
    )
    node(page, data.label[target]).click(position={"x": 60, "y": 18})
    shown = page.page.locator(".tkg-panel pre.tkg-hlo").inner_text()
    # the HLO line names the instruction (a parameter's label is the argument's name)
    assert re.match(rf"(ROOT )?%{re.escape(data.instr[target].name)} = ", shown), shown
    node(page, data.label[target]).click(position={"x": 60, "y": 18})
    assert page.page.evaluate("window.decodedLengths").count(column) == 1
    assert page.errors == []


BIG_DOT_HLO = """HloModule big

ENTRY e {
  a = f32[65536,65536]{1,0} parameter(0)
  b = f32[65536,65536]{1,0} parameter(1)
  ROOT d = f32[65536,65536]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_figures_beyond_32_bits_reach_the_panel_exactly(browser):
    """Issue 24: the payload's numbers travel as typed arrays; FLOPs and bytes beyond 32
    bits (a float64 column) read in the panel exactly as Python counts them."""
    g = graph(BIG_DOT_HLO, title="big")
    data = g._data
    flops, nbytes, _ = node_costs(data)
    target = next(i for i, ins in enumerate(data.instr) if ins is not None and ins.opcode == "dot")
    assert flops[target] > 2**32 and nbytes[target] > 2**32
    page = open_graph(browser, [g], "standalone")
    node(page, data.label[target]).click(position={"x": 60, "y": 18})
    panel = page.page.locator(".tkg-panel")
    shown_flops = panel.locator('[data-field="FLOPs (est.)"]').inner_text()
    shown_bytes = panel.locator('[data-field="bytes (est.)"]').inner_text()
    assert shown_flops.startswith(f"{flops[target]:,} (")
    assert shown_bytes.startswith(f"{nbytes[target]:,} (")
    # in tpukit's one unit system for bytes, binary, as the tables beside the graph
    assert shown_bytes.endswith(f" ({format_bytes(nbytes[target])})"), shown_bytes
    assert panel.locator("pre.tkg-hlo").inner_text() == (
        "ROOT d = f32[65536,65536]{1,0} dot(a, b), lhs_contracting_dims={1}, "
        "rhs_contracting_dims={0}"
    )
    assert page.errors == []


# The words of each panel field that the browser drew on more than one line.
_WORDS_CUT = """() => Array.from(document.querySelectorAll('.tkg-panel dd')).flatMap(dd => {
  const text = dd.firstChild, cut = [];
  if (!text || text.nodeType !== Node.TEXT_NODE) return cut;
  for (const word of text.data.matchAll(/\\S+/g)) {
    const range = document.createRange();
    range.setStart(text, word.index);
    range.setEnd(text, word.index + word[0].length);
    const tops = new Set(Array.from(range.getClientRects(), rect => Math.round(rect.top)));
    if (tops.size > 1) cut.push(word[0]);
  }
  return cut;
})"""


def test_the_panel_wraps_its_sentences_between_words(browser, mlp_graph):
    """A note such as the inputs' ("the program's parameters: weights, optimizer state
    and data") wraps at its spaces in the narrow panel; only a name or shape too long for
    a line is cut inside itself."""
    page = open_graph(browser, [mlp_graph], "standalone")
    node(page, "inputs").click(position={"x": 60, "y": 18})
    note = page.page.locator('.tkg-panel [data-field="note"]')
    assert note.inner_text() == "the program's parameters: weights, optimizer state and data"
    assert note.evaluate("dd => dd.getClientRects()[0].height") > 20  # it does wrap
    assert page.page.evaluate(_WORDS_CUT) == []
    assert page.errors == []


def test_two_graphs_on_one_page_do_not_interfere(browser, mlp_graph):
    other = graph(mlp_hlo(), title="second")
    page = open_graph(browser, [mlp_graph, other], "notebook")
    roots = page.page.locator(".tkg-root")
    first_id, second_id = roots.nth(0).get_attribute("id"), roots.nth(1).get_attribute("id")
    assert first_id != second_id
    before = [page.nodes(f"#{first_id}"), page.nodes(f"#{second_id}")]
    page.page.locator(f"#{second_id} .tkg-node.tkg-collapsed .tkg-toggle").first.click()
    assert page.nodes(f"#{first_id}") == before[0]
    assert page.nodes(f"#{second_id}") > before[1]
    assert page.page.locator(f"#{first_id}-arrow").count() == 1
    assert page.page.locator(f"#{second_id}-arrow").count() == 1
    page.page.locator(f"#{first_id} .tkg-search").fill("dot")
    page.page.locator(f"#{first_id} .tkg-search").press("Enter")
    assert page.page.locator(f"#{second_id} .tkg-hit").count() == 0
    assert page.errors == []


@pytest.mark.parametrize("mode", MODES)
def test_names_and_paths_from_user_code_show_as_text_and_never_run(browser, mode):
    namespace = {"jnp": jnp}
    exec(compile("def f(x):\n    return jnp.sin(x) * 2\n", f"/tmp/{EVIL}.py", "exec"), namespace)
    f = namespace["f"]
    f.__name__ = f.__qualname__ = EVIL
    hlo = jax.jit(f).lower(jnp.ones(3)).compile().as_text()
    assert EVIL in hlo
    g = graph(hlo, title=EVIL)
    page = open_graph(browser, [g], mode)
    fusion = next(i.name for i in parse_hlo(hlo).entry if i.opcode == "fusion")
    node(page, fusion).click(position={"x": 60, "y": 18})
    assert page.page.locator(".tkg-title").inner_text().startswith(EVIL)
    path = page.page.locator('.tkg-panel [data-field="file"]').inner_text()
    assert path == f"/tmp/{EVIL}.py:2"  # the full path beside the short label
    source = page.page.locator('.tkg-panel [data-field="source"]').inner_text()
    assert source == parse_hlo(hlo).instruction(fusion).source_location
    assert EVIL in page.page.locator('.tkg-panel [data-field="op_name"]').inner_text()
    assert page.page.locator("img").count() == 0
    assert page.dialogs == [] and page.errors == []
    assert all(url.startswith(ORIGIN) for url in page.requests) and len(page.requests) == 1


# ---------------------------------------------------------------- as a notebook user meets it

SCREENSHOTS = pathlib.Path(__file__).resolve().parents[2] / "out" / "screenshots"
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


def screenshot(page: Page, name: str):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.page.screenshot(path=str(SCREENSHOTS / f"graph_{name}.png"))


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


def with_schema(payload: dict, schema: int | None) -> dict:
    """``payload`` as another tpukit wrote it: another schema, or (None) tpukit's first."""
    payload = dict(payload)
    del payload["schema"]
    if schema is None:
        payload["version"] = 1
    else:
        payload["schema"] = schema
    return payload


STALE = {"newer": (SCHEMA + 1, "a newer"), "older": (None, "an older")}


@pytest.mark.parametrize("age", STALE)
@pytest.mark.parametrize("mode", MODES)
def test_a_payload_of_another_schema_says_re_run_the_cell_instead_of_drawing(browser, age, mode):
    schema, words = STALE[age]
    g = graph(mlp_hlo(), title="mlp", stage="optimized")
    raw = json.dumps(with_schema(graph_payload(g._data, g.title, g.stage), schema)).encode()
    g._payload_b64 = base64.b64encode(zlib.compress(raw)).decode()
    page = open_graph_in_state(browser, g._repr_html_(), mode, "stale")
    line = page.page.locator(".tkg-root .tkg-stale")
    assert line.inner_text() == (
        f"This graph was made by {words} tpukit (payload schema {schema or 1}, "
        f"this viewer reads {SCHEMA}): re-run the cell."
    )
    assert line.is_visible() and line.bounding_box()["height"] < 40  # one line
    assert page.page.locator(".tkg-root svg, .tkg-root .tkg-fallback, .tkg-error").count() == 0
    screenshot(page, f"stale_schema_{age}_{mode}")
    assert page.errors == []


def test_a_diff_with_a_payload_of_another_schema_says_re_run_the_cell(browser):
    view = diff_graph(mlp_hlo(), mlp_hlo(), labels=("a", "b"))
    view._sides[1].payload = with_schema(view._sides[1].payload, SCHEMA + 1)
    page = open_graph_in_state(browser, view._repr_html_(), "notebook", "stale", root=".tkd-root")
    assert (
        page.page.locator(".tkd-root .tkd-stale")
        .inner_text()
        .startswith("This graph was made by a newer tpukit")
    )
    assert page.page.locator(".tkd-root svg, .tkd-root .tkd-fallback").count() == 0
    assert page.errors == []


def open_graph_in_state(browser, fragment: str, mode: str, state: str, root=".tkg-root") -> Page:
    """Open an HTML fragment as a saved page or a notebook output; wait for its root's state."""
    page = Page(browser, {"/notebook.html": NOTEBOOK_PAGE})
    if mode == "standalone":
        document = f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>{fragment}</body></html>'
        page.page.set_content(document)
    else:
        page.page.goto(f"{ORIGIN}/notebook.html")
        page.page.evaluate("html => window.showOutput(html)", fragment)
    page.page.locator(f"{root}[data-state={state}]").wait_for(timeout=15000)
    return page


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
