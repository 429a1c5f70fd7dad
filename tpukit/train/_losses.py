"""Loss and metric functions, and the per-batch objective the training loop compiles.

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

import inspect
import re
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import optax

from ._exceptions import TrainingInputError, TrainingTypeError

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


def _check_arity(fn: Callable, expected: str) -> None:
    """Raise if ``fn`` cannot be called with two positional arguments."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(None, None)
    except TypeError:
        raise TrainingTypeError(
            f"loss={getattr(fn, '__name__', fn)!r} has signature {sig}, but tpukit calls it as "
            f"{expected}. Write a function with exactly those two arguments."
        ) from None


class Objective:
    """What one batch contributes: a mean loss and mean metrics, from a model and a batch.

    ``kind`` is ``"pair"`` for ``(inputs, labels)`` batches and ``"dict"`` for
    dict batches.
    """

    def __init__(self, kind: str, loss: Callable | None, metrics: Sequence[Metric]):
        self.kind = kind
        self.default_loss = loss is None
        self.loss = cross_entropy if loss is None else loss
        if not callable(self.loss):
            raise TrainingTypeError(f"loss must be a function; got {type(loss).__name__}.")
        expected = "loss(outputs, labels)" if kind == "pair" else "loss(model, batch)"
        _check_arity(self.loss, expected)
        self.metrics = resolve_metrics(metrics)
        self.metric_names = tuple(n for n, _ in self.metrics)

    def key(self) -> tuple:
        """A hashable identity, used to reuse compiled functions."""
        return (self.kind, self.loss, self.metrics)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Objective) and other.key() == self.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __call__(self, model: Any, batch: Any) -> tuple[jax.Array, dict[str, jax.Array]]:
        """``(mean loss, {metric: batch mean})`` of ``model`` on ``batch``, in float32."""
        loss, terms = self.terms(model, batch)
        return loss, {name: jnp.mean(terms[name]) for name in self.metric_names}

    def terms(self, model: Any, batch: Any) -> tuple[jax.Array, dict[str, jax.Array]]:
        """``(mean loss, terms)``: the loss to differentiate, and each figure as the
        values whose mean is its batch mean (``"loss"`` first, then the metrics).

        Per-example values where the loss or metric gives them (the default
        cross-entropy, a loss that returns per-example values, the built-in accuracies),
        else the batch mean. ``fit``'s step adds the terms up elementwise, step after
        step, and takes their means once per call: an addition that fuses into the
        kernel computing them, where a mean per step costs reductions of its own
        (on a GPU, kernel launches that made ``fit`` 1.2x the hand-written step).

        Example::

            >>> objective = Objective("pair", None, ["accuracy"])
            >>> model = lambda x: x
            >>> loss, terms = objective.terms(model, (jnp.eye(3), jnp.array([0, 1, 0])))
            >>> terms["accuracy"].tolist()
            [1.0, 1.0, 0.0]
        """
        if self.kind == "pair":
            inputs, labels = batch
            outputs = model(inputs)
            if self.default_loss:
                values = _per_example_cross_entropy(outputs, labels)
            else:
                values = self.loss(outputs, labels)
        else:
            values = self.loss(model, batch)
            outputs = None
            if isinstance(values, tuple):
                values, outputs = values
            labels = batch.get("labels") if isinstance(batch, dict) else None
        values = jnp.asarray(values)
        terms = {"loss": values.astype(jnp.float32)}
        for name, fn in self.metrics:
            per_example = getattr(fn, "per_example", None)
            value = per_example(outputs, labels) if per_example else jnp.mean(fn(outputs, labels))
            terms[name] = jnp.asarray(value).astype(jnp.float32)
        return jnp.mean(values).astype(jnp.float32), terms


def pick_default_metrics(kind: str, loss: Callable | None, labels: Any) -> tuple[str, ...]:
    """``("accuracy",)`` when the labels look like integer classes, otherwise none."""
    if kind == "pair" and labels is not None and jnp.issubdtype(labels.dtype, jnp.integer):
        return ("accuracy",)
    if kind == "dict" and loss is None:
        return ("accuracy",)
    return ()
