"""``tpukit.compiles()``: the ledger's records as a result, grouped by where they were called.

``Compiles`` is a sequence of ``CompileRecord``s (filter it, index it, read ``table()``'s
plain rows) whose output is one ``Report``: a headline with the count and seconds, the
call sites (the running cell's first, then the costliest) with their counts and
seconds, every recompile with its reason and what avoids it, and the compiles one by one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from tpukit.compilation._ledger import CompileRecord, listen, record_count, records_since
from tpukit.display import Column, Line, Report, Row, Table, format_count, format_seconds

_KIND = "tpukit-compiles"


def _seconds(value: float | None) -> str:
    return "-" if value is None else format_seconds(value)


@dataclass(frozen=True)
class CallSite:
    """Compiles of one function from one line: how many, how many again, their seconds."""

    call_site: str
    function: str
    compiles: int
    recompiles: int
    seconds: float
    last_reason: str


class Compiles(Sequence[CompileRecord]):
    """Compiles from the ledger (``tpukit.compiles()``): a sequence of ``CompileRecord``.

    ``filter(...)`` keeps some; ``by_call_site()`` groups them; ``table()`` gives each
    as a plain dict; ``end`` is the ledger's length when this was taken, to pass as
    ``since=`` later for what compiled after it.
    """

    def __init__(self, records: Sequence[CompileRecord], end: int, current_cell: int | None = None):
        self.records = tuple(records)
        self.end = end
        self.current_cell = current_cell

    @overload
    def __getitem__(self, index: int) -> CompileRecord: ...
    @overload
    def __getitem__(self, index: slice) -> Compiles: ...
    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return Compiles(self.records[index], self.end, self.current_cell)
        return self.records[index]

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[CompileRecord]:
        return iter(self.records)

    @property
    def seconds(self) -> float:
        """Seconds of tracing, lowering and compiling, all records together."""
        return sum(r.seconds for r in self.records)

    @property
    def recompiles(self) -> Compiles:
        """The compiles of functions compiled before."""
        return self.filter(recompiles=True)

    def filter(
        self,
        function: str | None = None,
        *,
        cell: int | None = None,
        recompiles: bool | None = None,
        ops: bool = True,
        where: Callable[[CompileRecord], bool] | None = None,
    ) -> Compiles:
        """The records of ``function``, from notebook ``cell`` (its execution count), only
        recompiles (``recompiles=True``) or first compiles (``False``), without JAX's
        eager operations (``ops=False``), or for which ``where(record)`` is true."""
        kept = [
            r
            for r in self.records
            if (function is None or r.function == function)
            and (cell is None or r.cell == cell)
            and (recompiles is None or r.recompile == recompiles)
            and (ops or r.kind != "op")
            and (where is None or where(r))
        ]
        return Compiles(kept, self.end, self.current_cell)

    def by_call_site(self) -> list[CallSite]:
        """One row per call site and function: the running cell's first, then by seconds."""
        groups: dict[tuple[str, str], list[CompileRecord]] = {}
        for r in self.records:
            groups.setdefault((r.call_site, r.function), []).append(r)
        rows = [
            CallSite(
                site,
                function,
                len(members),
                sum(m.recompile for m in members),
                sum(m.seconds for m in members),
                next((m.reason for m in reversed(members) if m.recompile), ""),
            )
            for (site, function), members in groups.items()
        ]
        cells = {(r.call_site, r.function): r.cell for r in self.records}

        def order(row: CallSite) -> tuple:
            here = self.current_cell is not None and cells[(row.call_site, row.function)] == (
                self.current_cell
            )
            return (not here, -row.seconds)

        return sorted(rows, key=order)

    def table(self) -> list[dict[str, Any]]:
        """Each record as a plain dict (for pandas, or to filter by hand)."""
        return [
            {
                "number": r.number,
                "function": r.function,
                "kind": r.kind,
                "call_site": r.call_site,
                "cell": r.cell,
                "signature": r.signature,
                "trace_seconds": r.trace_seconds,
                "lower_seconds": r.lower_seconds,
                "compile_seconds": r.compile_seconds,
                "seconds": r.seconds,
                "cache_hit": r.cache_hit,
                "recompile": r.recompile,
                "reason": r.reason,
                "advice": r.advice,
            }
            for r in self.records
        ]

    def notices(self) -> list[str]:
        """One line per recompile of a function called (not an eager operation, not a
        compile asked for, not one the persistent cache served, not one of tpukit's own
        functions: ``fit`` and ``evaluate`` compile theirs once per set-up and shape, and
        ``fit`` says itself when its step compiled where it should not)."""
        return [
            f"tpukit: {r.function} compiled again ({r.call_site or 'unknown line'}, "
            f"{format_seconds(r.seconds)}): {r.reason}"
            + (f". To avoid it: {r.advice}." if r.advice else ".")
            for r in self.records
            if r.recompile
            and r.kind != "op"
            and not r.cache_hit
            and not r.explicit
            and not r.internal
        ]

    def report(self) -> Report:
        """The one description both ``repr``s render."""
        return Report(_KIND, self._headline(), self._blocks())

    def __repr__(self) -> str:
        return self.report().text()

    def _repr_html_(self) -> str:
        return self.report().html()

    def _headline(self) -> str:
        if not self.records:
            return "No XLA compiles"
        trace = sum((r.trace_seconds or 0.0) - r.inner_seconds for r in self.records)
        lower = sum(r.lower_seconds or 0.0 for r in self.records)
        xla = sum(r.compile_seconds for r in self.records)
        again = sum(r.recompile for r in self.records)
        hits = sum(bool(r.cache_hit) for r in self.records)
        return (
            f"{format_count(len(self.records), 'XLA compile')}, {format_seconds(self.seconds)} "
            f"(tracing {format_seconds(trace)}, lowering {format_seconds(lower)}, "
            f"XLA {format_seconds(xla)}); {again} compiled again"
            + (f"; {hits} from the persistent cache" if hits else "")
        )

    def _blocks(self) -> list[Line | Table]:
        if not self.records:
            return [Line("Nothing compiled since tpukit began counting (or in this selection).")]
        sites = Table(
            [
                Column("call site", nowrap=True),
                Column("function"),
                Column("compiles", align="right"),
                Column("again", align="right"),
                Column("seconds", align="right", format=format_seconds),
                Column("last reason"),
            ],
            [
                (s.call_site or "?", s.function, s.compiles, s.recompiles, s.seconds, s.last_reason)
                for s in self.by_call_site()
            ],
            caption="by call site",
            text_limit=15,
            more=".by_call_site()",
        )
        blocks: list[Line | Table] = [sites]
        again = [r for r in self.records if r.recompile]
        if again:
            blocks.append(
                Table(
                    [Column("compile"), Column("why"), Column("what avoids it")],
                    [
                        Row(
                            (f"#{r.number} {r.function} at {r.call_site}", r.reason, r.advice),
                            prose=True,
                        )
                        for r in again
                    ],
                    caption="compiled again: why, and what avoids it",
                    text_limit=10,
                    more=".recompiles.table()",
                )
            )
        blocks.append(
            Table(
                [
                    Column("#", align="right"),
                    Column("function"),
                    Column("call site", nowrap=True),
                    Column("arguments"),
                    Column("trace", align="right", format=_seconds),
                    Column("lower", align="right", format=_seconds),
                    Column("XLA", align="right", format=format_seconds),
                    Column("cache"),
                ],
                [
                    Row(
                        (
                            r.number,
                            r.function + (" (op)" if r.kind == "op" else ""),
                            r.call_site,
                            r.signature,
                            None if r.trace_seconds is None else r.trace_seconds - r.inner_seconds,
                            r.lower_seconds,
                            r.compile_seconds,
                            {True: "hit", False: "miss", None: "-"}[r.cache_hit],
                        ),
                        mark="changed" if r.recompile else "",
                    )
                    for r in self.records
                ],
                caption="every compile",
                open=len(self.records) <= 20,
                text_limit=20,
                more=".table()",
                notes=(
                    "trace '-': JAX reused the traced program (only lowering and XLA ran); trace "
                    "leaves out compiles that ran inside it (they have their own rows); "
                    "cache '-': the persistent cache was not asked; (op): one jax.numpy or "
                    "lax operation run outside jit, or a jit inside JAX itself.",
                ),
            )
        )
        return blocks


