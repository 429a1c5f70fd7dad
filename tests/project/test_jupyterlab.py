"""tpukit's notebook outputs in a real JupyterLab 4, run and looked at in headless Chromium.

One JupyterLab server (``tests._support.jupyterlab.lab_server``: 127.0.0.1, its own folders, a
kernel on this venv's Python) and one browser serve the whole module. The notebook
is the tutorial in small: ``%load_ext tpukit``, a ``%%tpu_compile`` summary, plots
ending in ``;``, assigned and returned, two graphs (a layer's, and the MLP training
step's through ``%tpu_graph``), the step's ``%tpu_profile`` (tables and the graph
coloured by time), a side-by-side diff of two layers, and a short ``fit`` with a
checkpoint, verbose and quiet. Its cells run through JupyterLab's own "run all cells" command, then each
test checks what a user sees: computed styles, images, where the graph's nodes are
on screen, where the mouse wheel goes, the progress line, the dark theme. Every
check writes a screenshot to ``out/screenshots/jupyterlab_*.png``. Without Chromium
or JupyterLab these tests skip, except under CI=true, where they fail.
"""

import contextlib
import json
import pathlib
import re

import pytest

from tests._support import jupyterlab as _jupyterlab
from tests._support.browser import unavailable
from tests._support.steps import tutorial_cell

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # the browser fixture says what to install
    PlaywrightTimeout = TimeoutError

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHOTS = ROOT / "out" / "screenshots"
NOTEBOOK = "tpukit_in_jupyterlab.ipynb"

# The notebook, cell by cell (names for the tests, sources for the kernel).
CELLS = {
    "setup": """\
import jax.numpy as jnp
import optax
from flax import nnx

import tpukit

%load_ext tpukit
x_train, y_train = tpukit.datasets.mnist("train", source="sample")
x_train, y_train = x_train[:1024], y_train[:1024]
CHECKPOINT_DIR = {checkpoint_dir!r}""",
    "summary": """\
%%tpu_compile layer(f32[32,64], f32[64,64])
def layer(x, w):
    return jnp.tanh(x @ w)""",
    "plot ending in ;": "layer_compiled.plot_ops();",
    "plot assigned": "ops = layer_compiled.plot_ops()",
    "plot returned": "layer_compiled.plot_ops()",
    "layer graph": "layer_compiled.graph()",
    "train step": 'model = tpukit.zoo.create("mlp", seed=0)\n' + tutorial_cell(),
    "step graph": "%tpu_graph train_step(model, opt_state, f32[128,784], s32[128])",
    "glance graph": """\
from tpukit.graph import _graph_view
_graph_view.GLANCE_INSTRUCTIONS, usual = 0, _graph_view.GLANCE_INSTRUCTIONS  # as a large step
step = tpukit.compile(train_step, model, opt_state, tpukit.shape("f32[128,784]"),
                      tpukit.shape("s32[128]"))
display(tpukit.hlo.graph(step.hlo_text("optimized"), title="glance step"))
_graph_view.GLANCE_INSTRUCTIONS = usual""",
    "step profile": "%tpu_profile -r 2 train_step(model, opt_state, f32[128,784], s32[128])",
    "step memory": "%tpu_memory train_step(model, opt_state, f32[128,784], s32[128])",
    "memory graph": "train_step_memory.graph()",
    "diff view": """\
scaled = tpukit.compile(lambda x, w: 2 * jnp.tanh(x @ w), tpukit.shape("f32[32,64]"),
                        tpukit.shape("f32[64,64]"))
tpukit.diff(layer_compiled, scaled, labels=("tanh", "2 tanh")).graph()""",
    "fit": """\
history = tpukit.fit(model, optax.adam(1e-3), (x_train, y_train), epochs=1, batch_size=128,
                     checkpoint_dir=CHECKPOINT_DIR)""",
    "history plot": "history.plot();",
    "quiet fit": """\
restored = tpukit.zoo.create("mlp", seed=1)
tpukit.fit(restored, optax.adam(1e-3), (x_train, y_train), epochs=1, batch_size=128,
           checkpoint_dir=CHECKPOINT_DIR, resume=True, verbose=False);""",
}
PLOT_CELLS = ["plot ending in ;", "plot assigned", "plot returned", "history plot"]
STDERR = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'

