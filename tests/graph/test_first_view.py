"""The graph's first view opens on the work of anyone's HLO (issue 20, defect 5).

Two generated modules of 20,000+ instructions: one without op names (as the JAX SPMD
benchmark dumps and PyTorch/XLA write them), where the dots sit among thousands of
copies, reshapes and multiplies by constants; one with name scopes, whose RoPE table is
computed from constants alone beside the layers that do the work.
"""

from __future__ import annotations

import re

from tests._support.hlo_texts import SCAN, named_module, unnamed_module
from tpukit import hlo
from tpukit.graph._first_view import first_view
from tpukit.graph._graph_payload import graph_payload


def _first_view(text: str) -> tuple[list[int], dict, object]:
    data = hlo.open(text).graph()._data
    payload = graph_payload(data, "t", None)
    return first_view(data), payload, data


def test_without_op_names_the_view_opens_on_the_dots_and_names_them():
    program = hlo.open(unnamed_module())
    assert sum(program.op_counts().values()) > 20_000
    opened, payload, _ = _first_view(unnamed_module())
    groups = opened[1:]
    assert groups, "the view opens something below the root"
    for node in groups:
        assert payload["flops"][node] > 0
        # e.g. "dot ×2 (1.05 MFLOP) · 1600 ops": the op carrying the FLOPs, named
        assert re.fullmatch(r"dot( ×\d+)? \([\d.]+ \w?FLOP\) · \d+ ops", payload["label"][node])


def test_with_op_names_the_view_opens_on_the_layers_not_on_setup_constants():
    opened, payload, data = _first_view(named_module())
    assert len(data.kind) > 20_000
    labels = {payload["label"][node] for node in opened}
    assert labels & {"layers.0", "layers.1", "layers.2", "layers.3"}  # as many as fit
    assert "rope" in {payload["label"][k] for k in data.children[0]}  # drawn, but closed
    assert "rope" not in labels


def test_a_loops_body_comes_before_its_condition():
    # XLA writes condition= before body=; the body, which holds the work, is drawn first.
    _, payload, data = _first_view(SCAN)
    loop = payload["label"].index("loop x16")
    kids = [payload["label"][k] for k in data.children[loop]]
    assert kids[0].startswith("body") and kids[1].startswith("condition"), kids
