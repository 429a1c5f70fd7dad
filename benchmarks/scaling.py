"""Scaling of ``tpukit.fit`` over 1, 2, 4 and 8 devices, and the collectives of one step.

Two models: the MNIST MLP (``zoo.create("mlp")``, 784-128-64-10) and the
all-convolutional CIFAR network (``zoo.create("allconv_cifar10")``, fed 12x12
images here so that it runs in minutes on a CPU). For each device count, ``fit``
runs with ``sharding="data"`` twice:

- **global batch fixed** (strong scaling): the same batch split over more
  devices. Efficiency = speedup / devices, speedup = steps/s over the 1-device
  steps/s.
- **per-device batch fixed** (weak scaling): the global batch grows with the
  devices. Efficiency = examples/s over (devices x 1-device examples/s), which
  is steps/s over the 1-device steps/s.

Steps/s are measured over whole epochs after a warm-up epoch (which pays for
compilation). The device count of a process is fixed when JAX starts, so each
count runs in its own subprocess: on a CPU with
``XLA_FLAGS=--xla_force_host_platform_device_count=K`` (K simulated devices, all
sharing the same cores, so expect efficiency to fall with K), on accelerators
with the first K real devices.

Then the optimized HLO of fit's compiled step function (8 devices, MLP, data
parallel and FSDP; ``Trainer.compile_step``) is read with :func:`tpukit.hlo.parse_hlo`, and its
all-reduce / all-gather / reduce-scatter instructions are counted with their
bytes (per step: the step body is a loop in the HLO).

    .venv/bin/python benchmarks/scaling.py                # table + JSON
    .venv/bin/python benchmarks/scaling.py --devices 1 2  # fewer counts

Results go to ``benchmarks/results/scaling-<platform>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

# name: (zoo name, input shape, global batch, per-device batch, steps per epoch)
WORKLOADS = {
    "mlp": ("mlp", (784,), 128, 16, 100),
    "allconv": ("allconv_cifar10", (12, 12, 3), 16, 2, 4),
}
FIELDS = ("zoo", "input", "global_batch", "per_device_batch", "steps_per_epoch")
TIMED_EPOCHS = 3
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all")


# --------------------------------------------------------------------- worker
def _steps_per_s(workload: str, devices: int, batch: int) -> float:
    import jax
    import numpy as np
    import optax

    from tpukit import zoo
    from tpukit.train import DataParallel, fit

    name, shape, _, _, steps = WORKLOADS[workload]
    rng = np.random.default_rng(0)
    n = steps * batch
    x = rng.random((n, *shape), dtype=np.float32)
    y = rng.integers(0, 10, n).astype(np.int32)
    model = _hashable_padding(zoo.create(name))
    plan = DataParallel(devices=jax.devices()[:devices])
    history = fit(
        model,
        optax.adam(1e-3),
        (x, y),
        epochs=1 + TIMED_EPOCHS,
        batch_size=batch,
        sharding=plan,
        shuffle=False,
        verbose=False,
    )
    timed = history.epochs[1:]
    return sum(e["steps"] for e in timed) / sum(e["seconds"] for e in timed)


def _hashable_padding(model):
    """Work around the zoo's convolutions keeping ``padding`` as a list.

    ``fit`` caches its compiled step by the model's graph definition, which must be
    hashable; ``AllConvCIFAR10`` stores each ``nnx.Conv`` padding as a list of pairs.
    """
    for conv in getattr(model, "convs", []):
        if isinstance(conv.padding, list):
            conv.padding = tuple(tuple(p) for p in conv.padding)
    return model


def collectives(hlo_text: str) -> dict[str, dict[str, int]]:
    """``{opcode: {"count", "bytes", "shapes"}}`` of the collectives in optimized HLO text.

    Async pairs (``all-gather-start`` / ``-done``) count once, by their result.
    """
    from tpukit.hlo import parse_hlo

    found: dict[str, dict[str, int]] = {}
    for instr in parse_hlo(hlo_text).instructions():
        op = instr.opcode.removesuffix("-start")
        if op not in COLLECTIVES or instr.opcode.endswith("-done"):
            continue
        shape = instr.shape
        if instr.opcode.endswith("-start") and shape.is_tuple and shape.elements:
            shape = shape.elements[-1]
        entry = found.setdefault(op, {"count": 0, "bytes": 0, "shapes": []})
        entry["count"] += 1
        entry["bytes"] += shape.nbytes
        entry["shapes"].append(str(shape))
    return found


def _step_collectives(sharding: str) -> dict:
    """Compile fit's step function for the MLP on every device and count its collectives.

    ``Trainer.compile_step`` gives the very program ``fit`` runs (4 steps per call).
    """
    import numpy as np
    import optax

    from tpukit import zoo
    from tpukit.train import Trainer

    _, shape, batch, _, steps = WORKLOADS["mlp"]
    rng = np.random.default_rng(0)
    x = rng.random((steps * batch, *shape), dtype=np.float32)
    y = rng.integers(0, 10, steps * batch).astype(np.int32)
    trainer = Trainer(zoo.create("mlp"), optax.adam(1e-3), sharding=sharding)
    step = trainer.compile_step((x, y), batch_size=batch, steps_per_execution=4, shuffle=False)
    return collectives(step.hlo_text("optimized"))


def worker(devices: int, out: Path) -> None:
    import jax

    if len(jax.devices()) < devices:
        raise SystemExit(f"only {len(jax.devices())} devices here; asked for {devices}")
    rows = []
    for workload, (_, _, global_batch, per_device, _) in WORKLOADS.items():
        for mode, batch in (("global", global_batch), ("per_device", per_device * devices)):
            sps = _steps_per_s(workload, devices, batch)
            rows.append(
                {"model": workload, "mode": mode, "devices": devices, "batch": batch, "sps": sps}
            )
            print(f"  {workload:8s} {mode:10s} devices={devices} batch={batch}: {sps:.1f} steps/s")
    result = {"rows": rows, "platform": jax.default_backend(), "kind": jax.devices()[0].device_kind}
    if devices == len(jax.devices()) and devices > 1:
        result["collectives"] = {s: _step_collectives(s) for s in ("data", "fsdp")}
    out.write_text(json.dumps(result))


# --------------------------------------------------------------------- parent
def _accelerators() -> int:
    """How many non-CPU devices this machine has (0 on a CPU-only machine)."""
    probe = "import jax; print(len(jax.devices()) if jax.default_backend() != 'cpu' else 0)"
    try:
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300
        )
        return int(done.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError):
        return 0


def _run_worker(devices: int, simulate: bool, tmp: Path) -> dict:
    env = dict(os.environ)
    if simulate:
        env["JAX_PLATFORMS"] = "cpu"
        env.pop("JAX_NUM_CPU_DEVICES", None)
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    out = tmp / f"scaling-{devices}.json"
    cmd = [sys.executable, __file__, "--worker", str(devices), "--out", str(out)]
    subprocess.run(cmd, env=env, check=True)
    return json.loads(out.read_text())


def _table(rows: list[dict]) -> list[dict]:
    base = {(r["model"], r["mode"]): r["sps"] for r in rows if r["devices"] == 1}
    for r in rows:
        ref = base.get((r["model"], r["mode"]))
        if ref is None:
            r["speedup"] = r["efficiency"] = None
            continue
        if r["mode"] == "global":
            r["speedup"] = r["sps"] / ref
            r["efficiency"] = r["speedup"] / r["devices"]
        else:  # the batch grows with the devices: examples/s against linear
            r["speedup"] = r["sps"] * r["batch"] / (ref * r["batch"] / r["devices"])
            r["efficiency"] = r["sps"] / ref
    return rows


def _print(rows: list[dict], collectives_by: dict) -> None:
    head = f"{'model':8s} {'batch held':12s} {'devices':>7s} {'batch':>6s} {'steps/s':>9s} "
    head += f"{'examples/s':>11s} {'speedup':>8s} {'efficiency':>10s}"
    print(head)
    print("-" * len(head))
    for r in rows:
        eff = "-" if r["efficiency"] is None else f"{r['efficiency']:.0%}"
        spd = "-" if r["speedup"] is None else f"{r['speedup']:.2f}x"
        mode = "global" if r["mode"] == "global" else "per device"
        print(
            f"{r['model']:8s} {mode:12s} {r['devices']:7d} {r['batch']:6d} {r['sps']:9.1f} "
            f"{r['sps'] * r['batch']:11.0f} {spd:>8s} {eff:>10s}"
        )
    for sharding, found in collectives_by.items():
        print(f"\nCollectives per step of fit's compiled MLP step, sharding={sharding!r}:")
        if not found:
            print("  none")
        for op, c in sorted(found.items()):
            print(f"  {op:20s} {c['count']:3d} x, {c['bytes']:>10,d} bytes")
            for text in c["shapes"]:
                print(f"      {text[:100]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.out)
        return
    accelerators = _accelerators()
    simulate = accelerators == 0
    counts = [d for d in args.devices if simulate or d <= accelerators]
    where = "simulated CPU devices" if simulate else f"{accelerators} accelerators"
    print(f"fit scaling on {where}; device counts {counts}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    tmp = RESULTS / ".scaling-tmp"
    tmp.mkdir(exist_ok=True)
    rows, collectives_by, info = [], {}, {}
    t0 = time.perf_counter()
    for d in counts:
        result = _run_worker(d, simulate, tmp)
        rows += result["rows"]
        collectives_by = result.get("collectives", collectives_by)
        info = {"platform": result["platform"], "kind": result["kind"]}
    for f in tmp.iterdir():
        f.unlink()
    tmp.rmdir()
    rows = _table(rows)
    print()
    _print(rows, collectives_by)
    report = {
        **info,
        "simulated": simulate,
        "host": platform.node(),
        "cpu_count": os.cpu_count(),
        "workloads": {k: dict(zip(FIELDS, v)) for k, v in WORKLOADS.items()},
        "timed_epochs": TIMED_EPOCHS,
        "rows": rows,
        "collectives": collectives_by,
        "seconds": time.perf_counter() - t0,
    }
    path = RESULTS / f"scaling-{info.get('platform', 'cpu')}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
