"""The figures tpukit reads from anyone's HLO, checked against figures derived by hand (issue 20).

Each module is written by hand, small enough to count on paper; the comment above it
gives the derivation (here, or in ``tests/_support/hlo_texts.py`` for `SCAN` and
`TWO_CALLS`, which other folders' tests read too). The loop fixtures follow the shape of the modules in openxla/xla
``xla/hlo/analysis/while_loop_analysis_test.cc`` (a ``(f32[...], s32[])`` loop tuple
with the counter at index 1, ``compare(gte, constant)`` in the condition) and of
optimized TPU/GPU dumps, where the comparison sits inside a fusion and the counter's
start is a ``copy`` of a constant.
"""

from __future__ import annotations

import pathlib

import pytest

import tpukit
from tests._support.hlo_texts import SCAN, TWO_CALLS
from tpukit import hlo
from tpukit._errors import HloTextError
from tpukit.graph._graph_payload import graph_payload
from tpukit.hlo.analysis import instruction_flops
from tpukit.hlo.analysis._loops import trip_count

STEP_FLOPS = 2 * 8 * 16 * 16


def test_a_scan_counts_its_body_times_the_derived_trip_count():
    program = hlo.open(SCAN)
    assert trip_count(program.hlo_module().instruction("loop"), program.hlo_module()) == 16
    assert program.cost.flops == 16 * STEP_FLOPS == 65_536
    assert program.cost.all_flops == 65_536 + 16 + 17
    assert program.cost.bytes_accessed == 16 * 2_060 + 17 * 9 == 33_113
    assert program.cost.unknown_loops == ()
    assert "loop x16" in repr(program)


# The optimized form: the counter's start is a copy of a constant, the step and the
# comparison are fused (kLoop fusions calling small computations), as TPU dumps write
# them. Counter from 2 by 3 while <= 47: 2, 5, ..., 47 -> (47 - 2) / 3 + 1 = 16 steps.
FUSED = """HloModule fused_loop, is_scheduled=true

fused_inc {
  param_0 = s32[] parameter(0)
  three = s32[] constant(3)
  ROOT add = s32[] add(param_0, three)
}

fused_cmp {
  param_0.1 = s32[] parameter(0)
  bound = s32[] constant(47)
  ROOT le = pred[] compare(param_0.1, bound), direction=LE
}

body {
  p = (s32[], f32[8,16], f32[16,16]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8,16] get-tuple-element(p), index=1
  w = f32[16,16] get-tuple-element(p), index=2
  y = f32[8,16] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  next = s32[] fusion(i), kind=kLoop, calls=fused_inc
  ROOT t = (s32[], f32[8,16], f32[16,16]) tuple(next, y, w)
}

cond {
  p.1 = (s32[], f32[8,16], f32[16,16]) parameter(0)
  i.1 = s32[] get-tuple-element(p.1), index=0
  ROOT f = pred[] fusion(i.1), kind=kLoop, calls=fused_cmp
}

ENTRY main {
  x0 = f32[8,16] parameter(0)
  w0 = f32[16,16] parameter(1)
  two = s32[] constant(2)
  start = s32[] copy(two)
  init = (s32[], f32[8,16], f32[16,16]) tuple(start, x0, w0)
  loop = (s32[], f32[8,16], f32[16,16]) while(init), condition=cond, body=body
  ROOT out = f32[8,16] get-tuple-element(loop), index=1
}
"""


def test_a_fused_counter_and_condition_are_read_through_their_fusions():
    module = hlo.parse_hlo(FUSED)
    assert trip_count(module.instruction("loop"), module) == 16
    assert hlo.dot_conv_flops(module) == 16 * STEP_FLOPS


