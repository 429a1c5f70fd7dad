"""A program is parsed once and grouped once, however many views ask (issue 24)."""

from __future__ import annotations

from tests._support.data import HLO_DATA
from tpukit import hlo
from tpukit.hlo import _program

MLP = (HLO_DATA / "jax_mlp.hlo").read_text()


def test_open_parses_the_text_once(monkeypatch):
    calls = []
    parse = _program.parse_hlo
    monkeypatch.setattr(_program, "parse_hlo", lambda text: calls.append(1) or parse(text))
    program = hlo.open(MLP)
    program.op_counts()
    program.graph()
    assert program.name == program.hlo_module().name == "jit_predict"
    assert len(calls) == 1


def test_views_of_one_program_share_its_grouping():
    program = hlo.open(MLP)
    first = program.graph()
    timed = program.graph(times={"dot.5": 1e-3})
    assert first._data is timed._data
    assert hlo.graph(program)._data is first._data
