"""What the HLO graph's first view shows on a corpus of modules, measured in Chromium.

For each module: the nodes and edges the text says the first view draws
(``HloGraph.view_counts``), what the page drew (its ``data-nodes``, its edge paths), the
boxes that lie outside the view (cut off), the scale, the view's height, the groups
drawn open, whether the heaviest stage of ops (`_graph_parts`; one that does some work) is
drawn open (if not, the estimated size with it and the groups above it alone open: whether
any first view could show it), how many clicks (closed groups) lie between the view and
the heaviest op (past 2, the estimated size with the first of them open: why the view
stopped short), the groups of plumbing drawn open (the inputs or outputs section, a part
of parameters, constants, tuples, their elements and bitcasts alone), the stages and
scopes drawn open that hold less than half the work of one the view shows closed (FLOPs,
else bytes; a stage of stages counts as its heaviest stage, as `_first_view` ranks it; a
step's passes, which open as they fit, aside): a light group drawn open as if it were the
work; and the mean depth of an op (outside fusions) and the mean clicks to it: how deep
the groups put the ops and how far the view leaves them. A screenshot of each output goes
to ``out/first_views/<label>``. The page is a JupyterLab-like notebook whose output is
1000 pixels wide (the graph's own view is 998).

The corpus: the optimized training steps of zoo models (the MNIST tutorial's step, with
``nnx.value_and_grad`` and optax Adam) and small JAX programs with loops, a switch, an
attention and a sort, each compiled here on CPU once and cached in the temp directory;
the modules in ``tests/data/hlo`` and its dumps in ``tests/data/hlo/dump``; and any HLO
text files given with ``--hlo`` (modules compiled elsewhere: keep them out of the
repository; ``hlo_corpus.py`` copies 29 real ones).

Runs against whichever ``tpukit`` is on the import path, so one script measures the
code before and after a change:

    .venv/bin/python benchmarks/hlo_first_views.py --label after [--hlo a.hlo b.hlo]

Prints a table and writes JSON under ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
TMP = pathlib.Path(tempfile.gettempdir())
CHROMIUM = "/usr/bin/chromium"
ORIGIN = "http://notebook.test"
# What only passes values on: a group of these alone, or the inputs or outputs section,
# drawn open is a first view on plumbing.
_SETUP = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast"})
ZOO = {  # model -> (input, labels) of its training step
    "mlp": ("f32[128,784]", "s32[128]"),
    "lenet5": ("f32[32,28,28,1]", "s32[32]"),
    "allconv_cifar10": ("f32[16,32,32,3]", "s32[16]"),
    "vgg11": ("f32[4,224,224,3]", "s32[4]"),
    "resnet18": ("f32[4,224,224,3]", "s32[4]"),
}
LAB = """<!DOCTYPE html><html><head><meta charset="utf-8"><style>
:root {--jp-ui-font-size0:0.83333em; --jp-ui-font-size1:13px;}
html, body {margin: 0; height: 100%;} #panel {height: 100vh; overflow-y: auto;}
.cell {padding: 8px 16px 8px 80px;} #out {width: 1000px;}
</style></head><body><div id="panel"><div class="cell"><div id="out"></div></div>
<div class="cell" style="height: 1500px"></div></div><script>
window.showOutput = function (html) {
  var out = document.getElementById("out");
  out.innerHTML = html;
  out.querySelectorAll("script").forEach(function (old) {
    var script = document.createElement("script");
    script.textContent = old.textContent;
    old.parentNode.replaceChild(script, old);
  });
};
</script></body></html>"""
MEASURE = """() => {
  const root = document.querySelector('.tkg-root');
  const view = root.querySelector('.tkg-viewport').getBoundingClientRect();
  let cut = 0, boxes = 0;
  for (const r of root.querySelectorAll('.tkg-node rect.tkg-box')) {
    boxes++;
    const b = r.getBoundingClientRect();
    if (b.left < view.left - 1 || b.right > view.right + 1 || b.top < view.top - 1 ||
        b.bottom > view.bottom + 1) cut++;
  }
  const open = Array.from(root.querySelectorAll('.tkg-group'), g => g.dataset.name).slice(0, 12);
  const ids = Array.from(root.querySelectorAll('.tkg-group'), g => +g.dataset.node);
  const outer = root.querySelector('.tkg-group rect').getBBox();
  return {drawn: +root.dataset.nodes, boxes, cut, scale: +root.dataset.scale,
          width: Math.round(outer.width), tall: Math.round(outer.height),
          height: Math.round(view.height), edges: root.querySelectorAll('path.tkg-edge').length,
          open, ids};
}"""


def _programs() -> dict[str, object]:
    """Small JAX programs: ``name -> (function, argument shapes)``."""
    import jax
    import jax.numpy as jnp

    def scan_rnn(xs, w):
        def step(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h.sum()

        return jax.lax.scan(step, jnp.zeros(xs.shape[1]), xs)

    def fori_matmul(x, w):
        return jax.lax.fori_loop(0, 8, lambda i, a: jnp.tanh(a @ w), x)

    def cond_switch(i, x, w):
        return jax.lax.switch(i, [lambda v: v @ w, lambda v: jnp.sin(v) @ w, lambda v: v * 2], x)

    def attention(q, k, v):
        s = jnp.einsum("bqd,bkd->bqk", q, k) / 8.0
        return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)

    def sort_topk(x):
        return jax.lax.top_k(x, 8)

    def remat_grad(x, w1, w2):
        @jax.checkpoint
        def block(h):
            return jnp.tanh(jnp.tanh(h @ w1) @ w2)

        return jax.grad(lambda h: block(h).sum())(x)

    f32 = jnp.float32
    s = jax.ShapeDtypeStruct
    return {
        "scan_rnn": (scan_rnn, (s((16, 64), f32), s((64, 64), f32))),
        "fori_matmul": (fori_matmul, (s((128, 128), f32), s((128, 128), f32))),
        "cond_switch": (cond_switch, (s((), jnp.int32), s((64, 64), f32), s((64, 64), f32))),
        "attention": (attention, (s((4, 128, 64), f32),) * 3),
        "sort_topk": (sort_topk, (s((64, 1024), f32),)),
        "remat_grad": (remat_grad, (s((32, 256), f32), s((256, 256), f32), s((256, 256), f32))),
    }


def _cached(name: str, make) -> str:
    path = TMP / f"tpukit-firstview-{name}.hlo.txt"
    if not path.exists():
        path.write_text(make())
    return path.read_text()


def corpus(extra: list[str]) -> list[tuple[str, str, str]]:
    """``(name, source, HLO text)`` of every module measured."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    found = []

    def step(name: str) -> str:
        import optax
        from _steps import tutorial_train_step
        from flax import nnx

        import tpukit
        from tpukit import zoo

        model = zoo.create(name)
        optimizer = optax.adam(1e-3)
        state = optimizer.init(nnx.state(model, nnx.Param))
        x, y = (tpukit.shape(s) for s in ZOO[name])
        compiled = tpukit.compile(tutorial_train_step(optimizer), model, state, x, y)
        return compiled.hlo_text("optimized")

    for name in ZOO:
        found.append(
            (
                f"{name}_step",
                "zoo training step, compiled here (CPU)",
                _cached(f"{name}_step", lambda n=name: step(n)),
            )
        )
    for name, (fn, args) in _programs().items():
        import jax

        found.append(
            (
                name,
                "JAX program, compiled here (CPU)",
                _cached(name, lambda f=fn, a=args: jax.jit(f).lower(*a).compile().as_text()),
            )
        )
    for path in sorted((ROOT / "tests" / "data" / "hlo").glob("*.hlo")):
        found.append((path.stem, "tests/data/hlo", path.read_text()))
    for path in sorted((ROOT / "tests" / "data" / "hlo" / "dump").glob("*after_optimizations.txt")):
        found.append(
            (
                path.name.split(".")[1] + "." + path.name.split(".")[2][:12],
                "tests/data/hlo/dump",
                path.read_text(),
            )
        )
    for item in extra:
        path = pathlib.Path(item)
        found.append(
            (path.name.removesuffix(".hlo").removesuffix(".txt"), f"--hlo {path}", path.read_text())
        )
    return found


