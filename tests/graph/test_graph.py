"""The HLO graph seen from Python: the tree it groups, the HTML it writes, DOT and the summary.

What the page does in a browser is in graph/test_browser.py.
"""

import colorsys
import json
import pathlib
import random
import re
import zlib

import jax
import jax.numpy as jnp
import pytest

import tpukit
from tests._support import fixtures as _fixtures
from tests._support.data import HLO_DATA as HLO_FIXTURES
from tests._support.graph_payload import op_names, payload_of
from tpukit.graph._first_view import OPEN_NODES, first_view
from tpukit.graph._graph_data import (
    CATEGORIES,
    CATEGORY_LABELS,
    INSTRUCTION,
    MAX_CHILDREN,
    PART,
    SCOPE,
    GraphTree,
)
from tpukit.graph._graph_frame import FRAME_H, Frame
from tpukit.graph._graph_payload import graph_payload, graph_wire
from tpukit.graph._graph_schema import COLOURS, HEAT, PLOT_COLOURS, SCHEMA
from tpukit.graph._graph_wire import decode_payload, encode_wire, pack, read_wire, wire_bytes
from tpukit.hlo import HloGraph, diff_graph, graph, parse_hlo

EVIL = "</script><img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def mlp_hlo():
    return _fixtures.mlp_hlo()


def long_chain_hlo(n: int) -> str:
    lines = [
        "HloModule chain",
        "",
        "ENTRY %main (p: f32[4]) -> f32[4] {",
        "  %p = f32[4]{0} parameter(0)",
    ]
    previous = "p"
    for i in range(n):
        root = "ROOT " if i == n - 1 else ""
        lines.append(f"  {root}%add.{i} = f32[4]{{0}} add(%{previous}, %p)")
        previous = f"add.{i}"
    lines.append("}")
    return "\n".join(lines)


def test_graph_accepts_text_or_module_and_counts_instructions(mlp_hlo):
    module = parse_hlo(mlp_hlo)
    from_text, from_module = graph(mlp_hlo), graph(module, title="mlp", stage="optimized")
    assert isinstance(from_text, HloGraph) and from_module.module is module
    applied = sum(len(c) for c in module.computations.values() if c.kind == "applied")
    assert from_text.num_instructions == sum(1 for _ in module.instructions()) - applied
    assert from_module.title == "mlp" and from_module.stage == "optimized"


def test_graph_rejects_what_is_not_hlo():
    with pytest.raises(TypeError, match="HLO text, an HLO file.s path or an HloModule"):
        graph(42)
    with pytest.raises(ValueError, match="StableHLO/MLIR text"):
        graph("module @jit_f { func.func public @main() }")
    with pytest.raises(ValueError, match="does not look like HLO"):
        graph("ENTRY is not enough {\n}")


def test_name_scopes_become_groups_and_fusions_open_in_place(mlp_hlo):
    data = graph(mlp_hlo)._data
    scopes = {data.label[i] for i, kind in enumerate(data.kind) if kind == SCOPE}
    assert any("dense_1" in s for s in scopes) and any("dense_2" in s for s in scopes)
    fusions = [
        i for i, instr in enumerate(data.instr) if instr is not None and instr.opcode == "fusion"
    ]
    assert fusions and all(data.children[f] for f in fusions)
    fusion = fusions[0]
    inner = {data.instr[k].name for k in data.children[fusion]}
    assert inner == {i.name for c in data.module.called(data.instr[fusion]) for i in c}
    assert len(data.params[fusion]) == len(data.instr[fusion].operands)


def test_a_wide_computation_is_split_into_parts_and_opens_fitting_the_view():
    g = graph(long_chain_hlo(500))
    data = g._data
    assert all(len(kids) <= MAX_CHILDREN for kids in data.children)
    assert sum(1 for k in data.kind if k == PART) >= 500 // MAX_CHILDREN
    nodes, edges = g.view_counts()
    # Issue 38: a chain of 500 ops is stages of stages (`_graph_parts`); the first view
    # opens the heaviest that fits, where it drew 40 parts three frames tall before.
    assert 5 <= nodes <= OPEN_NODES and edges > 0
    assert Frame(data).fits(set(first_view(data)))
    assert g.num_instructions == 501


