"""The errors training raises on purpose, each a ``TpukitError``.

Each also derives from the built-in exception a Python user expects, so
``except ValueError`` keeps working, and ``except tpukit.TpukitError`` catches
every one of them (``fit`` shows them as one line, not a traceback into tpukit).

Example::

    >>> issubclass(TrainingInputError, ValueError), issubclass(CheckpointError, TpukitError)
    (True, True)
"""

from __future__ import annotations

from tpukit._errors import TpukitError


class TrainingInputError(TpukitError, ValueError):
    """An input of ``fit`` or ``evaluate`` cannot work: data, batch size, loss, options."""


class TrainingTypeError(TpukitError, TypeError):
    """An input of ``fit`` or ``evaluate`` is the wrong kind of object."""


class CheckpointError(TpukitError, ValueError):
    """A checkpoint is missing, unfinished, damaged, or from another run or program."""
