"""``Profile.from_trace`` on traces as real machines record them: TPU, GPU, several hosts.

``data/tpu_v6e_jit_f.xplane.pb`` is trimmed real data: openxla/xprof's
``xprof/convert/test_xplanes/tpu_inference_2.xplane.pb`` at commit 01d85deb (blob
2cc1243f; the file at later commits was re-saved as text and no longer parses), a
4-chip TPU v6e trace of a host-offload stress test, cut to ``/device:TPU:0``'s
``XLA Modules``, ``XLA Ops`` and ``Async XLA Ops`` events of the first two runs of
``jit_f(12190760917235803885)`` and the ``/host:metadata`` entry that carries its HLO
(event names, display names, stats and plane stats as recorded; the ``source_stack``
stat dropped). The other layouts are built here as XSpace protos with the names, lines,
planes and stats the real traces use (TPU: full HLO text as the event name, the bare name
as display name, ``program_id`` in the event metadata; GPU: kernels with ``hlo_op``,
``hlo_module``, ``program_id``, ``correlation_id``, and the host's launches).
"""

import pathlib
import re

import jax
import jax.numpy as jnp
import pytest

import tpukit
from tests._support.data import DATA
from tpukit.hlo import parse_hlo
from tpukit.measure._xspace import _CLASSES

REAL_TPU = DATA / "tpu_v6e_jit_f.xplane.pb"


# -- a trace written the way the profiler writes one ----------------------------------


def xspace_bytes(planes: dict, hostname: str = "") -> bytes:
    """``{plane: {"stats": {...}, "lines": {line: [(name, start, duration, stats, display)]},
    "metadata": {event name: {stat: value}}}}`` as a serialized XSpace (times in ns)."""
    space = _CLASSES["XSpace"]()
    if hostname:
        space.hostnames.append(hostname)
    for plane_id, (plane_name, spec) in enumerate(planes.items(), 1):
        _add_plane(space.planes.add(id=plane_id, name=plane_name), spec)
    return space.SerializeToString()


def _add_plane(plane, spec: dict) -> None:
    event_ids: dict[tuple[str, str], int] = {}
    stat_ids: dict[str, int] = {}

    def stat(target, key, value):
        item = target.add(metadata_id=stat_ids.setdefault(key, len(stat_ids) + 1))
        if isinstance(value, bytes):
            item.bytes_value = value
        elif isinstance(value, str):
            item.str_value = value
        elif isinstance(value, float):
            item.double_value = value
        else:
            item.int64_value = value

    def event_meta(name, display=""):
        if (name, display) not in event_ids:
            key = event_ids[(name, display)] = len(event_ids) + 1
            entry = plane.event_metadata.add(key=key)
            entry.value.id, entry.value.name, entry.value.display_name = key, name, display
        return event_ids[(name, display)]

    for key, value in spec.get("stats", {}).items():
        stat(plane.stats, key, value)
    for name, stats in spec.get("metadata", {}).items():
        meta = plane.event_metadata[event_meta(name) - 1].value
        for key, value in stats.items():
            stat(meta.stats, key, value)
    for line_id, (line_name, events) in enumerate(spec.get("lines", {}).items(), 1):
        line = plane.lines.add(id=line_id, name=line_name, timestamp_ns=1_000_000)
        for name, start, duration, stats, *display in events:
            event = line.events.add(
                metadata_id=event_meta(name, *display),
                offset_ps=int(start * 1000),
                duration_ps=int(duration * 1000),
            )
            for key, value in stats.items():
                stat(event.stats, key, value)
    for key, sid in stat_ids.items():
        entry = plane.stat_metadata.add(key=sid)
        entry.value.id, entry.value.name = sid, key


def write_trace(folder: pathlib.Path, hosts: dict[str, dict]) -> pathlib.Path:
    run = folder / "plugins" / "profile" / "2026_11_26_10_00_00"
    run.mkdir(parents=True)
    for host, planes in hosts.items():
        (run / f"{host}.xplane.pb").write_bytes(xspace_bytes(planes, host))
    return folder


