"""A short end-to-end tour for ``python -m tpukit demo``: devices, a compile, a run, a timing."""

from __future__ import annotations

import numpy as np


def run_demo() -> None:
    """Connect, compile a 784-128-64-10 MLP forward pass from shapes, run it, time it."""
    import jax
    import jax.numpy as jnp

    import tpukit

    print(tpukit.connect(), end="\n\n")

    def mlp(params, x):
        for w, b in params[:-1]:
            x = jax.nn.relu(x @ w + b)
        w, b = params[-1]
        return x @ w + b

    rng = np.random.default_rng(0)
    widths = [784, 128, 64, 10]
    params = [
        (rng.normal(0, (2 / m) ** 0.5, (m, n)).astype(np.float32), np.zeros(n, np.float32))
        for m, n in zip(widths[:-1], widths[1:])
    ]
    params = tpukit.put(params)
    compiled = tpukit.compile(mlp, params, tpukit.shape("f32[128,784]"))
    print(compiled, end="\n\n")
    batch = tpukit.put(rng.random((128, 784), dtype=np.float32))
    logits = tpukit.fetch(compiled(params, batch))
    print(
        f"Ran it: logits {logits.shape}, predicted digits of the first 8 images: "
        f"{np.argmax(logits, axis=1)[:8].tolist()}"
    )
    print(compiled.timeit(params, batch), end="\n\n")
    assert jnp.allclose(logits, mlp(params, batch), atol=1e-4)
    print("The compiled result matches plain JAX.")
