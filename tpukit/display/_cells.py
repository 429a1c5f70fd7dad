"""Name a notebook cell the way its user sees it: ``In [7], line 3``.

Code typed into IPython runs from generated file names, and every source location
(JAX's HLO metadata, a traceback frame) carries them: ``<ipython-input-7-1a2b3c4d5e6f>``
from IPython itself and Colab, ``/tmp/ipykernel_4242/2170432108.py`` from ipykernel
(JupyterLab, Notebook 7, VS Code). This module maps such a name back to the cell's
execution count and counts lines as the user does: from the cell's first line, the
``%%tpu_compile`` line included (IPython runs a cell magic's body on its own, numbered
from the line after the magic).

The execution count comes from IPython's compiler (``_filename_map``, IPython 8 and
later), from the name itself (``<ipython-input-N-...>``), or, for ipykernel on
IPython 7, by naming the cells of the input history again with the compiler's own
``get_code_name``. Nothing here imports IPython: the running shell is asked when
there is one, and without one a file keeps its base name.

    >>> describe_location("/home/me/model.py", 12)
    'model.py:12'
    >>> describe_location("<ipython-input-7-1a2b3c4d5e6f>", 3)
    'In [7], line 3'
"""

from __future__ import annotations

import functools
import linecache
import re
import sys
from dataclasses import dataclass
from typing import Any

_INPUT_NAME = re.compile(r"^<ipython-input-(\d+)-[0-9a-f]+>$")
_KERNEL_NAME = re.compile(r"ipykernel_\d+[/\\]-?\d+\.py$")
_MAGIC_CALL = "get_ipython().run_cell_magic("


@dataclass(frozen=True)
class CellLine:
    """A line of a notebook cell: its execution count (``None`` when unknown) and line."""

    count: int | None
    line: int

    def __str__(self) -> str:
        where = f"In [{self.count}]" if self.count is not None else "notebook cell"
        return f"{where}, line {self.line}" if self.line else where


@functools.lru_cache(maxsize=4096)  # a program names a few files in thousands of places
def is_cell_file(filename: str) -> bool:
    """Whether ``filename`` is one IPython or ipykernel generated for a cell."""
    return bool(_INPUT_NAME.match(filename) or _KERNEL_NAME.search(filename))


@functools.lru_cache(maxsize=4096)
def _input_count(filename: str) -> int | None:
    """The N of ``<ipython-input-N-...>``; None for other names."""
    match = _INPUT_NAME.match(filename)
    return int(match.group(1)) if match is not None else None


def cell_line(filename: str, line: int) -> CellLine | None:
    """The cell and line the user sees for ``filename:line``; ``None`` for a real file.

    ``line`` is the line in the code IPython compiled (what tracebacks and JAX
    report); the result counts from the top of the cell as typed, so the magic line
    of a ``%%tpu_compile`` cell is line 1.
    """
    if not filename:
        return None
    shell = _running_shell()
    found = _find_cell(shell, filename) if shell is not None else None
    if found is not None:
        count, before = found
        return CellLine(count, line + before if line else line)
    count = _input_count(filename)
    if count is not None:
        return CellLine(count, line)
    return CellLine(None, line) if is_cell_file(filename) else None


def describe_location(filename: str, line: int) -> str:
    """A short label: ``'In [7], line 3'`` for a cell, ``'model.py:12'`` for a file, ``''`` for none."""
    if not filename:
        return ""
    cell = cell_line(filename, line)
    if cell is not None:
        return str(cell)
    return _file_label(filename, line)


@functools.lru_cache(maxsize=4096)
def _file_label(filename: str, line: int) -> str:
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    return f"{base}:{line}" if line else base


def _running_shell() -> Any:
    """The running IPython shell, or None; what ``IPython.get_ipython()`` returns, without
    the import statement it runs on every call (a graph asks once per instruction)."""
    module = sys.modules.get("IPython.core.interactiveshell")
    if module is None:  # no shell runs without this module
        return None
    return getattr(module.InteractiveShell, "_instance", None)  # set while a shell runs


