"""The panel's texts of a body the page builds (`_body_texts.body_texts`) when its records
changed after the parse: each is read as it is now, not as the parser left it (a body of
the parser's rows unchanged is cut in place, the rows' attributes never asked of each:
`tpukit.hlo.text.parsed_text`)."""

from __future__ import annotations

import pytest

from tpukit.graph._graph_data import GraphTree
from tpukit.graph._graph_payload import graph_wire
from tpukit.hlo import parse_hlo
from tpukit.hlo.text import HloInstruction

_TEXT = """HloModule changed_{change}

%fused (p: f32[4]) -> f32[4] {{
  %p = f32[4]{{0}} parameter(0)
  %n = f32[4]{{0}} negate(f32[4]{{0}} %p), metadata={{op_name="a/neg"}}
  ROOT %e = f32[4]{{0}} exponential(f32[4]{{0}} %n), metadata={{op_name="a/exp"}}
}}

ENTRY %main (x: f32[4]) -> f32[4] {{
  %x = f32[4]{{0}} parameter(0)
  ROOT %f = f32[4]{{0}} fusion(f32[4]{{0}} %x), kind=kLoop, calls=%fused
}}
"""
_NEGATE = '%n = f32[4]{0} negate(f32[4]{0} %p), metadata={op_name="c/neg"}'


def _change(negate: HloInstruction, rows: list, change: str) -> None:
    if change == "split":  # (split on first use and kept)
        assert negate.attributes["metadata"] == '{op_name="a/neg"}'
    elif change == "attributes":  # (another metadata than its line's: none cut)
        negate.attributes = {"metadata": '{op_name="b/neg"}'}
    elif change == "text":
        negate.text = negate.text.replace("%p), ", "%p), sharding={replicated}, ")
    else:  # a record made by hand in its place (no attributes: none cut)
        rows[1] = HloInstruction("n", "negate", negate.shape, ["p"], text=_NEGATE)


@pytest.mark.parametrize(
    ("change", "written"),
    [
        ("split", "(f32[4]{0} %p)"),
        ("attributes", '(f32[4]{0} %p), metadata={op_name="a/neg"}'),
        ("text", "(f32[4]{0} %p), sharding={replicated}"),
        ("record", '(f32[4]{0} %p), metadata={op_name="c/neg"}'),
    ],
)
def test_a_body_changed_after_the_parse_is_written_as_it_is_now(change, written):
    module = parse_hlo(_TEXT.format(change=change))
    rows = module.computations["fused"].instructions
    _change(rows[1], rows, change)
    lazy = GraphTree(module, lazy=True)
    assert [body.name for body in lazy.lazy.values()] == ["fused"]
    wire = graph_wire(lazy, "t", None)
    texts = dict(zip(wire["bodyLabel"], zip(wire["bodyText"], wire["bodyHead"])))
    assert texts == {"p": ("(0)", 1), "n": (written, 1), "e": ("(f32[4]{0} %n)", 2)}
