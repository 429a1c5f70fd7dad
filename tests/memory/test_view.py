"""Memory view and the explained out-of-memory, checked against XLA's own figures on CPU.

Where the figures come from (measured, JAX 0.10, 8 CPU devices, batch 32):
- The view's headline ``peak_bytes``: what the device allocates, XLA's
  ``argument_size + output_size - alias_size + temp_size`` from ``memory_analysis()``;
  ``temp_size_in_bytes`` is the size of the one ``preallocated-temp`` allocation of the
  ``*-buffer-assignment.txt`` that all temporaries are packed into. MLP: 1,363,392 +
  1,312,869 - 1,312,636 + 1,985,096 = 3,348,721 B; conv net 1,951,177 B.
- ``memory_analysis().peak_memory_in_bytes``: on CPU, arguments + outputs - aliases +
  constants (MLP 1,363,671 B): it leaves the packed temporaries out.
- ``*-live-range.txt``, written by a child process run with ``XLA_FLAGS=--xla_dump_to=DIR
  --xla_dump_hlo_as_text``: "Live ranges at N (peak)" and "peak usage: B bytes" (MLP
  4,440,086 B at step 395): the logical values live then, summed, at their
  buffer-assignment sizes; values sharing one slot (a conditional's result and the
  branch's copy that writes it, a donated argument and the new state) count once each.
  The view's ``values_at_peak_bytes`` is that line; ``in_use_at_peak_bytes`` counts each
  slot once (MLP 3,127,298 B).
"""

import os
import pathlib
import re
import subprocess
import sys
import textwrap

