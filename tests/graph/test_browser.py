"""The HLO graph clicked in headless Chromium, as a saved page and as a notebook output.

Each test loads the HTML twice over: as the page `HloGraph.save` writes, and as a
fragment put into a page the way JupyterLab does it (``innerHTML``, then every
``<script>`` re-created so that it runs). How the graph looks in a notebook (scrolling,
resized, themed, in Colab's iframe, the tutorial's step) is in graph/test_in_notebook.py.
Without Chromium these tests skip, except under CI=true, where they fail.
"""

import base64
import json
import re
import zlib

import jax
import jax.numpy as jnp
import pytest

from tests._support.fixtures import mlp_hlo
from tests._support.graph_page import Page, node, open_graph, screenshot
from tests._support.notebook_page import (
    NOTEBOOK_PAGE,
    ORIGIN,
)
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
    texts = read_wire(zlib.decompress(base64.b64decode("".join(forward_graph._payload()))))["text"]
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
