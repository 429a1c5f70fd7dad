"""Where one compile's time goes: tracing, lowering, and XLA's own phases and passes.

Tracing and lowering are JAX's, and the ledger has their seconds from ``jax.monitoring``.
XLA's part is read from what XLA itself reports when it compiles under the profiler: its
annotations on the compiling thread (on CPU, ``PjRtCpuClient::Compile`` holding the HLO
pass pipelines, ``HLO passes through layout assignment (jit_f)`` and the like, each pass
inside them, then ``Codegen`` and ``ThunkEmitter::EmitEntryComputation``). The compile
is run again for this, with a harmless XLA option set to a value not used before, so
that neither JAX's in-memory cache nor the persistent cache hands back an executable
already made.

Phases are cut from the compiling thread's spans, so they add up to XLA's own span:
HLO passes (fusion, layout assignment and scheduling apart, the rest together), code
generation, and what XLA did outside both. Work XLA hands to other threads (CPU fusion
kernels compiled in parallel) is inside the code generation span, not added to it. Where
XLA writes no annotations (a plugin that does not), only the total is known, and the
result says so.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax

from tpukit.display import Column, Line, Report, Table, describe_location, format_seconds
from tpukit.hlo import HloModule, is_user_file

_KIND = "tpukit-compile-phases"
# an XLA debug option that changes nothing in the program (without a dump folder, how
# many modules to dump; negative: no limit), only the compile's cache key
_FRESH_OPTION = "xla_dump_max_hlo_modules"
_PIPELINE = re.compile(r"^HLO passes|\(.+\)$|RunHloPasses|OptimizeHloModule")
_CODEGEN = re.compile(r"Codegen|Emit|LLVM|llvm|JitCompiler|Thunk|Kernel|PTX|ptx|cubin|Assembl")


@dataclass(frozen=True)
class CompilePhases:
    """The seconds of one compile, phase by phase.

    ``trace_seconds`` and ``lower_seconds`` are JAX's (``None`` when not known: the
    trace was reused); ``xla_seconds`` is the wall time of XLA's compile as measured
    around it; ``phases`` cut XLA's own span into ``(phase, seconds)`` that add up to it,
    plus the time JAX spent around XLA; ``passes`` are the slowest HLO passes,
    ``(pass, seconds, runs)``; ``lines`` the user's source lines that hold the most
    instructions of the program XLA was given, ``(line, instructions)`` (a Python loop
    unrolled by tracing shows as one line's many copies).
    """

    name: str
    trace_seconds: float | None
    lower_seconds: float | None
    xla_seconds: float
    phases: tuple[tuple[str, float], ...]
    passes: tuple[tuple[str, float, int], ...]
    notes: tuple[str, ...] = field(default=())
    lines: tuple[tuple[str, int], ...] = field(default=())

    @property
    def seconds(self) -> float:
        """Tracing, lowering and XLA's compile together."""
        return (self.trace_seconds or 0.0) + (self.lower_seconds or 0.0) + self.xla_seconds

    def table(self) -> list[dict[str, Any]]:
        """Each phase as a plain dict: ``phase``, ``seconds``, ``share`` of the whole."""
        rows = [("tracing (JAX)", self.trace_seconds), ("lowering (JAX)", self.lower_seconds)]
        rows += [(f"XLA: {name}", s) for name, s in self.phases]
        total = self.seconds or 1.0
        return [{"phase": name, "seconds": s, "share": (s or 0.0) / total} for name, s in rows]

    def report(self) -> Report:
        """The one description both ``repr``s render."""
        share = Column("share", align="right", format=lambda v: f"{v:.0%}")
        phases = Table(
            [Column("phase"), Column("seconds", align="right", format=_seconds), share],
            [(r["phase"], r["seconds"], r["share"]) for r in self.table()],
            caption="phases",
        )
        passes = Table(
            [
                Column("HLO pass"),
                Column("seconds", align="right", format=format_seconds),
                Column("runs", align="right"),
            ],
            self.passes,
            caption="slowest HLO passes",
            text_limit=10,
        )
        blocks: list[Line | Table] = [phases]
        if self.passes:
            blocks.append(passes)
        if self.lines:
            blocks.append(
                Table(
                    [Column("source line"), Column("instructions", align="right")],
                    self.lines,
                    caption="source lines with the most instructions (as lowered)",
                )
            )
        blocks += [Line(note, "note") for note in self.notes]
        title = (
            f"Compile of {self.name}: {format_seconds(self.seconds)} "
            f"(XLA {format_seconds(self.xla_seconds)})"
        )
        return Report(_KIND, title, blocks)

    def __repr__(self) -> str:
        return self.report().text()

    def _repr_html_(self) -> str:
        return self.report().html()


def _seconds(value: float | None) -> str:
    return "-" if value is None else format_seconds(value)


def compile_phases(
    lowered: Any,
    name: str,
    trace_seconds: float | None = None,
    lower_seconds: float | None = None,
    module: HloModule | None = None,
) -> CompilePhases:
    """Compile ``lowered`` (a ``jax.stages.Lowered``) again under the profiler and cut the
    compile into phases; tracing and lowering seconds are the caller's (from the ledger),
    and ``module`` (the lowered HLO) gives the source lines with the most instructions."""
    fresh = {_FRESH_OPTION: -2 - time.time_ns() % 1_000_000_007}
    phases, passes, xla, notes = xla_phases(lambda: lowered.compile(compiler_options=fresh))
    lines = busiest_lines(module) if module is not None else ()
    return CompilePhases(name, trace_seconds, lower_seconds, xla, phases, passes, notes, lines)


def busiest_lines(module: HloModule, count: int = 5) -> tuple[tuple[str, int], ...]:
    """The user's source lines holding the most instructions of ``module``."""
    lines = Counter(
        (i.metadata.source_file, i.metadata.source_line)
        for i in module.instructions()
        if i.metadata.source_file and is_user_file(i.metadata.source_file)
    )
    return tuple((describe_location(file, line), n) for (file, line), n in lines.most_common(count))


def xla_phases(compile: Callable[[], Any]) -> tuple[tuple, tuple, float, tuple[str, ...]]:
    """``(phases, passes, wall seconds, notes)`` of the XLA compile ``compile()`` runs."""
    from jax.profiler import ProfileData

    with tempfile.TemporaryDirectory() as folder:
        with jax.profiler.trace(folder):
            start = time.perf_counter()
            compile()
            wall = time.perf_counter() - start
        files = sorted(Path(folder).rglob("*.xplane.pb"))
        data = ProfileData.from_file(str(files[-1])) if files else None
    spans = _compiling_thread(data) if data is not None else []
    if not spans:
        note = "XLA reported no phases for this compile (no annotations on this platform)."
        return (("compile (no phases reported)", wall),), (), wall, (note,)
    return (*_phases(spans, wall), wall, ())


def _compiling_thread(data: Any) -> list[tuple[str, int, int]]:
    """``(name, start ns, end ns)`` of the thread XLA compiled on, its outermost span first."""
    best: list[tuple[str, int, int]] = []
    best_length = 0
    for plane in data.planes:
        for line in plane.lines:  # JAX 0.7 compiles on the Python thread, later ones not
            events = [
                (e.name, e.start_ns, e.start_ns + e.duration_ns)
                for e in line.events
                if not e.name.startswith("$")  # a Python frame, not XLA's annotation
            ]
            roots = [e for e in events if "Compile" in e[0] and "::" in e[0]]
            length = max((e[2] - e[1] for e in roots), default=0)
            if length > best_length:
                best, best_length = events, length
    if not best:
        return []
    root = max((e for e in best if "Compile" in e[0] and "::" in e[0]), key=lambda e: e[2] - e[1])
    inside = [e for e in best if e[1] >= root[1] and e[2] <= root[2] and e is not root]
    return [root, *sorted(inside, key=lambda e: (e[1], -e[2]))]


def _phases(spans: list[tuple[str, int, int]], wall: float) -> tuple[tuple, tuple]:
    """Cut the root span into phases; the slowest passes inside the HLO pipelines."""
    root, inside = spans[0], spans[1:]
    totals = {"HLO passes: fusion": 0, "HLO passes: layout assignment": 0}
    totals |= {"HLO passes: scheduling": 0, "HLO passes: other": 0, "code generation": 0}
    passes: dict[str, list[int]] = {}
    stack: list[tuple[str, int, int, str]] = []  # open spans and what they count as
    for name, start, end in inside:
        while stack and stack[-1][2] <= start:
            stack.pop()
        parent = stack[-1][3] if stack else ""
        if parent in ("code generation", "pass"):
            stack.append((name, start, end, parent))
            continue
        if parent == "pipeline" and not _PIPELINE.search(name):
            phase = _pass_phase(name)
            totals[phase] += end - start
            passes.setdefault(name, [0, 0])
            passes[name][0] += end - start
            passes[name][1] += 1
            stack.append((name, start, end, "pass"))
            continue
        if _PIPELINE.search(name):
            if parent != "pipeline":  # the outermost pipeline counts its own time
                totals["HLO passes: other"] += end - start
            stack.append((name, start, end, "pipeline"))
        elif _CODEGEN.search(name):
            totals["code generation"] += end - start
            stack.append((name, start, end, "code generation"))
        else:
            stack.append((name, start, end, parent))
    for phase in ("HLO passes: fusion", "HLO passes: layout assignment", "HLO passes: scheduling"):
        totals["HLO passes: other"] -= totals[phase]
    root_ns = root[2] - root[1]
    totals["other XLA work"] = root_ns - sum(totals.values())
    phases = [(name, ns / 1e9) for name, ns in totals.items() if ns > 0]
    phases.append(("JAX around XLA (cache key, options, loading)", max(wall - root_ns / 1e9, 0.0)))
    slowest = sorted(passes.items(), key=lambda item: -item[1][0])[:15]
    return tuple(phases), tuple((name, ns / 1e9, runs) for name, (ns, runs) in slowest)


def _pass_phase(name: str) -> str:
    lowered = name.lower()
    if "fusion" in lowered:
        return "HLO passes: fusion"
    if "layout" in lowered:
        return "HLO passes: layout assignment"
    if "schedul" in lowered:
        return "HLO passes: scheduling"
    return "HLO passes: other"
