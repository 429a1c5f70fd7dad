"""What carries over from one ``fit`` call to the next on the same model, and where a run is.

Each model trained by :func:`tpukit.fit` has a :class:`TrainingState`: how many
epochs and steps it has trained (so the next call shuffles with the next epoch's
order and counts steps on), and the optimizer state with the key of the optimizer
program it belongs to (so the next call with the same optimizer, the same object
or an equal new one, continues Adam's moments). ``Trainer(model, ...).state`` and
``TrainingState.of(model)`` show it; ``state.reset()`` starts the counts and the
optimizer afresh.

tpukit keeps it beside the model, not in it: a table keyed by the model object,
holding the model only weakly, so delete the model and its training state goes
with it. Nothing is written into the model, so its structure, equality, copies
and pickles are exactly NNX's; a copy, clone or unpickled model is another object
and starts with a fresh state.

:class:`Position` is where one run is (its epoch, step and running sums): it starts
from the model's :class:`TrainingState` and is saved in every checkpoint.

Example::

    >>> from flax import nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> TrainingState.of(model).epochs_done
    0
    >>> Position.continuing(TrainingState.of(model), {}).to_record()["epoch"]
    0
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import jax

from ._flat import FlatState
from ._kept import KeptForModel


class TrainingState:
    """One model's training so far: epoch and step counts, and its optimizer state.

    Attributes:
        epochs_done: finished epochs over every ``fit`` call; epoch ``e`` of the
            model's training shuffles with ``(seed, e)``.
        steps_done: optimizer steps applied over every call (``global_step``).
        optimizer_key: the program key of the optimizer that ``opt_state`` belongs to.
        opt_state: that optimizer's state after the last call, or ``None``.
        in_epoch: ``None`` after a whole epoch; after a call stopped inside one (^C,
            the NaN guard, an error), ``(steps, sums, settings)``: the steps of epoch
            ``epochs_done + 1`` already applied, the running sums of its figures, and
            the run's settings (data size, batch size, seed, shuffle). The next ``fit``
            with the same settings finishes that epoch first, in the same order.
        kept: what the next call reuses (``_kept.KeptForModel``): the data placed on the
            devices, for a call given the same arrays, and the next epoch's shuffle.
    """

    def __init__(self) -> None:
        self.epochs_done = 0
        self.steps_done = 0
        self.optimizer_key: str | None = None
        self._opt_state: Any = None  # a tree, or the ``FlatState`` whose part it is
        self.in_epoch: tuple[int, dict[str, float], dict[str, Any]] | None = None
        self.kept = KeptForModel()

    @classmethod
    def of(cls, model: Any) -> TrainingState:
        """The model's training state, made (counts at zero) the first time it is asked for."""
        key = id(model)
        kept = _STATES.get(key)
        if kept is not None and kept[0]() is model:
            return kept[1]
        state = cls()
        _STATES[key] = (weakref.ref(model, lambda _, key=key: _STATES.pop(key, None)), state)
        return state

    @property
    def opt_state(self) -> Any:
        """The optimizer state after the last call, or ``None``. A call leaves it as the
        optimizer part of its flat state (``_flat.FlatState``): the tree is built when
        read, not by every call."""
        kept = self._opt_state
        return kept.opt_state if isinstance(kept, FlatState) else kept

    @opt_state.setter
    def opt_state(self, value: Any) -> None:
        self._opt_state = value

    def holds_optimizer_of(self, state: FlatState) -> bool:
        """Whether the kept optimizer state is ``state``'s optimizer part."""
        return self._opt_state is state

    def optimizer_state(self, key: str) -> Any:
        """The kept optimizer state if it belongs to optimizer program ``key``, else ``None``."""
        return self.opt_state if self.optimizer_whole(key) else None

    def optimizer_whole(self, key: str) -> bool:
        """Whether an optimizer state of program ``key`` is kept, no array of it deleted
        since (donated, say)."""
        kept = self._opt_state
        if key != self.optimizer_key or kept is None:
            return False
        leaves = kept.optimizer_leaves() if isinstance(kept, FlatState) else jax.tree.leaves(kept)
        for x in leaves:
            deleted = getattr(x, "is_deleted", None)
            if deleted is not None and deleted():
                return False
        return True

    def advance(
        self,
        epochs_done: int,
        steps_done: int,
        key: str,
        opt_state: Any,
        in_epoch: tuple[int, dict[str, float], dict[str, Any]] | None = None,
    ) -> None:
        """Record where training got to, and the optimizer state to continue from (a
        tree, or a ``FlatState`` whose optimizer part it is)."""
        self.epochs_done, self.steps_done = int(epochs_done), int(steps_done)
        self.optimizer_key, self.opt_state = key, opt_state
        self.in_epoch = in_epoch

    def steps_in_epoch(self, settings: dict[str, Any]) -> tuple[int, dict[str, float]]:
        """``(steps, sums)`` of the unfinished epoch when a run with ``settings`` can
        finish it; ``(0, {})`` when none is unfinished or the settings differ."""
        if self.in_epoch is None or self.in_epoch[2] != settings:
            return 0, {}
        return self.in_epoch[0], dict(self.in_epoch[1])

    def unfinished_epoch_note(self, settings: dict[str, Any]) -> str | None:
        """What a run with ``settings`` does to the epoch a stopped call left unfinished,
        when it cannot finish it (another batch size, data size, seed or shuffle, or
        streamed data); ``None`` when there is none or the run finishes it."""
        if self.in_epoch is None or self.in_epoch[2] == settings:
            return None
        steps, _, before = self.in_epoch
        changed = ", ".join(
            f"{_SETTING_NAMES.get(key, key)} {_setting(key, before.get(key))} -> "
            f"{_setting(key, settings.get(key))}"
            for key in sorted(set(before) | set(settings))
            if before.get(key) != settings.get(key)
        )
        epoch = self.epochs_done + 1
        return (
            f"The last fit on this model stopped {steps} steps into epoch {epoch}; this call "
            f"cannot continue that epoch ({changed}), so those {steps} steps stay in the model "
            f"and a new epoch {epoch} starts. To finish the stopped epoch instead, call fit "
            "with the same train_data, batch_size, seed and shuffle as the stopped one."
        )

    def reset(self) -> None:
        """Forget the counts and the optimizer state: the next ``fit`` starts at epoch 0."""
        self.epochs_done = self.steps_done = 0
        self.optimizer_key = self.opt_state = self.in_epoch = None

    def release_data(self) -> None:
        """Free the data kept on the devices for the next call (it is placed again then).

        Example::

            >>> TrainingState().release_data()
        """
        self.kept = KeptForModel()

    def __repr__(self) -> str:
        kept = "kept" if self._opt_state is not None else "none"
        inside = f", {self.in_epoch[0]} steps into the next epoch" if self.in_epoch else ""
        data = f", data kept: {', '.join(self.kept.data)}" if self.kept.data else ""
        return (
            f"TrainingState(epochs_done={self.epochs_done}, steps_done={self.steps_done}"
            f"{inside}, optimizer state: {kept}{data})"
        )