def _estimate(g) -> str:
    """The drawing's size as `_graph_frame` estimates it, where this tpukit has one."""
    try:
        from tpukit.graph._first_view import first_view
        from tpukit.graph._graph_frame import Frame
    except ImportError:
        return "-"
    w, h = Frame(g._data).size(0, set(first_view(g._data)))
    return f"{w:.0f}x{h:.0f}"


def _next_click(g, opened: set[int], op: int) -> str:
    """Where the heaviest op is more than 2 clicks away: the drawing's estimated size
    (`_graph_frame`) with the first closed group on the way to it opened too, and whether
    that fits the frame (why the view stops short of it), where this tpukit has a frame."""
    try:
        from tpukit.graph._graph_frame import Frame
    except ImportError:
        return "-"
    data = g._data
    path = []
    while op > 0:
        op = data.parent[op]
        path.append(op)
    first = next(a for a in reversed(path) if a not in opened)
    frame = Frame(data)
    w, h = frame.size(0, opened | {first})
    fits = "fits" if frame.fits(opened | {first}) else "does not fit"
    return f"{data.label[first]} open: {w:.0f}x{h:.0f}, {fits}"


def _stage_path(g, stage: int) -> str:
    """Where the heaviest stage is shut: the drawing's estimated size (`_graph_frame`; its
    height is the page's own) with the stage and the groups above it open, every other
    group shut, the stage's ranks, and whether that fits the frame: if not, no first view
    can show it open, whatever else it shuts (where this tpukit has a frame)."""
    try:
        from tpukit.graph._graph_frame import Frame
        from tpukit.graph._graph_sizes import FRAME_H, FRAME_W
    except ImportError:
        return "-"
    data = g._data
    path = {0, stage}
    node = stage
    while node > 0:
        node = data.parent[node]
        path.add(node)
    frame = Frame(data)
    w, h = frame.size(0, path)
    fits = "fits" if frame.fits(path) else f"does not fit {FRAME_W}x{FRAME_H}"
    ranks = max(frame.ranks(stage)[0]) + 1
    return f"it and {len(path) - 1} groups above open ({ranks} ranks): {w:.0f}x{h:.0f}, {fits}"


