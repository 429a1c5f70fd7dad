"""What finding the first NaN costs: ``tpukit.find_nan`` on the zoo's ResNet-18 and
GPT-small training steps, against compiling and running the step once.

``fit`` pays this only when its guard trips (it replays the bad step once); normal
training pays nothing. For each model this plants a NaN in one example of a batch
(every later value of that row is then NaN: the most the search enters), then times:

* ``jit step``: ``jax.jit`` of the train step, compiled and run once (the reference);
* ``values``: the program compiled once, every value returned and checked on the host;
* ``eager``: operations one by one, each distinct operation compiled once per process;
* ``flags``: the search as ``find_nan`` and ``fit``'s replay run it, on every backend
  (the program compiled once with one reduction per value).

The table gives wall seconds and, beside them, this process's CPU seconds (on a
machine shared with other work the wall time grows with its load; the load average is
recorded); the JSON goes to ``benchmarks/results/nan_replay-<platform>.json``.

    .venv/bin/python benchmarks/nan_replay.py [--batch 4] [--image-size 224] [--tokens 256]
        [--modes values,eager,flags]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from _steps import tutorial_train_step
from flax import nnx

from tpukit import zoo
from tpukit.compilation import search


def _batch(name: str, model, args) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    if name == "gpt_small":
        tokens = rng.integers(0, 50257, (args.batch, args.tokens + 1))
        return tokens[:, :-1].astype(np.int32), tokens[:, 1:].astype(np.int32)
    x = rng.normal(size=(args.batch, *model.input_shape)).astype(np.float32)
    x[1, 0, 0, 0] = np.nan  # one example of the batch holds a NaN
    return x, rng.integers(0, 1000, args.batch).astype(np.int32)


def _model(name: str, args):
    if name == "gpt_small":
        model = zoo.create("gpt_small", seed=0)
        # a NaN in one token's embedding row: the example holding it goes NaN
        model.wte.embedding.value = model.wte.embedding.value.at[7].set(jnp.nan)
        return model
    return zoo.create("resnet18", seed=0, image_size=args.image_size)


def measure(name: str, args) -> dict:
    model = _model(name, args)
    x, y = _batch(name, model, args)
    if name == "gpt_small":
        x[1, 3] = 7  # example 1 reads the NaN row
    optimizer = optax.adam(1e-3)
    opt_state = optimizer.init(nnx.state(model, nnx.Param))
    step = tutorial_train_step(optimizer)
    graphdef, state = nnx.split(model)

    def pure(state, opt_state, x, y):
        loss, model_out, opt_out = step(nnx.merge(graphdef, state), opt_state, x, y)
        return loss, nnx.state(model_out), opt_out

    row = {"model": name, "batch": args.batch, "cpu_count": os.cpu_count()}
    row["load_before"] = os.getloadavg()[0]
    start, cpu = time.perf_counter(), time.process_time()
    jax.block_until_ready(jax.jit(pure)(state, opt_state, x, y))
    row["jit_step_s"] = time.perf_counter() - start
    row["jit_step_cpu_s"] = time.process_time() - cpu
    for mode in args.modes.split(","):
        start, cpu = time.perf_counter(), time.process_time()
        origin = search(step, (model, opt_state, x, y), {}, mode=mode)
        row[f"find_nan_{mode}_s"] = time.perf_counter() - start
        row[f"find_nan_{mode}_cpu_s"] = time.process_time() - cpu
        row["found"] = origin.summary() if origin is not None else None
    row["load_after"] = os.getloadavg()[0]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--models", default="resnet18,gpt_small")
    parser.add_argument("--modes", default="values,eager,flags")
    args = parser.parse_args()
    modes = args.modes.split(",")
    print(f"{'model':<10} {'jit step':>17}" + "".join(f" {m:>17}" for m in modes) + "  found")
    rows = []
    for name in args.models.split(","):
        r = measure(name, args)
        rows.append(r)
        cells = [(r["jit_step_s"], r["jit_step_cpu_s"])]
        cells += [(r[f"find_nan_{m}_s"], r[f"find_nan_{m}_cpu_s"]) for m in modes]
        text = "".join(f" {w:>7.2f}s ({c:>6.2f}s)" for w, c in cells)
        print(f"{r['model']:<10}{text}  {r['found']}  load {r['load_before']:.1f}", flush=True)
    out = Path(__file__).parent / "results" / f"nan_replay-{jax.default_backend()}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
