"""A second ``tpukit.fit`` call on the same model: does it reuse the compiled step?

A notebook user trains, looks, and trains again, usually writing a new optimizer
object each time (``optax.adam(1e-3)`` in the cell). In one process this times three
``fit`` calls of one epoch each on the same model, each with a fresh ``optax.adam``
object: the first compiles the step, the later ones should only run it. The table
gives each call's wall time and the ratio of the first call to the median of the
later ones, and whether the call placed the data or trained on the copy kept from the
call before (the same arrays are not sent twice); the JSON goes to ``benchmarks/results/fit_second_call-<platform>.json``.

    .venv/bin/python benchmarks/fit_second_call.py [--examples 4096] [--calls 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import jax
import optax

import tpukit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    x, y = tpukit.datasets.mnist("train", source="sample")
    data = (x[: args.examples], y[: args.examples])
    model = tpukit.zoo.create("mlp", seed=0)
    seconds, losses, data = [], [], []
    for _ in range(args.calls):
        start = time.perf_counter()
        history = tpukit.fit(
            model, optax.adam(1e-3), data, epochs=1, batch_size=args.batch, verbose=False
        )
        seconds.append(time.perf_counter() - start)
        losses.append(history["loss"][-1])
        kept = tpukit.train.TrainingState.of(model).kept.data.get("train_data")
        placed = kept is None or not kept.uses
        data.append(f"placed in {kept.seconds * 1e3:.1f} ms" if kept and placed else "kept")
    later = statistics.median(seconds[1:])
    device = jax.devices()[0].device_kind
    print(f"fit on {device} (JAX {jax.__version__}), {args.examples} examples, batch {args.batch}")
    print(f"{'call':>4}  {'seconds':>8}  {'loss':>7}  data")
    for i, (s, loss, how) in enumerate(zip(seconds, losses, data), 1):
        print(f"{i:>4}  {s:>8.3f}  {loss:>7.4f}  {how}")
    print(f"first call / later calls: {seconds[0] / later:.1f}x")
    result = {
        "device": device,
        "platform": jax.default_backend(),
        "jax": jax.__version__,
        "examples": args.examples,
        "batch_size": args.batch,
        "seconds": seconds,
        "losses": losses,
        "data": data,
        "first_over_later": seconds[0] / later,
    }
    out = Path(__file__).parent / "results" / f"fit_second_call-{jax.default_backend()}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
