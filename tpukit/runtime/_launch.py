"""Run one script as N local processes of a ``jax.distributed`` run: multi-host on one machine.

``python -m tpukit launch -n 2 --devices-per-process 4 train.py`` starts two
Python processes, each with four simulated CPU devices, wired to a coordinator
on ``127.0.0.1`` at a free port. Each process finds the run in its environment
(``TPUKIT_COORDINATOR``, ``TPUKIT_NUM_PROCESSES``, ``TPUKIT_PROCESS_ID``), which
``tpukit.connect()`` reads, so the script is the one you would run on each host
of a TPU pod slice. JAX's CPU collectives are switched to gloo
(``JAX_CPU_COLLECTIVES_IMPLEMENTATION=gloo``) so the processes can talk.

Each line a process prints comes out prefixed with ``[p0]``, ``[p1]``, ... If
one process fails, the others are stopped (they would otherwise wait forever in
a collective), its last lines are repeated, and ``launch`` exits with its code.
An uncaught exception ends its process at once, without JAX's shutdown barrier,
so a failure is reported in a second, not after the barrier's 30 s timeout.

Example (a training script prints ``[p0] tpukit.fit: sharding 'data': mesh data=8 (8
devices in 2 processes); ...``):

    >>> script = ("import os\\n"
    ...           "if os.environ['TPUKIT_PROCESS_ID'] == '0':\\n"
    ...           "    print('one of', os.environ['TPUKIT_NUM_PROCESSES'])\\n")
    >>> _ = open("hello.py", "w").write(script)
    >>> launch("hello.py", [], processes=2, devices_per_process=4)
    [p0] one of 2
    0
"""

from __future__ import annotations

import collections
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from tpukit._counts import as_count
from tpukit._errors import LaunchError

# Gloo announces every peer connection ("[Gloo] Rank 5 is connected to 7 peer ranks.
# Expected number of connected peer ranks is : 7"); it says nothing the user needs. Its
# threads write the message in pieces that can land anywhere, even inside a progress-bar
# line, so in a line that shows a piece, every piece is removed; a line left empty is
# dropped.
_GLOO_MARK = re.compile(r"\[Gloo\]|is connected to \d+ peer ranks|Expected number of connected")
_GLOO_PIECES = re.compile(
    r"\[Gloo\]\s*|Rank\s*\d*\s*|\d*\s*is connected to \d+ peer ranks\.\s*"
    r"|Expected number of connected peer ranks is : \d+\s*"
)


# Each process runs the script through this, not as ``python script.py``: an uncaught
# exception must end the process at once. Otherwise JAX's exit handler waits (about
# 30 s) in a shutdown barrier for the peers, and the failure is reported late.
_BOOTSTRAP = """
import os, runpy, sys, traceback
path = os.path.abspath(sys.argv[1])
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(path)
try:
    runpy.run_path(path, run_name="__main__")
except SystemExit as e:
    if e.code in (None, 0):
        raise
    code = e.code if isinstance(e.code, int) else 1
    if not isinstance(e.code, int):
        print(e.code, file=sys.stderr)
    sys.stdout.flush(); sys.stderr.flush(); os._exit(code)
except BaseException as e:
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    traceback.print_exception(type(e), e, tb or e.__traceback__)
    sys.stdout.flush(); sys.stderr.flush(); os._exit(1)
"""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_environment(
    base: dict[str, str], coordinator: str, processes: int, process_id: int, devices: int
) -> dict[str, str]:
    """The environment of process ``process_id``: the run, the CPU devices, gloo.

    Example::

        >>> env = process_environment({}, "127.0.0.1:1234", 2, 1, 4)
        >>> env["TPUKIT_PROCESS_ID"], env["XLA_FLAGS"]
        ('1', '--xla_force_host_platform_device_count=4')
    """
    env = dict(base)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "host_platform_device_count" not in f]
    env.pop("JAX_NUM_CPU_DEVICES", None)  # it would override the XLA flag below
    env.update(
        TPUKIT_COORDINATOR=coordinator,
        TPUKIT_NUM_PROCESSES=str(processes),
        TPUKIT_PROCESS_ID=str(process_id),
        JAX_PLATFORMS="cpu",
        JAX_CPU_COLLECTIVES_IMPLEMENTATION="gloo",
        XLA_FLAGS=" ".join([*flags, f"--xla_force_host_platform_device_count={devices}"]),
        PYTHONUNBUFFERED="1",
    )
    return env