def compiles(
    function: str | None = None,
    *,
    since: int = 0,
    cell: int | None = None,
    recompiles: bool | None = None,
    ops: bool = True,
) -> Compiles:
    """Every XLA compile in this process since tpukit's compile layer loaded, and why.

    The layer loads at ``%load_ext tpukit`` or the first ``tpukit.compile``, ``fit``
    or ``compiles`` (``import tpukit`` alone imports no JAX).

    Each record names the function, the line that called it (a notebook cell's
    ``In [5], line 2``), its arguments as the compile saw them (shapes, dtypes, weak
    types, shardings, static values), the seconds of tracing, lowering and XLA's
    compile, whether the persistent cache served it, and for a function compiled
    before, what changed from its nearest earlier compile and what avoids that.

    Args:
      function: only this function's compiles (its ``__name__``).
      since: only records from this number on (``compiles().end`` is a bookmark).
      cell: only compiles called from this notebook cell (its execution count).
      recompiles: ``True`` for functions compiled again, ``False`` for first compiles.
      ops: ``False`` leaves out eager ``jax.numpy``/``lax`` operations.

    >>> import jax, jax.numpy as jnp, tpukit
    >>> mark = tpukit.compiles().end
    >>> @jax.jit
    ... def doubled(x):
    ...     return 2 * x
    >>> _ = doubled(jnp.ones(3)), doubled(jnp.ones(4))
    >>> tpukit.compiles("doubled", since=mark)[-1].reason
    'x: shape f32[3] -> f32[4]'
    """
    listen()
    end = record_count()
    found = Compiles(records_since(since)[: max(end - since, 0)], end, _current_cell())
    if function is None and cell is None and recompiles is None and ops:
        return found
    return found.filter(function, cell=cell, recompiles=recompiles, ops=ops)


def _current_cell() -> int | None:
    module = sys.modules.get("IPython.core.interactiveshell")
    shell = getattr(getattr(module, "InteractiveShell", None), "_instance", None)
    count = getattr(shell, "execution_count", None)
    return count if isinstance(count, int) else None
