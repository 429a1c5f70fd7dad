"""The graph payload's shortcuts give the figures the plain definitions give (issue 24).

The payload works each distinct value out once (what a fusion holds, the JAX op of an op
name, the ending of an HLO line without its metadata) and labels parts from costs known
already; `tests/hlo/test_fingerprint.py` holds the payloads of real modules still. These
tests pin the cases those modules may not hold: ties between the ops of a part, library
calls inside fusions, metadata the parser splits with the other attributes, parameters
read in part and in whole.
"""

from __future__ import annotations

import pytest

from tpukit.graph import _graph_payload
from tpukit.graph._graph_costs import node_costs
from tpukit.graph._graph_data import PART, GraphTree
from tpukit.graph._graph_nodes import (
    OpFacts,
    category,
    display_text,
    part_label,
    what_it_does,
)
from tpukit.graph._graph_parts import PART_LABEL
from tpukit.graph._graph_wire import LineColumn
from tpukit.hlo import parse_hlo
from tpukit.hlo.analysis._cost import (
    computation_bytes,
    instruction_bytes,
    instruction_count,
    op_counts,
)
from tpukit.hlo.analysis._executed import RUNS_COMPUTATIONS, executed_bytes, instruction_tally

# Two dots of equal FLOPs (2 * 4*4 * 4 = 128 each) under different op names, then a third
# op; an elementwise fusion; a fusion whose first matmul is a cuBLAS call after a
# non-matmul custom call, with a dot later; a loop-free call so one line carries its
# metadata among attributes the parser splits.
MODULE = """HloModule shortcuts

fused_add {
  p0 = f32[4,4]{1,0} parameter(0)
  p1 = f32[4,4]{1,0} parameter(1)
  ROOT s = f32[4,4]{1,0} add(p0, p1)
}

fused_calls {
  q0 = f32[4,4]{1,0} parameter(0)
  c0 = f32[4,4]{1,0} custom-call(q0), custom_call_target="my_op"
  d0 = f32[4,4]{1,0} dot(c0, q0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT g0 = f32[4,4]{1,0} custom-call(d0, q0), custom_call_target="__cublas$gemm"
}

fused_slices {
  r0 = f32[64,4]{1,0} parameter(0)
  r1 = f32[64,4]{1,0} parameter(1)
  i0 = s32[] parameter(2)
  z0 = s32[] constant(0)
  a0 = f32[2,4]{1,0} dynamic-slice(r0, i0, z0), dynamic_slice_sizes={2,4}
  b0 = f32[2,4]{1,0} slice(r1), slice={[0:2], [0:4]}
  b1 = f32[64,4]{1,0} negate(r1)
  ROOT t0 = (f32[2,4]{1,0}, f32[2,4]{1,0}, f32[64,4]{1,0}) tuple(a0, b0, b1)
}

callee {
  k = f32[4,4]{1,0} parameter(0)
  ROOT k2 = f32[4,4]{1,0} negate(k)
}

ENTRY main {
  x = f32[4,4]{1,0} parameter(0)
  big = f32[64,4]{1,0} parameter(1)
  at = s32[] parameter(2)
  first = f32[4,4]{1,0} dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/first_dot"}
  second = f32[4,4]{1,0} dot(first, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/second_dot"}
  added = f32[4,4]{1,0} fusion(first, second), kind=kLoop, calls=fused_add, metadata={op_name="jit(f)/add"}
  lib = f32[4,4]{1,0} fusion(added), kind=kCustom, calls=fused_calls
  called = f32[4,4]{1,0} call(lib), to_apply=callee, metadata={op_name="jit(f)/call" source_file="f.py" source_line=3}
  sliced = (f32[2,4]{1,0}, f32[2,4]{1,0}, f32[64,4]{1,0}) fusion(big, big, at), kind=kLoop, calls=fused_slices
  ROOT out = (f32[4,4]{1,0}, (f32[2,4]{1,0}, f32[2,4]{1,0}, f32[64,4]{1,0})) tuple(called, sliced)
}
"""