def test_parts_are_named_in_the_payload_and_the_shared_tree_is_left_as_it_was():
    g = graph(long_chain_hlo(500))
    data = g._data
    parts = [node for node, kind in enumerate(data.kind) if kind == PART]
    before = list(data.label)
    payload = graph_payload(data, "chain", "optimized")
    assert data.label == before  # the table, the diff's matching and to_dot read the same
    assert all(before[node] == "part" for node in parts)
    assert all(payload["label"][node] != "part" for node in parts)  # named by their work


def test_the_fragment_is_self_contained_with_a_unique_id(mlp_hlo):
    g = graph(mlp_hlo, title="mlp")
    first, second = g._repr_html_(), g._repr_html_()
    id_first = re.search(r'<div id="(tkg-[0-9a-f]+)"', first).group(1)
    id_second = re.search(r'<div id="(tkg-[0-9a-f]+)"', second).group(1)
    assert id_first != id_second
    assert first.count("<script>") == 1 and first.count("</script>") == 1
    assert not re.search(
        r"\b(src|href)=|https?://|sourceMappingURL", first.replace("http://www.w3.org/2000/svg", "")
    )
    payload = payload_of(first)
    assert payload["title"] == "mlp" and len(payload["kind"]) == len(g._page_data.kind)
    assert payload["open"][0] == 0 and all(
        payload["kind"][i] != INSTRUCTION for i in payload["open"]
    )


def test_the_script_asks_chrome_to_compile_it_whole_at_load(mlp_hlo):
    """V8's compile hint must open the script (a comment anywhere else is ignored): the
    first view runs most of dagre and the viewer, and compiling them lazily parses each
    function twice."""
    for output in (graph(mlp_hlo)._repr_html_(), diff_graph(mlp_hlo, mlp_hlo)._repr_html_()):
        assert output.count("<script>//# allFunctionsCalledOnLoad\n(function(){") == 1


def test_strings_from_user_code_cannot_break_out_of_the_page():
    src = "def f(x):\n    return jnp.sin(x) * 2\n"
    namespace = {"jnp": jnp}
    exec(compile(src, f"/tmp/{EVIL}.py", "exec"), namespace)
    f = namespace["f"]
    f.__name__ = f.__qualname__ = EVIL
    g = graph(jax.jit(f).lower(jnp.ones(3)).compile().as_text(), title=EVIL)
    page = g.to_html()
    assert "<img" not in page and page.count("</script>") == 1
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in page  # the title, escaped
    payload = payload_of(page)
    assert f"/tmp/{EVIL}.py:2" in payload["strings"]  # the data itself is kept literally
    fusion = next(i for i, ins in enumerate(g._data.instr) if ins and ins.opcode == "fusion")
    label = payload["strings"][payload["location"][fusion]]
    assert label == g._data.instr[fusion].source_location  # the short label, path apart
    assert payload["strings"][payload["source"][fusion]] == f"/tmp/{EVIL}.py:2"
    assert EVIL in g.to_dot()  # DOT strings are quoted, not HTML


def test_standalone_page_forbids_network_access(tmp_path, mlp_hlo):
    path = graph(mlp_hlo).save(tmp_path / "mlp.html")
    page = path.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "default-src 'none'" in page and "connect-src 'none'" in page


def test_dot_export_quotes_labels_and_keeps_every_entry_instruction(mlp_hlo):
    g = graph(mlp_hlo, title='say "hi" \\ now')
    dot = g.to_dot()
    assert dot.startswith('digraph "say \\"hi\\" \\\\ now" {') and dot.rstrip().endswith("}")
    assert dot.count("{") == dot.count("}")
    for instr in g.module.entry:
        assert f'label="{instr.name}\\n' in dot
    assert "subgraph cluster_" in dot and "->" in dot and "penwidth=" in dot


