"""Two programs side by side: groups matched by name scope, fusions by what they are.

The pure tests compile small Flax NNX training steps (the gradient of a classifier's
loss) twice, with and without a layer, and check the matched groups, the added and
removed ops and the per-group deltas against FLOPs counted by hand (2 x multiply-adds
of each matmul). The browser tests open the view in headless Chromium, as a saved page
and as a notebook output, and click it; one writes ``out/screenshots/diff_view.png``.
"""

import pathlib

import jax
import jax.numpy as jnp
import optax
import pytest
from flax import nnx

import tpukit
from tests._support.notebook_page import NOTEBOOK_PAGE, ORIGIN, serve
from tpukit import hlo
from tpukit._compat import module_list
from tpukit.graph._diff_view import ADDED, CHANGED, REMOVED, SAME, HloDiffView, diff_graph
from tpukit.hlo import parse_hlo

BATCH, IN, HIDDEN, OUT = 8, 16, 32, 4
SCREENSHOTS = pathlib.Path(__file__).resolve().parents[2] / "out" / "screenshots"


class MLP(nnx.Module):
    def __init__(self, sizes, rngs):
        pairs = zip(sizes[:-1], sizes[1:])
        self.layers = module_list(nnx.Linear(a, b, rngs=rngs) for a, b in pairs)

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = jax.nn.relu(layer(x))
        return self.layers[-1](x)


class Classifier(nnx.Module):
    """encoder -> norm -> head, or (``deeper``) encoder -> hidden -> head: no norm."""

    def __init__(self, deeper, rngs):
        self.encoder = nnx.Linear(IN, HIDDEN, rngs=rngs)
        if deeper:
            self.hidden = nnx.Linear(HIDDEN, HIDDEN, rngs=rngs)
        else:
            self.norm = nnx.LayerNorm(HIDDEN, rngs=rngs)
        self.head = nnx.Linear(HIDDEN, OUT, rngs=rngs)

    def __call__(self, x):
        x = self.encoder(x)
        x = self.hidden(x) if hasattr(self, "hidden") else self.norm(x)
        return self.head(jax.nn.relu(x))


def loss(model, x, y):
    return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()


def grad_step(model, x, y):
    return nnx.grad(loss)(model, x, y)


def step_module(model):
    x, y = jnp.ones((BATCH, IN)), jnp.zeros((BATCH,), jnp.int32)
    return tpukit.compile(grad_step, model, x, y).hlo_module("optimized")


@pytest.fixture(scope="module")
def layers_view() -> HloDiffView:
    """An MLP's gradient step, 16-32-4 against 16-32-32-4: one layer more."""
    a = step_module(MLP([IN, HIDDEN, OUT], nnx.Rngs(0)))
    b = step_module(MLP([IN, HIDDEN, HIDDEN, OUT], nnx.Rngs(0)))
    return diff_graph(a, b, labels=("2 layers", "3 layers"))


@pytest.fixture(scope="module")
def swap_view() -> HloDiffView:
    """The norm layer removed, a hidden Linear added, encoder and head the same."""
    a = step_module(Classifier(False, nnx.Rngs(0)))
    b = step_module(Classifier(True, nnx.Rngs(0)))
    return diff_graph(a, b, labels=("norm", "hidden"))


def matmul(m, k, n):
    return 2 * m * k * n


def statuses(view, status):
    return {g.name for g in view.groups if g.status == status}


def test_an_extra_layer_is_added_and_the_deltas_are_its_matmuls(layers_view):
    view = layers_view
    assert statuses(view, ADDED) == {
        "forward › layers[2] (Linear)",
        "backward › layers[2] (Linear) backward",
    }
    assert statuses(view, REMOVED) == set()
    # Forward: x@W0 (8x16x32), h@W1, and in b h@W2; W1 is 32x4 in a, 32x32 in b.
    forward_a = matmul(BATCH, IN, HIDDEN) + matmul(BATCH, HIDDEN, OUT)
    forward_b = (
        matmul(BATCH, IN, HIDDEN) + matmul(BATCH, HIDDEN, HIDDEN) + matmul(BATCH, HIDDEN, OUT)
    )
    assert view.group("forward").flops == (forward_a, forward_b)
    assert view.group("forward").delta("flops") == forward_b - forward_a == 16384
    # Backward: a weight gradient per layer and an input gradient per layer but the first.
    backward_a = forward_a + matmul(BATCH, OUT, HIDDEN)
    backward_b = forward_b + matmul(BATCH, HIDDEN, HIDDEN) + matmul(BATCH, OUT, HIDDEN)
    assert view.group("backward").flops == (backward_a, backward_b)
    assert view.group("whole program").delta("flops") == 16384 + 32768
    added = view.group("forward › layers[2] (Linear)")
    assert added.flops == (None, matmul(BATCH, HIDDEN, OUT))
    assert added.delta("flops") == 2048
    # Its one op reads h (8x32) and W2 (32x4) and writes 8x4, in float32.
    assert added.bytes == (None, 4 * (BATCH * HIDDEN + HIDDEN * OUT + BATCH * OUT))
    assert view.group("forward › layers[0] (Linear)").status == SAME
    changed = view.group("forward › layers[1] (Linear)")
    assert changed.status == CHANGED and changed.delta("flops") == 16384 - 2048


