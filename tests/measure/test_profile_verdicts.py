"""A profile's verdict and figures come from the trace's evidence, or say they cannot.

Three fixtures are trimmed real GPU traces from AMD-AGI/TraceLens at commit 042a7522
(``tests/traces/mi300/...``) and 171dd747 (``tests/test_data_jax_te_fused_attn_
categorization/934987a2fc2f.xplane.pb``), cut to one program's kernels on
``/device:GPU:0`` (the plane's stats kept), the host's launches of those kernels (same
``correlation_id``), the host's ``GpuExecutable::ExecuteThunks`` and ``<module>:XLA GPU
module`` events of that program, and the ``/host:metadata`` entry carrying its HLO
(events and stats as recorded; ``kernel_details`` and ``source_stack`` stats dropped):

- ``mi300x_conv.xplane.pb``: ``jax08_conv/tw003.xplane.pb``, ``jit_forward_3d_conv(15)``
  on an MI300X (a 3-D convolution run by MIOpen as two kernels, five runs);
- ``mi300x_add.xplane.pb``: ``jax08_elementwise/tw003.xplane.pb``, ``jit_add(11)`` and
  ``jit_add(28)`` (five runs each, between other programs);
- ``mi355x_te_attention.xplane.pb``: ``jit_loss_fn(17)`` on an MI355X, TransformerEngine's
  fused attention (forward two kernels, backward five) in a training step, five runs.
"""

import re

import pytest

import tpukit
from tests._support.data import DATA
from tests.measure.test_profile_traces import STEP_HLO, tpu_plane, write_trace
from tpukit.measure._verdict import verdict

CONV = DATA / "mi300x_conv.xplane.pb"
ADD = DATA / "mi300x_add.xplane.pb"
ATTENTION = DATA / "mi355x_te_attention.xplane.pb"


@pytest.fixture(scope="module")
def conv():
    return tpukit.Profile.from_trace(CONV)


@pytest.fixture(scope="module")
def attention():
    return tpukit.Profile.from_trace(ATTENTION)


def test_a_gpu_trace_whose_device_idles_between_runs_is_not_called_device_bound(conv):
    # By hand from the file: the five runs' kernels add up to 683 µs on average, and the
    # first kernels of consecutive runs start 23.2 ms apart on average.
    assert conv.runs == 5
    text = conv.verdict()
    assert text.startswith("Verdict: the device was busy 683 µs of 23.2 ms per run (3%)")
    assert "waiting on the host" in text and "device-bound" not in text
    # the host's ExecuteThunks around each run's launches: 546 µs on average
    assert conv.evidence.launch_seconds == pytest.approx(546e-6, rel=0.01)


def test_a_library_convolution_launched_as_two_kernels_counts_once_per_run(conv):
    record = {r["name"]: r for r in conv.table()}["cudnn-conv.1"]
    assert record["calls"] == 1
    # What the HLO's convolution does once: 2 x 5120 out x 16 in features x the (output, tap)
    # pairs on real input per dim of window 1x2x2, stride 1x2x2, padding 1 each side, input
    # 32x60x104: every tap of the 34x31x53 outputs but those on padding (36.6 GFLOP with
    # them, until session 51), as XLA's cost analysis counts.
    assert record["flops"] == 2 * 5120 * 16 * 32 * 60 * 104 == 32_715_571_200


def test_an_amd_chip_is_named_from_its_plane_and_gets_its_published_peak(conv, attention):
    assert conv.device_kind == "AMD Instinct MI300X"
    assert conv.peak.name == "MI300X" and conv.peak.bf16_tflops == pytest.approx(1307.4)
    assert attention.device_kind == "AMD Instinct MI355X"
    assert attention.peak.name == "MI355X" and attention.peak.hbm_gbps == 8000
    assert "MI355X peak 2516.6 TFLOP/s" in repr(attention)


def test_transformer_engine_attention_counts_once_per_execution(attention):
    records = {r["name"]: r for r in attention.table()}
    for name in ("te_fused_attn_forward_ffi.10", "te_fused_attn_backward_ffi.12"):
        assert records[name]["calls"] == 1, name
        # no FLOPs counted for the library call: no bound is claimed for it
        assert records[name]["flops"] is None and records[name]["bound"] is None
    assert records["te_fused_attn_backward_ffi.12"]["bytes"] == 168_296_504


def test_a_busy_gpu_is_device_bound_by_its_own_numbers(attention):
    text = attention.verdict()
    assert text.startswith("Verdict: the device was busy 2.43 ms of 2.65 ms per run (91%)")
    assert "waiting on the host" not in text and "launch-bound" not in text
    # most of the time is in TransformerEngine's calls, whose FLOPs are not counted
    assert "device-bound; no roofline bound for 56% of the time" in text
    assert "35% is in instructions bounded by compute" in text


def test_a_tiny_program_between_others_shows_its_small_share():
    profile = tpukit.Profile.from_trace(ADD, program="jit_add(28)")
    text = profile.verdict()
    assert "busy 2.94 µs of 1.96 ms per run (0.2%)" in text
    assert "waiting on the host (the host took 24.5 µs per run" in text


