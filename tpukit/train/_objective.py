"""The objective, in one place: loss and metrics per batch, and every check of them.

``fit``, ``evaluate`` and ``compile_step`` train or evaluate on what an
:class:`Objective` says one batch contributes: a mean loss to differentiate and the
metrics' batch means (the functions themselves are in ``_losses``). Before anything
runs, :func:`checked_objective` makes the objective for the data (:func:`objective_for`,
default metrics filled in) and checks it on one abstract batch (:func:`check_objective`): the model's
output on the inputs, the loss on those outputs and the labels, each metric, and for
the default cross-entropy the labels' type, shape and range against the model's
classes. The traces are kept per model structure and shapes; the labels' range is
read every call (a JAX array's once).

Example::

    >>> import jax.numpy as jnp
    >>> objective = objective_for("pair", jnp.array([0, 1]), None, None)
    >>> objective.metric_names, objective.default_loss
    (('accuracy',), True)
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ._exceptions import TrainingInputError, TrainingTypeError
from ._losses import Metric, _per_example_cross_entropy, cross_entropy, resolve_metrics
from ._memo import abstract_key, graph_key, remembered


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


def objective_for(kind: str, labels: Any, loss: Any, metrics: Any) -> Objective:
    """The :class:`Objective` for data of ``kind`` (``"pair"`` or ``"dict"``) with these
    ``labels`` (or ``None``), with default metrics filled in."""
    if kind == "dict" and loss is None:
        raise TrainingInputError(
            "train_data is a dict of arrays, so tpukit cannot tell inputs from labels. Either "
            "name them {'inputs': x, 'labels': y}, or pass loss=fn(model, batch) returning the "
            "loss (or (loss, outputs) to get metrics against batch['labels'])."
        )
    if metrics is None:
        metrics = pick_default_metrics(kind, loss, labels)
    return Objective(kind, loss, metrics)


def checked_objective(
    source: Any,
    batch: Any,
    graphdef: Any,
    params: Any,
    rest: Any,
    name: str,
    *,
    objective: Objective | None = None,
    loss: Any = None,
    metrics: Any = None,
) -> Objective:
    """The objective for ``source``'s data (``_data.ResidentData`` or ``StreamedData``),
    checked on its abstract ``batch``: ``objective`` when given (the run's, for its
    ``eval_data``), else one made from ``loss`` and ``metrics`` (:func:`objective_for`).
    The one call a set-up makes about the objective, whatever data it has."""
    if objective is None:
        objective = objective_for(source.kind, source.labels, loss, metrics)
    check_objective(objective, graphdef, params, rest, batch, source.labels, name)
    return objective


def _merged(graphdef: Any, params: Any, rest: Any) -> nnx.Module:
    model = nnx.merge(graphdef, params, rest)
    model.train()
    return model


def _output_shape(graphdef: Any, params: Any, rest: Any, x: Any) -> Any:
    """The model's output shape on inputs shaped like ``x``, traced once per model
    structure and shapes: a second ``fit`` on the same model skips the trace."""
    key = (graphdef, *(abstract_key(tree) for tree in (params, rest, x)))
    return remembered(
        _OUTPUT_SHAPES,
        key,
        lambda: jax.eval_shape(lambda p, r, x: _merged(graphdef, p, r)(x), params, rest, x),
    )


_OUTPUT_SHAPES: dict[tuple, Any] = {}


def _shape(x: Any) -> str:
    return f"{tuple(x.shape)} {x.dtype}"


def check_objective(
    objective: Objective,
    graphdef: Any,
    params: Any,
    rest: Any,
    batch: Any,
    labels: Any,
    name: str,
) -> None:
    """Trace the model and loss on one abstract ``batch`` (its shapes); turn failures into
    clear errors. ``labels`` are the data's own, for the default loss's range check.

    The traces depend only on the objective, the model's structure and the shapes, so a
    later ``fit`` with the same ones skips them; the labels' range is checked each time."""
    key = (objective.key(), graph_key(graphdef), abstract_key((params, rest, batch)), name)
    classes = remembered(
        _CHECKED, key, lambda: _check_shapes(objective, graphdef, params, rest, batch, name)
    )
    if classes is not None:
        _check_label_range(classes, labels, name)


_CHECKED: dict[tuple, int | None] = {}


