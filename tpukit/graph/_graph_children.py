"""A numbered tree's children as two arrays, not one list per node.

`GraphTree` builds its children as lists (its grouping moves nodes between groups),
then numbers the nodes depth first (`GraphTree._renumber`) and never changes them
again. From there the children are held here: every node's child ids in one array,
node after node, and where each node's start in another (compressed sparse rows).
A large module's tree has 440,000 nodes; a list per group and an int object per
child took about 24 MB, these two arrays 3.5.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from itertools import accumulate


class Children:
    """``children[node]``: the ids of ``node``'s children in order, an ``array('i')``
    (empty for a leaf); ``len(children)`` is the number of nodes.

    >>> children = Children.of([(0, [1, 3]), (1, [2])], 4)
    >>> list(children[0]), list(children[2]), len(children), children.count(1)
    ([1, 3], [], 4, 1)
    >>> [list(kids) for kids in children]
    [[1, 3], [2], [], []]
    """

    __slots__ = ("_at", "_ids")

    def __init__(self, ids: array, at: array) -> None:
        self._ids = ids
        self._at = at  # node k's children are ids[at[k] : at[k + 1]]

    @classmethod
    def of(cls, families: Iterable[tuple[int, Iterable[int]]], size: int) -> Children:
        """The children of ``size`` nodes from ``(node, its children)``, the nodes
        ascending (each listed once; a node not listed is a leaf)."""
        ids = array("i")
        counts = array("i", [0]) * size
        for node, kids in families:
            start = len(ids)
            ids.extend(kids)
            counts[node] = len(ids) - start
        return cls(ids, array("i", accumulate(counts, initial=0)))

    def __getitem__(self, node: int) -> array:
        at = self._at
        return self._ids[at[node] : at[node + 1]]

    def count(self, node: int) -> int:
        """How many children ``node`` has (no copy of them)."""
        return self._at[node + 1] - self._at[node]

    def __len__(self) -> int:
        return len(self._at) - 1

    def __iter__(self) -> Iterator[array]:
        ids, at = self._ids, self._at
        for node in range(len(at) - 1):
            yield ids[at[node] : at[node + 1]]
