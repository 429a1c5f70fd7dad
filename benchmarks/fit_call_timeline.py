"""Where a short ``tpukit.fit`` call spends its host time, part by part, in situ.

A loop of ``fit`` calls of one 8-step epoch on the same arrays (a notebook's repeated
cell), each call cut at fixed points (``fit``'s own functions, wrapped): the set-up
before the first dispatch, the dispatch, the host's work while the device computes,
the wait for the figures, and the work after them. Per part, the median wall time and
the calling thread's CPU time (``time.thread_time``), which a loaded machine moves far
less than wall times: the parts before the dispatch and after the figures are the
host's time on the call's critical path; the part while the device computes costs
only where the host's work and the device's threads share the cores (a CPU).

A call's Python runs on caches the device's work has just emptied, so each part costs
several times what it costs in a tight loop: this measures it where it runs.

``--base DIR`` runs the same loop on another checkout (``git archive`` of main, say)
in a subprocess, the two taking turns in chunks, and prints both side by side.

    .venv/bin/python benchmarks/fit_call_timeline.py [--calls 300] [--epochs 1]
        [--device-data] [--base /tmp/main-checkout]

Prints a table and writes ``benchmarks/results/fit_call_timeline-<platform>.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: The cuts, in call order: (label, module, owner, function); the label names the part
#: that ends at the cut.
CUTS = (
    ("set-up before the run", "tpukit.train._run", "Run", "train"),
    ("the run before the dispatch", "tpukit.train._steps", "Step", "__call__"),
    ("host work while the device computes", "tpukit.train._run", None, "_on_host"),
    ("after the figures, before the write-back", "tpukit.train._run", "Run", "_write_back"),
)
PARTS = (
    "set-up before the run",
    "the run before the dispatch",
    "dispatch",
    "host work while the device computes",
    "wait for the figures, read them",
    "after the figures, before the write-back",
    "write-back",
    "the rest of the call",
)


def timeline(calls: int, epochs: int, device_data: bool) -> dict[str, dict[str, float]]:
    """Median wall and thread µs of each part of ``calls`` fit calls (after 5 unmeasured)."""
    import importlib

    import jax
    import numpy as np
    import optax
    from _whole_calls import model_arrays

    import tpukit

    marks: list[tuple[str, float, float]] = []

    def mark(label: str) -> None:
        marks.append((label, time.perf_counter(), time.thread_time()))

    def cut(owner, name: str, before: str, after: str | None) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        def wrapped(*args, **kwargs):
            mark(before)
            try:
                return original(*args, **kwargs)
            finally:
                if after is not None:
                    mark(after)

        setattr(owner, name, wrapped)

    ends = {"__call__": "dispatch", "_on_host": "wait for the figures, read them"}
    ends["_write_back"] = "write-back"
    for label, module, owner, name in CUTS:
        where = importlib.import_module(module)
        cut(getattr(where, owner) if owner else where, name, label, ends.get(name))

    rng = np.random.default_rng(0)
    x = rng.random((8 * 128, 784), dtype=np.float32)
    y = rng.integers(0, 10, 8 * 128).astype(np.int32)
    data = (jax.numpy.asarray(x), jax.numpy.asarray(y)) if device_data else (x, y)
    model = tpukit.zoo.create("mlp", seed=0)

    arrays = model_arrays(model)  # waited for as the scan's are (``_whole_calls``)

    def call() -> None:
        mark("start")
        tpukit.fit(model, optax.adam(1e-3), data, epochs=epochs, batch_size=128, verbose=False)
        jax.block_until_ready(arrays())
        mark("the rest of the call")

    for _ in range(5):
        call()
    found: dict[str, list[tuple[float, float]]] = {part: [] for part in PARTS}
    for _ in range(calls):
        marks.clear()
        call()
        sums = {part: [0.0, 0.0] for part in PARTS}  # a part met several times: summed
        for (_, wall0, cpu0), (label, wall1, cpu1) in zip(marks, marks[1:], strict=False):
            sums[label][0] += (wall1 - wall0) * 1e6
            sums[label][1] += (cpu1 - cpu0) * 1e6
        for part, (wall, cpu) in sums.items():
            found[part].append((wall, cpu))
    return {
        part: {
            "wall_us": statistics.median(w for w, _ in times),
            "thread_us": statistics.median(t for _, t in times),
        }
        for part, times in found.items()
    }


def critical(parts: dict[str, dict[str, float]], clock: str) -> float:
    """The host's µs on the call's critical path: all but the device's time."""
    overlapped = ("host work while the device computes", "wait for the figures, read them")
    return sum(v[clock] for k, v in parts.items() if k not in overlapped)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--device-data", action="store_true")
    parser.add_argument("--base", type=Path, help="another checkout, measured in turns")
    parser.add_argument("--chunks", type=int, default=3, help="turns each, with --base")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    options = ["--calls", str(args.calls), "--epochs", str(args.epochs)]
    options += ["--device-data"] if args.device_data else []
    if args.json:
        print(json.dumps(timeline(args.calls, args.epochs, args.device_data)))
        return 0
    here = Path(__file__).resolve().parent.parent
    codes = {"this": here, **({"base": args.base.resolve()} if args.base else {})}
    runs: dict[str, list[dict]] = {name: [] for name in codes}
    load = [os.getloadavg()[0]]
    for _ in range(args.chunks if args.base else 1):
        for name, root in codes.items():
            env = {**os.environ, "PYTHONPATH": str(root), "PYTHONWARNINGS": "ignore"}
            out = subprocess.run(
                [sys.executable, __file__, "--json", *options],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            runs[name].append(json.loads(out.strip().splitlines()[-1]))
    load.append(os.getloadavg()[0])
    table = {
        name: {
            part: {
                clock: statistics.median(r[part][clock] for r in chunks if part in r)
                for clock in ("wall_us", "thread_us")
            }
            for part in PARTS
            if any(part in r for r in chunks)
        }
        for name, chunks in runs.items()
    }
    print(
        f"fit calls of {args.epochs} 8-step epoch(s) on {'device' if args.device_data else 'host'} "
        f"arrays, {args.calls} calls per run, medians (load average {load[0]:.2f} -> {load[1]:.2f})"
    )
    print(
        f"{'part (µs per call)':42}"
        + "".join(f"{n + ' wall':>12}{n + ' thread':>13}" for n in codes)
    )
    for part in PARTS:
        row = "".join(
            f"{table[n].get(part, {}).get('wall_us', 0):12.1f}"
            f"{table[n].get(part, {}).get('thread_us', 0):13.1f}"
            for n in codes
        )
        print(f"{part:42}{row}")
    row = "".join(
        f"{critical(table[n], 'wall_us'):12.1f}{critical(table[n], 'thread_us'):13.1f}"
        for n in codes
    )
    print(f"{'on the critical path (all but the device)':42}{row}")
    import jax

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"fit_call_timeline-{jax.devices()[0].platform}.json"
    path.write_text(
        json.dumps({"parts": table, "load_average": load, "options": options}, indent=2)
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
