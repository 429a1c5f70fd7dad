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


def _after() -> float:
    try:
        return float(os.environ.get("TPUKIT_PROGRESS_AFTER", DEFAULT_AFTER))
    except ValueError:
        return DEFAULT_AFTER


@contextlib.contextmanager
def progress(what: str, after: float | None = None) -> Iterator[None]:
    """Say ``tpukit: <what>...`` on stderr if the block runs past ``after`` seconds."""
    delay = _after() if after is None else after
    start = time.perf_counter()
    said = threading.Event()

    def say() -> None:
        said.set()
        print(f"tpukit: {what}...", file=sys.stderr, flush=True)

    timer = threading.Timer(delay, say)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        if said.is_set():
            took = time.perf_counter() - start
            print(f"tpukit: {what} done in {took:.1f} s", file=sys.stderr, flush=True)
