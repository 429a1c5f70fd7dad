"""How many of the operations XLA kept the diff matches, on real before/after pairs.

A pair is one program before and after XLA's optimizations: JAX's lowered HLO (what
``jax.jit(f).lower(...)`` hands XLA, the ``before_optimizations`` dump) and the optimized
module XLA compiled from it. `tpukit.diff(before, after).graph()` matches the working ops
of the two (`_diff_match.match_programs`: fusions, dots, custom calls, collectives; not
plumbing such as parameters or tuples). For each pair this prints:

- ``after``: the optimized program's working ops;
- ``added``: those of them XLA made that stand for nothing of the lowered program: copies
  (``copy``, ``copy-start``, ``copy-done``: layout changes and prefetches);
- ``kept``: ``after - added``, the ops that carry the lowered program's work;
- ``paired``: the optimized ops the diff paired one to one with an op of the lowered
  program; ``parts``: those it found to be parts of a lowered op XLA expanded into several
  (`_diff_parts`: an ``fft`` into DFT matmuls, a ``gather`` and its index fusion);
  ``matched``: both, and ``matched / kept`` (the issue's bar: at least 80%);
  ``unmatched``: ``kept - matched``;
- on the lowered side, ``removed``: the lowered working ops the diff shows removed, and
  ``fused``: those it found XLA fused into an optimized op (`_diff_fused`: the op_name
  and source place a fusion's instructions keep), no longer removed. They count lowered
  ops, so ``matched / kept`` (optimized ops) is what it was: a fused op adds no
  optimized op to the matched ones (its fusion is matched, or not, by its own pair);
- ``layout``: the kept ops that are fusions only laying data out (every op inside is a
  copy, transpose, bitcast, reshape, broadcast, concatenate, iota or slice), which XLA
  makes for layouts rather than from an op of the program, and ``matched / (kept -
  layout)``, the share without them (both are printed: the bar is read on the first).

The pairs: the small JAX programs and zoo training steps of `hlo_first_views` (lowered and
optimized here, on CPU, cached in the temp directory), the CPU dump under
``tests/data/hlo/dump``, the TPU v6e pairs under ``benchmarks/hlo_pairs/v6e`` (real libtpu
modules nobody here wrote, git-ignored: ``sources.md`` there says where to copy them
from and why they are not kept here), and any
``--pair BEFORE AFTER`` files given. The totals are printed for the CPU pairs and the TPU
pairs apart (``--pair`` files count with neither).

    .venv/bin/python benchmarks/hlo_diff_match.py [--pair before.txt after.txt ...]

Prints a table and writes ``benchmarks/results/hlo_diff_match.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
TMP = pathlib.Path(tempfile.gettempdir())
#: Optimized ops that stand for no op of the lowered program (layouts, prefetches).
XLA_ADDED = frozenset({"copy", "copy-start", "copy-done"})
#: What a fusion that only lays data out holds (XLA's ``transpose_copy_fusion``,
#: ``concatenate_bitcast_fusion``, ``wrapped_iota``): counted apart, in ``layout``.
MOVES = frozenset(
    "parameter constant copy transpose bitcast reshape broadcast concatenate iota slice "
    "tuple get-tuple-element".split()
)


def _cached(name: str, make) -> str:
    path = TMP / f"tpukit-diffmatch-{name}.hlo.txt"
    if not path.exists():
        path.write_text(make())
    return path.read_text()


TPU_PAIRS = ROOT / "benchmarks" / "hlo_pairs" / "v6e"


def pairs(extra: list[list[str]]) -> list[tuple[str, str, str, str]]:
    """``(name, platform, before text, after text)`` of every pair measured."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import jax
    from hlo_first_views import ZOO, _programs

    found = []
    for name, (fn, args) in _programs().items():
        lowered = jax.jit(fn).lower(*args)
        found.append(
            (
                name,
                "cpu",
                # with its op_names and stack frames, as a dump or tpukit.compile has it
                # (the "before1" and "after1" files come of one lowering; the older ones without)
                _cached(f"{name}.before1", lambda low=lowered: low.as_text("hlo", debug_info=True)),
                _cached(f"{name}.after1", lambda low=lowered: low.compile().as_text()),
            )
        )
    for model in ("mlp", "lenet5"):
        found.append((f"{model}_step", "cpu", *_step_pair(model, ZOO[model])))
    dump = ROOT / "tests" / "data" / "hlo" / "dump"
    found.append(
        (
            "jit_predict (dump)",
            "cpu",
            (dump / "module_0003.jit_predict.before_optimizations.txt").read_text(),
            (dump / "module_0003.jit_predict.cpu_after_optimizations.txt").read_text(),
        )
    )
    for before in sorted(TPU_PAIRS.glob("*.before.hlo")):  # absent if the data was dropped
        name = before.name.removesuffix(".before.hlo")
        after = TPU_PAIRS / f"{name}.after.hlo"
        found.append((f"{name} (v6e)", "tpu", before.read_text(), after.read_text()))
    for before, after in extra:
        found.append(
            (
                pathlib.Path(after).name,
                "",
                pathlib.Path(before).read_text(),
                pathlib.Path(after).read_text(),
            )
        )
    return found