def test_text_summary_for_terminals(mlp_hlo):
    text = repr(graph(mlp_hlo, title="mlp", stage="optimized"))
    assert text.startswith("HloGraph 'mlp' (optimized): module 'jit_mlp_loss'")
    assert "instructions in" in text and "opens with" in text
    top = re.search(r"top ENTRY ops: (\S+) ", text).group(1)  # fusion, or dot before XLA fuses it
    assert top in {instr.opcode for instr in parse_hlo(mlp_hlo).entry}


def test_lowered_hlo_with_calls_and_loops():
    def body(i, x):
        return jnp.sin(x) + i

    @jax.jit
    def inner(x):
        return jnp.cos(x) * 2

    def f(x):
        return inner(jax.lax.fori_loop(0, 3, body, x))

    lowered = jax.jit(f).lower(jnp.ones(4)).as_text(dialect="hlo", debug_info=True)
    g = graph(lowered, stage="lowered")
    data = g._data
    whiles = [
        i for i, instr in enumerate(data.instr) if instr is not None and instr.opcode == "while"
    ]
    assert whiles and len(data.children[whiles[0]]) == 2  # body and condition
    assert {data.label[k].split(":")[0] for k in data.children[whiles[0]]} == {"body", "condition"}
    assert payload_of(g._repr_html_())["stage"] == "lowered"


def test_the_outputs_stay_out_of_the_scopes_that_compute_them(mlp_hlo):
    """The ROOT has no op_name; in the forward pass's scope it would read from the backward."""
    data = graph(mlp_hlo)._data
    root = next(i for i, ins in enumerate(data.instr) if ins is data.module.entry.root)
    ancestors = []
    node = data.parent[root]
    while node >= 0:
        ancestors.append(node)
        node = data.parent[node]
    assert [data.label[a] for a in ancestors] == ["outputs", "mlp_loss"]
    assert data.section[ancestors[0]] == "outputs" and data.parent[ancestors[0]] == 0
    assert any("dense_1" in data.label[i] for i, k in enumerate(data.kind) if k == SCOPE)


def test_the_legend_comes_with_the_payload(mlp_hlo):
    payload = payload_of(graph(mlp_hlo)._repr_html_())
    assert payload["legend"] == [list(item) for item in CATEGORY_LABELS.items()]
    assert all(name in CATEGORIES for name in CATEGORY_LABELS)


def test_the_payload_carries_its_schema_kinds_and_palette(mlp_hlo):
    payload = payload_of(graph(mlp_hlo)._repr_html_())
    assert payload["schema"] == SCHEMA == 2 and "version" not in payload
    assert payload["kinds"] == [
        ["instruction", "instruction"],
        ["scope", "name scope"],
        ["part", "part of a group"],
        ["computation", "computation"],
    ]
    assert {kind for kind in payload["kind"]} <= set(range(len(payload["kinds"])))
    assert payload["categories"] == list(CATEGORIES)
    # The fills the stylesheet held before they moved to the payload, copied by hand.
    light = dict(zip(payload["categories"], payload["palette"]["light"]))
    dark = dict(zip(payload["categories"], payload["palette"]["dark"]))
    assert (light["matmul"], dark["matmul"]) == ("#f6b26b", "#774510")
    assert (light["group"], dark["group"]) == ("#eef1f6", "#30353e")
    assert (light["other"], dark["other"]) == ("#ffffff", "#2b2f36")
    assert len(light) == len(dark) == len(CATEGORIES) == 9
    heat = payload["heat"]
    assert (heat["colours"][0], heat["colours"][-1]) == ("#ffffcc", "#800026")
    assert len(heat["colours"]) == 9 and heat["darkFrom"] == 0.55


def test_the_viewer_reads_the_schema_python_writes_and_keeps_no_palette_of_its_own():
    assets = pathlib.Path(tpukit.graph.__file__).parent / "assets"
    script = (assets / "graph_view.js").read_text()
    assert re.findall(r"^var SCHEMA = (\d+);", script, re.MULTILINE) == [str(SCHEMA)]
    for name in ("graph_view.js", "graph_layout.js", "graph_camera.js", "diff_view.js"):
        text = (assets / name).read_text()
        assert "KIND_" not in text, name
        fills = [colour for entry in COLOURS.values() for colour in (entry.light, entry.dark)]
        for colour in [*HEAT, *fills]:
            assert colour not in text.lower(), (name, colour)
    css = (assets / "graph_view.css").read_text().lower()
    for entry in COLOURS.values():
        assert entry.light not in css or entry.name in ("other", "group"), entry
        assert entry.dark not in css, entry