@pytest.mark.parametrize(
    ("start", "step", "direction", "bound", "trips"),
    [
        (0, 1, "LT", 16, 16),  # 0..15
        (0, 1, "LE", 15, 16),  # 0..15
        (16, -1, "GT", 0, 16),  # 16..1
        (15, -1, "GE", 0, 16),  # 15..0
        (0, 2, "NE", 32, 16),  # 0, 2, ..., 30
        (0, 5, "LT", 16, 4),  # 0, 5, 10, 15
        (20, 1, "LT", 16, 0),  # never runs
    ],
)
def test_counter_patterns(start, step, direction, bound, trips):
    text = (
        SCAN.replace("zero = s32[] constant(0)", f"zero = s32[] constant({start})")
        .replace("one = s32[] constant(1)", f"one = s32[] constant({step})")
        .replace("limit = s32[] constant(16)", f"limit = s32[] constant({bound})")
        .replace("direction=LT", f"direction={direction}")
    )
    module = hlo.parse_hlo(text)
    assert trip_count(module.instruction("loop"), module) == trips
    assert hlo.dot_conv_flops(module) == trips * STEP_FLOPS


def test_known_trip_count_wins_over_the_counter():
    text = SCAN.replace("body=body\n", 'body=body, backend_config={"known_trip_count":{"n":"7"}}\n')
    assert hlo.open(text).cost.flops == 7 * STEP_FLOPS


def test_a_loop_whose_bound_is_an_argument_says_unknown_trip_count():
    # The bound comes from a parameter: nothing in the text says how often the body runs.
    text = SCAN.replace(
        "limit = s32[] constant(16)",
        "limit = s32[] constant(16)\n  n = s32[] get-tuple-element(p_cond), index=1",
    ).replace("compare(gte, limit)", "compare(gte, n)")
    program = hlo.open(text)
    assert program.cost.unknown_loops == ("loop",)
    assert program.cost.flops == STEP_FLOPS  # counted once, and said so
    assert "loop unknown trip count (counted once)" in repr(program)
    payload = graph_payload(program.graph()._data, "t", None)
    node = payload["label"].index("loop x?")
    assert "unknown trip count" in payload["strings"][payload["note"][node]]


# Outer loop 4 steps, inner loop 3 steps inside its body, one dot in the inner body:
# 4 * 3 * 4,096 = 49,152. One all-reduce of f32[256] (1,024 bytes) in the outer body:
# 4 per run, 4,096 bytes.
NESTED = """HloModule nested

add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

inner_body {
  p = (s32[], f32[8,16], f32[16,16]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8,16] get-tuple-element(p), index=1
  w = f32[16,16] get-tuple-element(p), index=2
  y = f32[8,16] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT t = (s32[], f32[8,16], f32[16,16]) tuple(next, y, w)
}

inner_cond {
  p = (s32[], f32[8,16], f32[16,16]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}

outer_body {
  p = (s32[], f32[8,16], f32[16,16], f32[256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8,16] get-tuple-element(p), index=1
  w = f32[16,16] get-tuple-element(p), index=2
  g = f32[256] get-tuple-element(p), index=3
  zero = s32[] constant(0)
  init = (s32[], f32[8,16], f32[16,16]) tuple(zero, x, w)
  inner = (s32[], f32[8,16], f32[16,16]) while(init), condition=inner_cond, body=inner_body
  y = f32[8,16] get-tuple-element(inner), index=1
  r = f32[256] all-reduce(g), replica_groups={}, to_apply=add_f32
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT t = (s32[], f32[8,16], f32[16,16], f32[256]) tuple(next, y, w, r)
}

outer_cond {
  p = (s32[], f32[8,16], f32[16,16], f32[256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}

ENTRY main {
  x = f32[8,16] parameter(0)
  w = f32[16,16] parameter(1)
  g = f32[256] parameter(2)
  zero = s32[] constant(0)
  init = (s32[], f32[8,16], f32[16,16], f32[256]) tuple(zero, x, w, g)
  ROOT outer = (s32[], f32[8,16], f32[16,16], f32[256]) while(init), condition=outer_cond, body=outer_body
}
"""


def test_nested_loops_multiply_flops_and_collectives():
    program = hlo.open(NESTED)
    assert program.cost.flops == 4 * 3 * STEP_FLOPS == 49_152
    assert {(c.opcode, c.count, c.bytes) for c in program.collectives()} == {
        ("all-reduce", 4, 4 * 1_024)
    }
    labels = graph_payload(program.graph()._data, "t", None)["label"]
    assert "outer x4" in labels and "inner x3" in labels