def test_ops_are_matched_by_what_they_are_not_by_their_number(layers_view):
    view = layers_view
    added_groups = [g for g in view.groups if g.status == ADDED]
    for g in added_groups:  # every op of a new layer is new
        assert g.ops_added == g.instructions[1] > 0
    # Besides the new layer: the ReLU after the new hidden layer, forward and backward.
    forward, backward = view.group("forward"), view.group("backward")
    assert forward.ops_added == added_groups[0].ops_added + 1
    assert backward.ops_added == added_groups[1].ops_added + 1
    assert view.ops_removed == [] and all(g.ops_removed == 0 for g in view.groups)
    assert len(view.ops_added) == view.group("whole program").ops_added
    # The first layer's matmul is the same op on both sides, whatever XLA numbered it.
    side_a, side_b = view._sides
    first_a = [
        side_a.data.instr[n].name for n in side_a.ops if _in(side_a, n, "layers[0] (Linear)")
    ]
    first_b = [
        side_b.data.instr[n].name for n in side_b.ops if _in(side_b, n, "layers[0] (Linear)")
    ]
    assert len(first_a) == 1 and len(first_b) == 1
    assert view.matched_ops[first_a[0]] == first_b[0]
    assert first_a[0] != first_b[0]  # renumbered: another fusion/dot came first in b
    assert set(view.matched_ops.values()).isdisjoint(view.ops_added)


def _in(side, node, label):
    key = side.key_of[side.group_of[node]]
    return key[:2] == ("forward", label)


def test_a_removed_layer_and_an_added_one_leave_the_others_matched(swap_view):
    view = swap_view
    assert statuses(view, REMOVED) == {
        "forward › norm (LayerNorm)",
        "backward › norm (LayerNorm) backward",
    }
    assert statuses(view, ADDED) == {
        "forward › hidden (Linear)",
        "backward › hidden (Linear) backward",
    }
    head = view.group("forward › head (Linear)")
    assert head.flops == (matmul(BATCH, HIDDEN, OUT),) * 2 and head.delta("flops") == 0
    assert view.group("forward › encoder (Linear)").delta("flops") == 0
    assert view.group("backward › encoder (Linear) backward").status == SAME
    assert view.group("forward › hidden (Linear)").flops == (None, matmul(BATCH, HIDDEN, HIDDEN))
    removed = view.group("forward › norm (LayerNorm)")
    assert removed.flops == (0, None) and removed.ops_removed == removed.instructions[0] > 0
    side_a = view._sides[0]
    norm_ops = {
        side_a.data.instr[n].name
        for n in side_a.ops
        if side_a.key_of[side_a.group_of[n]][:2] == ("forward", "norm (LayerNorm)")
    }
    assert norm_ops and norm_ops <= set(view.ops_removed)


def test_a_program_against_itself_matches_every_group_and_op(layers_view):
    module = layers_view.a.module
    view = diff_graph(module, module)
    assert {g.status for g in view.groups} == {SAME}
    assert view.ops_added == [] and view.ops_removed == []
    assert view.matched_ops and all(x == y for x, y in view.matched_ops.items())


FUSED_A = """HloModule a
fused_add {
  p0 = f32[64]{0} parameter(0)
  p1 = f32[64]{0} parameter(1)
  ROOT add = f32[64]{0} add(p0, p1)
}
ENTRY main {
  x = f32[64]{0} parameter(0)
  y = f32[64]{0} parameter(1)
  ROOT fusion.1 = f32[64]{0} fusion(x, y), kind=kLoop, calls=fused_add
}
"""

