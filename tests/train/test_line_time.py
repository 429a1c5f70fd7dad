"""The time on each epoch's progress line is the epoch's wall time, the ``seconds``
``History`` keeps for it, checkpoint write included (issue 35: the tutorial's lines read
"epoch 11.4 ms" for epochs whose ``seconds`` were 319 ms, the checkpoint written after the
line was drawn)."""

import re
import time

import numpy as np
import optax
from flax import nnx

from tpukit.train import fit
from tpukit.train._collaborators import Checkpointing

rng = np.random.default_rng(0)
X = rng.normal(size=(96, 8)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int32)


def test_each_lines_time_is_the_epochs_seconds_checkpoint_included(tmp_path, monkeypatch, capsys):
    pause, save = 0.3, Checkpointing.save  # each write made slow: 0.3 s more
    monkeypatch.setattr(
        Checkpointing, "save", lambda self, *args: (time.sleep(pause), save(self, *args))[1]
    )
    history = fit(
        nnx.Linear(8, 2, rngs=nnx.Rngs(0)),
        optax.adam(1e-2),
        (X, Y),
        epochs=3,
        batch_size=16,
        eval_data=(X, Y),
        checkpoint_dir=tmp_path / "run",
    )
    out = capsys.readouterr().out
    shown = [
        float(value) * (1e-3 if unit == "ms" else 1.0)
        for value, unit in re.findall(r"epoch (\d+(?:\.\d+)?) (ms|s)\b", out)
    ]
    seconds = [e["seconds"] for e in history.epochs]
    assert len(shown) == len(seconds) == 3, out
    for line, kept in zip(shown, seconds):
        assert line >= pause, (shown, seconds)  # the write is in it
        assert abs(line - kept) <= 0.1 * kept, (shown, seconds)
