"""Where the time of ``tpukit.fit``'s own step goes, against a plain ``lax.scan`` epoch.

``Trainer(mlp, adam).compile_step`` gives the program ``fit`` runs: one epoch of MNIST
(468 steps of 128, device-resident data, shuffled by gathered indices) with fit's checks
(the non-finite guard, metrics). Timed against a hand-written ``lax.scan`` over the same
batches with the tutorial's step and no checks (the baseline, in the same run), then
profiled with ``Compiled.profile``: time by section and the longest instructions (on an
H200, the guard's finite checks were half of the step: see the stop note of issue 12).

Prints a table and writes ``benchmarks/results/profile_fit_step-<platform>.json``.

    .venv/bin/python benchmarks/profile_fit_step.py [--examples 60000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from _steps import tutorial_train_step
from flax import nnx

import tpukit
from tpukit.train import Trainer

BATCH = 128


def scan_epoch(model, optimizer, x, y, indices):
    """The baseline: the tutorial's step over every batch in one ``lax.scan``, no checks."""
    step = tutorial_train_step(optimizer)
    graphdef, state = nnx.split(model)

    @jax.jit
    def epoch(state, opt_state, x, y, indices):
        def body(carry, batch):
            state, opt_state = carry
            model = nnx.merge(graphdef, state)
            _, model, opt_state = step(model, opt_state, x[batch], y[batch])
            return (nnx.state(model), opt_state), None

        return jax.lax.scan(body, (state, opt_state), indices)[0]

    opt_state = optimizer.init(nnx.state(model, nnx.Param))
    args = (state, opt_state, x, y, indices)
    jax.block_until_ready(epoch(*args))  # compile
    return epoch, args


def seconds_per_call(fn, args, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=60000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    device = jax.devices()[0]
    rng = np.random.default_rng(0)
    x = rng.random((args.examples, 784), dtype=np.float32)
    y = rng.integers(0, 10, args.examples).astype(np.int32)
    steps = args.examples // BATCH

    step = Trainer(tpukit.zoo.create("mlp", seed=0), optax.adam(1e-3)).compile_step(
        (x, y), batch_size=BATCH
    )
    fit_s = step.timeit(repeat=args.repeat).median
    indices = jnp.asarray(rng.permutation(steps * BATCH).reshape(steps, BATCH))
    epoch, epoch_args = scan_epoch(
        tpukit.zoo.create("mlp", seed=0), optax.adam(1e-3), jnp.asarray(x), jnp.asarray(y), indices
    )
    scan_s = seconds_per_call(epoch, epoch_args, args.repeat)
    profile = step.profile(repeat=3)
    sections: dict[str, float] = {}
    for record in profile.table("group"):
        name = record["section"] or "other"
        sections[name] = sections.get(name, 0.0) + record["share"]

    print(
        f"device: {device.platform} {device.device_kind}, jax {jax.__version__}; MNIST MLP, "
        f"Adam, {steps} steps of {BATCH} per call\n"
    )
    print(f"{'program':44} {'ms/call':>9} {'µs/step':>9} {'vs scan':>8}")
    for name, secs in (("hand-written lax.scan (baseline)", scan_s), ("tpukit fit step", fit_s)):
        print(f"{name:44} {secs * 1e3:9.2f} {secs / steps * 1e6:9.1f} {secs / scan_s:7.2f}x")
    print("\nfit step by section: " + ", ".join(f"{k} {v:.0%}" for k, v in sections.items()))
    print("longest instructions:")
    for r in profile.table()[:6]:
        print(f"  {r['name']:28} {r['group']:32} {r['share']:6.1%}  x{r['calls']:g} per call")
    for warning in profile.untraced_iterations():
        print("note:", warning)

    result = {
        "benchmark": "profile_fit_step",
        "platform": device.platform,
        "device": device.device_kind,
        "jax": jax.__version__,
        "steps_per_call": steps,
        "scan_seconds_per_call": scan_s,
        "fit_seconds_per_call": fit_s,
        "fit_over_scan": fit_s / scan_s,
        "fit_sections_share": sections,
        "top_instructions": profile.table()[:10],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"profile_fit_step-{device.platform}.json"
    path.write_text(json.dumps(result, indent=2, default=str))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
