"""The parts of a group that no data joins: a wide rank cut along its data flow.

`_graph_parts.stages` cuts a rank too wide for the frame into pieces; where its boxes are
too wide to go two to a piece (six cuDNN convolutions, each box 288 units wide), it cuts
the group into these instead: a convolution and the reduction that reads it are one
piece, not a convolution beside another that has nothing to do with it.

    >>> flow_components(4, {(0, 1)})
    [[0, 1], [2], [3]]
"""

from __future__ import annotations

from collections import defaultdict

from tpukit.graph._graph_sizes import NODE_SEP


def flow_components(count: int, links: set[tuple[int, int]]) -> list[list[int]]:
    """Items ``0..count-1`` grouped by the ``links`` (data flowing from ``a`` to ``b``)
    that join them, either way: each group in item order, the groups by their first."""
    root = list(range(count))

    def find(item: int) -> int:
        while root[item] != item:
            root[item] = root[root[item]]
            item = root[item]
        return item

    for a, b in links:
        root[find(a)] = find(b)
    parts: dict[int, list[int]] = defaultdict(list)
    for item in range(count):
        parts[find(item)].append(item)
    return sorted(parts.values())


def row_width(members: list[int], widths: list[float]) -> float:
    """Boxes ``members`` (of ``widths``) side by side in one rank, as dagre spaces them."""
    return sum(widths[m] for m in members) + NODE_SEP * (len(members) - 1)


def pieces(members: list[int], widths: list[float], limit: float) -> list[list[int]]:
    """A rank too wide cut in item order into pieces at most ``limit`` wide, two items
    at least (a piece of one would change nothing): the last may still be wider."""
    found: list[list[int]] = []
    piece: list[int] = []
    for item in members:
        if len(piece) > 1 and row_width([*piece, item], widths) > limit:
            found.append(piece)
            piece = []
        piece.append(item)
    return [*found, piece]


def fits_stage(
    part: list[int], rank: list[int], widths: list[float], ranks: int, limit: float
) -> bool:
    """Whether items ``part`` (ranked ``rank``) take ``ranks`` ranks at most, each at
    most ``limit`` wide."""
    rows: dict[int, list[int]] = defaultdict(list)
    for item in part:
        rows[rank[item]].append(item)
    return len(rows) <= ranks and all(row_width(row, widths) <= limit for row in rows.values())
