"""A ``fit`` run's small collaborators: the progress line, the input-wait verdict, checkpoints.

:class:`~tpukit.train._run.Run` reports each compiled call to them:
:class:`Progress` keeps the epoch line (``_progress.EpochBar``), :class:`InputWait`
says when streamed input kept the device waiting, and :class:`Checkpointing` says
when the run saves and what a checkpoint records besides the arrays. The run makes
them (:class:`Collaborators`) once its first call is dispatched, so the device does
not wait on them.

Example::

    >>> wait = InputWait(streamed=True)
    >>> wait.add(prepared=0.9, device_wait=0.0, seconds=1.0)
    >>> wait.verdict().startswith("waiting on the host for input")
    True
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import jax

import tpukit.checkpoint as _checkpoint
from tpukit.measure import peak_for

from ._flat import FlatState
from ._guard import NonFiniteGuard
from ._history import History
from ._progress import EpochBar, Speed
from ._setup import RunSpec
from ._state import Position


class Progress:
    """The epoch line (``_progress.EpochBar``) and the speed figure it shows; ``note``
    goes on the call's first line (how the data got to the devices)."""

    def __init__(self, show: bool, speed: Speed, note: str = ""):
        self.show = show
        self.speed = speed
        self.note = note
        self.bar: EpochBar | None = None
        self._final: dict | None = None  # the open line's final figures (`end_epoch`)

    def start_epoch(
        self, epoch: int, epochs: int, total: int | None, initial: int, started: float
    ) -> None:
        self.close_epoch()  # the epoch before's, when nothing closed it
        note, self.note = self.note, ""
        self.bar = EpochBar(
            epoch,
            epochs,
            total,
            self.show,
            initial=initial,
            speed=self.speed,
            started=started,
            note=note,
        )

    def advance(self, steps: int, figures: dict, seconds: float, compiled: bool) -> None:
        self.bar.advance(steps, figures, seconds, compiled=compiled)

    def end_epoch(self, figures: dict) -> None:
        """The epoch's figures are final; its line stays open until `close_epoch`, after
        the epoch's checkpoint, so that its time is the epoch's wall time (``History``'s)."""
        self._final = figures

    def close_epoch(self, figures: dict | None = None) -> None:
        figures, self._final = figures or self._final, None
        if self.bar is not None:
            self.bar.close(figures)
            self.bar = None


class InputWait:
    """Whether the device waited for the host's data, for streamed ``train_data``.

    While a call runs, the host prepares the next call's chunk (draws batches from the
    iterable, stacks them, starts the transfer). When that takes longer than the call,
    the host no longer waits for the device afterwards: the device was idle, waiting
    for input. :meth:`verdict` says so once an epoch shows it, with the figures.
    """

    def __init__(self, streamed: bool):
        self.streamed = streamed
        self.prepared = self.device_wait = self.seconds = 0.0
        self.told = False

    def add(self, prepared: float, device_wait: float, seconds: float) -> None:
        self.prepared += prepared
        self.device_wait += device_wait
        self.seconds += seconds

    def verdict(self) -> str | None:
        """One line when preparing input took most of the time and the device sat idle."""
        bound = self.prepared > 0.5 * self.seconds and self.device_wait < 0.1 * self.seconds
        if not self.streamed or self.told or not bound:
            return None
        self.told = True
        return (
            f"waiting on the host for input: preparing the chunks took {self.prepared:.2f} s "
            f"of {self.seconds:.2f} s of calls, and the device finished each call before the "
            "next chunk was ready. Pass in-memory arrays (kept on the device) or make the "
            "iterable faster (fewer Python steps per batch, batches prepared ahead)."
        )


class Checkpointing:
    """When the run saves, and what a checkpoint records besides the arrays."""

    def __init__(self, store: _checkpoint.RunCheckpoints, spec: RunSpec):
        self.store = store
        self.spec = spec
        self._warned = False

    def due_after_execution(self, executions: int) -> bool:
        return bool(self.store.every) and executions % self.store.every == 0

    def due_after_epoch(self, epoch: int) -> bool:
        return self.store.every is None or epoch == self.spec.options.epochs

    def save(self, position: Position, history: History, state: tuple) -> None:
        params, rest, opt_state = state
        names, leaves, _ = _checkpoint.flatten(
            {"params": params, "state": rest, "optimizer": opt_state}
        )
        record = {
            **position.to_record(),
            **self.spec.settings(),
            "history": history.to_dict(),
            "fingerprint": self.spec.fingerprint.to_record() if self.spec.fingerprint else None,
        }
        if not self.store.save(position.global_step, names, leaves, record) and not self._warned:
            self._warned = True
            warnings.warn(
                f"Checkpoint step {position.global_step} was not written: the model holds NaN "
                "or infinite values (stop_on_nan=False let them through). tpukit never saves "
                "such a step; the older checkpoints are kept.",
                stacklevel=2,
            )

    def mark_stopped(self, step: int, message: str) -> None:
        self.store.mark_stopped(step, message)

    def close(self) -> None:
        self.store.close()


class Collaborators(NamedTuple):
    """What a run reports its calls to besides its history: the line, the NaN guard and
    the checkpoints (``None`` without a ``checkpoint_dir``)."""

    progress: Progress
    guard: NonFiniteGuard
    checkpointing: Checkpointing | None

    @classmethod
    def of(
        cls, spec: RunSpec, state: FlatState, show: bool, store: _checkpoint.RunCheckpoints | None
    ) -> Collaborators:
        """Those of a run of ``spec`` from ``state``; ``show``: the line is drawn."""
        peak = peak_for(jax.devices()[0].device_kind) if show else None
        placed = getattr(spec.source, "kept", None)
        return cls(
            Progress(
                show,
                Speed(spec.batch_size, peak, jax.device_count()),
                placed.note() if placed is not None else "",
            ),
            NonFiniteGuard(state),
            Checkpointing(store, spec) if store is not None else None,
        )
