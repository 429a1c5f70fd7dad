"""The memory view's chart: live bytes along a program's schedule, stacked by kind.

One job: the SVG that `MemoryView` shows in a notebook, drawn from its figures (the live
bytes of each kind at each step, the peak, what is allocated and the device's capacity),
so it knows nothing of HLO or live ranges.

    >>> kinds = ("argument", "output", "temporary", "constant")
    >>> steps = [dict(zip(kinds, bytes_)) for bytes_ in [(1024, 0, 0, 0), (1024, 0, 1024, 0),
    ...                                                 (1024, 1024, 0, 0)]]
    >>> svg = chart_svg(steps, "f", peak_bytes=2048, peak_position=1, allocated=3072,
    ...                 capacity=None)
    >>> svg.startswith("<svg") and "XLA's peak step 1" in svg
    True

Imports: ``tpukit.display`` and the kinds of ``_memory_ranges``.
"""

from __future__ import annotations

import html

from tpukit.display import BORDER_COLOR, MUTED_COLOR, format_bytes
from tpukit.memory._memory_ranges import KINDS

_COLORS = {
    "argument": "#4e79a7",
    "output": "#59a14f",
    "temporary": "#f28e2b",
    "constant": "#9c755f",
}
PLURAL = {
    "argument": "arguments",
    "output": "outputs",
    "temporary": "temporaries",
    "constant": "constants",
}


def chart_svg(
    steps: list[dict[str, int]],
    name: str,
    *,
    peak_bytes: int,
    peak_position: int,
    allocated: int,
    capacity: int | None,
    width: int = 720,
    height: int = 180,
) -> str:
    """Live bytes along the schedule (``steps``: bytes of each kind at each step), stacked
    by kind, XLA's peak, the allocated bytes and the device's capacity marked."""
    if not steps:
        return ""
    top = max(max(sum(s.values()) for s in steps), peak_bytes, 1)
    if capacity and capacity < top * 1.5:
        top = max(top, capacity)
    left, bottom, plot_w, plot_h = 64, height - 22, width - 74, height - 34
    x_step = plot_w / max(len(steps) - 1, 1)

    def y(value: float) -> float:
        return bottom - plot_h * value / top

    shapes, base = [], [0] * len(steps)
    for kind in KINDS:
        upper = [b + s[kind] for b, s in zip(base, steps)]
        if upper == base:
            continue
        points = [f"{left + k * x_step:.1f},{y(v):.1f}" for k, v in enumerate(upper)]
        points += [
            f"{left + k * x_step:.1f},{y(v):.1f}" for k, v in reversed(list(enumerate(base)))
        ]
        shapes.append(
            f'<polygon points="{" ".join(points)}" fill="{_COLORS[kind]}" fill-opacity=".75">'
            f"<title>{PLURAL[kind]}</title></polygon>"
        )
        base = upper
    px = left + peak_position * x_step
    # The label reads away from the chart's right edge, where a late peak would cut it.
    right = px > left + plot_w * 0.6
    shapes.append(
        f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{bottom - plot_h}" y2="{bottom}" '
        'stroke="#e15759" stroke-dasharray="3,2"/>'
        f'<text x="{px - 3 if right else px + 3:.1f}" y="{bottom - plot_h + 22}" '
        f'fill="#e15759" class="halo" text-anchor="{"end" if right else "start"}">XLA\'s peak '
        f"step {peak_position}</text>"
    )
    if allocated:
        ay = y(allocated)
        shapes.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{ay:.1f}" y2="{ay:.1f}" '
            f'stroke="{MUTED_COLOR}" stroke-dasharray="4,3"/>'
            f'<text x="{left + 4}" y="{ay - 3:.1f}" fill="{MUTED_COLOR}">allocated '
            f"{html.escape(format_bytes(allocated))} (arguments + outputs + packed "
            "temporaries)</text>"
        )
    if capacity and capacity <= top:
        cy = y(capacity)
        shapes.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{cy:.1f}" y2="{cy:.1f}" '
            'stroke="#e15759"/>'
            f'<text x="{left + plot_w - 4}" y="{cy - 3:.1f}" text-anchor="end" '
            f'fill="#e15759">capacity {html.escape(format_bytes(capacity))}</text>'
        )
    legend = "".join(
        f'<tspan fill="{_COLORS[k]}">■</tspan> {PLURAL[k]} '
        for k in KINDS
        if any(s[k] for s in steps)
    )
    return (
        f'<svg width="{width}" height="{height}" role="img" font-size="11" '
        'font-family="inherit" style="display:block;margin:4px 0">'
        f"<title>live bytes along the schedule of {html.escape(name)}</title>"
        f'<line x1="{left}" x2="{left}" y1="{bottom - plot_h}" y2="{bottom}" '
        f'stroke="{BORDER_COLOR}"/><line x1="{left}" x2="{left + plot_w}" y1="{bottom}" '
        f'y2="{bottom}" stroke="{BORDER_COLOR}"/>'
        f'<text x="{left - 4}" y="{bottom - plot_h + 8}" text-anchor="end" '
        f'fill="{MUTED_COLOR}">{html.escape(format_bytes(top))}</text>'
        f'<text x="{left - 4}" y="{bottom}" text-anchor="end" fill="{MUTED_COLOR}">0</text>'
        f'<text x="{left}" y="{height - 6}" fill="{MUTED_COLOR}">{legend} · schedule '
        f"step 0-{len(steps) - 1} →</text>{''.join(shapes)}</svg>"
    )
