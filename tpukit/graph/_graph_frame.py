"""How big a drawing of the graph is, without drawing it: the first view's fit test.

The page lays out each open group's children with dagre, top to bottom, and "makes room"
for an open child (graph_layout.js). This module estimates the same boxes from the tree:
a closed box is as wide as its longer line of text; an open group stacks its children in
ranks along the longest path of the data flow between them, each rank as wide as its
boxes side by side (plus the edges that pass through it), as tall as its tallest box.
The estimate errs on the large side, so that what it says fits, the page can draw at a
readable size: the first view opens only such groups (`_first_view`), the page opens
exactly those (graph_camera.js), and `HloGraph.view_counts` counts what is drawn. Its
width is the smaller of two guesses that each err large: the widest rank times
`WIDTH_SLACK` (dagre aligns boxes across ranks, wider than its widest), and the page's
own "make room" rule applied to dagre's closed layout of each open group (`width`: a
large stage that opens in a chain of small boxes costs its own width, where the first
guess pays the slack on it too).

The sizes are the page's own (graph_shared.js), and travel to it in the payload
(``frame``): the page reads the first view's frame from there, not from a copy.
"""

from __future__ import annotations

import bisect
from itertools import accumulate
from typing import TYPE_CHECKING

from tpukit.graph._flow_components import flow_ranks
from tpukit.graph._graph_bodies import body_nodes
from tpukit.graph._graph_costs import node_costs
from tpukit.graph._graph_nodes import INSTRUCTION, PART
from tpukit.graph._graph_sizes import (
    CHAR_W,
    EDGE_SEP,
    FRAME_H,
    FRAME_W,
    HEADER_H,
    LAYOUT,
    MAX_CHARS,
    NODE_H,
    NODE_SEP,
    PAD,
    RANK_SEP,
    WIDTH_SLACK,
)

if TYPE_CHECKING:
    from tpukit.graph._graph_data import GraphTree

# A group's second line ("1,234 ops · 12.3 MFLOP · 4.56 MB"), at its longest.
_COST_CHARS = 32


