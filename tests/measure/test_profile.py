"""Measured time per HLO instruction: ``Compiled.profile``, ``%tpu_profile``, the heat graph.

The CPU tests take real traces with ``jax.profiler``; the GPU and TPU layouts of a trace
(device planes, ``XLA Ops`` and ``XLA Modules`` lines) are written here as XSpace text
protos, in the shapes XProf's own tests build, and read through the same code. The
browser test colours a graph by time in headless Chromium (it fails under CI=true when
Chromium is missing) and writes ``out/screenshots/profile_graph*.png``.
"""

import json
import pathlib

import jax
import jax.numpy as jnp
import pytest
from IPython.core.error import UsageError
from jax.profiler import ProfileData

import tpukit
from tests._support.graph_payload import op_names, payload_of
from tpukit.hlo import SECTIONS, parse_hlo

SCREENSHOTS = pathlib.Path(__file__).resolve().parents[2] / "out" / "screenshots"


def mlp(params, x):
    for index, (w, b) in enumerate(params):
        with jax.named_scope(f"dense_{index}"):
            x = jax.nn.relu(x @ w + b)
    return x


def mlp_params():
    keys = jax.random.split(jax.random.key(0), 3)
    sizes = [(784, 512), (512, 512), (512, 10)]
    return [
        (jax.random.normal(k, shape) / shape[0] ** 0.5, jnp.zeros(shape[1]))
        for k, shape in zip(keys, sizes)
    ]


@pytest.fixture(scope="module")
def compiled():
    # Big enough that the matmuls, not the dispatch of a call, fill the wall time.
    return tpukit.compile(mlp, mlp_params(), tpukit.shape("f32[512,784]"))


@pytest.fixture(scope="module")
def profile(compiled):
    x = jax.random.normal(jax.random.key(1), (512, 784))
    return compiled.profile(mlp_params(), x, repeat=5)


# -- a real trace on CPU ---------------------------------------------------------------


def test_every_timed_name_is_an_instruction_and_the_total_matches_the_wall_time(compiled, profile):
    module = compiled.hlo_module("optimized")
    names = {instr.name for instr in module.instructions()}
    records = profile.table()
    assert records and {r["name"] for r in records} <= names
    assert all(r["seconds"] >= 0 for r in records) and records[0]["seconds"] > 0
    assert [r["seconds"] for r in records] == sorted((r["seconds"] for r in records), reverse=True)
    assert profile.total_seconds == pytest.approx(sum(r["seconds"] for r in records))
    assert sum(r["share"] for r in records) == pytest.approx(1.0)
    assert profile.runs == 5 and len(profile.wall_seconds) == 5
    # Per run, the ops' time is the same order as a run's wall time: a total left summed
    # over the five runs (5x) or divided by them twice (0.2x) falls outside. The bounds are
    # the quickest and the slowest run's: on a loaded machine the host's gaps between ops
    # stretch the wall time (busy 10 ms of a 21 ms mean was seen on two shared cores).
    quickest, slowest = min(profile.wall_seconds), max(profile.wall_seconds)
    assert 0.3 * quickest <= profile.total_seconds <= 1.5 * slowest, (
        profile.total_seconds,
        profile.wall_seconds,
    )


def test_the_matmuls_dominate_and_carry_their_flops_source_and_layer(profile):
    records = profile.table()
    top = records[0]
    # One of the two big layers' dots comes first; which one depends on the processor and
    # XLA's version (JAX 0.7 on some machines runs the 512x512 one slower). By hand:
    layer_flops = {"dense_0": 2 * 512 * 784 * 512, "dense_1": 2 * 512 * 512 * 512}
    assert top["group"] in layer_flops and top["flops"] == layer_flops[top["group"]]
    assert top["flops_per_second"] == pytest.approx(top["flops"] / top["seconds"])
    assert top["bytes_per_second"] == pytest.approx(top["bytes"] / top["seconds"])
    assert top["source"].startswith("test_profile.py:")
    assert "roofline_seconds" not in top  # no published peak for a CPU: no roofline
    matmul = sum(r["seconds"] for r in records if r["flops"])
    assert matmul > 0.5 * profile.total_seconds