NOTEBOOK_WIDGET = "window.jupyterapp.shell.currentWidget"
# Each state a graph's root leaves, with its title: [old state, title] (the record's old
# value: the observer is told after the script's task, when the attribute holds a later one).
GRAPH_STATES = """window.tkgStates = [];
new MutationObserver(records => records.forEach(r => window.tkgStates.push([r.oldValue,
  (r.target.querySelector('.tkg-title') || {}).textContent || '']))).observe(document,
  {subtree: true, attributes: true, attributeOldValue: true, attributeFilter: ['data-state']});"""
KERNEL_IDLE = f"""() => {{
  const panel = window.jupyterapp && {NOTEBOOK_WIDGET};
  const kernel = panel && panel.sessionContext && panel.sessionContext.session
    && panel.sessionContext.session.kernel;
  return !!kernel && kernel.status === 'idle';
}}"""
RUN_FINISHED = f"""() => {{
  const panel = {NOTEBOOK_WIDGET}, cells = panel.content.widgets;
  const prompts = cells.map(c => (c.node.querySelector('.jp-InputPrompt') || {{}}).textContent || '');
  return cells[0].model.executionCount !== null && !prompts.some(p => p.includes('*'))
    && panel.sessionContext.session.kernel.status === 'idle';
}}"""
LABEL_PX = """root => Math.min(...Array.from(root.querySelectorAll('.tkg-node text'), t =>
  parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a))"""
NODE_BOXES = """root => {
  const view = root.querySelector('.tkg-viewport').getBoundingClientRect();
  const boxes = Array.from(root.querySelectorAll('.tkg-node rect.tkg-box'), r => {
    const b = r.getBoundingClientRect();
    return {left: b.left, right: b.right, top: b.top, bottom: b.bottom};
  });
  return {view: {left: view.left, right: view.right, top: view.top, bottom: view.bottom}, boxes};
}"""
NODES_IN_VIEW = """root => {
  const view = root.querySelector('.tkg-viewport').getBoundingClientRect(), points = [];
  for (const node of root.querySelectorAll('.tkg-node')) {
    const box = node.querySelector('rect.tkg-box').getBoundingClientRect();
    if (box.left >= view.left && box.right <= view.right && box.top >= view.top
        && box.bottom <= view.bottom) points.push([box.right - 12, box.top + box.height / 2]);
  }
  return points;
}"""
SCROLLER = "document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer')"
CELL_STYLES = """root => Array.from(root.querySelectorAll('.tpukit-summary td, .tpukit-summary th'), c => ({
  text: c.textContent.trim(), numeric: c.classList.contains('num'),
  align: getComputedStyle(c).textAlign}))"""
# A plain table cell in the same output: what JupyterLab's own rules make of it.
FRONTEND_ALIGN = """root => {
  const output = root.closest('.jp-RenderedHTMLCommon'), table = document.createElement('table');
  table.innerHTML = '<tbody><tr><td>probe</td></tr></tbody>';
  output.appendChild(table);
  const align = getComputedStyle(table.querySelector('td')).textAlign;
  table.remove();
  return align;
}"""
# The colour a JupyterLab theme variable stands for, as the page computes it.
THEME_COLOUR = """function themeColour(name) {
  const probe = document.createElement('div');
  probe.style.background = 'var(' + name + ')';
  document.body.appendChild(probe);
  const colour = getComputedStyle(probe).backgroundColor;
  probe.remove();
  return colour;
}"""
DARK_THEME_LOADED = f"""() => {{ {THEME_COLOUR}
  if (document.body.dataset.jpThemeLight !== 'false') return false;
  const v = themeColour('--jp-layout-color0').match(/[\\d.]+/g).map(Number);
  return v.length >= 3 && v[0] + v[1] + v[2] < 150; }}"""
