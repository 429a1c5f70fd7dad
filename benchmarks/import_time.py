"""How long ``import tpukit`` takes, and which heavy libraries each way in loads.

Each case runs in a fresh interpreter (the same Python as this script, the same
``PYTHONPATH``), ``--runs`` times; the table gives the median wall time of the
whole process, the median of ``python -X importtime``'s cumulative figure for the
case's own imports, and the heavy libraries left in ``sys.modules``. The first row
is the bare interpreter, so a case's cost is its wall time less that one.

    PYTHONPATH=. .venv/bin/python benchmarks/import_time.py            # 5 runs each
    PYTHONPATH=. .venv/bin/python benchmarks/import_time.py --runs 1   # a smoke test

Prints a table and writes ``benchmarks/results/import_time.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
HLO_TEXT = Path(__file__).parent.parent / "tests" / "data" / "hlo" / "jax_mlp.hlo"
HEAVY = ("jax", "numpy", "flax", "optax", "orbax", "matplotlib", "IPython")

# name -> the statement timed; each one's imports are the ones -X importtime sums
CASES = {
    "python (nothing imported)": "pass",
    "import tpukit": "import tpukit",
    "import tpukit.hlo": "import tpukit.hlo",
    "tpukit.hlo.open(TEXT).graph() as HTML": (
        f"import tpukit.hlo; tpukit.hlo.open(open({str(HLO_TEXT)!r}).read()).graph()._repr_html_()"
    ),
    "from tpukit import fit": "from tpukit import fit",
    "%load_ext tpukit": (
        "from IPython.core.interactiveshell import InteractiveShell; "
        "InteractiveShell.instance().run_line_magic('load_ext', 'tpukit')"
    ),
}
_REPORT = "; import sys; print('HEAVY', *sorted({m.split('.')[0] for m in sys.modules} & {HEAVY}))"


def _child_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run_once(statement: str) -> tuple[float, float, float, list[str]]:
    """Wall and CPU seconds of the process, ``-X importtime`` seconds of its imports, and
    the heavy libraries it loaded. CPU time changes little on a busy machine; wall time does."""
    code = statement + _REPORT.replace("{HEAVY}", repr(set(HEAVY)))
    start, cpu = time.perf_counter(), _child_cpu()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, _child_cpu() - cpu
    if done.returncode:
        raise SystemExit(f"{statement!r} failed:\n{done.stderr[-2000:]}")
    heavy = done.stdout.split("HEAVY", 1)[1].split()
    timed = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement], capture_output=True, text=True
    )
    # top-level rows (one space of indent after the bar) are what the statement imported itself
    top = re.findall(r"^import time:\s+\d+ \|\s+(\d+) \| (\S.*)$", timed.stderr, re.M)
    return wall, cpu, sum(int(us) for us, _ in top) / 1e6, heavy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh interpreters per case")
    parser.add_argument("--tag", default="", help="a word for the JSON file name (before/after)")
    args = parser.parse_args()
    rows = []
    print(f"{'case':42} {'wall s':>8} {'CPU s':>7} {'imports s':>10}  heavy libraries loaded")
    for name, statement in CASES.items():
        runs = [run_once(statement) for _ in range(args.runs)]
        wall, cpu, imports = (statistics.median(r[k] for r in runs) for k in range(3))
        heavy = runs[-1][3]
        row = {"case": name, "wall_s": wall, "cpu_s": cpu, "imports_s": imports, "heavy": heavy}
        rows.append(row)
        print(f"{name:42} {wall:8.2f} {cpu:7.2f} {imports:10.2f}  {', '.join(heavy) or '-'}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"import_time{'-' + args.tag if args.tag else ''}.json"
    out.write_text(json.dumps({"python": sys.version, "runs": args.runs, "rows": rows}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
