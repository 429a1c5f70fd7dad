"""tpukit.fit checkpoints: kill and resume, and clear errors for bad checkpoints."""

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import optax
import pytest
from flax import nnx

from tests._support.numerics import approx_across_processors
from tests.train.test_fit import MLP, X, Y, assert_same, params_of
from tpukit.train import CheckpointError, fit


class Killed(Exception):
    pass


def kill_after(n):
    seen = []

    def callback(record):
        seen.append(record)
        if len(seen) == n:
            raise Killed(f"killed after execution {n}")

    return callback


def model():
    # BatchNorm and Dropout: batch stats and the dropout RNG must be restored too.
    return MLP(nnx.Rngs(0, dropout=3), dropout=0.2, batchnorm=True)


KW = {
    "epochs": 2,
    "batch_size": 64,
    "steps_per_execution": 3,
    "checkpoint_every": 1,
    "verbose": False,
}


def assert_resumed_as_uninterrupted(resumed, history, full, expected):
    """A resumed run ends where the uninterrupted one did: the same parameters, batch
    statistics and dropout RNG, and the same losses."""
    assert_same(params_of(resumed), params_of(full))
    assert_same(
        jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(resumed, nnx.BatchStat))),
        jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(full, nnx.BatchStat))),
    )
    assert int(resumed.drop.rngs.count[...]) == int(full.drop.rngs.count[...])
    assert history["loss"] == approx_across_processors(expected["loss"])


def test_killed_run_resumes_to_the_same_parameters(tmp_path):
    full = model()
    expected = fit(full, optax.adam(1e-2), (X, Y), **KW)

    interrupted = model()
    with pytest.raises(Killed):  # killed mid-epoch 1, after 2 of 3 executions
        fit(
            interrupted,
            optax.adam(1e-2),
            (X, Y),
            checkpoint_dir=tmp_path,
            callbacks=[kill_after(2)],
            **KW,
        )

    resumed = MLP(nnx.Rngs(99, dropout=99), dropout=0.2, batchnorm=True)  # a fresh process
    history = fit(resumed, optax.adam(1e-2), (X, Y), checkpoint_dir=tmp_path, resume=True, **KW)
    assert_resumed_as_uninterrupted(resumed, history, full, expected)
    assert [r["step"] for r in history.executions] == [3, 6, 8, 3, 6, 8]


def test_resume_of_a_finished_run_changes_nothing(tmp_path):
    first = model()
    fit(first, optax.adam(1e-2), (X, Y), checkpoint_dir=tmp_path, **KW)
    again = model()
    fit(again, optax.adam(1e-2), (X, Y), checkpoint_dir=tmp_path, resume=True, **KW)
    assert_same(params_of(again), params_of(first))