def _depths(data, opened: set[int]) -> tuple[float, float]:
    """The mean depth of an op outside fusions (the groups above it) and the mean clicks to
    it from the view (its closed groups): how deep the tree puts the ops, and how far the
    first view leaves them."""
    from tpukit.graph._graph_nodes import INSTRUCTION

    found: list[tuple[int, int]] = []
    stack = [(0, 0, 0)]  # (group, its depth, its closed groups and itself if closed)
    while stack:
        node, depth, shut = stack.pop()
        instr = data.instr[node]
        if instr is not None and instr.opcode == "fusion":
            continue  # (its ops are the fusion's)
        shut += node not in opened
        for kid in data.children[node]:
            if data.kind[kid] == INSTRUCTION:
                found.append((depth + 1, shut))
            stack.append((kid, depth + 1, shut))
    if not found:
        return 0.0, 0.0
    return (sum(d for d, _ in found) / len(found), sum(c for _, c in found) / len(found))


def work(g, opened: set[int]) -> dict:
    """Where the work is and how far the drawn view is from it: the heaviest stage (a
    part of ops, holding no part or scope, with the most FLOPs, then bytes: a part that
    holds a layer is a stage of groups, and drawn open it shows them closed) and whether
    it is drawn open; the heaviest op (an instruction outside fusions with the most FLOPs, else
    the most bytes; the nearest of equals) and the clicks to it (its closed enclosing
    groups)."""
    from tpukit.graph._graph_costs import node_costs
    from tpukit.graph._graph_nodes import INSTRUCTION, PART, SCOPE

    data = g._data
    flops, _, own = node_costs(data)
    kind, parent, instr, children = data.kind, data.parent, data.instr, data.children

    def ancestors(node: int) -> list[int]:
        found = []
        while node > 0:
            node = parent[node]
            found.append(node)
        return found

    def in_fusion(node: int) -> bool:
        return any(instr[a] is not None and instr[a].opcode == "fusion" for a in ancestors(node))

    ops = [n for n, k in enumerate(kind) if k == INSTRUCTION and not in_fusion(n)]
    most = max(flops[n] for n in ops)  # of equals (a layer's dots, an optimizer's
    # multiplies of one shape), the nearest
    if most:
        heavy = [n for n in ops if flops[n] == most]
    else:
        most = max(own[n] for n in ops)
        heavy = [n for n in ops if own[n] == most]

    def clicks(node: int) -> int:
        return sum(1 for a in ancestors(node) if a not in opened)

    op = min(heavy, key=clicks)

    def plumbing(group: int) -> bool:  # setup alone: the payload's "parameters" parts
        if data.section.get(group) in ("inputs", "outputs"):
            return True
        found = [instr[n] for n in range(group + 1, _end(data, group)) if kind[n] == INSTRUCTION]
        return bool(found) and all(i.opcode in _SETUP for i in found)

    def chosen(group: int) -> bool:  # a stage or scope the view chose to open, or not
        return kind[group] in (PART, SCOPE) and group not in data.section and not plumbing(group)

    def work_of(group: int) -> tuple[int, int]:  # a stage of stages: its heaviest stage's
        while kind[group] == PART and any(kind[k] == PART for k in children[group]):
            group = max(children[group], key=lambda k: (flops[k], own[k]))
        return flops[group], own[group]

    def outweighs(a: tuple[int, int], b: tuple[int, int]) -> bool:
        return a[0] > 2 * b[0] if a[0] else not b[0] and a[1] > 2 * b[1]

    shut = [
        work_of(s)
        for g in opened
        for s in children[g]
        if s not in opened and children[s] and chosen(s)
    ]
    lighter = [
        data.label[g]
        for g in sorted(opened)
        if g and chosen(g) and any(outweighs(s, work_of(g)) for s in shut)
    ]
    leaves = [  # a stage of ops: a part holding no group but fusions (no part, no scope),
        # and some work: a stage of parameters and constants alone is not the work
        n
        for n, k in enumerate(kind)
        if k == PART
        and not any(kind[c] in (PART, SCOPE) for c in children[n])
        and not in_fusion(n)
        and (flops[n] or own[n])
        and not plumbing(n)
    ]
    stage = max(leaves, key=lambda n: (flops[n], own[n], -n)) if leaves else None
    depth, shut_above = _depths(data, opened)
    return {
        "heaviest_op": data.label[op],
        "op_flops": flops[op],
        "clicks": clicks(op),
        "next_click": _next_click(g, opened, op) if clicks(op) > 2 else "",
        "stage_open": None if stage is None else stage in opened,
        "stage_path": "" if stage is None or stage in opened else _stage_path(g, stage),
        "op_depth_mean": round(depth, 3),
        "op_clicks_mean": round(shut_above, 3),
        "op_depth": len(ancestors(op)) - 1,
        "plumbing_open": [data.label[n] for n in sorted(opened) if n and plumbing(n)],
        "lighter_open": lighter,
    }


