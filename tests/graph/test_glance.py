"""Issue 24: a large graph's first view, sent alone ahead of the whole graph (`_graph_glance`).

In a notebook kernel a graph of `GLANCE_INSTRUCTIONS` nodes or more is shown twice under one
display id: its glance (the first view's nodes alone, a fifth of the Python) at once, then
the whole graph in its place. These tests hold the glance to the whole payload on real
programs (the tutorial's training step and HLO that XLA wrote for others: see
the fixtures' docstrings in ``tests/hlo/test_open.py``), to the same drawing in Chromium, and the kernel to the two
messages, through a shell that says it is a kernel's and through a real kernel. Without
Chromium the browser tests skip, except under CI=true, where they fail.
"""

import re
import textwrap

import pytest
from IPython.core.displaypub import DisplayPublisher

from tests._support.data import HLO_DATA as DATA
from tests._support.fixtures import mlp_hlo
from tests._support.notebook_page import NOTEBOOK_PAGE
from tpukit.graph import _graph_view as graph_view
from tpukit.graph._first_view import BodiesLeftOut, first_view
from tpukit.graph._graph_data import GraphTree
from tpukit.graph._graph_glance import Glance
from tpukit.graph._graph_nodes import INSTRUCTION
from tpukit.graph._graph_page import standalone_page
from tpukit.graph._graph_payload import glance_wire, graph_wire
from tpukit.graph._graph_view import glance_data, graph_data, page_data
from tpukit.graph._graph_wire import decode_payload
from tpukit.hlo import graph, parse_hlo

# Real HLO that opens differently: a GPU module whose work is one call (entered), a GPU
# training step, collectives, and a VGG forward pass.
FILES = [
    "gpu_command_buffer.hlo",
    "dump/module_0007.jit_train_step.sm_9.0_gpu_after_optimizations.txt",
    "spmd_async_collectives.hlo",
    "gpu_vgg19_forward.hlo",
]
_PAYLOAD = re.compile(r'tpukitGraphView\(document\.getElementById\("[^"]+"\),"([^"]+)"')


@pytest.fixture(scope="module")
def step_graph(tutorial_step):
    """The MNIST tutorial's training step (an NNX MLP and optax Adam), compiled by tpukit."""
    return tutorial_step.graph()


@pytest.fixture(scope="module", params=["step", *FILES])
def any_graph(request, step_graph):
    if request.param == "step":
        return step_graph
    return graph(DATA / request.param, title=request.param)


def _resolved(wire: dict) -> dict[str, list]:
    """The wire's node columns with shapes, opcodes and interned strings written out."""
    strings = wire["strings"]
    out = {key: list(wire[key]) for key in ("kind", "label", "cat", "flops", "bytes", "count")}
    out["text"], out["textHead"] = list(wire["text"]), list(wire["textHead"])
    out["shape"] = [wire["shapes"][k] for k in wire["shape"]]
    out["op"] = [wire["ops"][k] for k in wire["op"]]
    for key in ("scope", "location", "source", "note"):
        out[key] = [strings[k] for k in wire[key]]
    return out


def test_a_glance_keeps_what_the_whole_payload_says_of_each_node_it_keeps(any_graph):
    data = any_graph._data
    whole = graph_wire(data, "t", "optimized")
    glance = glance_wire(data, "t", "optimized")
    kept = Glance(data).nodes
    n, m = len(data.kind), len(kept)
    assert glance["glance"] is True and 0 < m <= n
    # Every column of one value per node is cut to the kept nodes (none forgotten).
    per_node = {k for k, v in whole.items() if isinstance(v, list) and len(v) == n}
    assert per_node and all(len(glance[k]) == m for k in per_node), per_node
    full, cut = _resolved(whole), _resolved(glance)
    for key, values in full.items():
        assert cut[key] == [values[k] for k in kept], key
    assert [kept[p] if p >= 0 else -1 for p in glance["parent"]] == [
        whole["parent"][k] for k in kept
    ]
    assert [kept[k] for k in glance["open"]] == whole["open"]
    opened = set(whole["open"])
    closed = {k for k in kept if data.children[k] and k not in opened}
    assert {kept[k] for k in glance["more"]} == closed
    # Its own strings only: the whole graph's interned HLO scopes stay out.
    assert len(glance["strings"]) <= len(whole["strings"])