FUSED_B = """HloModule b
fused_mul {
  q0 = f32[64]{0} parameter(0)
  ROOT mul = f32[64]{0} multiply(q0, q0)
}
fused_add {
  p0 = f32[64]{0} parameter(0)
  p1 = f32[64]{0} parameter(1)
  ROOT add = f32[64]{0} add(p0, p1)
}
ENTRY main {
  x = f32[64]{0} parameter(0)
  y = f32[64]{0} parameter(1)
  fusion.3 = f32[64]{0} fusion(x), kind=kLoop, calls=fused_mul
  ROOT fusion.7 = f32[64]{0} fusion(fusion.3, y), kind=kLoop, calls=fused_add
}
"""


def test_hlo_text_fusions_match_by_kind_and_root_not_by_name():
    view = diff_graph(parse_hlo(FUSED_A), FUSED_B, labels=("before", "after"))
    assert view.matched_ops == {"fusion.1": "fusion.7"}
    assert view.ops_added == ["fusion.3"] and view.ops_removed == []
    whole = view.group("whole program")
    assert whole.status == CHANGED and whole.ops_added == 1
    # fusion.3 reads 64 floats and writes 64: 512 bytes more.
    assert whole.delta("bytes") == 2 * 64 * 4
    # As tpukit.diff counts them (issue 20): fusions opened, each computation once.
    # a: 3 in ENTRY + 3 in fused_add; b: 4 in ENTRY + 2 in fused_mul + 3 in fused_add.
    assert whole.instructions == (6, 9)
    text_diff = tpukit.diff(hlo.open(FUSED_A), hlo.open(FUSED_B))
    assert whole.instructions == (
        text_diff.row("instructions (fusions opened)").a,
        text_diff.row("instructions (fusions opened)").b,
    )


def test_time_deltas_need_both_sides_profiled(layers_view):
    a, b = layers_view.a.module, layers_view.b.module
    times_a = {i.name: 1e-3 for i in a.entry if i.opcode == "fusion" or i.opcode == "dot"}
    times_b = {i.name: 2e-3 for i in b.entry if i.opcode == "fusion" or i.opcode == "dot"}
    both = diff_graph(a, b, times_a=times_a, times_b=times_b)
    first = both.group("forward › layers[0] (Linear)")  # one op, 1 ms then 2 ms
    assert first.time == pytest.approx((1e-3, 2e-3)) and first.delta("time") == pytest.approx(1e-3)
    assert "Δ time" in repr(both)
    one = diff_graph(a, b, times_a=times_a)
    assert one.group("forward › layers[0] (Linear)").delta("time") is None
    assert one.rows()[0]["time_b"] is None and "Δ time" not in repr(one)


def test_text_and_records_list_every_group_with_its_deltas(layers_view):
    text = repr(layers_view)
    assert text.startswith("HLO diff: 2 layers vs 3 layers: 13 groups: 2 added, 0 removed")
    assert "+   layers[2] (Linear)" in text and "+16.4 kFLOP" in text
    rows = layers_view.rows()
    assert [r["group"] for r in rows] == [g.name for g in layers_view.groups]
    row = next(r for r in rows if r["group"] == "forward › layers[2] (Linear)")
    assert row["status"] == "added" and row["flops_a"] is None and row["flops_delta"] == 2048
    assert row["instructions_delta"] == row["ops_added"] and row["ops_removed"] == 0


def test_tpukit_diff_graphs_its_two_sides_with_their_profiles():
    # The table's diff (tpukit.diff) opens the side-by-side view of the very programs it
    # compared, and carries time deltas when each side's profile is given.
    x, y = jnp.ones((BATCH, IN)), jnp.zeros((BATCH,), jnp.int32)
    a = tpukit.compile(grad_step, MLP([IN, HIDDEN, OUT], nnx.Rngs(0)), x, y)
    b = tpukit.compile(grad_step, MLP([IN, HIDDEN, HIDDEN, OUT], nnx.Rngs(0)), x, y)
    table = tpukit.diff(a, b, labels=("2 layers", "3 layers"))
    view = table.graph()
    assert isinstance(view, HloDiffView)
    added = statuses(view, ADDED)
    assert any("layers[2]" in name for name in added), added
    assert all(r.get("time_delta") is None for r in view.rows())
    timed = table.graph(profiles=(a.profile(repeat=2), b.profile(repeat=2)))
    assert any(r.get("time_delta") is not None for r in timed.rows())


