"""Move whole pytrees between the host and the devices.

``put`` and ``fetch`` are the pair a notebook uses around compiled calls: data
goes to the device once, results come back as NumPy arrays (the ``XRTArray`` and
``fetch`` of the XLA.jl workflow).

>>> import numpy as np, tpukit
>>> params = tpukit.put({"w": np.ones((2, 3), np.float32)})
>>> tpukit.fetch(params)["w"].shape
(2, 3)
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from tpukit._errors import DeviceNotFoundError


def put(tree: Any, device_or_sharding: Any = None) -> Any:
    """Place every array of ``tree`` on a device or with a sharding.

    Args:
      tree: any pytree of arrays (NumPy, JAX, Python numbers).
      device_or_sharding: ``None`` for JAX's default device; a ``jax.Device``; a
        ``jax.sharding.Sharding`` (e.g. ``NamedSharding(mesh, P("data"))``); a
        pytree of shardings matching ``tree``; or a platform name such as
        ``"gpu"`` (its first device) or ``"cpu:3"``.

    Returns:
      The same pytree with ``jax.Array`` leaves.
    """
    target = _resolve_target(device_or_sharding)
    try:
        return jax.device_put(tree, target)
    except ValueError as exc:
        raise ValueError(
            f"Cannot place the tree with {target!r}: {exc}. A sharding must divide each "
            "array's dimensions it splits; use a device or a replicated sharding otherwise."
        ) from None


def fetch(tree: Any) -> Any:
    """Copy every array of ``tree`` back to the host as NumPy arrays.

    Arrays spread over several hosts are gathered first, so every process gets
    the whole value (call it on every process then); other leaves are copied as
    they are.
    """
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    spread = [isinstance(x, jax.Array) and not x.is_fully_addressable for x in leaves]
    if any(spread):
        from jax.experimental import multihost_utils

        gathered = multihost_utils.process_allgather(
            [x for x, s in zip(leaves, spread) if s], tiled=True
        )
        it = iter(gathered)
        leaves = [next(it) if s else x for x, s in zip(leaves, spread)]
    host = jax.device_get(leaves)  # one batched transfer for everything else
    return jax.tree_util.tree_unflatten(treedef, [np.asarray(x) for x in host])


def _resolve_target(target: Any) -> Any:
    if not isinstance(target, str):
        return target
    platform, _, index = target.partition(":")
    if platform not in ("cpu", "gpu", "tpu") or (index and not index.isdigit()):
        raise ValueError(
            f"Cannot read the device {target!r}: write a platform, optionally with an index, "
            "such as 'gpu', 'tpu:0' or 'cpu:3'."
        )
    try:
        found = jax.devices(platform)
    except RuntimeError:
        from tpukit._environment import detect_environment, missing_platform_advice

        available = sorted({d.platform for d in jax.devices()})
        raise DeviceNotFoundError(
            missing_platform_advice(platform, available, detect_environment())
        ) from None
    position = int(index) if index else 0
    if not 0 <= position < len(found):
        raise DeviceNotFoundError(
            f"There is no {target!r}: {platform} has devices 0 to {len(found) - 1}."
        )
    return found[position]