STEP_HLO = """HloModule jit_step, is_scheduled=true

%fused_add (p: f32[1024]) -> f32[1024] {
  %p = f32[1024]{0} parameter(0)
  ROOT %a = f32[1024]{0} add(%p, %p)
}

ENTRY %main (x: f32[1024]) -> f32[1024] {
  %x = f32[1024]{0} parameter(0)
  %copy-start = (f32[1024]{0}, f32[1024]{0}, u32[]) copy-start(%x)
  %copy-done = f32[1024]{0} copy-done(%copy-start)
  ROOT %add_fusion = f32[1024]{0} fusion(%copy-done), kind=kLoop, calls=%fused_add
}
"""
FULL_TEXT = {  # what a TPU's XLA Ops events are named: the whole instruction
    "copy-start": "%copy-start = (f32[1024]{0:T(1024)}, f32[1024]{0:T(1024)S(5)}, u32[]{:S(2)}) "
    "copy-start(f32[1024]{0:T(1024)} %x)",
    "copy-done": "%copy-done = f32[1024]{0:T(1024)} copy-done((f32[1024]{0:T(1024)}, "
    "f32[1024]{0:T(1024)S(5)}, u32[]{:S(2)}) %copy-start)",
    "add_fusion": "%add_fusion = f32[1024]{0:T(1024)} fusion(f32[1024]{0:T(1024)} %copy-done), "
    "kind=kLoop, calls=%fused_add",
}
V6E = {"device_type_string": "TPU v6 Lite", "peak_teraflops_per_second": 918.0}


def tpu_plane(program: str, starts: list[float], scale: float = 1.0, program_id: int = 7):
    """A TPU chip's plane: per run (at each start, in µs) a 10 µs copy-done and a 5 µs
    fusion, times ``scale``; the run on ``XLA Modules`` lasts 16 µs x ``scale``."""
    ops, modules, copies = [], [], []
    for start in starts:
        t = start * 1e3
        modules.append((f"{program}({program_id})", t, 16e3 * scale, {"run_id": 1}))
        ops += [
            (FULL_TEXT["copy-start"], t + 100, 10, {"program_id": program_id}, "copy-start"),
            (
                FULL_TEXT["copy-done"],
                t + 200,
                10e3 * scale,
                {"program_id": program_id},
                "copy-done",
            ),
            (
                FULL_TEXT["add_fusion"],
                t + 200 + 10e3 * scale,
                5e3 * scale,
                {"program_id": program_id},
                "add_fusion",
            ),
        ]
        copies.append(
            (FULL_TEXT["copy-start"], t + 100, 9e3 * scale, {"hlo_op": "copy-done"}, "async-copy")
        )
    return {
        "stats": V6E,
        "lines": {"XLA Modules": modules, "XLA Ops": ops, "Async XLA Ops": copies},
    }


# -- the real TPU trace ------------------------------------------------------------------


def test_a_real_tpu_trace_opens_alone_with_its_chip_roofline_and_full_coverage():
    profile = tpukit.Profile.from_trace(REAL_TPU)
    assert profile.name == "jit_f" and profile.device_kind == "TPU v6 Lite"
    assert profile.peak.name == "TPU v6e" and profile.runs == 2
    # By hand from the file: copy-done ran 189,172,501.328 ns and 189,236,810.0 ns.
    assert profile.seconds("copy-done") == pytest.approx(189.204655664e-3)
    # broadcast_add_fusion.1: 8,153,507.422 and 8,155,112.5 ns.
    assert profile.seconds("broadcast_add_fusion.1") == pytest.approx(8.154309961e-3)
    # The runs on XLA Modules: 888,823,937.25 and 679,552,598.0 ns; the 15 instructions
    # executed in them add up to all but a few hundred ns of that.
    assert profile.busy_seconds == pytest.approx(784.18826763e-3)
    assert profile.total_seconds / profile.busy_seconds >= 0.99
    assert len(profile.table()) == 15
    record = {r["name"]: r for r in profile.table()}["broadcast_add_fusion.1"]
    assert record["bound"] == "memory" and record["roofline_share"] > 0.5
    # async-copy copy-start.4 was in flight 698,492,605.922 and 496,868,951.594 ns.
    assert profile.in_flight_seconds["copy-start.4"] == pytest.approx(597.680778758e-3)
    text = repr(profile)
    assert text.startswith("Verdict: the device was busy 784 ms of 889 ms per run")
    assert "waiting on transfers" in text and "TPU v6e peak 920 TFLOP/s" in text
    assert "100.0% of the program's device time" in text