def _hue_of(colour: str) -> float | None:
    """The hue in degrees of a #rrggbb colour; None for a grey."""
    r, g, b = (int(colour[k : k + 2], 16) / 255 for k in (1, 3, 5))
    hue, _, saturation = colorsys.rgb_to_hls(r, g, b)
    return None if saturation < 0.05 else 360 * hue


def test_the_plots_colour_each_op_in_the_hue_the_graph_fills_it_with():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from tpukit.compilation._plots import CATEGORY_COLORS, plot_ops

    def f(x, w):
        return jnp.exp(x @ w).sum(axis=0)

    compiled = tpukit.compile(f, jnp.ones((8, 16)), jnp.ones((16, 4)))
    payload = payload_of(compiled.graph()._repr_html_())
    fill_of_op = {}
    for node, (kind, op) in enumerate(zip(payload["kind"], op_names(payload))):
        if kind == INSTRUCTION and op != "fusion":
            fill_of_op[op] = payload["palette"]["light"][payload["cat"][node]]
    for op, cat in zip(payload.get("bodyOps", ()), payload.get("bodyOpCat", ())):
        fill_of_op[op] = payload["palette"]["light"][cat]  # (the bodies the page builds)
    ax = plot_ops(compiled).axes[0]
    bars = dict(zip((t.get_text() for t in ax.get_yticklabels()), ax.containers[1]))
    compared = 0
    for op, bar in bars.items():
        if op not in fill_of_op:
            continue
        category = tpukit.hlo.op_category(op)
        assert CATEGORY_COLORS[category] == COLOURS[category].plot
        plotted = matplotlib.colors.to_hex(bar.get_facecolor())
        assert plotted == COLOURS[category].plot
        light, plotted_hue = _hue_of(fill_of_op[op]), _hue_of(plotted)
        assert (light is None) == (plotted_hue is None), (op, fill_of_op[op], plotted)
        if light is not None:  # same hue, darker: within 10 degrees round the colour wheel
            assert min(abs(light - plotted_hue), 360 - abs(light - plotted_hue)) < 10, op
        compared += 1
    assert {"dot", "exponential", "reduce"} <= set(bars) and compared >= 3


def test_every_category_has_one_hue_in_the_graph_and_the_plots():
    assert set(CATEGORIES) <= set(PLOT_COLOURS) and PLOT_COLOURS["fusion"] == "#45818e"
    for entry in COLOURS.values():
        light, dark, plot = (_hue_of(c) for c in (entry.light, entry.dark, entry.plot))
        if entry.name in ("parameter/constant", "other", "group"):
            continue  # greys (the group's a blue-grey), no hue to keep
        for hue in (dark, plot):
            assert min(abs(light - hue), 360 - abs(light - hue)) < 10, entry


def test_a_compiled_functions_graph_names_its_stage_once():
    def f(x):
        return jnp.sin(x) * 2

    compiled = tpukit.compile(f, tpukit.shape("f32[8]"))
    for stage in ("optimized", "lowered"):
        g = compiled.graph(stage)
        assert g.title == "f" and g.stage == stage
        assert repr(g).count(stage) == 1
        payload = payload_of(g._repr_html_())
        assert (payload["title"], payload["stage"]) == ("f", stage)


