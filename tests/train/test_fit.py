"""tpukit.fit / evaluate: training on the device, checked against plain JAX loops."""

import matplotlib

matplotlib.use("Agg")

import logging
import re
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import tpukit
from tests._support.numerics import approx_across_processors, assert_close_across_processors
from tpukit.measure import DevicePeak
from tpukit.train import History, NonFiniteLossError, _collaborators, _progress, evaluate, fit
from tpukit.train._data import epoch_indices, epoch_key
from tpukit.train._steps import resident_execution


class MLP(nnx.Module):
    def __init__(self, rngs, din=16, hidden=32, classes=4, dropout=0.0, batchnorm=False):
        self.l1 = nnx.Linear(din, hidden, rngs=rngs)
        self.bn = nnx.BatchNorm(hidden, rngs=rngs) if batchnorm else None
        self.drop = nnx.Dropout(dropout, rngs=rngs)
        self.l2 = nnx.Linear(hidden, classes, rngs=rngs)

    def __call__(self, x):
        h = jax.nn.relu(self.l1(x))
        if self.bn is not None:
            h = self.bn(h)
        return self.l2(self.drop(h))


def task(n=512, din=16, classes=4, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, din)).astype(np.float32)
    w = rng.normal(size=(din, classes)).astype(np.float32)
    return x, (x @ w).argmax(-1).astype(np.int32)


def params_of(model):
    return jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(model, nnx.Param)))


assert_same = assert_close_across_processors


X, Y = task()
#: the data with each example's id, for tests of the order batches come in
IDS_DATA = {"x": X, "labels": Y, "id": np.arange(len(X), dtype=np.int32)}


def loss_showing_ids(model, batch):
    """Cross-entropy whose "outputs" are the example ids, so a metric can see them."""
    ce = optax.softmax_cross_entropy_with_integer_labels(model(batch["x"]), batch["labels"])
    return ce.mean(), batch["id"]


def batch_order(ids, labels):
    """A metric that fingerprints which examples made the batch."""
    return jnp.mean(ids.astype(jnp.float32) ** 2)


def test_eight_devices_are_used():
    assert jax.device_count() == 8


def test_loss_falls_and_accuracy_rises():
    model = MLP(nnx.Rngs(0))
    before = evaluate(model, (X, Y), batch_size=64)
    history = fit(model, optax.adam(1e-2), (X, Y), epochs=4, batch_size=64, verbose=False)
    after = evaluate(model, (X, Y), batch_size=64)
    assert history["loss"][-1] < history["loss"][0] < before["loss"] + 0.5
    assert after["accuracy"] > 0.85 > before["accuracy"]
    assert len(history.epochs) == 4 and len(history.executions) == 4


