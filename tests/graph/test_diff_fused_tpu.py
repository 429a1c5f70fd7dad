"""Fused: the lowered ops XLA fused into an optimized op, cuts of the v6e pairs.

XLA fuses many lowered ops into one fusion (`tpukit.graph._diff_fused`): one of them at
most pairs with it; the others are *fused into* it, found by the ``op_name`` and source
place the fused instructions keep (or, where XLA rewrote the op away, by data flow), not
removed. A call XLA inlined is a group of status ``inlined``, not removed. Each test is a
cut of a pair under ``benchmarks/hlo_pairs/v6e`` (libtpu's modules, see its
``sources.md``), backend configs and most ops left out.
"""

import re

from tests.graph._frames import fft_complex_head
from tests.graph.test_diff_view import open_view, side
from tpukit.graph._diff_fused import find_fused
from tpukit.graph._diff_groups import ProgramGroups
from tpukit.graph._diff_match import INLINED
from tpukit.graph._diff_view import diff_graph
from tpukit.hlo import graph

_FFT = 'op_name="jit(fft_complex)/jit(fft)" stack_frame_id=2'
LOWERED = (
    fft_complex_head("lowered")
    + f"""
ENTRY main.4 {{
  x.1 = f32[256]{{0}} parameter(0), metadata={{op_name="x"}}
  jit_fft_.3 = c64[256]{{0}} call(x.1), to_apply=fft.1, metadata={{{_FFT}}}
  abs.1 = f32[256]{{0}} abs(jit_fft_.3), metadata={{op_name="jit(fft_complex)/abs" stack_frame_id=5}}
  real.1 = f32[256]{{0}} real(jit_fft_.3), metadata={{op_name="jit(fft_complex)/real" stack_frame_id=6}}
  imag.1 = f32[256]{{0}} imag(jit_fft_.3), metadata={{op_name="jit(fft_complex)/imag" stack_frame_id=7}}
  add.1 = f32[256]{{0}} add(real.1, imag.1), metadata={{op_name="jit(fft_complex)/add" stack_frame_id=6}}
  ROOT tuple.1 = (f32[256]{{0}}, f32[256]{{0}}) tuple(abs.1, add.1)
}}
"""
)
OPTIMIZED = (
    fft_complex_head("optimized")
    + f"""
%add (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[]{{:T(128)}} parameter(0)
  %b = f32[]{{:T(128)}} parameter(1)
  ROOT %sum = f32[]{{:T(128)}} add(%a, %b)
}}
%fused_computation.10 (param_0.164: f32[256]) -> (f32[256], f32[256]) {{
  %param_0.164 = f32[256]{{0:T(256)S(1)}} parameter(0)
  %broadcast.76 = f32[256,256]{{1,0:T(8,128)}} broadcast(%param_0.164), dimensions={{1}}, metadata={{{_FFT}}}
  %iota.37 = u32[256,256]{{1,0:T(8,128)}} iota(), iota_dimension=1, metadata={{{_FFT}}}
  %convert.18 = f32[256,256]{{1,0:T(8,128)}} convert(%iota.37), metadata={{{_FFT}}}
  %sine.7 = f32[256,256]{{1,0:T(8,128)}} sine(%convert.18), metadata={{{_FFT}}}
  %cosine.8 = f32[256,256]{{1,0:T(8,128)}} cosine(%convert.18), metadata={{{_FFT}}}
  %multiply.34 = f32[256,256]{{1,0:T(8,128)}} multiply(%broadcast.76, %sine.7)
  %constant.164 = f32[]{{:T(128)}} constant(0)
  %reduce.3 = f32[256]{{0:T(256)S(1)}} reduce(%multiply.34, %constant.164), dimensions={{1}}, to_apply=%add, metadata={{{_FFT}}}
  %multiply.72 = f32[256,256]{{1,0:T(8,128)}} multiply(%broadcast.76, %cosine.8)
  %reduce.5 = f32[256]{{0:T(256)S(1)}} reduce(%multiply.72, %constant.164), dimensions={{1}}, to_apply=%add, metadata={{{_FFT}}}
  ROOT %tuple.20 = (f32[256]{{0:T(256)S(1)}}, f32[256]{{0:T(256)S(1)}}) tuple(%reduce.3, %reduce.5)
}}
%fused_computation.47 (param_0.152: f32[256], param_1.179: f32[256]) -> (f32[256], f32[256]) {{
  %param_0.152 = f32[256]{{0:T(256)S(1)}} parameter(0)
  %param_1.179 = f32[256]{{0:T(256)S(1)}} parameter(1)
  %subtract.22 = f32[256]{{0:T(256)}} subtract(%param_0.152, %param_1.179), metadata={{{_FFT}}}
  %add.39 = f32[256]{{0:T(256)}} add(%param_0.152, %param_1.179), metadata={{{_FFT}}}
  %add.38 = f32[256]{{0:T(256)}} add(%subtract.22, %add.39), metadata={{op_name="jit(fft_complex)/add" stack_frame_id=5}}
  %abs.10 = f32[256]{{0:T(256)}} abs(%subtract.22), metadata={{op_name="jit(fft_complex)/abs" stack_frame_id=6}}
  %abs.9 = f32[256]{{0:T(256)}} abs(%add.39), metadata={{op_name="jit(fft_complex)/abs" stack_frame_id=6}}
  %maximum.13 = f32[256]{{0:T(256)}} maximum(%abs.10, %abs.9), metadata={{op_name="jit(fft_complex)/abs" stack_frame_id=6}}
  ROOT %tuple.21 = (f32[256]{{0:T(256)}}, f32[256]{{0:T(256)}}) tuple(%add.38, %maximum.13)
}}
ENTRY %main.4 (x.1: f32[256]) -> (f32[256], f32[256]) {{
  %x.1 = f32[256]{{0:T(256)}} parameter(0), metadata={{op_name="x"}}
  %fusion.4 = (f32[256]{{0:T(256)S(1)}}, f32[256]{{0:T(256)S(1)}}) fusion(%x.1), kind=kLoop, calls=%fused_computation.10, metadata={{{_FFT}}}
  %get-tuple-element = f32[256]{{0:T(256)S(1)}} get-tuple-element(%fusion.4), index=0
  %get-tuple-element.1 = f32[256]{{0:T(256)S(1)}} get-tuple-element(%fusion.4), index=1
  %add_add_fusion = (f32[256]{{0:T(256)}}, f32[256]{{0:T(256)}}) fusion(%get-tuple-element.1, %get-tuple-element), kind=kLoop, calls=%fused_computation.47, metadata={{op_name="jit(fft_complex)/add" stack_frame_id=5}}
  %get-tuple-element.2 = f32[256]{{0:T(256)}} get-tuple-element(%add_add_fusion), index=0
  %get-tuple-element.3 = f32[256]{{0:T(256)}} get-tuple-element(%add_add_fusion), index=1
  ROOT %tuple.19 = (f32[256]{{0:T(256)}}, f32[256]{{0:T(256)}}) tuple(%get-tuple-element.3, %get-tuple-element.2)
}}
"""
)


