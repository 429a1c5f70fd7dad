"""How fast the interactive HLO graph opens and expands on real training steps.

Compiles zoo training steps with ``tpukit.compile`` (Flax NNX, the MNIST tutorial's step:
``nnx.value_and_grad``, optax, ``nnx.update``), on CPU, once: the optimized HLO text is cached
in the temp directory, since compiling ResNet-50 or GPT-small takes about a minute on two cores. Then
it measures what ``%tpu_graph`` does after compiling, from the cell's point of view:

- parse: the optimized HLO text into an ``HloModule`` (a compiled object parses it lazily);
- group: the graph's tree of layers, sections and parts (``GraphTree``);
- glance: what a notebook kernel sends first for a graph of ``GLANCE_INSTRUCTIONS``
  instructions or more (`_graph_view.HloGraph._show_glance_first`): its first view alone
  (`_graph_glance`), grouped from ENTRY alone, an HTML fragment of a few tens
  of kilobytes;
- HTML: the payload and the self-contained HTML fragment of the whole graph (which carries
  the glance too, drawn until the whole payload is inflated);
- open: in headless Chromium (Playwright), from navigation start until the first view is drawn
  (the page says ``data-state=ready``); the page's own marks split it into ``script`` (HTML
  parsed and scripts compiled, until the viewer's script starts), ``decode`` (the payload
  inflated and read) and ``draw`` (laid out and put in the DOM);
- paint: from navigation start until the frame after ``ready`` is painted (the browser's
  own layout and paint of the drawing included: work the page moves past its ``ready``
  mark still counts here);
- expand: a click on a closed group (the largest one shown) and on the largest fusion, until
  its interior is laid out and drawn.

- frame and lab: the output as a notebook shows it, timed inside the page with
  ``performance.now`` (no new tab, no Playwright round trip): ``frame`` puts the fragment in a
  new iframe of an open page (``srcdoc``), as Colab and VS Code give each output its own
  frame; ``lab`` inserts it into the open page itself and re-creates its scripts so that they
  run, as JupyterLab's and Jupyter's HTML renderer does. Each is timed until the frame after
  ``ready`` is painted.

``defl.x`` is how many times quicker the payload deflates on two cores (`_graph_wire.deflate`)
than with one ``zlib.compress``, both timed in the same run (``deflate_*_s`` in the JSON).

``py.cpu`` is the CPU time of parse, glance, group and HTML together (the quickest repeat's): on a
shared machine the wall-clock stages move with its other load, and comparing two versions
of the code reads best from it.

``cell`` is the time between pressing Shift+Enter (on a step already compiled) and seeing
the graph's first view in the slower of the two ways a notebook shows it: parse + glance +
``g.frm`` (the glance's ``frame``) for a graph that a kernel shows as a glance first, while
it groups and writes the whole graph; parse + group + HTML + frame for a smaller one.
``c.lab`` is the same with ``lab``. ``whole`` is when the whole graph is drawn in its place:
parse + glance + group + HTML + frame (an upper bound: the browser draws the glance while
the kernel works on). ``paint`` (new tab) also counts creating and
navigating a tab, which a notebook's output never does: it is kept to compare with earlier
results (``cell_tab_s`` in the JSON). Before each timed Python repeat the garbage of the last
is collected (``gc.collect``), so that a full collection of earlier repeats' objects does not
land inside one stage.

    .venv/bin/python benchmarks/hlo_graph_speed.py [--models resnet50 gpt_small] [--repeats 3]
    .venv/bin/python benchmarks/hlo_graph_speed.py --hlo /tmp/gpu_hlo/gpt_small.optimized.hlo.txt.gz

``--hlo`` takes any HLO text file (``.gz`` too), e.g. a module compiled elsewhere; keep such
files out of the repository. Prints a table and writes JSON under ``benchmarks/results/``.

The large-module row (``--large 400000``, 0 to skip) generates a module of that many
instructions in fused computations of 1,000 (`_large_hlo`, about 200 bytes a line) and
measures the parser alone: instructions parsed per second (the median of three fresh
parses: one 2-second parse on a shared machine is too noisy to read), and the memory the parsed
module keeps (resident memory after parsing less before, the text already in memory)
as a multiple of the text's size; then the graph's group and HTML times on it.

The dump row (``--dump-mb 50``, off by default) generates a dump of that size the same
way and times what a user does with it: open and count ops, draw the graph, diff it
against itself (equal text opened twice: the second open finds the first's module).
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time
import zlib

TMP = pathlib.Path(tempfile.gettempdir())
RESULTS = pathlib.Path(__file__).parent / "results"
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
#: Zoo models and their training step's data: (input, labels) in HLO shape notation.
STEPS = {
    "resnet50": ("f32[8,224,224,3]", "s32[8]"),
    "gpt_small": ("s32[8,1024]", "s32[8,1024]"),
    "mlp": ("f32[128,784]", "s32[128]"),
}


def cache_path(name: str) -> pathlib.Path:
    return TMP / f"tpukit-{name}-train-step-optimized.hlo.txt"


def train_step_hlo(name: str) -> str:
    """The optimized HLO text of a zoo model's training step, compiled once and cached."""
    path = cache_path(name)
    if path.exists():
        return path.read_text()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import optax
    from _steps import tutorial_train_step
    from flax import nnx

    import tpukit
    from tpukit import zoo

    model = zoo.create(name)
    optimizer = optax.adam(1e-3)
    train_step = tutorial_train_step(optimizer)
    opt_state = optimizer.init(nnx.state(model, nnx.Param))
    x, y = (tpukit.shape(s) for s in STEPS[name])
    start = time.perf_counter()
    compiled = tpukit.compile(train_step, model, opt_state, x, y)
    text = compiled.hlo_text("optimized")
    print(f"compiled the {name} train step in {time.perf_counter() - start:.0f} s")
    path.write_text(text)
    return text


