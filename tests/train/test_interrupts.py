"""Pressing stop (^C) during ``fit`` leaves a consistent model, and ``fit`` then goes on
exactly as an uninterrupted run would; the NaN guard keeps exactly the good steps.

A notebook's stop button sends SIGINT. Before, ``fit`` stored a call's new state before
its counters advanced, so ^C while it waited for the call left the model one call
ahead of what its training state said, and the next ``fit`` replayed steps (0 of 8
continuations matched). Here a child process sends itself SIGINT at chosen moments of a
real ``fit`` (right after a call is started, while it runs, inside a checkpoint write,
inside the evaluation after an epoch, and from a callback), then continues with
``fit(..., epochs=<the rest>)`` and compares parameters, BatchNorm statistics, the
dropout RNG and the optimizer state with an uninterrupted run, bit for bit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from tests.train.test_fit import MLP, X, Y
from tpukit.train import NonFiniteLossError, Trainer, fit

CHILD = textwrap.dedent(
    """
    import json, os, signal, sys, threading, time
    import jax, numpy as np, optax
    from flax import nnx
    import tpukit
    from tpukit.checkpoint import _store as _checkpoint
    from tpukit.train import _run, _steps
    from tpukit.train._state import TrainingState

    class Net(nnx.Module):
        def __init__(self, rngs):
            self.l1 = nnx.Linear(16, 32, rngs=rngs)
            self.bn = nnx.BatchNorm(32, rngs=rngs)
            self.drop = nnx.Dropout(0.2, rngs=rngs)
            self.l2 = nnx.Linear(32, 4, rngs=rngs)

        def __call__(self, x):
            return self.l2(self.drop(jax.nn.relu(self.bn(self.l1(x)))))

    rng = np.random.default_rng(0)
    X = rng.normal(size=(640, 16)).astype(np.float32)
    Y = (X[:, :4].argmax(1)).astype(np.int32)
    EPOCHS = 3
    KW = dict(batch_size=64, steps_per_execution=3, eval_data=(X[:128], Y[:128]),
              verbose=False)

    def state_of(model):
        ts = TrainingState.of(model)
        leaves = jax.tree.leaves(nnx.state(model)) + jax.tree.leaves(ts.opt_state)
        return [np.asarray(jax.random.key_data(a) if jax.dtypes.issubdtype(a.dtype,
                jax.dtypes.prng_key) else a).tolist() for a in leaves]

    reference = Net(nnx.Rngs(0))
    tpukit.fit(reference, optax.adam(1e-2), (X, Y), epochs=EPOCHS, **KW)
    expected = state_of(reference)

    def interrupt():
        os.kill(os.getpid(), signal.SIGINT)

    def patch(owner, name, at, before=False, delay=None):
        original = getattr(owner, name)
        count = [0]
        def wrapper(*a, **k):
            count[0] += 1
            if count[0] == at and before:
                interrupt()
            out = original(*a, **k)
            if count[0] == at and not before:
                if delay is None:
                    interrupt()
                else:
                    threading.Timer(delay, interrupt).start()
            return out
        setattr(owner, name, wrapper)
        return lambda: setattr(owner, name, original)

    def trial(where, at, tmp):
        model = Net(nnx.Rngs(0))
        kw = dict(KW)
        callbacks = []
        if where == "execution":
            undo = patch(_steps.Step, "__call__", at)
        elif where == "running":
            undo = patch(_steps.Step, "__call__", at, delay=0.002)
        elif where == "checkpoint":
            kw.update(checkpoint_dir=tmp, checkpoint_every=1)
            undo = patch(_checkpoint.RunCheckpoints, "save", at, before=True)
        elif where == "evaluation":
            undo = patch(_run.Evaluator, "__call__", at, before=True)
        else:
            calls = [0]
            def stop(record):
                calls[0] += 1
                if calls[0] == at:
                    raise KeyboardInterrupt
            callbacks = [stop]
            undo = lambda: None
        outcome = "finished"
        try:
            tpukit.fit(model, optax.adam(1e-2), (X, Y), epochs=EPOCHS, callbacks=callbacks, **kw)
        except KeyboardInterrupt:
            outcome = "interrupted"
        finally:
            undo()
        time.sleep(0.05)  # a late timer's signal lands here, not in the continuation
        ts = TrainingState.of(model)
        held = (ts.epochs_done, ts.in_epoch[0] if ts.in_epoch else 0, ts.steps_done)
        left = EPOCHS - ts.epochs_done
        tpukit.fit(model, optax.adam(1e-2), (X, Y), epochs=left, **KW)
        result = {"where": where, "at": at, "outcome": outcome, "held": held,
                  "same": state_of(model) == expected}
        if where == "checkpoint":  # the newest checkpoint resumes to the same end
            fresh = Net(nnx.Rngs(0))
            tpukit.fit(fresh, optax.adam(1e-2), (X, Y), epochs=EPOCHS,
                       checkpoint_dir=tmp, resume=True, **KW)
            result["resumed_same"] = state_of(fresh) == expected
        return result

    results = []
    for where, at in json.loads(sys.argv[1]):
        tmp = os.path.join(sys.argv[2], f"{where}-{at}")
        results.append(trial(where, at, tmp))
    print(json.dumps(results))
    """
)

TRIALS = [
    ("execution", 1),
    ("execution", 4),  # the last call of epoch 1: the epoch's end and evaluation follow
    ("execution", 5),
    ("running", 2),
    ("running", 6),
    ("checkpoint", 2),
    ("checkpoint", 4),
    ("evaluation", 1),
    ("evaluation", 2),
    ("callback", 4),
]


@pytest.fixture(scope="module")
def trials(tmp_path_factory):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["JAX_PLATFORMS"] = "cpu"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(TRIALS), str(tmp_path_factory.mktemp("ckpt"))],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {(r["where"], r["at"]): r for r in json.loads(done.stdout.strip().splitlines()[-1])}


@pytest.mark.parametrize("where, at", TRIALS)
def test_stop_then_fit_equals_the_uninterrupted_run(trials, where, at):
    result = trials[(where, at)]
    assert result["outcome"] == "interrupted", result
    assert result["same"], result  # parameters, batch stats, dropout RNG, optimizer state
    if where == "checkpoint":
        assert result["resumed_same"], result


def test_a_stop_inside_an_epoch_is_held_with_its_step(trials):
    # 10 steps per epoch in calls of 3, 3, 3 and 1: (epochs done, steps into the next
    # epoch, steps in all). ^C while a call runs applies nothing of it.
    assert tuple(trials[("execution", 1)]["held"]) == (0, 0, 0)
    assert tuple(trials[("execution", 5)]["held"]) == (1, 0, 10)
    assert tuple(trials[("callback", 4)]["held"]) == (0, 10, 10)  # after call 4 applied
    # The evaluation of epoch 1 interrupted: all 10 steps applied, the epoch not closed.
    assert tuple(trials[("evaluation", 1)]["held"]) == (0, 10, 10)


def test_running_the_compiled_step_leaves_the_trainers_model_as_it_was():
    model = MLP(nnx.Rngs(0))
    before = jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(model, nnx.Param)))
    trainer = Trainer(model, optax.adam(1e-2))
    step = trainer.compile_step((X, Y), batch_size=64, steps_per_execution=2)
    args, kwargs = step.example_arguments
    step(*args, **kwargs)  # runs two steps; the trainer's state is not consumed
    step(*args, **kwargs)
    after = jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(model, nnx.Param)))
    assert jax.tree.all(jax.tree.map(np.array_equal, before, after))


# ------------------------------------------------ the guard keeps exactly the good steps
def poisoned(step: int, batch: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """``X, Y`` with a NaN in the first example of 0-based step ``step`` (no shuffle)."""
    x = X.copy()
    x[step * batch, 0] = np.nan
    return x, Y


def update_goes_bad_at(step: int) -> optax.GradientTransformation:
    """Adam whose update at 0-based ``step`` is NaN though loss and gradients are finite:
    found only by the check of the call's final state, then by the step-by-step run."""

    def init(params):
        return jnp.zeros((), jnp.int32)

    def update(updates, count, params=None):
        scale = jnp.where(count == step, jnp.nan, 1.0)
        return jax.tree.map(lambda u: u * scale, updates), count + 1

    return optax.chain(optax.adam(1e-2), optax.GradientTransformation(init, update))


