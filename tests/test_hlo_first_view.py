"""The graph's first view opens on the work of anyone's HLO (issue 20, defect 5).

Two generated modules of 20,000+ instructions: one without op names (as the JAX SPMD
benchmark dumps and PyTorch/XLA write them), where the dots sit among thousands of
copies, reshapes and multiplies by constants; one with name scopes, whose RoPE table is
computed from constants alone beside the layers that do the work.
"""

from __future__ import annotations

import re

from test_hlo_counting import SCAN

from tpukit import hlo
from tpukit.graph._first_view import first_view
from tpukit.graph._graph_payload import graph_payload


def _unnamed(blocks: int = 200, per_block: int = 100) -> str:
    """25,000 instructions: constants, copies, multiplies and reshapes; 20 dots."""
    lines = ["HloModule big_unnamed", "", "ENTRY main {"]
    lines += ["  x = f32[64,64] parameter(0)", "  w = f32[64,64] parameter(1)"]
    prev, k = "x", 0
    for block in range(blocks):
        for j in range(per_block):
            k += 1
            if j % 4 == 0:
                lines.append(f"  c{k} = f32[64,64] constant({{...}})")
            elif j % 4 == 1:
                lines.append(f"  v{k} = f32[64,64] copy({prev})")
                prev = f"v{k}"
            elif j % 4 == 2:
                lines.append(f"  v{k} = f32[64,64] multiply({prev}, c{k - 2})")
                prev = f"v{k}"
            else:
                lines.append(f"  v{k} = f32[4096] reshape({prev})")
                lines.append(f"  r{k} = f32[64,64] reshape(v{k})")
                prev = f"r{k}"
        if block % 10 == 5:
            lines.append(
                f"  d{k} = f32[64,64] dot({prev}, w), lhs_contracting_dims={{1}}, "
                "rhs_contracting_dims={0}"
            )
            prev = f"d{k}"
    lines += [f"  ROOT out = f32[64,64] copy({prev})", "}", ""]
    return "\n".join(lines)


def _named(layers: int = 4, rope: int = 20, filler: int = 5_000) -> str:
    """20,000+ instructions: a RoPE table from an iota and constants, then the layers."""
    meta = 'metadata={op_name="jit(step)/rope/%s"}'
    lines = ["HloModule big_named", "", "ENTRY main {"]
    lines += ["  x = f32[64,64] parameter(0)", "  w = f32[64,64] parameter(1)"]
    lines.append(f"  pos = s32[64,64] iota(), iota_dimension=0, {meta % 'iota'}")
    lines.append(f"  posf = f32[64,64] convert(pos), {meta % 'convert'}")
    prev = "posf"
    for r in range(rope):
        lines.append(f"  rc{r} = f32[] constant(0.5), {meta % 'mul'}")
        lines.append(f"  rb{r} = f32[64,64] broadcast(rc{r}), dimensions={{}}, {meta % 'mul'}")
        lines.append(f"  rope{r} = f32[64,64] multiply({prev}, rb{r}), {meta % 'mul'}")
        prev = f"rope{r}"
    lines.append(f"  table = f32[64,64] cosine({prev}), {meta % 'cos'}")
    prev, k = "x", 0
    for layer in range(layers):
        scope = f'metadata={{op_name="jit(step)/layers.{layer}/%s"}}'
        lines.append(
            f"  d{layer} = f32[64,64] dot({prev}, w), lhs_contracting_dims={{1}}, "
            f"rhs_contracting_dims={{0}}, {scope % 'dot_general'}"
        )
        lines.append(f"  a{layer} = f32[64,64] add(d{layer}, table), {scope % 'add'}")
        prev = f"a{layer}"
        for _ in range(filler):
            k += 1
            lines.append(f"  t{k} = f32[64,64] tanh({prev}), {scope % 'tanh'}")
            prev = f"t{k}"
    lines += [f"  ROOT out = f32[64,64] copy({prev})", "}", ""]
    return "\n".join(lines)


def _first_view(text: str) -> tuple[list[int], dict, object]:
    data = hlo.open(text).graph()._data
    payload = graph_payload(data, "t", None)
    return first_view(data), payload, data


def test_without_op_names_the_view_opens_on_the_dots_and_names_them():
    program = hlo.open(_unnamed())
    assert sum(program.op_counts().values()) > 20_000
    opened, payload, _ = _first_view(_unnamed())
    groups = opened[1:]
    assert groups, "the view opens something below the root"
    for node in groups:
        assert payload["flops"][node] > 0
        # e.g. "dot ×2 (1.05 MFLOP) · 1600 ops": the op carrying the FLOPs, named
        assert re.fullmatch(r"dot( ×\d+)? \([\d.]+ \w?FLOP\) · \d+ ops", payload["label"][node])


def test_with_op_names_the_view_opens_on_the_layers_not_on_setup_constants():
    opened, payload, data = _first_view(_named())
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