def kernel_shell() -> Any:
    """The running IPython shell when it is a kernel's (its outputs drawn by a frontend
    that applies ``update_display_data``: JupyterLab, Notebook, VS Code, Colab), else None
    (a terminal, a script, a shell made in a test)."""
    shell = _running_shell()
    return shell if getattr(shell, "kernel", None) is not None else None


def _find_cell(shell: Any, filename: str) -> tuple[int, int] | None:
    """``(execution count, typed lines before the compiled code)`` of a cell file, or ``None``."""
    count = _execution_count(shell, filename)
    if count is None:
        return None
    history = _raw_history(shell)
    code = linecache.getlines(filename)
    # IPython 8 and later count the next cell while one runs, so a cell magic's body,
    # run as a cell of its own, is filed under the count after its cell's.
    for candidate in (count, count - 1):
        if 0 < candidate < len(history):
            before = _lines_before(history[candidate], code)
            if before is not None:
                return candidate, before
    return count, 0


def _execution_count(shell: Any, filename: str) -> int | None:
    compiler = getattr(shell, "compile", None)
    count = getattr(compiler, "_filename_map", {}).get(filename)
    if count is not None:
        return int(count)
    count = _input_count(filename)
    if count is not None:
        return count
    if not is_cell_file(filename) or not hasattr(compiler, "get_code_name"):
        return None
    return _count_by_name(shell, filename, len(_raw_history(shell)))


@functools.lru_cache(maxsize=4096)
def _count_by_name(shell: Any, filename: str, cells: int) -> int | None:
    """ipykernel on IPython 7 names a cell by a hash of its raw text (or of a cell magic's
    body): name the first ``cells`` cells of the history again, newest first."""
    history = _raw_history(shell)[:cells]
    for count in range(len(history) - 1, 0, -1):
        raw = history[count]
        body = _magic_body(raw)
        # IPython ends the cell with a newline before it splits off the body.
        for code in (raw, body, body + "\n"):
            if code and _code_name(shell.compile, code, count) == filename:
                return count
    return None


@functools.lru_cache(maxsize=4096)
def _code_name(compiler: Any, code: str, count: int) -> str:
    try:
        return compiler.get_code_name(code, code, count)
    except Exception:  # noqa: BLE001 - a compiler we do not know: no name, no match
        return ""


def _raw_history(shell: Any) -> list[str]:
    manager = getattr(shell, "history_manager", None)
    return getattr(manager, "input_hist_raw", None) or []


def _magic_body(raw: str) -> str:
    """The body IPython passes to a cell magic (the lines after ``%%name ...``), or ``''``."""
    lines = raw.splitlines(keepends=True)
    first = next((i for i, text in enumerate(lines) if text.strip()), None)
    if first is None or not lines[first].startswith("%%"):
        return ""
    return "".join(lines[first + 1 :])


def _lines_before(raw: str, code: list[str]) -> int | None:
    """How many typed lines of cell ``raw`` come before the compiled ``code``.

    ``None`` when ``code`` is neither the cell nor its magic's body. Lines IPython
    rewrites (``%magic``, ``!shell``) match any code line.
    """
    typed = raw.splitlines()
    start = next((i for i, text in enumerate(typed) if text.strip()), 0)
    if start < len(typed) and typed[start].startswith("%%"):
        if code and code[0].startswith(_MAGIC_CALL):
            return 0  # the cell as IPython rewrote it: one line, the magic call
        start += 1
    if not _same_code(typed[start:], code):
        return None
    if code and not code[0].strip():
        return start  # this IPython kept the leading blank lines
    while start < len(typed) and not typed[start].strip():
        start += 1
    return start


def _same_code(typed: list[str], code: list[str]) -> bool:
    typed = [text.rstrip() for text in typed if text.strip()]
    compiled = [text.rstrip() for text in code if text.strip()]
    return len(typed) == len(compiled) and all(
        t == c or t.lstrip().startswith(("%", "!")) for t, c in zip(typed, compiled)
    )
