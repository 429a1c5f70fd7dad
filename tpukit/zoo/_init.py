"""The zoo's initializers: JAX's distributions, drawn with NumPy when the key is known.

Flax's initializers are small JAX programs. Building a model outside ``jit`` runs them
eagerly, and each new parameter shape compiles its own random program: on XLA:CPU about
half a second of CPU each (threefry), so ``zoo.create("resnet50")`` spent 25 s compiling
57 of them before it returned. The initializers here draw the same distributions as
``jax.nn.initializers`` (normal; truncated normal on [-2, 2] with JAX's variance
correction; variance scaling by fan in or fan out; zeros; ones) on the host, from a NumPy
generator seeded by the JAX key, so building a model compiles no program per shape. The
weights still follow the seed, and are the same on every device.

Inside a transformation (``nnx.jit``, ``nnx.eval_shape``, a sharded initialisation) the key
is traced and cannot seed NumPy: JAX's own initializer runs there, as part of the
transformation's program.

    >>> import jax
    >>> init = variance_scaling(2.0, "fan_out", "normal")
    >>> w = init(jax.random.key(0), (3, 3, 16, 32))
    >>> w.shape, str(w.dtype), bool(abs(float(w.std()) - (2 / (3 * 3 * 32)) ** 0.5) < 0.02)
    ((3, 3, 16, 32), 'float32', True)
    >>> bool((w == init(jax.random.key(0), (3, 3, 16, 32))).all())   # the same key, the same draw
    True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

Initializer = Callable[..., jax.Array]

#: The standard deviation of a standard normal truncated to [-2, 2] (JAX divides by it).
_TRUNCATED_STDDEV = 0.87962566103423978


def _key_bits(key: jax.Array) -> np.ndarray | None:
    """``key``'s bits on the host, or None when the key is traced (inside ``nnx.jit``,
    ``nnx.eval_shape``, a sharded init), where JAX's own initializer must run."""
    try:
        return np.asarray(jax.random.key_data(key))
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def _generator(key: jax.Array) -> np.random.Generator | None:
    """A NumPy generator seeded by ``key``'s bits, or None when the key is traced."""
    bits = _key_bits(key)
    return None if bits is None else np.random.default_rng([int(b) for b in bits.ravel()])


def _drawn_on_host(draw: Callable, traced: Initializer) -> Initializer:
    """An initializer that calls ``draw(generator, shape)`` when the key is concrete and
    JAX's ``traced`` initializer otherwise."""

    def init(key: jax.Array, shape, dtype=jnp.float32) -> jax.Array:
        generator = _generator(key)
        if generator is None:
            return traced(key, shape, dtype)
        values = draw(generator, tuple(int(n) for n in shape))
        return jnp.asarray(np.asarray(values, dtype=np.float32).astype(np.dtype(dtype)))

    return init


def _truncated_standard_normal(generator: np.random.Generator, shape: tuple) -> np.ndarray:
    values = generator.standard_normal(shape, dtype=np.float32)
    outside = np.abs(values) > 2
    while outside.any():  # about 4.6% of draws each round
        values[outside] = generator.standard_normal(int(outside.sum()), dtype=np.float32)
        outside = np.abs(values) > 2
    return values


@functools.cache
def normal(stddev: float = 1e-2) -> Initializer:
    """``jax.nn.initializers.normal(stddev)``, drawn on the host. (One function per
    ``stddev``: NNX keeps a layer's initializer in its static structure, so two models
    built alike must get the same function to have equal graph definitions.)"""
    return _drawn_on_host(
        lambda g, shape: g.standard_normal(shape, dtype=np.float32) * stddev,
        jax.nn.initializers.normal(stddev),
    )


@functools.cache
def variance_scaling(
    scale: float, mode: str, distribution: str, in_axis: int = -2, out_axis: int = -1
) -> Initializer:
    """``jax.nn.initializers.variance_scaling`` for its ``"normal"`` and
    ``"truncated_normal"`` distributions, drawn on the host."""
    if distribution not in ("normal", "truncated_normal"):
        raise ValueError(
            f"distribution must be 'normal' or 'truncated_normal'; got {distribution!r}"
        )
    if mode not in ("fan_in", "fan_out", "fan_avg"):
        raise ValueError(f"mode must be 'fan_in', 'fan_out' or 'fan_avg'; got {mode!r}")

    def draw(generator: np.random.Generator, shape: tuple) -> np.ndarray:
        receptive = math.prod(shape) / (shape[in_axis] * shape[out_axis]) if shape else 1
        fan_in, fan_out = shape[in_axis] * receptive, shape[out_axis] * receptive
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
        stddev = math.sqrt(scale / fan)
        if distribution == "normal":
            return generator.standard_normal(shape, dtype=np.float32) * stddev
        return _truncated_standard_normal(generator, shape) * (stddev / _TRUNCATED_STDDEV)

    traced = jax.nn.initializers.variance_scaling(scale, mode, distribution, in_axis, out_axis)
    return _drawn_on_host(draw, traced)


def lecun_normal() -> Initializer:
    """Flax's default kernel initializer (``jax.nn.initializers.lecun_normal``), on the host."""
    return variance_scaling(1.0, "fan_in", "truncated_normal")


def _constant(value: float, traced: Initializer) -> Initializer:
    def init(key: jax.Array, shape, dtype=jnp.float32) -> jax.Array:
        if _key_bits(key) is None:
            return traced(key, shape, dtype)
        return jnp.asarray(np.full(tuple(int(n) for n in shape), value, dtype=np.dtype(dtype)))

    return init


zeros: Initializer = _constant(0.0, jax.nn.initializers.zeros)
ones: Initializer = _constant(1.0, jax.nn.initializers.ones)

#: Flax's defaults for ``nnx.Linear`` and ``nnx.Conv`` (LeCun normal kernel, zero bias).
DENSE = {"kernel_init": lecun_normal(), "bias_init": zeros}
#: Flax's defaults for ``nnx.BatchNorm`` and ``nnx.LayerNorm`` (scale one, bias zero).
NORM = {"scale_init": ones, "bias_init": zeros}
