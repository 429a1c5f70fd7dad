"""Fusion bodies the page builds itself (`_graph_bodies`, ``assets/graph_bodies.js``).

A page's tree leaves out the fusion bodies whose lines the page reads exactly; the payload
carries them apart and the page puts their nodes in place as it loads. What the page then
holds and shows must be what a payload built with the bodies gives, node for node: the
payloads are unpacked by the page's own script and compared, and a fusion is opened in the
page and its nodes, labels, costs and panel texts checked against Python's whole tree.
"""

import base64
import zlib

import pytest

from tests._support.graph_page import Page, node, open_graph, screenshot
from tests._support.notebook_page import ORIGIN
from tpukit.graph._first_view import first_view
from tpukit.graph._graph_bodies import body_nodes
from tpukit.graph._graph_costs import node_costs
from tpukit.graph._graph_data import GraphTree
from tpukit.graph._graph_frame import Frame
from tpukit.graph._graph_nodes import INSTRUCTION, PART, display_text
from tpukit.graph._graph_page import GRAPH, _viewer_code
from tpukit.graph._graph_payload import graph_wire
from tpukit.graph._graph_view import HloGraph, graph_data
from tpukit.graph._graph_wire import encode_wire, read_wire
from tpukit.hlo import parse_hlo

# Bodies the page builds (fused_a: parameters out of order, a constant moved to its user, a
# tuple root that is not the last line, an operand read twice; fused_b: a dot; fused_meta:
# metadata, last; fused_mid: metadata before another attribute; fused_w: inside a loop's
# body; fused_reduce: a reduction, which applies its region per element: no tree holds the
# region) and a body Python keeps building (fused_cc: a library call, whose category is
# its target's).
EDGE_HLO = """HloModule edges

%fused_a (p1: f32[8], p0: f32[8]) -> (f32[8], f32[8]) {
  %p1 = f32[8]{0} parameter(1)
  %c = f32[] constant(2)
  %b = f32[8]{0} broadcast(f32[] %c), dimensions={}
  %p0 = f32[8]{0} parameter(0)
  %m = f32[8]{0} multiply(f32[8]{0} %p0, f32[8]{0} %p0)
  %s = f32[8]{0} add(f32[8]{0} %m, f32[8]{0} %b)
  ROOT %t = (f32[8]{0}, f32[8]{0}) tuple(f32[8]{0} %s, f32[8]{0} %p1)
  %after = f32[8]{0} negate(f32[8]{0} %s)
}

%fused_b (x: f32[8,16], y: f32[16,4]) -> f32[8,4] {
  %x = f32[8,16]{1,0} parameter(0)
  %y = f32[16,4]{1,0} parameter(1)
  %d = f32[8,4]{1,0} dot(f32[8,16]{1,0} %x, f32[16,4]{1,0} %y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %e = f32[8,4]{1,0} exponential(f32[8,4]{1,0} %d)
}

%fused_meta (q: f32[8]) -> f32[8] {
  %q = f32[8]{0} parameter(0)
  ROOT %r = f32[8]{0} negate(f32[8]{0} %q), metadata={op_name="jit(f)/neg" source_file="a.py" source_line=3}
}

%fused_mid (q: f32[8]) -> f32[8] {
  %q = f32[8]{0} parameter(0)
  ROOT %r = f32[8]{0} negate(f32[8]{0} %q), metadata={op_name="jit(f)/neg"}, backend_config="x"
}

%fused_cc (q: f32[8]) -> f32[8] {
  %q = f32[8]{0} parameter(0)
  ROOT %cc = f32[8]{0} custom-call(f32[8]{0} %q), custom_call_target="foo"
}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(f32[] %a, f32[] %b)
}

%fused_reduce (z: f32[8]) -> f32[] {
  %z = f32[8]{0} parameter(0)
  %zero = f32[] constant(0)
  ROOT %red = f32[] reduce(f32[8]{0} %z, f32[] %zero), dimensions={0}, to_apply=%add
}

%fused_w (w: f32[8]) -> f32[8] {
  %w = f32[8]{0} parameter(0)
  ROOT %w2 = f32[8]{0} sine(f32[8]{0} %w)
}

%body (s: (s32[], f32[8])) -> (s32[], f32[8]) {
  %s = (s32[], f32[8]{0}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[8]{0}) %s), index=0
  %v = f32[8]{0} get-tuple-element((s32[], f32[8]{0}) %s), index=1
  %one = s32[] constant(1)
  %i2 = s32[] add(s32[] %i, s32[] %one)
  %v2 = f32[8]{0} fusion(f32[8]{0} %v), kind=kLoop, calls=%fused_w
  ROOT %out = (s32[], f32[8]{0}) tuple(s32[] %i2, f32[8]{0} %v2)
}

%cond (s: (s32[], f32[8])) -> pred[] {
  %s = (s32[], f32[8]{0}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[8]{0}) %s), index=0
  %n = s32[] constant(4)
  ROOT %lt = pred[] compare(s32[] %i, s32[] %n), direction=LT
}

ENTRY %main (u: f32[8], v: f32[8], x: f32[8,16], y: f32[16,4]) -> (f32[8], f32[8,4], f32[], f32[8], f32[8]) {
  %u = f32[8]{0} parameter(0)
  %v = f32[8]{0} parameter(1)
  %x = f32[8,16]{1,0} parameter(2)
  %y = f32[16,4]{1,0} parameter(3)
  %fa = (f32[8]{0}, f32[8]{0}) fusion(f32[8]{0} %u, f32[8]{0} %v), kind=kLoop, calls=%fused_a
  %g0 = f32[8]{0} get-tuple-element((f32[8]{0}, f32[8]{0}) %fa), index=0
  %fb = f32[8,4]{1,0} fusion(f32[8,16]{1,0} %x, f32[16,4]{1,0} %y), kind=kOutput, calls=%fused_b
  %fm = f32[8]{0} fusion(f32[8]{0} %g0), kind=kLoop, calls=%fused_meta
  %fr = f32[] fusion(f32[8]{0} %fm), kind=kInput, calls=%fused_reduce
  %fd = f32[8]{0} fusion(f32[8]{0} %fm), kind=kLoop, calls=%fused_mid
  %fc = f32[8]{0} fusion(f32[8]{0} %fd), kind=kLoop, calls=%fused_cc
  %zero = s32[] constant(0)
  %init = (s32[], f32[8]{0}) tuple(s32[] %zero, f32[8]{0} %fm)
  %loop = (s32[], f32[8]{0}) while((s32[], f32[8]{0}) %init), condition=%cond, body=%body
  %lv = f32[8]{0} get-tuple-element((s32[], f32[8]{0}) %loop), index=1
  ROOT %res = (f32[8]{0}, f32[8,4]{1,0}, f32[], f32[8]{0}, f32[8]{0}) tuple(f32[8]{0} %g0, f32[8,4]{1,0} %fb, f32[] %fr, f32[8]{0} %lv, f32[8]{0} %fc)
}
"""

