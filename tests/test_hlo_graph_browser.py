"""The HLO graph clicked in headless Chromium, as a saved page and as a notebook output.

Each test loads the HTML twice over: as the page `HloGraph.save` writes, and as a
fragment put into a page the way JupyterLab does it (``innerHTML``, then every
``<script>`` re-created so that it runs). Without Chromium these tests skip,
except under CI=true, where they fail.
"""

import os
import pathlib
import re

import jax
import jax.numpy as jnp
import pytest

from tpukit.hlo import parse_hlo
from tpukit.hlo._graph_view import graph

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
EVIL = "</script><img src=x onerror=alert(1)>"
ORIGIN = "http://tpukit.test"
NOTEBOOK_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>
<div id="cells"></div>
<script>
// What JupyterLab's HTML renderer does with a text/html output.
window.showOutput = function (html) {
  var cell = document.createElement("div");
  cell.className = "jp-OutputArea-output";
  cell.innerHTML = html;
  cell.querySelectorAll("script").forEach(function (old) {
    var script = document.createElement("script");
    script.textContent = old.textContent;
    old.parentNode.replaceChild(script, old);
  });
  document.getElementById("cells").appendChild(cell);
};
</script></body></html>"""


def mlp_loss(x, w1, w2):
    with jax.named_scope("dense_1"):
        h = jax.nn.relu(x @ w1)
    with jax.named_scope("dense_2"):
        return jnp.tanh(h @ w2).sum()


def mlp_hlo() -> str:
    args = (jnp.ones((8, 16)), jnp.ones((16, 32)), jnp.ones((32, 4)))
    return jax.jit(jax.grad(mlp_loss, argnums=(1, 2))).lower(*args).compile().as_text()


@pytest.fixture(scope="module")
def browser():
    if not pathlib.Path(CHROMIUM).exists():
        message = f"Chromium is not installed at {CHROMIUM} (apt-get install -y chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def mlp_graph():
    return graph(mlp_hlo(), title="mlp", stage="optimized")


class Page:
    """A Playwright page served from a fake origin, recording requests, errors and dialogs."""

    def __init__(self, browser, pages: dict[str, str]):
        self.page = browser.new_page(viewport={"width": 1200, "height": 800})
        self.requests, self.errors, self.dialogs = [], [], []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on(
            "console",
            lambda m: self.errors.append(m.text) if m.type in ("error", "warning") else None,
        )
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

        def serve(route):
            path = route.request.url[len(ORIGIN) :]
            if path in pages:
                route.fulfill(status=200, content_type="text/html", body=pages[path])
            else:
                route.fulfill(status=404, body="")

        self.page.route("**/*", serve)

    def ready(self, count: int = 1):
        self.page.wait_for_function(
            f"document.querySelectorAll('.tkg-root[data-state=ready]').length === {count}",
            timeout=15000,
        )
        return self

    def nodes(self, root=".tkg-root") -> int:
        return int(self.page.locator(root).first.get_attribute("data-nodes"))


def open_graph(browser, graphs, mode: str) -> Page:
    """Open one or more HloGraphs as a saved page ("standalone") or as notebook outputs."""
    if mode == "standalone":
        assert len(graphs) == 1
        page = Page(browser, {"/graph.html": graphs[0].to_html()})
        page.page.goto(f"{ORIGIN}/graph.html")
    else:
        page = Page(browser, {"/notebook.html": NOTEBOOK_PAGE})
        page.page.goto(f"{ORIGIN}/notebook.html")
        for g in graphs:
            page.page.evaluate("html => window.showOutput(html)", g._repr_html_())
    return page.ready(len(graphs))


MODES = ["standalone", "notebook"]


def node(page: Page, name: str):
    return page.page.locator(f'.tkg-root [data-name="{name}"]').first


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
def test_a_fusion_opens_in_place_and_closes(browser, mlp_graph, mode):
    page = open_graph(browser, [mlp_graph], mode)
    data = mlp_graph._data
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
def test_a_scope_group_closes_and_opens(browser, mlp_graph, mode):
    page = open_graph(browser, [mlp_graph], mode)
    data = mlp_graph._data
    scope = next(i for i in data.initial_open() if "dense_1" in data.label[i])
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
def test_clicking_a_node_shows_its_hlo_and_source_line(browser, mlp_graph, mode):
    page = open_graph(browser, [mlp_graph], mode)
    data = mlp_graph._data
    target = next(
        i
        for i, ins in enumerate(data.instr)
        if ins is not None
        and data.parent[i] in data.initial_open()
        and ins.opcode == "fusion"
        and ins.metadata.source_file.endswith("test_hlo_graph_browser.py")
    )
    node(page, data.label[target]).click(position={"x": 60, "y": 18})
    panel = page.page.locator(".tkg-panel")
    assert panel.is_visible()
    instr = data.instr[target]
    source = panel.locator('[data-field="source"]').inner_text()
    assert source.endswith(f"test_hlo_graph_browser.py:{instr.metadata.source_line}")
    assert panel.locator('[data-field="shape"]').inner_text() == str(instr.shape)
    assert panel.locator('[data-field="dtype"]').inner_text() == instr.shape.dtype
    assert "FLOP" in panel.locator('[data-field="FLOPs (est.)"]').inner_text()
    assert panel.locator('[data-field="contents"]').inner_text().endswith("instructions")
    assert panel.locator("pre.tkg-hlo").inner_text().startswith(f"%{instr.name} = ")
    panel.locator(".tkg-close").click()
    assert not panel.is_visible()


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
    source = page.page.locator('.tkg-panel [data-field="source"]').inner_text()
    assert source == f"/tmp/{EVIL}.py:2"
    assert EVIL in page.page.locator('.tkg-panel [data-field="op_name"]').inner_text()
    assert page.page.locator("img").count() == 0
    assert page.dialogs == [] and page.errors == []
    assert all(url.startswith(ORIGIN) for url in page.requests) and len(page.requests) == 1
