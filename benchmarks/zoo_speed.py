"""Zoo models against hand-written JAX/Flax in the same run: VGG19 forward, ResNet-50 training step.

1. VGG19 forward on a batch of 224x224 images (100 by default), per compute dtype:
   ``zoo.create("vgg19")`` in eval mode against a plain ``lax.conv_general_dilated``
   stack given the very same weights (their outputs are compared too).
   Reference points: hand-written JAX on an H100 took 7.62 ms in bf16 and
   13.46 ms in f32; PyTorch eager bf16 channels-last 14.8 ms.
2. One ResNet-50 training step (batch 256, bf16 compute, SGD with momentum 0.9,
   softmax cross-entropy, batch-norm statistics updated): ``zoo.create("resnet50")``
   against a hand-written Flax (linen) ResNet-50. Reference points on an H100:
   hand-written 44.0 ms (5,818 images/s); PyTorch eager bf16 channels-last 64.3 ms.

Each timing is the median of ``--iters`` calls after ``--warmup`` calls, each
waited on with ``block_until_ready``. TFLOP/s counts matmul and convolution FLOPs
(the zoo's ``flops_per_example``; a training step as 3x the forward pass). MFU
is against the chip's dense bf16 peak and is given for bf16 runs on known chips
only (H100/H200 990, A100 312, TPU v4 275, v5e 197, v5p 459, v6e 920 TFLOP/s).

    .venv/bin/python benchmarks/zoo_speed.py                           # full size, on a GPU/TPU
    .venv/bin/python benchmarks/zoo_speed.py --batch 2 --image-size 32 \\
        --resnet-batch 2 --resnet-image-size 32 --iters 3              # a smoke test on CPU

Prints a table and writes ``benchmarks/results/zoo_speed-<device>.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax import nnx

from tpukit import zoo
from tpukit.measure import peak_for
from tpukit.zoo._vgg import adaptive_avg_pool

RESULTS = Path(__file__).parent / "results"
DTYPES = {"bfloat16": jnp.bfloat16, "float32": jnp.float32}


def time_ms(fn: Callable[[], Any], warmup: int, iters: int) -> float:
    """Median wall time of ``fn()`` in milliseconds, each call waited on."""
    for _ in range(warmup):
        jax.block_until_ready(fn())
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def hlo_ops(compiled: Any) -> dict[str, int]:
    """How many convolutions, dots, transposes and converts the optimized program has."""
    text = compiled.as_text()
    ops = ("convolution", "dot", "transpose", "convert", "custom-call")
    return {op: len(re.findall(rf" {op}\(", text)) for op in ops}


# ------------------------------------------------------------------ VGG19 forward


_VGG19 = (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M")
_VGG19 += (512, 512, 512, 512, "M", 512, 512, 512, 512, "M")


def vgg19_params_from_zoo(model: zoo.VGG) -> dict[str, Any]:
    """The zoo model's weights as plain arrays: HWIO kernels, biases, dense matrices."""
    return {
        "convs": [(c.kernel[...], c.bias[...]) for c in model.convs],
        "dense": [(d.kernel[...], d.bias[...]) for d in (model.fc1, model.fc2, model.fc3)],
    }


