"""Training-loop throughput: per-step jit, the NNX tutorial loop, a hand-written scan, tpukit.fit.

All four train the same MNIST MLP (784-128-64-10, ReLU) with Adam 1e-3 and batch
128 on the same data, and report optimizer steps per second over whole epochs
(after one warm-up epoch that pays for compilation), plus the ratio to the
per-step loop. Data: ``../shared/data/mnist.pkl.gz`` when present, otherwise
synthetic MNIST-shaped data. Results go to ``benchmarks/results/train_loop-<device>.json``.

    .venv/bin/python benchmarks/train_loop.py                   # timings
    .venv/bin/python benchmarks/train_loop.py --accuracy-epochs 10   # and test accuracy
"""

from __future__ import annotations

import argparse
import gzip
import json
import pickle
import platform
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

import tpukit.train as tt

BATCH, LR = 128, 1e-3
MNIST = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "mnist.pkl.gz"


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.l1 = nnx.Linear(784, 128, rngs=rngs)
        self.l2 = nnx.Linear(128, 64, rngs=rngs)
        self.l3 = nnx.Linear(64, 10, rngs=rngs)

    def __call__(self, x):
        return self.l3(jax.nn.relu(self.l2(jax.nn.relu(self.l1(x)))))


def load(path: Path):
    if path.exists():
        (xtr, ytr), _, (xte, yte) = pickle.load(gzip.open(path), encoding="latin1")
        return "mnist", (xtr, ytr.astype(np.int32)), (xte, yte.astype(np.int32))
    rng = np.random.default_rng(0)
    x = rng.random((60_000, 784), dtype=np.float32)
    y = (x[:, :10].argmax(-1)).astype(np.int32)
    return "synthetic", (x[:50_000], y[:50_000]), (x[50_000:], y[50_000:])


def ce(logits, y):
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def per_step_jit(x, y, epochs):
    graphdef, params = nnx.split(MLP(nnx.Rngs(0)))
    opt = optax.adam(LR)
    opt_state = opt.init(params)

    @jax.jit
    def step(params, opt_state, xb, yb):
        grads = jax.grad(lambda p: ce(nnx.merge(graphdef, p)(xb), yb))(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    rng = np.random.default_rng(0)
    steps = len(x) // BATCH

    def epoch(params, opt_state):
        order = rng.permutation(len(x))
        for i in range(steps):
            rows = order[i * BATCH : (i + 1) * BATCH]
            params, opt_state = step(params, opt_state, x[rows], y[rows])
        return params, opt_state

    return timed(epoch, (params, opt_state), epochs, steps)


def nnx_tutorial(x, y, epochs):
    model = MLP(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(LR), wrt=nnx.Param)

    @nnx.jit
    def train_step(model, optimizer, xb, yb):
        grads = nnx.grad(lambda m: ce(m(xb), yb))(model)
        optimizer.update(model, grads)

    rng = np.random.default_rng(0)
    steps = len(x) // BATCH

    def epoch(state):
        order = rng.permutation(len(x))
        for i in range(steps):
            rows = order[i * BATCH : (i + 1) * BATCH]
            train_step(model, optimizer, x[rows], y[rows])
        return state

    def sync(_):
        return jax.block_until_ready(nnx.state(model))

    return timed(epoch, (), epochs, steps, sync=sync, single=True)


def hand_scan(x, y, epochs):
    graphdef, params = nnx.split(MLP(nnx.Rngs(0)))
    opt = optax.adam(LR)
    opt_state = opt.init(params)
    xd, yd = jnp.asarray(x), jnp.asarray(y)
    steps = len(x) // BATCH

    @jax.jit
    def epoch_fn(params, opt_state, key):
        order = jax.random.permutation(key, len(x))[: steps * BATCH].reshape(steps, BATCH)

        def body(carry, rows):
            params, opt_state = carry
            grads = jax.grad(lambda p: ce(nnx.merge(graphdef, p)(xd[rows]), yd[rows]))(params)
            updates, opt_state = opt.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), None

        return jax.lax.scan(body, (params, opt_state), order)[0]

    keys = iter(jax.random.split(jax.random.key(0), epochs + 1))

    def epoch(params, opt_state):
        return epoch_fn(params, opt_state, next(keys))

    return timed(epoch, (params, opt_state), epochs, steps)


def tpukit_fit(x, y, epochs, x_test=None, y_test=None):
    model = MLP(nnx.Rngs(0))
    opt = optax.adam(LR)
    tt.fit(model, opt, (x, y), epochs=1, batch_size=BATCH, verbose=False)  # warm-up
    t0 = time.perf_counter()
    tt.fit(model, opt, (x, y), epochs=epochs, batch_size=BATCH, verbose=False)
    jax.block_until_ready(nnx.state(model))
    seconds = time.perf_counter() - t0
    return epochs * (len(x) // BATCH) / seconds


def timed(epoch, state, epochs, steps, sync=jax.block_until_ready, single=False):
    call = (lambda s: epoch(s)) if single else (lambda s: epoch(*s))
    state = call(state)  # warm-up epoch: compiles
    sync(state)
    t0 = time.perf_counter()
    for _ in range(epochs):
        state = call(state)
    sync(state)
    return epochs * steps / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs per loop")
    parser.add_argument("--data", type=Path, default=MNIST)
    parser.add_argument(
        "--accuracy-epochs",
        type=int,
        default=0,
        help="also train with tpukit.fit this many epochs and report test accuracy",
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()

    source, (x, y), (x_test, y_test) = load(args.data)
    device = jax.devices()[0]
    print(
        f"data: {source} {x.shape}, device: {device.device_kind} x{jax.device_count()}, "
        f"batch {BATCH}, Adam {LR}, {args.epochs} timed epochs"
    )
    loops = {
        "per-step jax.jit, host batches": per_step_jit,
        "nnx.jit + nnx.Optimizer (tutorial)": nnx_tutorial,
        "hand-written lax.scan, device data": hand_scan,
        "tpukit.fit": tpukit_fit,
    }
    rates = {}
    for name, fn in loops.items():
        rates[name] = fn(x, y, args.epochs)
    base = rates["per-step jax.jit, host batches"]
    print(f"\n{'loop':40s} {'steps/s':>10s} {'vs per-step':>12s}")
    for name, rate in rates.items():
        print(f"{name:40s} {rate:10,.0f} {rate / base:11.2f}x")

    result = {
        "benchmark": "train_loop",
        "data": source,
        "examples": int(len(x)),
        "batch": BATCH,
        "lr": LR,
        "timed_epochs": args.epochs,
        "device": device.device_kind,
        "platform": device.platform,
        "devices": jax.device_count(),
        "jax": jax.__version__,
        "host": platform.node(),
        "steps_per_s": rates,
        "ratio_to_per_step": {k: v / base for k, v in rates.items()},
    }
    if args.accuracy_epochs:
        model = MLP(nnx.Rngs(0))
        t0 = time.perf_counter()
        history = tt.fit(
            model,
            optax.adam(LR),
            (x, y),
            epochs=args.accuracy_epochs,
            batch_size=BATCH,
            eval_data=(x_test, y_test),
            verbose=True,
        )
        test = tt.evaluate(model, (x_test, y_test), batch_size=1000)
        print(history)
        print(f"test after {args.accuracy_epochs} epochs: {test} ({time.perf_counter() - t0:.1f}s)")
        result["accuracy"] = {
            "epochs": args.accuracy_epochs,
            "test": test,
            "val_accuracy_per_epoch": history["val_accuracy"],
        }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"train_loop-{device.platform}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
