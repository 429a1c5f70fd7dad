"""Pressing stop (^C) during ``fit`` never leaves a half-done update behind.

A notebook's stop button sends SIGINT, which Python turns into a
``KeyboardInterrupt`` between any two bytecodes. ``fit`` applies a finished compiled
call in several statements (the new state, the step counters, the history, the
checkpoint); an interrupt between two of them would leave the model one epoch ahead
of what its counters say. :func:`deferred_interrupts` holds SIGINT back for such a
block and raises it as soon as the block is done, so every block runs whole or not
at all. Outside the main thread (where Python delivers no signals) it does nothing.

Example::

    >>> with deferred_interrupts():
    ...     state, position = "new state", "new position"   # never one without the other
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Run the block whole: a SIGINT that arrives inside it is raised when it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous) and previous != signal.default_int_handler:
        yield  # SIGINT ignored or left to the OS: nothing to defer
        return
    received: list[tuple[int, Any]] = []

    def hold(signum: int, frame: Any) -> None:
        received.append((signum, frame))

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received and callable(previous):
            previous(*received[0])  # Python's default handler raises KeyboardInterrupt here
