"""An out-of-memory that explains itself: needed against available, who holds the peak,
and the largest batch that fits, found by compiling (never running) smaller batches.

`explain` writes the message of the ``DeviceMemoryError`` that ``tpukit.compile``,
a compiled call, ``timeit`` and ``profile`` raise when a program does not fit: instead
of JAX's ``RESOURCE_EXHAUSTED``, the user reads how much the program needs at once
(arguments + outputs + XLA's temporary allocation), how much the device has and where
that figure comes from, the ten largest buffers at the peak with their layers and source
lines, and the largest batch size that compiles within the device's memory. Nothing is
run and nothing of the user's is touched: the search compiles abstract shapes only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from tpukit._errors import DeviceMemoryError
from tpukit.compilation._analysis import memory_of
from tpukit.compilation._memory import memory_view_of
from tpukit.display._units import format_bytes

_SHOWN = 10
_MAX_COMPILES = 8


def needed_bytes(executable: Any) -> int | None:
    """What running ``executable`` allocates at once: arguments + outputs - aliases +
    temporaries + code (``memory_analysis()``), or None when XLA does not say."""
    memory = memory_of(executable)
    return memory.total_bytes if memory is not None else None


def explain(
    compiled: Any,
    available: int | None,
    origin: str,
    *,
    compile_function: Callable[..., Any] | None = None,
) -> str:
    """The message of a ``DeviceMemoryError`` for ``compiled`` on ``available`` bytes."""
    needed = needed_bytes(compiled.jax_compiled)
    where = f" ({origin})" if origin else ""
    has = f"has {format_bytes(available)}{where}" if available is not None else "ran out"
    lines = [
        f"{compiled.name} does not fit in device memory: it needs "
        f"{format_bytes(needed)} at once and {compiled.device_kind} {has}."
    ]
    try:
        view = memory_view_of(compiled, capacity=available)
    except Exception:  # the explanation must never hide the error it explains
        view = None
    if view is not None:
        lines.append(
            f"It allocates {format_bytes(view.peak_bytes)}; at its peak, "
            f"{view.peak_instruction}, it holds (largest first):"
        )
        shown = [b for b in view.buffers_at_peak() if not b.shares]
        for buffer in shown[:_SHOWN]:
            source = f", {buffer.source}" if buffer.source else ""
            lines.append(
                f"  {format_bytes(buffer.size):>10}  {buffer.shape:<18} {buffer.kind:<9} "
                f"{buffer.group}{source}"
            )
    if compile_function is not None and available is not None:
        found = largest_batch(compiled, available, compile_function)
        if found is not None:
            batch, size, fitted = found
            lines.append(
                f"The largest batch that fits is {fitted} of {batch} (it needs "
                f"{format_bytes(size)}; measured by compiling, nothing ran)."
                if fitted
                else f"Not even a batch of 1 (of {batch}) fits: the weights alone are too large."
            )
    lines.append(
        "Use a smaller batch, bf16 weights, or more devices with mesh= to split the arrays; "
        "memory_view() shows what fills the memory. Your variables and model are unchanged."
    )
    return "\n".join(lines)


def largest_batch(
    compiled: Any, available: int, compile_function: Callable[..., Any]
) -> tuple[int, int, int] | None:
    """``(batch, bytes needed at the fitting batch, largest fitting batch)`` or None.

    The batch is the leading dimension shared by the plain array arguments (not pytrees
    such as a model); the search halves and bisects it, compiling each candidate.
    """
    positional = [p for p in compiled.signature.parameters if not p.keyword]
    arrays = [p for p in positional if _is_array(p.value) and p.value.shape]
    if compiled.bound_arguments:
        positional = positional[len(compiled.bound_arguments) :]
    if not arrays:
        return None
    batch = arrays[-1].value.shape[0]
    if batch <= 1:
        return None
    low, high, fitted_bytes, compiles = 0, batch, 0, 0
    while high - low > 1 and compiles < _MAX_COMPILES:
        middle = (low + high) // 2
        compiles += 1
        try:
            candidate = compile_function(
                compiled.function, *_with_batch(positional, batch, middle), **_keywords(compiled)
            )
        except DeviceMemoryError:  # over a configured capacity: compile refused it
            high = middle
            continue
        except Exception:  # a shape the function cannot take: stop searching
            break
        size = needed_bytes(candidate.jax_compiled)
        if size is not None and size <= available:
            low, fitted_bytes = middle, size
        else:
            high = middle
    return batch, fitted_bytes, low


def _is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and not callable(value)


def _with_batch(parameters: list, batch: int, size: int) -> list[Any]:
    values = []
    for p in parameters:
        value = p.value
        if _is_array(value) and value.shape and value.shape[0] == batch:
            value = jax.ShapeDtypeStruct((size, *value.shape[1:]), value.dtype)
        values.append(value)
    return values


def _keywords(compiled: Any) -> dict[str, Any]:
    return {p.name: p.value for p in compiled.signature.parameters if p.keyword}
