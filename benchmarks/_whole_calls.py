"""Whole ``tpukit.fit`` calls against the hand-written ``lax.scan``, as a notebook makes them.

Shared by ``train_mnist.py`` (calls of one epoch and of several, on host and device
data) and ``profile_fit_step.py`` (the host time of a short call). A user calls
``fit`` again and again on the same NumPy arrays; the hand-written loop puts the data
on the device once and calls its jitted epoch. Each runner here makes one such call
and waits for its result; :func:`alternate` runs them in turns (A, B, A, B) and
keeps each call's wall and CPU time, so a slow spell of a shared machine falls on
all alike.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

import tpukit

BATCH, LR, SEED = 128, 1e-3, 0
#: The clocks each call is timed on: wall, the process's CPU, the calling thread's CPU.
CLOCKS = ("wall", "cpu", "host")


def scan_calls(x: np.ndarray, y: np.ndarray, epochs: int) -> Callable[[], None]:
    """A call of ``epochs`` epochs of the hand-written scan (data put on the device once,
    one jitted epoch, a new permutation key per epoch), waited for."""
    graphdef, params = nnx.split(tpukit.zoo.create("mlp", seed=SEED))
    opt = optax.adam(LR)
    xd, yd = jnp.asarray(x), jnp.asarray(y)
    steps = len(x) // BATCH

    def ce(logits, labels):
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    @jax.jit
    def epoch_fn(params, opt_state, key):
        order = jax.random.permutation(key, len(x))[: steps * BATCH].reshape(steps, BATCH)

        def body(carry, rows):
            params, opt_state = carry
            grads = jax.grad(lambda p: ce(nnx.merge(graphdef, p)(xd[rows]), yd[rows]))(params)
            updates, opt_state = opt.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), None

        return jax.lax.scan(body, (params, opt_state), order)[0]

    box = [(params, opt.init(params)), jax.random.key(SEED)]

    def call() -> None:
        state, key = box
        for _ in range(epochs):
            key, this = jax.random.split(key)
            state = epoch_fn(*state, this)
        box[:] = [jax.block_until_ready(state), key]

    call()  # compiles
    return call


def fit_calls(x, y, epochs: int, on_device: bool = False) -> Callable[[], None]:
    """A ``tpukit.fit`` call of ``epochs`` epochs on the same arrays each time (NumPy, or
    put on the device once when ``on_device``), with a fresh ``optax.adam`` as a
    notebook cell writes it, waited for."""
    model = tpukit.zoo.create("mlp", seed=SEED)
    data = (jnp.asarray(x), jnp.asarray(y)) if on_device else (x, y)
    arrays = model_arrays(model)

    def call() -> None:
        tpukit.fit(
            model, optax.adam(LR), data, epochs=epochs, batch_size=BATCH, seed=SEED, verbose=False
        )
        # the last call's outputs, waited for as the scan's are
        jax.block_until_ready(arrays())

    call()  # compiles, and places the data
    return call


def model_arrays(model: Any) -> Callable[[], list]:
    """``arrays()``: the arrays ``model``'s Variables hold now, read without building a
    state tree (``nnx.state(model)`` walks the graph, about 0.8 ms that the scan's call
    does not pay; ``TrainingState.opt_state`` builds the optimizer state's tree, which a
    call keeps flat until it is read). They come from the same execution as the
    optimizer state: waiting for them waits for the call. fit sets its Variables in
    place, so they are found once."""
    variables = [v for _, v in nnx.iter_graph(model) if isinstance(v, nnx.Variable)]

    def arrays() -> list:
        return [
            v.get_raw_value() if hasattr(v, "get_raw_value") else v.raw_value for v in variables
        ]

    return arrays


def alternate(runners: dict[str, Callable[[], None]], rounds: int) -> dict[str, dict]:
    """Each runner's calls in turns, ``rounds`` times: per call, the wall seconds, the
    process's CPU seconds (the device's threads too, on a CPU) and the host thread's
    (``time.thread_time``: the Python work and dispatches of the calling thread)."""
    clocks = dict(
        zip(CLOCKS, (time.perf_counter, time.process_time, time.thread_time), strict=True)
    )
    times: dict[str, dict[str, list[float]]] = {k: {c: [] for c in clocks} for k in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            start = {c: clock() for c, clock in clocks.items()}
            run()
            for c, clock in clocks.items():
                times[name][c].append(clock() - start[c])
    return {
        k: {
            **{f"{c}_s": v for c, v in times[k].items()},
            **{f"median_{c}_s": statistics.median(v) for c, v in times[k].items()},
        }
        for k in runners
    }


def runners_for(x, y, epochs: int) -> dict[str, Callable[[], None]]:
    """The scan's call and fit's, on host and on device data, of ``epochs`` epochs."""
    return {
        "scan": scan_calls(x, y, epochs),
        "fit, host data": fit_calls(x, y, epochs),
        "fit, device data": fit_calls(x, y, epochs, on_device=True),
    }


def rows_of(times: dict[str, dict], epochs: int, steps: int) -> list[dict]:
    """The rows of :func:`whole_calls` from :func:`alternate`'s ``times`` (per runner, the
    lists ``wall_s``, ``cpu_s`` and ``host_s``): medians, their ratio to the scan's, and
    the mean of the calling thread's time (a call that shuffles a block of epochs
    for the calls after it costs more than the median one)."""
    rows, scan = [], times["scan"]
    med = {k: {c: statistics.median(t[f"{c}_s"]) for c in CLOCKS} for k, t in times.items()}
    for name in ("fit, host data", "fit, device data"):
        fit, base = med[name], med["scan"]
        rows.append(
            {
                "call": name,
                "epochs": epochs,
                "steps": steps,
                "fit_ms": fit["wall"] * 1e3,
                "scan_ms": base["wall"] * 1e3,
                "fit_over_scan": fit["wall"] / base["wall"],
                "beyond_scan_ms": (fit["wall"] - base["wall"]) * 1e3,
                "cpu_beyond_scan_ms": (fit["cpu"] - base["cpu"]) * 1e3,
                "host_beyond_scan_ms": (fit["host"] - base["host"]) * 1e3,
                "host_beyond_scan_mean_ms": (
                    statistics.fmean(times[name]["host_s"]) - statistics.fmean(scan["host_s"])
                )
                * 1e3,
                "times": {"fit": times[name], "scan": scan},
            }
        )
    return rows


def whole_calls(x, y, epoch_counts: tuple[int, ...], rounds: int) -> list[dict]:
    """Rows of fit calls of each epoch count, on host and on device data, against the
    scan's call of as many epochs: medians of alternating rounds, and their ratio."""
    rows = []
    for epochs in epoch_counts:
        times = alternate(runners_for(x, y, epochs), rounds)
        rows += rows_of(times, epochs, epochs * (len(x) // BATCH))
    return rows


def whole_calls_against(
    base: Path, x, y, epoch_counts: tuple[int, ...], rounds: int, chunks: int
) -> dict[str, list[dict]]:
    """:func:`whole_calls` on this checkout (``"this"``) and on the checkout ``base``,
    each in a worker process of its own (``python _whole_calls.py --worker``, with that
    checkout first on the path), the two taking turns ``chunks`` times: a slow spell of
    a shared machine falls on both alike. Both measure with this file's runners."""
    here = Path(__file__).resolve()
    codes = {"this": here.parent.parent, "base": Path(base).resolve()}
    with tempfile.TemporaryDirectory() as folder:
        np.save(f"{folder}/x.npy", x)
        np.save(f"{folder}/y.npy", y)
        rows: dict[str, list[dict]] = {name: [] for name in codes}
        for epochs in epoch_counts:
            workers = {
                name: subprocess.Popen(
                    [sys.executable, str(here), "--worker", folder, str(epochs)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    env={**os.environ, "PYTHONPATH": str(root), "PYTHONWARNINGS": "ignore"},
                )
                for name, root in codes.items()
            }
            times: dict[str, dict] = {name: {} for name in codes}
            for _ in range(chunks):
                for name, worker in workers.items():
                    worker.stdin.write(f"{max(1, rounds // chunks)}\n")
                    worker.stdin.flush()
                    for k, t in json.loads(worker.stdout.readline()).items():
                        for c, values in t.items():
                            times[name].setdefault(k, {}).setdefault(c, []).extend(values)
            for name, worker in workers.items():
                worker.stdin.close()
                if worker.wait():
                    raise RuntimeError(f"the {name} worker failed")
                rows[name] += rows_of(times[name], epochs, epochs * (len(x) // BATCH))
    return rows


def _worker(folder: str, epochs: int) -> None:
    """:func:`whole_calls_against`'s worker: the runners of ``epochs`` epochs on the
    arrays saved in ``folder``; each line read is a count of rounds to alternate, each
    answered with their times as one line of JSON."""
    x, y = np.load(f"{folder}/x.npy"), np.load(f"{folder}/y.npy")
    runners = runners_for(x, y, epochs)
    alternate(runners, 3)  # warm
    for line in sys.stdin:
        times = alternate(runners, int(line))
        out = {k: {f"{c}_s": t[f"{c}_s"] for c in CLOCKS} for k, t in times.items()}
        print(json.dumps(out), flush=True)


def print_rows(rows: list[dict], title: str) -> None:
    print(f"\n{title}")
    print(
        f"{'call':18} {'epochs':>6} {'steps':>6} {'fit ms':>9} {'scan ms':>9} "
        f"{'fit/scan':>9} {'beyond scan':>12} {'CPU beyond':>11} {'host beyond':>12} "
        f"{'host mean':>10}"
    )
    for r in rows:
        print(
            f"{r['call']:18} {r['epochs']:6d} {r['steps']:6d} {r['fit_ms']:9.2f} "
            f"{r['scan_ms']:9.2f} {r['fit_over_scan']:8.3f}x {r['beyond_scan_ms']:9.2f} ms "
            f"{r['cpu_beyond_scan_ms']:8.2f} ms {r['host_beyond_scan_ms']:9.2f} ms "
            f"{r['host_beyond_scan_mean_ms']:7.2f} ms"
        )
    print(
        "  beyond scan: median wall time more than the scan's call; CPU: the process's CPU "
        "time (the device's threads too, on a CPU); host: the calling thread's CPU time "
        "(mean: its mean over the calls, not the median)"
    )


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    _worker(sys.argv[2], int(sys.argv[3]))
