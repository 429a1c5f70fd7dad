"""fit checks its program against the device's memory before its first step, and an
out-of-memory says what would fit, each change measured by compiling it.

The device is made small with ``TPUKIT_DEVICE_MEMORY`` (the documented way to try
out-of-memory paths on a CPU), set between what fit's step needs at two batch sizes,
so the refusal, the batch search and the batch that then trains are all real.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import tpukit
from tpukit._compat import module_list
from tpukit._errors import DeviceMemoryError
from tpukit.compilation import search_batch
from tpukit.compilation._memory import ENVIRONMENT_VARIABLE, parse_bytes
from tpukit.compilation._out_of_memory import needed_bytes
from tpukit.display import format_bytes
from tpukit.train import Trainer
from tpukit.train._memory_fit import (
    KEEP_REMAT,
    KEEP_REMAT_FLAG,
    _blocks,
    _remat_class,
)


def data(n=1024):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 784)).astype(np.float32)
    return x, rng.integers(0, 10, n).astype(np.int32)


def needed(model, batch_size, **options):
    step = Trainer(model, optax.adam(1e-3)).compile_step(data(), batch_size=batch_size, **options)
    return step.memory.total_bytes


@pytest.fixture(scope="module")
def sizes():
    """What fit's MLP step needs at batch 512 and 64 (4 steps per call, 8 CPU devices)."""
    model = tpukit.zoo.create("mlp")
    return {b: needed(model, b, steps_per_execution=4) for b in (512, 64)}


def test_fit_refuses_before_its_first_step_says_what_fits_and_that_batch_trains(
    sizes, monkeypatch, capsys
):
    capacity = (sizes[512] + sizes[64]) // 2
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, str(capacity))
    model = tpukit.zoo.create("mlp")
    kernel = np.asarray(model.layers[0].kernel.value).copy()
    with pytest.raises(DeviceMemoryError) as caught:
        tpukit.fit(model, optax.adam(1e-3), data(), epochs=1, batch_size=512, steps_per_execution=4)
    message = str(caught.value)
    first = message.splitlines()[0]
    assert (
        first.startswith("fit_step does not fit in device memory") and ENVIRONMENT_VARIABLE in first
    )
    assert "epoch 1/1" not in capsys.readouterr().out  # refused before any epoch started
    # Nothing lost: the model's weights are the same arrays with the same values, and
    # no optimizer state or step count was written on it.
    assert np.array_equal(kernel, np.asarray(model.layers[0].kernel.value))
    assert Trainer(model, optax.adam(1e-3)).state.steps_done == 0

    table = message.split("What would fit", 1)[1]
    for change in ("batch_size=", "bf16 parameters", "steps_per_execution=1", "data left on"):
        assert change in table, table
    batch = int(re.search(r"The largest batch that fits is (\d+) of 512", message).group(1))
    assert batch % 8 == 0 and 64 <= batch < 512
    # The figures are measured, not guessed: the batch found fits and one more step of
    # the devices' multiple does not.
    monkeypatch.delenv(ENVIRONMENT_VARIABLE)
    fits = needed(model, batch, steps_per_execution=4)
    assert fits <= capacity < needed(model, batch + 8, steps_per_execution=4)
    assert f"batch_size={batch}" in table

    monkeypatch.setenv(ENVIRONMENT_VARIABLE, str(capacity))  # fit checks it again: it fits

    history = tpukit.fit(
        model,
        optax.adam(1e-3),
        data(),
        epochs=1,
        batch_size=batch,
        steps_per_execution=4,
        verbose=False,
    )
    assert len(history.epochs) == 1 and np.isfinite(history.epochs[0]["loss"])


def test_the_bf16_figure_is_what_a_bf16_model_compiles_to(sizes, monkeypatch):
    capacity = (sizes[512] + sizes[64]) // 2
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, str(capacity))
    model = tpukit.zoo.create("mlp")
    with pytest.raises(DeviceMemoryError) as caught:
        Trainer(model, optax.adam(1e-3)).compile_step(data(), batch_size=512, steps_per_execution=4)
    line = next(s for s in str(caught.value).splitlines() if "bf16 parameters" in s)
    monkeypatch.delenv(ENVIRONMENT_VARIABLE)
    bf16 = tpukit.zoo.create("mlp", param_dtype="bfloat16")
    measured = needed(bf16, 512, steps_per_execution=4)
    assert format_bytes(measured) in line, (line, measured)


def test_fit_without_a_known_capacity_is_not_checked(monkeypatch):
    """A CPU has no bytes_limit: with no capacity set, fit compiles nothing extra and trains."""
    monkeypatch.delenv(ENVIRONMENT_VARIABLE, raising=False)
    model = tpukit.zoo.create("mlp")
    history = tpukit.fit(model, optax.adam(1e-3), data(256), epochs=1, batch_size=64, verbose=False)
    assert len(history.epochs) == 1


