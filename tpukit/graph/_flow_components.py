"""Data flow among a group's children: each one's rank, and the parts no data joins.

`flow_ranks` places the children in ranks as the page (dagre) does; `_graph_parts` cuts
a group into stages of those ranks and `_graph_frame` sizes a drawing by them.

`_graph_parts.stages` cuts a rank too wide for the frame into pieces; where its boxes are
too wide to go two to a piece (six cuDNN convolutions, each box 288 units wide), it cuts
the group into these instead: a convolution and the reduction that reads it are one
piece, not a convolution beside another that has nothing to do with it.

    >>> flow_components(4, {(0, 1)})
    [[0, 1], [2], [3]]
    >>> flow_ranks(3, {(0, 1), (1, 2)})
    [0, 1, 2]
"""

from __future__ import annotations

import heapq
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


def flow_ranks(count: int, links: set[tuple[int, int]], *, pull: bool = True) -> list[int]:
    """Each item's rank: the longest path of ``links`` to it (data flows from ``a`` to ``b``
    along a link ``(a, b)``; items need not be in data-flow order: a stage is placed by
    its first op in the text, which may be a constant its last rank uses); with ``pull``,
    an item no link enters sits one rank above its first user, as dagre pulls a source
    next to its user (the frame's estimate, `_graph_frame.Frame.ranks`, leaves it at the
    top: the fit test asks that). A cycle (layers whose ops interleave) is broken where
    it is met, at its first item, as dagre draws one edge of it upwards."""
    rank = [0] * count
    users: list[list[int]] = [[] for _ in range(count)]
    waiting = [0] * count  # links into each item not yet ranked
    for a, b in links:
        users[a].append(b)
        waiting[b] += 1
    entered = [w > 0 for w in waiting]
    ready = [item for item in range(count) if not waiting[item]]
    heapq.heapify(ready)
    done = [False] * count
    left = count
    at = 0  # the first item not yet ranked, where a cycle is broken
    while left:
        if ready:
            item = heapq.heappop(ready)
            if done[item]:
                continue
        else:
            while done[at]:
                at += 1
            item = at
        done[item] = True
        left -= 1
        for user in users[item]:
            if not done[user]:
                if rank[user] < rank[item] + 1:
                    rank[user] = rank[item] + 1
                waiting[user] -= 1
                if not waiting[user]:
                    heapq.heappush(ready, user)
    for item in range(count) if pull else ():
        if not entered[item] and users[item]:
            rank[item] = max(0, min(rank[u] for u in users[item]) - 1)
    return rank
