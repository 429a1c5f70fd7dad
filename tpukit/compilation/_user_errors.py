"""Turn an exception raised while compiling into a message about the user's own code.

JAX errors raised during tracing carry long tracebacks through JAX's internals.
The user needs three things: what went wrong (the first lines of the message),
where in *their* code (the file and line, or the cell as the user sees it:
``In [7], line 3``, and the source text), and what was being compiled.
"""

from __future__ import annotations

import linecache
import os
import traceback

from tpukit.display import cell_line
from tpukit.hlo import is_user_file

_MAX_MESSAGE_LINES = 8


def _describe_line(filename: str, lineno: int) -> str:
    """``In [7], line 3`` for a notebook cell (the magic line counted), else ``model.py, line 12``."""
    cell = cell_line(filename, lineno)
    if cell is not None:
        return str(cell)
    return f"{os.path.basename(filename)}, line {lineno}"


def user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost traceback frame in the user's code (not JAX, Flax or tpukit)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if is_user_file(f.filename)]
    return frames[-1] if frames else None


def describe_compile_error(exc: BaseException, call: str) -> str:
    """A short message: what failed, the user's line, and the first lines of the error."""
    message_lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    shown = message_lines[:_MAX_MESSAGE_LINES]
    if len(message_lines) > _MAX_MESSAGE_LINES:
        shown.append("... (the full error is in this exception's __cause__)")
    text = f"Compiling {call} failed: {type(exc).__name__}: " + "\n  ".join(
        shown or ["(no message)"]
    )
    frame = user_frame(exc)
    if frame is not None:
        source = (frame.line or linecache.getline(frame.filename, frame.lineno)).strip()
        text += f"\n  at {_describe_line(frame.filename, frame.lineno)}, in {frame.name}" + (
            f": {source}" if source else ""
        )
    return text