def test_a_real_tpu_trace_picks_its_program_by_fingerprint_and_refuses_unknown_ones():
    chosen = tpukit.Profile.from_trace(REAL_TPU, program="12190760917235803885")
    assert chosen.runs == 2
    with pytest.raises(tpukit.ArgumentError) as failure:
        tpukit.Profile.from_trace(REAL_TPU, program="jit_g")
    message = str(failure.value)
    assert "jit_f(12190760917235803885) (f32[5,1024,1024,256]" in message
    assert str(REAL_TPU) in message


# -- TPU layouts: one host, two hosts, same-name programs -----------------------------------


def test_tpu_ops_named_with_their_whole_hlo_text_are_read_on_one_host(tmp_path):
    trace = write_trace(tmp_path, {"vm-0": {"/device:TPU:0": tpu_plane("jit_step", [0, 100])}})
    profile = tpukit.Profile.from_trace(trace, STEP_HLO)
    assert profile.device_kind == "TPU v6 Lite" and profile.runs == 2
    assert profile.seconds("copy-done") == pytest.approx(10e-6)
    assert profile.seconds("add_fusion") == pytest.approx(5e-6)
    assert profile.in_flight_seconds == pytest.approx({"copy-start": 9e-6})
    assert profile.busy_seconds == pytest.approx(16e-6)
    assert profile.total_seconds == pytest.approx(15.01e-6)  # 10 ns + 10 µs + 5 µs


def test_two_hosts_stay_two_hosts_with_their_own_time_and_the_slowest_named(tmp_path):
    # Each host's file names its chips /device:TPU:0 and :1 again; host b runs 2x slower.
    trace = write_trace(
        tmp_path,
        {
            "host-a": {
                "/device:TPU:0": tpu_plane("jit_step", [0, 100]),
                "/device:TPU:1": tpu_plane("jit_step", [0, 100]),
            },
            "host-b": {
                "/device:TPU:0": tpu_plane("jit_step", [0, 100], scale=2),
                "/device:TPU:1": tpu_plane("jit_step", [0, 100], scale=2),
            },
        },
    )
    profile = tpukit.Profile.from_trace(trace, STEP_HLO)
    assert profile.runs == 8 and profile.devices == 4  # 2 runs on each of 4 chips
    # Per run, the mean over the chips: copy-done (10 + 10 + 20 + 20) / 4 = 15 µs.
    assert profile.seconds("copy-done") == pytest.approx(15e-6)
    assert profile.host_seconds == pytest.approx({"host-a": 16e-6, "host-b": 32e-6})
    assert "Hosts: device time per run host-a 16 µs, host-b 32 µs (slowest host-b)" in repr(profile)


