"""Parts: the optimized ops XLA:TPU made of one lowered op, cuts of the v6e pairs.

XLA:TPU expands some lowered ops into several (`tpukit.graph._diff_parts`): each ``fft``
into DFT matmuls, a ``gather`` into the gather and a fusion preparing its indices, a
``slice`` into ``slice-start`` and ``slice-done``. One of them at most pairs with the
lowered op; the others are its *parts*, found by ``op_name`` and source place. Each test
is a cut of a pair under ``benchmarks/hlo_pairs/v6e`` (libtpu's modules, see its
``sources.md``), backend configs and most ops left out.
"""

import re

from tests.graph._frames import fft_complex_head
from tpukit.graph._diff_view import diff_graph

_CALL = 'metadata={op_name="jit(fft_complex)/jit(fft)" stack_frame_id='
FFT_LOWERED = (
    fft_complex_head("lowered")
    + f"""
fft_0.2 {{
  Arg_0.3 = f32[8,64]{{1,0}} parameter(0)
  ROOT fft.3 = c64[8,33]{{1,0}} fft(Arg_0.3), fft_type=RFFT, fft_length={{64}}, metadata={{op_name="fft"}}
}}

fft_1.3 {{
  Arg_0.5 = c64[8,33]{{1,0}} parameter(0)
  ROOT fft.5 = f32[8,64]{{1,0}} fft(Arg_0.5), fft_type=IRFFT, fft_length={{64}}, metadata={{op_name="fft"}}
}}

ENTRY main.4 {{
  x.1 = f32[256]{{0}} parameter(0), metadata={{op_name="x"}}
  jit_fft_.3 = c64[256]{{0}} call(x.1), to_apply=fft.1, {_CALL}2}}
  abs.1 = f32[256]{{0}} abs(jit_fft_.3), metadata={{op_name="jit(fft_complex)/abs" stack_frame_id=5}}
  y.1 = f32[8,64]{{1,0}} parameter(1), metadata={{op_name="y"}}
  jit_fft_.4 = c64[8,33]{{1,0}} call(y.1), to_apply=fft_0.2, {_CALL}3}}
  jit_fft_.5 = f32[8,64]{{1,0}} call(jit_fft_.4), to_apply=fft_1.3, {_CALL}4}}
  ROOT tuple.1 = (f32[256]{{0}}, f32[8,64]{{1,0}}) tuple(abs.1, jit_fft_.5)
}}
"""
)
FFT_OPTIMIZED = (
    fft_complex_head("optimized")
    + f"""
%fused_computation.12 () -> f32[256] {{
  %constant.157 = f32[]{{:T(128)}} constant(0), metadata={{op_name="jit(fft_complex)/jit(fft)/convert_element_type" stack_frame_id=2}}
  %broadcast.69 = f32[256,256]{{1,0:T(8,128)}} broadcast(%constant.157), dimensions={{}}, {_CALL}2}}
  %iota.29 = u32[256,256]{{1,0:T(8,128)}} iota(), iota_dimension=1, {_CALL}2}}
  %convert.14 = f32[256,256]{{1,0:T(8,128)}} convert(%iota.29), {_CALL}2}}
  %cosine.10 = f32[256,256]{{1,0:T(8,128)}} cosine(%convert.14), {_CALL}2}}
  %multiply.37 = f32[256,256]{{1,0:T(8,128)}} multiply(%broadcast.69, %cosine.10)
  ROOT %reduce.4 = f32[256]{{0:T(256)S(1)}} reduce(%multiply.37, %constant.157), dimensions={{1}}, to_apply=%add, {_CALL}2}}
}}
%add (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[]{{:T(128)}} parameter(0)
  %b = f32[]{{:T(128)}} parameter(1)
  ROOT %sum = f32[]{{:T(128)}} add(%a, %b)
}}
%fused_computation.6 (param_0.11: f32[8,64]) -> f32[8,64] {{
  %param_0.11 = f32[8,64]{{1,0:T(8,128)S(1)}} parameter(0)
  ROOT %negate.2 = f32[8,64]{{1,0:T(8,128)S(1)}} negate(%param_0.11), {_CALL}3}}
}}
ENTRY %main.4 (x.1: f32[256], y.1: f32[8,64]) -> (f32[256], f32[8,64]) {{
  %x.1 = f32[256]{{0:T(256)}} parameter(0), metadata={{op_name="x"}}
  %y.1 = f32[8,64]{{1,0:T(8,128)}} parameter(1), metadata={{op_name="y"}}
  %fusion.5 = f32[256]{{0:T(256)S(1)}} fusion(), kind=kLoop, calls=%fused_computation.12, {_CALL}2}}
  %abs.10 = f32[256]{{0:T(256)}} abs(%fusion.5), metadata={{op_name="jit(fft_complex)/abs" stack_frame_id=6}}
  %fusion.3 = f32[8,64]{{1,0:T(8,128)S(1)}} fusion(%y.1), kind=kLoop, calls=%fused_computation.6, {_CALL}3}}
  %slice.1 = f32[8,31]{{1,0:T(8,128)S(1)}} slice(%fusion.3), slice={{[0:8], [1:32]}}, {_CALL}4}}
  %reverse.0 = f32[8,31]{{1,0:T(8,128)S(1)}} reverse(%slice.1), dimensions={{1}}, {_CALL}4}}
  %negate.1 = f32[8,31]{{1,0:T(8,128)S(1)}} negate(%reverse.0), {_CALL}4}}
  %pad.1 = f32[8,64]{{1,0:T(8,128)}} pad(%negate.1, %x.1), padding=0_0x0_33, {_CALL}4}}
  ROOT %tuple.19 = (f32[256]{{0:T(256)}}, f32[8,64]{{1,0:T(8,128)}}) tuple(%abs.10, %pad.1)
}}
"""
)


