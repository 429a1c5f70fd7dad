"""Training never keeps, saves or resumes into a wrong state, and says early what cannot work.

Each case here failed before. A finite loss and finite gradients can still give a
non-finite update (Adam with ``eps=0`` on a zero gradient, SGD with an infinite
rate) or optimizer state (Adam's ``nu`` overflowing), which the guard used to
apply, checkpoint, and resume into; checkpoints were restored without checking
their bytes or values, or the program that wrote them; a new optimizer object
restarted the shuffle order and recompiled the step; a ``checkpoint_dir`` that
could not hold checkpoints failed after the first epoch.
"""

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

import tpukit
from tests.train.test_fit import IDS_DATA, MLP, X, Y, assert_same, batch_order, loss_showing_ids
from tests.train.test_fit import params_of as param_tree
from tpukit.train import CheckpointError, NonFiniteLossError, Trainer, fit
from tpukit.train._checkpoint import RunCheckpoints, flatten
from tpukit.train._steps import resident_execution, split_model


@pytest.fixture(scope="module")
def data():
    x, y = tpukit.datasets.mnist("train", source="sample")
    return x[:512], y[:512]


def params_of(model):
    return [np.asarray(a) for a in jax.tree.leaves(nnx.state(model, nnx.Param))]


def finite(tree):
    return all(np.isfinite(np.asarray(a)).all() for a in jax.tree.leaves(tree))


def newest_checkpoint(directory, model, optimizer):
    """``(params, record)`` of the newest checkpoint in ``directory`` that verifies."""
    _, params, rest = split_model(model)
    names, leaves, treedef = flatten(
        {"params": params, "state": rest, "optimizer": optimizer.init(params)}
    )
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    restored, record = RunCheckpoints(directory, None).load(names, leaves, [device] * len(leaves))
    params = jax.tree.map(
        np.asarray, nnx.to_pure_dict(jax.tree.unflatten(treedef, restored)["params"])
    )
    return params, record


def finished_steps(directory):
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


KW = {"batch_size": 64, "verbose": False}


# ----------------------------------------------------------------- not applied
@pytest.mark.parametrize(
    "bad, sane",
    [(optax.adam(1e-3, eps=0.0), optax.adam(1e-3)), (optax.sgd(float("inf")), optax.sgd(0.1))],
    ids=["adam-eps0", "sgd-inf"],
)
def test_a_non_finite_update_is_not_applied_saved_or_resumed_into(tmp_path, data, bad, sane):
    model = tpukit.zoo.create("mlp", seed=0)
    before = params_of(model)
    with pytest.raises(tpukit.NonFiniteLossError, match="the update of layers/0") as info:
        tpukit.fit(
            model, bad, data, epochs=2, batch_size=128, checkpoint_dir=tmp_path, verbose=False
        )
    assert "epoch 1 of 2, step 1" in str(info.value) and "was not applied" in str(info.value)
    assert info.value.quantity.startswith("new value of layers/")
    after = params_of(model)
    assert all(np.array_equal(a, b) for a, b in zip(before, after))  # step 1 never applied
    saved, record = newest_checkpoint(tmp_path, model, bad)  # ... nor saved
    assert record["global_step"] == 0
    assert_same(saved, param_tree(model))
    # the newest checkpoint holds those finite values: a sane optimizer trains on from it
    resumed = tpukit.zoo.create("mlp", seed=3)
    history = tpukit.fit(
        resumed,
        sane,
        data,
        epochs=2,
        batch_size=128,
        checkpoint_dir=tmp_path,
        resume=True,
        verbose=False,
    )
    assert history.stopped is None and np.isfinite(history["loss"]).all()
    assert history["loss"][-1] < history["loss"][0]


def test_a_non_finite_optimizer_state_is_not_kept():
    # A loss scaled by 1e25 has finite gradients, but Adam's nu = g**2 overflows; the
    # update, g / sqrt(inf), is 0, so the parameters alone would look fine.
    def huge(outputs, labels):
        return 1e25 * tpukit.train.cross_entropy(outputs, labels)

    model = MLP(nnx.Rngs(0))
    before = param_tree(model)
    with pytest.raises(NonFiniteLossError, match="the optimizer state 0/nu/") as info:
        fit(model, optax.adam(1e-3), (X, Y), epochs=1, loss=huge, **KW)
    assert info.value.quantity.startswith("optimizer state 0/nu/")
    assert (info.value.epoch, info.value.step) == (1, 1)
    assert_same(param_tree(model), before)
    assert Trainer(model, optax.adam(1e-3)).state.opt_state is not None
    assert finite(Trainer(model, optax.adam(1e-3)).state.opt_state)  # the kept state: finite


