"""The summary a ``Compiled`` object shows: compile time, signature, cost, memory, HLO.

It reads the program (`tpukit.hlo.HloProgram`: op counts, cost, fusions, collectives)
and what compiling told beside it (`CompileFacts`: where, how long, memory, layout).
The facts are described once, as a `Report`, which renders as a compact HTML card
for notebooks and as aligned text for terminals and logs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tpukit.compilation._analysis import Memory
from tpukit.compilation._placement import describe_tree_shardings
from tpukit.display import (
    BORDER_COLOR,
    Column,
    Line,
    Report,
    Table,
    fact_table,
    format_bytes,
    format_count,
    format_flops,
    format_seconds,
)
from tpukit.hlo import HloProgram


@dataclass(frozen=True)
class CompileFacts:
    """What compiling told beside the program: the call, the devices, the times, memory.

    ``placement`` gives ``(mesh, input shardings, output shardings)`` for a program over
    several devices (None on one).
    """

    signature: str
    devices: tuple[Any, ...]
    lower_seconds: float
    xla_seconds: float
    from_cache: bool
    memory: Memory | None
    placement: tuple[dict[str, int] | None, dict[str, Any], Any] | None = None

    @property
    def compile_seconds(self) -> float:
        return self.lower_seconds + self.xla_seconds


_TOP_OPS = 12
_TOP_FUSIONS = 8


def _headline(p: HloProgram, c: CompileFacts) -> str:
    devices = c.devices
    kind = "CPU" if devices[0].platform == "cpu" else devices[0].device_kind
    where = f"{len(devices)} x {kind}" if len(devices) > 1 else kind
    text = (
        f"Compiled {p.name} for {where} in {format_seconds(c.compile_seconds)} "
        f"(trace+lower {format_seconds(c.lower_seconds)}, XLA {format_seconds(c.xla_seconds)})"
    )
    if c.from_cache:
        text += ", served from the persistent compilation cache"
    return text


def _facts(p: HloProgram, c: CompileFacts) -> list[tuple[str, str]]:
    cost = p.cost
    flops = format_flops(cost.flops)
    detail = [f"dot/conv counted by tpukit: {format_flops(cost.counted_flops)}"]
    once = ", each loop body once" if cost.repeated_loops else ""  # `Cost.repeated_loops`
    if once:  # XLA's figure is not one run: tpukit's all-FLOPs count stands in for it
        detail.append(f"all FLOPs counted by tpukit: {format_flops(cost.all_flops)}")
    detail.append(
        "XLA cost analysis: "
        + (format_flops(cost.backend_flops) + once if cost.backend_flops is not None else "none")
    )
    unknown = cost.unknown_loops
    if unknown:  # never silently 1: the figure is a lower bound
        detail.append(
            f"{format_count(len(unknown), 'loop')} with unknown trip count ({', '.join(unknown[:3])}), "
            "counted once"
        )
    per_device = " per device" if len(c.devices) > 1 else ""
    facts = [(f"FLOPs{per_device}", f"{flops}  ({'; '.join(detail)})")]
    if cost.transcendentals is not None:
        facts.append(
            ("transcendentals", f"{cost.transcendentals:,.0f}{once and '  (XLA' + once + ')'}")
        )
    if cost.bytes_accessed is not None:
        intensity = cost.arithmetic_intensity
        facts.append(
            (
                "bytes accessed",
                format_bytes(cost.bytes_accessed)
                + (f"  ({intensity:.3g} FLOP/byte)" if intensity is not None else "")
                + (
                    f"  (counted by tpukit at every loop iteration; XLA: "
                    f"{format_bytes(cost.backend_bytes)}{once})"
                    if once and cost.backend_bytes is not None
                    else ""
                ),
            )
        )
    devices = c.devices
    if c.placement is not None:
        facts += _placement_facts(p, c)
    memory = c.memory
    if memory is not None:
        facts.append(
            (
                "memory per device" if len(devices) > 1 else "memory",
                f"arguments {format_bytes(memory.argument_bytes)}, outputs {format_bytes(memory.output_bytes)}, "
                f"temporaries {format_bytes(memory.temp_bytes)}, code {format_bytes(memory.generated_code_bytes)}"
                + (f", aliased {format_bytes(memory.alias_bytes)}" if memory.alias_bytes else ""),
            )
        )
    lowered = sum(p.op_counts("lowered").values())
    optimized_closed = p.op_counts("optimized", open_fusions=False)
    opened = p.op_counts("optimized")
    optimized = sum(opened.values())
    # Opened, each fusion adds a parameter per value it reads: say so, or XLA seems to
    # have grown the program (VGG's "240 -> 455").
    fused_parameters = opened.get("parameter", 0) - optimized_closed.get("parameter", 0)
    facts.append(
        (
            "HLO",
            f"{lowered} instructions lowered -> {optimized} optimized "
            f"({optimized_closed.get('fusion', 0)} fusions, {sum(optimized_closed.values())} "
            "outside fusion bodies"
            + (
                f"; {fused_parameters} of the {optimized} are fusion parameters, one per "
                "value a fusion reads"
                if fused_parameters > 0
                else ""
            )
            + ")",
        )
    )
    return facts


def _placement_facts(p: HloProgram, c: CompileFacts) -> list[tuple[str, str]]:
    assert c.placement is not None
    mesh, input_shardings, output_shardings = c.placement
    mesh_text = " x ".join(f"{axis}={size}" for axis, size in mesh.items()) if mesh else "none"
    inputs = ", ".join(
        f"{name}: {describe_tree_shardings(s)}" for name, s in input_shardings.items()
    )
    collectives = p.collectives("optimized")
    return [
        ("mesh", f"{mesh_text} over {format_count(len(c.devices), 'device')}"),
        ("shardings", f"{inputs or '-'} -> {describe_tree_shardings(output_shardings)}"),
        (
            "collectives",
            ", ".join(f"{k.opcode} x{k.count} ({format_bytes(k.bytes)})" for k in collectives)
            or "none",
        ),
    ]


def _op_rows(p: HloProgram) -> list[tuple[str, int, int]]:
    lowered = p.op_counts("lowered")
    optimized = p.op_counts("optimized")
    opcodes = sorted(
        set(lowered) | set(optimized),
        key=lambda op: (-optimized.get(op, 0), -lowered.get(op, 0), op),
    )
    return [(op, lowered.get(op, 0), optimized.get(op, 0)) for op in opcodes]


def _fusion_rows(p: HloProgram) -> list[tuple[str, str, str, float, int, str]]:
    rows = []
    for fusion in p.fusions("optimized")[:_TOP_FUSIONS]:
        ops = ", ".join(
            f"{op} x{n}" if n > 1 else op
            for op, n in sorted(fusion.ops.items(), key=lambda kv: -kv[1])
        )
        rows.append(
            (
                fusion.name,
                fusion.kind,
                ops,
                fusion.flops,
                fusion.bytes,
                fusion.source_location or "-",
            )
        )
    return rows


_KIND = "tpukit-summary"
_RULES = f"&{{border:1px solid {BORDER_COLOR};border-radius:4px;padding:6px 10px;max-width:980px}}"


def summary(p: HloProgram, c: CompileFacts) -> Report:
    """The summary: headline, signature, facts, op counts and the largest fusions."""
    rows = _op_rows(p)
    ops = Table(
        [Column("opcode"), Column("lowered", "right"), Column("optimized", "right")],
        rows,
        caption=f"op counts ({len(rows)} opcodes, lowered -> optimized, fusions opened)",
        text_limit=_TOP_OPS,
        more="opcodes in .op_counts(stage)",
    )
    blocks: list[Line | Table] = [Line(c.signature, code=True), fact_table(_facts(p, c)), ops]
    fusions = _fusion_rows(p)
    if fusions:
        blocks.append(
            Table(
                [
                    Column("fusion", nowrap=True),
                    Column("kind"),
                    Column("ops inside"),
                    Column("FLOPs", "right", lambda f: format_flops(f) if f else "-", nowrap=True),
                    Column("bytes", "right", format_bytes, nowrap=True),
                    Column("source", nowrap=True),
                ],
                fusions,
                caption=f"fusions ({len(p.fusions('optimized'))}; largest {len(fusions)} shown)",
                open=False,
            )
        )
    return Report(_KIND, _headline(p, c), blocks, _RULES)
