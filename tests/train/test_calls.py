"""A notebook's ``fit`` calls, again and again: data kept on the device, never stale, and
timings that mean what their labels say.

Small models and data, so each test takes a second or two; none assumes a fresh
process (another file's ``fit`` may have compiled the same step first).
"""

import gc
import re
import time
import warnings

import jax
import numpy as np
import optax
from flax import nnx

from tpukit.train import TrainingState, fit
from tpukit.train._collaborators import Checkpointing
from tpukit.train._data import content_fingerprint, kept_resident
from tpukit.train._kept import KeptForModel
from tpukit.train._progress import EpochBar, Speed

rng = np.random.default_rng(0)
X = rng.normal(size=(96, 8)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int32)


def model(seed: int = 0) -> nnx.Module:
    return nnx.Linear(8, 2, rngs=nnx.Rngs(seed))


def train(m, data, **options) -> object:
    options = {"epochs": 1, "batch_size": 16, "verbose": False, **options}
    return fit(m, optax.adam(1e-2), data, **options)


def params(m) -> list[np.ndarray]:
    return [np.asarray(a) for a in jax.tree.leaves(nnx.state(m, nnx.Param))]


def same(a, b) -> bool:
    return all(np.array_equal(u, v) for u, v in zip(params(a), params(b), strict=True))


def test_a_second_call_on_the_same_arrays_trains_on_the_kept_copy(capsys):
    kept, fresh = model(), model()
    x, y = X.copy(), Y.copy()
    train(kept, (x, y), verbose=True)
    first = capsys.readouterr().out
    assert re.search(r"data placed in [\d.,]+ ms", first), first
    train(kept, (x, y), epochs=2, verbose=True)
    second = capsys.readouterr().out
    assert "data kept on device" in second and "data placed" not in second, second
    state = TrainingState.of(kept)
    assert state.kept.data["train_data"].uses == 1 and "train_data" in repr(state)
    # The same training as a model whose data is placed afresh for each call.
    train(fresh, (x, y))
    TrainingState.of(fresh).release_data()
    assert not TrainingState.of(fresh).kept.data
    train(fresh, (x, y), epochs=2)
    assert same(kept, fresh)


def test_an_array_changed_in_place_is_placed_again_before_anything_is_applied(capsys):
    kept, fresh = model(), model()
    x, y = X.copy(), Y.copy()
    train(kept, (x, y))
    train(fresh, (x.copy(), y))
    x[5, 3] += 1.0  # one value, in place: the same array object
    y[[0, 1]] = y[[1, 0]] if y[0] != y[1] else 1 - y[[0, 1]]
    history = train(kept, (x, y), verbose=True)
    out = capsys.readouterr().out
    assert "train_data changed in place since the last call" in out, out
    assert "data placed in" in out
    train(fresh, (x.copy(), y.copy()))
    assert same(kept, fresh)  # trained on the new values, not the kept copy
    assert [e["epoch"] for e in history.epochs] == [1]
    assert TrainingState.of(kept).epochs_done == 2  # the stale attempt applied nothing


def test_the_fingerprint_sees_a_changed_value_and_moved_examples():
    x = rng.normal(size=(50, 7)).astype(np.float32)  # rows of 28 bytes: 32-bit words
    before = content_fingerprint(x)
    assert content_fingerprint(x.copy()) == before
    swapped = x.copy()
    swapped[[3, 40]] = swapped[[40, 3]]
    assert content_fingerprint(swapped) != before
    nudged = x.copy()
    nudged[49, 6] = np.nextafter(nudged[49, 6], np.float32(np.inf))
    assert content_fingerprint(nudged) != before
    labels = np.arange(10, dtype=np.int8)
    assert content_fingerprint(labels) != content_fingerprint(labels[::-1].copy())


def test_kept_data_goes_with_the_arrays_and_is_not_taken_for_other_arrays():
    m = model()
    x, y = X.copy(), Y.copy()
    train(m, (x, y))
    kept = TrainingState.of(m).kept
    assert "train_data" in kept.data
    other = x.copy()
    train(m, (other, y))  # equal values, another object: placed anew
    assert kept.data["train_data"].uses == 0
    train(m, {"inputs": other, "labels": y})  # the same pair, named: the same arrays
    assert kept.data["train_data"].uses == 1


