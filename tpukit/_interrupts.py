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

import _signal  # signal.signal and getsignal without their enum conversions
import signal
import threading
from typing import Any


class HeldInterrupt:
    """A SIGINT held back by :func:`held_interrupts`, to be delivered later; while it
    holds, it is itself the SIGINT handler (it keeps what arrives)."""

    __slots__ = ("handler", "received")

    def __init__(self, handler: Any = None):
        self.handler = handler
        self.received: list[tuple[int, Any]] = []

    def __call__(self, signum: int, frame: Any) -> None:
        self.received.append((signum, frame))

    def deliver(self) -> None:
        """Raise the held SIGINT now (Python's handler raises ``KeyboardInterrupt``)."""
        received, self.received = self.received, []
        if received and callable(self.handler):
            self.handler(*received[0])


class held_interrupts:  # noqa: N801 - a context manager, named like contextlib's
    """Hold back a SIGINT that arrives inside the block; ``deliver()`` raises it later.

    ``fit`` dispatches a call ahead of its turn: a ^C that lands during that dispatch
    is delivered when the call's turn comes, so that it stops the run at the same
    point as it would have without the look-ahead. (A class, not a generator: ``fit``
    enters three such blocks per call, and the C module ``_signal`` is read directly,
    without ``signal``'s enum conversions: a block costs a few µs, not 15.)
    """

    __slots__ = ("held", "installed")

    def __enter__(self) -> HeldInterrupt:
        self.installed = False
        if threading.get_ident() != threading.main_thread().ident:
            self.held = HeldInterrupt()  # Python delivers signals to the main thread only
            return self.held
        previous = _signal.getsignal(_SIGINT)
        self.held = HeldInterrupt(previous)
        if callable(previous):  # else SIGINT is ignored or left to the OS: nothing to hold
            _signal.signal(_SIGINT, self.held)
            self.installed = True
        return self.held

    def __exit__(self, *exc: Any) -> None:
        if self.installed:
            _signal.signal(_SIGINT, self.held.handler)


class deferred_interrupts(held_interrupts):  # noqa: N801 - a context manager
    """Run the block whole: a SIGINT that arrives inside it is raised when it ends
    (unless the block raised: then its exception goes on, and the SIGINT is dropped)."""

    __slots__ = ()

    def __enter__(self) -> None:
        super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        if exc[0] is None:
            self.held.deliver()


_SIGINT = int(signal.SIGINT)