# Tuple-shaped collectives (issue 20, defect 2):
# - a combined all-reduce of (f32[1024], f32[256]): 4,096 + 1,024 = 5,120 bytes;
# - a variadic async all-gather of (f32[8], f32[4]) into (f32[64], f32[32]):
#   the results, 256 + 128 = 384 bytes;
# - send and recv of f32[128] (512 bytes each), their token 0; the -done halves not counted.
COLLECTIVES = """HloModule collectives, is_scheduled=true

sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

ENTRY main {
  p0 = f32[1024] parameter(0)
  p1 = f32[256] parameter(1)
  q0 = f32[8] parameter(2)
  q1 = f32[4] parameter(3)
  data = f32[128] parameter(4)
  ar = (f32[1024], f32[256]) all-reduce(p0, p1), replica_groups={{0,1}}, to_apply=sum
  ags = ((f32[8], f32[4]), (f32[64], f32[32])) all-gather-start(q0, q1), dimensions={0}
  agd = (f32[64], f32[32]) all-gather-done(ags)
  tok = token[] after-all()
  send = (f32[128], u32[], token[]) send(data, tok), channel_id=1
  send-done = token[] send-done(send), channel_id=1
  recv = (f32[128], u32[], token[]) recv(tok), channel_id=2
  recv-done = (f32[128], token[]) recv-done(recv), channel_id=2
  ROOT t = ((f32[1024], f32[256]), (f32[64], f32[32])) tuple(ar, agd)
}
"""


def test_tuple_collectives_count_every_element_and_send_recv_what_they_carry():
    found = {c.opcode: (c.count, c.bytes) for c in hlo.open(COLLECTIVES).collectives()}
    assert found == {
        "all-reduce": (1, 5_120),
        "all-gather": (1, 384),
        "send": (1, 512),
        "recv": (1, 512),
    }


def _write(folder: pathlib.Path, name: str, text: str) -> None:
    (folder / name).write_text(text)


def test_dump_folders_pair_dotted_module_names_by_stage_suffix(tmp_path):
    # PyTorch/XLA and TensorFlow name modules with dots: both stages of each module pair.
    lowered = SCAN.replace("HloModule scan16", "HloModule SyncTensorsGraph.2199")
    optimized = lowered.replace(
        "HloModule SyncTensorsGraph.2199", "HloModule SyncTensorsGraph.2199, is_scheduled=true"
    )
    _write(tmp_path, "module_3879.SyncTensorsGraph.2199.before_optimizations.txt", lowered)
    _write(
        tmp_path, "module_3879.SyncTensorsGraph.2199.sm_8.0_gpu_after_optimizations.txt", optimized
    )
    _write(tmp_path, "module_0012.cluster_3_.5.before_optimizations.txt", SCAN)
    _write(tmp_path, "module_0012.cluster_3_.5.tpu_after_optimizations.txt", SCAN)
    for key in (3879, "3879", "SyncTensorsGraph.2199", "module_3879.SyncTensorsGraph.2199"):
        program = hlo.open(tmp_path, module=key)
        assert program.name == "SyncTensorsGraph.2199"
        assert program.stages == ("lowered", "optimized")
    assert hlo.open(tmp_path, module=12).stages == ("lowered", "optimized")
    with pytest.raises(tpukit.ArgumentError, match="holds 2 modules") as info:
        hlo.open(tmp_path)
    assert "module_3879.SyncTensorsGraph.2199 (lowered, optimized)" in str(info.value)


def test_one_counting_rule_per_figure_in_summary_graph_and_diff():
    program = hlo.open(TWO_CALLS)
    written = 5 + 4
    assert sum(program.op_counts().values()) == written
    assert program.cost.flops == 2 * STEP_FLOPS
    assert f"{written:,} (fusions opened)" in repr(program) and "in 2 computations" in repr(program)
    graph = program.graph()
    assert graph_payload(graph._data, "t", None)["instructions"] == written
    rows = tpukit.diff(program, program)
    assert rows.row("instructions (fusions opened)").a == written
    assert rows.row("FLOPs").a == 2 * STEP_FLOPS


def test_unreachable_computations_are_left_out():
    program = hlo.open(TWO_CALLS)
    assert program.op_counts()["negate"] == 0
    assert program.op_counts()["dot"] == 1
    assert program.op_counts()["call"] == 2