def read_hlo(path: pathlib.Path) -> str:
    if path.suffix == ".gz":
        return gzip.decompress(path.read_bytes()).decode()
    return path.read_text()


# A click on a node's open/close button, wherever the node is on the canvas.
_CLICK_TOGGLE = """node => {
  const toggle = document.querySelector(`.tkg-node[data-node="${node}"] .tkg-toggle`);
  for (const type of ["pointerdown", "pointerup"]) {
    toggle.dispatchEvent(new PointerEvent(type, {bubbles: true, button: 0, pointerId: 1}));
  }
}"""


# Resolves once the frame after the call is painted: the page marks "ready" when its
# drawing is in the DOM, before the browser has laid it out and painted it.
_NEXT_FRAME = "() => new Promise(done => requestAnimationFrame(() => setTimeout(done, 0)))"


# The closed groups the first view draws, by node id.
_CLOSED_GROUPS = """() => Array.from(
  document.querySelectorAll('.tkg-node.tkg-collapsed'), node => +node.dataset.node)"""


def python_side(hlo_text: str, title: str) -> tuple[dict, object]:
    """Seconds to parse, group and build the HTML, as ``%tpu_graph`` does on a fresh module:
    in a kernel, a graph of `GLANCE_INSTRUCTIONS` instructions or more sends its glance first
    (grouped from ENTRY alone), then groups the whole graph and writes its HTML."""
    from tpukit.graph._graph_view import HloGraph
    from tpukit.hlo import parse_hlo

    _clear_caches()  # nothing of this module parsed or drawn yet
    gc.collect()  # the last repeat's garbage, not this one's work
    marks = [(time.perf_counter(), time.process_time())]
    module = parse_hlo(hlo_text)
    marks.append((time.perf_counter(), time.process_time()))
    g = HloGraph(module, title=title, stage="optimized")
    glance = None
    if g._is_large():  # what a kernel sends first (`_show_glance_first`)
        g._glance_text()
        glance = g._glance_html()
    marks.append((time.perf_counter(), time.process_time()))
    g._data  # noqa: B018 (the whole tree, grouped on first use)
    marks.append((time.perf_counter(), time.process_time()))
    page = g.to_html()
    marks.append((time.perf_counter(), time.process_time()))
    times = {}
    for stage, before, after in zip(("parse", "glance", "group", "html"), marks, marks[1:]):
        times[f"{stage}_s"] = after[0] - before[0]
        times[f"{stage}_cpu_s"] = after[1] - before[1]  # (the machine's other load left out)
    return times, (g, page, glance)