def test_program_lists_show_the_entry_shapes_without_frontend_attributes():
    with pytest.raises(tpukit.ArgumentError) as failure:
        tpukit.Profile.from_trace(ADD)
    message = str(failure.value)
    assert "jit_add(11) (bf16[8,4096,2048], bf16[8,4096,2048])->bf16[8,4096,2048], 621" in message
    assert "jit_add(28) (bf16[8,4096,1], f32[])->bf16[8,4096,1], 81.9" in message
    assert "frontend_attributes" not in message and "{" not in message


def test_without_a_period_the_verdict_says_it_cannot_tell_and_why(tmp_path):
    trace = write_trace(tmp_path, {"vm": {"/device:TPU:0": tpu_plane("jit_step", [0])}})
    text = tpukit.Profile.from_trace(trace, STEP_HLO).verdict()
    assert "cannot be told: each device ran the program once in the trace" in text
    assert "device-bound" not in text


def test_the_verdict_calls_launch_bound_only_when_launching_fills_the_run():
    records = []
    launch = verdict(busy=50e-6, wall=1e-3, records=records, peak_known=False, launch=900e-6)
    assert "launch-bound (the host took 900 µs per run to launch its kernels)" in launch
    host = verdict(busy=50e-6, wall=1e-3, records=records, peak_known=False, launch=20e-6)
    assert "waiting on the host (the host took 20 µs" in host
    unknown = verdict(busy=5e-3, wall=None, records=records, peak_known=False, unknown="why")
    assert "cannot be told: why." in unknown and "device-bound" not in unknown


def test_in_flight_copies_recorded_by_one_chip_are_per_run_of_that_chip(tmp_path):
    # Only TPU:0 records the async copies (9 µs each run); TPU:1 runs the same program.
    quiet = tpu_plane("jit_step", [0, 100])
    del quiet["lines"]["Async XLA Ops"]
    planes = {"/device:TPU:0": tpu_plane("jit_step", [0, 100]), "/device:TPU:1": quiet}
    profile = tpukit.Profile.from_trace(write_trace(tmp_path, {"vm": planes}), STEP_HLO)
    assert profile.runs == 4
    assert profile.in_flight_seconds == pytest.approx({"copy-start": 9e-6})


def test_every_run_folder_and_host_is_read_and_named(tmp_path):
    write_trace(tmp_path, {"host-a": {"/device:TPU:0": tpu_plane("jit_step", [0, 100])}})
    later = tmp_path / "plugins" / "profile" / "2026_11_26_10_05_00"
    later.mkdir()
    source = next((tmp_path / "plugins" / "profile").glob("*/host-a.xplane.pb"))
    (later / "host-b.xplane.pb").write_bytes(source.read_bytes().replace(b"host-a", b"host-b"))
    (later / "host-a.xplane.pb").write_bytes(source.read_bytes())
    profile = tpukit.Profile.from_trace(tmp_path, STEP_HLO)
    assert len(profile.sources) == 3 and profile.runs == 6
    assert set(profile.host_seconds) == {
        "host-a (2026_11_26_10_00_00)",
        "host-a (2026_11_26_10_05_00)",
        "host-b",
    }
    assert "Read 3 trace files (every host and run folder)" in repr(profile)


def test_a_module_of_other_shapes_than_the_program_that_ran_is_refused():
    import jax
    import jax.numpy as jnp

    def f(x):
        return x + 1.0

    other = jax.jit(f).lower(jnp.ones((8, 8))).compile().as_text()  # jit_f at 8x8
    with pytest.raises(tpukit.ArgumentError) as failure:
        tpukit.Profile.from_trace(DATA / "tpu_v6e_jit_f.xplane.pb", other)
    message = str(failure.value)
    assert "compiled for (f32[8,8])->f32[8,8]" in message
    assert "jit_f(12190760917235803885)" in message and "(f32[5,1024,1024,256]" in message


def test_a_profile_compares_mean_with_mean():
    profile = tpukit.Profile.from_trace(ADD, program="jit_add(11)")
    profile.wall_seconds = [1e-3, 2e-3, 6e-3]
    assert profile.wall_seconds_per_run == pytest.approx(3e-3)  # the median would be 2 ms


def test_the_device_is_never_busy_longer_than_the_run():
    """The trace's clock and the host's differ: a run that kept the device busy nearly all
    its wall time read "busy 2.43 ms of 2.37 ms" on a CPU."""
    profile = tpukit.Profile.from_trace(ADD, program="jit_add(11)")
    busy = profile.busy_seconds or profile.evidence.busy_seconds
    profile.wall_seconds = [0.97 * busy] * 3
    found = re.search(r"busy (.+?) of (.+?) per run \((\d+)%\)", profile.verdict())
    assert found and found.group(1) == found.group(2) and found.group(3) == "100", found


def test_hlo_open_of_a_profiler_trace_points_to_from_trace():
    with pytest.raises(tpukit.ArgumentError, match=r"Profile\.from_trace\("):
        tpukit.hlo.open(CONV)


def test_hlo_text_with_a_stray_byte_in_its_metadata_opens(tmp_path):
    text = (DATA / "hlo" / "jax_mlp.hlo").read_bytes()
    damaged = text.replace(b"HloModule", b"// caf\xe9 \xff\nHloModule", 1)
    path = tmp_path / "module.txt"
    path.write_bytes(damaged)
    assert tpukit.hlo.open(path).op_counts() == tpukit.hlo.open(text.decode()).op_counts()
