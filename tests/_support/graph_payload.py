"""What a graph's HTML fragment carries, read back: the payload the viewer boots with.

wire = payload_of(graph._repr_html_())
assert "dot" in op_names(wire)
"""

import re

from tpukit.graph._graph_wire import decode_payload


def payload_of(fragment: str) -> dict:
    found = re.search(
        r'tpukitGraphView\(document\.getElementById\("([\w-]+)"\),"([A-Za-z0-9+/=]+)"', fragment
    )
    assert found, "the fragment should boot the viewer with its element id and payload"
    return decode_payload(found.group(2))


def op_names(wire: dict) -> list[str]:
    """Each node's opcode, which the wire carries as an index into ``ops``."""
    return [wire["ops"][k] for k in wire["op"]]
