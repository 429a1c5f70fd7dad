"""Device data for abstract arguments, so a call compiled from shapes can be run and timed.

The data is drawn with NumPy on the host and put on the device once: drawing it with
``jax.random`` would compile a random-number kernel per shape first (seconds for a
training step's dozens of arrays), which the user would wait for before any timing.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpukit.compilation._signature import Signature


def random_like(abstract: jax.ShapeDtypeStruct, rng: np.random.Generator) -> jax.Array:
    """Random device data of an abstract array's shape and dtype (normal floats, small ints,
    PRNG keys made from one seed)."""
    shape = tuple(abstract.shape)
    if jax.dtypes.issubdtype(abstract.dtype, jax.dtypes.prng_key):  # an NNX Rngs stream's key
        impl = getattr(getattr(abstract.dtype, "_impl", None), "name", None)
        seed = jax.random.key(int(rng.integers(2**31)), impl=impl)
        value = jax.random.split(seed, math.prod(shape)).reshape(shape) if shape else seed
    elif jnp.issubdtype(dtype := jnp.dtype(abstract.dtype), jnp.complexfloating):
        value = (_draws(rng, shape) + 1j * _draws(rng, shape)).astype(dtype)
    elif jnp.issubdtype(dtype, jnp.floating):
        value = _draws(rng, shape).astype(dtype, copy=False)
    elif jnp.issubdtype(dtype, jnp.integer):
        value = (_draws(rng, shape) > 0).astype(dtype)  # 0 and 1: valid labels and indices
    else:
        value = np.zeros(shape, dtype)
    return jax.device_put(value, getattr(abstract, "sharding", None))


_POOL = 1 << 20


def _draws(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Standard normal float32 values of ``shape``. A big array repeats one pool of a
    million draws from a random start: a GPT's 124 million weights and their optimizer
    state fill in a fraction of a second instead of seconds, and timing needs no more."""
    size = math.prod(shape)
    if size <= _POOL:
        return rng.standard_normal(shape, dtype=np.float32)
    pool = rng.standard_normal(_POOL, dtype=np.float32)
    return np.resize(np.roll(pool, int(rng.integers(_POOL))), shape)


def concrete_arguments(
    signature: Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call's arguments with every abstract leaf replaced by random device data.

    With no arguments at all, the signature's own shapes and static values are used.
    """
    if not args and not kwargs:
        args = tuple(p.value for p in signature.parameters if not p.keyword)
        kwargs = {p.name: p.value for p in signature.parameters if p.keyword}
    rng = np.random.default_rng(0)

    def fill(leaf: Any) -> Any:
        if isinstance(leaf, jax.ShapeDtypeStruct):
            return random_like(leaf, rng)
        if isinstance(leaf, np.ndarray):
            return jax.device_put(leaf)  # once, so timings measure compute, not transfers
        return leaf

    return jax.tree_util.tree_map(fill, (args, kwargs))
