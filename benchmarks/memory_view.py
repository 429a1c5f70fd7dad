"""Issue 23's acceptance comparisons: the memory view against XLA's own figures, and a
ResNet-50 step over a set capacity that explains itself with a batch that then trains.

For the zoo's MLP, ResNet-18 and GPT-small training steps (``Trainer.compile_step``,
fit's own program, on CPU) the script compares

- the view's headline peak with ``memory_analysis()``: it equals ``argument_size +
  output_size - alias_size + temp_size`` exactly; ``peak_memory_in_bytes`` is below it
  by the packed temporaries' buffer less the constants (on CPU XLA's figure leaves the
  temporaries out), and the script checks that this is the whole difference;
- the buffers the view lists at the peak with those of XLA's live-range report,
  ``*-live-range.txt``, written by a separate process that compiles the same step with
  ``XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text`` (names, sizes, the peak moment
  and the "peak usage" line).

Then it sets a capacity below what a ResNet-50 step needs (``tpukit.set_device_memory``),
shows the explained out-of-memory, and trains one epoch at the batch size it found.

Prints a table and writes ``benchmarks/results/memory_view-<platform>.json``::

    .venv/bin/python benchmarks/memory_view.py                 # all four, ~15 min on 2 cores
    .venv/bin/python benchmarks/memory_view.py --models mlp    # one comparison
    .venv/bin/python benchmarks/memory_view.py --no-oom        # without the ResNet-50 part
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

# On a GPU, JAX takes 75% of the memory up front: the dump child (run while this process
# holds its arrays) could then not compile. Allocate on demand in both.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import tpukit  # noqa: E402
from tpukit.train import Trainer  # noqa: E402

MODELS = {
    # name: (zoo options, input shape, label shape, examples, batch)
    "mlp": ({}, (784,), (), 1024, 128),
    "resnet18": ({"small_input": True, "num_classes": 10}, (32, 32, 3), (), 128, 32),
    "gpt_small": ({}, (128,), (128,), 16, 4),
}
RESNET50 = ({"small_input": True, "num_classes": 10}, (32, 32, 3), (), 128, 64)


def data(name: str, spec: tuple) -> tuple[np.ndarray, np.ndarray]:
    _, shape, label_shape, n, _ = spec
    rng = np.random.default_rng(0)
    if name == "gpt_small":
        tokens = rng.integers(0, 50257, (n, *shape)).astype(np.int32)
        return tokens, np.roll(tokens, -1, axis=1)
    x = rng.normal(size=(n, *shape)).astype(np.float32)
    return x, rng.integers(0, 10, (n, *label_shape)).astype(np.int32)


def step_of(name: str, spec: tuple, steps: int = 2):
    model = tpukit.zoo.create(name, **spec[0])
    trainer = Trainer(model, optax.adam(1e-3))
    return trainer.compile_step(data(name, spec), batch_size=spec[4], steps_per_execution=steps)


def say(text: str) -> None:
    """Progress on stderr: a ResNet-50 step compiles for minutes on a busy CPU."""
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def child_dump(name: str, folder: str) -> str | None:
    """XLA's live-range report of the same step, from a process run with XLA's dump flags."""
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={folder} --xla_dump_hlo_as_text"
    env = dict(os.environ, XLA_FLAGS=flags.strip())
    env.pop("TPUKIT_DEVICE_MEMORY", None)
    done = subprocess.run(
        [sys.executable, __file__, "--dump-child", name], env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    found = sorted(pathlib.Path(folder).glob("*jit_fit_step*after_optimizations-live-range.txt"))
    return found[0].read_text() if found else None


def compare(name: str) -> dict:
    spec = MODELS[name]
    say(f"{name}: compiling its step")
    start = time.perf_counter()
    step = step_of(name, spec)
    compiled_s = time.perf_counter() - start
    view = step.memory_view()
    stats = step.jax_compiled.memory_analysis()
    allocated = (
        stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        - stats.alias_size_in_bytes
        + stats.temp_size_in_bytes
    )
    constants = view.ranges.allocated().get("constant", 0)
    row = {
        "model": name,
        "parameters": sum(x.size for x in jax.tree.leaves(step.example_arguments[0][0])),
        "batch": spec[4],
        "compile_s": round(compiled_s, 1),
        "source": "estimate" if view.is_estimate else "xla",
        "peak": view.peak_bytes,
        "allocated": allocated,
        "peak_memory_in_bytes": stats.peak_memory_in_bytes,
        "temp_size_in_bytes": stats.temp_size_in_bytes,
        "constants": constants,
        "difference": view.peak_bytes - stats.peak_memory_in_bytes,
        "difference_explained": view.peak_bytes - stats.peak_memory_in_bytes
        == stats.temp_size_in_bytes - constants,
        "values_at_peak": view.values_at_peak_bytes,
        "in_use_at_peak": view.in_use_at_peak_bytes,
    }
    with tempfile.TemporaryDirectory(prefix="memory-view-") as folder:
        report = child_dump(name, folder)
    if report is None:
        row.update(xla_report=False, buffers_match=None)
        return row
    peak_at = int(re.search(r"Live ranges at (\d+) \(peak\)", report).group(1))
    usage = int(re.search(r"peak usage: ([\d ]+) bytes", report).group(1).replace(" ", ""))
    listed = report.split("(peak):")[1].split("Stack trace")[0]
    theirs = {k: int(v) for k, v in re.findall(r"^\s+(\S+\{[^}]*\}): (\d+) bytes", listed, re.M)}
    ours = {b.name if "{" in b.name else b.name + "{}": b.size for b in view.buffers_at_peak()}
    row.update(
        xla_report=True,
        xla_peak_position=peak_at,
        peak_position=view.peak_position,
        xla_peak_usage=usage,
        buffers_xla=len(theirs),
        buffers_ours=len(ours),
        buffers_match=ours == theirs and view.peak_position == peak_at,
        only_ours=sorted(set(ours) - set(theirs))[:5],
        only_xla=sorted(set(theirs) - set(ours))[:5],
    )
    return row


def resnet50_oom() -> dict:
    """A ResNet-50 step over a set capacity: the explanation, then one epoch at its batch.

    One step per call (the epoch's calls are then one program, which the check before
    fit's first step compiles), so "fewer steps per execution" is not among the fixes."""
    spec = RESNET50
    batch = spec[4]
    say("ResNet-50: compiling its step")
    full = step_of("resnet50", spec, steps=1)
    needed = full.memory.total_bytes
    capacity = needed - full.memory.temp_bytes // 2
    tpukit.set_device_memory(capacity)
    try:
        say(f"ResNet-50: compiling under a capacity of {capacity:,} B (the explanation measures)")
        start = time.perf_counter()
        try:
            step_of("resnet50", spec, steps=1)
            message = ""
        except tpukit.TpukitError as error:
            message = str(error)
        explain_s = time.perf_counter() - start
        found = re.search(r"The largest batch that fits is (\d+) of", message)
        fitted = int(found.group(1)) if found else None
        trained = None
        if fitted:
            model = tpukit.zoo.create("resnet50", **spec[0])
            say(f"ResNet-50: training one epoch at batch_size={fitted}, the capacity still set")
            start = time.perf_counter()
            history = tpukit.fit(
                model, optax.adam(1e-3), data("resnet50", spec), epochs=1, batch_size=fitted,
                steps_per_execution=1, verbose=False,
            )  # fmt: skip
            trained = {
                "loss": history.epochs[0]["loss"],
                "steps": history.epochs[0]["steps"],
                "seconds": round(time.perf_counter() - start, 1),
            }
    finally:
        tpukit.set_device_memory(None)
    return {
        "batch": batch,
        "needed": needed,
        "capacity": capacity,
        "explain_s": round(explain_s, 1),
        "message": message,
        "fitted_batch": fitted,
        "trained": trained,
    }


def mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:,.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--no-oom", action="store_true", help="skip the ResNet-50 part")
    parser.add_argument("--dump-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dump_child:  # the child process: compile the step with XLA's dump flags on
        step_of(args.dump_child, MODELS[args.dump_child])
        return
    rows = [compare(name) for name in args.models]
    print(
        f"\nJAX {jax.__version__}, {jax.devices()[0].device_kind}, fit's step "
        "(2 steps per call, adam); MiB"
    )
    header = (
        f"{'model':<10} {'batch':>5} {'peak':>9} {'a+o-al+t':>9} {'peak_mem':>9} "
        f"{'diff':>8} {'temp-c':>8} {'XLA usage':>9} {'ours':>9} {'buffers':>9} match"
    )
    print(header)
    for r in rows:
        print(
            f"{r['model']:<10} {r['batch']:>5} {mib(r['peak']):>9} {mib(r['allocated']):>9} "
            f"{mib(r['peak_memory_in_bytes']):>9} {mib(r['difference']):>8} "
            f"{mib(r['temp_size_in_bytes'] - r['constants']):>8} "
            f"{mib(r.get('xla_peak_usage')):>9} {mib(r['values_at_peak']):>9} "
            f"{r.get('buffers_ours', '-')!s:>4}/{r.get('buffers_xla', '-')!s:<4} "
            f"{r['buffers_match']}"
        )
    result = {"jax": jax.__version__, "device": jax.devices()[0].device_kind, "steps": rows}
    if not args.no_oom:
        oom = resnet50_oom()
        result["resnet50_oom"] = oom
        print(
            f"\nResNet-50 (32x32 images, batch {oom['batch']}): needs {mib(oom['needed'])} MiB, "
            f"capacity set to {mib(oom['capacity'])} MiB; explained in {oom['explain_s']} s:"
        )
        print("  " + oom["message"].replace("\n", "\n  "))
        print(f"fit at batch_size={oom['fitted_batch']}: {oom['trained']}", flush=True)
    out = pathlib.Path(__file__).parent / "results" / f"memory_view-{jax.default_backend()}.json"
    out.parent.mkdir(exist_ok=True)
    if out.exists():  # a partial run (--models, --no-oom) keeps the other rows
        kept = json.loads(out.read_text())
        if kept.get("jax") == result["jax"]:
            ran = {r["model"] for r in rows}
            result["steps"] = [r for r in kept.get("steps", []) if r["model"] not in ran] + rows
            if "resnet50_oom" in kept and "resnet50_oom" not in result:
                result["resnet50_oom"] = kept["resnet50_oom"]
    out.write_text(json.dumps(result, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