def test_matches_a_plain_scan_loop():
    """fit over 8 devices == a hand-written single-device lax.scan with the same batches."""
    batch, epochs, seed, opt = 64, 2, 3, optax.adam(1e-2)
    reference = MLP(nnx.Rngs(1))
    graphdef, params, rest = nnx.split(reference, nnx.Param, ...)
    steps = len(X) // batch

    def loss_fn(p, x, y):
        logits = nnx.merge(graphdef, p, rest)(x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    @jax.jit
    def epoch(p, o, idx):
        def body(carry, rows):
            p, o = carry
            g = jax.grad(loss_fn)(p, jnp.asarray(X)[rows], jnp.asarray(Y)[rows])
            u, o = opt.update(g, o, p)
            return (optax.apply_updates(p, u), o), None

        return jax.lax.scan(body, (p, o), idx)[0]

    o = opt.init(params)
    for e in range(epochs):
        params, o = epoch(params, o, epoch_indices(epoch_key(seed, e), len(X), steps, batch, True))

    model = MLP(nnx.Rngs(1))
    fit(model, opt, (X, Y), epochs=epochs, batch_size=batch, seed=seed, verbose=False)
    assert_same(params_of(model), jax.tree.map(np.asarray, nnx.to_pure_dict(params)))


def test_second_fit_continues_like_one_longer_fit():
    opt = optax.adam(1e-2)
    once = MLP(nnx.Rngs(2))
    fit(once, opt, (X, Y), epochs=2, batch_size=64, verbose=False)
    twice = MLP(nnx.Rngs(2))
    fit(twice, opt, (X, Y), epochs=1, batch_size=64, verbose=False)
    fit(twice, opt, (X, Y), epochs=1, batch_size=64, verbose=False)
    assert_same(params_of(twice), params_of(once))


def test_steps_per_execution_does_not_change_the_result():
    a, b = MLP(nnx.Rngs(4)), MLP(nnx.Rngs(4))
    ha = fit(a, optax.sgd(0.1), (X, Y), epochs=1, batch_size=64, verbose=False)
    hb = fit(
        b, optax.sgd(0.1), (X, Y), epochs=1, batch_size=64, steps_per_execution=3, verbose=False
    )
    assert_same(params_of(a), params_of(b))
    assert [r["step"] for r in hb.executions] == [3, 6, 8]
    assert ha["loss"][0] == approx_across_processors(hb["loss"][0])


def test_streamed_batches_match_in_memory_data():
    batches = [(X[i : i + 64], Y[i : i + 64]) for i in range(0, len(X), 64)]
    a, b = MLP(nnx.Rngs(5)), MLP(nnx.Rngs(5))
    fit(a, optax.adam(1e-2), (X, Y), epochs=2, batch_size=64, shuffle=False, verbose=False)
    h = fit(b, optax.adam(1e-2), batches, epochs=2, steps_per_execution=3, verbose=False)
    assert_same(params_of(a), params_of(b))
    assert h.epochs[0]["steps"] == 8
    c = MLP(nnx.Rngs(5))
    with pytest.raises(ValueError, match="one-shot iterator"):
        fit(c, optax.adam(1e-2), iter(batches), epochs=2, steps_per_execution=3, verbose=False)
    fit(c, optax.adam(1e-2), iter(batches), epochs=1, steps_per_execution=4, verbose=False)


def test_batchnorm_and_dropout_train_and_eval_modes():
    model = MLP(nnx.Rngs(0, dropout=7), dropout=0.3, batchnorm=True)
    before_mean = np.asarray(model.bn.mean[...])
    count = int(model.drop.rngs.count[...])
    fit(model, optax.adam(1e-2), (X, Y), epochs=1, batch_size=64, verbose=False)
    assert not np.allclose(model.bn.mean[...], before_mean)  # batch stats were updated
    assert int(model.drop.rngs.count[...]) == count + 8  # one dropout draw per step
    first = evaluate(model, (X, Y), batch_size=64)
    assert evaluate(model, (X, Y), batch_size=64) == first  # eval mode: deterministic
    assert int(model.drop.rngs.count[...]) == count + 8  # and state unchanged
    assert model.drop.deterministic is False  # user's mode untouched


def test_evaluate_counts_every_example_once():
    model = MLP(nnx.Rngs(6))
    n = 300  # 300 = 4 * 64 + 44: a remainder batch
    logits = model(jnp.asarray(X[:n]))
    expected_loss = float(optax.softmax_cross_entropy_with_integer_labels(logits, Y[:n]).mean())
    expected_acc = float((logits.argmax(-1) == Y[:n]).mean())
    top2 = float((jnp.argsort(-logits, axis=-1)[:, :2] == Y[:n, None]).any(-1).mean())
    got = evaluate(model, (X[:n], Y[:n]), batch_size=64, metrics=["accuracy", "top2"])
    assert got["loss"] == approx_across_processors(expected_loss)
    assert got["accuracy"] == pytest.approx(expected_acc)
    assert got["top2_accuracy"] == pytest.approx(top2)


def test_evaluate_over_split_data_keeps_no_copy_of_the_dataset_on_a_device():
    """Each device picks the batch rows it holds: a slice across the split would
    all-gather the whole dataset onto every device first (a temporary of its size)."""
    from tpukit.train._options import TrainerOptions
    from tpukit.train._setup import evaluation
    from tpukit.train._steps import split_model

    model = MLP(nnx.Rngs(6))
    n = 16384
    x = np.random.default_rng(0).random((n, X.shape[1]), np.float32)
    y = np.zeros(n, np.int32)
    plan = TrainerOptions().plan
    assert plan.batch_shards == len(jax.devices()) == 8
    graphdef, params, rest = split_model(model)
    evaluator = evaluation(plan, (x, y), 512, graphdef, params, rest, name="data", prefix="")
    params, rest, _ = plan.put_state(params, rest)
    program = evaluator.program(evaluator.batch_size)
    compiled = program.lower(params, rest, evaluator.source.arrays).compile()
    dataset = x.nbytes
    assert compiled.memory_analysis().temp_size_in_bytes < dataset / 2
    assert f"f32[{n},{X.shape[1]}]" not in compiled.as_text()


def test_dict_data_with_a_model_loss():
    def loss(model, batch):
        logits = model(batch["image"])
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, batch["labels"]).mean()
        return ce, logits

    model = MLP(nnx.Rngs(7))
    data = {"image": X, "labels": Y}
    history = fit(
        model,
        optax.adam(1e-2),
        data,
        epochs=2,
        batch_size=64,
        loss=loss,
        metrics=["accuracy"],
        eval_data=data,
        verbose=False,
    )
    assert history["val_accuracy"][-1] > 0.7
    with pytest.raises(ValueError, match="cannot tell inputs from labels"):
        fit(model, optax.adam(1e-2), data, epochs=1, batch_size=64, verbose=False)