def test_streamed_data_that_cannot_fit_at_any_batch_says_so(monkeypatch):
    x, y = data(256)
    batches = [(x[i : i + 64], y[i : i + 64]) for i in range(0, 256, 64)]
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "64KiB")  # less than the weights alone
    with pytest.raises(DeviceMemoryError) as caught:
        tpukit.fit(tpukit.zoo.create("mlp"), optax.adam(1e-3), batches, epochs=1)
    message = str(caught.value)
    assert "even the smallest batch is over" in message
    assert "data left on" not in message  # the data is on the host already


@pytest.mark.parametrize(
    "need",
    [
        lambda b: 1000 + 10 * b,  # linear: the line lands on it
        lambda b: 1000 + b * b // 8,  # convex: the line overshoots, bisection settles it
        lambda b: 1000 + (b // 64) * 640,  # steps: XLA picks another plan past each 64
    ],
)
def test_the_batch_search_finds_the_largest_batch_that_fits(need):
    found = search_batch(need, 512, need(512), available=2000, multiple=8)
    best = max(b for b in range(8, 513, 8) if need(b) <= 2000)
    assert found.exact and found.fitted == best and found.over == best + 8
    assert found.needed == need(best) and found.compiles <= 6


def test_the_remat_fix_runs_the_repeated_layers_under_nnx_remat():
    model = tpukit.zoo.create("mlp")
    assert _blocks(model) == ["layers[0]", "layers[1]", "layers[2]"]

    def forward(model):  # as fit's step does: the model merged inside the trace
        graphdef, state = nnx.split(model)
        call = lambda s, x: nnx.merge(graphdef, s)(x)  # noqa: E731
        return str(jax.make_jaxpr(call)(state, jnp.zeros((2, 784))))

    plain = forward(model)
    layer = model.layers[0]
    layer.__class__ = _remat_class(type(layer))  # what the fix does to a merged copy
    rematted = forward(model)
    assert "checkpoint" not in plain and "remat" not in plain
    assert "checkpoint" in rematted or "remat" in rematted
    assert type(layer).__name__ == "Linear" and isinstance(layer, nnx.Linear)


class Block(nnx.Module):
    """Three tanh layers: three activations of the batch kept for the backward pass, one
    (the block's input) under nnx.remat."""

    def __init__(self, rngs: nnx.Rngs):
        self.dense = module_list([nnx.Linear(128, 128, rngs=rngs) for _ in range(3)])

    def __call__(self, x):
        for dense in self.dense:
            x = jnp.tanh(dense(x))
        return x


class Deep(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.inp = nnx.Linear(32, 128, rngs=rngs)
        self.blocks = module_list([Block(rngs) for _ in range(4)])
        self.out = nnx.Linear(128, 10, rngs=rngs)

    def __call__(self, x):
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return self.out(x)


def test_the_remat_advice_is_the_fewest_blocks_that_fit_and_its_figure_is_what_they_compile_to(
    monkeypatch,
):
    """The remat line names the fewest blocks that fit, and taking its advice -- those
    blocks under nnx.remat, compiled with XLA's barrier expander off as it says -- gives
    a step that fits, needing the figure it states; one block fewer is over, as it says.
    (It once named the heavier half of the blocks live at the peak, two here, over; on
    JAX 0.7 the last block and the first, though the last, rematted, saves nothing.)"""
    monkeypatch.delenv(ENVIRONMENT_VARIABLE, raising=False)
    model = Deep(nnx.Rngs(0))
    # 1024 examples a device per step: the activations (512 KiB each) dominate. (The data
    # is kept small, 32 features: fit's step gathers the whole dataset on each device.)
    x, y = data(8192)
    train = (x[:, :32], y)

    def needed_with_remat(count):  # the advice taken on a copy: what the user compiles
        copy = nnx.clone(model)
        for block in list(copy.blocks)[:count]:
            block.__class__ = _remat_class(type(block))
        step = Trainer(copy, optax.adam(1e-3)).compile_step(
            train, batch_size=8192, steps_per_execution=1
        )
        return needed_bytes(step.lowered.compile(compiler_options=KEEP_REMAT))

    two = needed_with_remat(2)
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, str(two - 1))  # more than two blocks to remat
    with pytest.raises(DeviceMemoryError) as caught:
        Trainer(model, optax.adam(1e-3)).compile_step(train, batch_size=8192, steps_per_execution=1)
    message = str(caught.value)
    monkeypatch.delenv(ENVIRONMENT_VARIABLE)
    line = next(s for s in message.splitlines() if "nnx.remat on" in s)
    count = int(re.search(r"nnx\.remat on (\d+) layers", line).group(1))
    assert count in (3, 4) and "fits" in line, line
    assert re.findall(r"blocks\[\d\]", line) == [f"blocks[{i}]" for i in range(count)], line
    assert KEEP_REMAT_FLAG in message
    fits = needed_with_remat(count)
    assert fits < two and f"  {format_bytes(fits)}  fits" in line, (line, fits)
    fewer = two if count == 3 else needed_with_remat(count - 1)
    assert fewer >= two and f"on {count - 1} layers: {format_bytes(fewer)}, over" in line, line


def test_the_blocks_remat_tries_are_in_the_models_order():
    """The earliest block first (it keeps its activations longest): blocks sort as numbers."""

    class Many(nnx.Module):
        def __init__(self):
            self.layers = module_list([nnx.Linear(2, 2, rngs=nnx.Rngs(0)) for _ in range(11)])

    assert _blocks(Many()) == [f"layers[{i}]" for i in range(11)]


def test_an_out_of_memory_inside_an_epoch_is_explained_and_keeps_the_last_whole_call(
    monkeypatch,
):
    """A device that holds less than the check assumed fails inside the run: the error is
    explained like the check's, and the model keeps the last call applied whole."""
    from tpukit.train import _steps

    monkeypatch.delenv(ENVIRONMENT_VARIABLE, raising=False)
    calls = []
    call = _steps.Step.__call__

    def second_call_runs_out(self, state, data):  # and every call after it, as a device would
        calls.append(1)
        if len(calls) >= 2:
            raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 1 B")
        return call(self, state, data)

    monkeypatch.setattr(_steps.Step, "__call__", second_call_runs_out)
    model = tpukit.zoo.create("mlp")
    kernel = np.asarray(model.layers[0].kernel.value).copy()
    with pytest.raises(DeviceMemoryError) as caught:
        tpukit.fit(
            model,
            optax.adam(1e-3),
            data(512),
            epochs=1,
            batch_size=64,
            steps_per_execution=4,
            verbose=False,
        )
    message = str(caught.value)
    assert message.startswith("fit ran out of device memory") and "RESOURCE_EXHAUSTED" in message
    assert "fit_step" in message and "What would fit" in message
    # The first call (4 steps) was applied whole; the second, which failed, was not.
    assert Trainer(model, optax.adam(1e-3)).state.steps_done == 4
    assert not np.array_equal(kernel, np.asarray(model.layers[0].kernel.value))


def test_evaluate_over_the_capacity_is_explained_and_the_batch_it_finds_runs(monkeypatch):
    """evaluate's program is checked against a known capacity like fit's: the error
    says what it needs and which batch fits; the model is unchanged; that batch runs."""
    model = tpukit.zoo.create("mlp")
    kernel = np.asarray(model.layers[0].kernel[...]).copy()
    x, y = data(8192)
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "1KiB")  # nothing fits: both ends measured
    with pytest.raises(DeviceMemoryError) as caught:
        tpukit.evaluate(model, (x, y), batch_size=4096)
    message = str(caught.value)
    assert message.startswith("evaluate does not fit in device memory"), message
    largest = parse_bytes(re.search(r"needs ([\d.]+ [KMG]i?B) at once", message).group(1))
    smallest = parse_bytes(re.search(r"batch_size=8 +([\d.]+ [KMG]i?B) +over", message).group(1))
    assert smallest < largest, message

    capacity = (smallest + largest) // 2
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, str(capacity))
    with pytest.raises(DeviceMemoryError) as caught:
        tpukit.evaluate(model, (x, y), batch_size=4096)
    message = str(caught.value)
    assert "What would fit" in message and "bf16 parameters" in message
    found = re.search(r"(?:The largest batch that fits is|A batch of) (\d+) of 4096", message)
    assert found, message
    batch = int(found.group(1))
    assert batch % 8 == 0 and 0 < batch < 4096
    assert np.array_equal(kernel, np.asarray(model.layers[0].kernel[...]))
    figures = tpukit.evaluate(model, (x, y), batch_size=batch)  # the capacity still set
    monkeypatch.delenv(ENVIRONMENT_VARIABLE)
    unchecked = tpukit.evaluate(model, (x, y), batch_size=4096)
    assert figures["loss"] == pytest.approx(unchecked["loss"], rel=1e-5)


