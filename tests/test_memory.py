"""Memory view and the explained out-of-memory, checked against XLA's own figures on CPU.

Where the figures come from:
- ``memory_analysis().peak_memory_in_bytes``: XLA's buffer-assignment peak. On CPU it is
  arguments + outputs - aliases + constants (the CPU buffer-assignment proto carries no
  heap-simulator trace for temporaries, so XLA leaves them out); the tests check that.
- ``*-live-range.txt``: XLA's HloLiveRange report, written by a child process run with
  ``XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text``: "Live ranges at N (peak)" and
  "Stack trace breakdown for peak usage: B bytes". The view's peak must be those.
"""

import os
import pathlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import optax
import pytest
from flax import nnx

import tpukit
from tpukit import hlo
from tpukit._errors import DeviceMemoryError
from tpukit.compilation._memory import ENVIRONMENT_VARIABLE
from tpukit.train import Trainer


class ConvNet(nnx.Module):
    def __init__(self, rngs):
        self.conv = nnx.Conv(1, 8, (3, 3), rngs=rngs)
        self.head = nnx.Linear(8 * 28 * 28, 10, rngs=rngs)

    def __call__(self, x):
        return self.head(nnx.relu(self.conv(x)).reshape(x.shape[0], -1))


STEP_SCRIPT = textwrap.dedent(
    """
    import sys, numpy as np, optax
    from flax import nnx
    import tpukit
    from tpukit.train import Trainer
    sys.path.insert(0, {tests!r})
    from test_memory import ConvNet, step_data
    which = sys.argv[1]
    model = tpukit.zoo.create("mlp") if which == "mlp" else ConvNet(nnx.Rngs(0))
    step = Trainer(model, optax.adam(1e-3)).compile_step(step_data(which), batch_size=32)
    print(step.jax_compiled.memory_analysis().peak_memory_in_bytes)
    """
)


def step_data(which):
    rng = np.random.default_rng(0)
    shape = (784,) if which == "mlp" else (28, 28, 1)
    x = rng.normal(size=(128, *shape)).astype(np.float32)
    return x, rng.integers(0, 10, 128).astype(np.int32)


def training_step(which):
    model = tpukit.zoo.create("mlp") if which == "mlp" else ConvNet(nnx.Rngs(0))
    return Trainer(model, optax.adam(1e-3)).compile_step(step_data(which), batch_size=32)


