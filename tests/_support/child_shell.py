"""Bad input run in one real IPython ``InteractiveShell`` inside a child process.

Some inputs used to abort or crash the whole process (a repeated mesh axis, a shape whose
element count overflows XLA's 64-bit arithmetic): in a child, a crash fails the case that
caused it instead of killing the test run. For each case the child records the exception,
its message and whether the user's variables survived; `assert_one_clear_line` checks a
record::

    records = run_in_child_shell(tmp_path, SETUP, ["%tpu_compile f("])
    assert_one_clear_line(records["%tpu_compile f("], "Cannot read")
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tpukit

SETUP = """
import dataclasses
import numpy as np, jax, jax.numpy as jnp, tpukit

def f(x):
    return x * 2

def mm(a, w):
    return a @ w

@dataclasses.dataclass
class Pair:
    a: object
    b: object

x = np.arange(3, dtype=np.float32)
keep = {"weights": np.ones(2), "note": "user state"}
f_small = tpukit.compile(f, tpukit.shape("f32[3]"))
"""


CHILD = r"""
import json, sys, traceback
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.error import UsageError

cases = json.loads(open(sys.argv[1]).read())
progress = open(sys.argv[2], "a")
ip = InteractiveShell.instance()
ip.run_cell("%load_ext tpukit", store_history=False)
setup = ip.run_cell(cases["setup"], store_history=False)
assert setup.success, setup.error_in_exec
import tpukit, numpy as np
for code in cases["inputs"]:
    progress.write(json.dumps({"start": code}) + "\n"); progress.flush()
    result = ip.run_cell(code, store_history=False)
    error = result.error_in_exec or result.error_before_exec
    ns = ip.user_ns
    intact = (
        np.array_equal(ns.get("x"), np.arange(3, dtype=np.float32))
        and ns.get("keep", {}).get("note") == "user state"
        and callable(ns.get("f"))
        and isinstance(ns.get("f_small"), tpukit.Compiled)
    )
    record = {
        "code": code,
        "error": None if error is None else type(error).__name__,
        "ours": isinstance(error, (UsageError, tpukit.TpukitError)),
        "message": None if error is None else str(error),
        "intact": intact,
    }
    progress.write(json.dumps({"done": record}) + "\n"); progress.flush()
"""


def run_in_child_shell(folder: Path, setup: str, inputs: list[str]) -> dict[str, dict]:
    """Run ``setup``, then each input, in one ``InteractiveShell`` of a child process.

    Returns a record per input (see ``CHILD``); an input that killed the process gets
    ``{"died": exit code, "stderr": ...}`` and the inputs after it no record.
    The child imports the same tpukit as this process (a worktree's, not an install's).
    """
    spec = folder / "cases.json"
    spec.write_text(json.dumps({"setup": setup, "inputs": inputs}))
    progress = folder / "progress.jsonl"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    source = str(Path(tpukit.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (source, env.get("PYTHONPATH")) if p)
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(spec), str(progress)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=folder,
    )
    found: dict[str, dict] = {}
    started = None
    for line in Path(progress).read_text().splitlines() if progress.exists() else []:
        entry = json.loads(line)
        if "start" in entry:
            started = entry["start"]
        else:
            found[entry["done"]["code"]] = entry["done"]
            started = None
    if started is not None:  # the process died in this case
        found[started] = {"died": child.returncode, "stderr": child.stderr[-2000:]}
    if child.returncode and started is None:
        pytest.fail(f"the shell process failed outside a case:\n{child.stderr[-3000:]}")
    return found


def assert_one_clear_line(record: dict | None, expected: str) -> None:
    """The input was refused with one short tpukit line holding ``expected``, nothing lost."""
    __tracebackhide__ = True
    assert record is not None, "not reached: an earlier case killed the process"
    assert "died" not in record, f"the process died (exit {record['died']}):\n{record['stderr']}"
    assert record["error"] is not None, "accepted instead of refused"
    assert record["ours"], f"{record['error']} is not a tpukit error: {record['message']}"
    message = record["message"]
    if "does not fit in device memory" in message.strip().split("\n", 1)[0]:
        # An out-of-memory explains itself (issue 23): its first line is the clear one,
        # then the buffers at the peak and what would fit.
        message = message.strip().split("\n", 1)[0]
    assert "\n" not in message.strip(), f"more than one line:\n{message}"
    assert len(message) < 400, f"not short ({len(message)} characters): {message}"
    assert expected in message, message
    assert "tpukit/" not in message and "_compiled.py" not in message, message
    assert record["intact"], "the user's variables changed"
