"""What the compile ledger costs: a notebook cell that compiles nothing, and one compile.

The ledger listens to ``jax.monitoring`` from ``import tpukit`` on, and ``%load_ext tpukit``
adds a hook before and after each cell (the line a cell prints when it compiled
something again). A cell that compiles nothing must not notice: this runs a trivial
cell and a cell calling an already compiled function in a real ``InteractiveShell``,
with the hooks registered and not (batches taken in turn), with the ledger holding
``--records`` compiles, and times the hooks themselves. It also times the ledger's own
work per compile (reading the stack, describing the arguments, finding the nearest
earlier compile) against the compile it records. The JSON goes to ``benchmarks/results/compile_ledger-<platform>.json``.

    .venv/bin/python benchmarks/compile_ledger.py [--cells 2000] [--records 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
from IPython.core.interactiveshell import InteractiveShell

import tpukit
from tpukit.compilation import _ledger


def per_cell(shell: InteractiveShell, code: str, cells: int) -> tuple[float, float]:
    """Median seconds of ``run_cell(code)`` without and with the ledger's cell hooks,
    batches of each taken in turn so that a busy machine slows both alike."""
    from tpukit.magics import _CELL_NOTICES

    notices = _CELL_NOTICES[id(shell)]
    hooks = (("pre_run_cell", notices.pre_run_cell), ("post_run_cell", notices.post_run_cell))
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(10):
        for hooked in (False, True):
            for event, hook in hooks:
                (shell.events.register if hooked else shell.events.unregister)(event, hook)
            start = time.perf_counter()
            for _ in range(cells // 10):
                shell.run_cell(code, store_history=False)
            times[hooked].append((time.perf_counter() - start) / (cells // 10))
    return statistics.median(times[False]), statistics.median(times[True])


def hook_seconds(shell: InteractiveShell, cells: int) -> float:
    """Median seconds of the pre- and post-cell hooks together, called directly."""
    from tpukit.magics import _CELL_NOTICES

    notices = _CELL_NOTICES[id(shell)]
    runs = []
    for _ in range(cells):
        start = time.perf_counter()
        notices.pre_run_cell(None)
        notices.post_run_cell(None)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def fill_ledger(records: int) -> None:
    """Compile one small function for ``records`` shapes (ops left out of the count)."""
    add = jax.jit(lambda x: x + 1)
    start = tpukit.compiles().end
    n = 1
    while len(tpukit.compiles(since=start, ops=False)) < records:
        add(jnp.zeros(n))
        n += 1


def ledger_work_per_compile(compiles: int) -> tuple[float, float]:
    """(ledger seconds, compile seconds) per compile, medians, for a small function."""
    spent: list[float] = []
    originals = {name: getattr(_ledger, name) for name in ("_on_lowered", "_on_compiled")}

    def timed(inner):
        def run(*args):
            start = time.perf_counter()
            try:
                return inner(*args)
            finally:
                spent.append(time.perf_counter() - start)

        return run

    arrays = [jnp.ones((i + 1, 8)) for i in range(compiles)]
    mul = jax.jit(lambda x, y: x * y)
    ours, theirs = [], []
    for name, inner in originals.items():
        setattr(_ledger, name, timed(inner))
    try:
        for a in arrays:  # each a new shape: a compile, compared with the ones before
            spent.clear()
            start = tpukit.compiles().end
            mul(a, 2.0)
            records = tpukit.compiles(since=start)
            ours.append(sum(spent))
            theirs.append(sum(r.seconds for r in records))
    finally:
        for name, inner in originals.items():
            setattr(_ledger, name, inner)
    return statistics.median(ours), statistics.median(theirs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=2000)
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--compiles", type=int, default=10)
    args = parser.parse_args()
    shell = InteractiveShell.instance()
    shell.run_cell("import jax, jax.numpy as jnp", store_history=False)
    shell.run_cell("%load_ext tpukit", store_history=False)
    shell.run_cell("f = jax.jit(lambda x: x + 1); x = jnp.ones(4); _ = f(x)", store_history=False)
    rows = []
    for records in (0, args.records):
        if records:
            fill_ledger(records)
        for cell in ("y = 1", "_ = f(x)"):
            without, with_ext = per_cell(shell, cell, args.cells)
            hooks = hook_seconds(shell, args.cells)
            rows.append(
                {
                    "cell": cell,
                    "ledger_records": tpukit.compiles().end,
                    "cell_seconds_without": without,
                    "cell_seconds_with": with_ext,
                    "hook_seconds": hooks,
                }
            )
    ours, theirs = ledger_work_per_compile(args.compiles)
    device = jax.devices()[0].device_kind
    print(f"compile ledger on {device} (JAX {jax.__version__}), {args.cells} cells per figure")
    print(f"{'cell':<10} {'records':>8} {'no hooks':>10} {'hooks':>10} {'hooks alone':>12}")
    for r in rows:
        print(
            f"{r['cell']:<10} {r['ledger_records']:>8} {r['cell_seconds_without'] * 1e6:>8.1f}µs"
            f" {r['cell_seconds_with'] * 1e6:>8.1f}µs {r['hook_seconds'] * 1e6:>10.1f}µs"
        )
    print(
        f"per compile of a small function: ledger {ours * 1e3:.2f} ms, "
        f"the compile itself {theirs * 1e3:.1f} ms"
    )
    result = {
        "device": device,
        "platform": jax.default_backend(),
        "jax": jax.__version__,
        "cells": args.cells,
        "rows": rows,
        "ledger_seconds_per_compile": ours,
        "compile_seconds_per_compile": theirs,
    }
    out = Path(__file__).parent / "results" / f"compile_ledger-{jax.default_backend()}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
