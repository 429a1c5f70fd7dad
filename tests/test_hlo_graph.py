"""The HLO graph seen from Python: the tree it groups, the HTML it writes, DOT and the summary.

What the page does in a browser is in test_hlo_graph_browser.py.
"""

import base64
import json
import re
import zlib

import jax
import jax.numpy as jnp
import pytest

import tpukit
from tpukit.hlo import parse_hlo
from tpukit.hlo._graph_data import (
    CATEGORIES,
    CATEGORY_LABELS,
    INSTRUCTION,
    MAX_CHILDREN,
    OPEN_NODES,
    PART,
    SCOPE,
)
from tpukit.hlo._graph_view import HloGraph, graph

EVIL = "</script><img src=x onerror=alert(1)>"


def mlp_loss(x, w1, w2):
    with jax.named_scope("dense_1"):
        h = jax.nn.relu(x @ w1)
    with jax.named_scope("dense_2"):
        return jnp.tanh(h @ w2).sum()


@pytest.fixture(scope="module")
def mlp_hlo():
    args = (jnp.ones((8, 16)), jnp.ones((16, 32)), jnp.ones((32, 4)))
    return jax.jit(jax.grad(mlp_loss, argnums=(1, 2))).lower(*args).compile().as_text()


def payload_of(fragment: str) -> dict:
    found = re.search(
        r'tpukitGraphView\(document\.getElementById\("([\w-]+)"\),"([A-Za-z0-9+/=]+)"', fragment
    )
    assert found, "the fragment should boot the viewer with its element id and payload"
    return json.loads(zlib.decompress(base64.b64decode(found.group(2))))


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
    with pytest.raises(TypeError, match="HLO text or an HloModule"):
        graph(42)
    with pytest.raises(ValueError, match="does not look like HLO"):
        graph("module @jit_f { func.func public @main() }")


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


def test_a_wide_computation_is_split_into_parts_and_opens_with_tens_of_nodes():
    g = graph(long_chain_hlo(500))
    data = g._data
    assert all(len(kids) <= MAX_CHILDREN for kids in data.children)
    assert sum(1 for k in data.kind if k == PART) >= 500 // MAX_CHILDREN
    nodes, edges = g.view_counts()
    assert 10 <= nodes <= OPEN_NODES and edges > 0
    assert g.num_instructions == 501


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
    assert payload["title"] == "mlp" and len(payload["kind"]) == len(g._data.kind)
    assert payload["open"][0] == 0 and all(
        payload["kind"][i] != INSTRUCTION for i in payload["open"]
    )


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
    assert all(data.kind[a] != SCOPE for a in ancestors), [data.label[a] for a in ancestors]
    assert any("dense_1" in data.label[i] for i, k in enumerate(data.kind) if k == SCOPE)


def test_the_legend_comes_with_the_payload(mlp_hlo):
    payload = payload_of(graph(mlp_hlo)._repr_html_())
    assert payload["legend"] == [list(item) for item in CATEGORY_LABELS.items()]
    assert all(name in CATEGORIES for name in CATEGORY_LABELS)


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
