"""The numbers on HLO nodes, each derived by hand: FLOPs, bytes and categories.

A convolution counts only the taps that read a real input element, as XLA's own cost
analysis does: a strided convolution's input gradient is an input-dilated convolution
whose window mostly reads the zeros put between its input's elements, and XLA:TPU writes
a batched matmul as a convolution whose batch dims are input-dilated spatial dims; library calls carry scratch
buffers; asynchronous pairs hand one buffer from start to done; ``opt-barrier`` moves
nothing. The graph's header counts instructions, not the groups drawn around them.
"""

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from tpukit.graph._graph_data import INSTRUCTION
from tpukit.graph._graph_payload import graph_payload
from tpukit.hlo import (
    fusions_of,
    graph,
    instruction_bytes,
    instruction_flops,
    op_category,
    parse_hlo,
)


def conv(x, w, padding):
    return lax.conv_general_dilated(
        x, w, (2, 2), padding, dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_a_stride_2_convolutions_input_gradient_counts_what_the_convolution_counts(padding):
    """Both count the (output, tap) pairs that meet a real input element, as XLA's
    HloCostAnalysis does (the gradient's pairs are the forward's, mirrored).

    Until session 51 ``[SAME]`` expected 8 x 3 = 24 taps per side, the padding taps of
    the last output included (73,728 FLOPs): tpukit counted every tap of an undilated
    window, and an input-dilated one with stride 1 as ``inputs x taps``, a shortcut that
    over-counted XLA:TPU's batched matmuls written as convolutions 2x. Counting by XLA's
    rule everywhere, SAME's last output (position 7, taps 14..16 of a 16-long input
    padded by 0 low and 1 high) has 2 real taps: 23 per side, 67,712 FLOPs, what
    ``cost_analysis()`` says for both."""
    x, w = jnp.ones((2, 16, 16, 8)), jnp.ones((3, 3, 8, 4))
    forward = parse_hlo(jax.jit(lambda x, w: conv(x, w, padding)).lower(x, w).compile().as_text())
    backward = parse_hlo(
        jax.jit(jax.grad(lambda x, w: conv(x, w, padding).sum())).lower(x, w).compile().as_text()
    )
    (fwd,) = [i for i in forward.instructions() if i.opcode == "convolution"]
    (grad,) = [i for i in backward.instructions() if i.opcode == "convolution"]
    assert "lhs_dilate=2x2" in grad.attributes["window"]
    # 2 x batch 2 x 4 output features x 8 input features x real taps per side: VALID 7
    # outputs x 3 taps; SAME 8 x 3 less the high padding's one
    side = {"VALID": 7 * 3, "SAME": 8 * 3 - 1}[padding]
    expected = 2 * 2 * 4 * 8 * side * side
    assert instruction_flops(fwd, forward) == expected
    assert instruction_flops(grad, backward) == expected  # was 16 x 16 x 9 taps per output


def test_a_dilated_strided_window_counts_only_taps_on_real_elements():
    module = parse_hlo(
        """HloModule dilated
ENTRY e {
  x = f32[1,3,1]{2,1,0} parameter(0)
  w = f32[2,1,1]{2,1,0} parameter(1)
  ROOT c = f32[1,2,1]{2,1,0} convolution(x, w), window={size=2 stride=2 lhs_dilate=2}, dim_labels=b0f_0io->b0f
}"""
    )
    # the dilated input x0 0 x1 0 x2: output 0 reads (x0, 0), output 1 reads (x1, 0)
    assert instruction_flops(module.instruction("c"), module) == 2 * 2


# Cut from a real XLA:TPU module: the two kinds of convolution in the optimized
# attention of Junyi-99/hlo-visualizer (examples/v6e-1/attention.after.hlo, commit
# 2b240a3c, libtpu 0.0.48), operands renamed to parameters. softmax(QK^T / 8) V with
# B=2, H=4, S=128, D=64: each is a batched matmul written as a convolution whose batch
# dims (2, 4) are spatial, input-dilated so that one tap per output meets a real element.
TPU_ATTENTION = """HloModule attention_v6e_cut
ENTRY e {
  q = bf16[2,4,128,64]{2,3,1,0:T(8,128)(2,1)} parameter(0)
  k = bf16[2,4,128,64]{2,3,1,0:T(8,128)(2,1)} parameter(1)
  v = bf16[2,4,128,64]{2,3,1,0:T(8,128)(2,1)} parameter(2)
  p = bf16[2,4,128,128]{2,3,1,0:T(8,128)(2,1)} parameter(3)
  qk = bf16[2,4,128,128]{2,3,1,0:T(8,128)(2,1)} convolution(q, k), window={size=2x4 stride=1x3 lhs_dilate=2x4}, dim_labels=01bf_01oi->01bf
  ROOT pv = bf16[2,4,128,64]{2,3,1,0:T(8,128)(2,1)} convolution(v, p), window={size=2x4 stride=2x4 pad=1_1x3_3 lhs_dilate=1x3 rhs_reversal=1x1}, dim_labels=01fb_01oi->01fb
}"""


def test_xla_tpus_batched_matmuls_written_as_convolutions_count_as_the_matmuls():
    """QK^T and PV are 2 x (2 x 4) x 128 x 128 x 64 FLOPs each, what XLA's cost analysis
    counts. Each counted 2x before session 51: QK^T's dilated dims (stride 1) as every
    input element meeting every tap (true only with full padding), PV's undilated dim 0
    with its padding taps (``pad=1_1``) among the 2 x 2 it counted."""
    module = parse_hlo(TPU_ATTENTION)
    matmul = 2 * (2 * 4) * 128 * 128 * 64
    assert instruction_flops(module.instruction("qk"), module) == matmul == 16_777_216
    assert instruction_flops(module.instruction("pv"), module) == matmul


GEMM = """HloModule gemm
ENTRY e {
  a = f32[64,128]{1,0} parameter(0)
  b = f32[128,32]{1,0} parameter(1)
  g = (f32[64,32]{1,0}, s8[4194304]{0}) custom-call(a, b), custom_call_target="__cublas$gemm", backend_config={"gemm_backend_config":{"lhs_contracting_dimensions":["1"]}}
  ROOT r = f32[64,32]{1,0} get-tuple-element(g), index=0
}"""


def test_a_cublas_gemm_does_not_count_its_workspace():
    module = parse_hlo(GEMM)
    gemm = module.instruction("g")
    assert instruction_bytes(gemm, module) == (64 * 128 + 128 * 32 + 64 * 32) * 4
    assert instruction_flops(gemm, module) == 2 * 64 * 32 * 128
    assert op_category(gemm) == "matmul"


ASYNC = """HloModule pairs
ENTRY e {
  p = f32[256]{0} parameter(0)
  cs = (f32[256]{0:S(1)}, f32[256]{0}, u32[]) copy-start(p)
  cd = f32[256]{0:S(1)} copy-done(cs)
  ags = (f32[256]{0}, f32[1024]{0}) all-gather-start(p), replica_groups={{0,1,2,3}}, dimensions={0}
  agd = f32[1024]{0} all-gather-done(ags)
  t = (f32[256]{0}, f32[1024]{0}) tuple(cd, agd)
  ob = (f32[256]{0}, f32[1024]{0}) opt-barrier(t)
  ROOT r = f32[256]{0} get-tuple-element(ob), index=0
}"""


def test_async_pairs_count_their_bytes_once_at_the_start():
    module = parse_hlo(ASYNC)
    nbytes = {i.name: instruction_bytes(i, module) for i in module.entry}
    assert nbytes["cs"] == 1024 + 1024  # reads p, writes the copy
    assert nbytes["cd"] == 0
    assert nbytes["ags"] == 1024 + 4096  # reads p, writes the gathered array
    assert nbytes["agd"] == 0


def test_opt_barrier_is_control_flow_and_moves_nothing():
    module = parse_hlo(ASYNC)
    barrier = module.instruction("ob")
    assert op_category(barrier) == op_category("opt-barrier") == "control_flow"
    assert instruction_bytes(barrier, module) == 0


@pytest.mark.parametrize(
    ("opcode", "category"),
    [
        ("count-leading-zeros", "elementwise"),
        ("sinh", "elementwise"),
        ("topk", "data_movement"),
        ("collective-reduce", "collective"),
        ("scan", "control_flow"),
        ("batch-norm-training", "reduction"),
        ("replica-id", "parameter/constant"),
    ],
)
def test_opcodes_xla_has_added_have_their_category(opcode, category):
    assert op_category(opcode) == category


def test_the_header_counts_instructions_not_groups():
    g = graph(ASYNC)
    payload = graph_payload(g._data, "pairs", None)
    instructions = sum(1 for kind in payload["kind"] if kind == INSTRUCTION)
    assert payload["instructions"] == instructions == g.num_instructions == 8
    assert len(payload["kind"]) > instructions  # the groups are there, and not counted


def test_a_fusions_source_line_is_where_most_of_its_ops_came_from():
    # XLA copies one op's metadata onto the fusion; here the maximum's line is that of an
    # earlier caller of a cached jax.nn.relu, while the add and the multiply are the user's.
    module = parse_hlo(
        """HloModule m
fused {
  p0 = f32[8]{0} parameter(0)
  p1 = f32[8]{0} parameter(1)
  add = f32[8]{0} add(p0, p1), metadata={op_name="jit(f)/add" source_file="/u/train.py" source_line=12}
  mul = f32[8]{0} multiply(add, add), metadata={op_name="jit(f)/mul" source_file="/u/train.py" source_line=12}
  zero = f32[] constant(0)
  b = f32[8]{0} broadcast(zero), dimensions={}
  ROOT max = f32[8]{0} maximum(mul, b), metadata={op_name="jit(f)/max" source_file="<ipython-input-1>" source_line=3}
}
ENTRY main {
  x = f32[8]{0} parameter(0)
  y = f32[8]{0} parameter(1)
  ROOT f = f32[8]{0} fusion(x, y), kind=kLoop, calls=fused, metadata={op_name="jit(f)/max" source_file="<ipython-input-1>" source_line=3}
}
"""
    )
    (fusion,) = fusions_of(module)
    assert fusion.source_location == "train.py:12"
