"""How ``fit`` shows its progress: one line per epoch, updated in place, nothing on stderr.

Where the line goes depends on where ``fit`` runs:

* an IPython kernel (JupyterLab, Notebook, VS Code, Colab) with ipywidgets 8, or
  Colab with its ipywidgets 7 (JupyterLab 4 and Notebook 7 draw only 8): a
  ``tqdm.notebook`` widget bar per epoch;
* any other IPython kernel: an HTML line per epoch, redrawn in place through
  ``display(..., display_id=True)`` and ``update``;
* a terminal or a log: a text line per epoch on stdout, redrawn with ``\\r`` on a
  terminal, written once when the epoch ends otherwise.

Each line holds the epoch, how far it got, the running loss and metrics, and one
speed figure: steps/s and examples/s over the epoch's compiled calls so far (a
call that compiled is left out, and said so when it is the only one; checkpoint
writes are left out too), plus MFU where the device's peak is known
(``tpukit.peak_for``) from the FLOPs of one step; then ``epoch 67 ms``, the epoch's
wall time so far (what ``History``'s ``seconds`` holds once it ends). A call's first
line also says how its data got to the devices (``data placed in 75 ms``, or ``data
kept on device`` when a later call was given the same arrays).

Example::

    >>> bar = EpochBar(epoch=1, epochs=3, total=100, enabled=False)
    >>> bar.advance(50, {"loss": 0.7}, seconds=0.05)
    >>> bar.close()
"""

from __future__ import annotations

import html
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tpukit.compilation import compiles, record_count
from tpukit.display import format_count, format_seconds, kernel_shell
from tpukit.hlo import executed, parse_hlo
from tpukit.measure import DevicePeak

#: Least seconds between two redraws of a line (the last one is always drawn).
REDRAW_SECONDS = 0.1
_BAR_WIDTH = 20


@dataclass
class Speed:
    """What turns steps and seconds into the speed figure: examples per step, FLOPs, peak."""

    batch_size: int
    peak: DevicePeak | None = None
    devices: int = 1
    flops_per_step: float | None = None

    def count_flops(self, fn: Any, args: tuple, steps: int) -> None:
        """Count one optimizer step's FLOPs from ``fn``'s lowered HLO (once; only for MFU).

        ``fn`` is a jitted call of ``steps`` steps; in its lowered HLO the ``scan`` is a
        while loop whose trip count tpukit reads from the loop counter, so the
        dot/convolution count as executed (`tpukit.hlo`) is ``steps`` steps' FLOPs. When
        the count cannot be read, the loop counts once: one step. Lowering reuses the
        trace the call itself makes; nothing is compiled.
        """
        if self.peak is None or self.flops_per_step is not None:
            return
        try:
            text = fn.lower(*args).as_text(dialect="hlo")
            run = executed(parse_hlo(text))
            self.flops_per_step = float(run.dot_flops) / (1 if run.unknown_loops else steps)
        except Exception:  # noqa: BLE001 - MFU is a nicety; the call itself reports real errors
            self.flops_per_step = 0.0  # counted once: no MFU for this run

    def describe(self, steps: int, seconds: float) -> str:
        """``'1,989 steps/s, 254,592 examples/s, MFU 12.3%'`` for ``steps`` in ``seconds``."""
        rate = steps / max(seconds, 1e-9)
        text = f"{rate:,.0f} steps/s, {rate * self.batch_size:,.0f} examples/s"
        if self.peak is not None and self.flops_per_step:
            mfu = self.flops_per_step * rate / (self.peak.flops_per_second * self.devices)
            text += f", MFU {mfu:.1%}"
        return text


def compile_count(fn: Any) -> int | None:
    """How many programs a jitted ``fn`` has compiled (``None`` when JAX does not say)."""
    size = getattr(fn, "_cache_size", None)
    return size() if callable(size) else None


#: fit's own jitted functions (the step, the evaluation, the copy that sends an epoch's
#: indices: ``_mesh.Plan.put_replicated``): they compile in the first epoch of a call,
#: again for sizes an earlier ``fit`` did not use.
FIRST_EPOCH_PROGRAMS = frozenset({"fit_step", "run", "put_indices"})


def compile_mark() -> int:
    """``tpukit.compiles().end``, the ledger's bookmark: how many compiles it holds, read
    without building ``compiles()``'s view (three per call, some 60 µs in situ)."""
    return record_count()