def test_groups_are_the_layers_and_add_up_to_the_total(profile):
    groups = profile.table(by="group")
    assert {"dense_0", "dense_1", "dense_2"} <= {g["group"] for g in groups}
    assert sum(g["seconds"] for g in groups) == pytest.approx(profile.total_seconds)
    assert sum(g["instructions"] for g in groups) == len(profile.table())
    first = next(g for g in groups if g["group"] == "dense_0")
    assert first["flops"] == 2 * 512 * 784 * 512
    with pytest.raises(ValueError, match="'instruction' or 'group'"):
        profile.table(by="layer")


def test_records_are_plain_data_a_script_can_save(profile):
    text = json.dumps({"instructions": profile.table(), "groups": profile.table("group")})
    again = json.loads(text)
    assert again["instructions"][0]["name"] == profile.table()[0]["name"]
    profile.table()[0]["seconds"] = -1.0  # a copy: the profile keeps its numbers
    assert profile.table()[0]["seconds"] > 0


def test_html_and_text_show_the_top_fusion_and_the_layers(profile):
    top = profile.table()[0]["name"]
    page = profile._repr_html_()
    assert "<table>" in page and "tpukit-profile" in page
    assert top in page and "dense_0" in page and "FLOP/s" in page and "bandwidth" in page
    assert "No published peak for cpu" in page
    text = repr(profile)
    assert top in text and "dense_1" in text and "mean of 5 runs" in text


def test_the_graph_carries_the_times_and_groups_sum_their_members(profile):
    graph = profile.graph()
    payload = payload_of(graph._repr_html_())
    times = payload["time"]
    top = profile.table()[0]["name"]
    node = next(i for i, label in enumerate(payload["label"]) if label == top)
    assert times[node] == pytest.approx(profile.seconds(top))
    assert payload["timeTotal"] == pytest.approx(profile.total_seconds)
    for group in range(len(times)):  # every group: the sum of its measured members
        kids = [k for k, parent in enumerate(payload["parent"]) if parent == group]
        if payload["kind"][group] != 0 and kids:
            measured = [times[k] for k in kids if times[k] is not None]
            assert times[group] == (pytest.approx(sum(measured)) if measured else None)
    parameter = op_names(payload).index("parameter")
    assert times[parameter] is None  # not run apart: not in the trace
    assert "coloured by measured time" in repr(graph)


def test_abstract_arguments_are_filled_with_random_data_as_for_timeit():
    small = tpukit.compile(lambda x: jnp.tanh(x @ x.T), tpukit.shape("f32[64,32]"))
    profile = small.profile(repeat=2)
    assert profile.runs == 2 and profile.table()


def test_repeat_below_one_is_refused(compiled):
    with pytest.raises(tpukit.ArgumentError, match="repeat must be .* at least 1; got 0"):
        compiled.profile(repeat=0)


def test_a_kept_trace_reads_back_offline_with_a_roofline_for_a_known_peak(compiled, tmp_path):
    x = jnp.ones((512, 784))
    compiled.profile(mlp_params(), x, repeat=2, trace_dir=tmp_path)
    assert len(list(tmp_path.rglob("*.xplane.pb"))) == 1
    text = compiled.hlo_text("optimized")
    offline = tpukit.Profile.from_trace(tmp_path, text, name="mlp", device_kind="TPU v5 lite")
    assert offline.runs == 2 and offline.wall_seconds is None
    top = offline.table()[0]
    peak = tpukit.peak_for("TPU v5 lite")
    compute, memory = top["flops"] / 197e12, top["bytes"] / 820e9
    assert peak.bf16_tflops == 197.0 and peak.hbm_gbps == 820.0
    assert top["roofline_seconds"] == pytest.approx(max(compute, memory))
    assert top["bound"] == ("compute" if compute >= memory else "memory")
    assert top["roofline_share"] == pytest.approx(top["roofline_seconds"] / top["seconds"])
    assert "reached" in offline._repr_html_() and "TPU v5e peak 197 TFLOP/s" in repr(offline)
    with pytest.raises(tpukit.ArgumentError, match="No trace at"):
        tpukit.Profile.from_trace(tmp_path / "missing", text)
    again = compiled.profile(mlp_params(), x, repeat=3, trace_dir=tmp_path)
    assert again.runs == 3  # its own trace only, not the one already in the folder