def test_the_optimizer_state_is_checked_too():
    from tpukit.train._steps import finite_names

    params = {"w": np.zeros(2, np.float32)}
    state = optax.adam(1e-3).init(params)
    names = finite_names(params, state)
    assert names[:3] == ("loss", "gradient of w", "new value of w")
    assert "optimizer state 0/mu/w" in names and "optimizer state 0/nu/w" in names


# ------------------------------------------------------- checkpoints stay good
def poisoned(at_step):
    """SGD(0.1) whose update is NaN at optimizer step ``at_step`` (1-based)."""
    return optax.scale_by_schedule(lambda count: jnp.where(count == at_step - 1, jnp.nan, -0.1))


def test_checkpoints_before_a_stop_are_kept_and_hold_the_last_good_state(tmp_path):
    kw = {**KW, "epochs": 2, "steps_per_execution": 1, "checkpoint_every": 1, "shuffle": False}
    model = MLP(nnx.Rngs(4))
    with pytest.raises(NonFiniteLossError, match=r"the update of .* step 6 of 8") as info:
        fit(model, poisoned(6), (X, Y), checkpoint_dir=tmp_path, **kw)
    assert info.value.quantity.startswith("new value of") and "(step 5)" in str(info.value)
    assert finished_steps(tmp_path) == [3, 4, 5]  # the newest three, all before the stop
    saved, record = newest_checkpoint(tmp_path, model, poisoned(6))
    assert record["global_step"] == 5 and finite(saved)
    assert_same(saved, param_tree(model))

    for _ in range(2):  # resuming into the same bad step stops there again, and saves nothing
        again = MLP(nnx.Rngs(9))
        with pytest.raises(NonFiniteLossError, match=r"global step 6\b"):
            fit(again, poisoned(6), (X, Y), checkpoint_dir=tmp_path, resume=True, **kw)
        assert_same(param_tree(again), saved)
        assert finished_steps(tmp_path) == [3, 4, 5]

    fixed = MLP(nnx.Rngs(9))  # after a NaN stop, resume=True accepts a changed optimizer
    history = fit(fixed, poisoned(10**6), (X, Y), checkpoint_dir=tmp_path, resume=True, **kw)
    assert history.stopped is None and finite(param_tree(fixed))
    assert finished_steps(tmp_path) == [14, 15, 16]