def test_each_fft_call_gets_the_ops_xla_made_of_it_by_source_place():
    """Three ``jnp.fft`` calls share the op_name ``jit(fft_complex)/jit(fft)`` and XLA
    inlined them; each optimized op is a part of the call at its own source place: the
    frames of line 140 differ only in their columns, and the two modules number frames
    apart (cut of ``fft_complex``: an op or two of each FFT's DFT)."""
    view = diff_graph(FFT_LOWERED, FFT_OPTIMIZED, labels=("lowered", "optimized"))
    assert view.matched_ops == {"abs.1": "abs.10"}, view.matched_ops
    assert view.part_ops == {
        "fusion.5": ["jit_fft_.3"],
        "fusion.3": ["jit_fft_.4"],
        **{name: ["jit_fft_.5"] for name in ("slice.1", "reverse.0", "negate.1", "pad.1")},
    }, view.part_ops
    # the calls' ops are not removed: their work is in the parts
    assert not view.ops_added and not view.ops_removed, (view.ops_added, view.ops_removed)
    marks = view._marks()
    part = view._sides[1].data.label.index("fusion.3")
    call = view._sides[0].data.label.index("jit_fft_.4")
    assert marks["parts"][1][str(part)] == [call] and marks["status"][1][str(part)] == "part"
    assert marks["status"][0][str(call)] == "split" and marks["link"][1][str(part)] == call


def test_without_a_source_place_an_op_is_a_part_of_every_call_its_op_name_names():
    """The same cut printed without stack frames: nothing tells the three calls apart,
    so each op is a part of all three, said so, never one picked."""
    strip = re.compile(r" stack_frame_id=\d+")
    view = diff_graph(
        strip.sub("", FFT_LOWERED), strip.sub("", FFT_OPTIMIZED), labels=("lowered", "optimized")
    )
    calls = ["jit_fft_.3", "jit_fft_.4", "jit_fft_.5"]
    assert view.part_ops == dict.fromkeys(
        ("fusion.5", "fusion.3", "slice.1", "reverse.0", "negate.1", "pad.1"), calls
    ), view.part_ops


def test_a_lowered_program_of_ffts_says_why_its_flops_are_below_the_optimized_ones():
    """FLOPs count dots and convolutions; an ``fft`` is neither, and XLA:TPU makes each
    into DFT matmuls that are: the whole program's note says so, with the FFTs' FLOPs as
    XLA counts them (2 x 4 x log2(n) x input elements: 16,384 + 24,576 + 12,672)."""
    view = diff_graph(FFT_LOWERED, FFT_OPTIMIZED, labels=("lowered", "optimized"))
    note = view._marks()["notes"][0]
    assert "lowered's 3 fft ops (53.6 kFLOP as XLA counts them) are not in its FLOPs" in note
    assert "optimized has none" in note and "fft ops" in repr(view)
    assert '<div class="tkd-note">FLOPs count dots and convolutions: ' in view._repr_html_()