def test_a_trace_of_another_program_says_what_it_found(compiled, tmp_path):
    other = jax.jit(lambda v: jnp.sin(v) * 2)
    other(jnp.ones(8)).block_until_ready()
    with jax.profiler.trace(str(tmp_path)):
        other(jnp.ones(8)).block_until_ready()
    with pytest.raises(tpukit.ProfileError) as failure:
        tpukit.Profile.from_trace(tmp_path, compiled.hlo_module("optimized"))
    message = str(failure.value)
    assert "no per-instruction events of 'jit_mlp'" in message
    assert "/host:CPU" in message and "XLA Ops" in message and ".timeit()" in message


def test_a_running_trace_is_named_not_clobbered(compiled, tmp_path):
    jax.profiler.start_trace(str(tmp_path))
    try:
        with pytest.raises(tpukit.ProfileError, match="Another trace is running"):
            compiled.profile(mlp_params(), jnp.ones((512, 784)), repeat=1)
    finally:
        jax.profiler.stop_trace()


def test_a_training_step_is_timed_by_section_and_layer(tutorial_step):
    profile = tutorial_step.profile(repeat=3)
    groups = {g["group"]: g for g in profile.table("group")}
    for k in range(3):  # the three Linear layers, forward and backward, named without repeats
        assert f"forward › layers[{k}] (Linear)" in groups
        assert f"backward › layers[{k}] (Linear)" in groups
    sections = {g["section"] for g in groups.values()}
    assert {"forward", "backward", "optimizer update"} <= sections
    shares = sum(g["share"] for g in groups.values())
    assert shares == pytest.approx(1.0)  # every timed instruction sits in one group
    line = next(t for t in repr(profile).splitlines() if t.startswith("By section: "))
    named = [part.rsplit(" ", 1)[0] for part in line.removeprefix("By section: ").split(" · ")]
    assert named == sorted(named, key=SECTIONS.index) and "forward" in named  # program order
    assert "By section: forward" in profile._repr_html_()


# -- GPU and TPU layouts, written as XSpace text protos ---------------------------------

LOOP_HLO = """HloModule jit_step

%fused (a: f32[64,64], b: f32[64,64]) -> f32[64,64] {
  %a = f32[64,64]{1,0} parameter(0)
  %b = f32[64,64]{1,0} parameter(1)
  ROOT %d = f32[64,64]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%body (s: (s32[], f32[64,64])) -> (s32[], f32[64,64]) {
  %s = (s32[], f32[64,64]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %h = f32[64,64]{1,0} get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %y = f32[64,64]{1,0} fusion(%h, %h), kind=kOutput, calls=%fused
  ROOT %t = (s32[], f32[64,64]{1,0}) tuple(%next, %y)
}

%cond (c: (s32[], f32[64,64])) -> pred[] {
  %c = (s32[], f32[64,64]{1,0}) parameter(0)
  %j = s32[] get-tuple-element(%c), index=0
  %n = s32[] constant(4)
  ROOT %lt = pred[] compare(%j, %n), direction=LT
}

ENTRY %main (x: f32[64,64]) -> f32[64,64] {
  %x = f32[64,64]{1,0} parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[64,64]{1,0}) tuple(%zero, %x)
  %loop = (s32[], f32[64,64]{1,0}) while(%init), condition=%cond, body=%body
  ROOT %out = f32[64,64]{1,0} get-tuple-element(%loop), index=1
}
"""