@pytest.mark.parametrize(
    "bad_step, per_call, cause",
    [(6, 4, "data"), (4, 4, "data"), (0, 3, "data"), (7, 1, "data"), (5, 4, "update"),
     (3, 8, "update")],
)  # fmt: skip
def test_a_stopped_run_keeps_bit_for_bit_a_run_of_exactly_the_good_steps(bad_step, per_call, cause):
    # Two paths: a NaN in the data makes the loss non-finite, which fit's call sees at
    # that step; a NaN update with finite loss and gradients shows only in the call's
    # final state, and the step-by-step run finds the step.
    kw = {"batch_size": 64, "shuffle": False, "verbose": False, "steps_per_execution": per_call}
    stopped = MLP(nnx.Rngs(0))
    # The origin search is tested in compilation/test_find_nan.py; off here, and its being off said.
    off = {"find_nan_origin": False}
    data = poisoned(bad_step) if cause == "data" else (X, Y)
    optimizer = optax.adam(1e-2) if cause == "data" else update_goes_bad_at(bad_step)
    with pytest.raises(NonFiniteLossError) as err:
        fit(stopped, optimizer, data, epochs=1, **kw, **off)
    quantity = "loss" if cause == "data" else "new value of l1/bias"
    assert err.value.step == bad_step + 1 and err.value.quantity == quantity
    assert err.value.origin is None and "(find_nan_origin=False)" in str(err.value)
    good = MLP(nnx.Rngs(0))
    if bad_step:
        good_data = (X[: bad_step * 64], Y[: bad_step * 64])
        good_optimizer = optax.adam(1e-2) if cause == "data" else update_goes_bad_at(10**6)
        fit(good, good_optimizer, good_data, epochs=1, **kw)
    for a, b in zip(
        jax.tree.leaves(nnx.state(stopped, nnx.Param)),
        jax.tree.leaves(nnx.state(good, nnx.Param)),
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert Trainer(stopped, optimizer).state.steps_done == bad_step


def test_a_gradient_the_optimizer_would_hide_is_still_caught_at_its_step():
    # fit's calls check the gradients every step only where the optimizer could hide a
    # NaN (a probe at trace time); optax.zero_nans hides every one, so here each step's
    # gradients are checked, and the step with an infinite gradient of gate stops fit.
    from tests.train.test_fit import Gated, poisoned_loss

    marks = np.zeros(len(X), np.int32)
    marks[5 * 64 + 3] = 2  # step 6: sqrt at 0 on the gate's path, the loss finite
    data = {"x": X, "labels": Y, "marker": marks}
    kw = {"batch_size": 64, "loss": poisoned_loss, "shuffle": False, "verbose": False}
    hiding = optax.chain(optax.zero_nans(), optax.adam(1e-2))
    model = Gated(nnx.Rngs(3))
    with pytest.raises(NonFiniteLossError) as err:
        fit(model, hiding, data, epochs=1, steps_per_execution=4, **kw)
    assert (err.value.step, err.value.quantity) == (6, "gradient of gate")
    good = Gated(nnx.Rngs(3))
    fit(good, hiding, jax.tree.map(lambda a: a[: 5 * 64], data), epochs=1, **kw)
    for a, b in zip(
        jax.tree.leaves(nnx.state(model, nnx.Param)),
        jax.tree.leaves(nnx.state(good, nnx.Param)),
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_the_probe_tells_which_optimizers_can_hide_a_gradient():
    from tpukit.train._hidden_gradients import hidden_gradients

    params = {"w": jnp.ones((3, 2)), "b": jnp.ones(2)}
    assert hidden_gradients(optax.adam(1e-3), params) == [False, False]
    assert hidden_gradients(optax.sgd(0.1), params) == [False, False]
    assert hidden_gradients(optax.chain(optax.zero_nans(), optax.sgd(0.1)), params) == [
        True,
        True,
    ]
    frozen = optax.multi_transform(
        {"train": optax.adam(1e-3), "frozen": optax.set_to_zero()}, {"w": "train", "b": "frozen"}
    )
    assert hidden_gradients(frozen, params) == [True, False]  # leaves in order: b, w


def test_the_probe_runs_once_per_optimizer_and_parameter_shapes(monkeypatch):
    """Each trace of fit's step asks the probe; it runs op by op (seconds on a deep
    model), so a recompile with another batch size reuses its answer. Another optimizer,
    or the same one on bf16 parameters, is probed again."""
    from tpukit.train import _hidden_gradients as probe_module
    from tpukit.train._program import OptimizerProgram

    probed = []
    probe = probe_module._probe_hidden
    monkeypatch.setattr(probe_module, "_HIDDEN", {})
    monkeypatch.setattr(
        probe_module, "_probe_hidden", lambda opt, params: probed.append(1) or probe(opt, params)
    )
    model = MLP(nnx.Rngs(0))
    data = (X[:256], Y[:256])
    for batch_size in (64, 32):
        Trainer(model, optax.adam(1e-3)).compile_step(data, batch_size=batch_size)
    assert len(probed) == 1
    Trainer(model, optax.chain(optax.zero_nans(), optax.adam(1e-3))).compile_step(
        data, batch_size=64
    )
    assert len(probed) == 2
    params = {"w": jnp.ones((3, 2)), "b": jnp.ones(2)}
    program = OptimizerProgram(optax.adam(1e-3), params)
    half = jax.tree.map(lambda x: x.astype(jnp.bfloat16), params)
    assert probe_module.hidden_gradients(program, params) == [False, False]
    assert probe_module.hidden_gradients(program, half) == [False, False]
    assert probe_module.hidden_gradients(program, params) == [False, False]
    assert len(probed) == 4


# ------------------------------------------------ the next call dispatched ahead
def test_a_stop_during_a_dispatch_ahead_is_held_until_that_calls_turn():
    import signal

    from tpukit._interrupts import held_interrupts

    with held_interrupts() as held:
        os.kill(os.getpid(), signal.SIGINT)  # lands inside: held, not raised
    with pytest.raises(KeyboardInterrupt):
        held.deliver()
    held.deliver()  # delivered once only


def test_a_held_block_sets_the_handler_without_signals_enum_wrappers(monkeypatch):
    import signal
    import types

    from tpukit import _interrupts

    def refused(*args):
        raise AssertionError("signal.signal/getsignal convert to enums: ~10 µs a block")

    wrappers = types.SimpleNamespace(
        SIGINT=signal.SIGINT,
        default_int_handler=signal.default_int_handler,
        signal=refused,
        getsignal=refused,
    )
    monkeypatch.setattr(_interrupts, "signal", wrappers)  # as the module sees ``signal``
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with _interrupts.deferred_interrupts():
            os.kill(os.getpid(), signal.SIGINT)  # held: the block still runs whole
            reached.append("end of block")
    assert reached == ["end of block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_a_run_dispatches_each_call_once_and_its_figures_are_those_of_calls_one_by_one():
    from tpukit.train import _steps

    counts = []
    original = _steps.Step.__call__

    def counting(self, *a, **k):
        counts.append(1)
        return original(self, *a, **k)

    def run(callbacks):
        model = MLP(nnx.Rngs(0))
        history = fit(
            model,
            optax.adam(1e-2),
            (X, Y),
            epochs=3,
            batch_size=64,
            steps_per_execution=3,
            verbose=False,
            callbacks=callbacks,
        )
        return history, jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(model, nnx.Param)))

    _steps.Step.__call__ = counting
    try:
        ahead, ahead_state = run([])  # calls dispatched ahead of their turn
        dispatched = len(counts)
        counts.clear()
        one_by_one, one_by_one_state = run([lambda record: None])  # a callback: no look-ahead
    finally:
        _steps.Step.__call__ = original
    assert dispatched == len(counts)  # no call run twice or wasted
    assert jax.tree.all(jax.tree.map(np.array_equal, ahead_state, one_by_one_state))
    for a, b in zip(ahead.epochs, one_by_one.epochs, strict=True):
        assert {k: v for k, v in a.items() if k != "seconds"} == {
            k: v for k, v in b.items() if k != "seconds"
        }


def test_calls_are_dispatched_ahead_only_while_a_third_copy_of_the_state_is_small():
    import tpukit
    from tpukit.train._run import look_ahead_fits

    state = (nnx.state(MLP(nnx.Rngs(0)), nnx.Param),)
    size = sum(x.nbytes for x in jax.tree.leaves(state))
    try:
        tpukit.set_device_memory(size * 100)  # the state is 1% of the device
        assert look_ahead_fits(state)
        tpukit.set_device_memory(size * 10)  # 10%: no look-ahead
        assert not look_ahead_fits(state)
    finally:
        tpukit.set_device_memory(None)
    assert look_ahead_fits(state)  # a CPU says no capacity: small states go ahead


STARTED_OVER = textwrap.dedent(
    """
    import json, os, signal, sys
    import jax, numpy as np, optax
    from flax import nnx
    from tpukit.train import TrainingState, _steps, fit

    rng = np.random.default_rng(0)
    x = rng.normal(size=(192, 8)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32)
    options = dict(epochs=1, batch_size=64, steps_per_execution=1, verbose=False)

    def params(m):
        return [np.asarray(a).tolist() for a in jax.tree.leaves(nnx.state(m, nnx.Param))]

    def change(m, x):
        if sys.argv[1] == "data":
            x[7, 3] += 1.0  # in place: the copy kept on the device is stale
        else:  # the model changed: the repeated set-up's checks fail after the dispatch
            nnx.update(m, jax.tree.map(lambda a: a + 0.25, nnx.state(m, nnx.Param)))

    m, twin, x2 = nnx.Linear(8, 2, rngs=nnx.Rngs(0)), nnx.Linear(8, 2, rngs=nnx.Rngs(0)), x.copy()
    fit(m, optax.adam(1e-2), (x, y), **options)
    fit(twin, optax.adam(1e-2), (x2, y), **options)
    change(m, x)
    change(twin, x2)
    before, steps = params(m), TrainingState.of(m).steps_done
    dispatched, call = [], _steps.Step.__call__

    def dispatch(self, *args):
        dispatched.append(1)
        if len(dispatched) == 2:  # the second call, dispatched ahead of its turn
            os.kill(os.getpid(), signal.SIGINT)
        return call(self, *args)

    _steps.Step.__call__ = dispatch
    try:
        fit(m, optax.adam(1e-2), (x, y), **options)
        outcome = "finished"
    except KeyboardInterrupt:
        outcome = "interrupted"
    _steps.Step.__call__ = call
    held = {"dispatched": len(dispatched), "steps": TrainingState.of(m).steps_done - steps,
            "unchanged": params(m) == before}
    # the next call trains as the uninterrupted twin's did
    fit(m, optax.adam(1e-2), (x, y), **options)
    fit(twin, optax.adam(1e-2), (x2, y), **options)
    print(json.dumps({"outcome": outcome, **held, "next_same": params(m) == params(twin)}))
    """
)


@pytest.mark.parametrize("stale", ["data", "model"])
def test_a_stop_held_during_a_dispatch_ahead_stops_a_call_that_starts_over(stale):
    # ^C lands inside the dispatch of a repeated call's second call (dispatched ahead,
    # so held until its turn); then the call finds its data changed in place, or its
    # model changed (checked while the first call ran), and would start over. The ^C
    # stops it instead, nothing of it applied, like any ^C before the first step.
    # One CPU device: calls go ahead only there (not on the 8 simulated ones).
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["JAX_PLATFORMS"] = "cpu"
    done = subprocess.run(
        [sys.executable, "-c", STARTED_OVER, stale],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {
        "outcome": "interrupted", "dispatched": 2, "steps": 0, "unchanged": True,
        "next_same": True,
    }, result  # fmt: skip