LAZY = {"fused_a", "fused_b", "fused_meta", "fused_mid", "fused_w", "fused_reduce"}


def _fresh(copy: int):
    """`EDGE_HLO` parsed into a module of its own (equal texts share one: `parse_hlo`), so
    that one graph's trees are not another's."""
    return parse_hlo(EDGE_HLO + "\n" * copy)


def _fusion(data: GraphTree, name: str) -> int:
    return next(i for i, ins in enumerate(data.instr) if ins is not None and ins.name == name)


def _wire(graph: HloGraph) -> dict:
    return read_wire(zlib.decompress(base64.b64decode("".join(graph._payload()))))


def test_the_page_tree_leaves_out_the_bodies_the_page_reads_and_keeps_the_rest():
    module = parse_hlo(EDGE_HLO)
    whole, lazy = GraphTree(module), GraphTree(module, lazy=True)
    assert {body.name for body in lazy.lazy.values()} == LAZY
    for node_id, body in lazy.lazy.items():
        assert lazy.held[node_id] == lazy.hidden[node_id] == len(body.instructions)
        assert len(lazy.children[node_id]) == 0
    lazy_fusions = {
        i
        for i, ins in enumerate(whole.instr)
        if ins is not None and ins.opcode == "fusion" and ins.called_computations[0].name in LAZY
    }
    kept = [i for i in range(len(whole.kind)) if whole.parent[i] not in lazy_fusions]
    assert [whole.label[i] for i in kept] == list(lazy.label)  # the same order, bodies apart
    assert [lazy.label[i] for i in first_view(lazy)] == [whole.label[i] for i in first_view(whole)]
    fc = _fusion(lazy, "fc")  # a library call: built as before
    assert len(lazy.children[fc]) == len(whole.children[_fusion(whole, "fc")]) == 2