def xspace(planes: dict[str, dict[str, list[tuple]]]) -> ProfileData:
    """An XSpace from ``{plane: {line: [(name, start_us, duration_us, stats), ...]}}``."""
    names: dict[str, int] = {}
    stat_ids: dict[str, int] = {}
    text = []
    for plane_id, (plane, lines) in enumerate(planes.items(), 1):
        body = []
        for line_id, (line, events) in enumerate(lines.items(), 1):
            rows = []
            for name, start, duration, stats in events:
                meta = names.setdefault(name, len(names) + 1)
                values = "".join(
                    f" stats {{ metadata_id: {stat_ids.setdefault(k, 100 + len(stat_ids))} "
                    + (f'str_value: "{v}" }}' if isinstance(v, str) else f"int64_value: {v} }}")
                    for k, v in stats.items()
                )
                rows.append(
                    f"events {{ metadata_id: {meta} offset_ps: {int(start * 1e6)} "
                    f"duration_ps: {int(duration * 1e6)}{values} }}"
                )
            body.append(
                f'lines {{ id: {line_id} name: "{line}" timestamp_ns: 0 {" ".join(rows)} }}'
            )
        body += [
            f'event_metadata {{ key: {i} value {{ id: {i} name: "{n}" }} }}'
            for n, i in names.items()
        ]
        body += [
            f'stat_metadata {{ key: {i} value {{ id: {i} name: "{n}" }} }}'
            for n, i in stat_ids.items()
        ]
        text.append(f'planes {{ id: {plane_id} name: "{plane}" {" ".join(body)} }}')
    return ProfileData.from_text_proto("\n".join(text))


def loop_run(start: float, stats: dict) -> list[tuple]:
    """One run of LOOP_HLO: a 100 µs loop holding 4 x (20 µs fusion + 1 µs add), then the copy."""
    events = [("loop", start, 100.0, stats)]
    for k in range(4):
        events.append(("y", start + 2 + 24 * k, 20.0, stats))
        events.append(("next", start + 23 + 24 * k, 1.0, stats))
    return events


def test_gpu_device_planes_xla_ops_line_with_run_ids():
    module = parse_hlo(LOOP_HLO)
    ops = loop_run(0, {"hlo_module": "jit_step", "run_id": 1}) + loop_run(
        500, {"hlo_module": "jit_step", "run_id": 2}
    )
    ops.append(("y", 800, 50.0, {"hlo_module": "jit_other", "run_id": 3}))  # another module
    launches = [("y", 0, 3.0, {"hlo_op": "y", "hlo_module": "jit_step"})]  # the host side
    data = xspace({"/device:GPU:0": {"XLA Ops": ops}, "/host:CPU": {"client": launches}})
    profile = tpukit.Profile.from_profile_data([data], module)
    assert profile.device_kind == "gpu" and profile.runs == 2
    records = {r["name"]: r for r in profile.table()}
    assert set(records) == {"loop", "y", "next"}
    assert records["y"]["seconds"] == pytest.approx(80e-6) and records["y"]["calls"] == 4
    assert records["next"]["seconds"] == pytest.approx(4e-6)
    assert records["loop"]["seconds"] == pytest.approx(16e-6)  # its own: less its body
    assert records["loop"]["flops"] is None  # its work is its body's records
    assert records["y"]["flops"] == 4 * 2 * 64 * 64 * 64
    assert profile.total_seconds == pytest.approx(100e-6)
    assert profile.seconds("loop") == pytest.approx(100e-6)  # the graph's node: body included
    assert profile.table("group")[0]["seconds"] == pytest.approx(100e-6)


def test_tpu_runs_come_from_the_xla_modules_line():
    module = parse_hlo(LOOP_HLO)
    runs = [("jit_step(7)", 0, 110.0, {}), ("jit_step(7)", 500, 110.0, {})]
    ops = loop_run(0, {}) + loop_run(500, {}) + [("y", 300, 40.0, {})]  # outside the runs
    data = xspace({"/device:TPU:0": {"XLA Modules": runs, "XLA Ops": ops}})
    profile = tpukit.Profile.from_profile_data([data], module, device_kind="TPU v4")
    assert profile.runs == 2 and profile.peak.name == "TPU v4"
    assert profile.seconds("y") == pytest.approx(80e-6)
    assert profile.total_seconds == pytest.approx(100e-6)


