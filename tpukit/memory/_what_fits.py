"""What would fit: the changes an out-of-memory explanation offers, the batch search, and
the explanation's text.

One job, with no compiler: a `Fix` is one change and the bytes its program needs;
`search_batch` finds the largest batch that fits with a ``measure`` function handed in
(``tpukit.compilation`` compiles; ``tpukit.train`` compiles fit's step), and
`out_of_memory_message` writes what ``DeviceMemoryError`` says from the figures.

The batch search assumes what a program needs grows about linearly with the batch: it
measures half the batch, draws the line through the two points, compiles where the line
meets the capacity and one multiple above it, and bisects where the line misses. Three
or four compiles usually settle it::

    >>> need = lambda b: 1000 + 10 * b            # bytes at batch b
    >>> found = search_batch(need, 256, need(256), available=2000, multiple=8)
    >>> found.fitted, found.needed, found.over, found.compiles
    (96, 1960, 104, 3)

Imports: ``tpukit.display`` and this package's `MemoryView` (for its type).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tpukit.display import format_bytes
from tpukit.memory._memory_view import MemoryView

#: Buffers at the peak an explanation lists.
_SHOWN = 10
#: Compiles the batch search may spend.
_MAX_COMPILES = 6


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


def out_of_memory_message(
    name: str,
    device_kind: str,
    needed: int | None,
    available: int | None,
    origin: str,
    view: MemoryView | None,
    found: list[Fix],
    failure: str = "",
) -> str:
    """An out-of-memory's explanation from its figures: what ``name`` needs at once
    against what the device has (``origin`` says where that figure comes from), the
    largest buffers at the peak of its ``view``, and the ``found`` fixes' table
    (``failure``: why they could not be measured).

    >>> print(out_of_memory_message("step", "TPU v5e", 3 << 30, 2 << 30, "free now", None,
    ...                             [Fix("batch_size=64", 1 << 30, 2 << 30)]))
    step does not fit in device memory: it needs 3.0 GiB at once and TPU v5e has 2.0 GiB (free now).
    What would fit, each change measured by compiling step (nothing ran), against 2.0 GiB:
      batch_size=64     1.0 GiB  fits
    memory_view() shows what fills the memory; more devices with mesh= split the arrays. Your variables and model are unchanged.
    """
    where = f" ({origin})" if origin else ""
    has = f"has {format_bytes(available)}{where}" if available is not None else "ran out"
    lines = [
        f"{name} does not fit in device memory: it needs "
        f"{format_bytes(needed)} at once and {device_kind} {has}."
    ]
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
    if failure:
        lines.append(f"(What would fit could not be measured: {failure})")
    if found:
        lines.append(
            f"What would fit, each change measured by compiling {name} "
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
