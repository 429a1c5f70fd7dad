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

from tpukit._errors import ArgumentError, DeviceNotFoundError, user_facing
from tpukit.runtime._environment import detect_environment, missing_platform_advice


@user_facing
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
    _require_arrays(tree, "put")
    target = _resolve_target(device_or_sharding)
    try:
        return jax.device_put(tree, target)
    except ValueError as exc:
        raise ArgumentError(
            f"Cannot place the tree with {target!r}: {str(exc).splitlines()[0]}. A sharding must divide each "
            "array's dimensions it splits; use a device or a replicated sharding otherwise."
        ) from None


@user_facing
def fetch(tree: Any) -> Any:
    """Copy every array of ``tree`` back to the host as NumPy arrays.

    Arrays spread over several hosts are gathered first, so every process gets
    the whole value (call it on every process then). Python numbers become 0-d
    arrays; any other leaf (a string, an object) is refused.
    """
    _require_arrays(tree, "fetch")
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


def _require_arrays(tree: Any, verb: str) -> None:
    """Refuse a tree with a leaf that is neither an array nor a number, naming where it is."""
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        if isinstance(leaf, (jax.Array, np.ndarray, np.generic, bool, int, float, complex)):
            continue
        where = f" at {jax.tree_util.keystr(path)}" if path else ""
        raise ArgumentError(
            f"{verb}() moves arrays, but found a {type(leaf).__name__}{where}. Pass an array, "
            "a number, or a pytree (dict, list, tuple, NNX module) of them; turn a generator "
            "into a list or array first."
        )


def _resolve_target(target: Any) -> Any:
    if not isinstance(target, str):
        return target
    platform, _, index = target.partition(":")
    if platform not in ("cpu", "gpu", "tpu") or (index and not index.isdigit()):
        raise ArgumentError(
            f"Cannot read the device {target!r}: write a platform, optionally with an index, "
            "such as 'gpu', 'tpu:0' or 'cpu:3'."
        )
    try:
        found = jax.devices(platform)
    except RuntimeError:
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
