"""Training never keeps or saves a non-finite state, and says early what cannot work.

Each case here failed before: a finite loss and finite gradients can still give a
non-finite update (Adam with ``eps=0`` on a zero gradient, SGD with an infinite
rate), which the guard used to apply, checkpoint, and resume into.
"""

import jax
import numpy as np
import optax
import pytest
from flax import nnx

import tpukit
from tpukit.train._checkpoint import RunCheckpoints


@pytest.fixture(scope="module")
def data():
    x, y = tpukit.datasets.mnist("train", source="sample")
    return x[:512], y[:512]


def params_of(model):
    return [np.asarray(a) for a in jax.tree.leaves(nnx.state(model, nnx.Param))]


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
    after = params_of(model)
    assert all(np.array_equal(a, b) for a, b in zip(before, after))  # step 1 never applied
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


def test_the_optimizer_state_is_checked_too():
    from tpukit.train._steps import finite_names

    params = {"w": np.zeros(2, np.float32)}
    state = optax.adam(1e-3).init(params)
    names = finite_names(params, state)
    assert names[:3] == ("loss", "gradient of w", "new value of w")
    assert any(n.startswith("optimizer state") and "mu" in n for n in names)


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