def fft_view():
    return diff_graph(LOWERED, OPTIMIZED, labels=("lowered", "optimized"))


def test_elementwise_ops_xla_fused_are_fused_into_the_fusion_not_removed():
    """``abs.1`` is in ``add_add_fusion`` by the op_name and place its fused ``abs``
    keeps (the two modules number the frames apart); ``real.1`` and ``imag.1`` left no
    op_name (XLA expanded the FFT into real arithmetic), and lie between the FFT's fusion
    and the fusion that stands for the ``add`` they feed, which reads it: fused there."""
    view = fft_view()
    assert view.matched_ops == {"add.1": "add_add_fusion"}, view.matched_ops
    assert view.part_ops == {"fusion.4": ["jit_fft_.3"]}, view.part_ops
    assert view.fused_ops == dict.fromkeys(("abs.1", "real.1", "imag.1"), ["add_add_fusion"])
    assert not view.ops_removed and not view.ops_added, (view.ops_removed, view.ops_added)
    assert "3 fused by XLA into another" in repr(view)
    marks = view._marks()
    a_labels, b_labels = (s.data.label for s in view._sides)
    fusion = b_labels.index("add_add_fusion")
    abs_node = a_labels.index("abs.1")
    assert marks["status"][0][str(abs_node)] == "fused"
    assert marks["fused"][0][str(abs_node)] == [fusion]
    assert marks["link"][0][str(abs_node)] == fusion
    held = marks["fused"][1][str(fusion)]
    assert sorted(a_labels[x] for x in held) == ["abs.1", "imag.1", "real.1"]


def test_a_call_xla_inlined_is_inlined_in_the_table_not_removed():
    """The FFT's call is in no optimized group (XLA inlined it into its parts): the
    table says so (``»``), and no group or op is counted removed."""
    view = fft_view()
    call = view.group("jit_fft_")
    assert call.status == INLINED and call.ops_removed == 0, call
    assert "1 call XLA inlined" in repr(view) and "» jit_fft_" in repr(view)
    assert view.group("whole program").ops_removed == 0
    note = view._marks()["notes"][view.groups.index(call)]
    assert note == "XLA inlined this call: 1 op of optimized came of it", note
    assert 'data-status="inlined"' in view._repr_html_()
    # its row shows what was made of it: the FFT's part, and what its ops were fused into
    a_labels, b_labels = (s.data.label for s in view._sides)
    inlined = view._marks()["inlined"][str(a_labels.index("jit_fft_.3"))]
    assert [b_labels[y] for y in inlined] == ["fusion.4"], inlined