def xla_dump(which, folder):
    """Compile the same step in a child process with XLA's dump flags on."""
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={folder} --xla_dump_hlo_as_text"
    env = dict(os.environ, XLA_FLAGS=flags)  # the test process's flags kept (8 CPU devices)
    env.pop(ENVIRONMENT_VARIABLE, None)
    script = STEP_SCRIPT.format(tests=str(pathlib.Path(__file__).parent))
    done = subprocess.run(
        [sys.executable, "-c", script, which], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (live,) = pathlib.Path(folder).glob("*jit_fit_step*after_optimizations-live-range.txt")
    return live.read_text()


@pytest.mark.parametrize("which", ["mlp", "convnet"])
def test_peak_and_buffers_at_the_peak_are_xlas(which, tmp_path):
    step = training_step(which)
    view = step.memory_view()
    report = xla_dump(which, tmp_path)
    peak_at = int(re.search(r"Live ranges at (\d+) \(peak\)", report).group(1))
    peak = int(re.search(r"peak usage: ([\d ]+) bytes", report).group(1).replace(" ", ""))
    listed = report.split("(peak):")[1].split("Stack trace")[0]
    lines = dict(re.findall(r"^\s+(\S+\{[^}]*\}): (\d+) bytes", listed, re.M))

    assert not view.is_estimate and view.peak_position == peak_at
    ours = {b.name if "{" in b.name else b.name + "{}": b.size for b in view.buffers_at_peak()}
    assert set(ours) == set(lines)
    # Sizes: ours are the buffer assignment's; XLA's live-range report sizes a value by
    # its instruction's whole shape, so its "peak usage" line is at least ours (open
    # question, see the branch's report: on 8 devices some whole values differ too).
    assert view.peak_bytes == sum(ours.values()) <= peak

    # XLA's memory_analysis peak on CPU: arguments + outputs - aliases + constants. The
    # difference to the live-range peak is the temporaries and outputs the CPU figure omits.
    stats = step.jax_compiled.memory_analysis()
    constants = sum(b.size for b in view.ranges.values if b.kind == "constant")
    assert (
        view.xla_peak
        == stats.peak_memory_in_bytes
        == (
            stats.argument_size_in_bytes
            + stats.output_size_in_bytes
            - stats.alias_size_in_bytes
            + constants
        )
    )
    print(
        f"{which}: peak {view.peak_bytes:,} B (XLA live-range line {peak:,} B), "
        f"memory_analysis peak {view.xla_peak:,} B"
    )


@pytest.mark.parametrize("which", ["mlp", "convnet"])
def test_the_schedule_estimate_follows_xlas_live_ranges(which, tmp_path):
    """Without XLA's files, the estimate walks XLA's schedule; its peak is an estimate
    (measured: the MLP step's estimate is about 1.4x XLA's on 8 CPU devices, for it does
    not see XLA's buffer reuse in loops and collectives), and it says so."""
    step = training_step(which)
    xla = step.memory_view()
    estimate = hlo.open(step.hlo_text()).memory_view()
    assert estimate.is_estimate and "estimated" in repr(estimate)
    assert estimate.ranges.sequence == xla.ranges.sequence
    xla_top = max(sum(s.values()) for s in xla.timeline())
    ours = max(sum(s.values()) for s in estimate.timeline())
    print(f"{which}: estimated peak {ours:,} B, XLA's live ranges at most {xla_top:,} B")


def test_a_dump_folder_gives_xlas_live_ranges(tmp_path):
    report = xla_dump("mlp", tmp_path)
    program = hlo.open(tmp_path, module="jit_fit_step")
    view = program.memory_view(capacity=1 << 20)
    assert not view.is_estimate and view.fits is False
    assert f"Live ranges at {view.peak_position} (peak)" in report
    html = view._repr_html_()
    assert "<svg" in html and "Buffers live at the peak" in html and "capacity" in html


def test_training_step_breakdown_and_layers():
    view = training_step("mlp").memory_view()
    roles = dict(view.breakdown())
    # fit donates its state: at the peak (the update) new weights and moments sit in the
    # donated buffers of the old ones; the data and the workspace are there too.
    assert {"data", "workspace", "new state (in donated buffers)"} <= set(roles)
    assert sum(n for _, n in view.by_group()) == view.peak_bytes
    assert sum(n for _, n in view.breakdown()) == view.peak_bytes


def predict(model, x):
    return model(x)


def test_a_program_over_the_capacity_explains_itself(monkeypatch):
    model = tpukit.zoo.create("mlp")
    big = tpukit.compile(predict, model, tpukit.shape("f32[4096,784]"))
    small = tpukit.compile(predict, model, tpukit.shape("f32[64,784]"))
    capacity = (big.memory.total_bytes + small.memory.total_bytes) // 2
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, str(capacity))
    with pytest.raises(DeviceMemoryError) as caught:
        tpukit.compile(predict, model, tpukit.shape("f32[4096,784]"))
    message = str(caught.value)
    assert "does not fit" in message and ENVIRONMENT_VARIABLE in message
    assert "layers[" in message  # the buffers at the peak name their layers
    batch = int(re.search(r"largest batch that fits is (\d+) of 4096", message).group(1))
    fits = tpukit.compile(predict, model, tpukit.shape(f"f32[{batch},784]"))
    assert fits.memory.total_bytes <= capacity
    with pytest.raises(DeviceMemoryError):
        tpukit.compile(predict, model, tpukit.shape(f"f32[{batch + 1},784]"))
    # A program compiled before the limit was set is refused when called, model untouched.
    before = np.asarray(model.layers[0].kernel.value).copy()
    with pytest.raises(DeviceMemoryError):
        big(model, np.zeros((4096, 784), np.float32))
    assert np.array_equal(before, np.asarray(model.layers[0].kernel.value))


def test_set_device_memory_and_bad_sizes():
    tpukit.set_device_memory("1KiB")
    try:
        with pytest.raises(DeviceMemoryError, match="set by tpukit.set_device_memory"):
            tpukit.compile(predict, tpukit.zoo.create("mlp"), tpukit.shape("f32[8,784]"))
    finally:
        tpukit.set_device_memory(None)
    with pytest.raises(tpukit.ArgumentError, match="2GiB"):
        tpukit.set_device_memory("two gigs")


def test_tpu_memory_magic():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "tpukit")
    shell.user_ns.update(predict=predict, model=tpukit.zoo.create("mlp"))
    view = shell.run_line_magic("tpu_memory", "--capacity 1GiB predict(model, f32[32,784])")
    assert isinstance(view, tpukit.MemoryView) and view.fits and view.capacity == 1 << 30