def test_a_gpu_trace_without_xla_ops_reads_the_kernels_on_its_streams():
    module = parse_hlo(LOOP_HLO)
    kernels = [
        (f"kernel_{k}", start, 10.0, {"hlo_op": "y", "hlo_module": "jit_step"})
        for k, start in enumerate((0, 20, 40, 60))
    ]
    kernels.append(("memcpy", 90, 5.0, {}))  # no hlo_op: not an instruction's
    data = xspace({"/device:GPU:0": {"Stream #14(Compute)": kernels}})
    profile = tpukit.Profile.from_profile_data([data], module, repeat=1)
    assert profile.runs == 1 and profile.seconds("y") == pytest.approx(40e-6)


COMMAND_BUFFER_HLO = """HloModule jit_train_step

%fused_pad.1 (p: f32[784,128]) -> f32[832,128] {
  %p = f32[784,128]{1,0} parameter(0)
  %z = f32[] constant(0)
  ROOT %pad = f32[832,128]{1,0} pad(%p, %z), padding=0_48x0_0
}

%gemm (a: f32[128,832], b: f32[832,128]) -> f32[128,128] {
  %a = f32[128,832]{1,0} parameter(0)
  %b = f32[832,128]{1,0} parameter(1)
  ROOT %d = f32[128,128]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY %main.19 (w: f32[784,128], x: f32[128,832], f: f32[1,8,8,4], k: f32[3,3,4,4]) -> f32[128,128] {
  %w = f32[784,128]{1,0} parameter(0)
  %x = f32[128,832]{1,0} parameter(1)
  %f = f32[1,8,8,4]{3,2,1,0} parameter(2)
  %k = f32[3,3,4,4]{3,2,1,0} parameter(3)
  %loop_pad_fusion.1 = f32[832,128]{1,0} fusion(%w), kind=kLoop, calls=%fused_pad.1
  %gemm_fusion_dot.3 = f32[128,128]{1,0} fusion(%x, %loop_pad_fusion.1), kind=kCustom, calls=%gemm
  %loop_pad_fusion.2 = f32[832,128]{1,0} fusion(%w), kind=kLoop, calls=%fused_pad.1
  %cublas-gemm.1 = (f32[128,128]{1,0}, s8[4194304]{0}) custom-call(%x, %loop_pad_fusion.2), custom_call_target="__cublas$gemm"
  %cudnn-conv.102 = (f32[1,8,8,4]{3,2,1,0}, u8[0]{0}) custom-call(%f, %k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, custom_call_target="__cudnn$convForward"
  ROOT %out = f32[128,128]{1,0} copy(%gemm_fusion_dot.3)
}
"""