def _instructions(g) -> int:
    return sum(len(comp.instructions) for comp in g.module.computations.values())


def test_a_glance_made_from_entry_alone_is_the_same(any_graph):
    """A kernel makes its glance from ENTRY's tree alone, without what its fusions, calls
    and loops run (half the time or less to group a training step): the same nodes,
    figures, first view and edges as from the whole tree, or, where the first view
    enters a call (a GPU module's command buffer), a refusal that sends it to the whole."""
    data = any_graph._data
    lean = GraphTree(data.module, bodies=False)
    instruction_nodes = [kinds.count(INSTRUCTION) for kinds in (data.kind, lean.kind)]
    assert sum(lean.hidden.values()) == instruction_nodes[0] - instruction_nodes[1]
    entered = [k for k in first_view(data) if data.kind[k] == INSTRUCTION]
    if entered:
        with pytest.raises(BodiesLeftOut):
            first_view(lean)
        return
    assert glance_wire(lean, "t", "optimized") == glance_wire(data, "t", "optimized")


def test_a_step_glance_is_a_small_share_of_the_whole(step_graph):
    data = step_graph._data
    kept = Glance(data).nodes
    assert {"forward", "backward"} <= {data.section.get(k) for k in kept}
    assert GraphTree(data.module, bodies=False).hidden  # it has fusions to leave out
    assert 5 * len(kept) < len(data.kind), (len(kept), len(data.kind))
    assert len(step_graph._glance_html()) < len(step_graph._repr_html_())


def _scene(page) -> str:
    return page.evaluate("document.querySelector('.tkg-scene').outerHTML")


def _open(browser, fragment: str, state: str):
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_content(standalone_page("t", fragment))
    page.wait_for_selector(f".tkg-root[data-state={state}]", timeout=15000)
    return page, errors


def _same_root(fragment: str) -> str:
    """``fragment`` with its element's id (and so its arrowhead's) the same every time."""
    found = re.search(r'id="(tkg-[0-9a-f]+)"', fragment)
    return fragment.replace(found[1], "tkg-same")


@pytest.mark.parametrize("source", ["step", FILES[0], FILES[1]])
def test_a_glance_draws_the_first_view_as_the_whole_graph_does(browser, source, step_graph):
    g = step_graph if source == "step" else graph(DATA / source, title=source)
    kept = Glance(g._data).nodes
    whole, errors = _open(browser, _same_root(g._repr_html_()), "ready")
    glance, glance_errors = _open(browser, _same_root(g._glance_html()), "glance")
    renamed = re.sub(
        r'data-(node|from|to)="(\d+)"',
        lambda m: f'data-{m[1]}="{kept[int(m[2])]}"',
        _scene(glance),
    )
    assert renamed == _scene(whole)
    status = glance.locator(".tkg-status").inner_text()
    assert status.endswith("the rest is loading"), status
    assert errors == glance_errors == []
    whole.close()
    glance.close()


def test_a_glance_opens_what_it_holds_and_asks_for_the_whole_graph_for_more(browser, step_graph):
    data = step_graph._data
    glance = Glance(data)
    page, errors = _open(browser, step_graph._glance_html(), "glance")
    # the forward pass is open (its layers show); closed and opened again, it needs nothing
    forward = glance.new_id[next(g for g, name in data.section.items() if name == "forward")]
    nodes = int(page.locator(".tkg-root").get_attribute("data-nodes"))
    layers = len(data.children[glance.nodes[forward]])
    page.locator(f'.tkg-group[data-node="{forward}"] .tkg-toggle').first.click()
    assert int(page.locator(".tkg-root").get_attribute("data-nodes")) == nodes + 1 - layers
    page.locator(f'.tkg-node[data-node="{forward}"] .tkg-toggle').click()
    assert int(page.locator(".tkg-root").get_attribute("data-nodes")) == nodes
    closed = page.eval_on_selector_all(
        ".tkg-node.tkg-collapsed", "els => els.map(e => +e.dataset.node)"
    )
    layer = next(k for k in closed if glance.nodes[k] in data.children[glance.nodes[forward]])
    page.locator(f'.tkg-node[data-node="{layer}"] .tkg-toggle').click()
    assert page.locator(".tkg-root").get_attribute("data-waiting") == "1"
    assert "on its way from the kernel" in page.locator(".tkg-status").inner_text()
    assert int(page.locator(".tkg-root").get_attribute("data-nodes")) == nodes
    page.locator(".tkg-search").fill("dot")
    page.locator(".tkg-search").press("Enter")
    assert page.locator(".tkg-hits").inner_text() == ""
    assert errors == []
    page.close()


