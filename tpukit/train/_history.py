"""What a training run reports: per-execution and per-epoch figures, and their plot.

Example::

    >>> h = History()
    >>> h.add_epoch({"epoch": 1, "loss": 0.5, "accuracy": 0.8})
    >>> h["loss"]
    [0.5]
"""

from __future__ import annotations

import math
from typing import Any

from tpukit._errors import UnknownNameError
from tpukit.display import Column, Line, Report, Table, format_seconds


class History:
    """The figures of one :func:`tpukit.fit` call.

    Attributes:
        epochs: one dict per finished epoch: ``epoch`` (1-based, counted within the
            run), ``loss`` and each metric (means over the epoch's steps), the same
            with a ``val_`` prefix when ``eval_data`` was given, ``steps`` and
            ``seconds``: the epoch's wall time (the first from the start of the ``fit``
            call, its set-up and compiling included; its evaluation and checkpoint
            writes included), so the epochs' seconds add up to the call's.
        executions: one dict per compiled call: ``epoch``, ``step`` (the step
            reached within the epoch), ``global_step`` (counted over the model's
            whole training, so a second ``fit`` call counts on), ``loss``, metrics and
            ``steps_per_s`` (from the call's dispatch, or the last read-back, to its
            read-back; checkpoint writes meanwhile left out).
        stopped: ``None``, or why training stopped early (e.g. a non-finite loss).
        sharding: a :class:`~tpukit.train.ShardingSummary` of the run's layout (mesh
            shape, per-device batch, per-device parameter and optimizer bytes);
            ``None`` for a history built by hand. Not stored in checkpoints.
    """

    def __init__(self) -> None:
        self.epochs: list[dict[str, Any]] = []
        self.executions: list[dict[str, Any]] = []
        self.stopped: str | None = None
        self.sharding: Any = None

    def add_execution(self, record: dict[str, Any]) -> None:
        self.executions.append(dict(record))

    def add_epoch(self, record: dict[str, Any]) -> None:
        self.epochs.append(dict(record))

    @property
    def metric_names(self) -> list[str]:
        """Figure names found in the per-epoch records, ``loss`` first."""
        skip = {"epoch", "steps", "seconds"}
        names: list[str] = []
        for rec in self.epochs:
            for k in rec:
                if k not in skip and k not in names:
                    names.append(k)
        return sorted(
            names, key=lambda n: (n.removeprefix("val_") != "loss", n.startswith("val_"), n)
        )

    def __getitem__(self, name: str) -> list[float]:
        """The per-epoch values of one figure, e.g. ``history["val_accuracy"]``."""
        if not any(name in rec for rec in self.epochs):
            raise UnknownNameError(
                f"No figure {name!r} in this history; it has {self.metric_names}. "
                "Ask for one of those, e.g. history['loss']."
            )
        return [rec.get(name, math.nan) for rec in self.epochs]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly copy (stored in checkpoints)."""
        return {"epochs": self.epochs, "executions": self.executions, "stopped": self.stopped}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> History:
        h = cls()
        h.epochs = [dict(r) for r in d.get("epochs", [])]
        h.executions = [dict(r) for r in d.get("executions", [])]
        h.stopped = d.get("stopped")
        return h

    def plot(self, figsize: tuple[float, float] | None = None) -> Any:
        """Draw loss and each metric (train and ``val_``) against epochs; return the figure.

        Per-execution values are drawn faintly behind the per-epoch means, so a run of
        one or two epochs still shows a curve. In a notebook the figure shows once,
        whether it is the cell's value, assigned, or the line ends with ``;``.

        Example::

            >>> h.add_epoch({"epoch": 2, "loss": 0.3, "accuracy": 0.9})
            >>> fig = h.plot()
            >>> [ax.get_title() for ax in fig.axes]
            ['loss', 'accuracy']
            >>> fig.savefig("curves.png")
        """
        from tpukit.display import new_figure

        bases = [n for n in self.metric_names if not n.startswith("val_")]
        bases += [n[4:] for n in self.metric_names if n.startswith("val_") and n[4:] not in bases]
        bases = bases or ["loss"]
        fig, axes = new_figure(
            ncols=len(bases),
            figsize=figsize or (4.5 * len(bases), 3.4),
            squeeze=False,
            layout="constrained",
        )
        total_steps = {}
        for rec in self.epochs:
            total_steps[rec["epoch"]] = rec.get("steps", 0)
        for ax, base in zip(axes[0], bases, strict=True):
            runs = [r for r in self.executions if base in r]
            if runs:
                xs = [
                    r["epoch"] - 1 + r["step"] / max(total_steps.get(r["epoch"], r["step"]) or 1, 1)
                    for r in runs
                ]
                ax.plot(
                    xs,
                    [r[base] for r in runs],
                    color="C0",
                    alpha=0.3,
                    lw=1,
                    label=f"{base} (per execution)",
                )
            for name, color in ((base, "C0"), (f"val_{base}", "C1")):
                pts = [(r["epoch"], r[name]) for r in self.epochs if name in r]
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker="o", color=color, label=name)
            ax.set_xlabel("epoch")
            ax.set_title(base)
            ax.grid(alpha=0.3)
            ax.legend(fontsize="small")
        return fig

    def _columns(self) -> list[str]:
        return ["epoch", *self.metric_names, "seconds"]

    @staticmethod
    def _fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    def _report(self) -> Report:
        """One row per finished epoch, and why the run stopped early when it did."""
        if not self.epochs:
            title = f"History(no finished epochs, {len(self.executions)} executions)"
            return Report("tpukit-history", title)
        cols = self._columns()
        table = Table(
            [Column(c, "right", format_seconds if c == "seconds" else self._fmt) for c in cols],
            [[rec.get(c, "") for c in cols] for rec in self.epochs],
        )
        stopped = [Line(f"stopped: {self.stopped}", "warn")] if self.stopped else []
        return Report("tpukit-history", "History", [table, *stopped])

    def __repr__(self) -> str:
        return self._report().text()

    def _repr_html_(self) -> str:
        return self._report().html()