_SETTING_NAMES = {"n_examples": "train_data examples"}


def _setting(key: str, value: Any) -> str:
    """One run setting as the note on an unfinished epoch shows it."""
    if key == "n_examples" and value is None:
        return "streamed"
    return repr(value)


#: Each live model's training state, by ``id(model)``, with a weak reference that
#: drops the entry when the model goes.
_STATES: dict[int, tuple[weakref.ref, TrainingState]] = {}


@dataclass
class Position:
    """Where a run is; saved in every checkpoint, so a resumed run continues exactly."""

    epoch_base: int = 0  # epochs the model trained before this run (the shuffle key counts on)
    epoch: int = 0  # epochs finished in this run
    step: int = 0  # steps done in the current epoch
    global_step: int = 0  # steps over the model's whole training
    executions: int = 0  # compiled calls in this run
    epoch_sums: dict[str, float] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "step": self.step,
            "global_step": self.global_step,
            "executions": self.executions,
            "epoch_base": self.epoch_base,
            "epoch_sums": dict(self.epoch_sums),
        }

    @classmethod
    def continuing(cls, state: TrainingState, settings: dict[str, Any]) -> Position:
        """Where the model's training got to: after its last epoch, or inside an epoch
        that a stopped call left unfinished (when ``settings`` match that run's)."""
        step, sums = state.steps_in_epoch(settings)
        return cls(
            epoch_base=state.epochs_done,
            step=step,
            global_step=state.steps_done,
            epoch_sums=sums,
        )

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Position:
        return cls(
            epoch_base=record["epoch_base"],
            epoch=record["epoch"],
            step=record["step"],
            global_step=record["global_step"],
            executions=record["executions"],
            epoch_sums=dict(record.get("epoch_sums") or {}),
        )