class Frame:
    """Estimated sizes of a tree's drawing for sets of open groups (one per tree)."""

    def __init__(self, data: GraphTree) -> None:
        self.data = data
        self._ends: dict[int, int] = {0: len(data.kind)}
        self._blocks = {owner: edges for owner, edges in data.blocks}
        self._owner: dict[int, int] = {}
        self._ranks: dict[int, tuple[list[int], int]] = {}
        self._closed: dict[int, tuple[float, float]] = {}
        # The fusions whose bodies the page builds (`GraphTree.lazy`), and the nodes those
        # hold up to each: a group's "N ops" counts them as the page's tree does.
        self._lazy = sorted(data.lazy)
        self._lazy_held = list(
            accumulate((body_nodes(len(data.lazy[k].instructions)) for k in self._lazy), initial=0)
        )

    def end(self, node: int) -> int:
        """The id after ``node``'s subtree (ids are depth first: the subtree is
        ``[node, end)``): its next sibling's, else its parent's end."""
        found = self._ends.get(node)
        if found is None:
            parent = self.data.parent[node]
            kids = self.data.children[parent]
            at = bisect.bisect_left(kids, node) + 1
            found = self._ends[node] = kids[at] if at < len(kids) else self.end(parent)
        return found

    def fits(self, opened: set[int]) -> bool:
        """Whether the drawing with ``opened`` open fits the first view's frame (the
        smaller of the two widths: the module docstring)."""
        w, h = self.size(0, opened)
        return min(w * WIDTH_SLACK, self.width(0, opened)) <= FRAME_W and h <= FRAME_H

    def width(self, node: int, opened: set[int]) -> float:
        """How wide the page draws ``node``'s box with ``opened`` open, at most.

        dagre lays out a group's children once, closed, and an open child then moves the
        rest of its rank right by its growth, no other rank (graph_layout.js,
        measureNode). So an open group is as wide as its children's closed layout
        (`closed_width`) widened by the rank that grows most; in a chain, whose boxes dagre
        centres on one line, by half the closed layout's room beside that box less.
        """
        kids = self.data.children[node]
        if node not in opened or not kids:
            return self.closed(node)[0]
        rank, _ = self.ranks(node)
        closed, chain = self.closed_width(node)
        grown = closed
        growth: dict[int, float] = {}
        for kid, r in zip(kids, rank):
            if kid in opened:
                w = self.closed(kid)[0]
                growth[r] = growth.get(r, 0.0) + max(0.0, self.width(kid, opened) - w)
                if chain:  # its left edge stays (closed - w) / 2 from the chain's
                    grown = max(grown, (closed + w) / 2 + growth[r])
        if not chain:
            grown += max(growth.values(), default=0.0)
        return max(grown + 2 * PAD, self._header(node))

    def closed_width(self, group: int) -> tuple[float, bool]:
        """How wide dagre draws ``group``'s children, all closed, at most, and whether they
        form a chain (one box per rank, no edge skipping a rank: dagre centres them on one
        line, exactly as wide as the widest). Boxes side by side with no data between them
        (a loop's body and condition) are exactly as wide as their row. Else dagre's
        alignment may be up to `WIDTH_SLACK` times wider than its widest rank."""
        kids = self.data.children[group]
        rank, dummies = self.ranks(group)
        rows = {r: d * (NODE_SEP + EDGE_SEP) / 2 for r, d in dummies.items()}
        counts: dict[int, int] = {}
        for kid, r in zip(kids, rank):
            rows[r] = rows.get(r, 0.0) + self.closed(kid)[0]
            counts[r] = counts.get(r, 0) + 1
        widest = max(rows[r] + NODE_SEP * (counts.get(r, 1) - 1) for r in rows)
        chain = not dummies and max(counts.values()) == 1
        if chain or len(rows) == 1 and not self._links(group, kids):
            return widest, chain
        return widest * WIDTH_SLACK, False

    def _header(self, node: int) -> float:
        """An open group's header line's width: its label and its figures (headerText)."""
        return min(MAX_CHARS + 20, len(self.data.label[node]) + _COST_CHARS) * CHAR_W + 40

    def size(self, node: int, opened: set[int]) -> tuple[float, float]:
        """The estimated ``(width, height)`` of ``node``'s box with ``opened`` open."""
        kids = self.data.children[node]
        if node not in opened or not kids:
            return self.closed(node)
        rank, dummies = self.ranks(node)
        widths = {r: d * (NODE_SEP + EDGE_SEP) / 2 for r, d in dummies.items()}
        heights: dict[int, float] = {}
        counts: dict[int, int] = {}
        for kid, r in zip(kids, rank):
            w, h = self.size(kid, opened)
            widths[r] = widths.get(r, 0.0) + w
            heights[r] = max(heights.get(r, 0.0), h)
            counts[r] = counts.get(r, 0) + 1
        inner = max(widths[r] + NODE_SEP * (counts.get(r, 1) - 1) for r in widths)
        height = sum(heights.values()) + RANK_SEP * (len(heights) - 1) + HEADER_H + PAD
        return max(inner + 2 * PAD, self._header(node)), height

    def closed(self, node: int) -> tuple[float, float]:
        """A closed box: as wide as its longer line (graph_layout.js, closedSize)."""
        size = self._closed.get(node)
        if size is None:
            data = self.data
            instr = data.instr[node]
            if data.kind[node] == INSTRUCTION and instr is not None:
                second = len(instr.opcode) + 1 + len(LAYOUT.sub("", str(instr.shape)))
                if instr.opcode == "fusion":
                    second += 12
            else:  # "1,234 ops · 12.3 MFLOP · 4.56 MB" (graph_layout.js, costText)
                flops, _, nbytes = node_costs(data)
                end, lazy = self.end(node), self._lazy
                held = self._lazy_held[bisect.bisect_left(lazy, end)]
                held -= self._lazy_held[bisect.bisect_left(lazy, node)]
                ops = len(f"{end - node + held:,} ops")
                second = ops + (13 if flops[node] else 0) + (10 if nbytes[node] else 0)
            label = len(data.label[node]) + (
                5 if instr is not None and instr.opcode == "while" else 0
            )
            if data.kind[node] == PART:  # named by its work in the payload, at its longest
                label = MAX_CHARS
            chars = min(MAX_CHARS, max(label, second))
            size = (
                max(
                    70.0,
                    chars * CHAR_W + 20 + (18 if data.children[node] or node in data.lazy else 0),
                ),
                NODE_H,
            )
            self._closed[node] = size
        return size

    def ranks(self, group: int) -> tuple[list[int], dict[int, int]]:
        """Each child's rank (the longest path of data flow to it, in child order; a child
        no data enters one rank above its first user, as dagre places it: `flow_ranks`),
        and per rank the edges between them that pass through it (dagre's dummy nodes)."""
        found = self._ranks.get(group)
        if found is None:
            kids = self.data.children[group]
            links = self._links(group, kids)
            rank = flow_ranks(len(kids), links)
            dummies: dict[int, int] = {}
            for a, b in links:
                for r in range(min(rank[a], rank[b]) + 1, max(rank[a], rank[b])):
                    dummies[r] = dummies.get(r, 0) + 1
            found = self._ranks[group] = (rank, dummies)
        return found

    def _links(self, group: int, kids: list[int]) -> set[tuple[int, int]]:
        """The child pairs ``(a, b)`` that data flows between, from ``a`` to ``b``."""
        block = self._blocks.get(self._edge_owner(group))
        lo, hi = group + 1, self.end(group)
        links: set[tuple[int, int]] = set()
        if block is None:
            return links
        for source, target in zip(block.source, block.target):
            if lo <= source < hi and lo <= target < hi:
                a = bisect.bisect_right(kids, source) - 1
                b = bisect.bisect_right(kids, target) - 1
                if a != b:
                    links.add((a, b))
        return links

    def _edge_owner(self, group: int) -> int:
        """The node whose computation's edges join ``group``'s members: the group itself
        when it is a call or loop, else its nearest such ancestor (the root for ENTRY)."""
        owner = self._owner.get(group)
        if owner is None:
            node = group
            while node > 0 and node not in self._blocks:
                node = self.data.parent[node]
            owner = self._owner[group] = max(node, 0)
        return owner