def test_history_writes_epoch_seconds_in_time_units():
    """4.035 next to 0.007463 reads as two numbers of one scale: written in units instead."""
    history = History()
    history.add_epoch({"epoch": 1, "loss": 0.31234, "seconds": 4.0351})
    history.add_epoch({"epoch": 2, "loss": 0.1, "seconds": 0.007463})
    rows = repr(history).splitlines()[2:]
    assert rows[0].split()[-2:] == ["4.04", "s"] and rows[1].split()[-2:] == ["7.46", "ms"]
    assert "0.3123" in rows[0]  # other figures keep their .4g
    assert "7.46 ms" in history._repr_html_()


def test_eval_data_and_history_outputs():
    model = MLP(nnx.Rngs(8))
    history = fit(
        model,
        optax.adam(1e-2),
        (X, Y),
        epochs=2,
        batch_size=64,
        eval_data=(X[:100], Y[:100]),
        steps_per_execution=4,
        verbose=False,
    )
    assert set(history.epochs[0]) >= {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert len(history.executions) == 4
    fig = history.plot()
    assert isinstance(fig, matplotlib.figure.Figure) and len(fig.axes) == 2
    assert "val_accuracy" in repr(history) and "<table" in history._repr_html_()
    assert isinstance(History.from_dict(history.to_dict()), History)


def test_progress_is_one_line_per_epoch_on_stdout_with_one_speed_figure(capsys):
    fit(MLP(nnx.Rngs(9)), optax.adam(1e-2), (X, Y), epochs=2, batch_size=64, steps_per_execution=2)
    captured = capsys.readouterr()
    assert captured.err == ""
    lines = [line for line in captured.out.splitlines() if line.startswith("epoch")]
    assert [line.split()[1] for line in lines] == ["1/2", "2/2"]
    for line in lines:
        assert "8/8" in line and "loss" in line and "accuracy" in line
        assert line.count("steps/s") == 1 and line.count("examples/s") == 1
        steps, examples = re.search(r"([\d,]+) steps/s, ([\d,]+) examples/s", line).groups()
        # Both are rounded to whole numbers: on a busy machine (16 steps/s) the steps'
        # rounding alone is 3%, so the examples lie within 64 x (steps +- 0.5).
        steps, examples = int(steps.replace(",", "")), int(examples.replace(",", ""))
        assert 64 * (steps - 0.5) * 0.99 <= examples <= 64 * (steps + 0.5) * 1.01, line
    assert "MFU" not in captured.out  # no published peak for a CPU: no MFU


def test_progress_in_a_notebook_is_an_html_line_per_epoch_updated_in_place(monkeypatch, capsys):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    monkeypatch.setattr(shell, "kernel", object(), raising=False)  # as in a Jupyter kernel
    monkeypatch.setattr(_progress, "_widgets_work", lambda: False)
    published = []

    def publish(data, metadata=None, transient=None, update=False, **_):
        published.append((data, (transient or {}).get("display_id"), update))

    monkeypatch.setattr(shell.display_pub, "publish", publish)
    fit(MLP(nnx.Rngs(9)), optax.adam(1e-2), (X, Y), epochs=2, batch_size=64, steps_per_execution=2)
    assert capsys.readouterr().err == ""
    shown = [display_id for _, display_id, update in published if not update]
    assert len(shown) == 2 and None not in shown and len(set(shown)) == 2  # one line per epoch
    assert all(display_id in shown for _, display_id, update in published if update)
    for epoch, display_id in enumerate(shown, start=1):
        last = [data for data, i, _ in published if i == display_id][-1]
        assert f"epoch {epoch}/2" in last["text/html"] and "8/8" in last["text/plain"]
        assert last["text/html"].count("steps/s") == 1 and "examples/s" in last["text/html"]


def test_progress_shows_mfu_from_one_steps_flops_when_the_peak_is_known(monkeypatch, capsys):
    peak = DevicePeak("test chip", bf16_tflops=1e-6, hbm_gbps=1.0)  # 1 MFLOP/s
    monkeypatch.setattr(_collaborators, "peak_for", lambda kind: peak)
    counted = []
    monkeypatch.setattr(_progress.Speed, "describe", _recording(_progress.Speed.describe, counted))
    fit(MLP(nnx.Rngs(9)), optax.adam(1e-2), (X, Y), epochs=1, batch_size=64, steps_per_execution=2)
    # forward x@W1, h@W2; backward dW2, dh, dW1: 2 x multiply-adds, one step of 64 examples
    assert counted[-1].flops_per_step == 2 * 64 * (2 * 16 * 32 + 3 * 32 * 4)
    line = next(line for line in capsys.readouterr().out.splitlines() if "MFU" in line)
    steps = float(re.search(r"([\d,]+) steps/s", line).group(1).replace(",", ""))
    shown = re.search(r"MFU ([\d,.]+)%", line).group(1).replace(",", "")
    mfu = float(shown) / 100
    flops = 2 * 64 * (2 * 16 * 32 + 3 * 32 * 4)
    # steps/s is shown rounded to a whole number and MFU to its last digit, so the MFU
    # lies between what steps -+ 0.5 give, widened by half its last digit.
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    digit = 0.5 * 10**-decimals / 100
    low, high = ((steps + d) * flops / (1e6 * jax.device_count()) for d in (-0.5, 0.5))
    assert low * 0.99 - digit <= mfu <= high * 1.01 + digit, line


def test_restoring_a_checkpoint_quietly_prints_nothing(tmp_path, capsys, caplog):
    ckpt = tmp_path / "ckpt"
    fit(MLP(nnx.Rngs(1)), optax.adam(1e-2), (X, Y), epochs=1, batch_size=64, checkpoint_dir=ckpt)
    capsys.readouterr()
    absl_level = logging.getLogger("absl").level
    with caplog.at_level(logging.INFO):  # orbax's absl lines would land here
        fit(
            MLP(nnx.Rngs(2)),
            optax.adam(1e-2),
            (X, Y),
            epochs=1,
            batch_size=64,
            checkpoint_dir=ckpt,
            resume=True,
            verbose=False,
        )
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert capsys.readouterr() == ("", "")
    assert logging.getLogger("absl").level == absl_level  # silenced only during tpukit's calls


def _recording(method, calls):
    def record(self, *args, **kwargs):
        calls.append(self)
        return method(self, *args, **kwargs)

    return record


def test_nan_loss_stops_and_keeps_last_good_parameters():
    x = X.copy()
    x[2 * 64 + 5] = np.nan  # poisons step 3 of epoch 1 (no shuffle)
    model = MLP(nnx.Rngs(10))
    reference = MLP(nnx.Rngs(10))
    fit(
        reference,
        optax.adam(1e-2),
        (X[:128], Y[:128]),
        epochs=1,
        batch_size=64,
        shuffle=False,
        verbose=False,
    )
    with pytest.raises(
        NonFiniteLossError,
        match=r"the loss became NaN or infinite at epoch 1 of 2, step 3 of 8 "
        r"\(global step 3, execution 1\)",
    ) as err:
        fit(
            model,
            optax.adam(1e-2),
            (x, Y),
            epochs=2,
            batch_size=64,
            shuffle=False,
            steps_per_execution=4,
            verbose=False,
        )
    assert err.value.step == 3 and err.value.epoch == 1 and err.value.execution == 1
    assert err.value.quantity == "loss"
    assert err.value.history.stopped
    assert_same(params_of(model), params_of(reference))
    assert all(np.isfinite(v).all() for v in jax.tree.leaves(params_of(model)))


class Gated(nnx.Module):
    """The test MLP and one extra parameter, ``gate``, that the poisoned loss can break."""

    def __init__(self, rngs):
        self.mlp = MLP(rngs)
        self.gate = nnx.Param(jnp.ones(()))


def poisoned_loss(model, batch):
    """Cross-entropy, except in a batch with a marked row: marker 1 makes the loss NaN
    (gradients stay finite); marker 2 takes sqrt at 0 on the ``gate`` path, so the loss
    stays finite and only the gradient of ``gate`` is infinite."""
    logits = model.mlp(batch["x"])
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, batch["labels"]).mean()
    marker = batch["marker"].max()
    gate = model.gate[...]
    root = jnp.sqrt(gate - jax.lax.stop_gradient(gate) * (marker == 2))
    return jnp.where(marker == 1, jnp.nan, ce + 0.01 * root), logits