def test_a_graph_page_carries_its_bodies_apart_and_counts_as_before():
    lazy_graph = HloGraph(_fresh(1))
    wire = _wire(lazy_graph)
    assert len(wire["bodyOwner"]) == len(LAZY)
    assert len(wire["kind"]) + len(wire["bodyText"]) == len(graph_data(_fresh(2)).kind)
    whole_graph = HloGraph(_fresh(2))
    whole_graph._data  # noqa: B018 (built first: the page's payload is then the whole tree's)
    assert "bodyOwner" not in _wire(whole_graph)
    assert lazy_graph.view_counts() == whole_graph.view_counts()
    assert lazy_graph.num_instructions == whole_graph.num_instructions
    assert repr(lazy_graph) == repr(whole_graph)


# The page's own `unpack` (the viewer's scripts, their closure opened), each payload's data
# as JSON-ready columns.
_UNPACKED = """async (payloads) => {
  const columns = ["kind", "parent", "label", "op", "cat", "shape", "flops", "bytes", "count",
    "text", "textHead", "open"];
  const read = (d) => {
    const out = {keys: Object.keys(d).sort()};
    columns.forEach((k) => { out[k] = Array.from(d[k]); });
    // (by their texts: the strings' table is interned in another order)
    ["scope", "location", "source", "note"].forEach((k) => {
      out[k] = Array.from(d[k], (id) => d.strings[id]);
    });
    out.blocks = d.blocks.map((b) => [b[0], Array.from(b[1])]);
    out.params = Object.entries(d.params).map(([k, v]) => [+k, Array.from(v)]);
    out.roots = Object.entries(d.roots).map(([k, v]) => [+k, v]);
    return out;
  };
  return Promise.all(payloads.map(async (p) => read(await window.tkgUnpack(p))));
}"""


def _unpacked(browser, payloads: list[str]) -> list[dict]:
    page = Page(browser, {"/unpack.html": ""})
    code = _viewer_code(GRAPH)[1] + "\nwindow.tkgUnpack = unpack;})();})();"
    page.page.set_content(f"<html><body><script>{code}</script></body></html>")
    found = page.page.evaluate(_UNPACKED, payloads)
    assert page.errors == []
    return found


def _many_bodies(fusions: int = 30) -> str:
    """A module whose last fusion (a library call's: built in Python, with its parameters) comes after ``fusions`` bodies the page builds, 10 ops each: its body's
    nodes are below 256 in the page's tree, above it once the bodies are in place."""
    ops = "\n".join(
        f"  %e{k} = f32[8]{{0}} exponential(f32[8]{{0}} %e{k - 1})" for k in range(1, 9)
    )
    fused = "".join(
        f"%fused_{n} (e0: f32[8]) -> f32[8] {{\n  %e0 = f32[8]{{0}} parameter(0)\n{ops}\n"
        f"  ROOT %out = f32[8]{{0}} negate(f32[8]{{0}} %e8)\n}}\n\n"
        for n in range(fusions)
    )
    calls = "\n".join(
        f"  %f{n} = f32[8]{{0}} fusion(f32[8]{{0}} %f{n - 1}), kind=kLoop, calls=%fused_{n}"
        for n in range(1, fusions)
    )
    mid = EDGE_HLO[EDGE_HLO.index("%fused_cc ") : EDGE_HLO.index("%add ")]
    return (
        f"HloModule many\n\n{fused}{mid}"
        "ENTRY %main (u: f32[8]) -> f32[8] {\n  %u = f32[8]{0} parameter(0)\n"
        "  %f0 = f32[8]{0} fusion(f32[8]{0} %u), kind=kLoop, calls=%fused_0\n"
        f"{calls}\n  ROOT %fc = f32[8]{{0}} fusion(f32[8]{{0}} %f{fusions - 1}), kind=kLoop, "
        "calls=%fused_cc\n}\n"
    )