class _Process:
    """One child: its ``Popen``, the thread forwarding its output, and its last lines."""

    def __init__(self, index: int, argv: list[str], env: dict[str, str], out: TextIO, lock):
        self.index = index
        self.tail: collections.deque[str] = collections.deque(maxlen=25)
        self.popen = subprocess.Popen(
            argv,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            start_new_session=True,  # its own process group, so stopping it stops its children
        )
        self.thread = threading.Thread(target=self._forward, args=(out, lock), daemon=True)
        self.thread.start()

    def _forward(self, out: TextIO, lock) -> None:
        for raw in self.popen.stdout:
            line = raw.rstrip("\n")
            if _GLOO_MARK.search(line):
                line = _GLOO_PIECES.sub("", line)
                if not line.strip():
                    continue  # the line held only gloo's chatter
            self.tail.append(line)
            with lock:
                out.write(f"[p{self.index}] {line}\n")
                out.flush()

    def signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                pass


def _stop(procs: list[_Process], grace: float) -> None:
    for p in procs:
        p.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.popen.wait(timeout=max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            p.signal(signal.SIGKILL)
            p.popen.wait()


def launch(
    script: str | os.PathLike,
    args: Sequence[str] = (),
    *,
    processes: int,
    devices_per_process: int = 1,
    port: int | None = None,
    grace: float = 1.0,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run ``script`` in ``processes`` local processes joined into one ``jax.distributed`` run.

    Args:
        script: a Python file; it should call ``tpukit.connect()`` before any JAX work.
        args: command-line arguments passed to every process.
        processes: how many processes (the ``-n`` of ``python -m tpukit launch``).
        devices_per_process: simulated CPU devices in each process.
        port: the coordinator's port on 127.0.0.1; default a free one.
        grace: seconds stopped processes get after SIGTERM before SIGKILL (JAX
            catches SIGTERM as a preemption notice and keeps running).
        out, err: where the prefixed output and the failure report go
            (default ``sys.stdout`` and ``sys.stderr``).

    Returns:
        0 when every process exits with 0; otherwise the exit code of the first
        process found failed (1 if it was killed by a signal).
    """
    out = out or sys.stdout
    err = err or sys.stderr
    processes = as_count(processes, "processes", error=LaunchError)
    devices_per_process = as_count(devices_per_process, "devices_per_process", error=LaunchError)
    path = Path(script)
    if not path.is_file():
        raise LaunchError(
            f"No script {str(script)!r}. Give the path of a Python file, e.g. "
            "python -m tpukit launch -n 2 train.py."
        )
    coordinator = f"127.0.0.1:{port or free_port()}"
    lock = threading.Lock()
    procs: list[_Process] = []
    try:
        for i in range(processes):
            env = process_environment(
                dict(os.environ), coordinator, processes, i, devices_per_process
            )
            argv = [sys.executable, "-u", "-c", _BOOTSTRAP, str(path), *args]
            procs.append(_Process(i, argv, env, out, lock))
        failed = _wait(procs)
    except KeyboardInterrupt:
        _stop(procs, grace)
        err.write("launch: interrupted; stopped every process.\n")
        return 130
    if failed is not None:
        _stop([p for p in procs if p is not failed], grace)
    for p in procs:
        p.thread.join(timeout=5)
    if failed is None:
        return 0
    code = failed.popen.returncode
    others = len(procs) - 1
    how = f"exit code {code}" if code > 0 else f"signal {-code}"
    stopped = f"; stopped the other {others} process{'es' if others != 1 else ''}" if others else ""
    tail = "\n".join(f"  {line}" for line in failed.tail) or "  (no output)"
    err.write(
        f"launch: process {failed.index} of {len(procs)} failed ({how}){stopped}. "
        f"Its last output:\n{tail}\n"
    )
    err.flush()
    return code if code > 0 else 1


def _wait(procs: list[_Process]) -> _Process | None:
    """Wait until all succeed (``None``) or one fails (that process)."""
    while True:
        codes = [p.popen.poll() for p in procs]
        bad = [p for p, c in zip(procs, codes, strict=True) if c not in (None, 0)]
        if bad:
            # Prefer a process that raised (positive code) over one killed by a signal.
            return sorted(bad, key=lambda p: p.popen.returncode < 0)[0]
        if all(c == 0 for c in codes):
            return None
        time.sleep(0.05)