# A second fusion of the optimized cut that reads the FFT's fusion and holds an ``abs``.
_SECOND = (
    "%fused_computation.9 (param_0.9: f32[256]) -> f32[256] {\n"
    "  %param_0.9 = f32[256]{0:T(256)S(1)} parameter(0)\n"
    '  ROOT %abs.77 = f32[256]{0:T(256)S(1)} abs(%param_0.9), metadata={op_name="jit(fft_complex)/abs"}\n'
    "}\n"
)
_SECOND_CALL = (
    "  %fusion.9 = f32[256]{0:T(256)S(1)} fusion(%get-tuple-element), kind=kLoop,"
    " calls=%fused_computation.9\n"
)


def fused_of(lowered: str, optimized: str) -> dict[str, list[str]]:
    """`find_fused` alone, on every lowered op, nothing paired: ``{op: [fusions]}`` and
    the ops it says XLA copied into each."""
    a = ProgramGroups(graph(lowered, stage="lowered"))
    b = ProgramGroups(graph(optimized, stage="optimized"))
    fused, copied, _ = find_fused(a, b, {}, {}, list(a.ops))
    names = {a.data.label[x]: sorted(b.data.label[y] for y in ys) for x, ys in fused.items()}
    return names, sorted(a.data.label[x] for x in copied)


def test_an_op_in_two_fusions_its_name_and_flow_name_is_fused_into_one_of_them_or_both():
    """Printed without stack frames, with an ``abs`` also in a second fusion next to the
    FFT's: op_name and data flow leave two fusions. The lowered ``abs.1`` alone carries
    that op_name: XLA copied it into both. With a second lowered ``abs`` of that name it
    is in one of them, both said, none picked."""
    strip = re.compile(r" stack_frame_id=\d+")
    optimized = strip.sub("", OPTIMIZED).replace("ENTRY %main.4", _SECOND + "ENTRY %main.4")
    optimized = optimized.replace("  %add_add_fusion =", _SECOND_CALL + "  %add_add_fusion =")
    fused, copied = fused_of(strip.sub("", LOWERED), optimized)
    assert fused["abs.1"] == ["add_add_fusion", "fusion.9"] and copied == ["abs.1"], fused
    lowered = strip.sub("", LOWERED).replace(
        "  ROOT tuple.1 = (f32[256]{0}, f32[256]{0}) tuple(abs.1, add.1)",
        '  abs.2 = f32[256]{0} abs(x.1), metadata={op_name="jit(fft_complex)/abs"}\n'
        "  ROOT tuple.1 = (f32[256]{0}, f32[256]{0}, f32[256]{0}) tuple(abs.1, add.1, abs.2)",
    )
    fused, copied = fused_of(lowered, optimized)
    assert fused["abs.1"] == ["add_add_fusion", "fusion.9"] and copied == [], (fused, copied)


def test_between_two_programs_not_compiled_one_from_the_other_nothing_is_fused():
    """Two optimized programs (or two lowered ones) share op_names between ops of their
    own: an op only one has is removed, never fused by name."""
    view = diff_graph(
        OPTIMIZED.replace("is_scheduled=true", "is_scheduled=false"),
        OPTIMIZED,
        labels=("a", "b"),
    )
    assert view.fused_ops == {}


def test_a_click_on_a_fused_op_rings_its_fusion_and_the_panel_says_so(browser):
    page, requests, errors = open_view(browser, fft_view(), "standalone")
    fused = side(page, 0).locator('.tkg-node[data-name="abs.1"]')
    assert fused.count() == 1 and "tkd-fused" in fused.get_attribute("class")
    dash = fused.locator("rect.tkg-box").evaluate("r => getComputedStyle(r).strokeDasharray")
    assert dash.replace("px", "") == "2, 2", dash
    fused.click()
    ringed = side(page, 1).locator(".tkd-linked")
    assert ringed.count() == 1 and ringed.get_attribute("data-name") == "add_add_fusion"
    panel = side(page, 0).locator("dd.tkd-panel-diff").inner_text()
    assert "fused by XLA into add_add_fusion in optimized" in panel, panel
    assert "removed" not in panel
    row = page.locator('.tkd-table tr[data-name="jit_fft_"]')
    assert row.get_attribute("data-status") == "inlined"
    row.click()  # the inlined call: its parts shown in its place, the stale panel closed
    assert side(page, 1).locator(".tkd-linked").get_attribute("data-name") == "fusion.4"
    assert side(page, 0).locator(".tkd-linked").get_attribute("data-name") == "jit_fft_.3"
    assert side(page, 0).locator(".tkg-panel").is_hidden()
    assert not errors and all(url.startswith("http://tpukit.test") for url in requests), errors
