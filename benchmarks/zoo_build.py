"""How long ``zoo.create`` takes to build each model, with the zoo's host-drawn
initializers against JAX's own (the way Flax builds a model eagerly).

Flax's initializers are JAX programs: built eagerly, every new parameter shape compiles
its own random-number program (about 0.5 s of XLA:CPU each on a quiet 2-core machine).
The zoo draws the same distributions with NumPy on the host instead
(``tpukit/zoo/_init.py``). This script builds each model both ways, each build in a fresh
interpreter (so no compiled program is reused between them), alternating the two, and
counts the programs compiled during the build with ``jax.monitoring``.

    .venv/bin/python benchmarks/zoo_build.py                      # every model, 2 rounds
    .venv/bin/python benchmarks/zoo_build.py --models lenet5 resnet18 --rounds 3

Prints a table and writes ``benchmarks/results/zoo_build-<device>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
DEFAULT_MODELS = ("mlp", "lenet5", "resnet18", "resnet50", "vgg19", "gpt_small")

# Run in a child: build one model, print seconds, compiles and the device.
_CHILD = r"""
import json, sys, time
import jax
from tpukit import zoo
from tpukit.zoo import _init

compiles = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, secs, **kw: compiles.append(secs)
    if event == "/jax/core/compile/backend_compile_duration" else None
)
name, initializers = sys.argv[1], sys.argv[2]
if initializers == "jax":
    _init._key_bits = lambda key: None  # every initializer takes JAX's traced path, eagerly
start = time.perf_counter()
model = zoo.create(name)
jax.block_until_ready(jax.tree.leaves(model))
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "compiles": len(compiles),
                  "device": jax.devices()[0].device_kind}))
"""


def build_once(name: str, initializers: str) -> dict:
    """Build ``name`` in a fresh interpreter with ``initializers`` ("host" or "jax")."""
    env = dict(os.environ, JAX_ENABLE_COMPILATION_CACHE="false")
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, name, initializers],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"building {name} ({initializers}) failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    rows, device = [], "?"
    for name in args.models:
        runs: dict[str, list[dict]] = {"host": [], "jax": []}
        for _ in range(args.rounds):
            for initializers in ("jax", "host"):  # alternating, in one run
                result = build_once(name, initializers)
                device = result["device"]
                runs[initializers].append(result)
        row = {"model": name}
        for initializers, results in runs.items():
            row[f"{initializers}_s"] = statistics.median(r["seconds"] for r in results)
            row[f"{initializers}_compiles"] = results[-1]["compiles"]
        row["speedup"] = row["jax_s"] / row["host_s"]
        rows.append(row)
        print(
            f"{name:<10} JAX initializers {row['jax_s']:7.2f} s ({row['jax_compiles']:3d} compiles)"
            f"   host-drawn {row['host_s']:6.2f} s ({row['host_compiles']:3d} compiles)"
            f"   {row['speedup']:5.1f}x",
            flush=True,
        )

    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"zoo_build-{device.replace(' ', '_')}.json"
    out.write_text(
        json.dumps(
            {
                "device": device,
                "python": platform.python_version(),
                "rounds": args.rounds,
                "rows": rows,
            },
            indent=2,
        )
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