def test_a_kept_copy_is_freed_when_its_host_array_goes():
    class Placed:  # what _data.ResidentData gives: its device arrays (none here)
        arrays = ()

    kept = KeptForModel()
    x = np.zeros((4, 2), np.float32)
    first = kept_resident(kept, "train_data", ("pair",), [x], Placed)
    assert kept_resident(kept, "train_data", ("pair",), [x], Placed) is first
    assert kept.data["train_data"].uses == 1
    del x
    gc.collect()
    assert not kept.data  # (on a CPU device the placed copy may alias the host array,
    # which then lives as long as the copy: the model, or TrainingState.release_data())


def test_device_arrays_are_kept_by_identity():
    m = model()
    data = (jax.numpy.asarray(X), jax.numpy.asarray(Y))
    train(m, data, eval_data=data)
    train(m, data, eval_data=data)
    kept = TrainingState.of(m).kept.data
    assert kept["train_data"].uses == 1 and kept["eval_data"].uses == 1


def test_epoch_seconds_add_up_to_the_call_and_steps_per_s_leave_checkpoints_out(
    tmp_path, monkeypatch
):
    # Each write takes `pause` on the clock the run reads, without sleeping: the figures
    # then hold (or leave out) the writes whatever the machine's load.
    pause = 60.0
    save = Checkpointing.save
    real_clock = time.perf_counter
    slept = [0.0]

    def slow_save(self, *args):
        slept[0] += pause
        return save(self, *args)

    monkeypatch.setattr(time, "perf_counter", lambda: real_clock() + slept[0])
    monkeypatch.setattr(Checkpointing, "save", slow_save)
    m = model()
    start = time.perf_counter()
    history = train(
        m,
        (X, Y),
        epochs=3,
        steps_per_execution=2,
        checkpoint_dir=tmp_path / "run",
        checkpoint_every=1,
        eval_data=(X, Y),
    )
    wall = time.perf_counter() - start
    seconds = [e["seconds"] for e in history.epochs]
    # Each epoch writes 3 checkpoints (one per call): its seconds hold them.
    assert all(s >= 3 * pause for s in seconds), seconds
    assert 0.9 * wall <= sum(seconds) <= wall, (seconds, wall)
    # A call's steps/s leaves the writes out: no call's seconds hold one.
    call_seconds = [2 / r["steps_per_s"] for r in history.executions[1:]]
    assert max(call_seconds) < pause, call_seconds


def test_every_number_on_the_progress_line_is_labelled():
    started = time.perf_counter() - 0.067
    bar = EpochBar(
        1, 3, 78, enabled=False, speed=Speed(128), started=started, note="data placed in 75 ms"
    )
    bar.advance(78, {"loss": 0.25, "accuracy": 0.9}, seconds=0.0666)
    text = bar.text()
    assert "78/78" in text and "loss 0.25" in text and "accuracy 0.9" in text
    assert re.search(r"1,171 steps/s, 149,\d{3} examples/s", text), text
    # The epoch's wall time, labelled, and as long as its steps took (not the 5 ms of a
    # clock started after the epoch's first call was already running).
    found = re.search(r"epoch (\d+(?:\.\d+)?) ms, data placed in 75 ms", text)
    assert found and 60 <= float(found.group(1)) < 1000, text


def test_evaluate_keeps_its_data_and_sees_an_array_changed_in_place():
    from tpukit.train import evaluate

    m = model()
    x, y = X.copy(), Y.copy()
    first = evaluate(m, (x, y), batch_size=32)
    placed = TrainingState.of(m).kept.data["data"]
    assert evaluate(m, (x, y), batch_size=32) == first and placed.uses == 1
    x *= -1.0  # in place: the same object, other values
    changed = evaluate(m, (x, y), batch_size=32)
    assert TrainingState.of(m).kept.data["data"] is not placed  # placed again
    assert changed == evaluate(m, (x.copy(), y), batch_size=32) != first


def test_a_call_started_over_says_its_sharding_once(capsys):
    m = model()
    x, y = X.copy(), Y.copy()
    train(m, (x, y))
    x[0, 0] += 1.0
    train(m, (x, y), verbose=True)
    out = capsys.readouterr().out
    assert "changed in place" in out, out
    assert sum(line.startswith("tpukit.fit: sharding ") for line in out.splitlines()) == 1, out