def _instructions(module):
    return [instr for comp in module.computations.values() for instr in comp.instructions]


def test_a_part_named_by_equal_flops_takes_the_first_op_that_has_them():
    module = parse_hlo(MODULE)
    entry = module.entry
    dots = [entry["first"], entry["second"], entry["added"]]
    assert part_label(dots, module) == "first_dot (128 FLOP) · 3 ops"
    assert part_label(dots[::-1], module) == "second_dot (128 FLOP) · 3 ops"
    costs = [(128, 0), (128, 0), (0, 0)]
    assert OpFacts(module).part_label(dots, costs) == "first_dot (128 FLOP) · 3 ops"


def test_a_part_without_flops_is_named_by_bytes_then_by_count():
    module = parse_hlo(MODULE)
    entry = module.entry
    facts = OpFacts(module)
    parts = [entry["added"], entry["first"]]
    assert facts.part_label(parts, [(0, 10), (0, 30)]) == "first_dot (30 B) · 2 ops"
    assert facts.part_label(parts, [(0, 0), (0, 0)]) == "add · 2 ops"
    assert facts.part_label([entry["x"]], [(0, 0)]) == "parameters"


def test_op_facts_agree_with_the_plain_definitions_on_every_instruction():
    module = parse_hlo(MODULE)
    facts = OpFacts(module)
    for instr in _instructions(module):
        assert facts.category(instr) == category(instr, module), instr.name
        assert facts.name(instr) == what_it_does(instr, module), instr.name
    # The cuBLAS call comes after a dot: the dot is the first matmul the fusion holds.
    assert what_it_does(module.entry["lib"], module) == "dot"
    assert category(module.entry["lib"], module) == "matmul"


def test_display_text_cut_by_its_ending_is_the_line_cut_whole():
    module = parse_hlo(MODULE)
    tails: dict[str, str] = {}
    for instr in _instructions(module) * 2:  # the second time from the kept endings
        assert display_text(instr, tails) == display_text(instr), instr.name
    assert display_text(module.entry["called"], tails) == (
        "called = f32[4,4]{1,0} call(lib), to_apply=callee"
    )
    assert "metadata" not in display_text(module.entry["first"], tails)


def test_fused_parameters_read_in_part_count_what_their_slices_produce():
    module = parse_hlo(MODULE)
    # big is read twice: by a dynamic-slice alone (2*4*4 = 32 bytes) and by a slice and
    # a negate (whole: 64*4*4 = 1,024); at is read whole (4); the result writes
    # 32 + 32 + 1,024.
    assert instruction_bytes(module.entry["sliced"], module) == 32 + 1024 + 4 + 32 + 32 + 1024


def test_instruction_count_is_the_sum_of_the_op_counts():
    module = parse_hlo(MODULE)
    assert instruction_count(module) == sum(op_counts(module).values())


# A loop of 3 trips whose body calls a computation and picks a branch; the entry calls
# the body once more.
RUNS = """HloModule runs

callee {
  k = f32[16]{0} parameter(0)
  ROOT k2 = f32[16]{0} negate(k)
}

small {
  s = f32[16]{0} parameter(0)
  ROOT s2 = f32[16]{0} abs(s)
}

large {
  l = f32[16]{0} parameter(0)
  l1 = f32[16,16]{1,0} broadcast(l), dimensions={0}
  l2 = f32[16]{0} dot(l1, l), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT l3 = f32[16]{0} add(l2, l)
}

body {
  p = (s32[], f32[16]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[16]{0} get-tuple-element(p), index=1
  one = s32[] constant(1)
  next = s32[] add(i, one)
  c = f32[16]{0} call(x), to_apply=callee
  two = s32[] constant(2)
  odd = s32[] remainder(i, two)
  pick = f32[16]{0} conditional(odd, c, c), branch_computations={small, large}
  ROOT t = (s32[], f32[16]{0}) tuple(next, pick)
}

cond {
  p = (s32[], f32[16]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}

ENTRY main {
  zero = s32[] constant(0)
  x = f32[16]{0} parameter(0)
  init = (s32[], f32[16]{0}) tuple(zero, x)
  w = (s32[], f32[16]{0}) while(init), condition=cond, body=body
  again = (s32[], f32[16]{0}) call(w), to_apply=body
  ROOT out = f32[16]{0} get-tuple-element(again), index=1
}
"""


