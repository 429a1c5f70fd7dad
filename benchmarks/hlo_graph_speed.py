"""How fast the interactive HLO graph opens and expands on a real training step.

Builds a ResNet-50 training step (Flax NNX, batch 8, on CPU), compiles it once and caches the
optimized HLO text in the temp directory (compiling takes minutes on two cores), renders it with
``tpukit.hlo.graph`` and measures in headless Chromium, with Playwright:

- open: from navigation start until the collapsed view is drawn;
- expand: from a click on a fusion until its interior is laid out and drawn.

Prints a table and writes JSON under ``benchmarks/results/``.

    .venv/bin/python benchmarks/hlo_graph_speed.py [--repeats 3] [--hlo FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import tempfile
import time

CACHE = pathlib.Path(tempfile.gettempdir()) / "tpukit-resnet50-train-step-optimized.hlo.txt"
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


def resnet50_step_hlo(path: pathlib.Path = CACHE) -> str:
    """The optimized HLO text of one ResNet-50 training step, compiled once and cached."""
    if path.exists():
        return path.read_text()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    class Bottleneck(nnx.Module):
        def __init__(self, cin, width, stride, rngs):
            cout = width * 4
            self.conv1 = nnx.Conv(cin, width, (1, 1), use_bias=False, rngs=rngs)
            self.bn1 = nnx.BatchNorm(width, rngs=rngs)
            self.conv2 = nnx.Conv(width, width, (3, 3), strides=stride, use_bias=False, rngs=rngs)
            self.bn2 = nnx.BatchNorm(width, rngs=rngs)
            self.conv3 = nnx.Conv(width, cout, (1, 1), use_bias=False, rngs=rngs)
            self.bn3 = nnx.BatchNorm(cout, rngs=rngs)
            self.has_proj = stride != 1 or cin != cout
            if self.has_proj:
                self.proj = nnx.Conv(cin, cout, (1, 1), strides=stride, use_bias=False, rngs=rngs)
                self.proj_bn = nnx.BatchNorm(cout, rngs=rngs)

        def __call__(self, x):
            y = nnx.relu(self.bn1(self.conv1(x)))
            y = nnx.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            if self.has_proj:
                x = self.proj_bn(self.proj(x))
            return nnx.relu(x + y)

    class ResNet50(nnx.Module):
        def __init__(self, num_classes, rngs):
            self.stem = nnx.Conv(3, 64, (7, 7), strides=2, use_bias=False, rngs=rngs)
            self.stem_bn = nnx.BatchNorm(64, rngs=rngs)
            blocks, cin = [], 64
            for width, count, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
                for i in range(count):
                    blocks.append(Bottleneck(cin, width, stride if i == 0 else 1, rngs))
                    cin = width * 4
            self.blocks = nnx.List(blocks) if hasattr(nnx, "List") else blocks
            self.head = nnx.Linear(cin, num_classes, rngs=rngs)

        def __call__(self, x):
            x = nnx.relu(self.stem_bn(self.stem(x)))
            x = nnx.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
            for block in self.blocks:
                x = block(x)
            return self.head(x.mean(axis=(1, 2)))

    model = ResNet50(1000, nnx.Rngs(0))
    graphdef, params, stats = nnx.split(model, nnx.Param, nnx.BatchStat)
    tx = optax.sgd(0.1, momentum=0.9)
    opt_state = tx.init(params)

    def train_step(params, stats, opt_state, images, labels):
        def loss_fn(params, stats):
            m = nnx.merge(graphdef, params, stats, copy=True)
            logits = m(images)
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
            return loss, nnx.state(m, nnx.BatchStat)

        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, stats)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), new_stats, opt_state, loss

    images = jnp.zeros((8, 224, 224, 3), jnp.float32)
    labels = jnp.zeros((8,), jnp.int32)
    start = time.perf_counter()
    text = jax.jit(train_step).lower(params, stats, opt_state, images, labels).compile().as_text()
    print(f"compiled ResNet-50 train step in {time.perf_counter() - start:.0f} s")
    path.write_text(text)
    return text


# A click on a node's open/close button, wherever the node is on the canvas.
_CLICK_TOGGLE = """node => {
  const toggle = document.querySelector(`.tkg-node[data-node="${node}"] .tkg-toggle`);
  for (const type of ["pointerdown", "pointerup"]) {
    toggle.dispatchEvent(new PointerEvent(type, {bubbles: true, button: 0, pointerId: 1}));
  }
}"""


def _largest_fusion(data) -> int:
    """The fusion with the most instructions inside (the hardest one to open)."""
    fusions = [i for i, ins in enumerate(data.instr) if ins is not None and ins.opcode == "fusion"]
    return max(fusions, key=lambda i: len(data.children[i]))


def measure(hlo_text: str, repeats: int) -> dict:
    """Open and expand times in headless Chromium, median of ``repeats`` fresh pages."""
    from playwright.sync_api import sync_playwright

    from tpukit.hlo import parse_hlo
    from tpukit.hlo._graph_view import graph

    start = time.perf_counter()
    module = parse_hlo(hlo_text)
    parse_s = time.perf_counter() - start
    g = graph(module, title="ResNet-50 train step", stage="optimized")
    path = pathlib.Path(tempfile.gettempdir()) / "tpukit-resnet50-graph.html"
    g.save(path)
    build_s = time.perf_counter() - start - parse_s
    data = g._data
    fusion = _largest_fusion(data)
    opened = set(data.initial_open())
    closed_group = max(
        (
            i
            for i, kind in enumerate(data.kind)
            if kind != 0 and i not in opened and data.parent[i] in opened
        ),
        key=lambda i: len(data.children[i]),
    )
    runs = {
        "open_s": [],
        "open_in_page_ms": [],
        "expand_fusion_s": [],
        "expand_fusion_js_ms": [],
        "expand_group_s": [],
        "expand_group_js_ms": [],
    }
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for _ in range(repeats):
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            start = time.perf_counter()
            page.goto(path.as_uri())
            page.wait_for_selector(".tkg-root[data-state=ready]", timeout=60000)
            runs["open_s"].append(time.perf_counter() - start)
            runs["open_in_page_ms"].append(float(page.get_attribute(".tkg-root", "data-ready-ms")))
            for node, key in ((closed_group, "expand_group"), (fusion, "expand_fusion")):
                if key == "expand_fusion":  # searching its (unique) name opens its ancestors
                    page.fill(".tkg-search", data.label[node])
                    page.press(".tkg-search", "Enter")
                renders = page.get_attribute(".tkg-root", "data-renders")
                start = time.perf_counter()
                page.evaluate(_CLICK_TOGGLE, node)
                page.wait_for_function(
                    f"document.querySelector('.tkg-root').dataset.renders !== '{renders}'"
                )
                runs[f"{key}_s"].append(time.perf_counter() - start)
                runs[f"{key}_js_ms"].append(
                    float(page.get_attribute(".tkg-root", "data-render-ms"))
                )
            page.close()
        browser.close()
    nodes, edges = g.view_counts()
    return {
        "instructions": sum(1 for _ in module.instructions()),
        "entry_instructions": len(module.entry),
        "computations": len(module.computations),
        "graph_nodes": len(data.kind),
        "open_view": {"nodes": nodes, "edges": edges},
        "html_bytes": path.stat().st_size,
        "python_parse_s": round(parse_s, 3),
        "python_build_s": round(build_s, 3),
        "expanded_fusion": {"name": data.label[fusion], "inside": len(data.children[fusion])},
        "expanded_group": {
            "name": data.label[closed_group],
            "children": len(data.children[closed_group]),
        },
        "repeats": repeats,
        **{key: round(statistics.median(values), 4) for key, values in runs.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hlo", type=pathlib.Path, help="HLO text to use instead of ResNet-50")
    parser.add_argument("--build-only", action="store_true", help="only compile and cache the HLO")
    args = parser.parse_args()
    text = args.hlo.read_text() if args.hlo else resnet50_step_hlo()
    if args.build_only:
        print(f"{len(text):,} characters of HLO in {CACHE}")
        return
    result = measure(text, args.repeats)
    print(
        f"{'instructions':>12} {'ENTRY':>6} {'open (s)':>9} {'expand fusion (s)':>18} {'expand group (s)':>17}"
    )
    print(
        f"{result['instructions']:>12,} {result['entry_instructions']:>6,} {result['open_s']:>9.3f} "
        f"{result['expand_fusion_s']:>18.3f} {result['expand_group_s']:>17.3f}"
    )
    print(
        f"in page: open {result['open_in_page_ms']:.0f} ms after navigation start, "
        f"fusion re-layout and redraw {result['expand_fusion_js_ms']:.0f} ms "
        f"({result['expanded_fusion']['inside']} nodes inside), group {result['expand_group_js_ms']:.0f} ms; "
        f"HTML {result['html_bytes'] / 1e6:.2f} MB; Python parse {result['python_parse_s']:.2f} s, "
        f"graph+HTML {result['python_build_s']:.2f} s"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"hlo_graph_speed-{time.strftime('%Y%m%d-%H%M%S')}.json"
    result["machine"] = {"cpus": os.cpu_count(), "browser": CHROMIUM}
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
