"""What a later ``fit`` call on the same model keeps from the last one, beside the model.

A notebook calls ``fit`` again and again on the same model and arrays (a few more
epochs, a new learning rate). :class:`KeptForModel` lives in the model's
:class:`~tpukit.train.TrainingState` and holds what such a call need not redo: the
data placed on the devices by role (``train_data``, ``eval_data``: ``_data.KeptData``,
placed, found again and checked against in-place changes by ``_data``), the
shuffled indices of the next epochs already on the devices (``_setup.shuffle_block``),
the model's split as the last call wrote it (``_kept_split``) and the last call's
set-up (``_again``).

``TrainingState.of(model).release_data()`` frees the kept data's device memory now.

Example::

    >>> kept = KeptForModel()
    >>> kept.indices_for(("settings", 0)) is None   # nothing kept yet
    True
"""

from __future__ import annotations

from typing import Any


class KeptForModel:
    """Everything kept beside one model for its next ``fit``: data by role, the
    shuffle of the next epochs' block, already on the devices, the model's split as the last
    call wrote it (``_kept_split.KeptSplit``) and the last call's set-up
    (``_again.LastSetUp``)."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}  # by role: ``_data.KeptData``
        self.indices: tuple[tuple, Any] | None = None  # (which block, the device array)
        self.split: Any = None  # the model as the last call wrote it (``_kept_split``)
        self.last: Any = None  # the last call's set-up, for a call that repeats it

    def forget(self, names: list[str] | None = None) -> None:
        """Drop the kept copies of ``names`` (all when ``None``)."""
        for name in list(self.data) if names is None else names:
            self.data.pop(name, None)
        self.last = None  # its set-up held the copies

    def indices_for(self, what: tuple) -> Any:
        """The shuffled indices kept for ``what`` (settings and block), or ``None``; they
        stay kept: the calls of every epoch in the block take them."""
        kept = self.indices
        return kept[1] if kept is not None and kept[0] == what else None