def test_the_graph_s_bytes_of_loops_calls_and_branches_are_their_tallies():
    """`executed_bytes` (what the graph shows for a loop, call or conditional) sums each
    computation's instruction bytes (`computation_bytes`); it gives the full tally's."""
    for text in (MODULE, RUNS):
        module = parse_hlo(text)
        tables = {name: computation_bytes(c, module) for name, c in module.computations.items()}
        ran = 0
        for instr in _instructions(module):
            assert tables[instr.computation][id(instr)] == instruction_bytes(instr, module)
            if instr.opcode in RUNS_COMPUTATIONS:
                found = executed_bytes(instr, module, lambda comp, t=tables: t[comp.name])
                assert found == instruction_tally(instr, module).bytes, instr.name
                ran += found
        assert ran > 0


# Operands named with and without ``%``, named twice, and one the computation lacks; a
# fusion with two results, a library call whose result ends in its scratch space, and an
# async copy: tuples of which `instruction_bytes` counts all or only a part.
NAMES = """HloModule names

fused_two {
  p = f32[4]{0} parameter(0)
  n = f32[4]{0} negate(p)
  ROOT t = (f32[4]{0}, f32[4]{0}) tuple(n, p)
}

ENTRY main {
  %a = f32[4]{0} parameter(0)
  b = f32[4]{0} add(%a, a)
  c = f32[4]{0} multiply(b, b)
  d = f32[4]{0} add(c, nothing)
  two = (f32[4]{0}, f32[4]{0}) fusion(d), kind=kLoop, calls=fused_two
  m = f32[2,2]{1,0} parameter(1)
  gemm = (f32[2,2]{1,0}, s8[64]{0}) custom-call(m, m), custom_call_target="__cublas$gemm"
  cs = (f32[4]{0}, f32[4]{0}, u32[]) copy-start(d)
  cd = f32[4]{0} copy-done(cs)
  ROOT out = (f32[4]{0}, f32[4]{0}) tuple(cd, c)
}
"""


def test_the_graph_s_own_bytes_of_every_instruction_are_its_instruction_bytes():
    """`node_costs` sums each instruction's operands from the tree's edges, not by name."""
    for text in (MODULE, RUNS, NAMES):
        module = parse_hlo(text)
        data = GraphTree(module)
        flops, nbytes, own = node_costs(data)
        shown = 0
        for node, instr in enumerate(data.instr):
            if instr is not None:
                assert own[node] == instruction_bytes(instr, module), instr.name
                if instr.opcode not in RUNS_COMPUTATIONS:
                    assert nbytes[node] == own[node], instr.name
                shown += 1
        assert shown >= len(module.entry.instructions)
    entry = {data.label[node]: bytes_ for node, bytes_ in enumerate(own) if data.instr[node]}
    assert entry["b"] == entry["c"] == 16 + 16 + 16  # an operand named twice is read twice
    assert entry["d"] == 16 + 16  # ``nothing`` is not in the computation
    assert entry["two"] == 16 + 32
    assert entry["gemm"] == 16 + 16 + 16  # not its scratch space
    assert entry["cs"] == 16 + 16


