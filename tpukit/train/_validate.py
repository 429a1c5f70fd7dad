"""Checks run before training starts, so that bad input fails fast and changes nothing.

Everything here works on abstract shapes (:func:`jax.eval_shape`) or small host
reads; no parameter is touched until every check has passed.

Example::

    >>> check_optimizer("adam")
    Traceback (most recent call last):
    ...
    tpukit.train._exceptions.TrainingTypeError: optimizer should be an optax.GradientTransformation such as optax.adam(1e-3); got str.
"""

from __future__ import annotations

from typing import Any

import jax
from flax import nnx

from ._exceptions import TrainingInputError, TrainingTypeError


def check_model(model: Any) -> None:
    """The model must be an NNX module with trainable ``nnx.Param`` state."""
    check_module(model)
    check_params(model, nnx.state(model, nnx.Param))


def check_module(model: Any) -> None:
    """The model must be an NNX module (its parameters are checked once split:
    :func:`check_params`, so a ``fit`` walks the model's graph once)."""
    if not isinstance(model, nnx.Module):
        kind = f"{type(model).__module__}.{type(model).__name__}"
        hint = ""
        if "linen" in kind:
            hint = " Linen modules are stateless; port the model to flax.nnx (see nnx.bridge)."
        elif "torch" in kind:
            hint = " PyTorch models cannot be compiled by XLA here; rewrite the model in flax.nnx."
        raise TrainingTypeError(
            f"model should be a Flax NNX module (flax.nnx.Module); got {kind}.{hint}"
        )


def check_params(model: Any, params: Any) -> None:
    """The model's ``nnx.Param`` state ``params`` must hold something to train."""
    if not jax.tree.leaves(params):
        raise TrainingInputError(
            f"model {type(model).__name__} has no nnx.Param to train. Create layers such as "
            "nnx.Linear(..., rngs=rngs) as attributes in __init__."
        )


def check_optimizer(optimizer: Any) -> None:
    """The optimizer must be an optax ``GradientTransformation`` (not ``nnx.Optimizer``)."""
    if isinstance(optimizer, nnx.Optimizer):
        raise TrainingTypeError(
            "optimizer should be an optax.GradientTransformation such as optax.adam(1e-3); got "
            "an nnx.Optimizer. Pass the optax transformation itself: fit(model, optax.adam(1e-3), ...)."
        )
    if not (
        callable(getattr(optimizer, "init", None)) and callable(getattr(optimizer, "update", None))
    ):
        raise TrainingTypeError(
            "optimizer should be an optax.GradientTransformation such as optax.adam(1e-3); "
            f"got {type(optimizer).__name__}."
        )
