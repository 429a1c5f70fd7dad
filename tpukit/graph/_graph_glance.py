"""The graph's first view alone: what its first draw needs, sent ahead of the whole graph.

A training step's payload holds every node, fusion interiors included (ResNet-50's step:
24,000 instructions, 2.4 MB before compression), and its first view draws a few dozen.
A notebook kernel shows a glance first (`_graph_view.HloGraph` in a kernel) and then
replaces it with the whole graph, which it groups and writes while the glance is drawn.
The glance is made from ENTRY's tree alone, without what its fusions, calls and loops run
(`GraphTree` with ``bodies=False``, a tenth of a step's nodes), which it cannot tell from
the whole tree: a node's costs come from the module, and the tree counts what it leaves out.

A glance keeps the root, the groups the first view opens (`first_view`) and their
children, which is every node the first view draws or may fold its groups into. Nodes
keep their order, so the kept nodes still number the tree depth first. Each keeps what
the whole payload says of it (a group's FLOPs, bytes and count are its whole subtree's),
and the data edges of the open computations join the kept nodes that stand for their
ends: the first view lays out and draws the same as from the whole payload.

    >>> text = '''HloModule m
    ...
    ... ENTRY main {
    ...   a = f32[8]{0} parameter(0)
    ...   ROOT b = f32[8]{0} exponential(a)
    ... }
    ... '''
    >>> from tpukit.graph._graph_data import GraphTree
    >>> from tpukit.hlo.text import parse_hlo
    >>> glance = Glance(GraphTree(parse_hlo(text)))
    >>> glance.nodes, glance.cut({"kind": [0, 1, 1], "parent": [-1, 0, 0], "open": [0]})["more"]
    ([0, 1, 2], [])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tpukit.graph._first_view import first_view
from tpukit.graph._graph_wire import LINE_COLUMNS, NUMBER_COLUMNS, block_columns, link_columns

if TYPE_CHECKING:
    from tpukit.graph._graph_data import GraphTree

#: The payload's columns of one value per node (``time`` and ``memory`` when coloured).
NODE_COLUMNS = (*NUMBER_COLUMNS, *(c for c in LINE_COLUMNS if c != "strings"), "time", "memory")


class Glance:
    """The first view's nodes of ``data`` (``nodes``, in order) and their new ids.

    Attributes:
      nodes: the kept nodes' ids in the whole tree, ascending: the root, the groups the
        first view opens and their children.
      new_id: each kept node's id in the glance (its place in ``nodes``).
    """

    def __init__(self, data: GraphTree) -> None:
        self.data = data
        self.opened = first_view(data)
        kept = set(self.opened)
        for group in self.opened:
            kept.update(data.children[group])
        self.nodes = sorted(kept)
        self.new_id = {node: k for k, node in enumerate(self.nodes)}
        self._shown = dict(self.new_id)

    def shown(self, node: int) -> int:
        """The glance id of the kept node that stands for ``node``: itself, or its nearest
        kept ancestor (the closed group it is drawn in)."""
        shown, parent = self._shown, self.data.parent
        path = []
        while node not in shown:
            path.append(node)
            node = parent[node]
        found = shown[node]
        for passed in path:
            shown[passed] = found
        return found

    def cut(self, payload: dict) -> dict:
        """``payload``, the whole graph's, with its nodes cut to the kept ones, renumbered.

        ``more`` lists the kept groups that hold more than the glance sends (they show
        closed, with the toggle that opens them), and ``glance`` says that it is one.
        """
        nodes, new_id, data = self.nodes, self.new_id, self.data
        cut = dict(payload)
        for column in NODE_COLUMNS:
            if column in payload:
                values = payload[column]
                cut[column] = [values[k] for k in nodes]
        cut["parent"] = [new_id[p] if p >= 0 else -1 for p in cut["parent"]]
        cut["open"] = [new_id[k] for k in payload["open"]]
        opened = set(self.opened)
        hidden = data.hidden
        cut["more"] = [
            new_id[k] for k in nodes if (data.children[k] or hidden.get(k)) and k not in opened
        ]
        cut["glance"] = True
        return cut

    def edges(self) -> dict[str, list[int]]:
        """The open computations' data edges, params and roots on the wire
        (`_graph_wire.block_columns`, `link_columns`), each end the kept node that stands
        for it. An edge inside one closed node is left out: no view draws it."""
        data, new_id, shown = self.data, self.new_id, self.shown
        known = self._shown.get  # (a training step's first view reads thousands of edges)
        opened = set(self.opened)
        blocks = []
        for owner, edges in data.blocks:
            if owner not in opened:
                continue
            flat: list[int] = []
            for source, target, size, index in edges:
                a, b = known(source), known(target)
                if a is None:
                    a = shown(source)
                if b is None:
                    b = shown(target)
                if a != b:
                    flat += (a, b, size, index)
            blocks.append((new_id[owner], flat))
        params = [
            (new_id[owner], [shown(k) for k in kept])
            for owner, kept in data.params.items()
            if owner in opened
        ]
        roots = [(new_id[owner], shown(k)) for owner, k in data.roots.items() if owner in opened]
        return {**link_columns(params, roots), **block_columns(blocks)}