def test_labels_must_be_two_strings(layers_view):
    with pytest.raises(tpukit.TpukitError, match="two strings"):
        diff_graph(layers_view.a.module, layers_view.b.module, labels="ab")


# -- in the browser ------------------------------------------------------------


def open_view(browser, view: HloDiffView, mode: str):
    page = browser.new_page(viewport={"width": 1300, "height": 1000})
    requests, errors = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    pages = {"/view.html": view.to_html(), "/notebook.html": NOTEBOOK_PAGE}
    serve(page, pages)
    if mode == "standalone":
        page.goto(f"{ORIGIN}/view.html")
    else:
        page.goto(f"{ORIGIN}/notebook.html")
        page.evaluate("html => window.showOutput(html)", view._repr_html_())
    page.wait_for_function(
        "document.querySelector('.tkd-root[data-state=ready]') && "
        "document.querySelectorAll('.tkd-side[data-state=ready]').length === 2",
        timeout=15000,
    )
    return page, requests, errors


def side(page, index):
    return page.locator(f'.tkd-side[data-side="{index}"]')


@pytest.mark.parametrize("mode", ["standalone", "notebook"])
def test_both_graphs_draw_with_the_removed_and_added_groups_marked(browser, swap_view, mode):
    page, requests, errors = open_view(browser, swap_view, mode)
    for index in (0, 1):
        assert int(side(page, index).get_attribute("data-nodes")) > 3
        assert side(page, index).locator("path.tkg-edge").count() > 3
    removed = side(page, 0).locator('.tkg-node[data-name="norm (LayerNorm)"]')
    added = side(page, 1).locator('.tkg-node[data-name="hidden (Linear)"]')
    assert removed.count() == 1 and "tkd-removed" in removed.get_attribute("class")
    assert added.count() == 1 and "tkd-added" in added.get_attribute("class")
    assert side(page, 1).locator(".tkd-removed").count() == 0  # b shows no removals
    assert side(page, 0).locator(".tkd-added").count() == 0
    stroke = added.locator("rect.tkg-box").evaluate("r => getComputedStyle(r).stroke")
    assert stroke == "rgb(30, 142, 62)"  # green
    stroke = removed.locator("rect.tkg-box").evaluate("r => getComputedStyle(r).stroke")
    assert stroke == "rgb(217, 48, 37)"  # red
    assert page.locator('.tkd-table tr[data-status="removed"]').count() == 2
    assert errors == []
    assert requests == [f"{ORIGIN}/{'view' if mode == 'standalone' else 'notebook'}.html"]
    page.close()


def test_clicking_a_group_highlights_its_match_on_the_other_side(browser, swap_view):
    page, _, errors = open_view(browser, swap_view, "standalone")
    side(page, 0).locator('.tkg-node[data-name="head (Linear)"]').click(position={"x": 60, "y": 18})
    linked = side(page, 1).locator(".tkd-linked")
    assert linked.count() == 1 and linked.get_attribute("data-name") == "head (Linear)"
    assert page.locator(".tkd-table tr.tkd-current").get_attribute("data-name") == (
        "forward › head (Linear)"
    )
    diff = side(page, 0).locator('.tkg-panel [data-field="diff"]').inner_text()
    assert "matches head (Linear) in hidden" in diff
    # A removed group's row: ringed on its side, nothing to ring on the other.
    page.locator('.tkd-table tr[data-name="backward › norm (LayerNorm) backward"]').click()
    ringed = side(page, 0).locator(".tkd-linked")
    assert ringed.get_attribute("data-name") == "norm (LayerNorm) backward"
    assert "tkd-removed" in ringed.get_attribute("class")
    assert side(page, 1).locator(".tkd-linked").count() == 0
    # The added group from the table, then the shot: table, both graphs, marks and rings.
    page.locator('.tkd-table tr[data-name="forward › hidden (Linear)"]').click()
    assert side(page, 1).locator(".tkd-linked").get_attribute("data-name") == "hidden (Linear)"
    side(page, 1).locator('.tkg-node[data-name="encoder (Linear)"]').click(
        position={"x": 60, "y": 18}
    )
    assert side(page, 0).locator(".tkd-linked").get_attribute("data-name") == "encoder (Linear)"
    # the panel on the left spoke of head (Linear): a click on the right closed it
    assert side(page, 0).locator(".tkg-panel").is_hidden()
    assert side(page, 1).locator(".tkg-panel").is_visible()
    # the first layer's row: rings on both sides, the panels closed (none covers a ring)
    page.locator('.tkd-table tr[data-name="forward › encoder (Linear)"]').click()
    assert side(page, 1).locator(".tkg-panel").is_hidden()
    for index in (0, 1):
        assert side(page, index).locator(".tkd-linked").get_attribute("data-name") == (
            "encoder (Linear)"
        )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "diff_view.png"), full_page=True)
    assert errors == []
    page.close()


