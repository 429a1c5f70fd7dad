"""What every zoo model shares: its input shape, its FLOPs, its dtypes.

A zoo model is an ordinary Flax NNX module. On top of that it carries three
plain attributes so that tools (the benchmark, ``zoo.list_models()``, MFU estimates)
need not know which model they hold:

* ``input_shape``: the shape of one example, without the batch axis
  (``(224, 224, 3)`` for an ImageNet VGG: images are NHWC);
* ``flops_per_example``: matmul and convolution FLOPs of one forward pass;
* ``reference``: where the architecture comes from.

    >>> from tpukit import zoo
    >>> model = zoo.create("mlp")
    >>> model.input_shape, model.flops_per_example
    ((784,), 218368)
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from tpukit._errors import ArgumentError

_DTYPES = {
    "float32": jnp.float32,
    "f32": jnp.float32,
    "fp32": jnp.float32,
    "bfloat16": jnp.bfloat16,
    "bf16": jnp.bfloat16,
}


def as_dtype(value: Any, what: str) -> Any:
    """Turn ``"bf16"``, ``"float32"``, ``jnp.bfloat16`` ... into a JAX dtype, or explain."""
    if isinstance(value, str) and value.lower() in _DTYPES:
        return _DTYPES[value.lower()]
    try:
        dtype = jnp.dtype(value)
    except TypeError:
        dtype = None
    if dtype == jnp.float32:
        return jnp.float32
    if dtype == jnp.bfloat16:
        return jnp.bfloat16
    raise ArgumentError(
        f"{what} must be float32 or bfloat16; got {value!r}. "
        f"Pass e.g. {what}='bfloat16' or {what}=jnp.bfloat16."
    )


ACTIVATIONS = {
    "relu": jax.nn.relu,
    "gelu": jax.nn.gelu,
    "tanh": jnp.tanh,
    "sigmoid": jax.nn.sigmoid,
    "silu": jax.nn.silu,
}


def as_activation(name: str) -> Any:
    """Look up an activation function by name, or explain which names exist."""
    if name not in ACTIVATIONS:
        raise ArgumentError(f"activation must be one of {sorted(ACTIVATIONS)}; got {name!r}.")
    return ACTIVATIONS[name]


class ZooModel(nnx.Module):
    """Base class of the zoo's models: metadata plus softmax probabilities."""

    input_shape: tuple[int, ...]
    flops_per_example: int
    reference: str

    def probabilities(self, x: jax.Array) -> jax.Array:
        """Softmax over the last axis of the model's logits, computed in float32."""
        return jax.nn.softmax(self(x).astype(jnp.float32), axis=-1)