@pytest.mark.parametrize(
    "marker, quantity, message",
    [
        (1, "loss", "the loss became NaN or infinite"),
        (2, "gradient of gate", r"the gradient of gate \(the loss was finite\) became NaN"),
    ],
)
def test_non_finite_step_names_the_quantity_and_keeps_the_last_good_state(
    tmp_path, marker, quantity, message
):
    from tpukit.checkpoint import RunCheckpoints, flatten
    from tpukit.train._steps import split_model

    marks = np.zeros(len(X), np.int32)
    marks[6 * 64 + 10] = marker  # step 7 of epoch 1 (no shuffle): execution 2 of 4 steps
    data = {"x": X, "labels": Y, "marker": marks}
    # The origin search (find_nan_origin, on by default) is tested in compilation/test_find_nan.py.
    kw = {"batch_size": 64, "loss": poisoned_loss, "shuffle": False, "verbose": False}
    model = Gated(nnx.Rngs(12))
    with pytest.raises(NonFiniteLossError, match=message) as err:
        fit(
            model,
            optax.adam(1e-2),
            data,
            epochs=2,
            steps_per_execution=4,
            checkpoint_dir=tmp_path,
            checkpoint_every=1,
            find_nan_origin=False,
            **kw,
        )
    e = err.value
    assert (e.epoch, e.step, e.execution, e.quantity) == (1, 7, 2, quantity)
    assert "epoch 1 of 2, step 7 of 8 (global step 7, execution 2)" in str(e)
    if marker == 2:
        assert e.quantities == ("gradient of gate",)  # every other gradient was finite

    reference = Gated(nnx.Rngs(12))  # the six good steps, and nothing else
    fit(reference, optax.adam(1e-2), jax.tree.map(lambda a: a[: 6 * 64], data), epochs=1, **kw)
    assert_same(params_of(model), params_of(reference))

    # The newest checkpoint is that last good state (step 6), written when training stopped.
    ckpt = RunCheckpoints(tmp_path, None)
    assert ckpt.steps() == [4, 6]
    _, params, rest = split_model(model)
    names, leaves, treedef = flatten(
        {"params": params, "state": rest, "optimizer": optax.adam(1e-2).init(params)}
    )
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    restored, record = ckpt.load(names, leaves, [device] * len(leaves))
    saved = jax.tree.unflatten(treedef, restored)["params"]
    assert record["global_step"] == 6
    assert_same(jax.tree.map(np.asarray, nnx.to_pure_dict(saved)), params_of(reference))