def test_programs_that_share_a_name_are_told_apart_by_id(tmp_path):
    hlo_a = jax.jit(jnp.dot).lower(jnp.ones((4, 8)), jnp.ones((8, 2))).compile()
    hlo_b = jax.jit(jnp.dot).lower(jnp.ones((3, 3)), jnp.ones((3, 3))).compile()

    def proto(compiled):  # an HloProto: its HloModuleProto as field 1
        module = compiled.runtime_executable().hlo_modules()[0]
        body = module.as_serialized_hlo_module_proto()
        length, prefix = len(body), b"\x0a"
        while length > 127:
            prefix += bytes([length & 127 | 128])
            length >>= 7
        return prefix + bytes([length]) + body

    plane_49 = tpu_plane("jit_step", [0], program_id=49)
    plane_50 = tpu_plane("jit_step", [100], scale=3, program_id=50)
    plane_49["lines"] = {k: v + plane_50["lines"][k] for k, v in plane_49["lines"].items()}
    metadata = {
        "jit_step(49)": {"Hlo Proto": proto(hlo_a)},
        "jit_step(50)": {"Hlo Proto": proto(hlo_b)},
    }
    trace = write_trace(
        tmp_path, {"vm": {"/device:TPU:0": plane_49, "/host:metadata": {"metadata": metadata}}}
    )
    with pytest.raises(tpukit.ArgumentError) as failure:
        tpukit.Profile.from_trace(trace, STEP_HLO)
    message = str(failure.value)
    assert "2 programs in" in message and "named 'jit_step'" in message
    assert "jit_step(49) (f32[4,8], f32[8,2])->f32[4,2]" in message
    assert "jit_step(50) (f32[3,3], f32[3,3])->f32[3,3]" in message
    first = tpukit.Profile.from_trace(trace, STEP_HLO, program="jit_step(49)")
    second = tpukit.Profile.from_trace(trace, STEP_HLO, program="50")
    assert first.runs == second.runs == 1
    assert first.seconds("copy-done") == pytest.approx(10e-6)
    assert second.seconds("copy-done") == pytest.approx(30e-6)


# -- GPU layouts ------------------------------------------------------------------------------

FUSION_HLO = """HloModule jit_one

%fused (p: f32[4096]) -> f32[4096] {
  %p = f32[4096]{0} parameter(0)
  ROOT %m = f32[4096]{0} multiply(%p, %p)
}

ENTRY %main (x: f32[4096]) -> f32[4096] {
  %x = f32[4096]{0} parameter(0)
  ROOT %loop_multiply_fusion = f32[4096]{0} fusion(%x), kind=kLoop, calls=%fused
}
"""


def test_gpu_kernels_of_different_runs_are_never_one_execution():
    # A one-kernel program run 5 times back to back: 5 executions of the fusion, not one.
    kernel = {"hlo_op": "loop_multiply_fusion", "hlo_module": "jit_one", "program_id": 3}
    events = [("loop_multiply_fusion", 10e3 * k, 2e3, kernel) for k in range(5)]
    trace = xspace_bytes({"/device:GPU:0": {"lines": {"Stream #14(Compute)": events}}})
    profile = _profile_of_bytes(trace, FUSION_HLO)
    assert profile.runs == 5
    record = profile.table()[0]
    assert record["calls"] == 1 and record["seconds"] == pytest.approx(2e-6)
    assert record["bytes"] == 2 * 4096 * 4  # read x, write the product: once per run


LIBRARY_HLO = """HloModule jit_conv

ENTRY %main (f: f32[1,8,8,4], k: f32[3,3,4,4]) -> (f32[1,8,8,4], u8[0]) {
  %f = f32[1,8,8,4]{3,2,1,0} parameter(0)
  %k = f32[3,3,4,4]{3,2,1,0} parameter(1)
  ROOT %cudnn-conv.1 = (f32[1,8,8,4]{3,2,1,0}, u8[0]{0}) custom-call(%f, %k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, custom_call_target="__cudnn$convForward"
}
"""


def test_a_library_call_s_kernels_are_one_execution_within_a_run_and_two_across_runs():
    # Two runs back to back; each launches the convolution's two kernels. The host's
    # launches (same correlation ids) sit in two calls of the program on the Python thread.
    conv = {"hlo_op": "cudnn-conv.1", "hlo_module": "jit_conv", "program_id": 5}
    kernels, launches = [], []
    for run in range(2):
        for k, (name, duration) in enumerate((("implicit_gemm", 4e3), ("winograd", 1e3))):
            cid = 10 * run + k
            kernels.append((name, 5e3 * (2 * run + k), duration, {**conv, "correlation_id": cid}))
            launches.append(
                ("cuLaunchKernel", 100e3 * run + 1e3 * (1 + k), 500, {"correlation_id": cid})
            )
    calls = [("PjitFunction(conv)", 100e3 * run, 50e3, {}) for run in range(2)]
    trace = xspace_bytes(
        {
            "/device:GPU:0": {"lines": {"Stream #7(Compute)": kernels}},
            "/host:CPU": {"lines": {"python3": calls + launches}},
        }
    )
    profile = _profile_of_bytes(trace, LIBRARY_HLO)
    assert profile.runs == 2
    record = profile.table()[0]
    assert record["calls"] == 1 and record["seconds"] == pytest.approx(5e-6)  # (4 + 1) µs


