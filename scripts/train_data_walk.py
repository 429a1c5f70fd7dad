"""Follow ``train_data`` from ``Trainer.compile_step`` through the calls, and count files.

A reader who wants to know what ``compile_step`` does with its ``train_data`` opens
every function the data is handed to, in the order the program calls them. This
script records that order with :func:`sys.settrace` while it runs one small
``compile_step`` (an MLP on 64 examples, CPU is enough):

- *the data* is the ``train_data`` object itself, and every object made from it by a
  tpukit constructor (the ``self`` of an ``__init__`` that received the data: the
  data source);
- a tpukit function *receives the data* when one of its arguments is the data or
  holds it, in a tuple, list, dict or an object's attributes, up to three levels
  deep (a ``RunSpec`` holding the source counts);
- what those calls return is not followed: tracing every returned value as data
  (the objective, the program, each array) reaches nearly every module of train/
  and tells nothing about the set-up's shape;
- a call counts once, when it starts (a generator resumed or closed is the same call);
- the walk is the sequence of tpukit files of those calls, with consecutive calls in
  one file merged. *Files crossed* counts the distinct files; *returns* counts each
  step of the walk into a file it had already left.

Issue 22's target: at most 5 files, at most 3 returns. Run it from the repository root::

    python scripts/train_data_walk.py            # the walk, its figures
    python scripts/train_data_walk.py --json walk.json --streamed
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import types
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's tpukit

import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402

import tpukit  # noqa: E402
from tpukit.train import Trainer  # noqa: E402

PACKAGE = Path(tpukit.__file__).resolve().parent
_OPAQUE = (types.ModuleType, types.FunctionType, type, types.MethodType, types.BuiltinFunctionType)


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.l1 = nnx.Linear(8, 16, rngs=rngs)
        self.l2 = nnx.Linear(16, 4, rngs=rngs)

    def __call__(self, x):
        return self.l2(nnx.relu(self.l1(x)))


class Walk:
    """The tracer: which tpukit calls receive the data, in order."""

    def __init__(self, data: object):
        self.data: dict[int, object] = {id(data): data}  # the objects kept alive: ids stay theirs
        self.calls: list[tuple[str, str]] = []
        self.frames: dict[
            int, types.FrameType
        ] = {}  # tpukit frames started (kept: ids stay theirs)

    def holds(self, value: object, depth: int = 3, seen: set | None = None) -> bool:
        if id(value) in self.data:
            return True
        if depth == 0 or value is None or isinstance(value, (str, bytes, int, float, bool)):
            return False
        if isinstance(value, _OPAQUE) or type(value).__module__.startswith(("jax", "numpy")):
            return False
        seen = set() if seen is None else seen
        if id(value) in seen:
            return False
        seen.add(id(value))
        if isinstance(value, dict):
            children = list(value.values())
        elif isinstance(value, (tuple, list, set, frozenset)):
            children = list(value)
        else:
            children = list(getattr(value, "__dict__", {}).values())
            children += [getattr(value, s, None) for s in getattr(type(value), "__slots__", ())]
        return any(self.holds(child, depth - 1, seen) for child in children)

    def __call__(self, frame: types.FrameType, event: str, arg: object) -> None:
        code = frame.f_code
        if event != "call" or not code.co_filename.startswith(str(PACKAGE)):
            return None
        if self.frames.get(id(frame)) is frame:
            return None  # a generator resumed or closed is not a new call
        self.frames[id(frame)] = frame
        path = Path(code.co_filename)
        count = code.co_argcount + code.co_kwonlyargcount
        count += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
        names = code.co_varnames[:count]
        values = [frame.f_locals.get(n) for n in names]
        if not any(self.holds(v) for v in values):
            return None
        self.calls.append((str(path.relative_to(PACKAGE.parent)), code.co_qualname))
        if code.co_name == "__init__" and names:  # an object built from the data holds it
            self.data[id(values[0])] = values[0]
        return None


def walk(streamed: bool) -> Walk:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 8)).astype(np.float32)
    y = rng.integers(0, 4, size=64).astype(np.int32)
    train_data = [(x[i : i + 8], y[i : i + 8]) for i in range(0, 64, 8)] if streamed else (x, y)
    trainer = Trainer(MLP(nnx.Rngs(0)), optax.sgd(0.1))
    options = {} if streamed else {"batch_size": 8}
    tracer = Walk(train_data)
    sys.settrace(tracer)
    try:
        trainer.compile_step(train_data, steps_per_execution=2, **options)
    finally:
        sys.settrace(None)
    return tracer


def figures(calls: list[tuple[str, str]]) -> dict:
    """The walk (consecutive calls in one file merged), files crossed and returns."""
    steps: list[dict] = []
    for file, function in calls:
        if steps and steps[-1]["file"] == file:
            if function not in steps[-1]["functions"]:
                steps[-1]["functions"].append(function)
            continue
        steps.append({"file": file, "functions": [function]})
    left: set[str] = set()
    returns = 0
    for i, step in enumerate(steps):
        if step["file"] in left:
            returns += 1
            step["return"] = True
        if i:
            left.add(steps[i - 1]["file"])
    return {
        "files": len({s["file"] for s in steps}),
        "returns": returns,
        "calls": len(calls),
        "walk": steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streamed", action="store_true", help="an iterable of batches")
    parser.add_argument("--json", help="write the figures and the walk to this file")
    args = parser.parse_args()
    result = figures(walk(args.streamed).calls)
    kind = "a list of batches" if args.streamed else "an (x, y) tuple of arrays"
    print(f"train_data = {kind}: Trainer.compile_step -> ...")
    for step in result["walk"]:
        mark = "  <- back" if step.get("return") else ""
        print(f"  {step['file']:<40} {', '.join(step['functions'])}{mark}")
    print(
        f"files crossed: {result['files']}   returns to a file already left: "
        f"{result['returns']}   calls receiving the data: {result['calls']}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
