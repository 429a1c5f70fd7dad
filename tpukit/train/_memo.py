"""Set-up work a second ``fit`` need not repeat: results kept by the shapes they depend on.

A second ``fit`` call on the same model and optimizer traces the same optimizer update
and the same model output; :func:`remembered` keeps such a result under a key built
from the arrays' structure, shapes and dtypes (:func:`abstract_key`), in a small
bounded table.

Example::

    >>> import numpy as np
    >>> table = {}
    >>> key = abstract_key({"w": np.zeros((2, 3), np.float32)})
    >>> remembered(table, key, lambda: "traced"), remembered(table, key, lambda: "again")
    ('traced', 'traced')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import jax
import numpy as np

T = TypeVar("T")


def abstract_key(tree: Any) -> tuple:
    """A hashable key for what a trace of ``tree`` depends on: structure, shapes, dtypes."""
    leaves, treedef = jax.tree.flatten(tree)
    return treedef, tuple((tuple(np.shape(x)), x.dtype) for x in leaves)


class GraphKey:
    """An NNX graph definition as a dict key, hashed once: ``GraphDef.__hash__`` walks
    every node (about 80 µs for a small MLP), and each of a ``fit`` call's tables would
    pay it again. Equal when the graph definitions are (the same object, or ``==``)."""

    __slots__ = ("graphdef", "_hash")

    def __init__(self, graphdef: Any):
        self.graphdef = graphdef
        self._hash = hash(graphdef)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GraphKey) and (
            other.graphdef is self.graphdef or other.graphdef == self.graphdef
        )


_GRAPH_KEYS: dict[int, GraphKey] = {}


def graph_key(graphdef: Any) -> GraphKey:
    """The :class:`GraphKey` of ``graphdef``; the same object again (a later ``fit`` on an
    unchanged model reuses its split: ``_kept_split``) is not hashed again."""
    key = _GRAPH_KEYS.get(id(graphdef))
    if key is None or key.graphdef is not graphdef:  # (the key holds it: its id is its own)
        if len(_GRAPH_KEYS) >= 32:
            _GRAPH_KEYS.pop(next(iter(_GRAPH_KEYS)))
        key = _GRAPH_KEYS[id(graphdef)] = GraphKey(graphdef)
    return key


def remembered(table: dict, key: tuple, compute: Callable[[], T], size: int = 32) -> T:
    """``compute()`` once per ``key`` in ``table`` (at most ``size`` entries, the oldest
    dropped first); a key that cannot be hashed computes every time."""
    try:
        hash(key)
    except TypeError:
        return compute()
    if key not in table:
        if len(table) >= size:
            table.pop(next(iter(table)))
        table[key] = compute()
    return table[key]