# A body whose bytes the page cannot sum (a slice reads part of its operand, a parameter
# and a tuple move nothing) beside ones it can, a dot's FLOPs, an operand read twice.
SLICE_HLO = """HloModule slices

%fused_s (p: f32[64], w: f32[8,8]) -> (f32[8], f32[8,8]) {
  %p = f32[64]{0} parameter(0)
  %s = f32[8]{0} slice(f32[64]{0} %p), slice={[0:8]}
  %a = f32[8]{0} add(f32[8]{0} %s, f32[8]{0} %s)
  %w = f32[8,8]{1,0} parameter(1)
  %d = f32[8,8]{1,0} dot(f32[8,8]{1,0} %w, f32[8,8]{1,0} %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = (f32[8]{0}, f32[8,8]{1,0}) tuple(f32[8]{0} %a, f32[8,8]{1,0} %d)
}

ENTRY %main (u: f32[64], v: f32[8,8]) -> (f32[8], f32[8,8]) {
  %u = f32[64]{0} parameter(0)
  %v = f32[8,8]{1,0} parameter(1)
  ROOT %f = (f32[8]{0}, f32[8,8]{1,0}) fusion(f32[64]{0} %u, f32[8,8]{1,0} %v), kind=kLoop, calls=%fused_s
}
"""


def test_a_body_carries_its_costs_only_where_the_page_cannot_tell_them():
    module = parse_hlo(SLICE_HLO)
    lazy = GraphTree(module, lazy=True)
    assert [body.name for body in lazy.lazy.values()] == ["fused_s"]
    wire = graph_wire(lazy, "t", None)
    rows = {name: k for k, name in enumerate(wire["bodyLabel"])}
    assert "bodyBytes" not in wire and "bodyFlops" not in wire and "bodyCat" not in wire
    # (the slice's; the parameters' and the tuple's are none, the add's and the dot's sums)
    assert list(wire["bodyBytesAt"]) == [rows["s"]]
    assert list(wire["bodyFlopsAt"]) == [rows["d"]] and list(wire["bodyFlopsOf"]) == [1024]


