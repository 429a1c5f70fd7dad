"""Loss and metric functions; the per-batch objective built from them is in ``_objective``.

A *loss* for ``(inputs, labels)`` data is ``loss(outputs, labels)`` returning a
scalar (or per-example values, which are averaged). For dict data it is
``loss(model, batch)`` returning a scalar or ``(scalar, outputs)``; returning the
outputs lets tpukit compute metrics against ``batch["labels"]``.

A *metric* is a name (``"accuracy"``, ``"top5_accuracy"``) or a function
``metric(outputs, labels)`` returning the batch mean.

Example::

    >>> import jax.numpy as jnp
    >>> logits = jnp.array([[2.0, 0.0, 1.0], [0.0, 3.0, 1.0]])
    >>> float(accuracy(logits, jnp.array([0, 2])))
    0.5
    >>> float(top_k_accuracy(logits, jnp.array([0, 2]), k=2))
    1.0
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import optax

from ._exceptions import TrainingInputError

Metric = str | Callable[[jax.Array, jax.Array], jax.Array]


def cross_entropy(outputs: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean softmax cross-entropy of logits ``outputs [..., classes]`` and integer ``labels [...]``."""
    return optax.softmax_cross_entropy_with_integer_labels(outputs, labels).mean()


def _per_example_cross_entropy(outputs: jax.Array, labels: jax.Array) -> jax.Array:
    """``optax.softmax_cross_entropy_with_integer_labels``, with the label's logit picked by
    a one-hot product instead of a gather: the pick then fuses with the softmax's own
    reductions, and its gradient is ``softmax - one_hot``, with no scatter. Equal to
    optax's to rounding (one term of the product is the logit, the others exact zeros)."""
    one_hot = jax.nn.one_hot(labels, outputs.shape[-1], dtype=outputs.dtype)
    label_logits = jnp.sum(outputs * one_hot, axis=-1)
    return jax.nn.logsumexp(outputs, axis=-1) - label_logits


def accuracy(outputs: jax.Array, labels: jax.Array) -> jax.Array:
    """Fraction of examples whose highest logit is the label."""
    return _correct(outputs, labels).mean()


def top_k_accuracy(outputs: jax.Array, labels: jax.Array, k: int = 5) -> jax.Array:
    """Fraction of examples whose label is among the ``k`` highest logits."""
    return _in_top_k(outputs, labels, k).mean()


def _correct(outputs: jax.Array, labels: jax.Array) -> jax.Array:
    return (jnp.argmax(outputs, axis=-1) == labels).astype(jnp.float32)


def _in_top_k(outputs: jax.Array, labels: jax.Array, k: int) -> jax.Array:
    label_logit = jnp.take_along_axis(outputs, labels[..., None].astype(jnp.int32), axis=-1)
    return ((outputs > label_logit).sum(axis=-1) < k).astype(jnp.float32)


class _Accuracy:
    """The ``"accuracy"`` metric, with its per-example values (see :meth:`Objective.terms`)."""

    __name__ = "accuracy"

    def __call__(self, outputs: jax.Array, labels: jax.Array) -> jax.Array:
        return accuracy(outputs, labels)

    @staticmethod
    def per_example(outputs: jax.Array, labels: jax.Array) -> jax.Array:
        return _correct(outputs, labels)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Accuracy)

    def __hash__(self) -> int:
        return hash("accuracy")


class _TopK:
    """``top_k_accuracy`` with a fixed ``k``; equal for equal ``k``, so compiled code is reused."""

    def __init__(self, k: int):
        self.k = k
        self.__name__ = f"top{k}_accuracy"

    def __call__(self, outputs: jax.Array, labels: jax.Array) -> jax.Array:
        return top_k_accuracy(outputs, labels, self.k)

    def per_example(self, outputs: jax.Array, labels: jax.Array) -> jax.Array:
        return _in_top_k(outputs, labels, self.k)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _TopK) and other.k == self.k

    def __hash__(self) -> int:
        return hash(("top_k", self.k))


_TOP_K = re.compile(r"^top_?(\d+)(_accuracy)?$")


def resolve_metrics(metrics: Sequence[Metric]) -> tuple[tuple[str, Callable], ...]:
    """Turn metric names and functions into ``(name, fn)`` pairs.

    Example::

        >>> [name for name, _ in resolve_metrics(["accuracy", "top5"])]
        ['accuracy', 'top5_accuracy']
    """
    if isinstance(metrics, str) or callable(metrics):
        metrics = [metrics]
    out = []
    for m in metrics:
        if m == "accuracy" or m is accuracy:
            out.append(("accuracy", _Accuracy()))
        elif callable(m):
            out.append((getattr(m, "__name__", "metric"), m))
        elif isinstance(m, str) and (match := _TOP_K.match(m)):
            k = int(match.group(1))
            out.append((f"top{k}_accuracy", _TopK(k)))
        else:
            raise TrainingInputError(
                f"Unknown metric {m!r}. Expected 'accuracy', 'top5_accuracy' (any k), or a "
                "function metric(outputs, labels) -> batch mean."
            )
    names = [n for n, _ in out]
    if len(set(names)) != len(names) or "loss" in names:
        raise TrainingInputError(f"Metric names must be unique and not 'loss'; got {names}.")
    return tuple(out)