def unexpected_compiles(start: int, first_epoch_end: int) -> str | None:
    """The line a run says when a call compiled that should not have: a function
    compiled again inside the epochs, or anything compiled after the first epoch (whose
    first call, last shorter call and first evaluation compile once), from the ledger's
    mark ``start`` on; ``None`` when none did. tpukit's other functions (the checkpoint's
    checksums, compiled at the first save for the state's shapes) are its own business,
    not the run's."""
    found = compiles(since=start, ops=False).filter(
        where=lambda r: (
            (not r.internal or r.function in FIRST_EPOCH_PROGRAMS)
            and (
                r.number >= first_epoch_end
                or (r.recompile and r.function not in FIRST_EPOCH_PROGRAMS)
            )
        )
    )
    if not found:
        return None
    first = found[0]
    why = f": {first.reason}" if first.reason else ""
    return (
        f"tpukit.fit: {format_count(len(found), 'compile')} inside the epochs after the first "
        f"call, which should have none ({first.function}{why}); "
        f"tpukit.compiles(since={start}) shows them"
    )


class EpochBar:
    """The line for one epoch of ``total`` steps (``None`` when the length is unknown)."""

    def __init__(
        self,
        epoch: int,
        epochs: int,
        total: int | None,
        enabled: bool,
        initial: int = 0,
        speed: Speed | None = None,
        started: float | None = None,
        note: str = "",
    ):
        self.title = f"epoch {epoch}/{epochs}"
        self._title_width = len(f"epoch {epochs}/{epochs}")  # the run's widest, in ch
        self.note = note
        self.total = total
        self.done = initial
        self.speed = speed or Speed(batch_size=1)
        self.figures: dict[str, float] = {}
        self._timed_steps = 0
        self._timed_seconds = 0.0
        self._compile_seconds = 0.0
        self._started = time.perf_counter() if started is None else started
        self._line = _open_line(self) if enabled else None

    def advance(
        self, steps: int, figures: dict[str, float], seconds: float, compiled: bool = False
    ) -> None:
        """Add ``steps`` done in ``seconds`` (``compiled``: the call compiled first)."""
        self.done += steps
        self.figures = dict(figures)
        if compiled:
            self._compile_seconds += seconds
        else:
            self._timed_steps += steps
            self._timed_seconds += seconds
        if self._line is not None:
            self._line.draw(final=False)

    def close(self, figures: dict[str, float] | None = None) -> None:
        """Draw the line a last time, with the epoch's final ``figures`` (validation included)."""
        if figures:
            self.figures.update(figures)
        if self._line is not None:
            self._line.draw(final=True)
            self._line = None

    # ------------------------------------------------------------- the line
    def parts(self) -> tuple[str, list[str], str]:
        """``(progress, figures, speed)`` as text: ``'32/32'``, ``['loss 0.4778', ...]``, speed."""
        progress = f"{self.done}/{self.total}" if self.total else f"{self.done} steps"
        train = [n for n in self.figures if not n.startswith("val_")]
        names = train + [n for n in (f"val_{t}" for t in train) if n in self.figures]
        names += [n for n in self.figures if n not in names]
        figures = [f"{name} {self.figures[name]:.4g}" for name in names]
        if self._timed_steps:
            speed = self.speed.describe(self._timed_steps, self._timed_seconds)
        elif self._compile_seconds:
            speed = f"compiled and ran in {format_seconds(self._compile_seconds)}"
        else:
            speed = ""
        return progress, figures, speed

    def elapsed(self) -> str:
        """``'epoch 67 ms'``: the epoch's wall time so far, and the call's data note."""
        text = f"epoch {format_seconds(time.perf_counter() - self._started)}"
        return f"{text}, {self.note}" if self.note else text

    def fraction(self) -> float | None:
        return min(self.done / self.total, 1.0) if self.total else None

    def text(self) -> str:
        progress, figures, speed = self.parts()
        fraction = self.fraction()
        bar = ""
        if fraction is not None:
            filled = round(fraction * _BAR_WIDTH)
            bar = "█" * filled + "░" * (_BAR_WIDTH - filled) + " "
        return "  ".join(
            filter(None, [self.title, bar + progress, *figures, speed, self.elapsed()])
        )

    def html(self) -> str:
        """The line as HTML that wraps cleanly in a narrow output: the title keeps a
        column as wide as the run's widest (``epoch 10/10``), so the bars of all epochs
        line up; what follows wraps under the bar, never under the title, and only
        between whole groups (bar and count, the figures, the speed and time) before it
        wraps inside one, and never inside a figure."""
        progress, figures, speed = self.parts()
        fraction = self.fraction()
        head = f'<span style="{_NOWRAP}">{html.escape(progress)}</span>'
        if fraction is not None:
            head = (
                f'<span style="{_NOWRAP}">'
                '<span style="display:inline-block;vertical-align:middle;width:8em;height:.7em;'
                "border-radius:.35em;background:rgba(128,128,128,.25);overflow:hidden;"
                'margin-right:.6em">'
                f'<span style="display:block;height:100%;width:{fraction:.1%};'
                'background:var(--jp-brand-color1,var(--vscode-progressBar-background,#1976d2))">'
                f"</span></span>{html.escape(progress)}</span>"
            )
        groups = [head] + [
            f'<span style="{_ROW}">'
            + "".join(f'<span style="{_NOWRAP}">{html.escape(part)}</span>' for part in group)
            + "</span>"
            for group in (figures, [p for p in (speed, self.elapsed()) if p])
            if group
        ]
        return (
            '<div class="tpukit-out tpukit-progress" style="display:flex;align-items:baseline;'
            "font-family:var(--jp-code-font-family,ui-monospace,Menlo,Consolas,monospace);"
            "font-size:var(--jp-code-font-size,12px);line-height:1.6;"
            'color:var(--jp-ui-font-color1,inherit)">'
            f'<b style="{_NOWRAP};flex:none;min-width:{self._title_width}ch;margin-right:.6em">'
            f"{html.escape(self.title)}</b>"
            f'<div style="{_ROW};min-width:0">{"".join(groups)}</div></div>'
        )