# Bodies whose lines `body_texts` reads alone: a line longer than the panel's text between
# short ones (fused_long), a line not ASCII (fused_text), a head the wire cannot leave out
# (fused_head: names without ``%``), metadata with braces and one not last among lines
# read in place (fused_brace).
_LONG = ", ".join(["1"] * 1500)
ODD_HLO = f"""HloModule odd

%fused_long (p: f32[8]) -> f32[8] {{
  %p = f32[8]{{0}} parameter(0)
  %k = f32[1500]{{0}} constant({{{_LONG}}})
  ROOT %n = f32[8]{{0}} negate(f32[8]{{0}} %p)
}}

%fused_text (p: f32[8]) -> f32[8] {{
  %p = f32[8]{{0}} parameter(0)
  ROOT %n = f32[8]{{0}} negate(f32[8]{{0}} %p), frontend_attributes={{note="é"}}
}}

%fused_head (hp: f32[8]) -> f32[8] {{
  hp = f32[8]{{0}} parameter(0)
  ROOT hn = f32[8]{{0}} negate(f32[8]{{0}} hp)
}}

%fused_brace (p: f32[8]) -> f32[8] {{
  %p = f32[8]{{0}} parameter(0)
  %m = f32[8]{{0}} negate(f32[8]{{0}} %p), metadata={{op_name="jit(f)/a{{b}}/neg" source_line=2}}
  %o = f32[8]{{0}} negate(f32[8]{{0}} %m), metadata={{op_name="jit(f)/neg"}}, backend_config="x"
  ROOT %n = f32[8]{{0}} negate(f32[8]{{0}} %o), metadata={{op_name="jit(f)/neg"}}
}}

ENTRY %main (x: f32[8]) -> (f32[8], f32[8], f32[8]) {{
  %x = f32[8]{{0}} parameter(0)
  %a = f32[8]{{0}} fusion(f32[8]{{0}} %x), kind=kLoop, calls=%fused_long
  %b = f32[8]{{0}} fusion(f32[8]{{0}} %x), kind=kLoop, calls=%fused_text
  %c = f32[8]{{0}} fusion(f32[8]{{0}} %x), kind=kLoop, calls=%fused_head
  %d = f32[8]{{0}} fusion(f32[8]{{0}} %x), kind=kLoop, calls=%fused_brace
  ROOT %t = (f32[8]{{0}}, f32[8]{{0}}, f32[8]{{0}}, f32[8]{{0}}) tuple(%a, %b, %c, %d)
}}
"""


def test_a_body_is_left_to_the_page_whatever_its_lines_and_each_is_written_as_the_wire_does():
    module = parse_hlo(ODD_HLO)
    lazy = GraphTree(module, lazy=True)
    assert {comp.name for comp in lazy.lazy.values()} == {
        "fused_long", "fused_text", "fused_head", "fused_brace"
    }  # fmt: skip
    wire = graph_wire(lazy, "t", None)
    written = dict(zip(wire["bodyLabel"], zip(wire["bodyText"], wire["bodyHead"])))
    assert written["k"][0].endswith("…") and written["k"][1] == 1  # (clipped: too long)
    assert written["hp"] == ("hp = f32[8]{0} parameter(0)", 0)  # (no ``%``)
    assert written["o"] == ('(f32[8]{0} %m), backend_config="x"', 1)  # (metadata cut out)


_WORK = ("tanh", "add", "transpose(jvp(g)/mul)", "")


