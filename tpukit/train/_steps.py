"""The compiled functions: many optimizer steps per call, and whole-dataset evaluation.

Inside these functions the NNX model is a pure pytree: ``(params, rest)`` from
``nnx.split(model, nnx.Param, ...)``, merged back into a throw-away module only
while tracing. So NNX's Python bookkeeping runs once per compilation, never per
step, and the loop is a plain :func:`jax.lax.scan`.

Each training step is guarded without a branch: every step computes its update,
and a select that XLA fuses into the update keeps it or leaves the state as it was.
A step whose loss, gradients, new parameters or new optimizer state are not finite
stops the call: ``bad_step`` says where, ``finite`` which quantity went bad (one
flag for the loss, then one per inexact gradient leaf, new parameter leaf and
optimizer-state leaf, in :func:`finite_names` order), and every later step is
dropped. (A finite gradient can still give a non-finite update:
``optax.adam(eps=0.0)`` on a zero gradient, ``optax.sgd(inf)``.) The call does not
donate its input state, so the host still holds the state the call started from:
it runs the same program again with ``limit=bad_step`` and keeps exactly the good
steps (``_run``). That replay is the guard's whole price on the failure path; on
the main path it costs the per-leaf finite reductions, which fuse into the
producers, and no ``lax.cond`` (on a GPU, a conditional in a loop waits for its
predicate on the host). The same undonated input makes an interrupted call
harmless: the host either takes its result or keeps the state it started from.

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


def _all_finite(tree: Any) -> list[jax.Array]:
    return [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree) if _inexact(x)]


def _zero_stats(names: tuple[str, ...], params: Any, opt_state: Any) -> dict[str, jax.Array]:
    stats = {n: jnp.zeros((), jnp.float32) for n in ("loss", *names)}
    stats["steps"] = jnp.zeros((), jnp.int32)
    stats["bad_step"] = jnp.full((), -1, jnp.int32)
    stats["finite"] = jnp.ones((len(finite_names(params, opt_state)),), jnp.bool_)
    return stats


def _keep_if(active: jax.Array, new: Any, old: Any) -> Any:
    """``new`` where ``active``, else ``old``, leaf by leaf. ``active`` is known before the
    step starts, so XLA fuses this select into the fusions that compute ``new``."""
    return jax.tree.map(lambda n, o: jnp.where(active, n, o), new, old)


def _make_step(
    graphdef: Any, objective: Objective, optimizer: optax.GradientTransformation, guard: bool
) -> Callable:
    """One optimizer step on one batch, as a ``scan`` body over ``(state, stats)``.

    ``step(carry, batch, index, limit)`` applies the step when ``index < limit`` and
    (with the guard) no earlier step of the call was bad; otherwise the state passes
    through unchanged. There is no ``lax.cond``: every step computes, and a select that
    fuses into the update keeps or drops the result. With the guard, a step whose loss,
    gradients, new parameters or new optimizer state are not finite is recorded
    (``bad_step``, ``finite``) and every later step of the call is dropped; its own
    result *is* in the returned state, which the host therefore never uses: it runs the
    call again from its (undonated) input with ``limit=bad_step``, the same program, so
    the state it keeps is exactly that of the good steps.
    """

    def loss_fn(p: Any, r: Any, batch: Any) -> tuple:
        # ``r`` goes through value_and_grad (undifferentiated) so that the merged
        # module's variables belong to this trace and may be updated (BatchNorm).
        model = nnx.merge(graphdef, p, r, copy=True)
        model.train()
        with module_scopes(model):  # the graph of fit's step names the model's layers
            loss, metrics = objective(model, batch)
        _, _, new_rest = split_model(model)
        return loss, (metrics, new_rest)

    def step(carry: tuple, batch: Any, index: jax.Array, limit: jax.Array) -> tuple:
        state, stats = carry
        params, rest, opt_state = state
        (loss, (metrics, new_rest)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, rest, batch
        )
        updates, new_opt = optimizer.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        active = index < limit
        stats = dict(stats)
        if guard:
            active = active & (stats["bad_step"] < 0)
            before = _flags([jnp.isfinite(loss), *_all_finite(grads)])
            after = _flags([*_all_finite(new_params), *_all_finite(new_opt)])
            # The result of a bad loss or gradient is not news: name the cause only.
            flags = jnp.concatenate([before, after | ~jnp.all(before)])
            good = jnp.all(flags)
            first_bad = active & ~good
            stats["bad_step"] = jnp.where(first_bad, index, stats["bad_step"])
            stats["finite"] = jnp.where(first_bad, flags, stats["finite"])
            counted = active & good
        else:
            counted = active
        stats["loss"] = stats["loss"] + jnp.where(counted, loss, 0.0)
        for name, value in metrics.items():
            stats[name] = stats[name] + jnp.where(counted, value, 0.0)
        stats["steps"] = stats["steps"] + counted.astype(jnp.int32)
        return _keep_if(active, (new_params, new_rest, new_opt), state), stats

    return step


def _flags(flags: list[jax.Array]) -> jax.Array:
    return jnp.stack(flags) if flags else jnp.ones((0,), jnp.bool_)


def _gather(a: jax.Array, rows: jax.Array) -> jax.Array:
    """``a[rows]``; the rows come from a permutation of valid indices, so no bounds mask."""
    return a.at[rows].get(mode="promise_in_bounds")


class Step:
    """One compiled training call as ``fit`` runs it, in :mod:`jax.stages`' calling form.

    ``jitted(state, data)`` is the :func:`jax.jit` function ``fit`` calls: ``state`` is
    ``(params, rest, opt_state)``, not donated (a stopped or interrupted call leaves it
    intact, see the module's docstring), and ``data`` the dict of the call's data
    arrays, ``limit`` among them; it returns ``(params, rest, opt_state, stats)``.
    ``function`` is the same computation as a plain Python function with named
    parameters, ``function(params, rest, opt_state, **data)``, which
    ``Trainer.compile_step`` binds to describe the call (``tpukit.Compiled`` calls a
    program with its positional and keyword arrays exactly this way).
    """

    name = "fit_step"

    def __init__(self, function: Callable):
        self.function = function

        def fit_step(state: tuple, data: dict) -> tuple:
            return function(*state, **data)

        self.jitted = jax.jit(fit_step)

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
    """``fit_step(params, rest, opt_state, *, arrays, indices, start, limit)``: ``steps`` steps.

    Step ``i`` trains on the rows ``indices[start + i]`` of the device-resident
    ``arrays``; steps from ``limit`` on leave the state as it is. Returns ``(params,
    rest, opt_state, stats)``.
    """
    step = _make_step(graphdef, objective, optimizer, guard)

    def run(params, rest, opt_state, *, arrays, indices, start, limit):
        def body(carry, i):
            rows = jax.lax.dynamic_index_in_dim(indices, start + i, keepdims=False)
            batch = plan.constrain_batch(jax.tree.map(lambda a: _gather(a, rows), arrays))
            state, stats = step(carry, batch, i, limit)
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
    """``fit_step(params, rest, opt_state, *, chunk, limit)``: one step per stacked batch.

    ``chunk`` holds stacked batches ``[steps, batch, ...]``; steps from ``limit`` on
    leave the state as it is. Returns ``(params, rest, opt_state, stats)``.
    """
    step = _make_step(graphdef, objective, optimizer, guard)

    def run(params, rest, opt_state, *, chunk, limit):
        steps = jax.tree.leaves(chunk)[0].shape[0]

        def body(carry, xs):
            i, batch = xs
            state, stats = step(carry, plan.constrain_batch(batch), i, limit)
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
