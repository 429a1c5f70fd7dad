"""How long the graph of a very large module takes to build, and how much memory it takes.

Generates a module shaped like an unrolled mixture-of-experts training step after XLA
(`_realistic_hlo`: fusions, dots, while loops with tuple state, all-reduces, metadata with
op names and source lines), 400,000 instructions by default (about 56 MB), then times what
``tpukit.hlo.open(text).graph()`` and its HTML cost, each stage on its own:

- parse: ``hlo.open(text)`` (the text into an ``HloModule``);
- group: the graph's tree of layers, sections and parts (``GraphTree``), the first use of
  ``graph()``'s data (the page's tree, ``_page_data``, where tpukit has one: without the
  fusion bodies the page builds itself);
- payload: the graph's data for the page, its costs and labels, packed and deflated;
- html: the rest of ``to_html()``: the first view's glance and the page around the payload.

``graph`` is group + payload + html: what the issue's "at most 2 s" is about. Memory is the
process's peak resident memory during those three stages less its resident memory just
before them (the text and the parsed module already held), as a multiple of the text's size
(Linux: the peak is reset through ``/proc/self/clear_refs``, then read from ``VmHWM``). With
``--tracemalloc`` the peak of Python's own allocations is measured as well (slower: its times
are not reported).

Each stage's CPU time (``process_time``) is given beside its wall time: on a shared machine
the wall clock moves with the other load. Every repeat runs in a fresh process (``--repeats``,
the median is printed), since a module drawn once keeps its tree.

    .venv/bin/python benchmarks/hlo_large_module.py [--instructions 400000] [--repeats 3]
    .venv/bin/python benchmarks/hlo_large_module.py --shape chain  # `_large_hlo`'s module

``--base`` measures another tree too (main's, say ``git archive`` of it), its processes
alternating with this tree's, and prints the two side by side:

    .venv/bin/python benchmarks/hlo_large_module.py --base /tmp/main-tree --repeats 2

``--shape chain`` generates the older benchmark's module instead (`_large_hlo`: one chain of
fusions of 1,000 instructions each, longer lines), to compare with figures measured on it.

Prints a table and writes ``benchmarks/results/hlo_large_module.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results"
STAGES = ("parse", "group", "payload", "html")


def _status_kb(field: str) -> int:
    """A ``/proc/self/status`` field in kB (0 where there is none)."""
    try:
        for line in pathlib.Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _reset_peak() -> bool:
    """Resets the kernel's peak resident size of this process (``VmHWM``) to the current one."""
    try:
        pathlib.Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def one_run(instructions: int, traced: bool, shape: str = "moe") -> dict:
    """Generates the module and measures each stage once, in this process."""
    sys.path.insert(0, str(HERE))
    from _large_hlo import large_module
    from _realistic_hlo import realistic_module

    from tpukit import hlo

    if shape == "moe":
        text = realistic_module(instructions)
    else:  # one chain of fusions of 1,000 instructions each (`_large_hlo`)
        text = large_module(max(1, instructions // 1000), 1000)
    size = len(text.encode())
    gc.collect()
    times: dict[str, float] = {}
    marks = [(time.perf_counter(), time.process_time())]
    program = hlo.open(text)
    module = program.hlo_module()
    marks.append((time.perf_counter(), time.process_time()))
    gc.collect()
    reset = _reset_peak()
    before_kb = _status_kb("VmRSS")
    if traced:
        import tracemalloc

        tracemalloc.start()
    # (the group stage starts here: the collection above is the benchmark's, a full pass
    # over the parsed module's millions of objects, about 0.3 s, not the graph's work)
    group_start = (time.perf_counter(), time.process_time())
    g = program.graph()
    # (grouped on first use: the tree the page is made from, where the graph has one apart
    # from the whole tree, `HloGraph._page_data`, without the bodies the page builds itself)
    getattr(g, "_page_data", None) or g._data  # noqa: B018
    marks.append((time.perf_counter(), time.process_time()))
    g._payload()
    marks.append((time.perf_counter(), time.process_time()))
    page = g.to_html()
    marks.append((time.perf_counter(), time.process_time()))
    peak_kb = _status_kb("VmHWM")
    row: dict = {}
    if traced:
        row["traced_peak_bytes"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    starts = [marks[0], group_start, *marks[2:]]
    for stage, start, end in zip(STAGES, starts, marks[1:]):
        times[f"{stage}_s"] = end[0] - start[0]
        times[f"{stage}_cpu_s"] = end[1] - start[1]
    count = sum(len(c.instructions) for c in module.computations.values())
    row.update(
        instructions=count,
        hlo_bytes=size,
        html_bytes=len(page.encode()),
        nodes_drawn_first=g.view_counts()[0],
        peak_growth_bytes=(peak_kb - before_kb) * 1024 if reset and peak_kb else None,
        **times,
    )
    return row


def _fresh_run(instructions: int, shape: str, tree: pathlib.Path | None) -> dict:
    """`one_run` in a fresh process, importing ``tree``'s tpukit when given (else this one's)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    out = subprocess.run(
        [sys.executable, __file__, "--one", str(instructions), "--shape", shape],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(
    instructions: int,
    repeats: int,
    traced: bool,
    shape: str = "moe",
    runs: list[dict] | None = None,
) -> dict:
    """The median of ``repeats`` fresh processes' stages (and the traced peak, if asked);
    ``runs``: those processes' rows, measured already (`compare`)."""
    if runs is None:
        runs = [_fresh_run(instructions, shape, None) for _ in range(repeats)]
    result = dict(runs[0])
    for key in runs[0]:
        values = [run[key] for run in runs if isinstance(run[key], (int, float))]
        if key.endswith("_s") or key == "peak_growth_bytes":
            result[key] = statistics.median(values) if values else None
            result[f"{key}_all"] = values
    for suffix in ("_s", "_cpu_s"):
        result[f"graph{suffix}"] = sum(
            result[f"{stage}{suffix}"] for stage in ("group", "payload", "html")
        )
    if result["peak_growth_bytes"]:
        result["peak_x_text"] = result["peak_growth_bytes"] / result["hlo_bytes"]
    if traced:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                str(instructions),
                "--shape",
                shape,
                "--tracemalloc",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        traced_run = json.loads(out.stdout.strip().splitlines()[-1])
        result["traced_peak_bytes"] = traced_run["traced_peak_bytes"]
        result["traced_x_text"] = traced_run["traced_peak_bytes"] / result["hlo_bytes"]
    result["repeats"] = repeats
    return result


def compare(instructions: int, repeats: int, shape: str, base: pathlib.Path) -> dict:
    """This tree's and ``base``'s tpukit (another checkout's root, ``git archive`` of main),
    their fresh processes alternating, so that both meet the same load on the machine."""
    runs: dict[str, list[dict]] = {"base": [], "this": []}
    for _ in range(repeats):
        runs["base"].append(_fresh_run(instructions, shape, base))
        runs["this"].append(_fresh_run(instructions, shape, HERE.parent))
    return {name: measure(instructions, repeats, False, shape, rows) for name, rows in runs.items()}


def compare_table(rows: dict[str, dict]) -> str:
    """Base and this tree side by side: CPU seconds by stage and the peak's growth."""
    lines = ["| tree | " + " | ".join(f"{s} CPU s" for s in (*STAGES, "graph")) + " | peak |"]
    lines.append("|---" * (len(STAGES) + 3) + "|")
    for name, row in rows.items():
        cpu = " | ".join(f"{row[f'{s}_cpu_s']:.2f}" for s in (*STAGES, "graph"))
        peak = row.get("peak_growth_bytes")
        said = f"+{peak / 1e6:.0f} MB = {row['peak_x_text']:.2f}x" if peak else "?"
        lines.append(f"| {name} | {cpu} | {said} |")
    return "\n".join(lines)


def table(row: dict) -> str:
    lines = [
        f"generated module ({row['shape']}): {row['instructions']:,} instructions, "
        f"{row['hlo_bytes'] / 1e6:.1f} MB of HLO text; HTML {row['html_bytes'] / 1e6:.1f} MB; "
        f"first view {row['nodes_drawn_first']} nodes (median of {row['repeats']} processes)",
        "",
        "| stage | wall s | CPU s |",
        "|---|---|---|",
    ]
    for stage in (*STAGES, "graph"):
        lines.append(f"| {stage} | {row[f'{stage}_s']:.2f} | {row[f'{stage}_cpu_s']:.2f} |")
    if row.get("peak_growth_bytes"):
        lines.append(
            f"\npeak resident memory during group + payload + html: "
            f"+{row['peak_growth_bytes'] / 1e6:.0f} MB = {row['peak_x_text']:.2f}x the text"
        )
    if "traced_peak_bytes" in row:
        lines.append(
            f"peak of Python's allocations (tracemalloc): "
            f"{row['traced_peak_bytes'] / 1e6:.0f} MB = {row['traced_x_text']:.2f}x the text"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instructions", type=int, default=400_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--shape",
        choices=("moe", "chain"),
        default="moe",
        help="moe: `_realistic_hlo` (default); chain: `_large_hlo`'s chain of big fusions",
    )
    parser.add_argument("--tracemalloc", action="store_true", help="also trace Python's peak")
    parser.add_argument("--label", default="", help="suffix of the JSON file's name")
    parser.add_argument(
        "--base",
        type=pathlib.Path,
        help="another tree's root (main's): its processes alternate with this tree's",
    )
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # (one process's run)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_run(args.one, args.tracemalloc, args.shape)))
        return
    RESULTS.mkdir(exist_ok=True)
    name = f"hlo_large_module{'_' + args.label if args.label else ''}.json"
    if args.base is not None:
        rows = compare(args.instructions, args.repeats, args.shape, args.base.resolve())
        for row in rows.values():
            row["shape"] = args.shape
        print(table(rows["this"]), compare_table(rows), sep="\n\n")
        (RESULTS / name).write_text(json.dumps({**rows["this"], "base": rows["base"]}, indent=1))
        print(f"\nwrote {RESULTS / name}", file=sys.stderr)
        return
    row = measure(args.instructions, args.repeats, args.tracemalloc, args.shape)
    row["shape"] = args.shape
    print(table(row))
    (RESULTS / name).write_text(json.dumps(row, indent=1))
    print(f"\nwrote {RESULTS / name}", file=sys.stderr)


if __name__ == "__main__":
    main()