ROCM_HLO = """HloModule jit_rocm

%fused_pad (p: f32[60,64]) -> f32[64,64] {
  %p = f32[60,64]{1,0} parameter(0)
  %z = f32[] constant(0)
  ROOT %pad = f32[64,64]{1,0} pad(%p, %z), padding=0_4x0_0
}

ENTRY %main (w: f32[60,64], x: f32[64,64]) -> (f32[64,64], s8[1024]) {
  %w = f32[60,64]{1,0} parameter(0)
  %x = f32[64,64]{1,0} parameter(1)
  %loop_pad_fusion.1 = f32[64,64]{1,0} fusion(%w), kind=kLoop, calls=%fused_pad
  ROOT %cublas-gemm.1 = (f32[64,64]{1,0}, s8[1024]{0}) custom-call(%x, %loop_pad_fusion.1), custom_call_target="__cublas$gemm"
}
"""


def test_rocm_kernels_ending_in_kd_are_matched_by_hlo_op_and_by_name():
    # As JAX on an AMD GPU writes them: ".kd" kernel names; the pad runs in a command
    # buffer (hlo_op names the buffer, the kernel its fusion), the hipBLASLt gemm carries
    # its instruction as hlo_op.
    graph = {"hlo_op": "command_buffer_0", "hlo_module": "jit_rocm", "program_id": 2}
    gemm = {"hlo_op": "cublas-gemm.1", "hlo_module": "jit_rocm", "program_id": 2}
    kernels = []
    for run in range(3):
        t = 100e3 * run
        kernels += [
            ("loop_pad_fusion_1.kd", t, 1.5e3, graph),
            ("Cijk_Ailk_Bljk_SB_MT64x64x16_MI32x32x2x1.kd", t + 2e3, 6e3, gemm),
        ]
    trace = xspace_bytes({"/device:GPU:0": {"lines": {"Stream #0(Compute)": kernels}}})
    profile = _profile_of_bytes(trace, ROCM_HLO)
    assert profile.runs == 3
    records = {r["name"]: r for r in profile.table()}
    assert records["loop_pad_fusion.1"]["seconds"] == pytest.approx(1.5e-6)
    assert records["cublas-gemm.1"]["seconds"] == pytest.approx(6e-6)
    assert records["cublas-gemm.1"]["flops"] == 2 * 64 * 64 * 64


def _profile_of_bytes(data: bytes, hlo_text: str, repeat=None):
    from tpukit.measure._xspace import parse_xspace

    return tpukit.Profile.from_profile_data(
        [parse_xspace(data)], parse_hlo(hlo_text), repeat=repeat
    )


# -- the HLO from the trace itself, and the verdict in a notebook -------------------------------


def test_a_cpu_trace_opens_with_the_hlo_it_carries(tmp_path):
    f = jax.jit(lambda x: jnp.tanh(x @ x.T))
    x = jnp.ones((64, 32))
    f(x).block_until_ready()
    with jax.profiler.trace(str(tmp_path)):
        f(x).block_until_ready()
        f(x).block_until_ready()
    profile = tpukit.Profile.from_trace(tmp_path)
    assert profile.name == "jit__lambda" and profile.runs == 2
    assert profile.module.name == "jit__lambda" and profile.table()
    assert repr(profile).startswith("Verdict: the device was busy")


