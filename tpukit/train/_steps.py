"""The compiled functions: many optimizer steps per call, and whole-dataset evaluation.

Inside these functions the NNX model is a pure pytree: ``(params, rest)`` from
``nnx.split(model, nnx.Param, ...)``, merged back into a throw-away module only
while tracing. So NNX's Python bookkeeping runs once per compilation, never per
step, and the loop is a plain :func:`jax.lax.scan`.

Each training step is guarded: a step whose loss, gradients, new parameters or new
optimizer state are not finite is not applied, and every later step of the call is
skipped too, so the state that comes back holds the last good parameters and
optimizer state, ``bad_step`` says where it stopped and ``finite`` which quantity
went bad: one flag for the loss, then one per inexact gradient leaf, new parameter
leaf and optimizer-state leaf, in :func:`finite_names` order. (A finite gradient can
still give a non-finite update: ``optax.adam(eps=0.0)`` on a zero gradient,
``optax.sgd(inf)``.) The flags are the per-leaf reductions the guard needs anyway, so
naming the culprit costs nothing extra.

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

from tpukit.compilation._module_scopes import module_scopes

from ._layout import leaf_paths
from ._losses import Objective
from ._mesh import Plan
from ._state import detached


def split_model(model: nnx.Module) -> tuple[Any, Any, Any]:
    """``(graphdef, params, rest)``: trainable parameters apart from all other state.

    The model's :class:`~tpukit.train._state.TrainingState` is left out of
    ``graphdef``, so a compiled step never holds an optimizer state alive.
    """
    with detached(model):
        return nnx.split(model, nnx.Param, ...)


def _inexact(x: Any) -> bool:
    return jnp.issubdtype(x.dtype, jnp.inexact)


def finite_names(params: Any, opt_state: Any = ()) -> tuple[str, ...]:
    """What each entry of a step's ``finite`` flags is about: ``loss``, then gradients,
    then the new parameters, then the new optimizer state.

    Example::

        >>> finite_names({"l1": {"kernel": jnp.zeros(2)}})
        ('loss', 'gradient of l1/kernel', 'new value of l1/kernel')
    """
    leaves = [n for n, x in leaf_paths(params) if _inexact(x)]
    return (
        "loss",
        *(f"gradient of {n}" for n in leaves),
        *(f"new value of {n}" for n in leaves),
        *(f"optimizer state {n}" for n in _opt_state_names(opt_state)),
    )


def _opt_state_names(opt_state: Any) -> list[str]:
    return [n for n, x in leaf_paths(opt_state) if _inexact(x)]


def _inexact_count(tree: Any) -> int:
    return sum(_inexact(x) for x in jax.tree.leaves(tree))


def _all_finite(tree: Any) -> list[jax.Array]:
    return [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree) if _inexact(x)]


def _finite_flags(loss: jax.Array, grads: Any) -> jax.Array:
    """``bool [1 + leaves]``: is the loss finite, is each inexact gradient leaf finite."""
    return jnp.stack([jnp.isfinite(loss), *_all_finite(grads)])


def _zero_stats(names: tuple[str, ...], params: Any, opt_state: Any) -> dict[str, jax.Array]:
    stats = {n: jnp.zeros((), jnp.float32) for n in ("loss", *names)}
    stats["steps"] = jnp.zeros((), jnp.int32)
    stats["bad_step"] = jnp.full((), -1, jnp.int32)
    stats["finite"] = jnp.ones((len(finite_names(params, opt_state)),), jnp.bool_)
    return stats


def _make_step(
    graphdef: Any, objective: Objective, optimizer: optax.GradientTransformation, guard: bool
) -> Callable:
    """One optimizer step on one batch, as a ``scan`` body over ``(state, stats)``."""

    def loss_fn(p: Any, r: Any, batch: Any) -> tuple:
        # ``r`` goes through value_and_grad (undifferentiated) so that the merged
        # module's variables belong to this trace and may be updated (BatchNorm).
        model = nnx.merge(graphdef, p, r, copy=True)
        model.train()
        with module_scopes(model):  # the graph of fit's step names the model's layers
            loss, metrics = objective(model, batch)
        _, _, new_rest = split_model(model)
        return loss, (metrics, new_rest)

    def gradients(state: tuple, batch: Any) -> tuple:
        params, rest, _ = state
        return jax.value_and_grad(loss_fn, has_aux=True)(params, rest, batch)

    def update(state: tuple, grads: Any, new_rest: Any) -> tuple:
        params, _, opt_state = state
        updates, new_opt = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), new_rest, new_opt

    def accumulate(stats: dict, good: jax.Array, loss: jax.Array, metrics: dict) -> dict:
        new_stats = dict(stats)
        new_stats["loss"] = stats["loss"] + jnp.where(good, loss, 0.0)
        for name, value in metrics.items():
            new_stats[name] = stats[name] + jnp.where(good, value, 0.0)
        new_stats["steps"] = stats["steps"] + good.astype(jnp.int32)
        return new_stats

    if not guard:

        def step(carry: tuple, batch: Any, index: jax.Array) -> tuple:
            state, stats = carry
            (loss, (metrics, new_rest)), grads = gradients(state, batch)
            return update(state, grads, new_rest), accumulate(stats, jnp.bool_(True), loss, metrics)

        return step

    def attempt(state: tuple, batch: Any) -> tuple:
        """Train on ``batch``; keep ``state`` unless loss, gradients and result are finite."""
        (loss, (metrics, new_rest)), grads = gradients(state, batch)
        before = _finite_flags(loss, grads)

        def apply(_: None) -> tuple:
            new_state = update(state, grads, new_rest)
            after = _flags([*_all_finite(new_state[0]), *_all_finite(new_state[2])])
            kept = jax.lax.cond(jnp.all(after), lambda: new_state, lambda: state)
            return kept, after

        def refuse(_: None) -> tuple:
            return state, jnp.ones((_after_count(state),), jnp.bool_)

        # The update runs only for a finite loss and gradients; a non-finite update
        # (new parameters or optimizer state) is computed, and then not kept.
        new_state, after = jax.lax.cond(jnp.all(before), apply, refuse, None)
        return new_state, jnp.concatenate([before, after]), loss, metrics

    def skip(state: tuple, batch: Any) -> tuple:
        """After the first bad step: nothing runs, the state stays as it is."""
        flags = jnp.ones((1 + _inexact_count(state[0]) + _after_count(state),), jnp.bool_)
        zeros = {name: jnp.zeros((), jnp.float32) for name in objective.metric_names}
        return state, flags, jnp.zeros((), jnp.float32), zeros

    def step(carry: tuple, batch: Any, index: jax.Array) -> tuple:
        state, stats = carry
        running = stats["bad_step"] < 0
        state, flags, loss, metrics = jax.lax.cond(running, attempt, skip, state, batch)
        finite = jnp.all(flags)
        first_bad = running & ~finite
        stats = dict(stats)
        stats["bad_step"] = jnp.where(first_bad, index, stats["bad_step"])
        stats["finite"] = jnp.where(first_bad, flags, stats["finite"])
        return state, accumulate(stats, running & finite, loss, metrics)

    return step


def _flags(flags: list[jax.Array]) -> jax.Array:
    return jnp.stack(flags) if flags else jnp.ones((0,), jnp.bool_)


def _after_count(state: tuple) -> int:
    """How many flags check a step's result: new parameters, then new optimizer state."""
    return _inexact_count(state[0]) + _inexact_count(state[2])