def test_a_compiled_functions_parameters_are_labelled_with_its_argument_names():
    """The card names the arguments as the function does; the graph labelled them by
    their HLO names (``traced_args_0_.1``: tpukit.compile hands XLA a tuple)."""

    def layer(x, params, *rest):
        return jnp.tanh(x @ params["w"] + params["b"]) + sum(rest)

    scalars = [tpukit.shape("f32[]")] * 10  # traced_args[2] to [11]: [1] prefixes no [11]
    weights = {"w": tpukit.shape("f32[3,4]"), "b": tpukit.shape("f32[4]")}
    compiled = tpukit.compile(layer, tpukit.shape("f32[2,3]"), weights, *scalars)
    expected = {"x", "params['b']", "params['w']", *(f"rest[{i}]" for i in range(10))}
    for stage in ("optimized", "lowered"):
        data = compiled.graph(stage)._data
        entry = data.module.entry.instructions
        labels = {data.label[i] for i, ins in enumerate(data.instr) if ins in entry}
        assert expected <= labels and not any("traced" in label for label in labels), labels


def test_graph_opens_an_hlo_dump_by_its_path(tmp_path, mlp_hlo):
    dump = tmp_path / "module_0001.jit_mlp_loss.cpu_after_optimizations.txt"
    dump.write_text(mlp_hlo)
    from_text = graph(mlp_hlo)
    for source in (dump, str(dump)):
        opened = graph(source, stage="optimized")
        assert opened.num_instructions == from_text.num_instructions
        assert opened.module.name == from_text.module.name
    with pytest.raises(tpukit.ArgumentError, match=r"is a folder.*module_0001\.jit_mlp_loss"):
        graph(tmp_path)  # before the report below joins the folder
    with pytest.raises(FileNotFoundError, match="xla_dump_to"):
        graph(str(tmp_path / "missing.txt"))
    binary = tmp_path / "module.pb"
    binary.write_bytes(b"\x08\xff\xfe\x00\x81")
    with pytest.raises(tpukit.ArgumentError, match="not text"):
        graph(binary)
    report = tmp_path / "module_0001.jit_f.cpu_after_optimizations-live-range.txt"
    report.write_text("HloLiveRange (max 5):\n  InstructionSequence:\n    0:w.1\n")
    with pytest.raises(tpukit.ArgumentError, match="holds no HLO module.*after_optimizations"):
        graph(report)
    mlir = tmp_path / "module.mlir"
    mlir.write_text("module @jit_f {\n  func.func public @main() {\n    return\n  }\n}\n")
    with pytest.raises(tpukit.ArgumentError, match=r"StableHLO/MLIR.*dialect='hlo'"):
        graph(mlir)
    assert "graph" in dir(tpukit.hlo)


def wide_call_hlo(n: int) -> str:
    """A GPU-style module: n parameters passed to one call (a command buffer) doing the work."""
    params = "\n".join(f"  p{i} = f32[8]{{0}} parameter({i})" for i in range(n))
    names = ", ".join(f"p{i}" for i in range(n))
    chain = ["  a1 = f32[8]{0} add(p0, p1)"]
    chain += [f"  a{i} = f32[8]{{0}} add(a{i - 1}, p{i})" for i in range(2, n)]
    chain[-1] = chain[-1].replace(f"  a{n - 1} ", f"  ROOT a{n - 1} ")
    return "\n".join(
        ["HloModule wide", "", "command_buffer {", params, *chain, "}", "", "ENTRY main {"]
        + [params, f"  ROOT c = f32[8]{{0}} call({names}), to_apply=command_buffer", "}"]
    )


def test_a_wide_module_opens_on_its_work_with_parameters_collapsed():
    g = graph(wide_call_hlo(35))
    data = g._data
    opened = set(first_view(data))
    call = next(i for i, ins in enumerate(data.instr) if ins is not None and ins.opcode == "call")
    assert call in opened  # the lone call holding all the work is entered
    inputs = [i for i, name in data.section.items() if name == "inputs"]
    assert len(inputs) == 2 and not opened & set(inputs)  # entry's and the call's, closed
    shown, _ = data.visible(opened)
    assert (
        sum(1 for n in shown if data.instr[n] is not None and data.instr[n].opcode == "parameter")
        == 0
    )
    assert len(shown) <= OPEN_NODES