EVIL = "</script><img src=x onerror=alert(1)>"
SCOPED = f"""HloModule scoped
ENTRY main {{
  x = f32[64]{{0}} parameter(0)
  s = f32[64]{{0}} sine(x), metadata={{op_name="jit(f)/{EVIL}/sin"}}
  c = f32[64]{{0}} cosine(s), metadata={{op_name="jit(f)/{EVIL}/cos"}}
  ROOT r = f32[64]{{0}} add(c, x), metadata={{op_name="jit(f)/tail/add"}}
}}
"""


def test_labels_and_scope_names_from_user_code_show_as_text_and_never_run(browser):
    more = SCOPED.replace(
        "ROOT r = f32[64]{0} add(c, x)",
        f'e = f32[64]{{0}} exponential(c), metadata={{op_name="jit(f)/{EVIL}/exp"}}\n'
        "  ROOT r = f32[64]{0} add(e, x)",
    )
    view = diff_graph(SCOPED, more, labels=(EVIL, "after"))
    assert view.group(EVIL).ops_added == 1  # the exp, in the scope both sides have
    page, _, errors = open_view(browser, view, "standalone")
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    assert EVIL in page.locator(".tkd-title").inner_text()
    row = page.locator(".tkd-table tbody tr").nth(1)
    assert row.locator("td.tkd-group").inner_text() == EVIL
    row.click()
    for index in (0, 1):
        assert side(page, index).locator(".tkd-linked").get_attribute("data-name") == EVIL
    assert page.locator("img").count() == 0 and dialogs == [] and errors == []
    page.close()


# PyTorch/XLA numbers its op names anew at each stage: the same matmul is
# "SyncTensorsGraph.171/aten__addmm.12" before and "SyncTensorsGraph.98/aten__addmm.40"
# after. Equal FLOPs (2 * 8*4 * 16 = 1,024 each side) must read as one matched program.
RENUMBERED = """HloModule SyncTensorsGraph.{graph}
ENTRY main {{
  x = f32[8,16]{{1,0}} parameter(0)
  w = f32[16,4]{{1,0}} parameter(1)
  d = f32[8,4]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, metadata={{op_type="aten__addmm" op_name="SyncTensorsGraph.{graph}/aten__addmm.{op}/dot"}}
  ROOT t = f32[8,4]{{1,0}} tanh(d), metadata={{op_type="aten__tanh" op_name="SyncTensorsGraph.{graph}/aten__tanh.{tanh}/tanh"}}
}}
"""


def test_renumbered_op_names_match_by_shape_opcode_and_place():
    before = RENUMBERED.format(graph=171, op=12, tanh=13)
    after = RENUMBERED.format(graph=98, op=40, tanh=41)
    view = diff_graph(before, after, labels=("before", "after"))
    statuses = {g.name: g.status for g in view.groups}
    assert ADDED not in statuses.values() and REMOVED not in statuses.values(), statuses
    assert view.matched_ops == {"d": "d", "t": "t"}
    assert view.group("whole program").flops == (1_024, 1_024)


def test_the_whole_program_row_equals_the_text_diff_on_a_loop():
    from tests._support.hlo_texts import SCAN

    a, b = hlo.open(SCAN), hlo.open(SCAN.replace("constant(16)", "constant(8)"))
    whole = diff_graph(a.hlo_module(), b.hlo_module()).group("whole program")
    text = tpukit.diff(a, b)
    assert whole.flops == (text.row("FLOPs").a, text.row("FLOPs").b) == (65_536, 32_768)
    assert whole.bytes == (text.row("bytes accessed").a, text.row("bytes accessed").b)
    assert whole.delta("bytes") < 0  # 8 steps move less than 16


