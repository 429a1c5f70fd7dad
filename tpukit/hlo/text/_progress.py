"""A progress line for slow work: said only when the work takes longer than a moment.

Opening a 50 MB dump or diffing two large modules takes seconds; a silent cell looks
hung. `progress` prints one line to stderr once the work has run for ``after`` seconds
(2 s, or ``TPUKIT_PROGRESS_AFTER``), and a closing line with the time it took; quick
work prints nothing:

    >>> from tpukit.hlo import parse_hlo
    >>> with progress("parsing a one-line module"):  # quick: nothing is said
    ...     module = parse_hlo("HloModule m\\nENTRY e {\\n  ROOT x = f32[] parameter(0)\\n}")
    >>> module.entry.root.opcode
    'parameter'

A slow one says, on stderr::

    tpukit: parsing module_0042.jit_step (48 MB of HLO)...
    tpukit: parsing module_0042.jit_step (48 MB of HLO) done in 14.2 s

Work made of steps nests: inside an outer `progress` (opening a graph: parse, group),
an inner one starts no clock of its own. The outer's line, once due, names the step under
way; from then on each later step says when it starts and ends. So one open that takes
3 s in three steps of 1 s says so, where three separate clocks would each stay silent::

    tpukit: opening the graph of step (grouping step for its graph)...
    tpukit:   drawing the graph of step...
    tpukit:   drawing the graph of step done in 0.9 s
    tpukit: opening the graph of step done in 3.1 s
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator

#: Seconds of work before the progress line shows.
DEFAULT_AFTER = 2.0

# The progress lines open in this thread, outermost first.
_open = threading.local()


def _after() -> float:
    try:
        return float(os.environ.get("TPUKIT_PROGRESS_AFTER", DEFAULT_AFTER))
    except ValueError:
        return DEFAULT_AFTER


class _Line:
    """One open progress line: what it says, the step under way, and whether it spoke."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.step = ""
        self.said = threading.Event()

    def say(self) -> None:
        self.said.set()
        step = f" ({self.step})" if self.step else ""
        print(f"tpukit: {self.what}{step}...", file=sys.stderr, flush=True)


@contextlib.contextmanager
def progress(what: str, after: float | None = None) -> Iterator[None]:
    """Say ``tpukit: <what>...`` on stderr if the block runs past ``after`` seconds."""
    stack: list[_Line] = _open.__dict__.setdefault("lines", [])
    start = time.perf_counter()
    if stack:  # a step of a longer piece of work: see the module docstring
        outer = stack[-1]
        before, outer.step = outer.step, what
        spoke = outer.said.is_set()
        if spoke:
            print(f"tpukit:   {what}...", file=sys.stderr, flush=True)
        try:
            yield
        finally:
            outer.step = before
            if spoke:
                took = time.perf_counter() - start
                print(f"tpukit:   {what} done in {took:.1f} s", file=sys.stderr, flush=True)
        return
    line = _Line(what)
    timer = threading.Timer(_after() if after is None else after, line.say)
    timer.daemon = True
    stack.append(line)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        stack.pop()
        if line.said.is_set():
            took = time.perf_counter() - start
            print(f"tpukit: {what} done in {took:.1f} s", file=sys.stderr, flush=True)