def _parts_module(sizes: tuple[int, ...] = (41, 120, 1700)) -> str:
    """A module of bodies over `MAX_CHILDREN` instructions, ``sizes`` of them (1,700: parts
    of parts), which Python's tree cuts into parts: chains of elementwise ops (metadata
    last on most, op names of three layers: their parts are named by the JAX op), dots of
    12,250 FLOPs (one alone: "12.2 kFLOP", Python's rounding of a tie to the even
    figure) and reductions with a region; and two bodies of plumbing (parts of parameters
    alone, of constants alone)."""
    shape, weights = "f32[5,35]{1,0}", "f32[35,35]{1,0}"
    out = ["HloModule parts", "", "%region_max (a: f32[], b: f32[]) -> f32[] {",
           "  %a = f32[] parameter(0)", "  %b = f32[] parameter(1)",
           "  ROOT %m = f32[] maximum(f32[] %a, f32[] %b)", "}", ""]  # fmt: skip
    for f, size in enumerate(sizes):
        lines = [f"  %p.{f} = {shape} parameter(0)", f"  %w.{f} = {weights} parameter(1)",
                 f"  %c.{f} = f32[] constant(0)"]  # fmt: skip
        prev, k = f"p.{f}", 0
        while len(lines) < size - 1:
            name, work = f"v.{f}.{k}", _WORK[k % 4]
            meta = (
                f', metadata={{op_name="jit(f)/layer{k % 3}/{work}" source_file="m.py" '
                f"source_line={k % 7}}}"
                if k % 5
                else ""
            )
            if k % 17 == 5:
                lines.append(
                    f"  %{name} = {shape} dot({shape} %{prev}, {weights} %w.{f}), "
                    f"lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}{meta}"
                )
            elif k % 13 == 7 and len(lines) < size - 2:
                lines.append(
                    f"  %r.{f}.{k} = f32[5]{{0}} reduce({shape} %{prev}, f32[] %c.{f}), "
                    f"dimensions={{1}}, to_apply=%region_max{meta}"
                )
                lines.append(
                    f"  %{name} = {shape} broadcast(f32[5]{{0}} %r.{f}.{k}), dimensions={{0}}"
                )
            elif k % 2:
                lines.append(f"  %{name} = {shape} tanh({shape} %{prev}){meta}")
            else:
                lines.append(f"  %{name} = {shape} add({shape} %{prev}, {shape} %p.{f}){meta}")
            prev, k = name, k + 1
        lines.append(f"  ROOT %out.{f} = {shape} negate({shape} %{prev})")
        out += [
            f"%fused_{f} (p.{f}: f32[5,35], w.{f}: f32[35,35]) -> f32[5,35] {{",
            *lines,
            "}",
            "",
        ]
    # (tuples of 30: a longer shape is clipped, and a body with one is built in Python)
    params = [f"  %q{k} = f32[4]{{0}} parameter({k})" for k in range(50)]
    elements = ", ".join(f"f32[4]{{0}} %q{k}" for k in range(30))
    tuple_shape = f"({', '.join(['f32[4]{0}'] * 30)})"
    out += ["%fused_params (q: f32[4]) -> (f32[4]) {", *params,
            f"  ROOT %t = {tuple_shape} tuple({elements})", "}", ""]  # fmt: skip
    consts = [f"  %k{k} = f32[4]{{0}} constant({{{k}, 1, 2, 3}})" for k in range(90)]
    kept = ", ".join(f"f32[4]{{0}} %k{k}" for k in range(29))
    out += ["%fused_consts (s: f32[4]) -> (f32[4]) {", "  %s = f32[4]{0} parameter(0)", *consts,
            "  %n = f32[4]{0} negate(f32[4]{0} %s)",
            f"  ROOT %t = {tuple_shape} tuple(f32[4]{{0}} %n, {kept})", "}", ""]  # fmt: skip
    chain = [
        f"  %f{f} = {shape} fusion({shape} %{'x' if f == 0 else f'f{f - 1}'}, {weights} %w), "
        f"kind=kOutput, calls=%fused_{f}"
        for f in range(len(sizes))
    ]
    last = len(sizes) - 1
    out += [
        "ENTRY %main (x: f32[5,35], w: f32[35,35], s: f32[4]) -> f32[5,35] {",
        f"  %x = {shape} parameter(0)", f"  %w = {weights} parameter(1)",
        "  %s = f32[4]{0} parameter(2)", *chain,
        f"  %fp = {tuple_shape} fusion({', '.join(['f32[4]{0} %s'] * 50)}), kind=kLoop, "
        "calls=%fused_params",
        f"  %fc = {tuple_shape} fusion(f32[4]{{0}} %s), kind=kLoop, calls=%fused_consts",
        f"  ROOT %out = {shape} negate({shape} %f{last})", "}", "",
    ]  # fmt: skip
    return "\n".join(out)


def test_bodies_over_max_children_and_with_regions_are_left_to_the_page():
    module = parse_hlo(_parts_module())
    whole, lazy = GraphTree(module), GraphTree(module, lazy=True)
    assert {body.name for body in lazy.lazy.values()} == {
        "fused_0", "fused_1", "fused_2", "fused_params", "fused_consts"
    }  # fmt: skip
    for node_id, body in lazy.lazy.items():
        fusion = _fusion(whole, data_name := lazy.instr[node_id].name)
        below = [k for k in range(len(whole.kind)) if _under(whole, k, fusion)]
        assert body_nodes(len(body.instructions)) == len(below), data_name
        assert lazy.hidden[node_id] == sum(whole.kind[k] == INSTRUCTION for k in below)
    labels = [lazy.label[i] for i in first_view(lazy)]
    assert labels == [whole.label[i] for i in first_view(whole)]
    assert Frame(lazy).closed(0) == Frame(whole).closed(0)


