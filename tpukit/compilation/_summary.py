"""The summary a ``Compiled`` object shows: compile time, signature, cost, memory, HLO.

The same facts are laid out twice: as a compact HTML card for notebooks and as
aligned text for terminals and logs.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from tpukit.compilation._placement import describe_tree_shardings
from tpukit.display._html_style import BORDER_COLOR, root_classes, table_style
from tpukit.display._units import format_bytes, format_flops, format_seconds
from tpukit.hlo._executed import executed

if TYPE_CHECKING:
    from tpukit.compilation._compiled import Compiled

_TOP_OPS = 12
_TOP_FUSIONS = 8


def _headline(c: Compiled) -> str:
    devices = c.devices
    kind = "CPU" if devices[0].platform == "cpu" else devices[0].device_kind
    where = f"{len(devices)} x {kind}" if len(devices) > 1 else kind
    text = (
        f"Compiled {c.name} for {where} in {format_seconds(c.compile_seconds)} "
        f"(trace+lower {format_seconds(c.lower_seconds)}, XLA {format_seconds(c.xla_seconds)})"
    )
    if c.from_cache:
        text += ", served from the persistent compilation cache"
    return text


def _facts(c: Compiled) -> list[tuple[str, str]]:
    cost = c.cost
    flops = format_flops(cost.flops)
    detail = [f"dot/conv counted by tpukit: {format_flops(cost.counted_flops)}"]
    detail.append(
        "XLA cost analysis: "
        + (format_flops(cost.backend_flops) if cost.backend_flops is not None else "none")
    )
    unknown = executed(c.hlo_module("optimized")).unknown_loops
    if unknown:  # never silently 1: the figure is a lower bound
        detail.append(
            f"{len(unknown)} loop(s) with unknown trip count ({', '.join(unknown[:3])}), "
            "counted once"
        )
    per_device = " per device" if len(c.devices) > 1 else ""
    facts = [(f"FLOPs{per_device}", f"{flops}  ({'; '.join(detail)})")]
    if cost.transcendentals is not None:
        facts.append(("transcendentals", f"{cost.transcendentals:,.0f}"))
    if cost.bytes_accessed is not None:
        intensity = cost.arithmetic_intensity
        facts.append(
            (
                "bytes accessed",
                format_bytes(cost.bytes_accessed)
                + (f"  ({intensity:.3g} FLOP/byte)" if intensity is not None else ""),
            )
        )
    devices = c.devices
    if len(devices) > 1:
        facts += _placement_facts(c)
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
    lowered = sum(c.op_counts("lowered").values())
    optimized_closed = c.op_counts("optimized", open_fusions=False)
    optimized = sum(c.op_counts("optimized").values())
    facts.append(
        (
            "HLO",
            f"{lowered} instructions lowered -> {optimized} optimized "
            f"({optimized_closed.get('fusion', 0)} fusions, {sum(optimized_closed.values())} "
            "outside fusion bodies)",
        )
    )
    return facts


def _placement_facts(c: Compiled) -> list[tuple[str, str]]:
    mesh = c.mesh
    mesh_text = " x ".join(f"{axis}={size}" for axis, size in mesh.items()) if mesh else "none"
    inputs = ", ".join(
        f"{name}: {describe_tree_shardings(s)}" for name, s in c.input_shardings.items()
    )
    collectives = c.collectives()
    return [
        ("mesh", f"{mesh_text} over {len(c.devices)} devices"),
        ("shardings", f"{inputs or '-'} -> {describe_tree_shardings(c.output_shardings)}"),
        (
            "collectives",
            ", ".join(f"{k.opcode} x{k.count} ({format_bytes(k.bytes)})" for k in collectives)
            or "none",
        ),
    ]


def _op_rows(c: Compiled) -> list[tuple[str, int, int]]:
    lowered = c.op_counts("lowered")
    optimized = c.op_counts("optimized")
    opcodes = sorted(
        set(lowered) | set(optimized),
        key=lambda op: (-optimized.get(op, 0), -lowered.get(op, 0), op),
    )
    return [(op, lowered.get(op, 0), optimized.get(op, 0)) for op in opcodes]


def _fusion_rows(c: Compiled) -> list[tuple[str, str, str, str, str, str]]:
    rows = []
    for fusion in c.fusions()[:_TOP_FUSIONS]:
        ops = ", ".join(
            f"{op} x{n}" if n > 1 else op
            for op, n in sorted(fusion.ops.items(), key=lambda kv: -kv[1])
        )
        rows.append(
            (
                fusion.name,
                fusion.kind,
                ops,
                format_flops(fusion.flops) if fusion.flops else "-",
                format_bytes(fusion.bytes),
                fusion.source_location or "-",
            )
        )
    return rows


def summary_text(c: Compiled) -> str:
    """The summary as plain text."""
    lines = [_headline(c), f"  {c.signature}"]
    facts = _facts(c)
    width = max(len(k) for k, _ in facts)
    lines += [f"  {k.ljust(width)}  {v}" for k, v in facts]
    rows = _op_rows(c)
    lines.append("  op counts (lowered -> optimized, fusions opened):")
    op_width = max([len(r[0]) for r in rows[:_TOP_OPS]] + [6])
    for op, low, opt in rows[:_TOP_OPS]:
        lines.append(f"    {op.ljust(op_width)}  {low:>6} -> {opt:<6}")
    if len(rows) > _TOP_OPS:
        lines.append(f"    ... {len(rows) - _TOP_OPS} more opcodes: .op_counts(stage)")
    fusions = _fusion_rows(c)
    if fusions:
        lines.append("  largest fusions:")
        for name, kind, ops, flops, nbytes, source in fusions:
            lines.append(f"    {name} ({kind}): {ops}; {flops}, {nbytes}; {source}")
    return "\n".join(lines)


_KIND = "tpukit-summary"
_RULES = f"&{{border:1px solid {BORDER_COLOR};border-radius:4px;padding:6px 10px;max-width:980px}}"


def _table(
    header: tuple[str, ...],
    rows: list[tuple],
    numeric: set[int] = frozenset(),
    nowrap: set[int] = frozenset(),
) -> str:
    def cls(i: int) -> str:
        names = ["num"] * (i in numeric) + ["nowrap"] * (i in nowrap)
        return f' class="{" ".join(names)}"' if names else ""

    head = "".join(f"<th{cls(i)}>{html.escape(h)}</th>" for i, h in enumerate(header))
    body = "".join(
        "<tr>"
        + "".join(f"<td{cls(i)}>{html.escape(str(cell))}</td>" for i, cell in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def summary_html(c: Compiled) -> str:
    """The summary as one self-contained HTML fragment."""
    facts = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in _facts(c)
    )
    rows = _op_rows(c)
    ops_table = _table(("opcode", "lowered", "optimized"), rows, numeric={1, 2})
    parts = [
        table_style(_KIND, _RULES),
        f'<div class="{root_classes(_KIND)}">',
        f"<div><b>{html.escape(_headline(c))}</b></div>",
        f"<div><code>{html.escape(str(c.signature))}</code></div>",
        f"<table>{facts}</table>",
        f"<details open><summary>op counts ({len(rows)} opcodes, fusions opened)</summary>{ops_table}</details>",
    ]
    fusions = _fusion_rows(c)
    if fusions:
        total = len(c.fusions())
        parts.append(
            f"<details><summary>fusions ({total}; largest {len(fusions)} shown)</summary>"
            + _table(
                ("fusion", "kind", "ops inside", "FLOPs", "bytes", "source"),
                fusions,
                numeric={3, 4},
                nowrap={0, 3, 4, 5},
            )
            + "</details>"
        )
    parts.append("</div>")
    return "".join(parts)
