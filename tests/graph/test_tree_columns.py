"""A numbered graph tree holds its columns typed, and the page is made from them without
copies (issue 38: a 400,000-instruction module's graph in at most 3x its text).

Once `GraphTree` has numbered its nodes, ``kind`` and ``parent`` are typed arrays and
``children`` is `Children` (every node's child ids in one array), not a list per node;
`encode_wire` deflates a column that goes as its array's kind from a view of the array;
a glance's columns hold its nodes alone (or are typed arrays) until `Glance.cut` takes them.
"""

from __future__ import annotations

import json
from array import array

from tests._support.data import HLO_DATA
from tpukit.graph import _graph_payload
from tpukit.graph._graph_children import Children
from tpukit.graph._graph_data import GraphTree
from tpukit.graph._graph_payload import glance_wire, graph_payload, graph_wire
from tpukit.graph._graph_wire import decode_payload, encode_wire, wire_parts
from tpukit.hlo import parse_hlo


def _tree(name: str = "gpu_vgg19_forward.hlo") -> GraphTree:
    return GraphTree(parse_hlo((HLO_DATA / name).read_text()))


def test_a_numbered_trees_children_are_two_arrays_that_agree_with_parent():
    """Each node's children are the nodes whose parent it is, in id order (depth first:
    each child's subtree follows it), as one array of ids; ``kind`` and ``parent`` are
    typed arrays."""
    data = _tree()
    n = len(data.kind)
    assert isinstance(data.children, Children) and len(data.children) == n
    assert (data.kind.typecode, data.parent.typecode) == ("B", "i")
    expected: list[list[int]] = [[] for _ in range(n)]
    for node in range(1, n):
        expected[data.parent[node]].append(node)
    assert [list(kids) for kids in data.children] == expected
    assert [data.children.count(k) for k in range(n)] == list(map(len, expected))
    assert all(isinstance(data.children[k], array) for k in (0, n - 1))
    assert not data.children[n - 1]  # (the last node numbered depth first is a leaf)


def test_the_payload_gives_json_lists_of_the_typed_columns():
    """`graph_payload` is JSON: the tree's typed columns go as lists, equal to them."""
    data = _tree()
    payload = graph_payload(data, "t", "optimized")
    assert json.loads(json.dumps(payload))["parent"] == list(data.parent)
    assert payload["kind"] == list(data.kind) and isinstance(payload["kind"], list)


def test_a_spent_wire_deflates_the_trees_columns_from_views_of_them():
    """With ``spend``, ``kind`` and ``parent`` are parts that view the tree's own arrays
    (no copy), and the page is the one a plain wire gives."""
    data = _tree()
    plain = encode_wire(graph_wire(data, "t", "optimized"))
    parts = wire_parts(graph_wire(data, "t", "optimized", typed=True), spend=True)
    viewed = [part.obj for part in parts if isinstance(part, memoryview)]
    assert any(obj is data.kind for obj in viewed) and any(obj is data.parent for obj in viewed)
    kept = wire_parts(graph_wire(data, "t", "optimized", typed=True))  # (not spent: bytes)
    assert not any(isinstance(part, memoryview) for part in kept)
    typed = graph_wire(data, "t", "optimized", typed=True)
    assert encode_wire(typed, spend=True) == plain
    assert decode_payload(plain)["parent"] == list(data.parent)


def test_a_glance_makes_no_column_of_every_node_as_a_list(monkeypatch):
    """A glance is a few hundred of a large tree's nodes: its columns hold those alone, or
    are typed arrays (a list of ints is 8 bytes a node, 28 more for an int above 256),
    until `Glance.cut` keeps its nodes' values; the glance it gives is unchanged."""
    data = _tree()
    before = glance_wire(data, "t", "optimized")
    made: list[object] = []
    numbers = _graph_payload._numbers

    def recorded(n: int, typed: bool, code: str, value: int = 0, sparse: bool = False):
        made.append(numbers(n, typed, code, value, sparse))
        return made[-1]

    monkeypatch.setattr(_graph_payload, "_numbers", recorded)
    after = glance_wire(data, "t", "optimized")
    assert len(made) > 5 and not any(isinstance(column, list) for column in made)
    assert after == before and isinstance(after["kind"], list)
