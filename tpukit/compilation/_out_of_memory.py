"""An out-of-memory that explains itself: needed against available, who holds the peak,
and what would fit, each change measured by compiling (never running) the program.

`explain` writes the message of the ``DeviceMemoryError`` that ``tpukit.compile``,
a compiled call, ``timeit``, ``profile``, ``compile_step`` and ``fit`` raise when a
program does not fit: instead of JAX's ``RESOURCE_EXHAUSTED``, the user reads how much
the program needs at once (arguments + outputs - aliases + XLA's temporaries + code), how
much the device has and where that figure comes from, the ten largest buffers at the
peak with their layers and source lines, and a table of `Fix`\\ es: the largest batch
size that compiles within the device's memory, and other changes (bf16 parameters, for
``fit`` also ``nnx.remat``, fewer steps per execution, data left on the host), each with
the bytes its program needs. Nothing runs and nothing of the user's is touched: the
candidates compile abstract shapes only.

What is not compiling -- each `Fix`, the batch search (`search_batch`) and the message's
text -- is ``tpukit.memory``'s (`_what_fits`); this module measures, by compiling.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from tpukit._errors import ArgumentError
from tpukit.compilation._analysis import memory_of
from tpukit.compilation._memory import memory_view_of
from tpukit.display import format_bytes
from tpukit.memory import Fix, out_of_memory_message, search_batch

_measuring: contextvars.ContextVar[bool] = contextvars.ContextVar("measuring", default=False)


def needed_bytes(executable: Any) -> int | None:
    """What running ``executable`` allocates at once: arguments + outputs - aliases +
    temporaries + code (``memory_analysis()``), or None when XLA does not say."""
    memory = memory_of(executable)
    return memory.total_bytes if memory is not None else None


@contextlib.contextmanager
def measuring() -> Iterator[None]:
    """Compile candidates without refusing them: a configured capacity is not checked
    inside (the search wants their size, not an explanation of each)."""
    token = _measuring.set(True)
    try:
        yield
    finally:
        _measuring.reset(token)


def is_measuring() -> bool:
    return _measuring.get()


def explain(
    compiled: Any,
    available: int | None,
    origin: str,
    *,
    fixes: Callable[[Any, int, Any], list[Fix]] | None = None,
) -> str:
    """The message of a ``DeviceMemoryError`` for ``compiled`` on ``available`` bytes.

    ``fixes(compiled, available, view)`` measures the changes that might make it fit
    (`compile_fixes` for ``tpukit.compile``; fit's step brings its own); ``view`` is
    the program's `MemoryView` (None if it could not be made). The message's text is
    ``tpukit.memory``'s (`out_of_memory_message`); this gathers its figures.
    """
    try:
        with measuring():
            view = memory_view_of(compiled, capacity=available)
    except Exception:  # the explanation must never hide the error it explains
        view = None
    found: list[Fix] = []
    failure = ""
    if fixes is not None and available is not None:
        try:
            with measuring():
                found = fixes(compiled, available, view)
        except Exception as exc:  # a failed measurement must not hide the error either
            failure = f"{type(exc).__name__}: {exc}"
    return out_of_memory_message(
        compiled.name,
        compiled.device_kind,
        needed_bytes(compiled.jax_compiled),
        available,
        origin,
        view,
        found,
        failure,
    )


# ----------------------------------------------------------------------------- tpukit.compile


def compile_fixes(
    compile_function: Callable[..., Any], batch_argument: str | None = None
) -> Callable[[Any, int, Any], list[Fix]]:
    """What would make a ``tpukit.compile`` program fit: the largest batch (the leading
    dimension the data arguments share, or that of ``batch_argument``) and bf16
    floating-point arguments."""

    def fixes(compiled: Any, available: int, view: Any) -> list[Fix]:
        found = []
        batch = largest_batch(compiled, available, compile_function, batch_argument)
        if batch is not None:
            found.append(batch)
        bf16 = _bf16_fix(compiled, available, compile_function)
        if bf16 is not None:
            found.append(bf16)
        return found

    return fixes


@dataclass(frozen=True)
class BatchChoice:
    """Which dimension is the batch: its size, the arguments that share it (shrunk
    together), and the other sizes it could have been (empty when it is clear)."""

    size: int
    names: tuple[str, ...]
    others: tuple[tuple[str, int], ...] = ()

    def said(self) -> str:
        """``x and y`` shrink along their first dimension, and how to choose otherwise."""
        shrunk = " and ".join(self.names)
        text = f"{shrunk} shrunk along {'their' if len(self.names) > 1 else 'its'} first axis"
        if self.others:
            listed = ", ".join(f"{name}: {size}" for name, size in self.others)
            text += (
                f"; the batch is ambiguous (other leading sizes: {listed}), so name it: "
                f"tpukit.compile(..., batch_argument={self.others[0][0]!r})"
            )
        return text


def batch_choice(parameters: list[Any], named: str | None = None) -> BatchChoice | None:
    """The batch of a call: the leading dimension its data arguments share.

    Of the plain array arguments (positional and keyword), a weight's leading dimension
    is usually another argument's inner one (``x: f32[4096,784]``, ``w: f32[784,512]``):
    the batch is a leading size that is no inner size, shared by the most arguments, the
    first argument's on a tie (then ``others`` lists the rest). ``named`` picks the
    argument whose leading dimension it is.

        >>> from types import SimpleNamespace as P
        >>> import jax
        >>> args = [P(name="x", value=jax.ShapeDtypeStruct((4096, 784), "float32")),
        ...         P(name="w1", value=jax.ShapeDtypeStruct((784, 512), "float32")),
        ...         P(name="y", value=jax.ShapeDtypeStruct((4096,), "int32"))]
        >>> batch_choice(args)
        BatchChoice(size=4096, names=('x', 'y'), others=())
    """
    arrays = [p for p in parameters if _is_array(p.value) and p.value.shape]
    if not arrays:
        return None
    if named is not None:
        chosen = [p for p in arrays if p.name == named]
        if not chosen:
            raise ArgumentError(
                f"batch_argument={named!r} names no array argument of the call; its array "
                f"arguments are {', '.join(p.name for p in arrays)}."
            )
        size = chosen[0].value.shape[0]
        return BatchChoice(size, tuple(p.name for p in arrays if p.value.shape[0] == size))
    inner = {d for p in arrays for d in p.value.shape[1:]}
    sizes: dict[int, list[str]] = {}
    for p in arrays:
        sizes.setdefault(p.value.shape[0], []).append(p.name)
    candidates = [size for size in sizes if size not in inner] or list(sizes)
    most = max(len(sizes[size]) for size in candidates)
    best = [size for size in candidates if len(sizes[size]) == most]
    size = best[0]
    others = tuple((sizes[other][0], other) for other in best[1:])
    return BatchChoice(size, tuple(sizes[size]), others)


def largest_batch(
    compiled: Any,
    available: int,
    compile_function: Callable[..., Any],
    batch_argument: str | None = None,
) -> Fix | None:
    """The largest batch that fits, as a `Fix` whose note says it is the largest.

    The batch is the leading dimension the plain array arguments share (`batch_choice`;
    not pytrees such as a model); keyword arguments of that size shrink with it. The
    search (`search_batch`) compiles each candidate.
    """
    positional = _unbound(compiled)
    keywords = [p for p in compiled.signature.parameters if p.keyword]
    choice = batch_choice([*positional, *keywords], batch_argument)
    needed = needed_bytes(compiled.jax_compiled)
    if choice is None or needed is None:
        return None
    batch = choice.size

    def measure(size: int) -> int | None:
        values = [_with_batch(p.value, batch, size) for p in positional]
        named = {p.name: _with_batch(p.value, batch, size) for p in keywords}
        try:
            candidate = compile_function(compiled.function, *values, **named)
        except Exception:  # a shape the function cannot take: stop searching
            return None
        return needed_bytes(candidate.jax_compiled)

    found = search_batch(measure, batch, needed, available)
    if found is None:
        return None
    fix = found.fix(available, name="batch")
    sentence = (
        f"The largest batch that fits is {found.fitted} of {batch} (it needs "
        f"{format_bytes(found.needed)}; {choice.said()})."
        if found.fitted
        else f"Not even a batch of 1 (of {batch}) fits: the weights alone are too large "
        f"({choice.said()})."
        if found.exact
        else f"No batch down to {found.over} (of {batch}) fits ({choice.said()})."
    )
    return dataclasses.replace(fix, summary=sentence)


def _bf16_fix(compiled: Any, available: int, compile_function: Callable[..., Any]) -> Fix | None:
    """The program with its float32 array arguments (and module weights) in bfloat16."""
    positional = _unbound(compiled)
    bound = [_bf16(value) for value in compiled.bound_arguments]
    values = [_bf16(p.value) for p in positional]
    if not any(_has_float32(p.value) for p in positional) and not any(
        _has_float32(v) for v in compiled.bound_arguments
    ):
        return None
    function = bound[0] if bound else compiled.function
    try:
        candidate = compile_function(function, *values, **_keywords(compiled))
    except Exception as exc:
        return Fix("bf16 arguments", None, available, f"{type(exc).__name__}")
    return Fix(
        "bf16 weights and inputs",
        needed_bytes(candidate.jax_compiled),
        available,
        "float32 -> bf16",
    )


def _unbound(compiled: Any) -> list:
    positional = [p for p in compiled.signature.parameters if not p.keyword]
    return positional[len(compiled.bound_arguments) :]


def _is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and not callable(value)


def _with_batch(value: Any, batch: int, size: int) -> Any:
    if _is_array(value) and value.shape and value.shape[0] == batch:
        return jax.ShapeDtypeStruct((size, *value.shape[1:]), value.dtype)
    return value


def _has_float32(value: Any) -> bool:
    from flax import nnx

    if isinstance(value, nnx.Module):
        value = nnx.state(value)
    return any(_is_array(leaf) and leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(value))


def _bf16(value: Any) -> Any:
    """``value`` with float32 arrays as bfloat16 shapes; a module as an abstract copy."""
    from flax import nnx

    def cast(leaf: Any) -> Any:
        if _is_array(leaf):
            dtype = jnp.bfloat16 if leaf.dtype == jnp.float32 else leaf.dtype
            return jax.ShapeDtypeStruct(leaf.shape, dtype)
        return leaf

    if isinstance(value, nnx.Module):
        graphdef, state = nnx.split(value)
        return nnx.merge(graphdef, jax.tree.map(cast, state))
    if _is_array(value):
        return cast(value)
    if isinstance(value, (dict, list, tuple)):
        return jax.tree.map(cast, value)
    return value


def _keywords(compiled: Any) -> dict[str, Any]:
    return {p.name: p.value for p in compiled.signature.parameters if p.keyword}