class _Published(DisplayPublisher):
    """A display publisher that keeps what it is given, as a kernel's sends it on."""

    def __init__(self):
        super().__init__()
        self.calls: list[dict] = []

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kw):
        self.calls.append({"data": data, "transient": transient, "update": update})


def _payload_of(html: str) -> dict:
    return decode_payload(_PAYLOAD.search(html)[1])


def test_a_kernel_shows_a_large_graph_as_a_glance_then_the_whole_graph_in_its_place(
    shell, monkeypatch, step_graph
):
    published = _Published()
    monkeypatch.setattr(shell, "kernel", object(), raising=False)
    monkeypatch.setattr(shell, "display_pub", published)
    monkeypatch.setattr(graph_view, "GLANCE_INSTRUCTIONS", _instructions(step_graph))
    shell.user_ns["glance_me"] = step_graph
    result = shell.run_cell("glance_me")
    assert result.success
    first, then = published.calls
    assert first["transient"]["display_id"] == then["transient"]["display_id"]
    assert (first["update"], then["update"]) == (False, True)
    assert _payload_of(first["data"]["text/html"])["glance"] is True
    assert "glance" not in _payload_of(then["data"]["text/html"])
    assert "the whole graph follows" in first["data"]["text/plain"]
    assert then["data"]["text/plain"] == repr(step_graph)


def test_a_smaller_graph_or_a_shell_without_a_kernel_shows_the_whole_graph_once(
    shell, monkeypatch, step_graph
):
    assert step_graph._ipython_display_ is None  # the test's shell has no kernel
    monkeypatch.setattr(shell, "kernel", object(), raising=False)
    monkeypatch.setattr(graph_view, "GLANCE_INSTRUCTIONS", _instructions(step_graph) + 1)
    assert step_graph._ipython_display_ is None
    formatted, _ = shell.display_formatter.format(step_graph)
    assert "glance" not in _payload_of(formatted["text/html"])


def test_a_real_kernel_sends_the_glance_then_the_whole_graph_under_one_display_id():
    """A kernel started as Jupyter starts one: its messages, in the order a frontend reads."""
    from jupyter_client.manager import start_new_kernel

    code = textwrap.dedent(
        f"""
        from tpukit.hlo import graph
        from tpukit.graph import _graph_view
        _graph_view.GLANCE_INSTRUCTIONS = 0  # as a step of 5,000 instructions or more shows
        graph({mlp_hlo()!r}, title="mlp")
        """
    )
    manager, client = start_new_kernel(kernel_name="python3")
    try:
        messages = []
        reply = client.execute_interactive(code, timeout=120, output_hook=messages.append)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    assert reply["content"]["status"] == "ok", reply["content"]
    shown = [m for m in messages if m["msg_type"] in ("display_data", "update_display_data")]
    assert [m["msg_type"] for m in shown] == ["display_data", "update_display_data"], [
        m["msg_type"] for m in messages
    ]
    ids = {m["content"]["transient"]["display_id"] for m in shown}
    assert len(ids) == 1
    first, then = (_payload_of(m["content"]["data"]["text/html"]) for m in shown)
    assert "glance" in first and "glance" not in then
    assert not [m for m in messages if m["msg_type"] in ("execute_result", "error", "stream")]