GRAPH_COLOURS = f"""root => {{ {THEME_COLOUR}
  const search = root.querySelector('.tkg-search');
  return {{paper: getComputedStyle(root).backgroundColor,
          canvas: getComputedStyle(root.querySelector('.tkg-viewport')).backgroundColor,
          ink: getComputedStyle(root.querySelector('.tkg-title')).color,
          field: getComputedStyle(search).backgroundColor,
          placeholder: getComputedStyle(search, '::placeholder').color,
          notebook: themeColour('--jp-layout-color0')}};
}}"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    reason = _jupyterlab.missing()
    if reason:
        unavailable(reason)
    root = tmp_path_factory.mktemp("lab")
    sources = dict(CELLS, setup=CELLS["setup"].format(checkpoint_dir=str(root / "checkpoints")))
    (root / NOTEBOOK).write_text(json.dumps(notebook_json(list(sources.values())), indent=1))
    with _jupyterlab.lab_server(root) as server:
        yield server


class Notebook:
    """The test notebook open in JupyterLab, its cells run; errors the page reported."""

    def __init__(self, page):
        self.page = page
        self.errors: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))
        page.on(
            "console",
            lambda m: (
                self.errors.append(f"console {m.type}: {m.text}")
                if m.type == "error" or (m.type == "warning" and re.search("tpukit|tkg", m.text))
                else None
            ),
        )

    def cell(self, name: str):
        """The cell called ``name`` in `CELLS`, scrolled to the top of the notebook."""
        index = list(CELLS).index(name)
        self.page.evaluate(
            f"i => {NOTEBOOK_WIDGET}.content.widgets[i].node.scrollIntoView({{block: 'start'}})",
            index,
        )
        self.settle()
        return self.page.locator(f'.jp-Notebook .jp-Cell[data-test-cell="{index}"]')

    def graph(self, name: str):
        """The graph in cell ``name``, drawn, its toolbar at the top of the notebook."""
        root = self.cell(name).locator(".tkg-root[data-state=ready]")
        root.wait_for(timeout=30000)
        root.evaluate("r => r.scrollIntoView({block: 'start'})")
        self.page.wait_for_function("r => +r.dataset.scale > 0", arg=root.element_handle())
        self.settle()
        return root

    def settle(self):
        """Wait two frames: resize observers, layout and scrolling are done by then."""
        self.page.evaluate(
            "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
        )
        self.page.wait_for_timeout(100)

    def screenshot(self, name: str):
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"jupyterlab_{name}.png"))


@pytest.fixture(scope="module")
def notebook(browser, lab):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    nb = Notebook(page)
    page.add_init_script(GRAPH_STATES)
    page.goto(lab.url(f"lab/tree/{NOTEBOOK}?reset"))
    page.wait_for_function(KERNEL_IDLE, timeout=90000)
    page.evaluate("() => window.jupyterapp.shell.collapseLeft()")
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    try:
        page.wait_for_function(RUN_FINISHED, timeout=180000, polling=250)
    except PlaywrightTimeout:
        nb.screenshot("run_all_timeout")
        pytest.fail(
            "Run All did not finish within 180 s (out/screenshots/jupyterlab_run_all_timeout.png);"
            f" JupyterLab's log ends:\n{lab.log.read_text()[-3000:]}"
        )
    page.evaluate(
        f"() => {NOTEBOOK_WIDGET}.content.widgets.forEach((c, i) => c.node.dataset.testCell = i)"
    )
    counts = page.evaluate(
        f"() => {NOTEBOOK_WIDGET}.content.widgets.map(c => c.model.executionCount)"
    )
    if None in counts:
        failed = list(CELLS)[counts.index(None) - 1] if counts.index(None) else "setup"
        nb.cell(failed)
        nb.screenshot("run_all_failed")
        pytest.fail(
            f"Run All stopped after cell {failed!r} (execution counts {counts}); see "
            f"out/screenshots/jupyterlab_run_all_failed.png; red outputs:\n"
            f"{page.locator(STDERR).all_inner_texts()!s:.3000}"
        )
    yield nb
    page.close()


def test_every_cell_runs_fit_shows_one_line_per_epoch_and_nothing_is_red(notebook):
    p = notebook.page
    counts = p.evaluate(f"() => {NOTEBOOK_WIDGET}.content.widgets.map(c => c.model.executionCount)")
    assert counts == list(range(1, len(CELLS) + 1))
    red = p.locator(STDERR)
    assert red.count() == 0, red.all_inner_texts()
    notebook.cell("fit")
    notebook.screenshot("progress")
    fit = notebook.cell("fit").locator(".jp-OutputArea")
    text = fit.inner_text()
    # One line for the one epoch, updated in place to its end; one speed figure at most.
    assert len(re.findall(r"epoch 1/1", text)) == 1, text
    assert re.search(r"(?<!\d)8/8(?!\d)", text), text  # all 8 steps of 1,024 / 128
    assert text.count("steps/s") <= 1, text
    quiet = notebook.cell("quiet fit").locator(".jp-OutputArea")
    assert quiet.inner_text().strip() == "", quiet.inner_text()


def test_summary_table_aligns_text_left_and_numbers_right(notebook):
    cell = notebook.cell("summary")
    cell.locator("details").evaluate_all("ds => ds.forEach(d => d.open = true)")
    root = cell.locator(".tpukit-out.tpukit-summary").first
    notebook.screenshot("summary_light")
    assert root.evaluate(FRONTEND_ALIGN) == "right"  # JupyterLab's rule for any other table
    cells = root.evaluate(CELL_STYLES)
    assert sum(c["numeric"] for c in cells) >= 4 and sum(not c["numeric"] for c in cells) >= 4
    wrong = [c for c in cells if c["align"] != ("right" if c["numeric"] else "left")]
    assert wrong == []
    # Source locations (fusions' table, where XLA fused) name the cell, not ipykernel's file.
    assert not [c for c in cells if "ipykernel" in c["text"]], cells


@pytest.mark.parametrize("name", PLOT_CELLS)
def test_each_plot_cell_shows_its_figure_once(notebook, name):
    cell = notebook.cell(name)
    images = cell.locator(".jp-OutputArea-output img")
    images.first.wait_for(timeout=5000)
    assert images.count() == 1
    assert images.first.evaluate("img => img.complete && img.naturalWidth") > 200
    assert "<Figure" not in cell.locator(".jp-OutputArea").inner_text()
    if name == "plot ending in ;":
        notebook.screenshot("plots")


def test_graph_first_view_is_fitted_and_readable(notebook):
    layer = notebook.graph("layer graph")  # small: the whole graph shows, readable
    notebook.screenshot("graph_layer")
    assert layer.evaluate(LABEL_PX) >= 10
    placed = layer.evaluate(NODE_BOXES)
    view = placed["view"]
    assert view["right"] - view["left"] > 300 and view["bottom"] - view["top"] > 150, view
    assert len(inside(placed)) == len(placed["boxes"]) >= 3, placed

    # The tutorial's training step opens at a readable size with its top in view; Fit
    # then shows all that is drawn.
    step = notebook.graph("step graph")
    notebook.screenshot("graph_step_first_view")
    assert step.evaluate(LABEL_PX) >= 10
    placed = step.evaluate(NODE_BOXES)
    assert len(inside(placed)) >= 5, placed
    view = placed["view"]
    assert min(b["top"] for b in placed["boxes"]) >= view["top"] - 1  # its top shows
    step.locator(".tkg-fit").click()
    notebook.settle()
    notebook.screenshot("graph_step_fit")
    placed = step.evaluate(NODE_BOXES)
    # Its sections, the forward pass open on its layers: the five closed sections, the
    # three Linear layers and the two ReLU fusions between them.
    assert len(inside(placed)) == len(placed["boxes"]) >= 10, placed
    step.locator(".tkg-reset").click()  # back to the first view for the next tests


def test_a_large_graph_shows_its_glance_then_the_whole_graph_in_the_same_output(notebook):
    """Issue 24: in a kernel a large graph's first view is sent alone and drawn at once;
    the whole graph then takes its place (one display id): one output, drawn whole, and
    on the way two drawings of the glance (its own output's, and the update's own)."""
    step = notebook.graph("glance graph")
    notebook.screenshot("graph_glance_replaced")
    outputs = notebook.cell("glance graph").locator(".jp-OutputArea-output")
    assert outputs.count() == 1
    assert notebook.cell("glance graph").locator(".tkg-root").count() == 1
    assert step.locator(".tkg-title").inner_text() == "glance step"
    assert "the rest is loading" not in step.locator(".tkg-status").inner_text()
    left = [
        old for old, title in notebook.page.evaluate("window.tkgStates") if title == "glance step"
    ]
    assert left.count("loading") == 2 and left.count("glance") == 1, left
    assert step.locator(".tkg-node").count() >= 5


def test_profile_tables_stay_in_the_output_and_its_graph_is_coloured_by_time(notebook):
    cell = notebook.cell("step profile")
    tables = cell.locator(".tpukit-profile").first
    notebook.screenshot("profile_light")
    fits = tables.evaluate(
        """t => { const out = t.closest('.jp-OutputArea-output').getBoundingClientRect();
                  const box = t.getBoundingClientRect();
                  return box.left >= out.left - 1 && box.right <= out.right + 1; }"""
    )
    assert fits, "the profile's tables scroll inside their box, not past the output"
    text = tables.inner_text()
    assert "By section: forward" in text and "forward › layers[0] (Linear)" in text, text
    root = notebook.graph("step profile")
    notebook.screenshot("profile_graph_light")
    assert root.evaluate(LABEL_PX) >= 10
    legend = root.locator(".tkg-heat-key, .tkg-legend").first.inner_text()
    assert "time per run" in legend, legend
    heated = root.evaluate(
        "r => Array.from(r.querySelectorAll('.tkg-node rect.tkg-box'),"
        " b => getComputedStyle(b).fill).filter(f => f && f !== 'none')"
    )
    assert len(set(heated)) >= 3, heated  # nodes take different heat colours


def test_diff_view_draws_both_sides_with_the_change_marked(notebook):
    cell = notebook.cell("diff view")
    root = cell.locator(".tkd-root[data-state=ready]")
    root.wait_for(timeout=30000)
    sides = cell.locator(".tkd-side[data-state=ready]")
    sides.first.wait_for(timeout=30000)
    assert sides.count() == 2
    notebook.screenshot("diff_light")
    assert root.locator(".tkd-table tbody tr").count() >= 1
    assert root.locator("tr.tkd-changed").count() >= 1  # the scaled layer differs


def test_wheel_scrolls_the_notebook_until_a_click_in_the_graph(notebook):
    p = notebook.page
    root = notebook.graph("step graph")

    def corner():
        """Put the graph's toolbar at the top again; the drawing's empty top-left corner."""
        root.evaluate("r => r.scrollIntoView({block: 'start'})")
        notebook.settle()
        box = root.locator(".tkg-viewport").bounding_box()
        return box["x"] + 8, box["y"] + 8

    def wheel(dy: int, ctrl: bool = False) -> dict[str, bool]:
        """Turn the wheel where the mouse is: did the notebook scroll, did the graph zoom?"""
        before = p.evaluate(f"r => [{SCROLLER}.scrollTop, r.dataset.scale]", root.element_handle())
        if ctrl:
            p.keyboard.down("Control")
        p.mouse.wheel(0, dy)
        if ctrl:
            p.keyboard.up("Control")
        changed = f"r => {SCROLLER}.scrollTop !== {before[0]} || r.dataset.scale !== {before[1]!r}"
        with contextlib.suppress(PlaywrightTimeout):
            p.wait_for_function(changed, arg=root.element_handle(), timeout=3000)
        notebook.settle()
        after = p.evaluate(f"r => [{SCROLLER}.scrollTop, r.dataset.scale]", root.element_handle())
        return {"scrolled": after[0] != before[0], "zoomed": after[1] != before[1]}

    p.mouse.move(*corner())
    assert wheel(200) == {"scrolled": True, "zoomed": False}  # a plain wheel: the notebook's
    notebook.screenshot("graph_after_plain_wheel")

    p.mouse.click(*corner())  # a click inside the drawing: now the wheel zooms it
    assert wheel(-200) == {"scrolled": False, "zoomed": True}
    notebook.screenshot("graph_zoomed_after_click")
    p.keyboard.press("Escape")  # and Escape gives the wheel back to the notebook
    assert wheel(200) == {"scrolled": True, "zoomed": False}

    p.mouse.move(*corner())
    assert wheel(-200, ctrl=True) == {"scrolled": False, "zoomed": True}  # Ctrl + wheel zooms


def test_keys_in_the_graph_move_through_it_and_never_reach_the_notebook(notebook):
    """The drawing is a tree from the keyboard (graph_keys.js): JupyterLab's command-mode
    shortcuts (d-d deletes a cell, a inserts one, j moves down) must not see its keys."""
    p = notebook.page
    root = notebook.graph("step graph")
    cells = f"() => {NOTEBOOK_WIDGET}.content.widgets.length"
    count = p.evaluate(cells)
    root.locator(".tkg-node").first.click()  # command mode, the focus on the node clicked
    p.keyboard.press("Escape")  # (its panel closed)
    focused = "() => document.activeElement.getAttribute('data-node')"
    start = p.evaluate(focused)
    assert start is not None
    for key in ("d", "d", "a", "j", "ArrowDown"):
        p.keyboard.press(key)
    notebook.settle()
    assert p.evaluate(cells) == count  # no cell deleted nor added
    moved = p.evaluate(focused)
    assert moved is not None and moved != start  # ArrowDown moved within the drawing
    notebook.screenshot("graph_keys")
    root.locator(".tkg-reset").click()


def test_clicking_a_node_shows_its_source_as_the_cell(notebook):
    root = notebook.graph("layer graph")
    panel = root.locator(".tkg-panel")
    summary_cell = list(CELLS).index("summary") + 1  # its execution count
    sources = {}
    for x, y in root.evaluate(NODES_IN_VIEW):  # the right end of each box, clear of its toggle
        notebook.page.mouse.click(x, y)
        panel.wait_for(state="visible", timeout=5000)
        field = lambda name: panel.locator(f'[data-field="{name}"]').inner_text()  # noqa: E731
        if field("opcode") != "parameter":
            sources[panel.locator(".tkg-panel-title").inner_text()] = field("source")
            assert "ipykernel" in field("file")  # the full path stays, beside the short label
            notebook.screenshot("graph_side_panel")
        panel.locator(".tkg-close").click()
        assert not panel.is_visible()
    # ``jnp.tanh(x @ w)``: whatever XLA made of it, it came from line 3 of that cell.
    assert sources and set(sources.values()) == {f"In [{summary_cell}], line 3"}, sources


MEMORY_VIEW = """root => ({
  paper: getComputedStyle(root).backgroundColor,
  text: getComputedStyle(root.querySelector('td')).color,
  chart: root.querySelector('svg').getBoundingClientRect().width,
  labels: Array.from(root.querySelectorAll('svg text'), t => getComputedStyle(t).fill),
  rows: root.querySelectorAll('details tbody tr').length})"""


def test_memory_view_and_its_graph_read_in_light_and_dark(notebook):
    """The view of the MNIST step (%tpu_memory): its chart, facts and tables, and the graph
    coloured by memory, readable in JupyterLab's light theme, then its dark one."""
    p = notebook.page
    for theme in ("light", "dark"):
        if theme == "dark":
            p.evaluate(
                "() => window.jupyterapp.commands.execute('apputils:change-theme',"
                " {theme: 'JupyterLab Dark'})"
            )
            p.wait_for_function(DARK_THEME_LOADED, timeout=20000)
        cell = notebook.cell("step memory")
        view = cell.locator(".tpukit-out.tpukit-memory").first
        notebook.screenshot(f"memory_{theme}")
        shown = view.evaluate(MEMORY_VIEW)
        background = p.evaluate(
            f"() => {{ {THEME_COLOUR} return themeColour('--jp-layout-color0'); }}"
        )
        assert shown["chart"] > 400 and shown["rows"] >= 10, shown
        assert contrast(shown["text"], background) >= 7, (theme, shown, background)
        # The chart's axis and legend text is the theme's secondary ink: readable on it.
        muted = [c for c in shown["labels"] if c.startswith("rgb")]
        assert muted and min(contrast(c, background) for c in muted) >= 3, (theme, shown)
        text = view.inner_text()
        assert "Memory of train_step" in text and "layers[0]" in text
        graph = notebook.graph("memory graph")
        graph.locator(".tkg-fit").click()
        notebook.settle()
        notebook.screenshot(f"memory_graph_{theme}")
        assert graph.get_attribute("data-colour") == "memory"
        fills = graph.evaluate(
            "r => Array.from(r.querySelectorAll('.tkg-node[data-memory] rect.tkg-box'),"
            " b => b.style.fill)"
        )
        assert fills and all(f.startswith("rgb(") for f in fills), fills


