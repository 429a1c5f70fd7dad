"""What a training run reports: per-execution and per-epoch figures, and their plot.

Example::

    >>> h = History()
    >>> h.add_epoch({"epoch": 1, "loss": 0.5, "accuracy": 0.8})
    >>> h["loss"]
    [0.5]
"""

from __future__ import annotations

import html
import math
from typing import Any


class History:
    """The figures of one :func:`tpukit.fit` call.

    Attributes:
        epochs: one dict per finished epoch: ``epoch`` (1-based, counted within the
            run), ``loss`` and each metric (means over the epoch's steps), the same
            with a ``val_`` prefix when ``eval_data`` was given, ``steps`` and
            ``seconds``.
        executions: one dict per compiled call: ``epoch``, ``step`` (the step
            reached within the epoch), ``global_step`` (counted over the model's
            whole training, so a second ``fit`` call counts on), ``loss``, metrics and
            ``steps_per_s``.
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
            raise KeyError(f"No figure {name!r} in this history; it has {self.metric_names}.")
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

            >>> fig = history.plot()          # doctest: +SKIP
            >>> fig.savefig("curves.png")     # doctest: +SKIP
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

    def __repr__(self) -> str:
        if not self.epochs:
            return f"History(no finished epochs, {len(self.executions)} executions)"
        cols = self._columns()
        rows = [[self._fmt(rec.get(c, "")) for c in cols] for rec in self.epochs]
        widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
        lines = ["  ".join(c.rjust(w) for c, w in zip(cols, widths, strict=True))]
        lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
        tail = f"\nstopped: {self.stopped}" if self.stopped else ""
        return "History\n" + "\n".join(lines) + tail

    def _repr_html_(self) -> str:
        cols = self._columns()
        head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
        body = "".join(
            "<tr>"
            + "".join(f"<td>{html.escape(self._fmt(rec.get(c, '')))}</td>" for c in cols)
            + "</tr>"
            for rec in self.epochs
        )
        note = f"<p>stopped: {html.escape(self.stopped)}</p>" if self.stopped else ""
        return (
            f"<table class='tpukit-history'><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>{note}"
        )