def test_shuffling_differs_per_epoch_and_follows_the_seed():
    data = IDS_DATA

    def run(seed):
        model = MLP(nnx.Rngs(13))
        history = fit(
            model,
            optax.sgd(0.1),
            data,
            epochs=2,
            batch_size=64,
            loss=loss_showing_ids,
            metrics=[batch_order],
            steps_per_execution=1,
            seed=seed,
            verbose=False,
        )
        order = [[r["batch_order"] for r in history.executions if r["epoch"] == e] for e in (1, 2)]
        return order, params_of(model)

    (epoch1, epoch2), params = run(seed=0)
    assert len(epoch1) == len(epoch2) == 8
    assert epoch1 != epoch2  # each epoch has its own order
    assert sorted(epoch1) != sorted(epoch2)  # ... and its own batches, not the same ones moved
    again, same_params = run(seed=0)
    assert again == [epoch1, epoch2]
    jax.tree.map(np.testing.assert_array_equal, same_params, params)  # bit for bit
    other, other_params = run(seed=1)
    assert other[0] != epoch1 and other[1] != epoch2
    assert not np.allclose(other_params["l1"]["kernel"], params["l1"]["kernel"])


def test_bad_inputs_fail_fast_and_leave_the_model_alone():
    model = MLP(nnx.Rngs(11))
    before = params_of(model)
    built = resident_execution.cache_info().misses
    opt = optax.adam(1e-2)

    def fails(match, *args, exc=(ValueError, TypeError), **kw):
        kw = {"epochs": 1, "batch_size": 64, "verbose": False, **kw}
        with pytest.raises(exc, match=match):
            fit(*args, **kw)

    fails("different numbers of examples", model, opt, (X, Y[:-1]))
    fails("larger than train_data, which has 512", model, opt, (X, Y), batch_size=1024)
    fails(r"8 devices.*multiple of 8, e.g. 96 or 104", model, opt, (X, Y), batch_size=100)
    fails(r"loss\(outputs, labels\)", model, opt, (X, Y), loss=lambda logits: logits.sum())
    fails("failed when called", model, opt, (X, Y), loss=lambda a, b: a @ b)
    fails("should return a scalar", model, opt, (X, Y), loss=lambda a, b: a)
    fails("Flax NNX module", lambda x: x, opt, (X, Y))
    fails(
        "not an nnx.Optimizer|got an nnx.Optimizer",
        model,
        nnx.Optimizer(MLP(nnx.Rngs(0)), opt, wrt=nnx.Param),
        (X, Y),
    )
    fails("integer class labels.*one-hot", model, opt, (X, np.eye(4, dtype=np.float32)[Y]))
    fails(r"labels of shape \(64,\).*reshape", model, opt, (X, Y[:, None]))
    fails(r"labels range over \[1, 4\].*4 outputs.*must lie in \[0, 3\]", model, opt, (X, Y + 1))
    fails(r"labels range over \[-1, 2\].*must lie in \[0, 3\]", model, opt, (X, Y - 1))
    fails(r"eval_data labels range over \[1, 4\]", model, opt, (X, Y), eval_data=(X, Y + 1))
    fails(r"must lie in \[0, 3\]", model, opt, (X, Y + 1), loss=tpukit.train.cross_entropy)
    fails("integer class labels", model, opt, (X, Y.astype(np.float32)))
    ten = np.where(np.arange(len(Y)) == 100, 10, Y)  # one label 10 for a 10-class model
    fails(r"\[0, 10\].*10 outputs.*\[0, 9\]", MLP(nnx.Rngs(0), classes=10), opt, (X, ten))
    fails(r"failed when called.*outputs \(64, 4\)", model, opt, (X, Y), loss=optax.l2_loss)
    fails("input size", model, opt, (X[:, :10], Y))
    fails("steps_per_execution", model, opt, (X, Y), steps_per_execution=0)
    fails("resume=True needs checkpoint_dir", model, opt, (X, Y), resume=True)
    fails("Unknown metric", model, opt, (X, Y), metrics=["f1"])
    assert_same(params_of(model), before)
    assert resident_execution.cache_info().misses == built  # no training step was compiled


