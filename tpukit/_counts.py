"""Counts a user passes (``repeat=``, ``epochs=``, ``num_classes=``): one check for all.

A count may be any integer a user holds, not only a Python ``int``: a NumPy
scalar (``np.int64(3)``, what ``x.shape[0] // 2`` or ``arr.sum()`` give), a 0-d
integer array, or anything else with ``__index__``. ``True`` and ``False`` are
refused (a flag is not a count), and so are floats, even whole ones (``3.0`` usually
comes from a ``/`` that should be ``//``). Each caller names the count and, if it
wishes, the ``TpukitError`` subclass to raise.

>>> import numpy as np
>>> as_count(np.int64(3), "repeat")
3
>>> as_count(0, "repeat")
Traceback (most recent call last):
tpukit._errors.ArgumentError: repeat must be a positive whole number; got 0.
>>> as_count(2.0, "epochs")
Traceback (most recent call last):
tpukit._errors.ArgumentError: epochs must be a positive whole number; got 2.0 (float). Pass an int such as 2 (use // rather than / to compute it).
"""

from __future__ import annotations

import operator
from typing import Any

from tpukit._errors import ArgumentError, TpukitError


def is_integer(value: Any) -> bool:
    """True for any integer type (``int``, NumPy integers, 0-d integer arrays), not ``bool``.

    >>> import numpy as np
    >>> is_integer(np.uint8(7)), is_integer(True), is_integer(3.0)
    (True, False, False)
    """
    if isinstance(value, bool) or type(value).__name__ in ("bool", "bool_"):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def as_count(
    value: Any,
    name: str,
    *,
    minimum: int = 1,
    error: type[TpukitError] = ArgumentError,
) -> int:
    """``value`` as a Python ``int`` of at least ``minimum``, or ``error`` saying what to pass.

    >>> as_count(np.int32(4), "cpu_devices")
    4
    """
    least = {1: "a positive whole number", 0: "a non-negative whole number"}
    expected = f"{name} must be {least.get(minimum, f'a whole number of at least {minimum}')}"
    if not is_integer(value):
        hint = ""
        if isinstance(value, float) and value.is_integer():
            hint = f" Pass an int such as {int(value)} (use // rather than / to compute it)."
        elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
            hint = f" Pass the number itself: {name}={value.strip()}."
        raise error(f"{expected}; got {value!r} ({type(value).__name__}).{hint}")
    count = operator.index(value)
    if count < minimum:
        raise error(f"{expected}; got {count}.")
    return count