def test_an_out_of_memory_while_evaluate_runs_is_explained(monkeypatch):
    """No capacity known (a CPU): evaluate runs unchecked, and a device's
    RESOURCE_EXHAUSTED becomes the explanation, measured against the memory free now."""
    import inspect

    from tpukit.train import _steps

    monkeypatch.delenv(ENVIRONMENT_VARIABLE, raising=False)
    evaluation = _steps.evaluation

    class RunsOut:  # evaluate's jitted program, whose run fails as a full device's would
        def __init__(self, *args):
            self.jitted = evaluation(*args)
            self.__signature__ = inspect.signature(self.jitted)

        def lower(self, *args):
            return self.jitted.lower(*args)

        def __call__(self, *args):
            raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 1 B")

    monkeypatch.setattr(_steps, "evaluation", RunsOut)
    model = tpukit.zoo.create("mlp")
    kernel = np.asarray(model.layers[0].kernel[...]).copy()
    with pytest.raises(DeviceMemoryError) as caught:
        tpukit.evaluate(model, data(512), batch_size=256)
    message = str(caught.value)
    assert message.startswith("evaluate ran out of device memory"), message
    assert "RESOURCE_EXHAUSTED" in message and "The model is unchanged" in message
    assert "evaluate does not fit in device memory" in message and "(free now)" in message
    assert np.array_equal(kernel, np.asarray(model.layers[0].kernel[...]))
