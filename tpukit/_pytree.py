"""The names of a pytree's leaves, and whether a leaf is a PRNG key.

Training (its sharding rules and layouts) and checkpoints (the names they store and
compare before a restore) name a leaf the same way: its path joined with ``/``, with
NNX's trailing ``value`` dropped, so ``shard={r"l1/kernel": ...}`` and a checkpoint's
"names that differ" speak of the same thing.

Example::

    >>> import numpy as np
    >>> [name for name, _ in leaf_paths({"layers": [{"kernel": np.ones(2)}], "b": 0})]
    ['b', 'layers/0/kernel']
"""

from __future__ import annotations

from typing import Any

import jax

_KEY_FIELDS = {
    jax.tree_util.DictKey: "key",
    jax.tree_util.GetAttrKey: "name",
    jax.tree_util.SequenceKey: "idx",
    jax.tree_util.FlattenedIndexKey: "key",
}


def _key_name(k: Any) -> str:
    field = _KEY_FIELDS.get(type(k))
    if field is not None:
        return str(getattr(k, field))
    for attr in ("key", "name", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


def leaf_paths(tree: Any) -> list[tuple[str, Any]]:
    """``[(path, leaf), ...]`` with paths like ``layers/0/kernel`` (NNX's ``value`` dropped)."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    out = []
    for path, leaf in flat:
        parts = [_key_name(k) for k in path]
        if parts and parts[-1] == "value":
            parts = parts[:-1]
        out.append(("/".join(parts), leaf))
    return out


def is_key(x: Any) -> bool:
    """Whether ``x`` is a typed PRNG key array (``jax.random.key``)."""
    return jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key)
