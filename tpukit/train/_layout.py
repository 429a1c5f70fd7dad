"""Small tools the plans of ``_mesh`` build on: placing, and the summary.

(Arrays are named by ``tpukit._pytree.leaf_paths``, the names that
:class:`~tpukit.train.MeshRules` patterns and checkpoints use.)

- :func:`place` puts one array on a sharding, also when the sharding spans
  devices of other processes (each process passes the same global value and
  keeps its own pieces); :func:`place_all` puts every array of a pytree on one
  sharding (a data set along its example axis, a chunk of batches along its batch
  axis: ``Plan.batch_sharding``).
- :class:`ShardingSummary` is the line ``fit`` prints when it starts.

Example::

    >>> import numpy as np
    >>> from jax.sharding import SingleDeviceSharding
    >>> placed = place(np.zeros(2, np.float32), SingleDeviceSharding(jax.devices()[0]))
    >>> placed.shape, placed.committed
    ((2,), True)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import jax
import numpy as np
from jax.sharding import Sharding

from tpukit._pytree import is_key
from tpukit.display import format_bytes, format_count


def place(x: Any, sharding: Sharding) -> jax.Array:
    """Put ``x`` on ``sharding``; with several processes, from each process's copy of ``x``.

    Within one process this is :func:`jax.device_put`. When ``sharding`` spans
    devices of other processes, every process must pass the same value: each
    builds its own shards from it (:func:`jax.make_array_from_callback`). An array
    already placed there (a later ``fit``'s state) is returned as it is.
    """
    if isinstance(x, jax.Array) and x.committed and x.sharding == sharding:
        return x
    if sharding.is_fully_addressable or (isinstance(x, jax.Array) and not x.is_fully_addressable):
        return jax.device_put(x, sharding)
    if is_key(x):
        data = place(jax.random.key_data(x), sharding)
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
    host = np.asarray(x)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def place_all(tree: Any, sharding: Sharding) -> Any:
    """Every array of ``tree`` on ``sharding`` (each by :func:`place`).

    For in-memory data split along an axis: every process passes the same (global)
    arrays and keeps only its own devices' rows; the split axis must be a multiple of
    the sharding's pieces (the caller pads)."""
    return jax.tree.map(lambda a: place(a, sharding), tree)


def _bytes(x: Any, sharding: Sharding | None = None) -> int:
    if is_key(x):
        x = jax.eval_shape(jax.random.key_data, x)
    shape = tuple(np.shape(x))
    if sharding is not None:
        shape = sharding.shard_shape(shape)
    return math.prod(shape) * np.dtype(x.dtype).itemsize


@dataclass(frozen=True)
class ShardingSummary:
    """How one ``fit`` call lays out its work (``History.sharding``).

    Attributes:
        strategy: ``"data"``, ``"fsdp"`` or ``"rules"``.
        mesh: mesh axis names and sizes, e.g. ``{"data": 8}``.
        devices, processes: devices of the mesh, and how many processes run them.
        batch_size, per_device_batch: the global batch, and the examples each
            device computes on per step.
        param_bytes, param_bytes_per_device: the parameters, whole and on each
            device; the same for ``optimizer_bytes``.
        sharded_params: how many parameter arrays are split (of ``param_arrays``).
    """

    strategy: str
    mesh: dict[str, int]
    devices: int
    processes: int
    batch_size: int
    per_device_batch: int
    param_bytes: int
    param_bytes_per_device: int
    optimizer_bytes: int
    optimizer_bytes_per_device: int
    sharded_params: int
    param_arrays: int

    @classmethod
    def build(
        cls, plan: Any, params: Any, p_sh: Any, opt_state: Any, o_sh: Any, batch_size: int
    ) -> ShardingSummary:
        p_leaves, s_leaves = jax.tree.leaves(params), jax.tree.leaves(p_sh)
        o_leaves, os_leaves = jax.tree.leaves(opt_state), jax.tree.leaves(o_sh)
        return cls(
            strategy=plan.kind,
            mesh={str(k): int(v) for k, v in plan.mesh.shape.items()},
            devices=plan.n_devices,
            processes=len({d.process_index for d in plan.mesh.devices.flat}),
            batch_size=int(batch_size),
            per_device_batch=int(batch_size) // plan.batch_shards,
            param_bytes=sum(_bytes(x) for x in p_leaves),
            param_bytes_per_device=sum(_bytes(x, s) for x, s in zip(p_leaves, s_leaves)),
            optimizer_bytes=sum(_bytes(x) for x in o_leaves),
            optimizer_bytes_per_device=sum(_bytes(x, s) for x, s in zip(o_leaves, os_leaves)),
            sharded_params=sum(not s.is_fully_replicated for s in s_leaves),
            param_arrays=len(p_leaves),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        """Three short lines (a notebook wraps a long printed line mid-number at 1024 px)."""
        mesh = " x ".join(f"{k}={v}" for k, v in self.mesh.items())
        procs = f" in {self.processes} processes" if self.processes > 1 else ""
        return (
            f"sharding {self.strategy!r}: mesh {mesh} ({format_count(self.devices, 'device')}{procs}); "
            f"batch {self.batch_size} = {self.per_device_batch} per device\n"
            f"  parameters {format_bytes(self.param_bytes)}, "
            f"{format_bytes(self.param_bytes_per_device)} per device "
            f"({self.sharded_params} of {format_count(self.param_arrays, 'array')} split)\n"
            f"  optimizer state {format_bytes(self.optimizer_bytes)}, "
            f"{format_bytes(self.optimizer_bytes_per_device)} per device"
        )