def test_the_wire_form_gives_back_every_text_and_shape_and_is_smaller(mlp_hlo):
    """Issue 24: the page carries instruction texts without the head their label, shape and
    op columns give, and shapes and opcodes by index; read back as the viewer does, nothing
    differs."""
    g = graph(mlp_hlo, title="mlp")
    payload = graph_payload(g._data, "mlp", "optimized")
    wire = payload_of(g._repr_html_())
    shapes, ops = [wire["shapes"][k] for k in wire["shape"]], op_names(wire)
    heads = {0: "", 1: "%", 2: "ROOT %"}
    texts = [
        tail if not head else f"{heads[head]}{label} = {shape} {op}{tail}"
        for head, tail, label, shape, op in zip(
            wire["textHead"], wire["text"], wire["label"], shapes, ops
        )
    ]
    assert shapes == payload["shape"] and ops == payload["op"] and texts == payload["text"]
    planes = [wire[f"block{name}"] for name in ("From", "To", "Bytes", "Index")]
    edges = [number for edge in zip(*planes, strict=True) for number in edge]
    blocks = owned(wire["blockOwner"], wire["blockSize"], edges)
    params = owned(wire["paramOwner"], wire["paramSize"], wire["paramNodes"])
    assert blocks == payload["blocks"]
    assert {str(owner): nodes for owner, nodes in params} == payload["params"]
    roots = {str(owner): node for owner, node in zip(wire["rootOwner"], wire["rootNode"])}
    assert roots == payload["roots"] and payload["roots"]
    assert sum(wire["textHead"]) > len(wire["textHead"]) // 2  # most texts lost their head
    assert len(json.dumps(pack(payload))) < len(json.dumps(payload))


def owned(owners: list[int], sizes: list[int], numbers: list[int]) -> list[list]:
    """``[owner, numbers]`` of each owner, from the wire's columns (`_graph_wire._owned`)."""
    starts = [sum(sizes[:k]) for k in range(len(sizes))]
    return [[o, numbers[at : at + size]] for o, at, size in zip(owners, starts, sizes)]


def test_columns_of_texts_travel_as_lines_unless_a_text_breaks_a_line():
    """The long columns of texts go as UTF-8 lines after the arrays; one whose texts hold a
    line break (or that is empty) goes as JSON; both read back as they were."""
    wire = {"label": ["a\nb", "c"], "text": ["x", "", "é … 𝔵"], "strings": []}
    raw = wire_bytes(wire)
    assert read_wire(raw) == wire
    size = int.from_bytes(raw[1:5], "little")
    fields = json.loads(raw[5 : 5 + size])
    assert fields["binary"] == [["text", "lines", len("x\n\né … 𝔵".encode())]]
    assert fields["label"] == ["a\nb", "c"] and fields["strings"] == []


@pytest.mark.parametrize("name", sorted(p.name for p in HLO_FIXTURES.glob("*.hlo")))
def test_the_page_s_payload_made_in_one_pass_is_the_payload_packed(name):
    """Issue 24: `graph_wire` cuts each text as it makes it; what it gives is `pack` of the
    payload, field for field and in the same order (a loop's relabelled head included), and
    the page's bytes read back to it."""
    # A tree of its own: a payload names the parts of the tree it is made from, and the
    # module (kept by its text) and its tree are shared with other tests.
    data = GraphTree(parse_hlo((HLO_FIXTURES / name).read_text()))
    times = {instr.name: 1e-6 for instr in data.instr if instr is not None}
    for extra in ({}, {"times": times}, {"memory": {name: 8 for name in times}}):
        packed = pack(graph_payload(data, "t", "optimized", **extra))
        wire = graph_wire(data, "t", "optimized", **extra)
        assert wire == packed and list(wire) == list(packed)
        assert decode_payload(encode_wire(wire)) == wire


