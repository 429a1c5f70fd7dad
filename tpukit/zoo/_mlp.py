"""The multilayer perceptron of the Colab MNIST walk-through (784-128-64-10).

>>> import jax.numpy as jnp
>>> from tpukit import zoo
>>> model = zoo.create("mlp", widths=(784, 256, 10), activation="gelu")
>>> model(jnp.ones((2, 784))).shape
(2, 10)
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from tpukit._compat import module_list
from tpukit._errors import ArgumentError
from tpukit.zoo import _flops
from tpukit.zoo._base import ZooModel, as_activation
from tpukit.zoo._init import DENSE


class MLP(ZooModel):
    """Dense layers with an activation between them; returns logits.

    Args:
      widths: layer widths from input to output, e.g. ``(784, 128, 64, 10)``.
      activation: ``"relu"`` (default), ``"gelu"``, ``"tanh"``, ``"sigmoid"``, ``"silu"``.
      dtype: compute dtype; parameters stay in ``param_dtype``.
      rngs: where the initial weights come from.

    Inputs of any trailing shape are flattened, so ``(batch, 28, 28, 1)`` MNIST
    images work as well as ``(batch, 784)`` vectors. ``model.probabilities(x)``
    gives the softmax.
    """

    reference = "MNIST MLP of the JAX/Colab walk-through (784-128-64-10, ReLU)"

    def __init__(
        self,
        widths: Sequence[int] = (784, 128, 64, 10),
        *,
        activation: str = "relu",
        dtype=jnp.float32,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        widths = tuple(int(w) for w in widths)
        if len(widths) < 2 or min(widths) < 1:
            raise ArgumentError(
                f"widths must list at least an input and an output width, all positive; "
                f"got {widths}. Example: widths=(784, 128, 64, 10)."
            )
        self.activation = activation
        self._act = as_activation(activation)
        self.layers = module_list(
            [
                nnx.Linear(a, b, dtype=dtype, param_dtype=param_dtype, rngs=rngs, **DENSE)
                for a, b in zip(widths[:-1], widths[1:])
            ]
        )
        self.input_shape = (widths[0],)
        self.flops_per_example = sum(_flops.dense(a, b) for a, b in zip(widths[:-1], widths[1:]))

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x.reshape(x.shape[0], -1)
        for layer in self.layers[:-1]:
            x = self._act(layer(x))
        return self.layers[-1](x)