# A softmax's sums as JAX lowers them (printed without metadata: ops named by primitive)
# and as XLA fuses them (each fusion's op_name names the primitive it came from).
SOFTMAX_LOWERED = """HloModule jit_softmax
region_max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
region_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[4,128]{1,0} parameter(0)
  low = f32[] constant(-inf)
  reduce_max.7 = f32[4]{0} reduce(x, low), dimensions={1}, to_apply=region_max
  zero = f32[] constant(0)
  exp.1 = f32[4,128]{1,0} exponential(x)
  ROOT reduce_sum.7 = f32[4]{0} reduce(exp.1, zero), dimensions={1}, to_apply=region_add
}"""
SOFTMAX_OPTIMIZED = """HloModule jit_softmax, is_scheduled=true
region_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
fused_sum {
  p = f32[4,128]{1,0} parameter(0)
  e = f32[4,128]{1,0} exponential(p)
  zero = f32[] constant(0)
  ROOT r = f32[4]{0} reduce(e, zero), dimensions={1}, to_apply=region_add
}
ENTRY main {
  x = f32[4,128]{1,0} parameter(0)
  ROOT sum_fusion = f32[4]{0} fusion(x), kind=kLoop, calls=fused_sum, metadata={op_name="jit(softmax)/reduce_sum"}
}"""


def test_a_fused_op_pairs_with_the_lowered_op_it_came_from_not_the_first_alike():
    """Issue 38: lowered against optimized, the fusion XLA made of ``reduce_sum`` pairs
    with the lowered ``reduce_sum``, though the ``reduce_max`` before it (gone: its
    result was never used) is as alike by shape and work and comes first."""
    view = diff_graph(SOFTMAX_LOWERED, SOFTMAX_OPTIMIZED, labels=("lowered", "optimized"))
    assert view.matched_ops == {"reduce_sum.7": "sum_fusion"}, view.matched_ops


# ``jax.lax.top_k`` as JAX 0.10 lowers it and as XLA:CPU compiles it (printed by
# ``jax.jit(f).lower(x).compile().as_text()``, metadata cut): the ``topk`` becomes a
# ``TopK`` custom-call that calls a scalar comparator.
TOPK_LOWERED = """HloModule jit_sort_topk
ENTRY main.1 {
  x.1 = f32[64,1024]{1,0} parameter(0)
  top_k.3 = (f32[64,8]{1,0}, s32[64,8]{1,0}) topk(x.1), k=8, largest=true
  top_k.4 = f32[64,8]{1,0} get-tuple-element(top_k.3), index=0
  top_k.5 = s32[64,8]{1,0} get-tuple-element(top_k.3), index=1
  ROOT tuple.1 = (f32[64,8]{1,0}, s32[64,8]{1,0}) tuple(top_k.4, top_k.5)
}"""
TOPK_OPTIMIZED = """HloModule jit_sort_topk, is_scheduled=true
%compare-greater-than.1.clone (p.0.lhs.0: f32[], p.0.rhs.0: f32[], p.1.lhs.0: s32[], p.1.rhs.0: s32[]) -> pred[] {
  %p.0.lhs.0 = f32[] parameter(0)
  %p.0.rhs.0 = f32[] parameter(1)
  %p.1.lhs.0 = s32[] parameter(2)
  %p.1.rhs.0 = s32[] parameter(3)
  %constant.3 = s32[] constant(0)
  %constant.4 = s32[] constant(2147483647)
  %bitcast.2 = s32[] bitcast(%p.0.lhs.0)
  %bitcast.3 = s32[] bitcast(%p.0.rhs.0)
  %xor.2 = s32[] xor(%constant.4, %bitcast.2)
  %compare.4 = pred[] compare(%bitcast.2, %constant.3), direction=LT
  %xor.3 = s32[] xor(%constant.4, %bitcast.3)
  %compare.5 = pred[] compare(%bitcast.3, %constant.3), direction=LT
  %select.2 = s32[] select(%compare.4, %xor.2, %bitcast.2)
  %select.3 = s32[] select(%compare.5, %xor.3, %bitcast.3)
  ROOT %compare.6 = pred[] compare(%select.2, %select.3), direction=GT
}

ENTRY %main.1 (x.1: f32[64,1024]) -> (f32[64,8], s32[64,8]) {
  %x.1 = f32[64,1024]{1,0} parameter(0), metadata={op_name="x"}
  ROOT %custom-call = (f32[64,8]{1,0}, s32[64,8]{1,0}) custom-call(%x.1), custom_call_target="TopK", called_computations={%compare-greater-than.1.clone}, metadata={op_name="jit(sort_topk)/top_k"}
}"""


