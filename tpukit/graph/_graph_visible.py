"""What a view of the tree draws: its nodes, and the edges between them (`GraphTree.visible`).

A view is a set of open groups. A node is drawn where every group above it is open; an
instruction inside a closed group is drawn as the outermost closed group above it, and
its edges go to that group (summed, edges inside one drawn node left out). An open call
or loop hands its edges on to its body's parameter and root nodes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence


class VisibleMixin:
    """`GraphTree`'s drawn nodes and edges for a set of open groups."""

    children: Sequence[Sequence[int]]
    parent: Sequence[int]
    blocks: list
    roots: dict[int, int]
    params: dict[int, list[int]]

    def visible(self, opened: set[int]) -> tuple[list[int], dict[tuple[int, int], int]]:
        """The nodes drawn (not open groups) and the edges between them, for a set of open
        nodes.

        Where an edge's end is drawn is found once per parent, not once per edge: siblings
        share it (a large module's 300,000 edge ends sit in a few thousand groups).

            >>> from tpukit.graph._graph_data import GraphTree
            >>> from tpukit.hlo import parse_hlo
            >>> tree = GraphTree(parse_hlo('''HloModule m
            ... ENTRY %main {
            ...   %x = f32[4]{0} parameter(0)
            ...   ROOT %e = f32[4]{0} exponential(f32[4]{0} %x)
            ... }'''))
            >>> nodes, edges = tree.visible({0})  # the top open: its children, their edges
            >>> [tree.label[n] for n in nodes], len(edges)
            (['x', 'e'], 1)
        """
        children, parent_of, roots, params = self.children, self.parent, self.roots, self.params
        nodes = []
        stack = [0]
        while stack:
            node = stack.pop()
            if node in opened and children[node]:
                stack.extend(children[node])
            else:
                nodes.append(node)
        above: dict[int, int] = {}  # a parent -> its outermost closed ancestor-or-self, or -1

        def shown(node: int) -> int:  # the node drawn for ``node``
            parent = parent_of[node]
            found = above.get(parent)
            if found is None:
                found, walk = -1, parent
                while walk >= 0:
                    found, walk = found if walk in opened else walk, parent_of[walk]
                above[parent] = found
            return node if found < 0 else found

        edges: dict[tuple[int, int], int] = defaultdict(int)
        for owner, block in self.blocks:
            if shown(owner) != owner or owner not in opened:
                continue
            for source, target, nbytes, index in block:
                while source in opened and source in roots:
                    source = roots[source]
                while target in opened and index < len(params.get(target, ())):
                    target = params[target][index]
                a, b = shown(source), shown(target)
                if a != b and not self._contains(a, b) and not self._contains(b, a):
                    edges[(a, b)] += nbytes
        return sorted(nodes), dict(edges)

    def _contains(self, group: int, node: int) -> bool:
        """Whether ``node`` is ``group`` or under it."""
        parent_of = self.parent
        while node >= 0:
            if node == group:
                return True
            node = parent_of[node]
        return False
