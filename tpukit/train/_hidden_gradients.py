"""Which gradient leaves could an optimizer hide a NaN in? ``fit`` checks those every step.

Most optimizers carry a non-finite gradient into their update (Adam's moments, SGD's
step), where it persists until the check of the call's final state finds it, so
checking gradients every step would be paid for nothing. An optimizer that sanitizes
them (``optax.zero_nans``, ``optax.apply_if_finite``, a frozen leaf's
``set_to_zero``) would hide one; :func:`hidden_gradients` finds out by running the
optimizer once on all-NaN gradients and zero parameters of the same shapes.

Example::

    >>> import jax.numpy as jnp, optax
    >>> params = {"w": jnp.ones((3, 2))}
    >>> hidden_gradients(optax.adam(1e-3), params)
    [False]
    >>> hidden_gradients(optax.chain(optax.zero_nans(), optax.sgd(0.1)), params)
    [True]
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from tpukit._pytree import leaf_paths

from ._memo import abstract_key, remembered


def inexact(x: Any) -> bool:
    return jnp.issubdtype(x.dtype, jnp.inexact)


def inexact_leaves(tree: Any) -> list[jax.Array]:
    return [x for x in jax.tree.leaves(tree) if inexact(x)]


def inexact_names(tree: Any) -> list[str]:
    """The paths of ``tree``'s inexact leaves, in leaf order (``l1/kernel``)."""
    return [name for name, x in leaf_paths(tree) if inexact(x)]


def hidden_gradients(optimizer: optax.GradientTransformation, params: Any) -> list[bool]:
    """For each inexact gradient leaf: could a non-finite value there leave no trace in
    the new parameters and optimizer state? Then fit's call checks that leaf every step.
    Asked at trace time; the probe runs there, on the parameters' shapes.

    The probe compiles a program of the optimizer's update, so its answer is kept per
    optimizer program (:class:`~._program.OptimizerProgram`'s key: its update's jaxpr,
    constants included) and parameter shapes: each later trace
    of a step with them (another batch size, a recompile, the out-of-memory advice's
    candidates) reuses it.
    """
    key = getattr(optimizer, "key", None)
    if key is None:
        return _probe_hidden(optimizer, params)
    return remembered(
        _HIDDEN, (key, *abstract_key(params)), lambda: _probe_hidden(optimizer, params)
    )


_HIDDEN: dict[tuple, list[bool]] = {}


def _probe_hidden(optimizer: optax.GradientTransformation, params: Any) -> list[bool]:
    """The probe as one compiled program: op by op it would compile each of the
    optimizer's operations on each shape (4 s against 0.4 s for 18 leaves of 512 x 512)."""
    shapes = jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype), params)
    state_names: list[str] = []

    def finite_after_nan_gradients(zero: jax.Array, nan: jax.Array) -> tuple[list, list]:
        zeros = jax.tree.map(lambda x: jnp.broadcast_to(zero.astype(x.dtype), x.shape), shapes)
        nans = jax.tree.map(
            lambda x: jnp.broadcast_to(nan.astype(x.dtype), x.shape) if inexact(x) else x,
            zeros,
        )
        updates, new_state = optimizer.update(nans, optimizer.init(zeros), zeros)
        state_leaves = [(name, x) for name, x in leaf_paths(new_state) if inexact(x)]
        state_names.extend(name for name, _ in state_leaves)
        return (
            [jnp.all(jnp.isfinite(x)) for _, x in state_leaves],
            [jnp.all(jnp.isfinite(u)) for u in inexact_leaves(updates)],
        )

    # Compiled and called as a stage, it runs now, inside a step's trace too. (Under
    # `jax.ensure_compile_time_eval` each operation on constants would run alone.)
    arguments = (np.float32(0.0), np.float32(np.nan))
    try:
        probe = jax.jit(finite_after_nan_gradients).lower(*arguments).compile()
    except Exception:  # noqa: BLE001 - an optimizer that cannot be probed: check all
        return [True] * len(inexact_leaves(params))
    state_finite, finite = probe(*arguments)
    bad_state = [n for n, ok in zip(state_names, state_finite, strict=True) if not bool(ok)]
    names = inexact_names(params)

    def traced_in_state(name: str) -> bool:  # optax states mirror the parameters' paths
        return any(n == name or n.endswith("/" + name) for n in bad_state)

    return [bool(ok) and not traced_in_state(name) for name, ok in zip(names, finite, strict=True)]
