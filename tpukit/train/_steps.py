"""The compiled functions: many optimizer steps per call, and whole-dataset evaluation.

Inside these functions the NNX model is a pure pytree: ``(params, rest)`` from
``nnx.split(model, nnx.Param, ...)``, merged back into a throw-away module only
while tracing. So NNX's Python bookkeeping runs once per compilation, never per
step, and the loop is a plain :func:`jax.lax.scan`.

``fit``'s calls run their steps exactly as a hand-written ``lax.scan`` does, with no
branch, no select and no per-step reduction: each figure (loss, metrics) is summed
elementwise over the call's steps and averaged once at its end, and the call's summed
loss terms, final parameters and optimizer state are checked once (a non-finite value
persists, so once per call catches it). When a call trips, the host (``_run``)
discards its result and runs the same steps again from the call's input, which it
still holds (calls do not donate their state), with every quantity of every step
checked (``guard="step"``: one flag per loss, gradient leaf, new parameter leaf and
optimizer-state leaf) and every step from the first bad one dropped: that run's
state is exactly that of the good steps, and its flags name what went bad. (A finite
gradient can still give a non-finite update: ``optax.adam(eps=0.0)`` on a zero
gradient, ``optax.sgd(inf)``.) The same undonated input makes an interrupted call
harmless: the host either takes its result or keeps the state it started from.
Without ``lax.cond`` the loop has no branch to wait for (on a GPU, a conditional in
a loop reads its predicate on the host).

Builders are cached, so calling :func:`tpukit.fit` again reuses the compiled code.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from tpukit.compilation import LEAF_NAMES, Calling, module_scopes
from tpukit.runtime import devices_of, settled

from ._exceptions import TrainingTypeError
from ._figures import Figures, Layout, pack
from ._flat import FlatState, Parts
from ._hidden_gradients import hidden_gradients, inexact, inexact_leaves, inexact_names
from ._mesh import Plan
from ._objective import Objective


def split_model(model: nnx.Module) -> tuple[Any, Any, Any]:
    """``(graphdef, params, rest)``: trainable parameters apart from all other state."""
    return nnx.split(model, nnx.Param, ...)


def finite_names(params: Any, opt_state: Any = ()) -> tuple[str, ...]:
    """What each entry of a step's ``finite`` flags is about: ``loss``, then gradients,
    then the new parameters, then the new optimizer state.

    Example::

        >>> finite_names({"l1": {"kernel": jnp.zeros(2)}})
        ('loss', 'gradient of l1/kernel', 'new value of l1/kernel')
    """
    leaves = inexact_names(params)
    return (
        "loss",
        *(f"gradient of {n}" for n in leaves),
        *(f"new value of {n}" for n in leaves),
        *(f"optimizer state {n}" for n in _opt_state_names(opt_state)),
    )


def _opt_state_names(opt_state: Any) -> list[str]:
    return inexact_names(opt_state)


def _all_finite(tree: Any) -> list[jax.Array]:
    return [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree) if inexact(x)]


def _keep_if(active: jax.Array, new: Any, old: Any) -> Any:
    """``new`` where ``active``, else ``old``, leaf by leaf."""
    return jax.tree.map(lambda n, o: jnp.where(active, n, o), new, old)


#: How a step checks for non-finite values: ``"off"``; ``"call"``, fit's main path (each
#: step's loss and gradients, the call's final state once); ``"step"``, every quantity of
#: every step with a flag per leaf (the diagnosis run after a call trips).
GuardMode = str


def _make_step(
    graphdef: Any, objective: Objective, optimizer: optax.GradientTransformation, guard: GuardMode
) -> tuple[Callable, Callable]:
    """One optimizer step on one batch, as a ``scan`` body over ``(state, stats)``, and
    ``terms_of(params, rest, batch)``, the loss terms' shapes (to size the stats).

    The stats add up each figure's terms (:meth:`Objective.terms`: per-example values
    where there are any) elementwise, step after step; :func:`_final_stats` takes their
    means once per call. So a step adds no reduction and no scalar kernel of its own to
    the hand-written step: the additions fuse into the kernels computing the terms.

    ``guard="off"`` and ``guard="call"`` (``fit``'s calls) apply every step exactly as a
    hand-written loop does: no branch, no select, no per-step check. With ``"call"`` the
    call's summed loss terms and its final parameters, model state and optimizer state
    are checked once at its end (``end_finite``): a non-finite value persists (``NaN +
    x``, ``0.9 * inf``), so once per call catches it. Only gradient leaves that the
    optimizer could hide a NaN in (:func:`hidden_gradients`) are checked every step, and
    only when there are any. The host never keeps the state of a call that tripped.

    ``guard="step"`` is the run that decides what is kept: every step checks its loss,
    each gradient leaf, each new parameter leaf and each new optimizer-state leaf; the
    first bad step's flags go to ``finite`` (:func:`finite_names` order), and from that
    step on the state passes through unchanged (a select that XLA fuses into the update),
    so the call returns exactly the state of its good steps.
    """

    loss_fn = _loss_function(graphdef, objective)

    def terms_of(params: Any, rest: Any, batch: Any) -> dict:
        return jax.eval_shape(loss_fn, params, rest, batch)[1][0]

    def step(carry: tuple, batch: Any, index: jax.Array) -> tuple:
        state, stats = carry
        params, rest, opt_state = state
        (loss, (terms, new_rest)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, rest, batch
        )
        updates, new_opt = optimizer.update(grads, opt_state, params)
        new_state = (optax.apply_updates(params, updates), new_rest, new_opt)
        stats = dict(stats)
        if guard == "step":
            running = stats["bad_step"] < 0
            before = _flags([jnp.isfinite(loss), *_all_finite(grads)])
            after = _flags([*_all_finite(new_state[0]), *_all_finite(new_opt)])
            # The result of a bad loss or gradient is not news: name the cause only.
            flags = jnp.concatenate([before, after | ~jnp.all(before)])
            first_bad = running & ~jnp.all(flags)
            stats["bad_step"] = jnp.where(first_bad, index, stats["bad_step"])
            stats["finite"] = jnp.where(first_bad, flags, stats["finite"])
            counted = running & ~first_bad
            new_state = _keep_if(counted, new_state, state)
            stats["steps"] = stats["steps"] + counted.astype(jnp.int32)
            terms = {n: jnp.where(counted, t, 0.0) for n, t in terms.items()}
        elif guard == "call":
            hidden = hidden_gradients(optimizer, params)
            checked = [g for g, h in zip(inexact_leaves(grads), hidden, strict=True) if h]
            if checked:
                good = _every([jnp.all(jnp.isfinite(g)) for g in checked])
                stats["gradients_finite"] = stats["gradients_finite"] & good
        stats["sums"] = [
            total + jnp.stack([terms[n] for n in names])
            for total, names in zip(stats["sums"], _term_groups(terms), strict=True)
        ]
        return new_state, stats

    return step, terms_of


def _loss_function(graphdef: Any, objective: Objective) -> Callable:
    """``loss_fn(params, rest, batch) -> (loss, (terms, new_rest))``, the function a step
    differentiates: the model merged from its state, in train mode, its layers named."""

    def loss_fn(p: Any, r: Any, batch: Any) -> tuple:
        # ``r`` goes through value_and_grad (undifferentiated) so that the merged
        # module's variables belong to this trace and may be updated (BatchNorm).
        model = nnx.merge(graphdef, p, r, copy=True)
        model.train()
        with module_scopes(model):  # the graph of fit's step names the model's layers
            loss, terms = objective.terms(model, batch)
        _, _, new_rest = split_model(model)
        return loss, (terms, new_rest)

    return loss_fn


@dataclass(frozen=True)
class Replay:
    """One step of a call, to run again through ``tpukit.find_nan`` after the guard trips.

    ``function(params, rest, opt_state, train_data)`` is one unguarded optimizer step on
    one batch, as the call ran it: it returns the loss, the gradients, the new
    parameters, model state and optimizer state. ``batch_of(data, index)`` is the batch
    of the call's step ``index`` (0-based) from the call's data, and the dataset rows it
    holds (``None`` for streamed batches). Built only when a run stops: normal training
    never pays for it.
    """

    function: Callable
    batch_of: Callable[[dict, int], tuple[Any, np.ndarray | None]]


def _replay(
    graphdef: Any, objective: Objective, optimizer: optax.GradientTransformation, batch_of: Callable
) -> Replay:
    loss_fn = _loss_function(graphdef, objective)

    def step(params: Any, rest: Any, opt_state: Any, train_data: Any) -> tuple:
        (loss, (_, new_rest)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, rest, train_data
        )
        updates, new_opt = optimizer.update(grads, opt_state, params)
        return loss, grads, optax.apply_updates(params, updates), new_rest, new_opt

    return Replay(step, batch_of)


def _resident_batch(data: dict, index: int) -> tuple[Any, np.ndarray]:
    rows = np.asarray(data["indices"])[int(data["start"]) + index]
    return jax.tree.map(lambda a: a[rows], data["arrays"]), rows


def _streamed_batch(data: dict, index: int) -> tuple[Any, None]:
    return jax.tree.map(lambda a: a[index], data["chunk"]), None


def _every(flags: list[jax.Array]) -> jax.Array:
    return jnp.all(jnp.stack(flags)) if flags else jnp.bool_(True)


def _term_groups(terms: dict) -> list[list[str]]:
    """The figures' names grouped by their terms' shape, in order. Each group is summed
    as one stacked array: one kernel adds up the loss and the accuracy of a step."""
    groups: dict[tuple, list[str]] = {}
    for name, term in terms.items():
        groups.setdefault(tuple(term.shape), []).append(name)
    return list(groups.values())


def _zero_stats(terms: dict, params: Any, opt_state: Any, guard: GuardMode) -> dict:
    """The stats a call starts from: zero sums of the figures' terms (stacked by shape,
    :func:`_term_groups`), and what the guard mode tracks."""
    sums = [
        jnp.zeros((len(names), *terms[names[0]].shape), jnp.float32)
        for names in _term_groups(terms)
    ]
    stats: dict[str, Any] = {"sums": sums}
    if guard == "step":
        stats["steps"] = jnp.zeros((), jnp.int32)
        stats["bad_step"] = jnp.full((), -1, jnp.int32)
        stats["finite"] = jnp.ones((len(finite_names(params, opt_state)),), jnp.bool_)
    elif guard == "call":
        stats["gradients_finite"] = jnp.bool_(True)
    return stats


def _final_stats(stats: dict, terms: dict, state: tuple, steps: int, guard: GuardMode) -> dict:
    """The figures a call hands the host: each figure's sum over its steps of the batch
    means, ``steps`` (the steps applied) and ``bad_step`` (-1 unless a step went bad).

    With ``guard="call"``, ``end_finite`` says whether the summed loss terms, the
    checked gradients and the final state (parameters, model state, optimizer state)
    are all finite: one check per call."""
    sums = {
        name: total[i]
        for total, names in zip(stats["sums"], _term_groups(terms), strict=True)
        for i, name in enumerate(names)
    }
    out = {n: jnp.sum(t) / max(t.size, 1) for n, t in sums.items()}
    if guard == "step":
        out.update(steps=stats["steps"], bad_step=stats["bad_step"], finite=stats["finite"])
        return out
    out["steps"] = jnp.int32(steps)
    out["bad_step"] = jnp.int32(-1)
    if guard == "call":
        out["end_finite"] = (
            stats["gradients_finite"]
            & jnp.all(jnp.isfinite(sums["loss"]))
            & _every(_all_finite(state))
        )
    return out


def _flags(flags: list[jax.Array]) -> jax.Array:
    return jnp.stack(flags) if flags else jnp.ones((0,), jnp.bool_)


def _gather(a: jax.Array, rows: jax.Array) -> jax.Array:
    """``a[rows]``; the rows come from a permutation of valid indices, so no bounds mask."""
    return a.at[rows].get(mode="promise_in_bounds")


class Step:
    """One compiled training call as ``fit`` runs it, in :mod:`jax.stages`' calling form.

    ``step(state, data)`` dispatches it: ``state`` is a :class:`~tpukit.train._flat.FlatState`
    (``(params, rest, opt_state)`` as leaves), not donated (a stopped or interrupted
    call leaves it intact, see the module's docstring), and ``data`` the dict of the
    call's data arrays; it returns ``(new state, stats)``, the new state a
    ``FlatState`` of the same :class:`~tpukit.train._flat.Parts`. The jitted function
    takes and returns the state's leaves (:meth:`jitted`, one per state structure),
    so that no dispatch flattens or builds NNX's and optax's trees (``_flat``).
    ``function`` is the same computation as a plain Python function with named
    parameters, ``function(params, rest, opt_state, **data)``, which
    ``Trainer.compile_step`` binds to describe the call; :meth:`calling` tells
    ``tpukit.Compiled`` how such a call maps onto the leaves.
    """

    name = "fit_step"

    def __init__(
        self,
        function: Callable,
        diagnosis: Callable[[], Step] | None = None,
        replay: Callable[[], Replay] | None = None,
    ):
        self.function = function
        self._diagnosis = diagnosis
        self._devices: tuple | None = None  # the program's, read from its first result
        self._replay = replay
        self._jitted: dict[Any, tuple[Callable, list]] = {}  # by the state's treedef
        self._last: tuple[Parts | None, Callable | None, list] = (None, None, [])

    def jitted(self, parts: Parts) -> Callable:
        """The :func:`jax.jit` function over ``(leaves, data)`` for states of ``parts``'
        structure: it returns ``(new leaves, (packed, apart))``, the stats packed
        (``_figures.pack``) as :meth:`layout` says."""
        return self._program(parts)[1]

    def layout(self, parts: Parts) -> Layout:
        """Where the stats lie in the packed output of :meth:`jitted` for ``parts``
        (known once it is traced)."""
        return self._program(parts)[2][0]

    def _program(self, parts: Parts) -> tuple[Parts, Callable, list]:
        """``(parts, jitted function, [its layout, once traced])``, the last one kept."""
        last = self._last
        if last[0] is parts:
            return last
        treedef = parts.treedef
        found = self._jitted.get(treedef)
        if found is None:
            function, traced = self.function, []

            def fit_step(leaves: list, data: dict) -> tuple:
                *state, stats = function(*treedef.unflatten(leaves), **data)
                packed, apart, layout = pack(stats)
                if traced and traced[0] != layout:  # fixed by the objective and the guard
                    raise AssertionError(f"{self.name}'s stats changed: {layout}")
                traced[:] = [layout]
                return treedef.flatten_up_to(tuple(state)), (packed, apart)

            # the ledger names the leaves by their place in the state, as the step's
            # Calling does for the memory view and the graph
            setattr(fit_step, LEAF_NAMES, _leaf_names(treedef.unflatten(range(treedef.num_leaves))))
            found = self._jitted[treedef] = (jax.jit(fit_step), traced)
        self._last = last = (parts, *found)
        return last

    def __call__(self, state: FlatState, data: dict) -> tuple[FlatState, Figures]:
        """Dispatch the call; on several simulated CPU devices, wait for it too
        (``tpukit.runtime.settled``: XLA:CPU can deadlock two such calls in flight)."""
        _, fn, traced = self._program(state.parts)
        leaves, stats = fn(state.leaves, data)
        if self._devices is None:  # a Step's mesh is fixed (it is cached per plan)
            self._devices = devices_of(stats)  # the stats: a few leaves to look at
        leaves, (packed, apart) = settled((leaves, stats), self._devices)
        return state.like(leaves), Figures(packed, apart, traced[0])

    def lower(self, state: FlatState | tuple, data: dict) -> Any:
        """``jax.stages.Lowered`` of the call on these arguments (nothing runs); ``state``
        a ``FlatState`` or the tuple ``(params, rest, opt_state)``."""
        flat = _flat(state)
        return self.jitted(flat.parts).lower(flat.leaves, data)

    def calling(self, state: FlatState | tuple) -> Calling:
        """How ``tpukit.Compiled`` calls the program lowered by :meth:`lower` on
        ``state`` as ``function(params, rest, opt_state, **data)``: the three trees go
        in as their leaves, and ``(params, rest, opt_state, stats)`` comes out, the
        stats a dict again."""
        flat = _flat(state)
        treedef = flat.treedef

        def arguments(args: tuple, kwargs: dict) -> tuple:
            return (treedef.flatten_up_to(tuple(args)), kwargs)

        def results(out: tuple) -> tuple:
            leaves, (packed, apart) = out
            stats = Figures(packed, apart, self.layout(flat.parts)).on_device()
            return (*treedef.unflatten(leaves), stats)

        def shardings(args: tuple) -> tuple[tuple, dict]:
            leaves, data = args
            return tuple(treedef.unflatten(leaves)), data

        return Calling(arguments, results, shardings, _leaf_names(flat.tree()))

    def diagnosis(self) -> Step:
        """The same call with every quantity of every step checked (``guard="step"``),
        run after this call trips: it returns the state of the good steps, the first
        bad step and what went bad."""
        if self._diagnosis is None:
            raise TrainingTypeError(
                f"{self.name} was compiled with stop_on_nan=False, so it has no diagnosis "
                "run (the per-step check of every quantity). Use a step of a run with "
                "stop_on_nan=True."
            )
        return self._diagnosis()

    def replay(self) -> Replay | None:
        """One step of this call as a plain function, for ``find_nan`` after a trip;
        ``None`` for a call that has none (evaluation, ``stop_on_nan=False``)."""
        return self._replay() if self._replay is not None else None

    def _cache_size(self) -> int:  # read by ``_progress.compile_count``
        return sum(fn._cache_size() for fn, _ in self._jitted.values())


def _flat(state: FlatState | tuple) -> FlatState:
    return state if isinstance(state, FlatState) else FlatState.of(*state)


@functools.lru_cache(maxsize=32)
def resident_execution(
    graphdef: Any,
    objective: Objective,
    optimizer: optax.GradientTransformation,
    plan: Plan,
    steps: int,
    guard: GuardMode,
) -> Step:
    """``fit_step(params, rest, opt_state, *, arrays, indices, start)``: ``steps`` steps.

    Step ``i`` trains on the rows ``indices[start + i]`` of the device-resident
    ``arrays``. Returns ``(params, rest, opt_state, stats)``.
    """
    step, terms_of = _make_step(graphdef, objective, optimizer, guard)

    def run(params, rest, opt_state, *, arrays, indices, start):
        def batch_at(i):
            rows = jax.lax.dynamic_index_in_dim(indices, start + i, keepdims=False)
            return plan.constrain_batch(jax.tree.map(lambda a: _gather(a, rows), arrays))

        def body(carry, i):
            state, stats = step(carry, batch_at(i), i)
            return (plan.constrain_state(state), stats), None

        first = jax.eval_shape(batch_at, 0)
        terms = terms_of(params, rest, first)
        stats = _zero_stats(terms, params, opt_state, guard)
        (state, stats), _ = jax.lax.scan(
            body, ((params, rest, opt_state), stats), jnp.arange(steps)
        )
        state = plan.constrain_state(state)
        return (*state, _final_stats(stats, terms, state, steps, guard))

    return Step(
        run,
        diagnosis=functools.partial(
            resident_execution, graphdef, objective, optimizer, plan, steps, "step"
        )
        if guard == "call"
        else None,
        replay=functools.partial(_replay, graphdef, objective, optimizer, _resident_batch),
    )


@functools.lru_cache(maxsize=32)
def streamed_execution(
    graphdef: Any,
    objective: Objective,
    optimizer: optax.GradientTransformation,
    plan: Plan,
    guard: GuardMode,
) -> Step:
    """``fit_step(params, rest, opt_state, *, chunk)``: one step per stacked batch.

    ``chunk`` holds stacked batches ``[steps, batch, ...]``. Returns ``(params, rest,
    opt_state, stats)``.
    """
    step, terms_of = _make_step(graphdef, objective, optimizer, guard)

    def run(params, rest, opt_state, *, chunk):
        steps = jax.tree.leaves(chunk)[0].shape[0]

        def body(carry, xs):
            i, batch = xs
            state, stats = step(carry, plan.constrain_batch(batch), i)
            return (plan.constrain_state(state), stats), None

        first = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype), chunk)
        terms = terms_of(params, rest, first)
        stats = _zero_stats(terms, params, opt_state, guard)
        (state, stats), _ = jax.lax.scan(
            body, ((params, rest, opt_state), stats), (jnp.arange(steps), chunk)
        )
        state = plan.constrain_state(state)
        return (*state, _final_stats(stats, terms, state, steps, guard))

    return Step(
        run,
        diagnosis=functools.partial(
            streamed_execution, graphdef, objective, optimizer, plan, "step"
        )
        if guard == "call"
        else None,
        replay=functools.partial(_replay, graphdef, objective, optimizer, _streamed_batch),
    )


@functools.lru_cache(maxsize=32)
def evaluation(
    graphdef: Any, objective: Objective, plan: Plan, batch_size: int, n: int
) -> Callable:
    """``run(params, rest, arrays) -> {"loss": mean, metric: mean}`` over the first ``n`` rows.

    Full batches run in a ``scan`` split over the devices; the last ``n % batch_size``
    rows run as one smaller batch, so every example counts exactly once. The model
    is in eval mode (``model.eval()``) and its state is not changed.
    """
    return jax.jit(_evaluation_run(graphdef, objective, plan, batch_size, n, scoped=False))


def evaluation_replay(
    graphdef: Any, objective: Objective, plan: Plan, batch_size: int, n: int
) -> Callable:
    """:func:`evaluation`'s computation as a plain function whose operations carry the
    model's layer paths, for ``tpukit.find_nan`` after an evaluation's loss came out
    non-finite. Built only then: an evaluation never pays for it."""
    return _evaluation_run(graphdef, objective, plan, batch_size, n, scoped=True)


def _evaluation_run(
    graphdef: Any, objective: Objective, plan: Plan, batch_size: int, n: int, scoped: bool
) -> Callable:
    full, remainder = divmod(n, batch_size)
    split = plan.batch_shards > 1

    def rows(a: jax.Array, start: Any, size: int) -> jax.Array:
        """``a[start:start + size]``. Over split data, a gather of those rows: each device
        picks the rows it holds (as fit's batches do), where a slice across the split
        would first gather the whole dataset onto every device."""
        if not split:
            return jax.lax.dynamic_slice_in_dim(a, start, size)
        return _gather(a, start + jnp.arange(size, dtype=jnp.int32))

    def forward(params, rest, batch):
        model = nnx.merge(graphdef, params, rest)
        model.eval()
        with module_scopes(model) if scoped else contextlib.nullcontext():
            loss, metrics = objective(model, batch)
        return {"loss": loss, **metrics}

    def run(params, rest, arrays):
        totals = {k: jnp.zeros((), jnp.float32) for k in ("loss", *objective.metric_names)}
        if full:

            def body(acc, i):
                batch = jax.tree.map(lambda a: rows(a, i * batch_size, batch_size), arrays)
                out = forward(params, rest, plan.constrain_batch(batch))
                return {k: acc[k] + out[k] * batch_size for k in acc}, None

            totals, _ = jax.lax.scan(body, totals, jnp.arange(full))
        if remainder:
            batch = jax.tree.map(lambda a: rows(a, full * batch_size, remainder), arrays)
            out = forward(params, rest, batch)
            totals = {k: totals[k] + out[k] * remainder for k in totals}
        return {k: v / n for k, v in totals.items()}

    return run


def _leaf_names(state: tuple) -> dict[str, str]:
    """``{"leaves[i]": "state[0]['layers'][0]['kernel'].value"}``: the step's flat
    arguments by the names JAX gave them when the step took the state's tree itself."""
    paths = jax.tree_util.tree_flatten_with_path(state)[0]
    return {
        f"leaves[{i}]": "state" + jax.tree_util.keystr(path) for i, (path, _) in enumerate(paths)
    }