def test_a_repeated_call_takes_the_last_set_up_and_any_change_sets_up_afresh():
    m = model()
    x, y = X.copy(), Y.copy()
    train(m, (x, y))
    kept = TrainingState.of(m).kept
    first = kept.last
    train(m, (x, y), epochs=2, seed=3)  # epochs and seed are each call's own
    assert kept.last is first and first.written  # taken whole; its state placed already
    for change in ({"batch_size": 32}, {"eval_data": (x, y)}, {"steps_per_execution": 2}):
        train(m, (x, y), **change)
        assert kept.last is not first, change
        first = kept.last
    fit(m, optax.adam(1e-3), (x, y), epochs=1, batch_size=16, verbose=False)  # another rate
    assert kept.last is not first
    first = kept.last
    train(m, (x, y[::-1].copy()))  # other labels: other arrays
    assert kept.last is not first


def test_a_metrics_list_changed_in_place_between_calls_sets_up_afresh():
    m = model()
    x, y = X.copy(), Y.copy()
    metrics = ["accuracy"]
    train(m, (x, y), metrics=metrics)
    metrics.append("top5_accuracy")  # the same list object, another setting
    history = train(m, (x, y), metrics=metrics)
    assert "top5_accuracy" in history.epochs[-1]


def test_a_repeated_call_sees_a_layer_replaced_between_calls():
    kept, fresh = model(), model()
    x, y = X.copy(), Y.copy()
    train(kept, (x, y))
    train(fresh, (x, y))
    for m in (kept, fresh):
        m.bias = nnx.Param(jax.numpy.full((2,), 0.5))  # a new Variable, set by hand
    TrainingState.of(fresh).release_data()  # (set up afresh: nothing kept)
    train(kept, (x, y))
    train(fresh, (x, y))
    assert same(kept, fresh)  # trained from the new bias, not the kept split's


def test_the_side_by_side_optimizer_comparison_agrees_with_the_optax_keys():
    from tpukit.train._optax_key import optax_closure_key, same_optax

    makers = [
        lambda: optax.adam(1e-3),
        lambda: optax.adam(1e-2),
        lambda: optax.adam(-0.0),
        lambda: optax.adam(0.0),
        lambda: optax.adamw(1e-3),
        lambda: optax.sgd(0.1, momentum=0.9),
        lambda: optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3)),
        lambda: optax.adam(optax.linear_schedule(1e-3, 0.0, 100)),
    ]
    for make_a in makers:
        for make_b in makers:
            a, b = make_a(), make_b()
            for fa, fb in ((a.init, b.init), (a.update, b.update)):
                key = optax_closure_key(fa)
                agree = key is not None and key == optax_closure_key(fb)
                assert same_optax(fa, fb) == agree
    user = lambda updates, state, params=None: (updates, state)  # noqa: E731
    assert not same_optax(user, user)  # only optax's own closures are known by content


def _trained_twice(change) -> tuple[nnx.Module, nnx.Module]:
    """A model trained by two calls with ``change(model)`` between them (the second
    call may take the first's set-up), and one trained with the same change whose
    second call is set up afresh (nothing kept): they should agree."""
    x, y = X.copy(), Y.copy()
    kept, fresh = model(), model()
    for m in (kept, fresh):
        train(m, (x, y))
        change(m)
    TrainingState.of(fresh).release_data()
    TrainingState.of(fresh).kept.split = None
    train(kept, (x, y))
    train(fresh, (x, y))
    return kept, fresh


def test_a_value_set_between_calls_is_trained_from_though_checked_after_the_dispatch():
    # verbose=False: the repeated set-up's walk of the model runs while the first call
    # does; the call on the stale set-up is dropped, nothing of it written back
    def by_update(m):
        state = nnx.state(m, nnx.Param)
        nnx.update(m, jax.tree.map(lambda a: a + 0.25, state))

    def by_assignment(m):
        with warnings.catch_warnings():  # flax >= 0.12 prefers m.kernel[...] = ...
            warnings.simplefilter("ignore", DeprecationWarning)
            m.kernel.value = m.kernel.value * 0.5

    def by_a_new_layer(m):
        m.bias = nnx.Param(jax.numpy.full((2,), -0.5))

    for change in (by_update, by_assignment, by_a_new_layer):
        kept, fresh = _trained_twice(change)
        assert same(kept, fresh), change.__name__
        assert TrainingState.of(kept).steps_done == 12, change.__name__  # 2 calls of 6 steps