def _under(data: GraphTree, node: int, group: int) -> bool:
    at = data.parent[node]
    while at >= 0 and at != group:
        at = data.parent[at]
    return at == group


@pytest.mark.parametrize(
    "source", ["edges", "many", "slices", "parts", "odd", "gpu_command_buffer.hlo"]
)
def test_the_page_unpacks_a_payload_with_bodies_apart_as_the_whole_trees(browser, source):
    if source == "edges":
        text = EDGE_HLO
    elif source == "slices":
        text = SLICE_HLO
    elif source == "many":
        text = _many_bodies()
    elif source == "parts":
        text = _parts_module()
    elif source == "odd":
        text = ODD_HLO
    else:
        from pathlib import Path

        text = (Path(__file__).parents[1] / "data" / "hlo" / source).read_text()
    module = parse_hlo(text)
    whole, lazy = GraphTree(module), GraphTree(module, lazy=True)
    assert lazy.lazy  # (the test is about them)
    payloads = [encode_wire(graph_wire(tree, "t", None, typed=True)) for tree in (whole, lazy)]
    from_whole, from_lazy = _unpacked(browser, payloads)
    assert from_lazy == from_whole
    assert from_lazy["flops"] == list(node_costs(whole)[0])  # (tpukit's own figures)


def test_an_opened_fusion_shows_its_body_as_pythons_whole_tree_says(browser):
    lazy_graph = HloGraph(_fresh(3), title="edges")
    assert "bodyOwner" in _wire(lazy_graph)
    whole_graph = HloGraph(_fresh(4), title="edges")
    data = whole_graph._data  # (its ids are the page's)
    flops, nbytes, _ = node_costs(data)
    shown = {}
    for which, g in (("lazy", lazy_graph), ("whole", whole_graph)):
        page = open_graph(browser, [g], "standalone")
        seen = shown[which] = {}
        for name in ("fa", "fb", "fm"):
            fusion = _fusion(data, name)
            _open_around(page, data, fusion)
            page.page.locator(".tkg-fit").click()  # (all of it in view)
            node(page, name).locator(".tkg-toggle").click()
            kids = list(data.children[fusion])
            drawn = page.page.locator(f'.tkg-group[data-node="{fusion}"]')
            assert drawn.count() == 1
            for kid in kids:
                box = page.page.locator(f'.tkg-node[data-node="{kid}"]')
                assert box.get_attribute("data-name") == data.label[kid]
                classes = box.get_attribute("class")
                box.click(position={"x": 30, "y": 18})
                panel = page.page.locator(".tkg-panel")
                hlo = panel.locator("pre.tkg-hlo").inner_text()
                assert hlo == display_text(data.instr[kid])
                figures = panel.locator('[data-field="FLOPs (est.)"]').inner_text()
                assert figures.startswith(f"{flops[kid]:,}")
                seen[kid] = (box.text_content(), classes, panel.inner_text(), nbytes[kid])
                panel.locator(".tkg-close").click()  # (it would cover the next node)
        if which == "lazy":
            screenshot(page, "lazy_fusion_opened")
        assert page.errors == []
    assert shown["lazy"] == shown["whole"]


def _open_around(page: Page, data: GraphTree, target: int) -> None:
    """Open the closed groups around ``target`` in the page, the outermost first."""
    around = []
    at = data.parent[target]
    while at > 0:
        around.append(at)
        at = data.parent[at]
    for group in reversed(around):
        closed = page.page.locator(f'.tkg-node[data-node="{group}"]')
        if closed.count():
            page.page.locator(".tkg-fit").click()
            closed.locator(".tkg-toggle").click()