def _resident_bytes() -> int:
    """This process's resident memory now (Linux ``/proc``; 0 elsewhere)."""
    try:
        pages = int(pathlib.Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def large_row(instructions: int, parses: int = 3) -> dict:
    """Parse speed (median of ``parses`` fresh parses) and memory (the first parse's) on a
    generated module of about ``instructions`` instructions."""
    from _large_hlo import large_module

    from tpukit.graph._graph_view import HloGraph
    from tpukit.hlo import parse_hlo

    text = large_module(max(1, instructions // 1_000), 1_000)
    walls, cpus = [], []
    for attempt in range(parses):  # the first parse's memory; the median parse's time
        _clear_caches()
        module = None
        gc.collect()
        before = _resident_bytes()
        start = time.perf_counter()
        cpu = time.process_time()
        module = parse_hlo(text)
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
        if attempt == 0:
            gc.collect()
            kept = _resident_bytes() - before
    parse_s, parse_cpu_s = statistics.median(walls), statistics.median(cpus)
    count = sum(len(c) for c in module.computations.values())
    start, cpu = time.perf_counter(), time.process_time()
    g = HloGraph(module, title="large", stage="optimized")
    g._data  # noqa: B018 (grouped on first use)
    grouped, grouped_cpu = time.perf_counter(), time.process_time()
    page = g.to_html()
    built, built_cpu = time.perf_counter(), time.process_time()
    return {
        "title": f"generated, {count:,} instructions",
        "instructions": count,
        "hlo_bytes": len(text.encode()),
        "parses": parses,
        "parse_s": round(parse_s, 3),
        "parse_s_all": [round(value, 3) for value in walls],
        "parse_cpu_s": round(parse_cpu_s, 3),
        "instructions_per_s": round(count / parse_s),
        "instructions_per_cpu_s": round(count / parse_cpu_s),
        "kept_bytes": kept,
        "memory_x_text": round(kept / len(text.encode()), 2),
        "group_s": round(grouped - start, 3),
        "html_s": round(built - grouped, 3),
        "group_cpu_s": round(grouped_cpu - cpu, 3),
        "html_cpu_s": round(built_cpu - grouped_cpu, 3),
        "html_bytes": len(page.encode()),
    }


def dump_row(megabytes: float) -> dict:
    """A generated dump of about ``megabytes`` MB, as a user meets it: ``tpukit.hlo.open``
    and ``op_counts()``, the graph's HTML, then ``tpukit.diff`` against itself (a second
    open of the same text) with its table and its side-by-side graph."""
    import gc

    from _large_hlo import large_module

    import tpukit
    from tpukit import hlo

    per_fusion = len(large_module(1, 1_000))
    text = large_module(max(1, round(megabytes * 1e6 / per_fusion)), 1_000)
    _clear_caches()
    gc.collect()
    times = {}
    start = time.perf_counter()
    program = hlo.open(text)
    count = sum(program.op_counts().values())
    times["open_count_s"] = time.perf_counter() - start
    start = time.perf_counter()
    page = program.graph().to_html()
    times["graph_s"] = time.perf_counter() - start
    start = time.perf_counter()
    d = tpukit.diff(program, hlo.open(text))
    d._repr_html_()
    times["diff_s"] = time.perf_counter() - start
    start = time.perf_counter()
    diff_page = d.graph()._repr_html_()
    times["diff_graph_s"] = time.perf_counter() - start
    return {
        "title": f"generated dump, {len(text.encode()) / 1e6:.0f} MB",
        "hlo_bytes": len(text.encode()),
        "instructions": count,
        **{key: round(value, 2) for key, value in times.items()},
        "open_count_draw_s": round(times["open_count_s"] + times["graph_s"], 2),
        "html_bytes": len(page.encode()),
        "diff_html_bytes": len(diff_page.encode()),
    }


def dump_table(row: dict) -> str:
    return (
        f"{row['title']} ({row['instructions']:,} instructions): open and count "
        f"{row['open_count_s']:.1f} s, graph {row['graph_s']:.1f} s (together "
        f"{row['open_count_draw_s']:.1f} s); diff against itself {row['diff_s']:.1f} s, its "
        f"graph {row['diff_graph_s']:.1f} s"
    )


def large_table(row: dict) -> str:
    return (
        f"{row['title']}: {row['hlo_bytes'] / 1e6:.0f} MB of HLO parsed in {row['parse_s']:.2f} s "
        f"({row['instructions_per_s']:,}/s; {row['instructions_per_cpu_s']:,}/s of CPU time), "
        f"keeps {row['kept_bytes'] / 1e6:.0f} MB ({row['memory_x_text']:.2f}x the text); "
        f"group {row['group_s']:.2f} s, HTML {row['html_s']:.2f} s "
        f"({row['html_bytes'] / 1e6:.1f} MB; CPU time {row['group_cpu_s']:.2f} s and "
        f"{row['html_cpu_s']:.2f} s)"
    )


def _clear_caches() -> None:
    """Empty tpukit's memo caches (shapes, op names, file labels, parsed modules by their
    text): a module never seen."""
    for name, module in list(sys.modules.items()):
        if name.startswith("tpukit."):
            for value in list(vars(module).values()):
                if not isinstance(value, type) and callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


# Shows a fragment as a notebook does, in an open page, and times it there: until the
# viewer says ready, then until the next frame is painted (milliseconds).
_SHOW_AS_NOTEBOOK = """async ([fragment, how]) => {
  const until = async (found) => { while (!found()) await new Promise(go => setTimeout(go, 1)); };
  const start = performance.now();
  let root, view = window;
  if (how === "frame") {  // Colab, VS Code: each output in its own frame
    const frame = document.createElement("iframe");
    frame.style.cssText = "width: 1360px; height: 860px; border: 0";
    frame.srcdoc = "<!doctype html><html><body>" + fragment + "</body></html>";
    document.body.append(frame);
    view = frame.contentWindow;
    await until(() => (root = frame.contentDocument?.querySelector(".tkg-root")));
  } else {  // JupyterLab, Jupyter: innerHTML, then each script re-created so that it runs
    const host = document.createElement("div");
    document.body.append(host);
    host.innerHTML = fragment;
    for (const written of host.querySelectorAll("script")) {
      const script = document.createElement("script");
      script.textContent = written.textContent;
      written.replaceWith(script);
    }
    root = host.querySelector(".tkg-root");
  }
  await until(() => root.dataset.state === "ready" || root.dataset.state === "glance");
  const ready = performance.now();
  await new Promise(done => view.requestAnimationFrame(() => setTimeout(done, 0)));
  return [ready - start, performance.now() - start];
}"""


def notebook_paint(
    browser, fragment: str, repeats: int, prefix: str = ""
) -> dict[str, list[float]]:
    """Seconds until the fragment is painted as a notebook shows it (`_SHOW_AS_NOTEBOOK`):
    ``frame_s`` in a new iframe, ``lab_s`` inserted into the page; each in a fresh blank
    tab, timed inside it (``prefix`` before each key)."""
    runs: dict[str, list[float]] = {}
    for _ in range(repeats):
        for how in ("frame", "lab"):
            tab = browser.new_page(viewport={"width": 1400, "height": 900})
            tab.goto("about:blank")
            ready_ms, painted_ms = tab.evaluate(_SHOW_AS_NOTEBOOK, [fragment, how])
            runs.setdefault(f"{prefix}{how}_ready_s", []).append(ready_ms / 1000)
            runs.setdefault(f"{prefix}{how}_s", []).append(painted_ms / 1000)
            tab.close()
    return runs


def deflate_times(g, repeats: int = 9) -> dict:
    """Wall seconds to deflate the graph's payload with one ``zlib.compress`` and with
    `_graph_wire.deflate` (two halves at once on two cores), alternated, the quickest of
    ``repeats`` each; and their ratio."""
    from tpukit.graph._graph_payload import graph_wire
    from tpukit.graph._graph_wire import _LEVEL, deflate, wire_bytes

    raw = wire_bytes(graph_wire(g._data, g.title, g.stage))
    runs: dict[str, list[float]] = {"one": [], "two": []}
    for _ in range(repeats):
        for key, how in (
            ("one", lambda: zlib.compress(raw, _LEVEL)),
            ("two", lambda: deflate(raw)),
        ):
            start = time.perf_counter()
            how()
            runs[key].append(time.perf_counter() - start)
    one, two = min(runs["one"]), min(runs["two"])
    return {
        "deflate_one_core_s": round(one, 4),
        "deflate_two_cores_s": round(two, 4),
        "deflate_speedup": round(one / two, 2),
    }


def _largest(nodes, data) -> int | None:
    return max(nodes, key=lambda i: len(data.children[i]), default=None)


def measure(hlo_text: str, title: str, repeats: int) -> dict:
    """Python and browser times, median of ``repeats`` runs (each on a fresh module and page)."""
    from playwright.sync_api import sync_playwright

    runs: dict[str, list[float]] = {}
    for _ in range(repeats):
        times, (g, page, glance) = python_side(hlo_text, title)
        for key, value in times.items():
            runs.setdefault(key, []).append(value)
    module, data = g.module, g._data
    path = TMP / f"tpukit-graph-speed-{os.getpid()}.html"
    path.write_text(page, encoding="utf-8")
    fusion = _largest(
        (i for i, ins in enumerate(data.instr) if ins is not None and ins.opcode == "fusion"), data
    )
    group = None  # the largest closed group the first view draws (it fits the view: see the page)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for _ in range(repeats):
            tab = browser.new_page(viewport={"width": 1400, "height": 900})
            start = time.perf_counter()
            tab.goto(path.as_uri())
            tab.wait_for_selector(".tkg-root[data-state=ready]", timeout=60000)
            runs.setdefault("open_s", []).append(time.perf_counter() - start)
            tab.evaluate(_NEXT_FRAME)
            runs.setdefault("painted_s", []).append(time.perf_counter() - start)
            drawn = {
                key: int(tab.get_attribute(".tkg-root", f"data-{key}"))
                for key in ("nodes", "edges")
            }
            marks = {
                key: float(tab.get_attribute(".tkg-root", f"data-{key}-ms")) / 1000
                for key in ("script", "decoded", "ready")
            }
            runs.setdefault("open_in_page_s", []).append(marks["ready"])
            # The page's own stages: HTML parsed and scripts compiled, payload decoded, drawn.
            runs.setdefault("page_script_s", []).append(marks["script"])
            runs.setdefault("page_decode_s", []).append(marks["decoded"] - marks["script"])
            runs.setdefault("page_draw_s", []).append(marks["ready"] - marks["decoded"])
            if group is None:
                group = _largest(
                    (i for i in tab.evaluate(_CLOSED_GROUPS) if data.kind[i] != 0), data
                )
            targets = [
                (node, key)
                for node, key in ((group, "expand_group"), (fusion, "expand_fusion"))
                if node is not None
            ]
            for node, key in targets:
                if key == "expand_fusion":  # searching its (unique) name opens its ancestors
                    tab.fill(".tkg-search", data.label[node])
                    tab.press(".tkg-search", "Enter")
                renders = tab.get_attribute(".tkg-root", "data-renders")
                start = time.perf_counter()
                tab.evaluate(_CLICK_TOGGLE, node)
                tab.wait_for_function(
                    f"document.querySelector('.tkg-root').dataset.renders !== '{renders}'"
                )
                runs.setdefault(f"{key}_s", []).append(time.perf_counter() - start)
            tab.close()
        runs.update(notebook_paint(browser, g._repr_html_(), repeats))
        if glance is not None:
            runs.update(notebook_paint(browser, glance, repeats, prefix="glance_"))
        browser.close()
    path.unlink()
    result = {key: round(statistics.median(values), 3) for key, values in runs.items()}
    result.update({f"{key}_max": round(max(values), 3) for key, values in runs.items()})
    stages = ("parse", "glance", "group", "html")
    python = sum(result[f"{stage}_s"] for stage in stages)
    result["python_cpu_s"] = round(
        min(map(sum, zip(*(runs[f"{stage}_cpu_s"] for stage in stages)))), 3
    )
    # The whole graph drawn: everything the kernel writes, then the browser's draw of it.
    result["whole_s"] = round(python + result["frame_s"], 3)
    result["whole_lab_s"] = round(python + result["lab_s"], 3)
    result["cell_tab_s"] = round(python + result["painted_s"], 3)
    if glance is None:  # shown whole at once
        result["cell_s"], result["cell_lab_s"] = result["whole_s"], result["whole_lab_s"]
    else:  # the first view drawn: the glance, drawn while the kernel writes the rest
        first = result["parse_s"] + result["glance_s"]
        result["glance_cpu_s"] = round(min(runs["glance_cpu_s"]), 3)
        result["cell_s"] = round(first + result["glance_frame_s"], 3)
        result["cell_lab_s"] = round(first + result["glance_lab_s"], 3)
    result.update(deflate_times(g))
    nodes, edges = g.view_counts()
    return {
        "title": title,
        "instructions": sum(1 for _ in module.instructions()),
        "entry_instructions": len(module.entry),
        "computations": len(module.computations),
        "hlo_bytes": len(hlo_text.encode()),
        "graph_nodes": len(data.kind),
        "open_view": {"nodes": nodes, "edges": edges},  # the payload's first view
        "drawn_view": drawn,  # what the page draws first (as much of it as fits the view)
        "html_bytes": len(page.encode()),
        "expanded_group": None
        if group is None
        else {"name": data.label[group], "children": len(data.children[group])},
        "expanded_fusion": None
        if fusion is None
        else {"name": data.label[fusion], "inside": len(data.children[fusion])},
        "repeats": repeats,
        **result,
    }


COLUMNS = (
    ("module", 34, "title", "{}"),
    ("instrs", 7, "instructions", "{:,}"),
    ("parse", 6, "parse_s", "{:.2f}"),
    ("glance", 6, "glance_s", "{:.2f}"),
    ("group", 6, "group_s", "{:.2f}"),
    ("HTML", 6, "html_s", "{:.2f}"),
    ("py.cpu", 6, "python_cpu_s", "{:.2f}"),
    ("open", 6, "open_s", "{:.2f}"),
    ("script", 6, "page_script_s", "{:.2f}"),
    ("decode", 6, "page_decode_s", "{:.2f}"),
    ("draw", 6, "page_draw_s", "{:.2f}"),
    ("paint", 6, "painted_s", "{:.2f}"),
    ("frame", 6, "frame_s", "{:.2f}"),
    ("lab", 6, "lab_s", "{:.2f}"),
    ("g.frm", 6, "glance_frame_s", "{:.2f}"),
    ("cell", 6, "cell_s", "{:.2f}"),
    ("c.lab", 6, "cell_lab_s", "{:.2f}"),
    ("whole", 6, "whole_s", "{:.2f}"),
    ("defl.x", 6, "deflate_speedup", "{:.2f}"),
    ("exp.grp", 7, "expand_group_s", "{:.3f}"),
    ("exp.fus", 7, "expand_fusion_s", "{:.3f}"),
)


def table(results: list[dict]) -> str:
    lines = [" ".join(f"{name:>{width}}" for name, width, _, _ in COLUMNS) + "   (seconds)"]
    for result in results:
        cells = []
        for _, width, key, spec in COLUMNS:
            value = result.get(key)
            cells.append(f"{'-' if value is None else spec.format(value):>{width}}")
        lines.append(" ".join(cells))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", nargs="*", default=["resnet50", "gpt_small"], choices=list(STEPS)
    )
    parser.add_argument(
        "--hlo", type=pathlib.Path, nargs="*", default=[], help="HLO text files (.gz too)"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--large", type=int, default=400_000, help="instructions of the generated row (0: none)"
    )
    parser.add_argument(
        "--dump-mb", type=float, default=0, help="MB of the generated dump row (0: none)"
    )
    parser.add_argument("--label", default="", help="a word for the JSON's name, e.g. before")
    parser.add_argument(
        "--build-only", action="store_true", help="only compile and cache the steps"
    )
    args = parser.parse_args()
    modules = [(f"{name} train step (CPU)", train_step_hlo(name)) for name in args.models]
    if args.build_only:
        return
    modules += [(path.name.removesuffix(".gz"), read_hlo(path)) for path in args.hlo]
    python_side(train_step_hlo("mlp"), "warm-up")  # imports and regexes, as after a first graph
    results = []
    for title, text in modules:
        results.append(measure(text, title, args.repeats))
        print(table(results[-1:]).splitlines()[-1], flush=True)
    print(table(results))
    if args.large:
        large = large_row(args.large)
        results.append(large)
        print(large_table(large))
    if args.dump_mb:
        dump = dump_row(args.dump_mb)
        results.append(dump)
        print(dump_table(dump))
    RESULTS.mkdir(parents=True, exist_ok=True)
    label = f"-{args.label}" if args.label else ""
    out = RESULTS / f"hlo_graph_speed{label}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    machine = {"cpus": os.cpu_count(), "browser": CHROMIUM, "load_average": os.getloadavg()}
    out.write_text(
        json.dumps({"label": args.label, "machine": machine, "modules": results}, indent=2) + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
