"""The figures tpukit draws: returned to the caller, shown once in a notebook, never popped up.

Every plot (``Compiled.plot_ops``, ``plot_fusions``, ``plot_roofline``, ``HloDiff.plot``,
``History.plot``) makes its figure with `new_figure` and returns it, as matplotlib
users expect. In IPython with an inline backend (JupyterLab, Notebook, VS Code,
Colab) the figure is shown exactly once whatever the line ends with: by IPython when
it is the cell's value, otherwise by tpukit when the cell finishes (``c.plot_ops();``
or ``fig = c.plot_ops()``). The figure is not kept in pyplot, so the inline backend
does not show it a second time, and in a script nothing pops up and a later
``plt.show()`` does not repeat it: use ``fig.savefig("ops.png")``.

Example::

    >>> fig, ax = new_figure(figsize=(6.0, 3.0))
    >>> lines = ax.plot([1, 2, 3])
    >>> fig.savefig("line.png")
"""

from __future__ import annotations

import sys
from typing import Any

from matplotlib.figure import Figure

#: Image types a notebook shows a figure as; a shell that renders none of them
#: (a terminal) gets no extra output from tpukit.
_IMAGE_TYPES = ("image/png", "image/svg+xml", "image/jpeg", "application/pdf")


class NotebookFigure(Figure):
    """A ``Figure`` that notes when IPython formats it for display.

    IPython asks every object for ``_repr_mimebundle_`` before it renders it; this
    one answers nothing (the usual figure formatters still draw it) and remembers
    that it was shown, so tpukit does not show it again when the cell ends.
    """

    shown_by_ipython = False

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> None:
        if not self.shown_by_ipython:
            self.shown_by_ipython = True
            # the cell's figures made before this one show first, in the order made:
            # ``c.plot_ops(); c.plot_roofline()`` shows the ops, then the roofline
            pending = _FiguresToShow.registered(_running_shell())
            if pending is not None:
                pending.show_before(self)
        return None


def new_figure(**subplots: Any) -> tuple[Figure, Any]:
    """``plt.subplots(**subplots)``, but shown once in a notebook and never kept in pyplot.

    Returns ``(figure, axes)`` as ``plt.subplots`` does.
    """
    import matplotlib.pyplot as plt

    # pyplot (not a bare Figure) so that an IPython kernel's inline backend is
    # activated and registers how figures render; closing it keeps pyplot from
    # showing it a second time (and from popping it up in scripts).
    fig, axes = plt.subplots(FigureClass=NotebookFigure, **subplots)
    plt.close(fig)
    shell = _running_shell()
    if shell is not None:
        _FiguresToShow.of(shell).figures.append(fig)
    return fig, axes


def _running_shell() -> Any:
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    return get() if get is not None else None


class _FiguresToShow:
    """The figures a running cell made; shown when it ends unless IPython showed them.

    One per shell, registered as its ``post_execute`` callback (where matplotlib's
    inline backend also shows pyplot's figures), so a cell's figures appear in that
    cell's output. Figures made outside any cell (a thread, code the shell did not
    run) are dropped when the next cell starts, not shown in a stranger's output.
    """

    def __init__(self, shell: Any):
        self.shell = shell
        self.figures: list[NotebookFigure] = []

    @classmethod
    def of(cls, shell: Any) -> _FiguresToShow:
        found = cls.registered(shell)
        if found is not None:
            return found
        pending = cls(shell)
        shell.events.register("pre_execute", pending.forget)
        shell.events.register("post_execute", pending)
        return pending

    @classmethod
    def registered(cls, shell: Any) -> _FiguresToShow | None:
        """The shell's figures to show, if tpukit registered them (None otherwise)."""
        if shell is None:
            return None
        for callback in shell.events.callbacks.get("post_execute", []):
            if isinstance(callback, cls):
                return callback
        return None

    def show_before(self, figure: Figure) -> None:
        """Show the figures of this cell made before ``figure`` that are not shown yet."""
        index = next((i for i, fig in enumerate(self.figures) if fig is figure), None)
        if index is None:
            return
        from IPython.display import display

        for fig in self.figures[:index]:
            if not fig.shown_by_ipython and _renders_images(self.shell, fig):
                display(fig)

    def forget(self) -> None:
        self.figures = []

    def __call__(self) -> None:
        figures, self.figures = self.figures, []
        if not any(not fig.shown_by_ipython for fig in figures):
            return
        from IPython.display import display

        for fig in figures:
            if not fig.shown_by_ipython and _renders_images(self.shell, fig):
                display(fig)


def _renders_images(shell: Any, fig: Figure) -> bool:
    """Whether the shell's display turns ``fig`` into an image (inline backends do)."""
    formatter = getattr(shell, "display_formatter", None)
    if formatter is None:
        return False
    active = set(getattr(formatter, "active_types", _IMAGE_TYPES))
    for mime in _IMAGE_TYPES:
        printer = formatter.formatters.get(mime)
        if printer is None or not printer.enabled or mime not in active:
            continue
        try:
            printer.lookup(fig)
        except KeyError:
            continue
        return True
    return False
