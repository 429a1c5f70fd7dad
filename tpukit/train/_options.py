"""The options of one ``fit`` call, checked once and frozen.

:func:`tpukit.fit` and :meth:`tpukit.Trainer.fit` take the same options; both turn
them into one :class:`RunOptions` before anything else happens, so a bad option
fails before any data is placed or any step compiled, and the run reads its
options from one object instead of a dozen parameters.

Example::

    >>> RunOptions(epochs=3, batch_size=128).steps_per_execution
    'epoch'
    >>> RunOptions(epochs=0)
    Traceback (most recent call last):
    ...
    tpukit.train._exceptions.TrainingInputError: epochs must be a positive whole number; got 0.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tpukit._counts import as_count, is_integer

from ._exceptions import TrainingInputError, TrainingTypeError

RESUME_CHOICES = (False, True, "latest_good", "force")


@dataclass(frozen=True, eq=False)  # holds arrays: compared by identity
class RunOptions:
    """How one ``fit`` call runs; see :func:`tpukit.fit` for each option."""

    epochs: int
    batch_size: int | None = None
    eval_data: Any = None
    eval_batch_size: int | None = None
    steps_per_execution: int | str = "epoch"
    shuffle: bool = True
    seed: int = 0
    checkpoint_dir: str | os.PathLike | None = None
    checkpoint_every: int | None = None
    resume: bool | str = False
    callbacks: Sequence[Callable[[dict], Any]] = ()
    verbose: bool = True

    def __post_init__(self) -> None:
        epochs = as_count(self.epochs, "epochs", error=TrainingInputError)
        spe = self.steps_per_execution
        if not (isinstance(spe, str) and spe == "epoch"):
            if not is_integer(spe) or spe < 1:
                raise TrainingInputError(
                    f"steps_per_execution must be 'epoch' or a positive int; got {spe!r}."
                )
            object.__setattr__(self, "steps_per_execution", int(spe))
        if self.checkpoint_every is not None:
            every = as_count(self.checkpoint_every, "checkpoint_every", error=TrainingInputError)
            object.__setattr__(self, "checkpoint_every", every)
        if not isinstance(self.resume, bool) and self.resume not in RESUME_CHOICES[2:]:
            raise TrainingInputError(
                f"resume must be False, True, 'latest_good' or 'force'; got {self.resume!r}."
            )
        if self.resume and self.checkpoint_dir is None:
            raise TrainingInputError(
                f"resume={self.resume!r} needs checkpoint_dir=... (the folder of the run to "
                "continue)."
            )
        object.__setattr__(self, "epochs", epochs)
        object.__setattr__(self, "seed", int(self.seed))
        object.__setattr__(self, "shuffle", bool(self.shuffle))
        object.__setattr__(self, "callbacks", tuple(self.callbacks))

    @classmethod
    def of(cls, options: dict[str, Any]) -> RunOptions:
        """``RunOptions(**options)``, with unknown names said plainly."""
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = [name for name in options if name not in known]
        if unknown:
            raise TrainingTypeError(
                f"fit() got unknown option{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))}; its options are {', '.join(known)}."
            )
        return cls(**options)