def vgg19_handwritten(params: dict[str, Any], x: jax.Array, dtype: Any) -> jax.Array:
    """VGG19 in plain JAX: NHWC, HWIO, float32 weights cast to ``dtype`` as used."""
    x = x.astype(dtype)
    layer = 0
    for item in _VGG19:
        if item == "M":
            x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
            continue
        w, b = params["convs"][layer]
        x = jax.lax.conv_general_dilated(
            x, w.astype(dtype), (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        x = jax.nn.relu(x + b.astype(dtype))
        layer += 1
    x = adaptive_avg_pool(x, 7)  # nothing at 224x224; lets a CPU smoke test use small images
    x = x.reshape(x.shape[0], -1)
    (w1, b1), (w2, b2), (w3, b3) = params["dense"]
    x = jax.nn.relu(x @ w1.astype(dtype) + b1.astype(dtype))
    x = jax.nn.relu(x @ w2.astype(dtype) + b2.astype(dtype))
    return x @ w3.astype(dtype) + b3.astype(dtype)


def bench_vgg19(args: argparse.Namespace, dtype_name: str, peak: Any) -> list[dict[str, Any]]:
    dtype = DTYPES[dtype_name]
    model = zoo.create("vgg19", dtype=dtype, image_size=args.image_size)
    model.eval()
    x = jax.random.normal(jax.random.key(0), (args.batch, *model.input_shape), jnp.float32)
    graphdef, state = nnx.split(model)
    zoo_fwd = jax.jit(lambda state, x: nnx.merge(graphdef, state)(x))
    params = vgg19_params_from_zoo(model)
    hand_fwd = jax.jit(lambda params, x: vgg19_handwritten(params, x, dtype))
    rows = []
    for label, fwd, weights in (
        ("zoo vgg19", zoo_fwd, state),
        ("hand-written JAX", hand_fwd, params),
    ):
        compiled = fwd.lower(weights, x).compile()
        ms = time_ms(lambda c=compiled, w=weights: c(w, x), args.warmup, args.iters)
        flops = model.flops_per_example * args.batch
        rows.append(
            row(f"VGG19 forward {dtype_name}", label, ms, args.batch, flops, peak, dtype_name)
            | {"hlo_ops": hlo_ops(compiled)}
        )
    diff = zoo_fwd(state, x).astype(jnp.float32) - hand_fwd(params, x).astype(jnp.float32)
    rows[0]["max_abs_diff_vs_handwritten"] = float(jnp.abs(diff).max())
    return rows


# ------------------------------------------------------------------ ResNet-50 training step


class LinenBottleneck(nn.Module):
    filters: int
    strides: int
    dtype: Any

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        conv = lambda f, k, s=1: nn.Conv(  # noqa: E731
            f, (k, k), (s, s), padding=[((k - 1) // 2,) * 2] * 2, use_bias=False, dtype=self.dtype
        )
        norm = lambda: nn.BatchNorm(  # noqa: E731
            use_running_average=not train, momentum=0.9, epsilon=1e-5, dtype=self.dtype
        )
        y = nn.relu(norm()(conv(self.filters, 1)(x)))
        y = nn.relu(norm()(conv(self.filters, 3, self.strides)(y)))
        y = norm()(conv(4 * self.filters, 1)(y))
        if x.shape[-1] != 4 * self.filters or self.strides != 1:
            x = norm()(conv(4 * self.filters, 1, self.strides)(x))
        return nn.relu(x + y)


class LinenResNet50(nn.Module):
    """ResNet-50 the way Flax's ImageNet example writes it, with torchvision's padding."""

    num_classes: int = 1000
    dtype: Any = jnp.bfloat16

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        x = nn.Conv(64, (7, 7), (2, 2), padding=[(3, 3), (3, 3)], use_bias=False, dtype=self.dtype)(
            x
        )
        x = nn.relu(
            nn.BatchNorm(
                use_running_average=not train, momentum=0.9, epsilon=1e-5, dtype=self.dtype
            )(x)
        )
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
        for stage, depth in enumerate((3, 4, 6, 3)):
            for i in range(depth):
                strides = 2 if stage > 0 and i == 0 else 1
                x = LinenBottleneck(64 * 2**stage, strides, self.dtype)(x, train)
        x = x.mean(axis=(1, 2))
        return nn.Dense(self.num_classes, dtype=self.dtype)(x)


def _loss(logits: jax.Array, labels: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(
        logits.astype(jnp.float32), labels
    ).mean()


def zoo_train_step(model: nnx.Module, tx: optax.GradientTransformation):
    graphdef, params, stats = nnx.split(model, nnx.Param, ...)

    def step(params, stats, opt_state, x, y):
        def loss_fn(params):
            # copy=True: fresh Variables at this trace level, so batch norm may update them
            model = nnx.merge(graphdef, params, stats, copy=True)
            loss = _loss(model(x), y)
            return loss, nnx.split(model, nnx.Param, ...)[2]

        (loss, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), stats, opt_state, loss

    return step, (params, stats, tx.init(params))


def linen_train_step(model: LinenResNet50, variables: Any, tx: optax.GradientTransformation):
    def step(params, stats, opt_state, x, y):
        def loss_fn(params):
            logits, updated = model.apply(
                {"params": params, "batch_stats": stats}, x, train=True, mutable=["batch_stats"]
            )
            return _loss(logits, y), updated["batch_stats"]

        (loss, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), stats, opt_state, loss

    params, stats = variables["params"], variables["batch_stats"]
    return step, (params, stats, tx.init(params))


def bench_resnet50(args: argparse.Namespace, peak: Any) -> list[dict[str, Any]]:
    size, batch = args.resnet_image_size, args.resnet_batch
    tx = optax.sgd(0.1, momentum=0.9)
    x = jax.random.normal(jax.random.key(1), (batch, size, size, 3), jnp.bfloat16)
    y = jax.random.randint(jax.random.key(2), (batch,), 0, 1000)
    model = zoo.create("resnet50", dtype="bfloat16", image_size=size)
    flops = 3 * model.flops_per_example * batch
    linen = LinenResNet50()
    variables = jax.jit(linen.init, static_argnames="train")(jax.random.key(0), x[:1], train=False)
    rows = []
    for label, (step, state) in (
        ("zoo resnet50", zoo_train_step(model, tx)),
        ("hand-written Flax", linen_train_step(linen, variables, tx)),
    ):
        compiled = jax.jit(step, donate_argnums=(0, 1, 2)).lower(*state, x, y).compile()
        carry = list(state)

        def run(compiled=compiled, carry=carry):
            carry[0], carry[1], carry[2], loss = compiled(*carry, x, y)
            return loss

        ms = time_ms(run, args.warmup, args.iters)
        rows.append(
            row("ResNet-50 train step bf16", label, ms, batch, flops, peak, "bfloat16")
            | {"hlo_ops": hlo_ops(compiled)}
        )
    return rows


# ------------------------------------------------------------------ report


def row(task: str, impl: str, ms: float, batch: int, flops: float, peak: Any, dtype: str) -> dict:
    tflops = flops / (ms * 1e-3) / 1e12
    mfu = tflops / peak.bf16_tflops if peak is not None and dtype == "bfloat16" else None
    return {
        "task": task,
        "implementation": impl,
        "ms": ms,
        "images_per_s": batch / (ms * 1e-3),
        "tflops_per_s": tflops,
        "mfu": mfu,
    }


def print_table(device: str, rows: list[dict[str, Any]]) -> None:
    print(f"device: {device}")
    header = (
        f"{'task':<28} {'implementation':<18} {'ms':>9} {'images/s':>10} {'TFLOP/s':>8} {'MFU':>6}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        mfu = f"{100 * r['mfu']:5.1f}%" if r["mfu"] is not None else ""
        print(
            f"{r['task']:<28} {r['implementation']:<18} {r['ms']:9.2f} "
            f"{r['images_per_s']:10.1f} {r['tflops_per_s']:8.3f} {mfu:>6}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=100, help="VGG19 images per forward pass")
    parser.add_argument("--image-size", type=int, default=224, help="VGG19 image side")
    parser.add_argument("--dtypes", default="bfloat16,float32", help="VGG19 compute dtypes")
    parser.add_argument("--resnet-batch", type=int, default=256)
    parser.add_argument("--resnet-image-size", type=int, default=224)
    parser.add_argument("--skip-resnet", action="store_true")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    device = jax.devices()[0]
    peak = peak_for(device.device_kind)
    rows = []
    for dtype_name in args.dtypes.split(","):
        rows += bench_vgg19(args, dtype_name.strip(), peak)
    if not args.skip_resnet:
        rows += bench_resnet50(args, peak)
    print_table(device.device_kind, rows)
    result = {
        "device": device.device_kind,
        "platform": device.platform,
        "peak_bf16_tflops": peak.bf16_tflops if peak else None,
        "jax": jax.__version__,
        "python": platform.python_version(),
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "results": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "-", device.device_kind.lower()).strip("-") or device.platform
    path = args.out / f"zoo_speed-{slug}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