def test_a_gpu_trace_of_command_buffers_names_kernels_after_their_fusions():
    # As an H200 with JAX 0.11 writes it: no XLA Ops line; XLA's kernels, run inside a
    # CUDA graph, carry the command buffer as hlo_op and their fusion's name with "_",
    # but the second pad reuses the first one's kernel (and name), and cuBLAS's kernel has
    # its own name; a cuDNN convolution, outside the graph, launches two library kernels
    # with its instruction as hlo_op.
    module = parse_hlo(COMMAND_BUFFER_HLO)
    graph = {"hlo_op": "command_buffer_1", "hlo_module": "jit_train_step", "cuda_graph_id": 2}
    conv = {"hlo_op": "cudnn-conv.102", "hlo_module": "jit_train_step"}
    kernels = []
    for run in range(3):
        start = 1000.0 * run
        kernels += [
            ("loop_pad_fusion_1", start, 2.0, graph),
            ("gemm_fusion_dot_3", start + 3, 5.0, graph),
            ("loop_pad_fusion_1", start + 8.1, 1.5, graph),  # for loop_pad_fusion.2
            ("sm90_xmma_gemm_f32f32_tf32f32", start + 9.6, 0.3, graph),
            ("sm90_xmma_fprop_implicit_gemm_cudnn", start + 10, 7.0, conv),
            ("cudnn_infer_ampere_scudnn_winograd", start + 18, 1.0, conv),
            ("out", start + 20, 0.5, graph),
        ]
    kernels.append(("gemm_fusion_dot_3", 5000, 9.0, {**graph, "hlo_module": "jit_other"}))
    data = xspace({"/device:GPU:0": {"Stream #14(Compute)": kernels}})
    profile = tpukit.Profile.from_profile_data([data], module, repeat=3)
    assert profile.runs == 3 and profile.device_kind == "gpu"
    records = {r["name"]: r for r in profile.table()}
    assert {n: r["seconds"] * 1e6 for n, r in records.items()} == pytest.approx(
        {
            "loop_pad_fusion.1": 2.0,
            "gemm_fusion_dot.3": 5.0,
            "loop_pad_fusion.2": 1.5,
            "cublas-gemm.1": 0.3,
            "cudnn-conv.102": 8.0,
            "out": 0.5,
        }
    )
    # Executions, not kernels: the convolution ran once per run (its two kernels together),
    # so its FLOPs are one convolution's: 2 x 4 out x 4 in features x the taps on real input
    # per side of the 8x8 SAME 3x3 window, 8 x 3 less 2 (2 x 64 x 4 x 36 with the padding's
    # taps, until session 51).
    assert all(r["calls"] == 1 for r in records.values())
    assert records["cudnn-conv.102"]["flops"] == 2 * 4 * 4 * (8 * 3 - 2) ** 2
    assert profile.total_seconds == pytest.approx(17.3e-6)
    # Read offline without the run count, the instruction seen least often gives it.
    assert tpukit.Profile.from_profile_data([data], module).runs == 3


def test_gpu_kernels_of_a_loop_body_are_its_instructions_once_per_iteration():
    # fit's step is a loop over batches: XLA:GPU runs the body's kernels, named after the
    # body's fusions, once per iteration (a CUDA graph per body: hlo_op names the graph).
    module = parse_hlo(LOOP_HLO)
    graph = {"hlo_op": "command_buffer_3", "hlo_module": "jit_step"}
    kernels = []
    for run in range(2):
        for k in range(4):
            start = 1000.0 * run + 30 * k
            kernels += [("y", start, 20.0, graph), ("next", start + 21, 1.0, graph)]
    data = xspace({"/device:GPU:0": {"Stream #7(Compute)": kernels}})
    profile = tpukit.Profile.from_profile_data([data], module, repeat=2)
    records = {r["name"]: r for r in profile.table()}
    assert records["y"]["calls"] == 4 and records["y"]["seconds"] == pytest.approx(80e-6)
    assert records["next"]["calls"] == 4 and set(records) == {"y", "next"}
    assert records["y"]["flops"] == 4 * 2 * 64 * 64 * 64  # four iterations' dots


def test_an_asynchronous_cpu_instruction_lasts_until_the_next_one_starts():
    # JAX 0.7's XLA:CPU launches a matmul on Eigen's threads: its event is the launch, and
    # its "end:" marker (closing the flow its event opened) comes after the next op began.
    module = parse_hlo(LOOP_HLO)
    run = {"hlo_module": "jit_step", "run_id": 1}
    client = [
        ("y", 0, 5.0, {**run, "hlo_op": "y", "_p": 11}),  # launched; runs until 40 µs
        ("next", 40, 2.0, {**run, "hlo_op": "next", "_p": 12}),
        ("end: next", 42.5, 0.1, {"_c": 12}),  # done before the next op: synchronous
        ("y", 50, 30.0, {**run, "hlo_op": "y", "_p": 13}),
        ("end: y", 60, 0.1, {"_c": 11}),
        ("end: y", 81, 0.1, {"_c": 13}),
    ]
    data = xspace({"/host:CPU": {"tf_XLAPjRtCpuClient/1": client}})
    profile = tpukit.Profile.from_profile_data([data], module)
    assert profile.seconds("y") == pytest.approx(40e-6 + 30e-6)
    assert profile.seconds("next") == pytest.approx(2e-6)