import jax
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
    sys.path.insert(0, {root!r})
    from tests.memory.test_view import ConvNet, step_data
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
    flags = (
        f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={folder} --xla_dump_hlo_as_text"
        " --xla_dump_hlo_module_re=.*fit_step.*"  # not the model's eager initialisers
    )
    env = dict(os.environ, XLA_FLAGS=flags)  # the test process's flags kept (8 CPU devices)
    env.pop(ENVIRONMENT_VARIABLE, None)
    script = STEP_SCRIPT.format(root=str(pathlib.Path(__file__).parents[2]))
    done = subprocess.run(
        [sys.executable, "-c", script, which], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = list(pathlib.Path(folder).glob("*jit_fit_step*after_optimizations-live-range.txt"))
    if not found and jax.__version_info__ < (0, 8):
        # XLA of JAX 0.7 writes buffer assignments but no live-range report; the view
        # then says its figures are an estimate (checked in test_the_estimate_...).
        pytest.skip(f"XLA of JAX {jax.__version__} writes no *-live-range.txt to compare with")
    (live,) = found
    return live.read_text()


@pytest.fixture(scope="module")
def dumped(tmp_path_factory):
    """``dumped(which)``: (the dump folder, its live-range report) of ``which``'s step,
    compiled once per module by a child process (two tests read the MLP's)."""
    made = {}

    def dump(which):
        if which not in made:
            folder = tmp_path_factory.mktemp(f"dump-{which}")
            made[which] = folder, xla_dump(which, folder)
        return made[which]

    return dump


@pytest.mark.parametrize("which", ["mlp", "convnet"])
def test_peak_and_buffers_at_the_peak_are_xlas(which, dumped):
    step = training_step(which)
    view = step.memory_view()
    _, report = dumped(which)
    peak_at = int(re.search(r"Live ranges at (\d+) \(peak\)", report).group(1))
    peak = int(re.search(r"peak usage: ([\d ]+) bytes", report).group(1).replace(" ", ""))
    listed = report.split("(peak):")[1].split("Stack trace")[0]
    lines = dict(re.findall(r"^\s+(\S+\{[^}]*\}): (\d+) bytes", listed, re.M))

    assert not view.is_estimate and view.peak_position == peak_at
    ours = {b.name if "{" in b.name else b.name + "{}": b.size for b in view.buffers_at_peak()}
    # The values live at XLA's peak moment, and their sizes, are the live-range list's;
    # their sum is its "peak usage" line, exactly (phi values, e.g. ``conditional{1}``,
    # are read from the buffer assignment too).
    assert ours == {k: int(v) for k, v in lines.items()}
    assert view.values_at_peak_bytes == sum(ours.values()) == peak

    # The headline is what the device allocates: memory_analysis's argument + output -
    # alias + temp sizes, exactly. The live-range line is another figure: it counts the
    # values live at one moment, each at its size, values that share one slot (a loop's
    # carry and its copy, a conditional's result and its branch's) each once; fit's step
    # keeps its input state, so its outputs have slots of their own and are not in it.
    stats = step.jax_compiled.memory_analysis()
    allocated = (
        stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        - stats.alias_size_in_bytes
        + stats.temp_size_in_bytes
    )
    assert view.peak_bytes == allocated
    kinds = view.ranges.allocated()
    assert kinds["argument"] == stats.argument_size_in_bytes
    assert kinds["temporary"] == stats.temp_size_in_bytes  # the one packed buffer
    # Bytes really occupied at XLA's peak moment: each slot once, within the allocation;
    # the buffer list, roll-ups and chart add up to it.
    assert view.in_use_at_peak_bytes == sum(view.timeline()[peak_at].values()) < allocated
    assert sum(n for _, n in view.by_group()) == view.in_use_at_peak_bytes
    assert max(sum(s.values()) for s in view.timeline()) <= allocated

    # peak_memory_in_bytes on CPU: arguments + outputs - aliases + constants, i.e. the
    # headline less the temporaries' buffer, plus constants (the CPU buffer assignment
    # carries no heap trace for the temporaries).
    assert (
        view.xla_peak
        == stats.peak_memory_in_bytes
        == (allocated - stats.temp_size_in_bytes + kinds["constant"])
    )
    print(
        f"{which}: allocated {view.peak_bytes:,} B; at XLA's peak {view.in_use_at_peak_bytes:,} "
        f"B in use, live-range line {peak:,} B; peak_memory_in_bytes {view.xla_peak:,} B"
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


def test_a_dump_folder_gives_xlas_live_ranges(dumped):
    folder, report = dumped("mlp")
    program = hlo.open(folder, module="jit_fit_step")
    view = program.memory_view(capacity=1 << 20)
    assert not view.is_estimate and view.fits is False
    assert f"Live ranges at {view.peak_position} (peak)" in report
    html = view._repr_html_()
    assert "<svg" in html and "Buffers live at the peak" in html and "capacity" in html


def test_training_step_breakdown_and_layers():
    view = training_step("mlp").memory_view()
    roles = dict(view.breakdown())
    # At the peak (the update) the old weights and moments, the data and the workspace
    # are live (fit's step keeps its input state, so nothing is donated).
    assert {"parameters", "optimizer state", "data", "workspace"} <= set(roles), roles
    assert sum(n for _, n in view.by_group()) == view.in_use_at_peak_bytes
    assert sum(n for _, n in view.breakdown()) == view.in_use_at_peak_bytes


def test_a_training_steps_arguments_are_named_by_their_place_in_its_state():
    """fit's step takes its state as flat leaves (JAX names them ``leaves[0]``, ...): the
    view names each by its path in ``(params, rest, opt_state)``, the layer's weight or
    moment it is, and the data by its own."""
    view = training_step("mlp").memory_view()
    groups = {b.group for b in view.buffers_at_peak() if b.kind == "argument"}
    assert {
        "state[0]['layers'][0]['kernel'].value",
        "state[2][0].mu['layers'][2]['bias'].value",
        "data['indices']",
    } <= groups, sorted(groups)
    assert not [g for g in groups if g.startswith("leaves")], sorted(groups)


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


def scale_and_sum(x, params, *, scale):
    return jax.numpy.tanh(x @ params["w"]) * scale, x.sum()


def test_buffers_are_named_as_the_user_named_the_arguments_and_results():
    """tpukit.compile passes XLA the traced arguments as one tuple: the view names them
    after the function's parameters, and lists each output under the result it is."""
    compiled = tpukit.compile(
        scale_and_sum, np.ones((64, 32), np.float32), {"w": np.ones((32, 16), np.float32)},
        scale=np.float32(2),
    )  # fmt: skip
    view = compiled.memory_view()
    buffers = {b.group: b for b in view.buffers_at_peak()}
    assert {"x", "params['w']", "scale"} <= set(buffers), sorted(buffers)
    assert buffers["x"].kind == "argument" and buffers["x"].size == 64 * 32 * 4
    assert buffers["outputs › result[0]"].shape == "f32[64,16]"
    if not view.is_estimate:  # XLA's peak is after the sum; the estimate's is before it
        assert buffers["outputs › result[1]"].shape == "f32[]"
    outputs = [b for b in view.buffers_at_peak() if b.kind == "output" and not b.shares]
    assert all(b.group.startswith("outputs › result[") for b in outputs), outputs
    assert "traced_args" not in repr(view) and "traced_kwargs" not in repr(view)
    groups = dict(view.by_group())
    assert groups["outputs"] == sum(b.size for b in outputs) and "inputs" not in groups, groups
    assert "parameter 0" in repr(view)  # made by: the argument's place in the call
    page = view._repr_html_()
    assert '<td class="num nowrap">8.0 KiB</td>' in page and "outputs › result[0]" in page


def test_set_device_memory_and_bad_sizes():
    tpukit.set_device_memory("1KiB")
    try:
        with pytest.raises(DeviceMemoryError, match="set by tpukit.set_device_memory"):
            tpukit.compile(predict, tpukit.zoo.create("mlp"), tpukit.shape("f32[8,784]"))
    finally:
        tpukit.set_device_memory(None)
    with pytest.raises(tpukit.ArgumentError, match="2GiB"):
        tpukit.set_device_memory("two gigs")


def test_tpu_memory_magic(shell):
    shell.user_ns.update(predict=predict, model=tpukit.zoo.create("mlp"))
    view = shell.run_line_magic("tpu_memory", "--capacity 1GiB predict(model, f32[32,784])")
    assert isinstance(view, tpukit.MemoryView) and view.fits and view.capacity == 1 << 30


def test_the_graph_colours_each_node_by_the_bytes_it_holds_at_the_peak():
    from tests._support.graph_payload import payload_of

    view = training_step("mlp").memory_view()
    graph = view.graph()
    payload = payload_of(graph._repr_html_())
    held = view.bytes_by_instruction()
    assert payload["memoryTotal"] == sum(held.values()) == view.in_use_at_peak_bytes
    # Every instruction node carries its own buffers' bytes at the peak (none: null), and
    # the whole program's group holds them all.
    labels = dict(zip(payload["label"], payload["memory"]))
    largest = max(held, key=held.__getitem__)
    assert labels[largest] == held[largest] > 0
    assert payload["memory"][0] == view.in_use_at_peak_bytes
    assert "coloured by memory at the peak" in repr(graph)
    with pytest.raises(tpukit.ArgumentError, match="not both"):
        hlo.HloGraph(graph.module, times={"x": 1.0}, memory=held)


def test_colour_memory_in_chromium_paints_by_bytes_and_toggles_to_kinds(browser):
    graph = training_step("mlp").memory_view().graph()
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_content(graph.to_html())
    page.wait_for_selector(".tkg-node")
    root = page.locator(".tkg-root")
    toggle = page.locator("button.tkg-colour")
    assert root.get_attribute("data-colour") == "memory" and toggle.inner_text() == "Colour: memory"
    painted = page.eval_on_selector_all(
        ".tkg-node[data-memory] rect.tkg-box", "boxes => boxes.map(b => b.style.fill)"
    )
    assert painted and all(fill.startswith("rgb(") for fill in painted), painted
    assert page.locator(".tkg-memory-key").is_visible()
    toggle.click()
    assert root.get_attribute("data-colour") == "kind" and toggle.inner_text() == "Colour: kind"
    assert not page.locator(".tkg-memory-key").is_visible()
    page.close()
    assert not errors, errors