# Shapes written with spaces, as XLA's parser accepts them: the dot is still a dot,
# 2 * 8*4 * 16 = 1,024 FLOPs.
SPACES = """HloModule spaces
ENTRY main {
  x = f32[8, 16]{1,0} parameter(0)
  w = f32[16, 4]{1,0} parameter(1)
  ROOT d = f32[8, 4]{1,0} dot(f32[8, 16]{1,0} x, f32[16, 4]{1,0} w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_shapes_with_spaces():
    program = hlo.open(SPACES)
    root = program.hlo_module().entry.root
    assert root.opcode == "dot" and root.shape.dims == (8, 4)
    assert program.cost.flops == 1_024


def test_several_modules_in_one_file_are_listed_and_picked(tmp_path):
    both = SPACES + "\n" + TWO_CALLS
    with pytest.raises(tpukit.ArgumentError, match="holds 2 HLO modules") as info:
        hlo.open(both)
    assert "'spaces'" in str(info.value) and "'two_calls'" in str(info.value)
    assert hlo.open(both, module="two_calls").cost.flops == 2 * STEP_FLOPS
    assert hlo.open(both, module=0).name == "spaces"
    path = tmp_path / "two.txt"
    path.write_text(both)
    assert hlo.open(path, module="spaces").cost.flops == 1_024
    with pytest.raises(HloTextError, match="holds 2 HLO modules"):
        hlo.parse_hlo(both)


# A matrix-vector product XLA rewrote into multiply + reduce (issue 20, defect 7):
# multiply of f32[8,16]: 128 FLOPs; reduce of 128 elements into 8: 120 additions.
# all FLOPs = 248; dot/conv FLOPs = 0, and the figures' names say which is which.
MATVEC = """HloModule matvec
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY main {
  m = f32[8,16] parameter(0)
  v = f32[16] parameter(1)
  vb = f32[8,16] broadcast(v), dimensions={1}
  prod = f32[8,16] multiply(m, vb)
  zero = f32[] constant(0)
  ROOT r = f32[8] reduce(prod, zero), dimensions={1}, to_apply=add
}
"""


def test_a_rewritten_matvec_still_reads_as_work():
    program = hlo.open(MATVEC)
    assert program.cost.flops == 0
    assert program.cost.all_flops == 128 + 120
    text = repr(program)
    assert "dot/conv FLOPs" in text and "all FLOPs" in text and "248 FLOP" in text
    row = tpukit.diff(hlo.open(SPACES), program).row("all FLOPs (dot/conv, elementwise, reduce)")
    assert (row.a, row.b) == (1_024, 248)


def test_a_compiled_data_dependent_loop_says_its_trip_count_is_unknown():
    import jax

    def grow(x):
        return jax.lax.while_loop(lambda x: x.sum() < 100.0, lambda x: x * 2.0, x)

    compiled = tpukit.compile(grow, tpukit.shape("f32[8]"))
    assert "1 loop with unknown trip count" in repr(compiled)
    assert hlo.open(compiled.hlo_text("optimized")).cost.unknown_loops


def _scan16(x, w):
    import jax

    return jax.lax.scan(lambda c, _: (c @ w, None), x, None, length=16)[0]


def _fori7(x, w):
    import jax

    return jax.lax.fori_loop(0, 7, lambda i, c: c @ w, x)


def _nested_4x3(x, w):
    import jax

    def outer(c, _):
        return jax.lax.scan(lambda c2, _: (c2 @ w, None), c, None, length=3)[0], None

    return jax.lax.scan(outer, x, None, length=4)[0]


@pytest.mark.parametrize(("function", "steps"), [(_scan16, 16), (_fori7, 7), (_nested_4x3, 12)])
def test_jax_loops_count_per_step_flops_times_their_steps(function, steps):
    """JAX's lowered HLO has no known_trip_count: the counter gives it (issue 20's 'Done when')."""
    import jax
    import jax.numpy as jnp

    lowered = jax.jit(function).lower(jnp.ones((8, 16)), jnp.ones((16, 16)))
    for text in (lowered.as_text(dialect="hlo"), lowered.compile().as_text()):
        program = hlo.open(text)
        assert program.cost.flops == steps * STEP_FLOPS
        assert program.cost.unknown_loops == ()


def _rnn(w, inputs):
    import jax
    import jax.numpy as jnp

    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, h.mean()

    return jax.lax.scan(step, jnp.zeros(inputs.shape[1:], inputs.dtype), inputs)


def test_a_loops_bytes_count_every_iteration_as_its_flops_do():
    """Notebook 02's RNN: FLOPs and bytes follow one rule (as executed), so its FLOP/byte is
    that of the step, whatever the sequence length; XLA's figures (each loop body once)
    are kept beside them and the summary says so."""
    runs = {
        steps: tpukit.compile(
            _rnn, tpukit.shape("f32[64,64]"), tpukit.shape(f"f32[{steps},128,64]")
        )
        for steps in (10, 50)
    }
    short, long = runs[10].cost, runs[50].cost
    assert long.repeated_loops and short.repeated_loops
    assert long.bytes_accessed > 4.5 * short.bytes_accessed  # 50 steps read 5x what 10 do
    assert long.backend_bytes == pytest.approx(short.backend_bytes, rel=0.01)  # XLA: one body
    ratio = long.arithmetic_intensity / short.arithmetic_intensity
    assert ratio == pytest.approx(1.0, abs=0.05), ratio
    summary = repr(runs[50])
    assert "counted by tpukit at every loop iteration" in summary
    assert "each loop body once" in summary


def test_a_loop_without_dots_shows_its_flops_at_every_iteration():
    """Notebook 02's newton_sqrt: 20 iterations of elementwise work, not XLA's one body."""
    import jax
    import jax.numpy as jnp

    def newton_sqrt(a):
        def improve(state):
            step, x = state
            return step + 1, 0.5 * (x + a / x)

        return jax.lax.while_loop(lambda s: s[0] < 20, improve, (0, jnp.ones_like(a)))[1]

    cost = tpukit.compile(newton_sqrt, tpukit.shape("f32[1000]")).cost
    assert cost.counted_flops == 0 and cost.flops == cost.all_flops
    assert cost.all_flops >= 20 * cost.backend_flops > 0


def test_a_program_without_loops_keeps_xlas_figures():
    import jax.numpy as jnp

    cost = tpukit.compile(
        lambda x, w: jnp.tanh(x @ w), tpukit.shape("f32[64,128]"), tpukit.shape("f32[128,32]")
    ).cost
    assert cost.repeated_loops == ()
    assert cost.bytes_accessed == cost.backend_bytes
    assert cost.flops == max(cost.counted_flops, cost.backend_flops)


def test_the_summary_says_how_many_optimized_instructions_are_fusion_parameters():
    """Opened, a fusion counts a parameter per value it reads (VGG read "240 -> 455" as if
    XLA had doubled the program): the summary's HLO line says how many."""
    import jax.numpy as jnp

    compiled = tpukit.compile(
        lambda x, w: jnp.tanh(x @ w) * 2.0 + 1.0,
        tpukit.shape("f32[64,128]"),
        tpukit.shape("f32[128,32]"),
    )
    opened = compiled.program.op_counts("optimized")
    closed = compiled.program.op_counts("optimized", open_fusions=False)
    fused = opened["parameter"] - closed["parameter"]
    assert fused > 0
    assert f"{fused} of the {sum(opened.values())} are fusion parameters" in repr(compiled)


def test_a_dots_flops_leave_its_attributes_unsplit():
    """Issue 38: a dot's FLOPs read its contracting dims alone (`HloInstruction.attribute`):
    keeping the split of all its attributes kept a dict per dot, metadata included, for the
    module's life (14 MB at 400,000 instructions). Its FLOPs and attributes read the same."""
    module = hlo.open(SCAN).hlo_module()
    dot = module.instruction("y")
    assert instruction_flops(dot, module) == 2 * 8 * 16 * 16
    assert dot._attributes is None
    assert dot.attribute("lhs_contracting_dims") == "{1}" and dot._attributes is None
    assert dot.attribute("nothing", "-") == "-"
    assert dot.attributes["rhs_contracting_dims"] == "{0}"
    assert dot.attribute("rhs_contracting_dims") == "{0}"  # (the split, once made)
