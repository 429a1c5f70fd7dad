"""Take a ``jax.profiler`` trace of a call run several times, and find trace files.

The profiler always writes into a fresh temporary folder tpukit owns, so a bad
``trace_dir`` (a file, a path under a file, a read-only folder) is refused before the
profiler starts, and the profiler is stopped whatever happens while it runs (an error
in the program, ^C): a later ``%tpu_profile`` never meets "Another trace is running".
A kept trace is copied into ``trace_dir`` afterwards, in the layout XProf reads
(``plugins/profile/<run>/<host>.xplane.pb``).

    >>> f, x = jax.jit(lambda x: x @ x), jnp.ones((64, 64))
    >>> walls, files = trace_runs(lambda: f(x), 5, None)
    >>> len(walls), [plane.name for plane in files[0].planes if plane.name == "/host:CPU"]
    (5, ['/host:CPU'])
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax

from tpukit._errors import ProfileError, TpukitError
from tpukit._interrupts import deferred_interrupts
from tpukit.measure._xspace import TraceFile, read_xspace

TRACE_FILES = "*.xplane.pb"
#: Runs from which a trace says what it is doing (a long trace, then a long read).
PROGRESS_FROM = 1000


def trace_runs(
    call: Callable[[], Any],
    repeat: int,
    trace_dir: str | os.PathLike | None,
    *,
    name: str = "the program",
) -> tuple[list[float], list[TraceFile]]:
    """Run ``call`` ``repeat`` times under the profiler; the wall seconds of each run and
    the trace (one `TraceFile` per host). ``trace_dir`` keeps a copy of the trace (with
    everything XProf reads); without it the trace is lean and removed afterwards."""
    keep = writable_folder(trace_dir) if trace_dir is not None else None
    options = jax.profiler.ProfileOptions()
    if keep is None:
        options.python_tracer_level = 0
        options.enable_hlo_proto = False
    with tempfile.TemporaryDirectory(prefix="tpukit-profile-") as temp:
        walls: list[float] = []
        started = False
        try:
            # Started and stopped whole (a ^C held to the block's end): a profiler half
            # started, or a stop a second ^C cut short, refuses every later profile.
            with deferred_interrupts():
                _start_profiler(temp, options)
                started = True
            progress = _Progress(repeat, name)
            with run_failures(name, lambda: f"run {len(walls) + 1} of {repeat}"):
                for _ in range(repeat):
                    start = time.perf_counter()
                    jax.block_until_ready(call())
                    walls.append(time.perf_counter() - start)
                    progress.step(len(walls))
        finally:
            if started:
                with deferred_interrupts():
                    _stop_profiler()
        progress.done()
        files = read_traces(pathlib.Path(temp))
        if keep is not None:
            shutil.copytree(temp, keep, dirs_exist_ok=True)
    return walls, files


@contextlib.contextmanager
def run_failures(name: str, when: str | Callable[[], str]) -> Iterator[None]:
    """Turn an error raised while the program runs into one `ProfileError` line; tpukit's
    own errors and out-of-memory (which the caller words) pass through, as does ^C."""
    try:
        yield
    except Exception as exc:
        if isinstance(exc, TpukitError) or "RESOURCE_EXHAUSTED" in str(exc):
            raise
        at = when() if callable(when) else when
        raise ProfileError(
            f"{name} failed while being profiled ({at}): {type(exc).__name__}: "
            f"{_first_line(exc)}. Run it once without the profiler to see the whole error "
            "(it is also this error's __cause__)."
        ) from exc


def writable_folder(trace_dir: str | os.PathLike) -> pathlib.Path:
    """``trace_dir`` as a folder tpukit can write, made if missing; else a `ProfileError`."""
    if not isinstance(trace_dir, (str, os.PathLike)):
        raise ProfileError(
            f"trace_dir must be a folder path, got {type(trace_dir).__name__}: pass a string "
            "such as '/tmp/trace'."
        )
    folder = pathlib.Path(trace_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".tpukit-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        what = "is a file" if folder.is_file() else (exc.strerror or str(exc)).lower()
        raise ProfileError(
            f"Cannot keep the trace in {str(folder)!r}: {what}. Pass trace_dir= a folder you "
            "can write (it is made if missing), or leave it out."
        ) from None
    return folder


def _first_line(exc: BaseException) -> str:
    """The error's first line; for one that carries a traceback (a host callback's), the
    first line's head and the traceback's last line, the error the callback raised."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return "(no message)"
    head = lines[0].split("Traceback (most recent call last)", 1)[0].rstrip(": ")
    return f"{head}: {lines[-1]}" if head != lines[0] and len(lines) > 1 else lines[0]


def _start_profiler(folder: str, options: Any) -> None:
    try:
        jax.profiler.start_trace(folder, profiler_options=options)
    except RuntimeError as exc:
        raise ProfileError(
            f"Could not start the JAX profiler ({exc}). Another trace is running: stop it "
            "with jax.profiler.stop_trace() (or leave its `with jax.profiler.trace(...)` "
            "block), then profile again."
        ) from None


def _stop_profiler() -> None:
    """Stop the profiler; if exporting fails, still end the session so the next can start."""
    try:
        jax.profiler.stop_trace()
    except Exception:
        from jax._src import profiler  # its session stays set when the export fails

        state = getattr(profiler, "_profile_state", None)
        if state is not None and hasattr(state, "reset"):
            state.reset()
        raise


class _Progress:
    """A line on stderr for long traces: runs done, then the read that follows."""

    def __init__(self, repeat: int, name: str):
        self.shown = repeat >= PROGRESS_FROM
        self.repeat, self.name, self.next = repeat, name, 0.0
        if self.shown:
            print(f"Profiling {repeat:,} runs of {name}...", end="", file=sys.stderr, flush=True)

    def step(self, done: int) -> None:
        if self.shown and time.perf_counter() >= self.next:
            self.next = time.perf_counter() + 1.0
            text = f"\rProfiling {self.repeat:,} runs of {self.name}: {done:,} done"
            print(text, end="", file=sys.stderr, flush=True)

    def done(self) -> None:
        if self.shown:
            print(
                f"\rProfiling {self.repeat:,} runs of {self.name}: all done; reading the trace",
                file=sys.stderr,
                flush=True,
            )


def read_traces(folder: pathlib.Path) -> list[TraceFile]:
    """Every trace file under ``folder``, one per host, in every run folder
    (``plugins/profile/<run>``: each trace taken into the folder, or each host's own), or
    a `ProfileError` saying none. A host found in several run folders is named with its
    folder (``vm-0 (2026_11_26_10_00_00)``) so its runs stay apart."""
    files = sorted(folder.rglob(TRACE_FILES))
    if not files:
        raise ProfileError(
            f"No JAX profiler trace ({TRACE_FILES}) under {str(folder)!r}. Pass the folder "
            "given to jax.profiler.trace(...) or one of its plugins/profile/*/*.xplane.pb "
            "files; check that `with jax.profiler.trace('/tmp/t'): ...` writes one."
        )
    traces = [read_xspace(path) for path in files]
    folders: dict[str, set[pathlib.Path]] = {}
    for path, trace in zip(files, traces):
        folders.setdefault(trace.host, set()).add(path.parent)
    for path, trace in zip(files, traces):
        if len(folders[trace.host]) > 1:
            trace.host = f"{trace.host} ({path.parent.name})"
    return traces
