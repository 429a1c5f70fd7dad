"""The compiled functions: many optimizer steps per call, and whole-dataset evaluation.

Inside these functions the NNX model is a pure pytree: ``(params, rest)`` from
``nnx.split(model, nnx.Param, ...)``, merged back into a throw-away module only
while tracing. So NNX's Python bookkeeping runs once per compilation, never per
step, and the loop is a plain :func:`jax.lax.scan`.

Each training step is guarded: a step whose loss or gradients are not finite is
not applied, and every later step of the call is skipped too, so the state that
comes back holds the last good parameters and ``bad_step`` says where it stopped.

Builders are cached, so calling :func:`tpukit.fit` again reuses the compiled code.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from ._losses import Objective
from ._mesh import Plan


def split_model(model: nnx.Module) -> tuple[Any, Any, Any]:
    """``(graphdef, params, rest)``: trainable parameters apart from all other state."""
    return nnx.split(model, nnx.Param, ...)


def _all_finite(loss: jax.Array, grads: Any) -> jax.Array:
    ok = jnp.isfinite(loss)
    for g in jax.tree.leaves(grads):
        if jnp.issubdtype(g.dtype, jnp.inexact):
            ok = ok & jnp.all(jnp.isfinite(g))
    return ok


def _zero_stats(names: tuple[str, ...]) -> dict[str, jax.Array]:
    stats = {n: jnp.zeros((), jnp.float32) for n in ("loss", *names)}
    stats["steps"] = jnp.zeros((), jnp.int32)
    stats["bad_step"] = jnp.full((), -1, jnp.int32)
    return stats


def _make_step(
    graphdef: Any, objective: Objective, optimizer: optax.GradientTransformation, guard: bool
) -> Callable:
    """One optimizer step on one batch, as a ``scan`` body over ``(state, stats)``."""

    def step(carry: tuple, batch: Any, index: jax.Array) -> tuple:
        (params, rest, opt_state), stats = carry

        def loss_fn(p: Any, r: Any) -> tuple:
            # ``r`` goes through value_and_grad (undifferentiated) so that the merged
            # module's variables belong to this trace and may be updated (BatchNorm).
            model = nnx.merge(graphdef, p, r, copy=True)
            model.train()
            loss, metrics = objective(model, batch)
            _, _, new_rest = split_model(model)
            return loss, (metrics, new_rest)

        (loss, (metrics, new_rest)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, rest)
        updates, new_opt = optimizer.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        new_state = (new_params, new_rest, new_opt)
        if guard:
            running = stats["bad_step"] < 0
            finite = _all_finite(loss, grads)
            good = running & finite
            state = jax.lax.cond(good, lambda: new_state, lambda: (params, rest, opt_state))
            stats = dict(stats)
            stats["bad_step"] = jnp.where(running & ~finite, index, stats["bad_step"])
        else:
            good = jnp.bool_(True)
            state = new_state
        new_stats = dict(stats)
        new_stats["loss"] = stats["loss"] + jnp.where(good, loss, 0.0)
        for name, value in metrics.items():
            new_stats[name] = stats[name] + jnp.where(good, value, 0.0)
        new_stats["steps"] = stats["steps"] + good.astype(jnp.int32)
        return state, new_stats

    return step


@functools.lru_cache(maxsize=32)
def resident_execution(
    graphdef: Any,
    objective: Objective,
    optimizer: optax.GradientTransformation,
    plan: Plan,
    steps: int,
    guard: bool,
) -> Callable:
    """``run(params, rest, opt_state, arrays, indices, start) -> (params, rest, opt_state, stats)``.

    Runs ``steps`` steps; step ``i`` trains on the rows ``indices[start + i]`` of the
    device-resident ``arrays``. Parameter and optimizer buffers are donated.
    """
    step = _make_step(graphdef, objective, optimizer, guard)

    def run(params, rest, opt_state, arrays, indices, start):
        def body(carry, i):
            rows = jax.lax.dynamic_index_in_dim(indices, start + i, keepdims=False)
            batch = plan.constrain_batch(jax.tree.map(lambda a: jnp.take(a, rows, axis=0), arrays))
            state, stats = step(carry, batch, i)
            return (plan.constrain_state(state), stats), None

        carry = ((params, rest, opt_state), _zero_stats(objective.metric_names))
        (state, stats), _ = jax.lax.scan(body, carry, jnp.arange(steps))
        state = plan.constrain_state(state)
        return (*state, stats)

    return jax.jit(run, donate_argnums=(0, 1, 2))


@functools.lru_cache(maxsize=32)
def streamed_execution(
    graphdef: Any,
    objective: Objective,
    optimizer: optax.GradientTransformation,
    plan: Plan,
    guard: bool,
) -> Callable:
    """``run(params, rest, opt_state, chunk) -> (params, rest, opt_state, stats)``.

    ``chunk`` holds stacked batches ``[steps, batch, ...]``, one step per batch.
    """
    step = _make_step(graphdef, objective, optimizer, guard)

    def run(params, rest, opt_state, chunk):
        steps = jax.tree.leaves(chunk)[0].shape[0]

        def body(carry, xs):
            i, batch = xs
            state, stats = step(carry, plan.constrain_batch(batch), i)
            return (plan.constrain_state(state), stats), None

        carry = ((params, rest, opt_state), _zero_stats(objective.metric_names))
        (state, stats), _ = jax.lax.scan(body, carry, (jnp.arange(steps), chunk))
        state = plan.constrain_state(state)
        return (*state, stats)

    return jax.jit(run, donate_argnums=(0, 1, 2))


@functools.lru_cache(maxsize=32)
def evaluation(
    graphdef: Any, objective: Objective, plan: Plan, batch_size: int, n: int
) -> Callable:
    """``run(params, rest, arrays) -> {"loss": mean, metric: mean}`` over the first ``n`` rows.

    Full batches run in a ``scan`` split over the devices; the last ``n % batch_size``
    rows run as one smaller batch, so every example counts exactly once. The model
    is in eval mode (``model.eval()``) and its state is not changed.
    """
    full, remainder = divmod(n, batch_size)

    def forward(params, rest, batch):
        model = nnx.merge(graphdef, params, rest)
        model.eval()
        loss, metrics = objective(model, batch)
        return {"loss": loss, **metrics}

    def run(params, rest, arrays):
        totals = {k: jnp.zeros((), jnp.float32) for k in ("loss", *objective.metric_names)}
        if full:

            def body(acc, i):
                batch = jax.tree.map(
                    lambda a: jax.lax.dynamic_slice_in_dim(a, i * batch_size, batch_size), arrays
                )
                out = forward(params, rest, plan.constrain_batch(batch))
                return {k: acc[k] + out[k] * batch_size for k in acc}, None

            totals, _ = jax.lax.scan(body, totals, jnp.arange(full))
        if remainder:
            batch = jax.tree.map(lambda a: a[full * batch_size : n], arrays)
            out = forward(params, rest, batch)
            totals = {k: totals[k] + out[k] * remainder for k in totals}
        return {k: v / n for k, v in totals.items()}

    return jax.jit(run)
