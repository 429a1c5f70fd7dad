"""Where arrays live during training: the one module that decides shardings.

Every placement decision of :func:`tpukit.fit` and :func:`tpukit.evaluate` is
made here, so that other layouts (fully sharded parameters, a ``(Mesh, rules)``
pair, several hosts) can be added as new plans without touching the loop.

Today there is one plan, :class:`DataParallel`: a 1-D :class:`~jax.sharding.Mesh`
over all local devices with one axis, ``"data"``. Batches are split along that
axis; parameters and optimizer state are replicated.

Example::

    >>> plan = resolve_plan("data")
    >>> plan.n_devices >= 1
    True
    >>> plan.batch_sharding(leading_axes=1).spec   # [steps, batch, ...]
    PartitionSpec(None, 'data')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec


class DataParallel:
    """Split the batch over ``devices`` (default: all local devices); replicate the rest.

    Args:
        devices: the devices to use; ``None`` means ``jax.local_devices()``.
        axis: the name of the mesh axis the batch is split along.
    """

    kind = "data"

    def __init__(self, devices: Sequence[jax.Device] | None = None, axis: str = "data"):
        devices = list(jax.local_devices() if devices is None else devices)
        self.axis = axis
        self.mesh = Mesh(np.array(devices), (axis,))

    @property
    def n_devices(self) -> int:
        """How many devices share each batch."""
        return self.mesh.size

    def replicated(self) -> NamedSharding:
        """A full copy on every device (parameters, optimizer state, scalars)."""
        return NamedSharding(self.mesh, PartitionSpec())

    def batch_sharding(self, leading_axes: int = 0) -> NamedSharding:
        """Split the batch axis, which comes after ``leading_axes`` unsplit axes."""
        return NamedSharding(self.mesh, PartitionSpec(*([None] * leading_axes), self.axis))

    def state_shardings(self, state: Any) -> Any:
        """Shardings for a model/optimizer state pytree: all replicated in this plan."""
        rep = self.replicated()
        return jax.tree.map(lambda _: rep, state)

    def put_state(self, state: Any) -> Any:
        """Place a model/optimizer state pytree on the mesh."""
        return jax.device_put(state, self.state_shardings(state))

    def put_dataset(self, arrays: Any) -> Any:
        """Place whole in-memory arrays, split along their first (example) axis.

        The first axis must be a multiple of :attr:`n_devices`; the caller pads.
        """
        return jax.device_put(arrays, self.batch_sharding(0))

    def put_batches(self, arrays: Any) -> Any:
        """Place stacked host batches ``[steps, batch, ...]``, split along the batch axis."""
        return jax.device_put(arrays, self.batch_sharding(1))

    def constrain_batch(self, arrays: Any, leading_axes: int = 0) -> Any:
        """Inside a compiled function: ask for the batch axis to be split."""
        sharding = self.batch_sharding(leading_axes)
        return jax.tree.map(lambda a: jax.lax.with_sharding_constraint(a, sharding), arrays)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DataParallel) and (other.mesh, other.axis) == (
            self.mesh,
            self.axis,
        )

    def __hash__(self) -> int:
        return hash((self.kind, self.mesh, self.axis))

    def __repr__(self) -> str:
        return f"DataParallel(devices={self.n_devices}, axis={self.axis!r})"


def resolve_plan(sharding: str | DataParallel = "data") -> DataParallel:
    """Turn the ``sharding=`` argument of :func:`tpukit.fit` into a placement plan.

    Example::

        >>> resolve_plan("data").kind
        'data'
    """
    if isinstance(sharding, DataParallel):
        return sharding
    if sharding == "data":
        return DataParallel()
    raise ValueError(
        f"sharding={sharding!r} is not supported yet; expected 'data' (split each batch "
        "over all local devices, parameters replicated). Pass sharding='data'."
    )
