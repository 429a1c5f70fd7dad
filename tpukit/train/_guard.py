"""The NaN guard's report: where training stopped, and which quantity went bad first.

The compiled step (``_steps``) refuses a step whose loss, gradients, new
parameters or new optimizer state are not finite and skips the rest of the call;
it hands back the last good state, the index of the bad step and one finite flag
per quantity. :class:`NonFiniteGuard` turns those flags into a
:class:`NonFiniteLossError` that names the step and the quantity in words.

Example::

    >>> import jax.numpy as jnp
    >>> guard = NonFiniteGuard({"w": jnp.zeros(2)}, ())
    >>> guard.describe(["new value of w"])
    "the update of w (the loss and gradients were finite, the optimizer's result was not)"
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpukit.compilation import NanOrigin, search

from ._exceptions import NonFiniteLossError
from ._flat import FlatState
from ._history import History
from ._steps import Step, finite_names


class NonFiniteLossWarning(RuntimeWarning):
    """:func:`tpukit.evaluate` met a loss that is NaN or infinite.

    ``evaluate`` still returns its figures (the loss among them, non-finite); this
    warning says where the evaluation's first NaN or infinity was made. ``origin`` is
    that record (a :class:`tpukit.NanOrigin`, as :func:`tpukit.find_nan` returns: the
    operation, its source line, layer and inputs' ranges, or the data's rows), found by
    running the evaluation once more, operation by operation, after it came out
    non-finite; ``None`` when that run found nothing. ``figures`` are the figures
    ``evaluate`` returned.
    """

    def __init__(self, message: str, figures: dict[str, float], origin: NanOrigin | None):
        super().__init__(message)
        self.figures = dict(figures)
        self.origin = origin


_KINDS = ("gradient of ", "new value of ", "optimizer state ")


class NonFiniteGuard:
    """Reads the ``finite`` flags of a compiled call for a model and optimizer state."""

    def __init__(self, params: Any, opt_state: Any = None):
        self._state = (params, opt_state)  # or a ``_flat.FlatState`` as ``params``
        self._names: tuple[str, ...] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """What each ``finite`` flag is about (named when a call trips, not before: a run's
        state is a tree only then)."""
        if self._names is None:
            params, opt_state = self._state
            if isinstance(params, FlatState):
                params, opt_state = params.params, params.opt_state
            self._names = finite_names(params, opt_state)
        return self._names

    @staticmethod
    def tripped(stats: dict) -> bool:
        """Whether the call met a non-finite step, or ended in a non-finite state."""
        return int(stats["bad_step"]) >= 0 or not bool(stats.get("end_finite", True))

    def bad(self, finite: Any) -> list[str]:
        """The names of the quantities whose flag is down, in step order (none when the
        flags are unknown, ``finite=None``)."""
        if finite is None:
            return []
        return [n for n, ok in zip(self.names, np.asarray(finite), strict=True) if not ok]

    @staticmethod
    def describe(bad: list[str]) -> str:
        """The first quantity that went bad, in words."""
        if not bad:
            return "a value of this compiled call (its first bad step could not be pinned down)"
        if bad[0] == "loss":
            return "the loss"
        kind = next(k for k in _KINDS if bad[0].startswith(k))
        paths = [n.removeprefix(kind) for n in bad if n.startswith(kind)]
        shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
        plural = "s" if len(paths) > 1 else ""
        if kind == "gradient of ":
            return f"the gradient{plural} of {shown} (the loss was finite)"
        if kind == "new value of ":
            return (
                f"the update of {shown} (the loss and gradients were finite, the optimizer's "
                "result was not)"
            )
        return f"the optimizer state {shown} (the loss and gradients were finite)"

    def error(
        self,
        finite: Any,
        where: str,
        checkpoint_step: int | None,
        history: History,
        origin: NanOrigin | None = None,
        origin_searched: bool = True,
        **at: int,
    ) -> NonFiniteLossError:
        """The error to raise for a call whose ``finite`` flags are ``finite``; ``origin``
        is what the replay of the bad step found (:func:`replay_origin`), not searched
        for when ``origin_searched`` is false (``find_nan_origin=False``)."""
        bad = self.bad(finite)
        kept = "the model and the optimizer state keep their values from before it"
        if checkpoint_step is not None:
            kept += f", and so does the newest checkpoint (step {checkpoint_step})"
        if bad and not bad[0].startswith(("loss", "gradient of ")):
            advice = (
                "The optimizer's update is not finite though the gradients are: check its "
                "settings (an infinite or huge learning rate, eps=0 in Adam)."
            )
        else:
            advice = (
                "Try a smaller learning rate, gradient clipping (optax.clip_by_global_norm), "
                "or check the data for NaNs."
            )
        if checkpoint_step is not None:
            advice += (
                " Then resume=True continues from the checkpoint, with a changed optimizer too."
            )
        found = f" The first non-finite value: {origin.summary()}." if origin is not None else ""
        if not origin_searched:
            found = " Where its first non-finite value was made was not searched for "
            found += "(find_nan_origin=False)."
        message = (
            f"Training stopped: {self.describe(bad)} became NaN or infinite at {where}.{found} "
            f"The step was not applied: {kept}. {advice}"
        )
        history.stopped = message
        return NonFiniteLossError(
            message, history=history, quantities=bad or ["loss"], origin=origin, **at
        )


def replay_origin(step: Step, data: dict, index: int, state: tuple) -> NanOrigin | None:
    """Where step ``index`` (0-based) of a tripped call made its first non-finite value.

    That step runs once more, operation by operation (``tpukit.find_nan``'s search),
    from ``state`` (``(params, rest, opt_state)``, the state kept from before it: the
    same parameters, model state and random state) on the same batch. Nothing is
    written back, and nothing of it runs before a trip. A replay that cannot run (or
    is interrupted) gives ``None``: it never hides the stop itself.
    """
    replay = step.replay()
    if replay is None or index < 0:
        return None
    try:
        batch, rows = replay.batch_of(data, index)
        return search(
            replay.function,
            (*state, batch),
            {},
            # streamed batches have no dataset rows: their rows are the batch's
            names=(
                "params",
                "model state",
                "optimizer state",
                "train_data" if rows is not None else "batch",
            ),
            example_rows={"train_data": rows} if rows is not None else None,
        )
    except (Exception, KeyboardInterrupt):  # noqa: BLE001 - the stop is raised regardless
        return None