def _step_pair(model: str, shapes: tuple[str, str]) -> tuple[str, str]:
    """Both stages of one compile of the model's training step: two compiles would give
    the ops different stack frames (the frames above the step differ), and the diff
    reads a shared stack as evidence that a fused op is the lowered op (`_diff_fused`)."""

    @functools.cache
    def compiled():
        import optax
        from _steps import tutorial_train_step
        from flax import nnx

        import tpukit
        from tpukit import zoo

        net = zoo.create(model)
        optimizer = optax.adam(1e-3)
        state = optimizer.init(nnx.state(net, nnx.Param))
        x, y = (tpukit.shape(s) for s in shapes)
        return tpukit.compile(tutorial_train_step(optimizer), net, state, x, y)

    return (  # "step1": one compile for both (the older "step" files came of two)
        _cached(f"{model}_step1.before", lambda: compiled().hlo_text("lowered")),
        _cached(f"{model}_step1.after", lambda: compiled().hlo_text("optimized")),
    )


def measure(name: str, platform: str, before: str, after: str) -> dict:
    from tpukit.graph._diff_match import match_programs
    from tpukit.hlo import graph

    match = match_programs(graph(before, stage="lowered"), graph(after, stage="optimized"))
    side_a, side_b = match.sides
    opcode = {node: side_b.data.instr[node].opcode for node in side_b.ops}
    added_by_xla = [node for node in side_b.ops if opcode[node] in XLA_ADDED]
    kept = [node for node in side_b.ops if opcode[node] not in XLA_ADDED]
    paired = set(match.pairs.values())
    matched = paired | set(match.parts)
    module = side_b.data.module
    layout = [
        node
        for node in kept
        if opcode[node] == "fusion"
        and all(i.opcode in MOVES for c in module.called(side_b.data.instr[node]) for i in c)
    ]
    unmatched = sorted(
        f"{opcode[node]} {side_b.data.label[node]}" for node in kept if node not in matched
    )
    return {
        "name": name,
        "platform": platform,
        "before_ops": len(side_a.ops),
        "after_ops": len(side_b.ops),
        "xla_added": len(added_by_xla),
        "kept": len(kept),
        "paired": sum(node in paired for node in kept),
        "parts": sum(node in match.parts for node in kept),
        "matched": sum(node in matched for node in kept),
        "matched_of_kept": sum(node in matched for node in kept) / len(kept) if kept else 1.0,
        "layout": len(layout),
        "matched_of_kept_less_layout": (
            sum(node in matched for node in kept if node not in layout) / (len(kept) - len(layout))
            if len(kept) > len(layout)
            else 1.0
        ),
        "unmatched": unmatched,
        "removed": len(match.removed),
        "fused": len(getattr(match, "fused", {})),  # (absent before _diff_fused)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", nargs=2, action="append", default=[], metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    rows = [measure(*pair) for pair in pairs(args.pair)]
    print(
        "| pair | lowered ops | optimized ops | XLA's copies | kept | paired | parts | matched "
        "| of kept | unmatched | layout fusions | of kept less layout | lowered removed "
        "| lowered fused |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['name']} | {row['before_ops']} | {row['after_ops']} | {row['xla_added']} | "
            f"{row['kept']} | {row['paired']} | {row['parts']} | {row['matched']} | "
            f"{row['matched_of_kept']:.0%} | {row['kept'] - row['matched']} | "
            f"{row['layout']} | {row['matched_of_kept_less_layout']:.0%} | "
            f"{row['removed']} | {row['fused']} |"
        )
    print()
    for label, chosen in (
        ("CPU pairs", [r for r in rows if r["platform"] == "cpu"]),
        ("TPU pairs", [r for r in rows if r["platform"] == "tpu"]),
        ("all pairs", rows),
    ):
        kept = sum(row["kept"] for row in chosen)
        matched = sum(row["matched"] for row in chosen)
        paired, parts = (sum(row[k] for row in chosen) for k in ("paired", "parts"))
        removed, fused = (sum(row[k] for row in chosen) for k in ("removed", "fused"))
        if kept:
            print(
                f"{label}: {matched} of {kept} kept ops matched ({matched / kept:.0%}): "
                f"{paired} paired, {parts} parts, {kept - matched} unmatched; "
                f"lowered ops: {removed} removed, {fused} fused into an optimized op"
            )
    for row in rows:
        if row["unmatched"]:
            print(f"{row['name']}: not matched: {', '.join(row['unmatched'][:12])}")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(exist_ok=True)
    (out / "hlo_diff_match.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