def test_a_new_learning_rate_or_a_lost_optimizer_state_is_seen_after_the_dispatch():
    m, other = model(), model()
    x, y = X.copy(), Y.copy()
    for n in (m, other):
        train(n, (x, y))
    fit(m, optax.adam(5e-2), (x, y), epochs=1, batch_size=16, verbose=False)
    TrainingState.of(other).release_data()
    fit(other, optax.adam(5e-2), (x, y), epochs=1, batch_size=16, verbose=False)
    assert same(m, other)  # trained at the new rate, as a call set up afresh
    for n in (m, other):  # the kept optimizer state's arrays deleted (donated, say)
        jax.tree.map(lambda a: a.delete(), TrainingState.of(n).opt_state)
        train(n, (x, y), metrics=["accuracy"] if n is other else None)  # other: set up afresh
    assert same(m, other)  # both from a fresh optimizer state
    assert TrainingState.of(m).steps_done == 18


def test_a_repeated_call_walks_the_model_after_its_first_dispatch(monkeypatch):
    import tpukit.train._kept_split as kept_split
    import tpukit.train._steps as steps

    m = model()
    x, y = X.copy(), Y.copy()
    train(m, (x, y))
    order = []
    walk, call = kept_split.walk, steps.Step.__call__
    monkeypatch.setattr(kept_split, "walk", lambda *a: order.append("walk") or walk(*a))
    monkeypatch.setattr(steps.Step, "__call__", lambda *a: order.append("dispatch") or call(*a))
    train(m, (x, y))
    assert order[:2] == ["dispatch", "walk"], order
    order.clear()
    train(m, (x, y), verbose=True)  # a progress line: checked before anything shows
    assert order[:2] == ["walk", "dispatch"], order


def test_repeated_calls_pass_the_state_on_flat_and_build_its_trees_only_when_read(monkeypatch):
    # Each dispatch on trees flattens NNX's and optax's nodes and builds the result's
    # again (some 200 µs of a short call); the state goes from call to call, into the
    # model's Variables and on to the next call as leaves, a tree only where one is read.
    m = nnx.Sequential(nnx.Linear(8, 8, rngs=nnx.Rngs(0)), nnx.Linear(8, 2, rngs=nnx.Rngs(1)))
    twin = nnx.clone(m)
    x, y = X.copy(), Y.copy()
    train(m, (x, y), steps_per_execution=2)
    built, init = [], nnx.State.__init__
    monkeypatch.setattr(
        nnx.State, "__init__", lambda self, *a, **k: built.append(1) or init(self, *a, **k)
    )
    train(m, (x, y), epochs=2, steps_per_execution=2)  # the last call's set-up, 6 calls
    assert not built, len(built)  # no State made: no tree of the state, in or out
    opt_state = TrainingState.of(m).opt_state  # read: built now, once
    assert built and TrainingState.of(m).opt_state is opt_state
    monkeypatch.setattr(nnx.State, "__init__", init)
    # the same model and optimizer state as calls set up afresh, from the trees read
    for epochs in (1, 2):
        TrainingState.of(twin).release_data()  # no kept set-up: the call starts from trees
        train(twin, (x, y), epochs=epochs, steps_per_execution=2)
    assert same(m, twin)
    twin_state = jax.tree.leaves(TrainingState.of(twin).opt_state)
    assert all(
        np.array_equal(a, b) for a, b in zip(jax.tree.leaves(opt_state), twin_state, strict=True)
    )


def test_the_write_back_checks_flaxs_trace_context_once_not_once_per_variable(monkeypatch):
    # flax's set_raw_value(..., _unsafe_bypass_check=True) still checks, through its
    # __setattr__: some 10 µs per Variable of a short call's host time, after its figures
    import pytest

    if not hasattr(nnx.Variable, "set_raw_value"):
        pytest.skip("flax < 0.12 sets raw_value without a check")
    check = nnx.Variable._check_can_update
    x, y = X.copy(), Y.copy()
    counts = []
    for layers in (1, 3):  # 2 Variables, then 6
        m = nnx.Sequential(*[nnx.Linear(8, 8, rngs=nnx.Rngs(i)) for i in range(layers)])
        train(m, (x, y))
        before, checks = params(m), []
        monkeypatch.setattr(
            nnx.Variable,
            "_check_can_update",
            lambda self, checks=checks: checks.append(1) or check(self),
        )
        train(m, (x, y))  # the last call's set-up: written straight into the Variables
        monkeypatch.setattr(nnx.Variable, "_check_can_update", check)
        assert not all(np.array_equal(a, b) for a, b in zip(before, params(m), strict=True))
        counts.append(len(checks))
    assert counts[0] == counts[1], counts  # the first Variable's, not one per Variable
