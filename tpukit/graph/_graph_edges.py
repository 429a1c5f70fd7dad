"""One computation's data edges, stored as four typed columns rather than a tuple each.

`_graph_data.GraphTree.blocks` holds a block of edges per computation it shows, and a
training step has one edge per operand: hundreds of thousands. A ``(source, target,
bytes, operand index)`` tuple of Python ints costs about 140 bytes an edge (the tuple,
its slot in a list, three ints past the small ones Python shares); four ``array``
columns cost 20. `Edges` still iterates as those tuples, so every reader of ``blocks``
(the tree's grouping, costs, glance, frame, DOT) reads it as before, and the wire takes
its columns whole (`_graph_wire.edge_columns`).

    >>> edges = Edges.of([(3, 4, 512, 0), (2, 4, 64, 1)])
    >>> list(edges), len(edges)
    ([(3, 4, 512, 0), (2, 4, 64, 1)], 2)
    >>> list(edges.renumbered([0, 1, 2, 9, 8]))
    [(9, 8, 512, 0), (2, 8, 64, 1)]
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence

#: Node ids and operand indices (a module of 2**31 nodes would not fit in memory anyway),
#: and bytes (a buffer of more than 2 GiB is common).
_IDS, _BYTES = "i", "q"


class Edges:
    """The data edges of one computation: ``source``, ``target``, ``nbytes`` and ``index``
    (the operand's place among the target's operands), one typed column each."""

    __slots__ = ("index", "nbytes", "source", "target")

    def __init__(self, source: array, target: array, nbytes: array, index: array) -> None:
        self.source, self.target, self.nbytes, self.index = source, target, nbytes, index

    @classmethod
    def of(cls, edges: Iterable[tuple[int, int, int, int]]) -> Edges:
        """The columns of ``(source, target, bytes, operand index)`` tuples."""
        columns = tuple(zip(*edges)) or ((), (), (), ())
        source, target, nbytes, index = columns
        return cls(
            array(_IDS, source), array(_IDS, target), array(_BYTES, nbytes), array(_IDS, index)
        )

    @classmethod
    def of_columns(
        cls, source: list[int], target: list[int], nbytes: list[int], index: list[int]
    ) -> Edges:
        """The edges of four lists, one entry an edge (`_graph_data._edges_and_order`'s:
        no tuple an edge to make, then take apart)."""
        return cls(
            array(_IDS, source), array(_IDS, target), array(_BYTES, nbytes), array(_IDS, index)
        )

    def renumbered(self, new_id: Sequence[int]) -> Edges:
        """The same edges between ``new_id[source]`` and ``new_id[target]``."""
        at = new_id.__getitem__
        return Edges(
            array(_IDS, map(at, self.source)),
            array(_IDS, map(at, self.target)),
            self.nbytes,
            self.index,
        )

    def __iter__(self) -> Iterator[tuple[int, int, int, int]]:
        return zip(self.source, self.target, self.nbytes, self.index)

    def __len__(self) -> int:
        return len(self.source)

    def __repr__(self) -> str:
        return f"Edges({list(self)!r})"
