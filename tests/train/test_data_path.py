"""Following ``train_data`` from ``fit`` through the set-up: how many files a reader
opens, and how often they must go back to one already left (issue 41: at most 5
files and 2 returns).

The path is measured, not read: a profiler records ``fit``'s calls inside ``tpukit``,
and the calls that are given the user's data object or one of its arrays (directly,
or in a list or tuple) are on the path, with every call leading to them. The path
is that call tree walked in order, from ``fit`` to the last call given the data
before the run starts (``_setup.prepare`` returns: the data placed or found kept,
the objective checked), as the files it steps through; a "return" is a step into a file the path already left.
Before the kept data and the objective each had one home, the first call took
7 files and 10 returns (``_kept`` calling back into ``_data``, the plan's placing
bouncing between ``_mesh`` and ``_layout``, the objective made and checked in two
visits). The run then reads the data only through its kept copy's check against
in-place changes (``_run`` asks ``_data.KeptData``), not counted here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import optax
import pytest
from flax import nnx

import tpukit
import tpukit.train as train
from tpukit.train import _setup

ROOT = str(Path(tpukit.__file__).parent) + "/"


class _Call:
    __slots__ = ("file", "given", "children")

    def __init__(self, file: str, given: bool):
        self.file, self.given, self.children = file, given, []


def data_path(call, data, arrays) -> list[str]:
    """The files, in order, that ``call()`` steps through on the path of ``data`` until
    its run is set up."""
    watched = {id(data), *map(id, arrays)}

    def holds(value, depth=0):
        if id(value) in watched:
            return True
        return (
            depth < 2
            and isinstance(value, list | tuple)
            and any(holds(v, depth + 1) for v in value)
        )

    top = _Call("", False)
    stack = [(None, top)]
    set_up = [False]

    def profile(frame, event, _):
        if set_up[0] or not frame.f_code.co_filename.startswith(ROOT):
            return
        if event == "call":
            code = frame.f_code
            names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
            node = _Call(
                code.co_filename[len(ROOT) :], any(holds(frame.f_locals.get(n)) for n in names)
            )
            stack[-1][1].children.append(node)
            stack.append((frame, node))
        elif event == "return" and stack[-1][0] is frame:
            stack.pop()
            set_up[0] = frame.f_code is _setup.prepare.__code__

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)

    def on_path(node):
        node.children = [c for c in node.children if on_path(c)]
        return node.given or bool(node.children)

    def first_fit(node):
        if node.file == "train/_fit.py":
            return node
        return next(filter(None, map(first_fit, node.children)), None)

    on_path(top)
    steps: list[tuple[str, bool]] = []

    def walk(node):
        steps.append((node.file, node.given))
        for child in node.children:
            walk(child)
            steps.append((node.file, False))

    walk(first_fit(top))
    last = max(i for i, (_, given) in enumerate(steps) if given)
    files: list[str] = []
    for file, _ in steps[: last + 1]:
        if not files or files[-1] != file:
            files.append(file)
    return files


def returns(files: list[str]) -> int:
    return sum(file in files[:i] for i, file in enumerate(files))


X = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
Y = np.random.default_rng(1).integers(0, 2, 64).astype(np.int32)


@pytest.mark.parametrize(
    "form, options",
    [
        ("pair", {}),
        ("dict", {}),
        ("pair", {"eval_data": (X[:16], Y[:16])}),
    ],
    ids=["pair", "dict", "with-eval-data"],
)
def test_train_data_stays_in_five_files_with_two_returns(form, options):
    data = (X, Y) if form == "pair" else {"inputs": X, "labels": Y}
    model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    for call in ("first", "repeated"):

        def fit():
            train.fit(model, optax.sgd(0.1), data, epochs=1, batch_size=8, verbose=False, **options)

        files = data_path(fit, data, (X, Y))
        assert len(set(files)) <= 5 and returns(files) <= 2, f"{call}: {files}"
        assert files[:3] == ["train/_fit.py", "train/_setup.py", "train/_data.py"], files
        if call == "first":  # placed, and its labels checked against the model's classes
            assert files[-1] == "train/_objective.py", files
            assert "train/_layout.py" in files, files


def test_the_path_counts_each_step_back_into_a_file_already_left():
    assert returns(["a", "b", "a", "c", "b"]) == 2
    assert returns(["a", "b", "c"]) == 0