def test_a_gathers_index_fusion_and_a_slice_done_are_parts_of_the_paired_lowered_ops():
    """XLA:TPU prepares a gather's indices in a fusion of their own and splits a slice
    into ``slice-start`` and ``slice-done``; the gather and the start pair with the
    lowered ops, the index fusion and the done are their parts (cut of
    ``gather_scatter``)."""
    gather = 'metadata={op_name="jit(gather_scatter)/gather"}'
    sliced = 'metadata={op_name="jit(gather_scatter)/slice"}'
    lowered = f"""HloModule jit_gather_scatter
ENTRY main.7 {{
  table.1 = f32[1000,64]{{1,0}} parameter(0)
  idx.1 = s32[32]{{0}} parameter(1)
  broadcast_in_dim.6 = s32[32,1]{{1,0}} reshape(idx.1)
  gather.3 = f32[32,64]{{1,0}} gather(table.1, broadcast_in_dim.6), offset_dims={{1}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,64}}, {gather}
  slice.1 = f32[32,64]{{1,0}} slice(table.1), slice={{[0:32], [0:64]}}, {sliced}
  ROOT tuple.1 = (f32[32,64]{{1,0}}, f32[32,64]{{1,0}}) tuple(gather.3, slice.1)
}}"""
    optimized = f"""HloModule jit_gather_scatter, is_scheduled=true
%fused_computation.1 (param_0.1: s32[32]) -> s32[32,1] {{
  %param_0.1 = s32[32]{{0:T(256)}} parameter(0)
  %constant.1 = s32[]{{:T(128)}} constant(0)
  %broadcast.1 = s32[32]{{0:T(256)}} broadcast(%constant.1), dimensions={{}}
  %constant.2 = s32[]{{:T(128)}} constant(999)
  %broadcast.2 = s32[32]{{0:T(256)}} broadcast(%constant.2), dimensions={{}}
  %clamp.1 = s32[32]{{0:T(256)}} clamp(%broadcast.1, %param_0.1, %broadcast.2), {gather}
  ROOT %bitcast.1 = s32[32,1]{{1,0:T(8,128)}} bitcast(%clamp.1)
}}
%fused_computation.2 (param_0.2: f32[1000,64], param_1.2: s32[32,1]) -> f32[32,64] {{
  %param_0.2 = f32[1000,64]{{0,1:T(8,128)}} parameter(0)
  %param_1.2 = s32[32,1]{{1,0:T(8,128)}} parameter(1)
  ROOT %gather.1 = f32[32,64]{{1,0:T(8,128)}} gather(%param_0.2, %param_1.2), offset_dims={{1}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,64}}, {gather}
}}
ENTRY %main.7 (table.1: f32[1000,64], idx.1: s32[32]) -> (f32[32,64], f32[32,64]) {{
  %table.1 = f32[1000,64]{{0,1:T(8,128)}} parameter(0)
  %idx.1 = s32[32]{{0:T(256)}} parameter(1)
  %pad_clamp_fusion = s32[32,1]{{1,0:T(8,128)}} fusion(%idx.1), kind=kLoop, calls=%fused_computation.1, {gather}
  %gather_fusion = f32[32,64]{{1,0:T(8,128)}} fusion(%table.1, %pad_clamp_fusion), kind=kLoop, calls=%fused_computation.2, {gather}
  %slice-start = ((f32[1000,64]{{0,1:T(8,128)}}), f32[32,64]{{0,1:T(8,128)S(1)}}, s32[]{{:S(2)}}) slice-start(%table.1), slice={{[0:32], [0:64]}}, {sliced}
  %slice-done = f32[32,64]{{0,1:T(8,128)S(1)}} slice-done(%slice-start), {sliced}
  ROOT %tuple.2 = (f32[32,64]{{1,0:T(8,128)}}, f32[32,64]{{0,1:T(8,128)S(1)}}) tuple(%gather_fusion, %slice-done)
}}"""
    view = diff_graph(lowered, optimized, labels=("lowered", "optimized"))
    assert view.matched_ops["gather.3"] == "gather_fusion", view.matched_ops
    assert view.matched_ops["slice.1"] == "slice-start", view.matched_ops
    assert view.part_ops == {"pad_clamp_fusion": ["gather.3"], "slice-done": ["slice.1"]}
    assert "2 parts of an op XLA split" in repr(view)