# A flex row that wraps between its items (and no item inside itself)
_ROW = "display:flex;flex-wrap:wrap;align-items:baseline;column-gap:.9em;row-gap:0"
_NOWRAP = "white-space:nowrap"


# ------------------------------------------------------------------ where it goes
def _open_line(bar: EpochBar) -> Any:
    if kernel_shell() is None:
        return _TextLine(bar)
    if _widgets_work():
        return _WidgetLine(bar)
    return _HtmlLine(bar)


def _widgets_work() -> bool:
    """Whether ipywidgets can draw tqdm's bar: version 8, or 7 on Colab (JupyterLab 4 draws 8 only)."""
    try:
        import ipywidgets
    except ImportError:
        return False
    major = str(getattr(ipywidgets, "__version__", "0")).split(".")[0]
    return major.isdigit() and (int(major) >= 8 or "google.colab" in sys.modules)


class _Throttled:
    def __init__(self, bar: EpochBar):
        self.bar = bar
        self._last = 0.0

    def due(self, final: bool) -> bool:
        now = time.perf_counter()
        if final or now - self._last >= REDRAW_SECONDS:
            self._last = now
            return True
        return False


class _TextLine(_Throttled):
    """A line of text on stdout: redrawn with ``\\r`` on a terminal, else written at the end."""

    def __init__(self, bar: EpochBar, stream: Any = None):
        super().__init__(bar)
        self.stream = stream or sys.stdout
        isatty: Callable[[], bool] | None = getattr(self.stream, "isatty", None)
        self.in_place = bool(isatty and isatty())
        self.draw(final=False)

    def draw(self, final: bool) -> None:
        if not (self.in_place or final) or not self.due(final):
            return
        line = self.bar.text()
        if self.in_place:
            self.stream.write("\r" + line + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


class _HtmlLine(_Throttled):
    """An HTML output updated in place (``display_id``), with the text line as plain text."""

    def __init__(self, bar: EpochBar):
        from IPython.display import display

        super().__init__(bar)
        self.handle = display(self._bundle(), raw=True, display_id=True)

    def _bundle(self) -> dict[str, str]:
        return {"text/html": self.bar.html(), "text/plain": self.bar.text()}

    def draw(self, final: bool) -> None:
        if self.due(final):
            self.handle.update(self._bundle(), raw=True)


class _WidgetLine(_Throttled):
    """tqdm's notebook widget, its own rate and clock left out: the speed figure and the
    epoch's labelled wall time are in the postfix."""

    def __init__(self, bar: EpochBar):
        from tqdm.notebook import tqdm

        super().__init__(bar)
        self.tqdm = tqdm(
            total=bar.total,
            initial=bar.done,
            desc=bar.title,
            unit="step",
            leave=True,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{postfix}]",
        )

    def draw(self, final: bool) -> None:
        if not self.due(final):
            return
        _, figures, speed = self.bar.parts()
        parts = [*figures, speed, self.bar.elapsed()]
        self.tqdm.set_postfix_str(", ".join(filter(None, parts)), refresh=False)
        self.tqdm.update(self.bar.done - self.tqdm.n)
        if final:
            self.tqdm.close()
