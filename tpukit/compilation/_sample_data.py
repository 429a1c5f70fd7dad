"""Device data for abstract arguments, so a call compiled from shapes can be run and timed."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpukit.compilation._signature import Signature


def random_like(abstract: jax.ShapeDtypeStruct, key: jax.Array) -> jax.Array:
    """Random device data of an abstract array's shape and dtype (normal floats, small ints)."""
    dtype = jnp.dtype(abstract.dtype)
    if jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.complexfloating):
        value = jax.random.normal(key, abstract.shape, dtype)
    elif jnp.issubdtype(dtype, jnp.integer):
        value = jax.random.randint(key, abstract.shape, 0, 2, dtype)
    else:
        value = jnp.zeros(abstract.shape, dtype)
    sharding = getattr(abstract, "sharding", None)
    return jax.device_put(value, sharding) if sharding is not None else value


def concrete_arguments(
    signature: Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call's arguments with every abstract leaf replaced by random device data.

    With no arguments at all, the signature's own shapes and static values are used.
    """
    if not args and not kwargs:
        args = tuple(p.value for p in signature.parameters if not p.keyword)
        kwargs = {p.name: p.value for p in signature.parameters if p.keyword}
    keys = iter(
        jax.random.split(jax.random.key(0), 1 + len(jax.tree_util.tree_leaves((args, kwargs))))
    )

    def fill(leaf: Any) -> Any:
        if isinstance(leaf, jax.ShapeDtypeStruct):
            return random_like(leaf, next(keys))
        if isinstance(leaf, np.ndarray):
            return jax.device_put(leaf)  # once, so timings measure compute, not transfers
        return leaf

    return jax.tree_util.tree_map(fill, (args, kwargs))