def test_of_two_ops_one_op_name_names_the_part_is_of_the_one_its_data_flows_with():
    """LeNet-5's conv2 input and weight gradients are two convolutions of one op_name and
    one source line; XLA:CPU lays the input gradient out in a ``bitcast_copy_fusion`` of
    that op_name too. It is a part of the input gradient: the op it reads is that one's
    pair (cut of the ``lenet5_step`` pair of ``benchmarks/hlo_diff_match.py``, XLA:CPU)."""
    conv = 'metadata={op_name="jit(train_step)/transpose(jvp(model (LeNet5)))/conv2 (Conv)/conv_general_dilated"}'
    lowered = f"""HloModule jit_train_step
ENTRY main.29 {{
  g.1 = f32[32,14,14,16]{{3,2,1,0}} parameter(0)
  w.1 = f32[5,5,6,16]{{3,2,1,0}} parameter(1)
  x.1 = f32[32,14,14,6]{{3,2,1,0}} parameter(2)
  conv_general_dilated.8 = f32[32,14,14,6]{{3,2,1,0}} convolution(g.1, w.1), window={{size=5x5 pad=4_4x4_4}}, dim_labels=b01f_01oi->b01f, {conv}
  conv_general_dilated.7 = f32[5,5,6,16]{{3,2,1,0}} convolution(x.1, g.1), window={{size=10x10}}, dim_labels=f01b_i01o->01bf, {conv}
  ROOT tuple.1 = (f32[32,14,14,6]{{3,2,1,0}}, f32[5,5,6,16]{{3,2,1,0}}) tuple(conv_general_dilated.8, conv_general_dilated.7)
}}"""
    optimized = f"""HloModule jit_train_step, is_scheduled=true
%fused_computation (param_0: f32[6,14,14,32], param_1: f32[32,14,14,16]) -> f32[6,5,5,16] {{
  %param_0 = f32[6,14,14,32]{{3,2,1,0}} parameter(0)
  %param_1 = f32[32,14,14,16]{{3,2,1,0}} parameter(1)
  ROOT %convolution.3 = f32[6,5,5,16]{{3,2,1,0}} convolution(%param_0, %param_1), window={{size=10x10}}, dim_labels=b01f_01io->b01f, {conv}
}}
%fused_computation.50 (param_0.80: f32[32,14,14,6]) -> f32[37632,1,1,1,1] {{
  %param_0.80 = f32[32,14,14,6]{{3,2,1,0}} parameter(0)
  %bitcast.22 = f32[37632,1,1,1,1]{{0,4,3,2,1}} bitcast(%param_0.80), {conv}
  ROOT %copy.19 = f32[37632,1,1,1,1]{{4,3,2,1,0}} copy(%bitcast.22), {conv}
}}
ENTRY %main.29 (g.1: f32[32,14,14,16], w.1: f32[5,5,16,6], x.1: f32[6,14,14,32]) -> (f32[37632,1,1,1,1], f32[6,5,5,16]) {{
  %g.1 = f32[32,14,14,16]{{3,2,1,0}} parameter(0)
  %w.1 = f32[5,5,16,6]{{3,2,1,0}} parameter(1)
  %x.1 = f32[6,14,14,32]{{3,2,1,0}} parameter(2)
  %convolution = f32[32,14,14,6]{{3,2,1,0}} convolution(%g.1, %w.1), window={{size=5x5 pad=4_4x4_4}}, dim_labels=b01f_01io->b01f, {conv}
  %bitcast_copy_fusion = f32[37632,1,1,1,1]{{4,3,2,1,0}} fusion(%convolution), kind=kLoop, calls=%fused_computation.50, {conv}
  %ynn_fusion = f32[6,5,5,16]{{3,2,1,0}} fusion(%x.1, %g.1), kind=kCustom, calls=%fused_computation, {conv}
  ROOT %tuple.2 = (f32[37632,1,1,1,1]{{4,3,2,1,0}}, f32[6,5,5,16]{{3,2,1,0}}) tuple(%bitcast_copy_fusion, %ynn_fusion)
}}"""
    view = diff_graph(lowered, optimized, labels=("lowered", "optimized"))
    assert view.matched_ops == {
        "conv_general_dilated.8": "convolution",
        "conv_general_dilated.7": "ynn_fusion",
    }, view.matched_ops
    assert view.part_ops == {"bitcast_copy_fusion": ["conv_general_dilated.8"]}, view.part_ops