def _gather(a: jax.Array, rows: jax.Array) -> jax.Array:
    """``a[rows]``; the rows come from a permutation of valid indices, so no bounds mask."""
    return a.at[rows].get(mode="promise_in_bounds")


class Step:
    """One compiled training call as ``fit`` runs it, in :mod:`jax.stages`' calling form.

    ``jitted(state, data)`` is the :func:`jax.jit` function ``fit`` calls: ``state`` is
    ``(params, rest, opt_state)``, donated (fit never reads the old buffers again), and
    ``data`` the dict of the call's data arrays; it returns ``(params, rest,
    opt_state, stats)``. ``function`` is the same computation as a plain Python
    function with named parameters, ``function(params, rest, opt_state, **data)``,
    which ``Trainer.compile_step`` binds to describe the call (``tpukit.Compiled``
    calls a program with its positional and keyword arrays exactly this way).
    """

    name = "fit_step"

    def __init__(self, function: Callable):
        self.function = function

        def fit_step(state: tuple, data: dict) -> tuple:
            return function(*state, **data)

        self.jitted = jax.jit(fit_step, donate_argnums=0)

    def __call__(self, state: tuple, data: dict) -> tuple:
        return self.jitted(state, data)

    def lower(self, state: tuple, data: dict) -> Any:
        """``jax.stages.Lowered`` of the call on these arguments (nothing runs)."""
        return self.jitted.lower(state, data)

    def _cache_size(self) -> int:  # read by ``_progress.compile_count``
        return self.jitted._cache_size()


@functools.lru_cache(maxsize=32)
def resident_execution(
    graphdef: Any,
    objective: Objective,
    optimizer: optax.GradientTransformation,
    plan: Plan,
    steps: int,
    guard: bool,
) -> Step:
    """``fit_step(params, rest, opt_state, *, arrays, indices, start)``: ``steps`` steps.

    Step ``i`` trains on the rows ``indices[start + i]`` of the device-resident
    ``arrays``. Returns ``(params, rest, opt_state, stats)``; parameter and
    optimizer buffers are donated.
    """
    step = _make_step(graphdef, objective, optimizer, guard)

    def run(params, rest, opt_state, *, arrays, indices, start):
        def body(carry, i):
            rows = jax.lax.dynamic_index_in_dim(indices, start + i, keepdims=False)
            batch = plan.constrain_batch(jax.tree.map(lambda a: _gather(a, rows), arrays))
            state, stats = step(carry, batch, i)
            return (plan.constrain_state(state), stats), None

        carry = ((params, rest, opt_state), _zero_stats(objective.metric_names, params, opt_state))
        (state, stats), _ = jax.lax.scan(body, carry, jnp.arange(steps))
        state = plan.constrain_state(state)
        return (*state, stats)

    return Step(run)


@functools.lru_cache(maxsize=32)
def streamed_execution(
    graphdef: Any,
    objective: Objective,
    optimizer: optax.GradientTransformation,
    plan: Plan,
    guard: bool,
) -> Step:
    """``fit_step(params, rest, opt_state, *, chunk)``: one step per stacked batch.

    ``chunk`` holds stacked batches ``[steps, batch, ...]``. Returns ``(params, rest,
    opt_state, stats)``; parameter and optimizer buffers are donated.
    """
    step = _make_step(graphdef, objective, optimizer, guard)

    def run(params, rest, opt_state, *, chunk):
        steps = jax.tree.leaves(chunk)[0].shape[0]

        def body(carry, xs):
            i, batch = xs
            state, stats = step(carry, plan.constrain_batch(batch), i)
            return (plan.constrain_state(state), stats), None

        carry = ((params, rest, opt_state), _zero_stats(objective.metric_names, params, opt_state))
        (state, stats), _ = jax.lax.scan(body, carry, (jnp.arange(steps), chunk))
        state = plan.constrain_state(state)
        return (*state, stats)

    return Step(run)


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