# --------------------------------------------------------- integrity on restore
def flip_bytes(path, offset=None):
    data = bytearray(path.read_bytes())
    offset = len(data) // 2 if offset is None else offset
    for i in range(offset, offset + 4):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def largest_file(folder):
    return max((p for p in folder.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


def test_flipped_bytes_in_the_newest_checkpoint_are_found_and_latest_good_falls_back(tmp_path):
    kw = {**KW, "epochs": 3}
    full = MLP(nnx.Rngs(1))
    fit(full, optax.adam(1e-2), (X, Y), **kw)
    fit(MLP(nnx.Rngs(1)), optax.adam(1e-2), (X, Y), checkpoint_dir=tmp_path, **kw)
    assert finished_steps(tmp_path) == [8, 16, 24]
    flip_bytes(largest_file(tmp_path / "24" / "state"))  # orbax alone restores this silently

    with pytest.raises(CheckpointError, match="step 24 .*damaged") as info:
        fit(MLP(nnx.Rngs(2)), optax.adam(1e-2), (X, Y), checkpoint_dir=tmp_path, resume=True, **kw)
    message = str(info.value)
    assert "differs from what was written" in message and "is step 16" in message
    assert 'resume="latest_good"' in message and "\n" not in message
    assert finished_steps(tmp_path) == [8, 16, 24]  # nothing moved before the user says so

    resumed = MLP(nnx.Rngs(2))
    history = fit(
        resumed, optax.adam(1e-2), (X, Y), checkpoint_dir=tmp_path, resume="latest_good", **kw
    )
    assert [e["epoch"] for e in history.epochs] == [1, 2, 3]  # epoch 3 trained again
    assert_same(param_tree(resumed), param_tree(full))
    assert (tmp_path / "24.damaged").is_dir() and finished_steps(tmp_path) == [8, 16, 24]


def test_values_that_differ_from_their_checksums_or_are_not_finite_are_refused(
    tmp_path, monkeypatch
):
    kw = {**KW, "epochs": 2, "checkpoint_dir": tmp_path / "run"}
    fit(MLP(nnx.Rngs(1)), optax.adam(1e-2), (X, Y), **kw)
    (tmp_path / "run" / "16" / "tpukit_files.json").unlink(
        missing_ok=True
    )  # no digests: checksums decide
    meta = tmp_path / "run" / "16" / "meta" / "metadata"
    record = json.loads(meta.read_text())
    record["checksums"][-1] += 1
    meta.write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match=f"{record['names'][-1]} does not match the checksum"):
        fit(MLP(nnx.Rngs(2)), optax.adam(1e-2), (X, Y), resume=True, **kw)

    broken = MLP(nnx.Rngs(1))  # NaN parameters: tpukit never writes them ...
    broken.l1.bias[...] = jnp.full((32,), jnp.nan)
    kw = {**KW, "epochs": 1, "stop_on_nan": False, "checkpoint_dir": tmp_path / "nan"}
    with pytest.warns(UserWarning, match="was not written: the model holds NaN"):
        fit(broken, optax.adam(1e-2), (X, Y), **kw)
    assert finished_steps(tmp_path / "nan") == []
    # ... and when a checkpoint holds them anyway (an older tpukit wrote it), it is refused
    from tpukit.train import _checkpoint

    summary = _checkpoint.array_summary
    monkeypatch.setattr(
        _checkpoint, "array_summary", lambda leaves: (summary(leaves)[0], [True] * len(leaves))
    )
    fit(broken, optax.adam(1e-2), (X, Y), **kw)
    monkeypatch.undo()
    with pytest.raises(CheckpointError, match="holds NaN or infinite values"):
        fit(MLP(nnx.Rngs(1)), optax.adam(1e-2), (X, Y), **{**kw, "resume": True})


CORRUPTED_RESUME = """
import pathlib, sys
import numpy as np, optax
from flax import nnx
import tpukit

class Net(nnx.Module):  # a kernel of 2 KB: stored apart from orbax's index
    def __init__(self, rngs):
        self.l1 = nnx.Linear(16, 32, rngs=rngs)
        self.l2 = nnx.Linear(32, 4, rngs=rngs)
    def __call__(self, x):
        return self.l2(nnx.relu(self.l1(x)))

x = np.random.default_rng(0).normal(size=(256, 16)).astype(np.float32)
y = (x[:, :4]).argmax(-1).astype(np.int32)
for name, damage in (("flipped", "flip"), ("deleted", "delete")):
    run = pathlib.Path(sys.argv[1]) / name
    kw = dict(epochs=2, batch_size=64, checkpoint_dir=run, verbose=False)
    tpukit.fit(Net(nnx.Rngs(0)), optax.adam(1e-2), (x, y), **kw)
    newest = run / "8"
    (newest / "tpukit_files.json").unlink(missing_ok=True)  # as if written before digests existed
    if damage == "flip":
        for data in (newest / "state" / "d").iterdir():
            raw = bytearray(data.read_bytes()); raw[:4] = bytes(b ^ 0xFF for b in raw[:4])
            data.write_bytes(bytes(raw))
    else:
        for data in (newest / "state" / "d").iterdir():
            data.unlink()
    try:
        tpukit.fit(Net(nnx.Rngs(1)), optax.adam(1e-2), (x, y), resume=True, **kw)
    except tpukit.CheckpointError as e:
        print("REFUSED:", e)
"""


def test_a_damaged_checkpoint_is_one_line_without_orbax_noise(tmp_path):
    script = tmp_path / "resume_damaged.py"
    script.write_text(textwrap.dedent(CORRUPTED_RESUME))
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    for noise in ("Event loop is closed", "Exception ignored", "<bound method", "Traceback"):
        assert noise not in out, out[-3000:]
    refused = [line for line in done.stdout.splitlines() if line.startswith("REFUSED:")]
    assert len(refused) == 2, out[-3000:]
    for line in refused:
        assert "step 8 " in line and "could not be read" in line and "is step 4" in line, line


# ------------------------------------------------------------- same program
def zoo_mlp(**config):
    return tpukit.zoo.create("mlp", widths=(16, 32, 4), seed=0, **config)


def test_resuming_a_different_program_is_refused_with_what_differs_unless_forced(tmp_path):
    fit(zoo_mlp(), optax.adam(1e-3), (X, Y), epochs=1, checkpoint_dir=tmp_path, **KW)

    def refused(model, optimizer, match, **kw):
        with pytest.raises(CheckpointError, match=match) as info:
            fit(
                model, optimizer, (X, Y), epochs=2, checkpoint_dir=tmp_path, resume=True, **KW, **kw
            )
        assert "different training program" in str(info.value)
        assert 'resume="force"' in str(info.value)

    refused(
        zoo_mlp(activation="gelu"),
        optax.adam(1e-3),
        "MLP.activation: 'relu' in the checkpoint, 'gelu' in this call",
    )
    refused(
        zoo_mlp(),
        optax.adamw(1e-3),
        r"optimizer: its update differs \(constant 0.0001 only in this call's",
    )
    refused(
        zoo_mlp(),
        optax.adam(1e-2),
        "constant 0.001 only in the checkpoint's; constant 0.01 only in this call's",
    )
    refused(
        zoo_mlp(),
        optax.adam(1e-3),
        "loss: softmax cross-entropy",
        loss=lambda o, y: tpukit.train.cross_entropy(o, y) * 2,
    )
    assert finished_steps(tmp_path) == [8]

    forced = zoo_mlp()
    history = fit(
        forced, optax.adam(1e-2), (X, Y), epochs=2, checkpoint_dir=tmp_path, resume="force", **KW
    )
    assert len(history.epochs) == 2 and finished_steps(tmp_path) == [8, 16]


def test_a_model_whose_code_changed_is_refused():
    class Net(nnx.Module):
        def __init__(self, rngs):
            self.l1 = nnx.Linear(16, 4, rngs=rngs)

        def __call__(self, x):
            return self.l1(x)

    written_by = Net

    class Net(nnx.Module):  # noqa: F811 - the same class, edited in the notebook
        def __init__(self, rngs):
            self.l1 = nnx.Linear(16, 4, rngs=rngs)

        def __call__(self, x):
            return self.l1(jnp.tanh(x))

    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        fit(
            written_by(nnx.Rngs(0)), optax.adam(1e-3), (X, Y), epochs=1, checkpoint_dir=folder, **KW
        )
        with pytest.raises(CheckpointError, match="what the model and loss compute differs"):
            fit(
                Net(nnx.Rngs(0)),
                optax.adam(1e-3),
                (X, Y),
                epochs=2,
                checkpoint_dir=folder,
                resume=True,
                **KW,
            )


# ---------------------------------------------------- fit continues, no recompile
def test_a_new_optimizer_object_continues_the_epochs_and_reuses_the_compiled_step():
    data = IDS_DATA
    kw = {**KW, "loss": loss_showing_ids, "metrics": [batch_order], "steps_per_execution": 1}

    def batches(history, epoch):
        return [r["batch_order"] for r in history.executions if r["epoch"] == epoch]

    twice = MLP(nnx.Rngs(13))
    first = fit(twice, optax.adam(1e-2), data, epochs=1, **kw)
    built = resident_execution.cache_info().misses
    second = fit(twice, optax.adam(1e-2), data, epochs=1, **kw)  # a new, equal optimizer
    assert resident_execution.cache_info().misses == built  # the compiled step was reused
    once = MLP(nnx.Rngs(13))
    both = fit(once, optax.adam(1e-2), data, epochs=2, **kw)
    assert batches(first, 1) + batches(second, 1) == batches(both, 1) + batches(both, 2)
    assert [r["global_step"] for r in second.executions] == list(range(9, 17))
    assert_same(param_tree(twice), param_tree(once))  # Adam's moments carried over too

    third = fit(twice, optax.sgd(0.1), data, epochs=1, **kw)  # another optimizer: fresh state
    longer = fit(MLP(nnx.Rngs(13)), optax.adam(1e-2), data, epochs=3, **kw)
    assert batches(third, 1) == batches(longer, 3)  # ... but the epoch sequence goes on
    state = Trainer(twice, optax.sgd(0.1)).state
    assert (state.epochs_done, state.steps_done) == (3, 24)


# ------------------------------------------------------------ early and clear
def test_a_checkpoint_dir_that_cannot_hold_checkpoints_is_refused_before_training(tmp_path, data):
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("")
    model = tpukit.zoo.create("mlp", seed=0)
    before = params_of(model)
    for folder in (a_file, a_file / "sub"):
        with pytest.raises(tpukit.CheckpointError, match="checkpoint_dir=None") as info:
            tpukit.fit(
                model,
                optax.adam(1e-3),
                data,
                epochs=1,
                batch_size=128,
                checkpoint_dir=folder,
                verbose=False,
            )
        assert "\n" not in str(info.value)
    assert all(np.array_equal(a, b) for a, b in zip(before, params_of(model)))
    with pytest.raises(tpukit.CheckpointError, match="is a file, not a folder"):
        RunCheckpoints(a_file, None)


def test_every_training_error_is_a_tpukit_error():
    for error in (NonFiniteLossError, CheckpointError):
        assert issubclass(error, tpukit.TpukitError)
    model, opt = MLP(nnx.Rngs(0)), optax.adam(1e-3)
    for bad in ({"batch_size": 0}, {"batch_size": 100}, {"steps_per_execution": 0}):
        with pytest.raises(tpukit.TpukitError):
            fit(model, opt, (X, Y), epochs=1, **{**KW, **bad})
    with pytest.raises(tpukit.TpukitError, match="got unknown option 'epoch'"):
        Trainer(model, opt).fit((X, Y), epoch=1)
    with pytest.raises(tpukit.TpukitError, match="resume must be"):
        fit(model, opt, (X, Y), epochs=1, resume="yes", checkpoint_dir="/tmp/x", **KW)