# Shows a fragment as JupyterLab does (`tests._support.notebook_page.NOTEBOOK_PAGE`) and reads its state in
# the next frame's callback, before that frame is painted.
_STATE_AT_FIRST_FRAME = """fragment => new Promise(done => {
  showOutput(fragment);
  const roots = document.querySelectorAll(".tkg-root");
  requestAnimationFrame(() => done(roots[roots.length - 1].dataset.state));
})"""


def _notebook_page(browser):
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    page.set_content(NOTEBOOK_PAGE)
    return page


def test_a_glance_is_drawn_before_the_frame_that_shows_its_output(browser, step_graph):
    """A glance's few kilobytes go uncompressed: read and drawn in the script's own task
    (inflating is asynchronous), so the frame that first shows the output shows the
    drawing, not the text fallback."""
    page = _notebook_page(browser)
    assert page.evaluate(_STATE_AT_FIRST_FRAME, step_graph._glance_html()) == "glance"
    page.close()


# Every state the graph's root has left, in order (a record's old value: the observer is
# told after the script's task, when the attribute holds a later value).
_STATES = """() => { window.tkgStates = [];
  new MutationObserver(records => records.forEach(r => window.tkgStates.push(r.oldValue)))
    .observe(document.body, {subtree: true, attributes: true, attributeOldValue: true,
                             attributeFilter: ["data-state"]}); }"""


def test_a_large_graphs_output_shows_its_glance_until_the_whole_graph_replaces_it(
    browser, monkeypatch, step_graph
):
    """The output a kernel's update brings (and a saved page) draws the glance it carries in
    its script's own task, then the whole graph in its place: the same first view, one
    drawing in the page at a time, and no frame with the fallback in between."""
    monkeypatch.setattr(graph_view, "GLANCE_INSTRUCTIONS", 0)
    whole_only = step_graph._fragment("the step", step_graph._payload(), "")
    page = _notebook_page(browser)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.evaluate(_STATES)
    assert page.evaluate(_STATE_AT_FIRST_FRAME, step_graph._repr_html_()) == "glance"
    page.wait_for_selector(".tkg-root[data-state=ready]", timeout=15000)
    assert page.evaluate("window.tkgStates") == [None, "loading", "glance"]  # now: ready
    assert page.locator(".tkg-root .tkg-app").count() == 1
    drawn = _scene(page)
    reference = _notebook_page(browser)
    reference.evaluate(_STATE_AT_FIRST_FRAME, _same_root(whole_only))
    reference.wait_for_selector(".tkg-root[data-state=ready]", timeout=15000)
    arrow = re.search(r"url\(#(tkg-[0-9a-f]+)-arrow\)", drawn)[1]
    assert drawn.replace(arrow, "tkg-same") == _scene(reference)
    assert errors == []
    page.close()
    reference.close()


def _fresh(text: str):
    """``text`` parsed, with no tree kept on its module (as one not drawn yet)."""
    module = parse_hlo(text)
    module._analysis.pop("graph_data", None)
    module._analysis.pop("glance_data", None)
    module._analysis.pop("page_data", None)
    return module


def test_a_glance_is_made_from_entry_alone_only_where_that_saves_time():
    """ENTRY's tree alone where its instructions run most of the module's (a training
    step's fusions); the page's tree (the whole but for the fusion bodies the page builds:
    `page_data`) where ENTRY holds half of them or more (the other would cost nearly as
    much, then the page's again), or where the first view enters a call (it needs the
    call's body)."""
    step = _fresh(mlp_hlo())  # ENTRY holds 12 of its 38 instructions
    lean = glance_data(step)
    assert lean.hidden and "graph_data" not in step._analysis
    assert glance_data(step) is lean
    assert graph_data(step) is not lean and glance_data(step) is graph_data(step)
    flat = _fresh((DATA / FILES[3]).read_text())  # VGG's forward pass: 65 of 68 in ENTRY
    assert glance_data(flat) is page_data(flat)
    buffered = _fresh((DATA / FILES[0]).read_text())  # its work is one call, entered
    whole = glance_data(buffered)
    assert whole is page_data(buffered) and not whole.hidden.keys() - whole.lazy.keys()
    assert any(whole.kind[k] == INSTRUCTION for k in first_view(whole))  # the call, entered