def test_texts_written_last_first_are_encoded_run_by_run_or_given_back_whole(monkeypatch):
    """`LineColumn` (a large module's HLO texts on the wire) encodes each run of texts once
    the pass from the last node has written it; the runs join into the lines `_lines` writes.
    A text with a line break, met after runs were encoded, gives every text back in order
    (the column then goes as JSON)."""
    monkeypatch.setattr(LineColumn, "step", 2)
    for broken, expected in ((None, None), (1, "x\ny")):
        column = LineColumn(5)
        for k in range(4, -1, -1):
            if not (k + 1) % 2:
                column.written_from(k + 1)
            column.texts[k] = expected if k == broken else f"t{k}"
        found = column.column()
        texts = ["t0", expected or "t1", "t2", "t3", "t4"]
        if broken is None:
            assert b"".join(found.pieces) == "\n".join(texts).encode()
            assert len(found.pieces) == 3
        else:
            assert found == texts


@pytest.mark.parametrize("op", ["dot_general", "x[0]", ""])
def test_the_jax_op_of_a_backward_op_name_is_read_from_its_head(monkeypatch, op):
    # The last component of ``jit(f)/transpose(jvp(g)/dense/dot)`` opens before its last
    # slash: it is the head's open component and the piece after that slash, the head
    # split once for the ops of a scope, never the whole name (15,000 of a large module's).
    from tpukit.graph import _graph_nodes
    from tpukit.hlo.analysis import forget_parsed_scopes, split_scope

    forget_parsed_scopes()
    split: list[str] = []
    monkeypatch.setattr(
        _graph_nodes, "split_scope", lambda text: split.append(text) or split_scope(text)
    )
    name = f"jit(f)/transpose(jvp(g)/layers.0/moe/experts.1/up/{op})"
    assert _graph_nodes._jax_op(name, "dot") == split_scope(name)[-1]
    assert split == ["jit(f)/transpose(jvp(g)/layers.0/moe/experts.1/up"]


def _chain_module(count: int) -> str:
    """A flat chain of ``count`` ops, a dot every fourth: too long for one frame, so
    staging makes stages of stages (`_graph_parts._nest`), each a part named by its work."""
    lines = ["  p0 = f32[64,64]{1,0} parameter(0)"]
    for k in range(1, count + 1):
        operand = "p0" if k == 1 else f"a{k - 1}"
        if k % 4 == 0:
            dims = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
            lines.append(f"  a{k} = f32[64,64]{{1,0}} dot({operand}, p0), {dims}")
        else:
            op = ("exponential", "negate", "tanh")[k % 4 - 1]
            lines.append(f"  a{k} = f32[64,64]{{1,0}} {op}({operand})")
    lines[-1] = "  ROOT " + lines[-1].lstrip()
    return "HloModule chain\nENTRY e {\n" + "\n".join(lines) + "\n}\n"


class _ReadOnce(list):
    """A column of figures that counts the reads of each place."""

    def __init__(self, values) -> None:
        super().__init__(values)
        self.reads: dict[int, int] = {}

    def __getitem__(self, k):
        self.reads[k] = self.reads.get(k, 0) + 1
        return super().__getitem__(k)


def test_nested_parts_are_named_from_each_instructions_figures_read_once():
    data = GraphTree(parse_hlo(_chain_module(300)))
    flops, _, own = (list(column) for column in node_costs(data))
    parts = [k for k, kind in enumerate(data.kind) if kind == PART and data.label[k] == PART_LABEL]
    nested = [k for k in parts if any(data.kind[c] == PART for c in data.children[k])]
    assert len(nested) > 5  # (stages of stages of stages: the case at stake)
    reference = OpFacts(data.module)  # each part named from its members, as written
    expected = list(data.label)
    for node in parts:
        members = _graph_payload._members(data, node)
        expected[node] = reference.members_label(members, data.instr, flops, own)
        if node in nested:
            expected[node] = f"{expected[node].rsplit(' · ', 1)[0]} · "
            expected[node] += f"{len(data.children[node])} stages"
    counted = _ReadOnce(flops)
    labels = _graph_payload._labels_with_parts_named(data, counted, own, OpFacts(data.module))
    assert labels == expected
    assert counted.reads and max(counted.reads.values()) == 1
