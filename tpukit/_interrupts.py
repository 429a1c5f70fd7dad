"""Pressing stop (^C) never leaves a half-done block behind: a ``fit`` update, a profiler
started or stopped.

A notebook's stop button sends SIGINT, which Python turns into a
``KeyboardInterrupt`` between any two bytecodes. ``fit`` applies a finished compiled
call in several statements (the new state, the step counters, the history, the
checkpoint); an interrupt between two of them would leave the model one epoch ahead
of what its counters say. :func:`deferred_interrupts` holds SIGINT back for such a
block and raises it as soon as the block is done, so every block runs whole or not
at all. Outside the main thread (where Python delivers no signals) it does nothing.
The profiler is started and stopped the same way (``tpukit.measure``): a second ^C that
landed inside ``stop_trace`` left the profiler running, and every later profile refused.

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
    with held_interrupts() as held:
        yield
    held.deliver()


class HeldInterrupt:
    """A SIGINT held back by :func:`held_interrupts`, to be delivered later."""

    def __init__(self, handler: Any = None):
        self.handler = handler
        self.received: list[tuple[int, Any]] = []

    def deliver(self) -> None:
        """Raise the held SIGINT now (Python's handler raises ``KeyboardInterrupt``)."""
        received, self.received = self.received, []
        if received and callable(self.handler):
            self.handler(*received[0])


@contextlib.contextmanager
def held_interrupts() -> Iterator[HeldInterrupt]:
    """Hold back a SIGINT that arrives inside the block; ``deliver()`` raises it later.

    ``fit`` dispatches a call ahead of its turn: a ^C that lands during that dispatch
    is delivered when the call's turn comes, so that it stops the run at the same
    point as it would have without the look-ahead.
    """
    if threading.current_thread() is not threading.main_thread():
        yield HeldInterrupt()
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous) and previous != signal.default_int_handler:
        yield HeldInterrupt()  # SIGINT ignored or left to the OS: nothing to hold
        return
    held = HeldInterrupt(previous)

    def hold(signum: int, frame: Any) -> None:
        held.received.append((signum, frame))

    signal.signal(signal.SIGINT, hold)
    try:
        yield held
    finally:
        signal.signal(signal.SIGINT, previous)
