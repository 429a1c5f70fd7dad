"""The diff on real TPU modules: lowered against optimized, cuts of the v6e pairs.

Each test is a cut of one pair under ``benchmarks/hlo_pairs/v6e`` (libtpu's modules, see
its ``sources.md``): the lowered ops and the optimized ones they became, with the
backend configs and most metadata left out. Each checks one way XLA:TPU rewrites an op
that the diff must see through (``benchmarks/hlo_diff_match.py`` measures them all).
(These live beside ``test_diff_view.py``, which is at the 600-line limit.)
"""

from tpukit.graph._diff_view import diff_graph


def test_a_conditional_xla_cloned_keeps_its_branches_matched():
    """XLA names the conditional it rebuilds ``cond.9.clone`` and its branches take
    and return tuples: the branches are still the lowered ``cond``'s, and their ops pair
    (cut of ``cond_switch``: the second ``lax.switch``, two of its three branches)."""
    lowered = """HloModule jit_cond_switch
region_4.5 {
  cond.4 = f32[64]{0} parameter(0)
  ROOT mul.3 = f32[64]{0} multiply(cond.4, cond.4), metadata={op_name="jit(cond_switch)/cond/branch_1_fun/mul"}
}
region_5.6 {
  cond.6 = f32[64]{0} parameter(0)
  ROOT exp.1 = f32[64]{0} exponential(cond.6), metadata={op_name="jit(cond_switch)/cond/branch_2_fun/exp"}
}
ENTRY main.7 {
  x.5 = f32[64]{0} parameter(0)
  i.1 = s32[] parameter(1)
  ROOT cond.9 = f32[64]{0} conditional(i.1, x.5, x.5), branch_computations={region_4.5, region_5.6}, metadata={op_name="jit(cond_switch)/cond"}
}"""
    optimized = """HloModule jit_cond_switch, is_scheduled=true
%region_4.5 (cond.1: (f32[64])) -> (f32[64]) {
  %cond.1 = (f32[64]{0:T(128)S(1)}) parameter(0)
  %get-tuple-element.4 = f32[64]{0:T(128)S(1)} get-tuple-element(%cond.1), index=0
  %mul.3 = f32[64]{0:T(128)S(1)} multiply(%get-tuple-element.4, %get-tuple-element.4), metadata={op_name="jit(cond_switch)/cond/branch_1_fun/mul"}
  ROOT %tuple.13 = (f32[64]{0:T(128)S(1)}) tuple(%mul.3)
}
%region_5.6 (cond.3: (f32[64])) -> (f32[64]) {
  %cond.3 = (f32[64]{0:T(128)S(1)}) parameter(0)
  %get-tuple-element.5 = f32[64]{0:T(128)S(1)} get-tuple-element(%cond.3), index=0
  %exp.1 = f32[64]{0:T(128)S(1)} exponential(%get-tuple-element.5), metadata={op_name="jit(cond_switch)/cond/branch_2_fun/exp"}
  ROOT %tuple.14 = (f32[64]{0:T(128)S(1)}) tuple(%exp.1)
}
ENTRY %main.7 (x.5: f32[64], i.1: s32[]) -> f32[64] {
  %i.1 = s32[]{:T(128)} parameter(1)
  %x.5 = f32[64]{0:T(128)} parameter(0)
  %tuple.15 = (f32[64]{0:T(128)S(1)}) tuple(%x.5)
  %cond.9.clone = (f32[64]{0:T(128)S(1)}) conditional(%i.1, %tuple.15, %tuple.15), branch_computations={%region_4.5, %region_5.6}, metadata={op_name="jit(cond_switch)/cond"}
  ROOT %get-tuple-element.13 = f32[64]{0:T(128)S(1)} get-tuple-element(%cond.9.clone), index=0
}"""
    view = diff_graph(lowered, optimized, labels=("lowered", "optimized"))
    assert view.matched_ops == {"mul.3": "mul.3", "exp.1": "exp.1"}, view.matched_ops
    assert not view.ops_added and not view.ops_removed