def test_search_finds_an_instruction_inside_a_body_the_page_built(browser):
    lazy_graph = HloGraph(_fresh(5), title="edges")
    assert "bodyOwner" in _wire(lazy_graph)
    data = graph_data(_fresh(6))
    page = Page(browser, {"/graph.html": lazy_graph.to_html()})
    page.page.goto(f"{ORIGIN}/graph.html")
    page.ready()
    search = page.page.locator(".tkg-search")
    search.fill("w2")  # in fused_w, in the loop's body
    search.press("Enter")
    target = _fusion(data, "w2")
    assert page.page.locator(f'.tkg-node.tkg-hit[data-node="{target}"]').count() == 1
    assert page.errors == []


def test_the_page_writes_a_parts_figures_as_python_does(browser):
    # Ties (1,280 B is 1.25 KiB: Python's "1.2 KiB"; 122,500 FLOPs: "122 kFLOP"), carries
    # (999,500 FLOPs: "1e+03 kFLOP"), figures past a PFLOP (exponents), small and random ones.
    import random

    from tpukit.display import format_bytes, format_flops

    rng = random.Random(38)
    values = [0, 1, 7, 999, 1000, 1023, 1024, 1280, 12_250, 122_500, 999_500, 1.5e18, 2.5e20]
    values += [(2 * k + 1) * 256 * 1024**i for k in range(300) for i in range(4)]
    values += [m * 250 * 10**e for m in range(1, 400) for e in (0, 3, 6, 9, 12)]
    values += [rng.randrange(10 ** rng.randrange(1, 16)) for _ in range(3000)]
    values = [v for v in values if float(v) == v]  # (exact as the page's doubles)
    page = Page(browser, {"/unpack.html": ""})
    code = _viewer_code(GRAPH)[1] + "\nwindow.tkgFigures = [pyFlops, pyBytes];})();})();"
    page.page.set_content(f"<html><body><script>{code}</script></body></html>")
    found = page.page.evaluate(
        "(values) => values.map((v) => [window.tkgFigures[0](v), window.tkgFigures[1](v)])",
        values,
    )
    assert page.errors == []
    assert found == [[format_flops(v), format_bytes(v)] for v in values]


def test_a_part_of_a_body_and_a_reduction_in_it_show_as_pythons_whole_tree_says(browser):
    text = _parts_module((41, 120))
    lazy_graph = HloGraph(parse_hlo(text), title="parts")
    assert "bodyOwner" in _wire(lazy_graph)
    whole_graph = HloGraph(parse_hlo(text + "\n"), title="parts")
    data = whole_graph._data  # (its ids are the page's)
    fusion = _fusion(data, "f1")
    part, reduce = data.children[fusion][0], _fusion(data, "r.1.7")
    assert data.parent[reduce] == part and data.kind[part] == PART
    shown = {}
    for which, g in (("lazy", lazy_graph), ("whole", whole_graph)):
        page = open_graph(browser, [g], "standalone")
        _open_around(page, data, fusion)
        page.page.locator(".tkg-fit").click()
        node(page, "f1").locator(".tkg-toggle").click()
        seen = shown[which] = []
        for target, opens in ((part, True), (reduce, False)):
            box = page.page.locator(f'.tkg-node[data-node="{target}"]')
            box.click()  # (its middle: the view is fitted to a tall part, boxes are small)
            panel = page.page.locator(".tkg-panel")
            seen.append((box.text_content(), panel.inner_text()))
            if target == reduce:
                assert panel.locator("pre.tkg-hlo").inner_text() == display_text(data.instr[reduce])
            panel.locator(".tkg-close").click()
            if opens:
                page.page.locator(".tkg-fit").click()
                box.locator(".tkg-toggle").click()
                page.page.locator(".tkg-fit").click()  # (all of it in view)
        if which == "lazy":
            screenshot(page, "lazy_part_opened")
        assert page.errors == []
    assert shown["lazy"] == shown["whole"]
    assert "12.2 kFLOP" in shown["lazy"][0][0]  # (the part's label: its dot's FLOPs)