def _end(data, node: int) -> int:
    """The id after ``node``'s subtree (ids are depth first)."""
    while node > 0:
        kids = data.children[data.parent[node]]
        at = kids.index(node) + 1
        if at < len(kids):
            return kids[at]
        node = data.parent[node]
    return len(data.kind)


def measure(items, shots: pathlib.Path) -> list[dict]:
    from playwright.sync_api import sync_playwright

    from tpukit.hlo import graph

    shots.mkdir(parents=True, exist_ok=True)
    rows = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        for name, source, text in items:
            g = graph(text, title=name)
            nodes, edges = g.view_counts()
            guess = _estimate(g)
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.route("**/*", lambda r: r.fulfill(status=200, content_type="text/html", body=LAB))
            page.goto(f"{ORIGIN}/lab.html")
            page.evaluate("html => window.showOutput(html)", g._repr_html_())
            page.wait_for_function(
                "document.querySelector('.tkg-root[data-state=ready]')", timeout=120000
            )
            seen = page.evaluate(MEASURE)
            page.locator(".tkg-root").screenshot(path=str(shots / f"{name}.png"))
            page.close()
            rows.append(
                {
                    **work(g, set(seen.pop("ids"))),
                    "name": name,
                    "source": source,
                    "said": nodes,
                    "said_edges": edges,
                    "estimate": guess,
                    **seen,
                    "shot": str(shots / f"{name}.png"),
                }
            )
            row = rows[-1]
            print(
                f"{name:28} said {nodes:4} drawn {row['drawn']:4} edges {edges:4}/"
                f"{row['edges']:4} cut {row['cut']:3} scale {row['scale']:.2f} "
                f"h {row['height']:4} size {row['width']}x{row['tall']} (est. {guess}) "
                f"stage open {_yes(row['stage_open'])} clicks {row['clicks']} "
                f"plumbing {len(row['plumbing_open'])} lighter {len(row['lighter_open'])} "
                f"open: {', '.join(row['open'][1:5])}"
                + f" | op depth {row['op_depth_mean']:.2f} clicks {row['op_clicks_mean']:.2f}"
                + (f" | next click: {row['next_click']}" if row["next_click"] else "")
                + (f" | stage shut: {row['stage_path']}" if row["stage_path"] else ""),
                flush=True,
            )
        browser.close()
    return rows