@pytest.mark.parametrize("size", [0, 1, 1000, (1 << 20) - 1, 1 << 20, 3_000_001])
def test_deflate_on_two_cores_gives_back_the_bytes_and_one_core_deflates_as_zlib(size, monkeypatch):
    """`_graph_wire.deflate`: from `SPLIT_AT` bytes on, with two cores free, the halves are
    deflated at once into one zlib stream that inflates to the same bytes (checksum and
    all); below it, or with one core, it is ``zlib.compress`` itself."""
    from tpukit.graph import _graph_wire

    raw = (random.Random(size).randbytes(size // 3 + 1) * 3)[:size]  # (repeats: it compresses)
    monkeypatch.setattr(_graph_wire, "_free_cores", lambda: 2)
    deflated = _graph_wire.deflate(raw)
    assert zlib.decompress(deflated) == raw
    split = size >= _graph_wire.SPLIT_AT
    assert (deflated != zlib.compress(raw, _graph_wire._LEVEL)) == split
    monkeypatch.setattr(_graph_wire, "_free_cores", lambda: 1)
    assert _graph_wire.deflate(raw) == zlib.compress(raw, _graph_wire._LEVEL)


@pytest.mark.parametrize("cores", [1, 2])
def test_the_payload_deflated_in_pieces_is_the_payload_deflated_whole(cores, monkeypatch):
    """Issue 38: a large module's payload is written (`wire_parts`) and deflated
    (`deflate_parts`) in pieces, never joined: the bytes are those of `deflate` of
    `wire_bytes`, on one core and split across two (the cut falls inside a piece), and a
    wire spent as it is written (`encode_wire(..., spend=True)`) gives the same page."""
    from tpukit.graph import _graph_wire

    monkeypatch.setattr(_graph_wire, "_free_cores", lambda: cores)
    monkeypatch.setattr(_graph_wire, "SPLIT_AT", 1000)  # (a small payload takes the split path)
    monkeypatch.setattr(_graph_wire, "_LINES_AT_A_TIME", 3)  # (its text in several pieces)
    data = GraphTree(parse_hlo((HLO_FIXTURES / "gpu_vgg19_forward.hlo").read_text()))
    wire = graph_wire(data, "t", "optimized")
    parts = _graph_wire.wire_parts(wire)
    assert len(parts) > 10 and b"".join(parts) == wire_bytes(wire)
    assert _graph_wire.deflate_parts(parts) == _graph_wire.deflate(wire_bytes(wire))
    whole = encode_wire(wire)
    assert encode_wire(graph_wire(data, "t", "optimized"), spend=True) == whole
    assert decode_payload(whole) == wire


def test_a_flat_program_too_big_for_the_view_becomes_stages_of_its_data_flow():
    # 60 ops with no names to group by, in 3 chains side by side: too tall and too wide.
    lines = ["HloModule flat", "", "ENTRY main {"]
    lines += [f"  p{c} = f32[64,64]{{1,0}} parameter({c})" for c in range(3)]
    for c in range(3):
        prev = f"p{c}"
        for k in range(20):
            op = "dot" if k == 10 else "tanh"
            rest = ", lhs_contracting_dims={1}, rhs_contracting_dims={0}" if op == "dot" else ""
            args = f"{prev}, {prev}" if op == "dot" else prev
            lines.append(f"  c{c}k{k} = f32[64,64]{{1,0}} {op}({args}){rest}")
            prev = f"c{c}k{k}"
    lines += ["  ROOT t = (f32[64,64], f32[64,64], f32[64,64]) tuple(c0k19, c1k19, c2k19)", "}"]
    g = graph("\n".join(lines) + "\n")
    data = g._data
    parts = [n for n, kind in enumerate(data.kind) if kind == PART]
    assert parts and len(data.children[0]) < 10
    frame = Frame(data)
    for part in parts:  # each stage, drawn open alone, fits the frame
        assert frame.size(part, {part})[1] <= FRAME_H
    assert frame.fits(set(first_view(data)))
    # Stages follow the data flow: the ops of one chain's stage are consecutive.
    chains = 0
    for part in parts:
        names = [data.instr[k].name for k in data.children[part] if data.instr[k] is not None]
        steps = sorted(int(n.split("k")[1]) for n in names if n.startswith("c0k"))
        if steps:
            chains += 1
            assert steps == list(range(steps[0], steps[0] + len(steps)))
    assert chains >= 3