def test_a_dot_pairs_with_the_convolution_fusion_xla_tpu_made_of_it():
    """XLA:TPU emits a dot as a ``convolution`` in a kOutput fusion whose operands pass
    through nested ``bitcast_fusion`` wrappers: its work is the contraction, and it pairs with
    the lowered dot (cut of ``attention``: the second einsum, its softmax input a
    parameter here)."""
    op_name = 'metadata={op_name="jit(attention)/bhqk,bhkd->bhqd/dot_general"}'
    lowered = f"""HloModule jit_attention
ENTRY main.4 {{
  p.1 = bf16[2,4,128,128]{{3,2,1,0}} parameter(0)
  v.1 = bf16[2,4,128,64]{{3,2,1,0}} parameter(1)
  ROOT dot_general.3 = bf16[2,4,128,64]{{3,2,1,0}} dot(p.1, v.1), lhs_batch_dims={{0,1}}, lhs_contracting_dims={{3}}, rhs_batch_dims={{0,1}}, rhs_contracting_dims={{2}}, {op_name}
}}"""
    optimized = f"""HloModule jit_attention, is_scheduled=true
%bitcast_fusion.1 (bitcast_input.1: bf16[2,4,128,64]) -> bf16[2,4,128,64] {{
  %bitcast_input.1 = bf16[2,4,128,64]{{2,3,1,0:T(8,128)(2,1)S(1)}} parameter(0)
  ROOT %bitcast.1 = bf16[2,4,128,64]{{2,3,1,0:T(8,128)(2,1)}} bitcast(%bitcast_input.1)
}}
%fused_computation.7 (param_0.15: bf16[2,4,128,64], param_1.25: bf16[2,4,128,128]) -> bf16[2,4,128,64] {{
  %param_0.15 = bf16[2,4,128,64]{{2,3,1,0:T(8,128)(2,1)S(1)}} parameter(0)
  %fusion.12 = bf16[2,4,128,64]{{2,3,1,0:T(8,128)(2,1)}} fusion(%param_0.15), kind=kLoop, calls=%bitcast_fusion.1
  %param_1.25 = bf16[2,4,128,128]{{2,3,1,0:T(8,128)(2,1)}} parameter(1)
  ROOT %convolution-base-dilated.8 = bf16[2,4,128,64]{{2,3,1,0:T(8,128)(2,1)}} convolution(%fusion.12, %param_1.25), window={{size=2x4 stride=2x4 pad=1_1x3_3 lhs_dilate=1x3 rhs_reversal=1x1}}, dim_labels=01fb_01oi->01fb, {op_name}
}}
ENTRY %main.4 (p.1: bf16[2,4,128,128], v.1: bf16[2,4,128,64]) -> bf16[2,4,128,64] {{
  %p.1 = bf16[2,4,128,128]{{2,3,1,0:T(8,128)(2,1)}} parameter(0)
  %v.1 = bf16[2,4,128,64]{{2,3,1,0:T(8,128)(2,1)}} parameter(1)
  ROOT %fusion.5 = bf16[2,4,128,64]{{2,3,1,0:T(8,128)(2,1)}} fusion(%v.1, %p.1), kind=kOutput, calls=%fused_computation.7, {op_name}
}}"""
    view = diff_graph(lowered, optimized, labels=("lowered", "optimized"))
    assert view.matched_ops == {"dot_general.3": "fusion.5"}, view.matched_ops


def test_an_async_start_pairs_with_the_lowered_op_it_begins():
    """XLA:TPU splits a lowered ``slice`` into ``slice-start`` and ``slice-done`` (a
    DMA): the start does the slice's work and pairs with it (cut of ``gather_scatter``:
    the ``table[:32]`` that ``take_along_axis`` reads)."""
    op_name = 'metadata={op_name="jit(gather_scatter)/slice"}'
    lowered = f"""HloModule jit_gather_scatter
ENTRY main.7 {{
  table.1 = f32[1000,64]{{1,0}} parameter(0)
  ROOT slice.1 = f32[32,64]{{1,0}} slice(table.1), slice={{[0:32], [0:64]}}, {op_name}
}}"""
    optimized = f"""HloModule jit_gather_scatter, is_scheduled=true
ENTRY %main.7 (table.1: f32[1000,64]) -> f32[32,64] {{
  %table.1 = f32[1000,64]{{0,1:T(8,128)}} parameter(0)
  %slice-start = ((f32[1000,64]{{0,1:T(8,128)}}), f32[32,64]{{0,1:T(8,128)S(1)}}, s32[]{{:S(2)}}) slice-start(%table.1), slice={{[0:32], [0:64]}}, {op_name}
  ROOT %slice-done = f32[32,64]{{0,1:T(8,128)S(1)}} slice-done(%slice-start), {op_name}
}}"""
    view = diff_graph(lowered, optimized, labels=("lowered", "optimized"))
    assert view.matched_ops == {"slice.1": "slice-start"}, view.matched_ops


def test_a_device_layout_does_not_make_a_rewritten_op_unlike():
    """XLA divides by a constant as a multiply by its inverse; the op keeps the ``div``
    in its op_name. TPU's tiling (``f32[]{:T(128)}``) is no layout of the program, so the
    two are as alike as on CPU and pair (cut of ``remat_grad``: the mean's division)."""
    op_name = 'metadata={op_name="jit(remat_grad)/jvp()/div"}'
    lowered = f"""HloModule jit_remat_grad
ENTRY main.2 {{
  s.1 = f32[] parameter(0)
  constant.4 = f32[] constant(32768)
  ROOT div.1 = f32[] divide(s.1, constant.4), {op_name}
}}"""
    optimized = f"""HloModule jit_remat_grad, is_scheduled=true
ENTRY %main.2 (s.1: f32[]) -> f32[] {{
  %s.1 = f32[]{{:T(128)}} parameter(0)
  %constant = f32[]{{:T(128)}} constant(3.05175781e-05)
  ROOT %multiply = f32[]{{:T(128)}} multiply(%s.1, %constant), {op_name}
}}"""
    view = diff_graph(lowered, optimized, labels=("lowered", "optimized"))
    assert view.matched_ops == {"div.1": "multiply"}, view.matched_ops