def test_a_device_trace_without_op_events_is_a_clear_error():
    data = xspace({"/device:TPU:0": {"Steps": [("step 1", 0, 10.0, {})]}})
    with pytest.raises(tpukit.ProfileError, match=r"planes: /device:TPU:0\)"):
        tpukit.Profile.from_profile_data([data], parse_hlo(LOOP_HLO))


# -- %tpu_profile through a real IPython shell ------------------------------------------


@pytest.fixture(scope="module")
def shell(shell):
    """conftest's shell, with a function to profile."""
    shell.run_cell("def square(x):\n    return jnp.tanh(x @ x.T)", store_history=False)
    return shell


def test_tpu_profile_magic_stores_shows_the_tables_and_the_graph(shell, capsys):
    result = shell.run_cell("%tpu_profile -r 2 square(f32[128, 64])", store_history=False)
    assert result.success, result.error_in_exec
    out = capsys.readouterr().out
    profile = shell.user_ns["square_profile"]
    assert isinstance(profile, tpukit.Profile) and profile.runs == 2
    assert "instructions by time" in out and "coloured by measured time" in out
    assert out.rstrip().endswith("Stored as square_profile.")
    result = shell.run_cell(
        "%tpu_profile -o p --no-graph square(f32[128, 64])", store_history=False
    )
    assert result.success, result.error_in_exec
    out = capsys.readouterr().out
    assert shell.user_ns["p"].runs == 5 and "HloGraph" not in out
    assert "--no-graph" in shell.find_line_magic("tpu_profile").__doc__


@pytest.mark.parametrize(
    "line, expected",
    [
        ("%tpu_profile -r 0 square(f32[8, 8])", "-r must be at least 1"),
        ("%tpu_profile -o class square(f32[8, 8])", "valid Python variable name"),
        ("%tpu_profile --bogus square(f32[8, 8])", "Unknown option '--bogus'"),
        ("%tpu_profile", "No call given"),
    ],
)
def test_tpu_profile_mistakes_are_one_line(shell, capsys, line, expected):
    result = shell.run_cell(line, store_history=False)
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    assert expected in str(result.error_in_exec)
    assert "Traceback" not in capsys.readouterr().err


# -- the heat colouring in headless Chromium ---------------------------------------------


def test_the_graph_is_coloured_by_time_in_a_browser(browser, profile):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.set_content(profile.graph().to_html())
    page.wait_for_selector(".tkg-root[data-state=ready]", timeout=15000)
    assert page.get_attribute(".tkg-root", "data-colour") == "time"
    timed = page.locator(".tkg-node[data-time]")
    assert timed.count() > 0
    fills = page.eval_on_selector_all(
        ".tkg-node[data-time] rect.tkg-box", "rects => rects.map(r => r.style.fill)"
    )
    assert all(f.startswith("rgb(") for f in fills) and len(set(fills)) > 1
    legend = page.locator(".tkg-legend").inner_text()
    assert "time per run" in legend and "100% of" in legend and "not in the trace" in legend
    page.screenshot(path=str(SCREENSHOTS / "profile_graph.png"))

    hottest = max(
        range(timed.count()), key=lambda k: float(timed.nth(k).get_attribute("data-time"))
    )
    name = timed.nth(hottest).get_attribute("data-name")
    search = page.locator(".tkg-search")
    search.fill(name)
    search.press("Enter")
    page.locator(f'.tkg-node[data-name="{name}"]').first.click(position={"x": 60, "y": 12})
    panel = page.locator(".tkg-panel").inner_text()
    assert "time (measured)" in panel and "per run" in panel and "FLOP/s achieved" in panel
    page.screenshot(path=str(SCREENSHOTS / "profile_graph_panel.png"))

    page.locator(".tkg-colour").click()  # back to the op-kind colours
    assert page.get_attribute(".tkg-root", "data-colour") == "kind"
    assert page.eval_on_selector_all(
        ".tkg-node rect.tkg-box", "rects => rects.every(r => !r.style.fill)"
    )
    assert "matmul" in page.locator(".tkg-legend").inner_text()
    assert errors == []
    page.close()
