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

The batch search (`search_batch`) assumes what a program needs grows about linearly
with the batch: it measures half the batch, draws the line through the two points,
compiles where the line meets the capacity and one multiple above it, and bisects
where the line misses. Three or four compiles usually settle it::

    >>> need = lambda b: 1000 + 10 * b            # bytes at batch b
    >>> found = search_batch(need, 256, need(256), available=2000, multiple=8)
    >>> found.fitted, found.needed, found.over, found.compiles
    (96, 1960, 104, 3)
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

_SHOWN = 10
_MAX_COMPILES = 6
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


@dataclass(frozen=True)
class Fix:
    """One change to the program and what the changed program needs, measured by compiling.

    ``needed`` is None when the changed program could not be compiled (``note`` says why).
    """

    change: str
    needed: int | None
    available: int
    note: str = ""
    summary: str = ""  # a sentence said after the table (the batch search's)

    @property
    def fits(self) -> bool:
        return self.needed is not None and self.needed <= self.available

    def line(self, width: int) -> str:
        size = format_bytes(self.needed) if self.needed is not None else "-"
        verdict = "fits" if self.fits else ("over" if self.needed is not None else "no program")
        note = f"  ({self.note})" if self.note else ""
        return f"  {self.change.ljust(width)}  {size:>10}  {verdict}{note}"


@dataclass(frozen=True)
class BatchSearch:
    """The result of `search_batch`: the largest batch found to fit (0: none) and the
    smallest found not to; ``exact`` when they are one ``multiple`` apart."""

    batch: int
    fitted: int
    needed: int
    over: int
    over_needed: int | None
    compiles: int
    exact: bool

    def fix(self, available: int, name: str = "batch_size", blame: str = "") -> Fix:
        """The search as a row of the table; ``blame`` says what does not fit when even the
        smallest batch is over (default: the weights and state)."""
        if not self.fitted:
            why = (
                f"even the smallest batch is over: {blame or 'the weights and state alone are too large'}"
                if self.exact
                else "no batch tried fits; smaller ones were not tried"
            )
            return Fix(f"{name}={self.over}", self.over_needed, available, why)
        bound = (
            f"{name}={self.over} needs {format_bytes(self.over_needed)}"
            if self.over_needed is not None
            else f"{name}={self.over} is over"
        )
        note = (
            f"the largest that fits; {bound}"
            if self.exact
            else f"fits; {bound}; the batches between were not tried"
        )
        return Fix(f"{name}={self.fitted}", self.needed, available, note)


def search_batch(
    measure: Callable[[int], int | None],
    batch: int,
    needed: int,
    available: int,
    *,
    multiple: int = 1,
    max_compiles: int = _MAX_COMPILES,
) -> BatchSearch | None:
    """The largest multiple of ``multiple`` below ``batch`` whose program fits ``available``.

    ``measure(b)`` compiles the program at batch ``b`` and returns the bytes it needs
    (None: the program cannot take that batch, which ends the search); ``needed`` is
    what it needs at ``batch``. None when there is no smaller batch to try.
    """
    if batch <= multiple:
        return None
    low, low_needed = 0, None
    high, high_needed = batch, needed
    points = [(batch, needed)]
    compiles = 0
    while high - low > multiple and compiles < max_compiles:
        candidate = _next_candidate(points, low, high, available, multiple)
        compiles += 1
        size = measure(candidate)
        if size is None:
            break
        points.append((candidate, size))
        if size <= available:
            low, low_needed = candidate, size
        else:
            high, high_needed = candidate, size
    return BatchSearch(
        batch=batch,
        fitted=low,
        needed=low_needed or 0,
        over=high,
        over_needed=high_needed,
        compiles=compiles,
        exact=high - low <= multiple,
    )


def _next_candidate(
    points: list[tuple[int, int]], low: int, high: int, available: int, multiple: int
) -> int:
    """Where the line through the two measured batches nearest the capacity meets it
    (half the batch while only one is measured; the middle where the line is flat),
    kept strictly between the largest batch that fits and the smallest that does not."""
    guess = (low + high) / 2
    if len(points) == 1:
        guess = high / 2
    else:
        (b1, n1), (b2, n2) = sorted(points, key=lambda p: abs(p[1] - available))[:2]
        if b1 != b2 and (n2 - n1) / (b2 - b1) > 0:
            guess = b1 + (available - n1) * (b2 - b1) / (n2 - n1)
    candidate = int(guess) // multiple * multiple
    return min(max(candidate, low + multiple), high - multiple)


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
    the program's `MemoryView` (None if it could not be made).
    """
    needed = needed_bytes(compiled.jax_compiled)
    where = f" ({origin})" if origin else ""
    has = f"has {format_bytes(available)}{where}" if available is not None else "ran out"
    lines = [
        f"{compiled.name} does not fit in device memory: it needs "
        f"{format_bytes(needed)} at once and {compiled.device_kind} {has}."
    ]
    try:
        with measuring():
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
    found: list[Fix] = []
    if fixes is not None and available is not None:
        try:
            with measuring():
                found = fixes(compiled, available, view)
        except Exception as exc:  # a failed measurement must not hide the error either
            lines.append(f"(What would fit could not be measured: {type(exc).__name__}: {exc})")
    if found:
        lines.append(
            f"What would fit, each change measured by compiling {compiled.name} "
            f"(nothing ran), against {format_bytes(available)}:"
        )
        width = max(len(f.change) for f in found)
        lines += [f.line(width) for f in found]
        lines += [f"  {f.summary}" for f in found if f.summary]
    lines.append(
        "memory_view() shows what fills the memory; more devices with mesh= split the "
        "arrays. Your variables and model are unchanged."
    )
    return "\n".join(lines)


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
