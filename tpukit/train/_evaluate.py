"""``evaluate``: loss and metrics of a model over a whole dataset, in one compiled call.

It is the evaluation ``fit`` runs on ``eval_data`` after each epoch: both are set up
by ``_setup.evaluation``.

Example::

    >>> from flax import nnx
    >>> model = nnx.Linear(8, 4, rngs=nnx.Rngs(0))
    >>> x = np.ones((10, 8), np.float32)
    >>> figures = evaluate(model, (x, np.zeros(10, np.int32)), batch_size=8)
    >>> sorted(figures), 0 <= figures["accuracy"] <= 1
    (['accuracy', 'loss'], True)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flax import nnx
from jax.sharding import Mesh, PartitionSpec

from . import _steps
from ._guard import NonFiniteLossWarning
from ._losses import Metric
from ._memory_fit import evaluate_within_memory
from ._mesh import Plan
from ._options import TrainerOptions
from ._setup import evaluation
from ._state import TrainingState
from ._validate import check_model


def evaluate(
    model: nnx.Module,
    data: Any,
    *,
    batch_size: int | None = None,
    loss: Callable | None = None,
    metrics: Sequence[Metric] | None = None,
    mesh: Mesh | str | None = None,
    shard: Mapping[str, PartitionSpec | str] | None = None,
    sharding: str | Plan | None = None,
) -> dict[str, float]:
    """Mean loss and metrics of ``model`` over every example of ``data``.

    The model runs in eval mode (BatchNorm uses its running averages, Dropout is
    off) and is not changed. The data is put on the devices, split over all of
    them; full batches run in a loop inside one compiled call, and the last
    ``len(data) % batch_size`` examples run as one smaller batch, so every example
    counts once. As with :func:`fit`, the placed copy is kept beside the model: a
    later ``evaluate`` given the same array objects uses it without sending them
    again, after checking (while the device evaluates) that no array was changed in
    place; one that was is placed again and evaluated again. A slice (``x[:256]``)
    is a new object each time, so it is placed each call.
    ``TrainingState.of(model).release_data()`` frees the copy.

    Args:
        model: an ``nnx.Module``.
        data: an ``(inputs, labels)`` tuple or a dict of arrays, as for :func:`fit`.
        batch_size: examples per batch, a multiple of the device count; default
            1024 (rounded to the devices), capped at the dataset size.
        loss, metrics: as for :func:`fit`; default softmax cross-entropy and, for
            integer labels, accuracy.
        mesh, shard, sharding: as for :func:`fit`: ``mesh="data=8"`` with
            ``shard={regex: spec}``, or ``sharding="data"``, ``"fsdp"`` or a plan object.

    Returns:
        ``{"loss": float, "accuracy": float, ...}``.

    A loss that comes out NaN or infinite is returned as it is, with a
    :class:`tpukit.NonFiniteLossWarning` that says where the evaluation's first
    non-finite value was made: its ``.origin`` is the record :func:`tpukit.find_nan`
    gives (the operation, source line, layer and its inputs' ranges, or the data's rows
    when the data held NaN). It is found by running the evaluation once more, operation
    by operation, only then: a finite evaluation pays nothing for it.

    Example::

        >>> import warnings
        >>> model = nnx.Linear(8, 4, rngs=nnx.Rngs(0))
        >>> x = np.ones((10, 8), np.float32)
        >>> x[3, 0] = np.nan
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     figures = evaluate(model, (x, np.zeros(10, np.int32)))
        >>> figures["loss"], caught[0].message.origin.rows
        (nan, (3,))
    """
    options = TrainerOptions.pick(locals())
    check_model(model)
    graphdef, params, rest = _steps.split_model(model)
    kept = TrainingState.of(model).kept
    for _ in range(2):  # a second time only when the kept data changed in place
        evaluator = evaluation(
            options.plan,
            data,
            batch_size,
            graphdef,
            params,
            rest,
            loss=options.loss,
            metrics=options.metrics,
            name="data",
            prefix="",
            kept=kept,
        )
        placed_params, placed_rest, _ = options.plan.put_state(params, rest)
        figures = evaluate_within_memory(
            evaluator.program,
            evaluator.batch_size,
            options.plan,
            placed_params,
            placed_rest,
            evaluator.source.arrays,
        )
        placed = evaluator.source.kept  # checked on the host while the device evaluates
        if placed is None or placed.unchanged():
            break
        kept.forget([placed.name])
    params, rest = placed_params, placed_rest
    result = evaluator.read(figures)
    if not math.isfinite(result["loss"]):
        origin = evaluator.origin(params, rest)
        found = (
            f"the first non-finite value: {origin.summary()}"
            if origin is not None
            else "running it again operation by operation found no non-finite value"
        )
        warnings.warn(
            NonFiniteLossWarning(
                f"evaluate: the loss over data is {result['loss']}; {found}. "
                "The warning's .origin holds the record (tpukit.find_nan's).",
                result,
                origin,
            ),
            stacklevel=2,
        )
    return result
