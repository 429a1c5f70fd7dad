"""Trainer.compile_step: the program fit runs, as a tpukit.Compiled, on 8 simulated devices."""

import jax
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

import tpukit
from tests._support.two_layer import LAYOUT, MLP, X, Y
from tpukit.train import Trainer, fit

BACKEND_COMPILES: list[str] = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, seconds, **_: (
        BACKEND_COMPILES.append(event) if event.endswith("backend_compile_duration") else None
    )
)


def params_of(model):
    return [np.asarray(a) for a in jax.tree.leaves(nnx.state(model, nnx.Param))]


def test_the_compiled_step_is_the_program_fit_then_runs():
    model = MLP(nnx.Rngs(0))
    before = params_of(model)
    trainer = Trainer(model, optax.adam(1e-2), **LAYOUT)
    step = trainer.compile_step((X, Y), batch_size=64, steps_per_execution=4)
    assert isinstance(step, tpukit.Compiled) and step.name == "fit_step"
    assert all(np.array_equal(a, b) for a, b in zip(params_of(model), before))
    assert trainer.state.steps_done == 0  # nothing trained

    # fit dispatches the very executable compile_step built: XLA compiles nothing more.
    compiled = len(BACKEND_COMPILES)
    history = trainer.fit((X, Y), epochs=1, batch_size=64, steps_per_execution=4, verbose=False)
    assert len(BACKEND_COMPILES) == compiled
    assert len(history.executions) == 2 and trainer.state.steps_done == 8
    # ... while another program (other steps per call) is compiled: the count can fail.
    fit(MLP(nnx.Rngs(0)), optax.adam(1e-2), (X, Y), epochs=1, batch_size=64,
        steps_per_execution=2, verbose=False, **LAYOUT)  # fmt: skip
    assert len(BACKEND_COMPILES) > compiled


def test_the_compiled_step_shows_fits_layout_loop_and_kept_input():
    trainer = Trainer(MLP(nnx.Rngs(0)), optax.adam(1e-2), **LAYOUT)
    step = trainer.compile_step((X, Y), batch_size=64, steps_per_execution=4)
    assert step.mesh == {"data": 4, "model": 2}
    assert [p.name for p in step.signature.parameters] == [
        "params", "rest", "opt_state", "arrays", "indices", "start",
    ]  # fmt: skip
    params = step.input_shardings["params"]
    (l1_kernel,) = jax.tree.leaves(params["l1"]["kernel"])  # the NamedSharding in the Param
    (l2_kernel,) = jax.tree.leaves(params["l2"]["kernel"])
    assert l1_kernel.spec == P(None, "model") and l2_kernel.is_fully_replicated
    assert step.input_shardings["arrays"][0].spec == P("data")
    assert step.op_counts()["while"] >= 1  # the steps run in a loop on the device
    assert {c.opcode for c in step.collectives()} >= {"all-reduce"}  # gradients over "data"
    # fit's step keeps its input state (a stopped or interrupted call leaves it intact)
    assert "input_output_alias" not in step.hlo_text()
    assert "fit_step" in repr(step)


def test_compile_step_checks_its_options_like_fit():
    trainer = Trainer(MLP(nnx.Rngs(0)), optax.adam(1e-2))
    with pytest.raises(ValueError, match="batch_size is required"):
        trainer.compile_step((X, Y))
    with pytest.raises(TypeError, match="unknown option 'step'"):
        trainer.compile_step((X, Y), batch_size=64, step=3)


def test_the_step_can_be_timed_and_profiled_again_and_again():
    # Repeated runs have inputs and nothing the trainer holds is consumed.
    model = MLP(nnx.Rngs(0))
    trainer = Trainer(model, optax.adam(1e-2), **LAYOUT)
    step = trainer.compile_step((X, Y), batch_size=64, steps_per_execution=4)
    for _ in range(2):
        assert step.timeit(repeat=2).median > 0
        profile = step.profile(repeat=2)
        assert profile.runs >= 2 and profile.total_seconds > 0
        # It ran fit's 4 steps on the trainer's own state, not on random numbers (which
        # make Adam's second moments negative, so that the guard skips every step).
        updates = [r["calls"] for r in profile.table() if r["group"] == "optimizer update"]
        assert updates and max(updates) == 4, updates
    history = trainer.fit((X, Y), epochs=1, batch_size=64, steps_per_execution=4, verbose=False)
    assert np.isfinite(history["loss"][-1])


def test_a_model_fit_left_on_8_devices_runs_in_one_device_programs():
    """After a fit over 8 devices the model's arrays are replicated on all 8; a program
    compiled for one device refused them ("compiled for input shardings that disagree"),
    and a one-device step of optax.sgd (a state without arrays, held static and left out
    of the call) could not be timed."""
    model = MLP(nnx.Rngs(0))
    predict = tpukit.compile(lambda m, x: m(x), model, tpukit.shape("f32[4,32]"))
    mesh = jax.make_mesh((8,), ("data",))
    replicated = jax.sharding.NamedSharding(mesh, P())
    nnx.update(model, jax.device_put(nnx.state(model), replicated))  # as fit leaves it
    assert predict(model, X[:4]).shape == (4, 16)
    one = tpukit.train.DataParallel(devices=jax.devices()[:1])
    step = Trainer(model, optax.sgd(0.1), sharding=one).compile_step(
        (X[:16], Y[:16]), batch_size=16
    )
    assert len(step.devices) == 1 and step.timeit(number=1, repeat=1).median > 0
