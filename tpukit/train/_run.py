"""One ``fit`` call while it runs: the loop that starts compiled calls and applies them.

:class:`Run` is complete when constructed: it holds the ``RunSpec`` (everything
fixed for the call, made by ``_setup.prepare``), where the run is (``Position``),
the :class:`~tpukit.train.History`, the ``Evaluator`` (``eval_data`` after each epoch)
and how to make the other collaborators, one per job (``_collaborators.Collaborators``):
``Progress`` (the epoch line), ``Checkpointing`` (when to save and what) and
:class:`~tpukit.train._guard.NonFiniteGuard` (the NaN stop). It makes them once its
first call is dispatched, so that the device does not wait on them. :meth:`Run.train`
is the loop that starts compiled calls and hands their figures to them.

Example::

    >>> look_ahead_fits((np.zeros(4, np.float32),))   # 16 bytes: calls go ahead
    True
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import jax
from flax import nnx

from tpukit._interrupts import HeldInterrupt, deferred_interrupts, held_interrupts
from tpukit.compilation import device_capacity
from tpukit.runtime import devices_of, one_at_a_time

from . import _steps
from ._again import StaleSetUp
from ._collaborators import Collaborators, InputWait
from ._data import ResidentData, StaleData
from ._figures import Figures
from ._flat import FlatState
from ._guard import replay_origin
from ._history import History
from ._kept import KeptForModel
from ._kept_split import KeptSplit
from ._progress import compile_count, compile_mark, unexpected_compiles
from ._setup import (
    Evaluator,
    RunSpec,
    block_indices_on_device,
    block_of,
    executions,
    shuffle_identity,
)
from ._state import Position, TrainingState


@dataclass
class _Flight:
    """A compiled call in flight: what was dispatched, and its results on the device."""

    steps: int
    fn: _steps.Step
    data: dict
    state: FlatState  # (params, rest, opt_state) after its steps
    stats: Figures
    dispatched: float  # time.perf_counter() at dispatch
    compiled: bool  # whether dispatching it compiled the function


class Run:
    """One ``fit`` call: the loop over epochs and compiled calls, and its collaborators."""

    def __init__(
        self,
        spec: RunSpec,
        model: nnx.Module,
        position: Position,
        history: History,
        collaborators: Callable[[], Collaborators],
        evaluator: Evaluator | None,
        started: float | None = None,
        kept: KeptForModel | None = None,
        unverified: Callable[[], bool] | None = None,
        show: bool = False,
    ):
        self.spec = spec
        self.model = model
        self.position = position
        self.history = history
        self._collaborators = collaborators  # made at the first dispatch (``_made``)
        self.show = show  # whether the progress line is drawn
        self.evaluator = evaluator
        self.names = ("loss", *spec.objective.metric_names)
        self.state: FlatState | None = None
        self._outputs = False  # whether ``state`` holds a compiled call's results
        # (block, its indices on the devices): the run's block of epochs, or the next one
        self._indices: tuple[int, jax.Array] | None = None
        # the next epoch's first call, dispatched ahead, and the rest of its calls
        self._next_epoch: tuple[_Flight, Iterator] | None = None
        self._evaluation: tuple[tuple, dict] | None = None  # (on what state, its figures)
        self._held = HeldInterrupt()  # a ^C that came while a call was dispatched ahead
        self._look_ahead = False  # whether calls are dispatched ahead (set by train)
        self._read = 0.0  # when the last call's figures came back (time.perf_counter())
        # Host pauses (checkpoint writes) since then, left out of the calls' seconds
        self._pauses: list[tuple[float, float]] = []
        # When the current epoch started: the call's start for its first epoch, then
        # the end of the one before, so that the epochs' seconds add up to the call's.
        self._epoch_start = time.perf_counter() if started is None else started
        self.kept = kept
        self._unchecked = [
            s.kept for s in (spec.source, getattr(evaluator, "source", None)) if _kept_of(s)
        ]
        self.input = InputWait(streamed=not isinstance(spec.source, ResidentData))
        # A repeated set-up's checks, made while the first call runs (``_again``): until
        # they pass, nothing is applied or written back (the model may not be the set-up's)
        self._unverified = unverified

    @functools.cached_property
    def _made(self) -> Collaborators:
        """The progress line, NaN guard and checkpoints: made once the first call is
        dispatched (:meth:`_dispatch`), or at the first use before (a run that stops)."""
        return self._collaborators()

    progress = property(lambda self: self._made.progress)
    guard = property(lambda self: self._made.guard)
    checkpointing = property(lambda self: self._made.checkpointing)

    # ----------------------------------------------------------------- the loop
    def train(self, state: FlatState) -> History:
        """Train from ``state`` (``(params, rest, opt_state)``, placed) to the last epoch.

        Whatever stops the loop (the last epoch, the NaN guard, an exception, ^C), the
        model gets the state of the last call that was applied whole, with the counters
        that go with it: each call is applied in one uninterruptible block
        (:func:`~tpukit._interrupts.deferred_interrupts`), and calls do not
        consume their input state, so an interrupted call is simply not applied.
        """
        pos, epochs = self.position, self.spec.options.epochs
        self.state = state  # the newest applied state, whatever stops the loop
        # On several simulated CPU devices each call is waited for as it is dispatched
        # (tpukit.runtime.settled): one dispatched ahead would only hold ^C meanwhile.
        self._look_ahead = not self.spec.options.callbacks and self.spec.once(
            "look_ahead",
            lambda: look_ahead_fits(state.leaves) and not one_at_a_time(devices_of(state.leaves)),
        )
        start, first_epoch_end = compile_mark(), None
        try:
            try:
                while pos.epoch < epochs:
                    self._epoch()
                    if first_epoch_end is None:
                        first_epoch_end = compile_mark()
                    if self.checkpointing and self.checkpointing.due_after_epoch(pos.epoch):
                        self._save()
                        self._end_epoch_clock()  # the epoch's save is part of its seconds
                    self.progress.close_epoch()  # its line's time: the epoch's seconds
                self._verify()  # (made already, unless the run had no call to make)
            except (StaleSetUp, StaleData):
                # nothing applied, and the call would start over: a ^C held while a call
                # was dispatched ahead stops it instead (the stale error as its context)
                self._held.deliver()
                raise
            if self.show and compile_mark() != start:  # something compiled: in the first epoch?
                note = unexpected_compiles(
                    start, compile_mark() if first_epoch_end is None else first_epoch_end
                )
                if note:
                    print(note, flush=True)
            if self.checkpointing:
                self._save()
        except KeyboardInterrupt:
            self._interrupted()
            raise
        finally:
            with deferred_interrupts():
                if self._unverified is None:
                    self._write_back(self.state)
                if self.checkpointing:
                    self.checkpointing.close()
        return self.history

    def _epoch(self) -> None:
        """Run the rest of the current epoch, one compiled call at a time.

        The next call is dispatched before this one's figures are read back, on this
        call's (not yet applied) result, so that the device never waits on the host
        between calls (:meth:`_ahead_of`). Only a call that was applied feeds the model:
        when a call trips the guard or the run stops, the call dispatched after it is
        dropped, unread.
        """
        pos = self.position
        if self.show:  # drawn before a call that compiles in its dispatch
            self._start_epoch()
        flight, calls = self._next_epoch or (None, None)
        self._next_epoch = None
        self._held.deliver()  # a ^C held while this epoch's first call was dispatched ahead
        calls = calls or self._executions()
        if flight is None:
            pending = next(calls, None)
            flight = self._dispatch(pending, self.state) if pending is not None else None
        if not self.show:  # (only book-keeping: once the device has its call)
            self._start_epoch()
        while flight is not None:
            t1 = time.perf_counter()
            pending = next(calls, None)  # the next chunk's transfer overlaps this call
            following = self._ahead_of(flight, pending)
            self._check_kept_data()  # on the host, while the device runs the first call
            t2 = time.perf_counter()
            stats = _on_host(flight.stats)
            t3 = time.perf_counter()
            seconds = self._call_seconds(max(flight.dispatched, self._read), t3)
            self._read = t3
            if not flight.compiled:  # a call that compiled says nothing about the input
                self.input.add(prepared=t2 - t1, device_wait=t3 - t2, seconds=seconds)
            if self.spec.guard and self.guard.tripped(stats):
                state, stopped = self._good_steps(flight.fn, flight.data)
                with deferred_interrupts():
                    self._apply(state, stopped, flight.steps, seconds)
                self._stop(stopped, flight)
            with deferred_interrupts():
                record = self._apply(flight.state, stats, flight.steps, seconds)
            self.progress.advance(flight.steps, self._running(), seconds, compiled=flight.compiled)
            if self.spec.options.callbacks:
                self._write_back(self.state)
                for callback in self.spec.options.callbacks:
                    callback(dict(record))
            if self.checkpointing and self.checkpointing.due_after_execution(pos.executions):
                self._save()
            self._held.deliver()  # a ^C held while the next call was dispatched ahead
            if following is None and pending is not None:
                following = self._dispatch(pending, self.state)
            flight = following
        self._finish_epoch(self.state)

    def _start_epoch(self) -> None:
        pos = self.position
        self.progress.start_epoch(
            pos.epoch + 1,
            self.spec.options.epochs,
            self.spec.steps_per_epoch,
            initial=pos.step,
            started=self._epoch_start,
        )

    def _dispatch(self, pending: tuple[int, _steps.Step, dict], state: FlatState) -> _Flight:
        """Start one compiled call on ``state``; its results stay on the device."""
        steps, fn, data = pending
        before = compile_count(fn)
        dispatched = time.perf_counter()
        try:
            new_state, stats = fn(state, data)
        except Exception:
            if self._unverified is not None:  # an array of a stale set-up deleted, say
                self._verify()
            raise
        compiled = compile_count(fn) != before
        self.progress.speed.count_flops(fn, (state, data), steps)  # (MFU) the trace is made
        return _Flight(steps, fn, data, new_state, stats, dispatched, compiled)

    def _ahead_of(self, flight: _Flight, pending: tuple | None) -> _Flight | None:
        """Dispatch the call after ``flight`` on its result before reading it back, when
        that is safe: no callback may look at the model between calls, and the call
        needs no compiling (it is the same compiled function). At the epoch's end this
        starts the epoch's evaluation on ``flight``'s result (read back once that result
        is applied), then the next epoch's first call (its block of indices is shuffled
        and sent now if not yet there). A dispatch ahead that fails (the device out of memory for the extra
        copy, say) turns the look-ahead off: the call is dispatched again at its turn,
        where an error that persists is raised with everything before it applied."""
        speculate = self._look_ahead
        if pending is not None:
            if speculate and pending[1] is flight.fn:
                return self._dispatch_ahead(pending, flight.state)
            return None
        self._prefetch_next_epoch()
        if self.evaluator is not None:  # queued before the next epoch's call, not after it
            state = flight.state
            self._evaluation = (state, self.evaluator.start(state.params, state.rest))
        pos, resident = self.position, isinstance(self.spec.source, ResidentData)
        if speculate and resident and pos.epoch + 1 < self.spec.options.epochs:
            indices = self._block(pos.epoch_base + pos.epoch + 1)
            if indices is not None:
                ahead = Position(epoch_base=pos.epoch_base, epoch=pos.epoch + 1)
                calls = executions(self.spec, ahead, indices)
                first = next(calls, None)
                if first is not None and first[1] is flight.fn:
                    ahead_flight = self._dispatch_ahead(first, flight.state)
                    if ahead_flight is not None:
                        self._next_epoch = (ahead_flight, calls)
        return None

    def _dispatch_ahead(self, pending: tuple, state: FlatState) -> _Flight | None:
        """:meth:`_dispatch` ahead of the call's turn: a ^C meanwhile is held until its
        turn; a failure turns the look-ahead off and leaves the call for its turn."""
        try:
            with held_interrupts() as self._held:
                return self._dispatch(pending, state)
        except StaleSetUp:
            raise
        except Exception:  # noqa: BLE001 - the call is dispatched again at its turn
            self._look_ahead = False
            return None

    def _good_steps(self, fn: _steps.Step, data: dict) -> tuple[FlatState, dict]:
        """The state after a tripped call's good steps, and the stats naming the bad one.

        The call did not consume its input, so its steps run again from it with every
        quantity of every step checked: the state that comes back holds the good steps
        and nothing after, and the flags say which step went bad and how. (Should that
        run find nothing, as a non-deterministic reduction could make it, nothing of
        the call is kept.)
        """
        state, diagnosed = fn.diagnosis()(self.state, data)
        diagnosed = _on_host(diagnosed)
        if int(diagnosed["bad_step"]) < 0:
            zero = {n: 0.0 for n in self.names}
            return self.state, {**zero, "steps": 0, "bad_step": 0, "finite": None}
        return state, diagnosed

    def _executions(self) -> Iterator[tuple[int, _steps.Step, dict]]:
        """``(steps, compiled call, its data)`` for the rest of the current epoch."""
        pos, spec = self.position, self.spec
        ready = None
        if isinstance(spec.source, ResidentData):
            epoch = pos.epoch_base + pos.epoch
            ready = self._block(epoch)
            if ready is None:
                block, _ = block_of(spec, epoch)
                ready = self._keep_block(block, block_indices_on_device(spec, block))
        return executions(spec, pos, ready)

    def _block(self, epoch: int) -> jax.Array | None:
        """The indices of the block holding ``epoch`` (over the model's training) when on
        the devices already (this run's, or an earlier ``fit``'s kept beside the model)."""
        block, _ = block_of(self.spec, epoch)
        if self._indices is not None and self._indices[0] == block:
            return self._indices[1]
        if self.kept is None:
            return None
        found = self.kept.indices_for(shuffle_identity(self.spec, block))
        if found is not None:
            self._indices = (block, found)
        return found

    def _keep_block(self, block: int, indices: jax.Array) -> jax.Array:
        """Block ``block``'s ``indices``, kept for this run and beside the model."""
        self._indices = (block, indices)
        if self.kept is not None:
            self.kept.indices = (shuffle_identity(self.spec, block), indices)
        return indices

    def _prefetch_next_epoch(self) -> None:
        """When the next epoch is in the next block of indices (``_setup.shuffle_block``),
        shuffle its epochs and start their transfer while the device still runs this
        epoch's last call, so that the next epoch (or, after the last, the next ``fit``
        with the same data and settings) starts without a gap."""
        pos, spec = self.position, self.spec
        if not isinstance(spec.source, ResidentData):
            return
        if pos.epoch + 1 >= spec.options.epochs and self.kept is None:
            return
        epoch = pos.epoch + 1 + pos.epoch_base
        if self._block(epoch) is None:
            block, _ = block_of(spec, epoch)
            self._keep_block(block, block_indices_on_device(spec, block))

    def _apply(self, state: FlatState, stats: dict, steps: int, seconds: float) -> dict:
        """Take one call's new state, advance the position by its steps and add its
        figures to the history: one block, run inside ``deferred_interrupts``."""
        pos = self.position
        done = int(stats["steps"])
        sums = dict(pos.epoch_sums)
        for n in self.names:
            sums[n] = sums.get(n, 0.0) + float(stats[n])
        sums["steps"] = sums.get("steps", 0) + done
        record = {
            "epoch": pos.epoch + 1,
            "step": pos.step + done,
            "global_step": pos.global_step + done,
            **{n: float(stats[n]) / max(done, 1) for n in self.names},
            "steps_per_s": steps / max(seconds, 1e-9),
        }
        self.state = state
        self._outputs = True
        pos.step += done
        pos.global_step += done
        pos.executions += 1
        pos.epoch_sums = sums
        self.history.add_execution(record)
        return record

    def _running(self) -> dict[str, float]:
        sums = self.position.epoch_sums
        return {n: sums.get(n, 0.0) / max(sums.get("steps", 0), 1) for n in self.names}

    def _finish_epoch(self, state: FlatState) -> None:
        pos = self.position
        figures = self._running()
        if self.evaluator is not None:
            started_on, values = self._evaluation or (None, None)
            self._evaluation = None
            if started_on is not state:
                values = None
            figures.update(self.evaluator(state.params, state.rest, values))
        with deferred_interrupts():
            self.history.add_epoch(
                {
                    "epoch": pos.epoch + 1,
                    **figures,
                    "steps": pos.step,
                    "seconds": 0.0,  # set by _end_epoch_clock
                }
            )
            self._end_epoch_clock()
            pos.epoch += 1
            pos.step = 0
            pos.epoch_sums = {}
        self.progress.end_epoch(figures)  # closed after the epoch's checkpoint (`_run`)
        note = self.input.verdict()
        if note and self.show:
            self.progress.close_epoch()
            print(f"tpukit.fit: {note}", flush=True)

    def _end_epoch_clock(self) -> None:
        """The last epoch's seconds: from its start (the call's start, or the end of the
        epoch before) to now; the next epoch starts now. Called again after the epoch's
        checkpoint is written, which then counts in it too."""
        now = time.perf_counter()
        epoch = self.history.epochs[-1]
        epoch["seconds"] = epoch.get("seconds", 0.0) + now - self._epoch_start
        self._epoch_start = now

    def _save(self) -> None:
        """Write a checkpoint; its time is left out of the calls' seconds (steps/s)."""
        begin = time.perf_counter()
        with deferred_interrupts():
            self.checkpointing.save(self.position, self.history, self.state.tree())
        self._pauses.append((begin, time.perf_counter()))

    def _call_seconds(self, start: float, end: float) -> float:
        """``end - start`` less the host's pauses (checkpoint writes) inside it."""
        paused = sum(max(0.0, min(b, end) - max(a, start)) for a, b in self._pauses)
        self._pauses = [(a, b) for a, b in self._pauses if b > end]
        return max(end - start - paused, 0.0)

    def _verify(self) -> None:
        """Make the repeated set-up's checks left for this run; :class:`StaleSetUp` when
        one fails (nothing applied: the call starts over, set up afresh)."""
        verify, self._unverified = self._unverified, None
        if verify is not None and not verify():
            self._unverified = verify  # still unverified: nothing is written back
            raise StaleSetUp

    def _check_kept_data(self) -> None:
        """Before the run's first call is applied: the model and optimizer of a repeated
        set-up must be its own (:meth:`_verify`), and the kept data it trains on still what
        was placed (``_data.KeptData``); else nothing is applied (:class:`StaleData`)."""
        if self._unverified is not None:
            self._verify()
        if not self._unchecked:
            return
        unchecked, self._unchecked = self._unchecked, []
        changed = [k for k in unchecked if not k.unchanged()]
        if changed:
            raise StaleData([k.name for k in changed])

    def _stop(self, stats: dict, flight: _Flight) -> None:
        """Raise the guard's error, with where the bad step's first NaN came from;
        checkpoint the last good state first."""
        pos = self.position
        self.progress.close_epoch()
        if self.checkpointing:
            with deferred_interrupts():
                self.checkpointing.save(
                    pos, self.history, self.state.tree()
                )  # unless saved already
        error = self.guard.error(
            stats["finite"],
            self._where(pos.step + 1, pos.global_step + 1),
            pos.global_step if self.checkpointing else None,
            self.history,
            origin=(
                replay_origin(flight.fn, flight.data, int(stats["bad_step"]), self.state.tree())
                if self.spec.find_nan_origin
                else None
            ),
            origin_searched=self.spec.find_nan_origin,
            epoch=pos.epoch + 1,
            step=pos.step + 1,
            execution=pos.executions,
        )
        if self.checkpointing:
            self.checkpointing.mark_stopped(pos.global_step, str(error))
        raise error

    def _where(self, step: int, global_step: int) -> str:
        pos, spec = self.position, self.spec
        where = f"epoch {pos.epoch + 1} of {spec.options.epochs}, step {step}"
        if spec.steps_per_epoch:
            where += f" of {spec.steps_per_epoch}"
        return where + f" (global step {global_step}, execution {pos.executions})"

    def _interrupted(self) -> None:
        """Say what the model holds after ^C, and how to go on."""
        pos = self.position
        self.progress.close_epoch()
        if pos.step:
            held = f"{pos.epoch} epochs and {self._where(pos.step, pos.global_step)}"
        else:
            held = (
                f"{pos.epoch} epochs of {self.spec.options.epochs} (global step {pos.global_step})"
            )
        left = self.spec.options.epochs - pos.epoch
        message = (
            f"Interrupted: the model holds the state after {held}, the last compiled call "
            f"applied whole, with its optimizer state and counters. fit(..., epochs={left}) "
            "with the same data continues exactly where this run stopped."
        )
        self.history.stopped = message
        if self.show:
            print(f"tpukit.fit: {message}", flush=True)

    def _write_back(self, state: FlatState) -> None:
        """Put the run's state into the model and its :class:`TrainingState`: the
        model's Variables set from the state's leaves, and the optimizer state kept as
        the state's part (no tree is built: ``_flat``)."""
        pos = self.position
        model_leaves = state.leaves[: state.model_leaves]
        # a call's results are live (fit never deletes them); the state given may not be
        live = self._outputs or _live(state.leaves)
        if live or _live(model_leaves):
            if self.kept is not None:
                KeptSplit.beside(self.kept).write_back(
                    self.model,
                    self.spec.graphdef,
                    state,
                    checked=not self.spec.options.callbacks,  # only callbacks touch the model
                )
            else:
                nnx.update(self.model, state.params, state.rest)
        TrainingState.of(self.model).advance(
            pos.epoch_base + pos.epoch,
            pos.global_step,
            self.spec.program.key,
            state if live or _live(state.optimizer_leaves()) else None,
            in_epoch=(pos.step, dict(pos.epoch_sums), self.spec.settings()) if pos.step else None,
        )
        last = getattr(self.kept, "last", None)
        if last is not None and last.spec.memo is self.spec.memo:  # the next call's state
            last.written = state if live else None


#: Calls are dispatched ahead only while a third copy of the training state (the
#: applied one, the current call's result, the next call's) takes at most this share
#: of a device's memory; for a state that large a call is long and the gap small.
LOOK_AHEAD_SHARE = 0.05
#: Where the device does not say its memory (CPU): the most state dispatched ahead.
LOOK_AHEAD_BYTES = 256 * 2**20


def look_ahead_fits(state: Any) -> bool:
    """Whether one more copy of ``state`` (a tree, or its leaves; its bytes over all
    devices, an upper bound of what one device holds) is small beside a device's memory."""
    leaves = jax.tree.leaves(state)
    size = sum(getattr(x, "nbytes", 0) for x in leaves)
    devices = [d for x in leaves[:1] for d in getattr(x, "devices", lambda: ())()]
    capacity, _ = device_capacity(devices[0]) if devices else (None, "")
    return size <= (capacity * LOOK_AHEAD_SHARE if capacity else LOOK_AHEAD_BYTES)


def _kept_of(source: Any) -> bool:
    """Whether ``source`` is resident data kept for (or taken from) another call."""
    return getattr(source, "kept", None) is not None


def _on_host(stats: Figures) -> dict:
    """A call's figures as a dict of NumPy values, read back in one piece (``_figures``)."""
    return stats.on_host()


def _live(leaves: list) -> bool:
    return not any(getattr(x, "is_deleted", lambda: False)() for x in leaves)