def test_a_library_call_pairs_with_the_op_it_names_and_its_comparator_is_no_op():
    """The comparator XLA gives TopK runs per element, like a sort's: its compares and
    selects are not ops of the program (they were 7 unmatched "ops"), and the custom-call
    pairs with the lowered ``topk``."""
    view = diff_graph(TOPK_LOWERED, TOPK_OPTIMIZED, labels=("lowered", "optimized"))
    assert view.matched_ops == {"top_k.3": "custom-call"}, view.matched_ops
    module = parse_hlo(TOPK_OPTIMIZED)
    assert module.computations["compare-greater-than.1.clone"].kind == "applied"


def test_a_fusion_that_only_lays_data_out_pairs_with_the_lowered_transpose():
    """XLA makes a lowered ``transpose`` a ``transpose_copy_fusion`` (transpose, copy):
    its work is the transpose it moves data by, not its root's ``copy``."""
    lowered = """HloModule jit_t
ENTRY main {
  x = f32[28,28,32,6]{3,2,1,0} parameter(0)
  ROOT transpose.3 = f32[6,28,28,32]{3,2,1,0} transpose(x), dimensions={3,0,1,2}
}"""
    optimized = """HloModule jit_t, is_scheduled=true
fused_transpose {
  p = f32[28,28,32,6]{3,2,1,0} parameter(0)
  t = f32[6,28,28,32]{0,3,2,1} transpose(p), dimensions={3,0,1,2}
  ROOT c = f32[6,28,28,32]{3,2,1,0} copy(t)
}
ENTRY main {
  x = f32[28,28,32,6]{3,2,1,0} parameter(0)
  ROOT transpose_copy_fusion = f32[6,28,28,32]{3,2,1,0} fusion(x), kind=kLoop, calls=fused_transpose
}"""
    view = diff_graph(lowered, optimized, labels=("lowered", "optimized"))
    assert view.matched_ops == {"transpose.3": "transpose_copy_fusion"}, view.matched_ops


def test_an_op_xla_rewrote_pairs_by_the_primitive_its_op_name_kept():
    """XLA:CPU rewrites ``select-and-scatter`` (max pooling's gradient) as a ``scatter``
    fusion that keeps the primitive's op_name; the two pair (from the LeNet-5 step)."""
    op_name = 'metadata={op_name="jit(train_step)/transpose(jvp(model))/select_and_scatter"}'
    lowered = f"""HloModule jit_pool_grad
ge {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}}
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}
ENTRY main {{
  x = f32[32,28,28,6]{{3,2,1,0}} parameter(0)
  g = f32[32,14,14,6]{{3,2,1,0}} parameter(1)
  zero = f32[] constant(0)
  ROOT select_and_scatter.19 = f32[32,28,28,6]{{3,2,1,0}} select-and-scatter(x, g, zero), window={{size=1x2x2x1 stride=1x2x2x1}}, select=ge, scatter=add, {op_name}
}}"""
    optimized = f"""HloModule jit_pool_grad, is_scheduled=true
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}
wrapped_scatter_computation {{
  p0 = f32[32,28,28,6]{{3,2,1,0}} parameter(0)
  p1 = s32[37632,4]{{1,0}} parameter(1)
  p2 = f32[37632,1,1,1,1]{{4,3,2,1,0}} parameter(2)
  ROOT scatter.7 = f32[32,28,28,6]{{3,2,1,0}} scatter(p0, p1, p2), update_window_dims={{1,2,3,4}}, inserted_window_dims={{}}, scatter_dims_to_operand_dims={{0,1,2,3}}, index_vector_dim=1, to_apply=add
}}
ENTRY main {{
  x = f32[32,28,28,6]{{3,2,1,0}} parameter(0)
  i = s32[37632,4]{{1,0}} parameter(1)
  u = f32[37632,1,1,1,1]{{4,3,2,1,0}} parameter(2)
  ROOT wrapped_scatter.2 = f32[32,28,28,6]{{3,2,1,0}} fusion(x, i, u), kind=kLoop, calls=wrapped_scatter_computation, {op_name}
}}"""
    view = diff_graph(lowered, optimized, labels=("lowered", "optimized"))
    assert view.matched_ops == {"select_and_scatter.19": "wrapped_scatter.2"}, view.matched_ops
