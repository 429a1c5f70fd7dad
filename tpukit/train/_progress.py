"""The progress bar: one ``tqdm.auto`` bar per epoch, advanced once per execution.

``tqdm.auto`` draws a widget in Jupyter and Colab and a text bar in terminals.
The postfix shows steps per second and the running loss and metrics of the epoch.

Example::

    >>> bar = EpochBar(epoch=1, epochs=3, total=100, enabled=False)
    >>> bar.advance(50, {"loss": 0.7}, steps_per_s=1200.0)
    >>> bar.close()
"""

from __future__ import annotations

from typing import Any


class EpochBar:
    """A bar for one epoch of ``total`` steps (``None`` when the length is unknown)."""

    def __init__(self, epoch: int, epochs: int, total: int | None, enabled: bool, initial: int = 0):
        self._bar = None
        self._post: dict[str, Any] = {}
        if enabled:
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=total,
                initial=initial,
                desc=f"epoch {epoch}/{epochs}",
                unit="step",
                leave=True,
                dynamic_ncols=True,
            )

    def advance(self, steps: int, figures: dict[str, float], steps_per_s: float) -> None:
        """Move by ``steps`` and show ``figures`` (already averaged) and the rate."""
        if self._bar is None:
            return
        self._post = {"steps/s": f"{steps_per_s:,.0f}"}
        self._post.update({k: f"{v:.4g}" for k, v in figures.items()})
        self._bar.set_postfix(self._post, refresh=False)
        self._bar.update(steps)

    def close(self, figures: dict[str, float] | None = None) -> None:
        if self._bar is None:
            return
        if figures:
            self._post.update({k: f"{v:.4g}" for k, v in figures.items()})
            self._bar.set_postfix(self._post, refresh=True)
        self._bar.close()