def test_tpu_profile_shows_the_verdict_first(shell):
    shell.run_cell("def sq(x):\n    return jnp.tanh(x @ x.T)")
    result = shell.run_cell("%tpu_profile -r 3 --no-graph sq(f32[64, 32])", store_history=False)
    assert result.success, result.error_in_exec
    profile = shell.user_ns["sq_profile"]
    verdict = profile.verdict()
    assert verdict.startswith("Verdict: the device was busy") and " of " in verdict
    assert any(word in verdict for word in ("launch-bound", "waiting on the host", "device-bound"))
    assert repr(profile).splitlines()[0] == verdict
    assert 'class="verdict"' in profile._repr_html_()


def test_a_notebooks_trace_picks_the_program_that_ran_among_same_named_ones(tmp_path):
    # A trace's metadata plane carries every program the process compiled, so a notebook
    # holds several 'jit_mlp' or 'jit__lambda' of other shapes; only one of them ran.
    f = jax.jit(lambda x: jnp.tanh(x @ x.T))
    for n in (8, 16, 24):
        f(jnp.ones((n, 4))).block_until_ready()  # three programs named jit__lambda
    x = jnp.ones((16, 4)).block_until_ready()  # made outside: on JAX 0.7 jnp.ones runs its
    with jax.profiler.trace(str(tmp_path)):  # own program, and the longer of two would be picked
        f(x).block_until_ready()
    profile = tpukit.Profile.from_trace(tmp_path)  # no module: the HLO the trace carries
    assert profile.runs == 1 and "f32[16,4]" in str(profile.module.entry.instructions[0].shape)
    compiled = f.lower(jnp.ones((16, 4))).compile().as_text()
    assert tpukit.Profile.from_trace(tmp_path, compiled).runs == 1  # with the module given


def test_a_trace_of_several_programs_profiles_the_longest_and_names_the_others(tmp_path):
    # A cell's trace often runs small programs beside the user's (on JAX 0.7, jnp.ones
    # runs jit_broadcast_in_dim): picked by device time, the profile says what else ran.
    step, tiny = jax.jit(lambda x: jnp.tanh(x @ x.T) @ x), jax.jit(jnp.sin)
    x, v = jnp.ones((384, 384)), jnp.ones(8)
    step(x).block_until_ready(), tiny(v).block_until_ready()
    with jax.profiler.trace(str(tmp_path)):
        step(x).block_until_ready()
        tiny(v).block_until_ready()
    profile = tpukit.Profile.from_trace(tmp_path)
    assert profile.module.name == "jit__lambda"
    text = repr(profile)
    # (XLA:CPU's traces carry the programs' ids: jit_sin(8))
    assert re.search(r"The trace ran 1 other program: jit_sin(\(\d+\))? [\d.]+ µs\.", text)
    assert re.search(r"jit__lambda's, the longest; pass program='jit_sin(\(\d+\))?'", text)
    assert "other program" in profile._repr_html_()
    chosen = tpukit.Profile.from_trace(tmp_path, program="jit_sin")
    assert chosen.module.name == "jit_sin" and "other program" not in repr(chosen)
    module = step.lower(x).compile().as_text()
    assert "other program" not in repr(tpukit.Profile.from_trace(tmp_path, module))


def test_a_trace_without_the_given_module_says_so_whatever_else_it_carries(tmp_path):
    # Two programs named like the module were compiled (so the trace's metadata carries
    # them) but another one ran: the profile says the module has no events in the trace.
    def layer(x):
        return jnp.tanh(x @ x.T)

    def other(v):
        return jnp.sin(v) * 2

    layer_jit, other_jit = jax.jit(layer), jax.jit(other)
    module = layer_jit.lower(jnp.ones((8, 4))).compile().as_text()
    for n in (8, 12):
        layer_jit(jnp.ones((n, 4))).block_until_ready()  # two programs named jit_layer
    v = other_jit(jnp.ones(8)).block_until_ready()
    with jax.profiler.trace(str(tmp_path)):
        other_jit(v).block_until_ready()
    with pytest.raises(tpukit.ProfileError, match="no per-instruction events of 'jit_layer'"):
        tpukit.Profile.from_trace(tmp_path, module)