def test_dark_theme_darkens_the_graph_and_keeps_its_text_readable(notebook):
    p = notebook.page
    p.evaluate(
        "() => window.jupyterapp.commands.execute('apputils:change-theme',"
        " {theme: 'JupyterLab Dark'})"
    )
    p.wait_for_function(DARK_THEME_LOADED, timeout=20000)
    root = notebook.graph("step graph")
    root.locator(".tkg-fit").click()
    notebook.settle()
    notebook.screenshot("graph_dark")
    colours = root.evaluate(GRAPH_COLOURS)
    assert luminance(colours["paper"]) < 0.05 and luminance(colours["canvas"]) < 0.05, colours
    assert contrast(colours["ink"], colours["paper"]) >= 7, colours
    assert contrast(colours["placeholder"], colours["field"]) >= 3, colours

    summary = notebook.cell("summary")
    notebook.screenshot("summary_dark")
    text = summary.locator(".tpukit-summary td").first.evaluate("c => getComputedStyle(c).color")
    assert contrast(text, colours["notebook"]) >= 7, (text, colours["notebook"])
    notebook.cell("fit")
    notebook.screenshot("progress_dark")

    profile = notebook.cell("step profile")
    notebook.screenshot("profile_dark")
    text = profile.locator(".tpukit-profile td").first.evaluate("c => getComputedStyle(c).color")
    assert contrast(text, colours["notebook"]) >= 7, (text, colours["notebook"])
    heat = notebook.graph("step profile")
    notebook.screenshot("profile_graph_dark")
    paper = heat.evaluate("r => getComputedStyle(r).backgroundColor")
    assert luminance(paper) < 0.05, paper
    notebook.cell("diff view")
    notebook.screenshot("diff_dark")


