"""How ``find_nan`` names what it found: the user's line, the library function, the NNX
layer and the part of a training step, from an equation's tracebacks and name stack.

Every rule that tells the user's code from a library's is ``tpukit.hlo.is_user_file``'s
(as for HLO source lines), with the Python standard library added. A name stack such
as ``transpose(jvp(model (MLP)))/layers[2] (Linear)`` (``module_scopes`` writes the
layers' paths into it) says the backward pass and the layer ``layers[2] (Linear)``.

>>> layer_of("transpose(jvp(model (MLP)))/layers[2] (Linear)")
('layers[2]', 'Linear')
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from typing import Any

import optax
from jax._src import source_info_util

from tpukit.hlo import is_user_file

#: Operations that move or compare values; the gradient of a line is named by another.
PLUMBING = frozenset(
    {
        "broadcast_in_dim",
        "reshape",
        "convert_element_type",
        "squeeze",
        "expand_dims",
        "transpose",
        "select_n",
        "eq",
        "ne",
        "gt",
        "lt",
        "ge",
        "le",
        "stop_gradient",
        "copy",
        "copy_p",
        "slice",
        "dynamic_slice",
        "concatenate",
        "iota",
        "pjit",
        "jit",
        "mul",
        "neg",
        "reduce_sum",
        "add",
        "add_any",
    }
)
_SCOPE = re.compile(r"^(?P<path>.+) \((?P<cls>[A-Za-z_]\w*)\)$")
_TRANSFORM = re.compile(r"^(?:jvp|transpose|vmap|remat|checkpoint|pmap)\((?P<inner>.*)\)$")


def stack_of(outer: Any, eqn: Any) -> Any:
    """The name stack of ``eqn`` inside a call whose own stack is ``outer``."""
    own = eqn.source_info.name_stack
    if outer is None:
        return own
    try:
        return outer + own
    except TypeError:
        return own


def stack_text(stack: Any) -> str:
    return "" if stack is None else str(stack)


def layer_of(stack: str) -> tuple[str | None, str | None]:
    """The innermost NNX layer of a name stack: ``('layers[2]', 'Linear')``."""
    found: tuple[str | None, str | None] = (None, None)
    for part in stack.split("/"):
        while (m := _TRANSFORM.match(part)) is not None:
            part = m.group("inner")
        m = _SCOPE.match(part)
        if m is not None:
            found = (m.group("path").replace("|", "/"), m.group("cls"))
    return found


@functools.lru_cache(maxsize=4096)
def _frames(traceback: Any) -> tuple[Any, ...]:
    """All frames of a JAX traceback, innermost first."""
    if traceback is None:
        return ()
    code, lasti = traceback.raw_frames()
    return tuple(source_info_util.raw_frame_to_frame(code[i], lasti[i]) for i in range(len(code)))


_STDLIB = os.path.dirname(os.__file__)


def _is_users(frame: Any) -> bool:
    return is_user_file(frame.file_name) and not frame.file_name.startswith(_STDLIB + os.sep)


def user_frame(tracebacks: Sequence[Any]) -> Any:
    """The innermost frame the user wrote, from the equation's own traceback outwards."""
    for traceback in tracebacks:
        for frame in _frames(traceback):
            if _is_users(frame):
                return frame
    return None


#: Frames of a library's machinery (wrappers, tracing), never the function a user called.
_MACHINERY = re.compile(
    r"[/\\](interpreters[/\\].*|traceback_util|pjit|api|api_util|core|linear_util|dispatch|"
    r"custom_derivatives|ad_checkpoint|source_info_util|profiler|util|array_methods|"
    r"contextlib|functools|_module_scopes|transforms|graph|bridge|object|module|"
    r"pytreelib)\.py$"
)


def library_function(tracebacks: Sequence[Any]) -> str:
    """The library function the user's line called (``softmax``, ``Linear.__call__``,
    ``scale_by_adam.update_fn``), or ``''`` when the operation is the line's own."""
    for traceback in tracebacks:
        frames = _frames(traceback)
        for i, frame in enumerate(frames):
            if not _is_users(frame):
                continue
            inside = frames[:i]
            optax_frames = [f for f in inside if f.file_name.startswith(_OPTAX)]
            for called in optax_frames:  # innermost first: the transformation's update
                if ".<locals>." in called.function_name:
                    return _short(called.function_name)
            for called in reversed(inside):  # outermost first: the function the user called
                if not _MACHINERY.search(called.file_name):
                    return _short(called.function_name)
            return ""
    for traceback in tracebacks[:1]:  # no user frame (fit's own step): optax's function
        for called in _frames(traceback):
            if called.file_name.startswith(_OPTAX) and ".<locals>." in called.function_name:
                return _short(called.function_name)
    return ""


_OPTAX = os.path.dirname(optax.__file__) + os.sep


def _short(qualname: str) -> str:
    """``scale_by_adam.<locals>.update_fn.<locals>.<lambda>`` -> ``scale_by_adam.update_fn``."""
    return ".".join(p for p in qualname.split(".") if p not in ("<locals>", "<lambda>"))


def in_optax(tracebacks: Sequence[Any]) -> bool:
    return any(f.file_name.startswith(_OPTAX) for tb in tracebacks[:1] for f in _frames(tb))
