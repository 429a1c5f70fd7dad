"""Checkpoints the filesystem will not read or write: one clear line, and the right fallback.

An unreadable step counts as damaged: ``resume=True`` names it and the step to fall
back to, ``resume="latest_good"`` sets it aside and continues from the newest
readable step, exactly as an uninterrupted run. A ``checkpoint_dir`` the filesystem
refuses is found out before the first step trains, by writing to it.
"""

import builtins
import os
from pathlib import Path

import numpy as np
import optax
import pytest
from flax import nnx

from tests.train.test_checkpoint import KW
from tests.train.test_fit import MLP, X, Y, assert_same, params_of
from tpukit.train import CheckpointError, _integrity, fit


def model():
    return MLP(nnx.Rngs(0, dropout=3), dropout=0.2, batchnorm=True)


def steps_in(folder: Path) -> list[int]:
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def make_unreadable(path: Path, monkeypatch) -> None:
    """Take away read access to ``path``: really where we can, else as the OS would refuse.

    Root reads a file whatever its mode, so under root (as in CI containers) the
    refusal is simulated where tpukit reads checkpoint files before orbax does:
    opening that file (the same inode, so a new file at the same path reads fine)
    raises the ``PermissionError`` a user without read permission gets.
    """
    if os.geteuid() != 0:
        path.chmod(0)
        return
    refused = path.stat().st_ino

    def open_refusing(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.path.exists(file):
            if os.stat(file).st_ino == refused:
                raise PermissionError(13, "Permission denied", str(file))
        return builtins.open(file, *args, **kwargs)

    monkeypatch.setattr(_integrity, "open", open_refusing, raising=False)


def a_data_file(step_folder: Path) -> Path:
    return max((p for p in step_folder.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


def test_an_unreadable_step_is_damaged_and_latest_good_falls_back(tmp_path, monkeypatch):
    full = model()
    fit(full, optax.adam(1e-2), (X, Y), **KW)
    run = tmp_path / "run"
    fit(model(), optax.adam(1e-2), (X, Y), checkpoint_dir=run, **KW)
    newest, previous = steps_in(run)[-1], steps_in(run)[-2]
    unreadable = a_data_file(run / str(newest))
    make_unreadable(unreadable, monkeypatch)

    with pytest.raises(CheckpointError) as refused:
        fit(model(), optax.adam(1e-2), (X, Y), checkpoint_dir=run, resume=True, **KW)
    message = str(refused.value)
    assert f"step {newest}" in message and "cannot be read" in message, message
    assert unreadable.name in message and f"step {previous}" in message, message
    assert "latest_good" in message and "\n" not in message, message

    resumed = model()
    fit(resumed, optax.adam(1e-2), (X, Y), checkpoint_dir=run, resume="latest_good", **KW)
    assert (run / f"{newest}.damaged").is_dir()
    assert steps_in(run)[-1] == newest  # trained again from `previous` and saved anew
    assert_same(params_of(resumed), params_of(full))


@pytest.mark.parametrize("folder", ["/proc/self/fd/checkpoints", "/proc/self/fd"])
def test_a_folder_the_filesystem_refuses_is_found_before_training(folder):
    # Root passes os.access on /proc/self/fd, but no file can be created there.
    executions = []
    with pytest.raises(CheckpointError) as refused:
        fit(
            model(),
            optax.adam(1e-2),
            (X, Y),
            checkpoint_dir=folder,
            callbacks=[executions.append],
            **KW,
        )
    message = str(refused.value)
    assert executions == [], "trained before finding out"
    assert repr(folder) in message and "checkpoint_dir=None" in message, message
    assert "\n" not in message


@pytest.mark.parametrize("where", ["file", "under a file"])
def test_a_checkpoint_dir_that_is_a_file_is_one_line_naming_it(tmp_path, where):
    blocker = tmp_path / "notes.txt"
    blocker.write_text("not a folder")
    folder = blocker if where == "file" else blocker / "run"
    with pytest.raises(CheckpointError) as refused:
        fit(model(), optax.adam(1e-2), (X, Y), checkpoint_dir=folder, **KW)
    message = str(refused.value)
    assert str(folder) in message and "Pass a folder you can write to" in message, message
    frames = []
    tb = refused.value.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    inside = [f for f in frames if "/tpukit/" in f and not f.endswith("_errors.py")]
    assert inside == [], f"tpukit frames shown: {inside}"


def test_the_probe_leaves_nothing_behind(tmp_path):
    folder = tmp_path / "new" / "run"
    fit(model(), optax.adam(1e-2), (X, Y), checkpoint_dir=folder, **{**KW, "epochs": 1})
    assert not [p for p in folder.iterdir() if "probe" in p.name]


def test_a_refused_probe_removes_the_folders_it_created(tmp_path, monkeypatch):
    from tpukit.train import _checkpoint_folder

    def refuse_writes(*args, **kwargs):  # a full or read-only filesystem, also for root
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_checkpoint_folder, "_write_and_remove", refuse_writes)
    folder = tmp_path / "a" / "b"
    with pytest.raises(CheckpointError, match="cannot be written .OSError: No space left"):
        fit(model(), optax.adam(1e-2), (X, Y), checkpoint_dir=folder, **KW)
    assert not (tmp_path / "a").exists()


def test_a_numpy_checkpoint_every_is_a_count(tmp_path):
    fit(
        model(),
        optax.adam(1e-2),
        (X, Y),
        checkpoint_dir=tmp_path,
        **{**KW, "checkpoint_every": np.int64(2)},
    )
    assert steps_in(tmp_path) == [6, 11, 16]  # every second execution: steps 3, 6, 8, 11, 14, 16