def _check_shapes(
    objective: Objective, graphdef: Any, params: Any, rest: Any, batch: Any, name: str
) -> int | None:
    """:func:`check_objective`'s traces; the number of classes whose label range the
    default loss needs checked, else ``None``."""
    classes = None
    batch_size = jax.tree.leaves(batch)[0].shape[0]
    if objective.kind == "pair":
        x, y = batch
        try:
            out = _output_shape(graphdef, params, rest, x)
        except Exception as e:
            raise TrainingInputError(
                f"The model failed on a batch of {name} inputs of shape {_shape(x)}: "
                f"{type(e).__name__}: {e}\nCheck that the model's input size matches the data."
            ) from e
        if not hasattr(out, "shape"):
            raise TrainingTypeError(
                f"The model returned {type(out).__name__}; with (inputs, labels) data it should "
                "return one array of outputs. For richer outputs use dict data and "
                "loss=fn(model, batch)."
            )
        if objective.default_loss or objective.loss is cross_entropy:
            _check_class_labels(out, y, name)
            classes = out.shape[-1]
        try:
            value = jax.eval_shape(objective.loss, out, y)
        except Exception as e:
            raise TrainingInputError(
                f"loss={getattr(objective.loss, '__name__', objective.loss)} failed when called "
                f"as loss(outputs, labels) with outputs {_shape(out)} and labels {_shape(y)}: "
                f"{type(e).__name__}: {e}"
            ) from e
        _check_loss_value(value, batch_size, "loss(outputs, labels)")
        metric_out = out
    else:
        try:
            result = jax.eval_shape(
                lambda p, r, b: objective.loss(_merged(graphdef, p, r), b), params, rest, batch
            )
        except Exception as e:
            shapes = {k: _shape(v) for k, v in batch.items()}
            raise TrainingInputError(
                f"loss={getattr(objective.loss, '__name__', objective.loss)} failed when called "
                f"as loss(model, batch) with batch {shapes}: {type(e).__name__}: {e}"
            ) from e
        value, metric_out = result if isinstance(result, tuple) else (result, None)
        _check_loss_value(value, batch_size, "loss(model, batch)")
        y = batch.get("labels")
        if objective.metrics and (metric_out is None or y is None):
            raise TrainingInputError(
                f"metrics={list(objective.metric_names)} need model outputs and batch['labels'], "
                "but with dict data the loss returned only a scalar or the batch has no 'labels'. "
                "Return (loss, outputs) from the loss and include 'labels', or pass metrics=()."
            )
    for metric_name, fn in objective.metrics:
        try:
            jax.eval_shape(fn, metric_out, y)
        except Exception as e:
            raise TrainingInputError(
                f"metric {metric_name!r} failed on outputs {_shape(metric_out)} and labels "
                f"{_shape(y)}: {type(e).__name__}: {e}"
            ) from e
    return classes


def _check_loss_value(value: Any, batch_size: int, call: str) -> None:
    shape = getattr(value, "shape", None)
    if shape is None or shape not in ((), (batch_size,)):
        raise TrainingInputError(
            f"{call} should return a scalar (or one value per example, shape ({batch_size},)); "
            f"it returned {type(value).__name__} with shape {shape}."
        )


def _label_range(labels: Any) -> tuple[int, int]:
    """``(min, max)`` of the labels. Host labels stay on the host; a JAX array's range is
    read once (the array cannot change), so a second ``fit`` on it pays nothing."""
    if not isinstance(labels, jax.Array):
        return int(np.min(labels)), int(np.max(labels))
    key = id(labels)
    kept = _LABEL_RANGES.get(key)
    if kept is not None and kept[0]() is labels:
        return kept[1]
    lo, hi = (int(v) for v in jax.device_get((jnp.min(labels), jnp.max(labels))))
    try:
        ref = weakref.ref(labels, lambda _, key=key: _LABEL_RANGES.pop(key, None))
    except TypeError:  # an array type without weak references: read every time
        return lo, hi
    _LABEL_RANGES[key] = (ref, (lo, hi))
    return lo, hi


_LABEL_RANGES: dict[int, tuple[weakref.ref, tuple[int, int]]] = {}


def _check_class_labels(out: Any, y: Any, name: str) -> None:
    """The default loss wants integer class labels of shape ``outputs.shape[:-1]``."""
    expected = tuple(out.shape[:-1])
    if not jnp.issubdtype(y.dtype, jnp.integer):
        hint = (
            " They look one-hot: pass labels.argmax(-1)."
            if tuple(y.shape) == tuple(out.shape)
            else ""
        )
        raise TrainingTypeError(
            f"The default loss (softmax cross-entropy) needs integer class labels, but the "
            f"{name} labels are {y.dtype}.{hint} Or pass loss=... for other targets."
        )
    if tuple(y.shape) != expected:
        raise TrainingInputError(
            f"The default loss needs labels of shape {expected} for model outputs of shape "
            f"{tuple(out.shape)}; the {name} labels have shape {tuple(y.shape)} per batch."
            + (
                " Flatten them with labels.reshape(-1)."
                if int(np.prod(y.shape)) == int(np.prod(expected))
                else ""
            )
        )


def _check_label_range(classes: int, labels: Any, name: str) -> None:
    """The data's labels must name one of the model's ``classes`` outputs."""
    lo, hi = _label_range(labels)
    if lo < 0 or hi >= classes:
        raise TrainingInputError(
            f"The {name} labels range over [{lo}, {hi}], but the model has {classes} outputs, "
            f"so labels must lie in [0, {classes - 1}]. Widen the model's last layer or fix the labels."
        )
