"""``evaluate``: loss and metrics of a model over a whole dataset, in one compiled call.

Example::

    >>> evaluate(model, (x_test, y_test), batch_size=1000)     # doctest: +SKIP
    {'loss': 0.081, 'accuracy': 0.9755}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
from flax import nnx
from jax.sharding import Mesh, PartitionSpec

from . import _steps
from ._data import ResidentData, check_batch_size, is_array_dataset
from ._exceptions import TrainingTypeError
from ._losses import Metric
from ._memory_fit import evaluate_within_memory
from ._mesh import Plan, resolve_plan
from ._validate import check_model, check_objective, objective_for


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
    counts once.

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
    """
    check_model(model)
    if not is_array_dataset(data):
        raise TrainingTypeError(
            "evaluate needs in-memory arrays: an (inputs, labels) tuple or a dict "
            f"of arrays; got {type(data).__name__}."
        )
    plan = resolve_plan(sharding, mesh=mesh, shard=shard)
    source = ResidentData(data, plan, "data")
    if batch_size is None:
        batch_size = max(plan.batch_shards, 1024 - 1024 % plan.batch_shards)
    batch_size = check_batch_size(batch_size, None, plan, "data")
    batch_size = min(batch_size, source.n)
    objective = objective_for(source, loss, metrics)
    graphdef, params, rest = _steps.split_model(model)
    check_objective(objective, graphdef, params, rest, source, batch_size, "data")
    params, rest, _ = plan.put_state(params, rest)
    figures = evaluate_within_memory(
        lambda size: _steps.evaluation(graphdef, objective, plan, size, source.n),
        batch_size, plan, params, rest, source.arrays,
    )  # fmt: skip
    return {k: float(v) for k, v in jax.device_get(figures).items()}