def test_bad_checkpoints_give_clear_errors(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        fit(model(), optax.adam(1e-2), (X, Y), checkpoint_dir=tmp_path / "none", resume=True, **KW)

    run = tmp_path / "run"
    fit(model(), optax.adam(1e-2), (X, Y), checkpoint_dir=run, **KW)
    saved = sorted(p.name for p in run.iterdir())

    other = MLP(nnx.Rngs(0), hidden=48, dropout=0.2, batchnorm=True)
    with pytest.raises(CheckpointError, match=r"different model.*l1/kernel: checkpoint \(16, 32\)"):
        fit(other, optax.adam(1e-2), (X, Y), checkpoint_dir=run, resume=True, **KW)
    with pytest.raises(CheckpointError, match="different model.*not in this model .params/bn"):
        fit(MLP(nnx.Rngs(0)), optax.adam(1e-2), (X, Y), checkpoint_dir=run, resume=True, **KW)
    with pytest.raises(CheckpointError, match="different optimizer state"):
        fit(model(), optax.sgd(0.1), (X, Y), checkpoint_dir=run, resume=True, **KW)
    with pytest.raises(CheckpointError, match="batch_size=64 .this call: 128"):
        fit(
            model(),
            optax.adam(1e-2),
            (X, Y),
            checkpoint_dir=run,
            resume=True,
            **{**KW, "batch_size": 128},
        )
    with pytest.raises(CheckpointError, match="already holds checkpoints.*resume=True"):
        fit(model(), optax.adam(1e-2), (X, Y), checkpoint_dir=run, **KW)
    assert sorted(p.name for p in run.iterdir()) == saved  # nothing overwritten

    newest = max(int(p) for p in saved if p.isdigit())
    for sub in (run / str(newest) / "state").iterdir():  # a half-written step
        if sub.is_file():
            sub.unlink()
    with pytest.raises(CheckpointError, match=f"step {newest} .* incomplete"):
        fit(model(), optax.adam(1e-2), (X, Y), checkpoint_dir=run, resume=True, **KW)

    unfinished = tmp_path / "unfinished"
    (unfinished / "3.orbax-checkpoint-tmp-123").mkdir(parents=True)
    with pytest.raises(CheckpointError, match="only unfinished"):
        fit(model(), optax.adam(1e-2), (X, Y), checkpoint_dir=unfinished, resume=True, **KW)


def test_no_checkpoint_is_written_for_a_nan_step(tmp_path):
    x = X.copy()
    x[400] = np.nan  # step 7 of epoch 1 (no shuffle), in the 3rd execution
    from tpukit.train import NonFiniteLossError

    with pytest.raises(NonFiniteLossError):
        fit(
            MLP(nnx.Rngs(0)), optax.adam(1e-2), (x, Y), checkpoint_dir=tmp_path, shuffle=False, **KW
        )
    assert sorted(int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()) == [3, 6]


# A training run as its own program: the test starts it, SIGKILLs it once a checkpoint
# is on disk, and resumes it. The same file, imported, gives the uninterrupted run.
TRAINING_SCRIPT = """
import sys
import time

import optax
from flax import nnx

import tpukit

sys.path.insert(0, {root!r})  # the repository: the test files' shared model and data
from tests.train.test_fit import MLP, task


EPOCHS, STEPS_PER_EXECUTION = 6, 2  # 8 steps per epoch: 24 executions, 48 steps


def train(checkpoint_dir=None, resume=False, callbacks=()):
    model = MLP(nnx.Rngs(0, dropout=3), dropout=0.2, batchnorm=True)
    history = tpukit.fit(
        model, optax.adam(1e-2), task(), epochs=EPOCHS, batch_size=64,
        steps_per_execution=STEPS_PER_EXECUTION, checkpoint_dir=checkpoint_dir,
        checkpoint_every=1 if checkpoint_dir else None, resume=resume,
        callbacks=callbacks, verbose=False,
    )
    return model, history


if __name__ == "__main__":
    # Slow enough to be killed mid-run: half a second per execution.
    train(sys.argv[1], callbacks=[lambda record: time.sleep(0.5)])
"""


def finished_steps(directory):
    """Checkpoint steps on disk. Orbax writes a step into a temporary folder and renames
    it to the bare step number when complete, so a numbered folder is a finished one."""
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def test_a_sigkilled_process_resumes_to_the_same_parameters(tmp_path):
    script = tmp_path / "train_run.py"
    script.write_text(TRAINING_SCRIPT.format(root=str(Path(__file__).parents[2])))
    run_dir, log = tmp_path / "run", tmp_path / "train_run.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(script), str(run_dir)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),  # conftest's 8 CPU devices, as in this process
        )
    try:
        deadline = time.monotonic() + 300  # imports and compiling, on a busy machine
        while not finished_steps(run_dir):
            if proc.poll() is not None:
                pytest.fail(
                    f"the training process exited with {proc.returncode} before its first "
                    f"checkpoint:\n{log.read_text()[-3000:]}"
                )
            if time.monotonic() > deadline:
                pytest.fail(f"no checkpoint after 300 s:\n{log.read_text()[-3000:]}")
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, log.read_text()[-3000:]
    left = finished_steps(run_dir)
    assert left and left[-1] < 48  # killed mid-run, with something to resume from

    spec = importlib.util.spec_from_file_location("train_run", script)
    train_run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train_run)
    resumed, history = train_run.train(run_dir, resume=True)
    full, expected = train_run.train()

    assert_resumed_as_uninterrupted(resumed, history, full, expected)
    assert len(history.executions) == 24
    assert finished_steps(run_dir)[-1] == 48
