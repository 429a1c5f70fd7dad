"""The errors training raises on purpose, each a ``TpukitError``.

Each also derives from the built-in exception a Python user expects, so
``except ValueError`` keeps working, and ``except tpukit.TpukitError`` catches
every one of them (``fit`` shows them as one line, not a traceback into tpukit).

Example::

    >>> issubclass(TrainingInputError, ValueError), issubclass(CheckpointError, TpukitError)
    (True, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tpukit._errors import TpukitError

if TYPE_CHECKING:
    from tpukit.compilation import NanOrigin

    from ._history import History


class TrainingInputError(TpukitError, ValueError):
    """An input of ``fit`` or ``evaluate`` cannot work: data, batch size, loss, options."""


class TrainingTypeError(TpukitError, TypeError):
    """An input of ``fit`` or ``evaluate`` is the wrong kind of object."""


class CheckpointError(TpukitError, ValueError):
    """A checkpoint is missing, unfinished, damaged, or from another run or program."""


class NonFiniteLossError(TpukitError, FloatingPointError):
    """Training stopped because a step's loss, gradients or update were NaN or infinite.

    That step was not applied: the model and its optimizer state hold the values
    from just before it, and so does the newest checkpoint when ``checkpoint_dir``
    was given. ``epoch`` and ``step`` (1-based, within the run) say where it
    happened, ``execution`` which compiled call (1-based, counted over the run) ran
    that step; ``quantity`` names the first bad quantity (``"loss"``, ``"gradient of
    layers/0/kernel"``, ``"new value of layers/0/kernel"`` or ``"optimizer state
    0/nu/layers/0/kernel"``) and ``quantities`` all of them; ``history`` holds the
    figures up to there. ``origin`` is where that step's first NaN or infinity was made,
    found by running the step once more, operation by operation, from the kept state on
    the same batch (a :class:`tpukit.NanOrigin`, as :func:`tpukit.find_nan` returns; the
    model and optimizer state are not changed by it), or ``None`` when that run found no
    non-finite value.
    """

    def __init__(
        self,
        message: str,
        epoch: int,
        step: int,
        history: History,
        execution: int | None = None,
        quantities: Sequence[str] = (),
        origin: NanOrigin | None = None,
    ):
        super().__init__(message)
        self.epoch = epoch
        self.step = step
        self.history = history
        self.execution = execution
        self.quantities = tuple(quantities)
        self.quantity = self.quantities[0] if self.quantities else None
        self.origin = origin