def test_the_page_reported_no_errors(notebook):
    assert notebook.errors == []


def notebook_json(sources: list[str]) -> dict:
    """An nbformat 4.5 notebook of code cells that runs on the test kernel."""
    cells = [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": f"cell-{i}",
            "metadata": {},
            "outputs": [],
            "source": source,
        }
        for i, source in enumerate(sources)
    ]
    kernelspec = {
        "name": _jupyterlab.KERNEL_NAME,
        "display_name": "Python (tpukit test)",
        "language": "python",
    }
    metadata = {"kernelspec": kernelspec, "language_info": {"name": "python"}}
    return {"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}


def inside(placed: dict) -> list[dict]:
    """The node boxes wholly inside the graph's visible drawing area."""
    view = placed["view"]
    return [
        b
        for b in placed["boxes"]
        if b["left"] >= view["left"] - 1
        and b["right"] <= view["right"] + 1
        and b["top"] >= view["top"] - 1
        and b["bottom"] <= view["bottom"] + 1
    ]


def rgb(colour: str, background: str = "rgb(255, 255, 255)") -> tuple[float, float, float]:
    """A CSS ``rgb()``/``rgba()`` colour as 0-1 channels, a translucent one laid on ``background``."""
    values = [float(v) for v in re.findall(r"[\d.]+", colour)]
    alpha = values[3] if len(values) > 3 else 1.0
    if alpha >= 1:
        return values[0] / 255, values[1] / 255, values[2] / 255
    under = rgb(background)
    return tuple(alpha * v / 255 + (1 - alpha) * u for v, u in zip(values[:3], under))


def luminance(colour: str, background: str = "rgb(255, 255, 255)") -> float:
    """WCAG relative luminance of a CSS colour (seen on ``background`` if translucent)."""
    linear = [
        c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb(colour, background)
    ]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(text: str, background: str) -> float:
    """WCAG contrast ratio of ``text`` (translucent: as drawn on it) and an opaque ``background``."""
    light, dark = sorted((luminance(text, background), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)
