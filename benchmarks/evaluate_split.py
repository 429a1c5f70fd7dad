"""``tpukit.evaluate`` over data split across devices, against a hand-written scan.

``evaluate`` puts the data on the devices split along the example axis and runs every
batch inside one compiled call. Each device picks the rows of a batch that it holds (a
gather, as ``fit``'s batches do); the ten lines a user would write instead slice each
batch with ``lax.dynamic_slice_in_dim``, which over split data makes XLA gather the
whole dataset onto every device first. This compiles both on the same resident data
and reports, per device, the temporaries XLA allocates (``memory_analysis``) and the
time of one evaluation over the dataset (median of ``--repeats`` runs, after a warm-up),
with their ratios to the hand-written scan, and checks that both give the same loss.

On a CPU the devices are simulated (8 unless ``XLA_FLAGS`` says otherwise), so the time
is that of one machine's cores, not of a real interconnect.

    .venv/bin/python benchmarks/evaluate_split.py [--examples 16384] [--batch 1024]

Prints a table and writes ``benchmarks/results/evaluate_split-<platform>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    ).strip()

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

import tpukit
from tpukit.train._options import TrainerOptions
from tpukit.train._setup import evaluation
from tpukit.train._steps import split_model


def hand_written(graphdef, batch_size: int, n: int):
    """Mean loss and accuracy over ``n`` rows, a slice per batch (the remainder left out:
    ``--examples`` is a multiple of ``--batch``)."""

    def run(params, rest, arrays):
        x, y = arrays

        def body(acc, i):
            xb = jax.lax.dynamic_slice_in_dim(x, i * batch_size, batch_size)
            yb = jax.lax.dynamic_slice_in_dim(y, i * batch_size, batch_size)
            model = nnx.merge(graphdef, params, rest)
            model.eval()
            logits = model(xb)
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()
            accuracy = (logits.argmax(-1) == yb).mean()
            return (acc[0] + loss * batch_size, acc[1] + accuracy * batch_size), None

        zero = jnp.zeros((), jnp.float32)
        (loss, accuracy), _ = jax.lax.scan(body, (zero, zero), jnp.arange(n // batch_size))
        return {"loss": loss / n, "accuracy": accuracy / n}

    return jax.jit(run)


def timed(compiled, arguments, repeats: int) -> float:
    jax.block_until_ready(compiled(*arguments))  # warm-up
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*arguments))
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=16384)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    if args.examples % args.batch:
        parser.error("--examples must be a multiple of --batch (the scan has no remainder)")
    rng = np.random.default_rng(0)
    x = rng.random((args.examples, 784), np.float32)
    y = rng.integers(0, 10, args.examples).astype(np.int32)
    model = tpukit.zoo.create("mlp", seed=0)

    plan = TrainerOptions().plan
    graphdef, params, rest = split_model(model)
    evaluator = evaluation(plan, (x, y), args.batch, graphdef, params, rest, name="data")
    params, rest, _ = plan.put_state(params, rest)
    arguments = (params, rest, evaluator.source.arrays)
    programs = {
        "tpukit.evaluate": evaluator.program(args.batch),
        "hand-written scan": hand_written(graphdef, args.batch, args.examples),
    }
    rows = {}
    for name, program in programs.items():
        compiled = program.lower(*arguments).compile()
        figures = jax.device_get(compiled(*arguments))
        rows[name] = {
            "temp_bytes_per_device": compiled.memory_analysis().temp_size_in_bytes,
            "seconds": timed(compiled, arguments, args.repeats),
            "loss": float(figures["loss"]),
        }
    base = rows["hand-written scan"]
    for row in rows.values():
        row["temp_ratio"] = row["temp_bytes_per_device"] / base["temp_bytes_per_device"]
        row["time_ratio"] = row["seconds"] / base["seconds"]

    device = jax.devices()[0]
    print(
        f"evaluate over {args.examples:,} x 784 examples split over {jax.device_count()} "
        f"{device.platform} devices ({device.device_kind}, JAX {jax.__version__}), batch "
        f"{args.batch}; dataset {x.nbytes / 1e6:.1f} MB"
    )
    print(
        f"{'program':>18}  {'temp/device':>12}  {'x scan':>6}  {'seconds':>8}  {'x scan':>6}  loss"
    )
    for name, row in rows.items():
        print(
            f"{name:>18}  {row['temp_bytes_per_device'] / 1e6:>9.1f} MB  {row['temp_ratio']:>6.2f}"
            f"  {row['seconds']:>8.4f}  {row['time_ratio']:>6.2f}  {row['loss']:.6f}"
        )
    result = {
        "device": device.device_kind,
        "platform": device.platform,
        "devices": jax.device_count(),
        "jax": jax.__version__,
        "examples": args.examples,
        "batch_size": args.batch,
        "dataset_bytes": x.nbytes,
        "programs": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"evaluate_split-{device.platform}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