@pytest.mark.parametrize(
    "name, config, image",
    [
        ("lenet5", {}, (28, 28, 1)),
        ("allconv_cifar10", {}, (32, 32, 3)),
        ("vgg11", {"small_input": True, "batch_norm": True, "num_classes": 10}, (32, 32, 3)),
        ("resnet18", {"small_input": True, "num_classes": 10}, (32, 32, 3)),
    ],
)
def test_fit_trains_zoo_convnets(name, config, image):
    # Their static attributes (padding, ...) must be hashable for fit's compiled step.
    model = tpukit.zoo.create(name, **config)
    rng = np.random.default_rng(0)
    x = rng.random((16, *image), dtype=np.float32)
    y = np.arange(16) % 10
    history = tpukit.fit(model, optax.sgd(0.01), (x, y), epochs=1, batch_size=8, verbose=False)
    assert np.isfinite(history.epochs[0]["loss"])


class _SlowInputClock:
    """``time`` as the training loop reads it, with each batch drawn from the iterable
    taking ``per_batch`` seconds more: a slow input pipeline without sleeping, so that the
    verdict does not hang on how busy the machine is (a loaded CPU slows the device too)."""

    def __init__(self, per_batch: float):
        self.per_batch = per_batch
        self.delay = 0.0

    def perf_counter(self) -> float:
        return time.perf_counter() + self.delay

    def __getattr__(self, name):
        return getattr(time, name)


def test_a_slow_input_iterable_is_named_as_what_bounds_training(capsys, monkeypatch):
    from tpukit.train import _run

    clock = _SlowInputClock(per_batch=10.0)  # each call's device work: far under 1 s
    monkeypatch.setattr(_run, "time", clock)

    def slow_batches():
        for i in range(0, 512, 64):
            clock.delay += clock.per_batch  # a host-side input pipeline far slower than the step
            yield X[i : i + 64], Y[i : i + 64]

    fit(MLP(nnx.Rngs(0)), optax.adam(1e-2), slow_batches(), epochs=1, steps_per_execution=2)
    assert "waiting on the host for input" in capsys.readouterr().out
    monkeypatch.undo()
    fit(MLP(nnx.Rngs(0)), optax.adam(1e-2), (X, Y), epochs=1, batch_size=64)
    assert "waiting on the host" not in capsys.readouterr().out  # resident data never waits