def _mean(rows: list[dict], key: str) -> float:
    return sum(row[key] for row in rows) / max(1, len(rows))


def _yes(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "no"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="now", help="names the JSON and screenshot folder")
    parser.add_argument("--hlo", nargs="*", default=[], help="more HLO text files")
    parser.add_argument("--only", nargs="*", default=None, help="measure these names only")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    items = corpus(args.hlo)
    if args.only:
        items = [item for item in items if item[0] in args.only]
    out = ROOT / "benchmarks" / "results"
    rows = measure(items, ROOT / "out" / "first_views" / args.label)
    same = sum(row["said"] == row["drawn"] for row in rows)
    uncut = sum(row["cut"] == 0 for row in rows)
    staged = [row for row in rows if row["stage_open"] is not None]
    opened = sum(bool(row["stage_open"]) for row in staged)
    # (shut where it and the groups above it alone open would fit: the view's own doing)
    missed = sum(row["stage_path"].endswith(", fits") for row in staged)
    near = sum(row["clicks"] <= 2 for row in rows)
    clean = sum(not row["plumbing_open"] for row in rows)
    focused = sum(not row["lighter_open"] for row in rows)
    print(
        f"{len(rows)} modules: said = drawn on {same}, nothing cut off on {uncut}; heaviest "
        f"stage open on {opened} of {len(staged)} with stages (shut where it could fit on "
        f"{missed}); heaviest op within 2 clicks "
        f"on {near}; none on plumbing on {clean}; no group open lighter than half of one "
        f"shut on {focused}; mean op depth {_mean(rows, 'op_depth_mean'):.3f}, mean clicks "
        f"to an op {_mean(rows, 'op_clicks_mean'):.3f} (ops outside fusions, a mean per module)"
    )
    out.mkdir(exist_ok=True)
    (out / f"hlo_first_views_{args.label}.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
