"""Give the C heap's freed pages back to the system before a large page is made.

Grouping a large module and making its payload free tens of megabytes of columns, lists
and buffers in the middle of the C heap (glibc's ``malloc``), where live objects around
them keep the heap from shrinking: the process stays that much larger, and the page made
next (a 400,000-instruction module's is 18 MB as a text) comes on top. glibc's
``malloc_trim`` returns every whole free page inside the heap to the system (the heap's
bookkeeping is unchanged; a page is mapped again only when it is written again), in a few
milliseconds. Elsewhere (another C library, another system) there is nothing to call,
and nothing is done.

    >>> give_back_freed_heap() in (True, False)
    True
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable


def give_back_freed_heap() -> bool:
    """Whether the freed heap was given back (glibc's ``malloc_trim(0)``)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, found once (None where the C library has none)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # (only here: a graph that never makes a large page needs none)

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # (musl, or no C library to open)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim
