"""How a profile's tables read: their columns, each cell drawn from a whole record.

One job: the formats of `Profile`'s tables (time, share with its bar, FLOPs, bytes,
rates, the roofline and the share of it reached) and the report's style rules.

    >>> _reached(1.25), _percent(0.5), _rate(None, "B/s")
    ('125%*', '50%', '-')

Imports: ``tpukit.display``.
"""

from __future__ import annotations

from typing import Any

from tpukit.display import MUTED_COLOR, Column, format_bytes, format_flops, format_seconds

_KIND = "tpukit-profile"
_RULES = (
    f"&{{border:1px solid {MUTED_COLOR};border-radius:4px;padding:6px 10px;max-width:100%;"
    "box-sizing:border-box;overflow-x:auto}"
    "& > div, & summary{white-space:normal}"
    f"& .note{{color:{MUTED_COLOR}}}"
    "& .warn{color:#b45309}"
    "& td{white-space:nowrap}"
    "& .bar{display:inline-block;height:8px;margin-right:6px;vertical-align:middle;"
    "background:#e8710a;border-radius:1px;opacity:.85}"
)


def table_columns(by: str, calls: list[Column], with_peak: bool) -> list[Column]:
    """The columns of a table of records by ``"instruction"`` or ``"group"``; ``calls``
    is the runs column when shown, ``with_peak`` adds the roofline's when the device's
    peak is known."""
    first = (
        [
            Column("instruction", format=lambda r: r["name"]),
            Column("op", format=lambda r: r["fusion_kind"] or r["opcode"]),
            Column("group", format=lambda r: r["group"]),
            Column("source", format=lambda r: r["source"] or "-"),
        ]
        + calls
        if by == "instruction"
        else [
            Column("group", format=lambda r: r["group"]),
            Column("ops", "right", lambda r: str(r["instructions"])),
        ]
    )
    rest = [
        Column("time", "right", lambda r: format_seconds(r["seconds"])),
        Column("share", "right", _share, markup=_share_bar),
        Column("FLOPs", "right", lambda r: format_flops(r["flops"]) if r["flops"] else "-"),
        Column("bytes", "right", lambda r: format_bytes(r["bytes"]) if r["bytes"] else "-"),
        Column("FLOP/s", "right", lambda r: _rate(r["flops_per_second"], "FLOP/s")),
        Column("bandwidth", "right", lambda r: _rate(r["bytes_per_second"], "B/s")),
    ]
    if with_peak:
        rest += [
            Column("roofline", "right", _roofline_text),
            Column("reached", "right", lambda r: _reached(r["roofline_share"])),
        ]
    return first + rest


def _share(record: dict[str, Any]) -> str:
    return f"{record['share']:.1%}"


def _share_bar(record: dict[str, Any]) -> str:
    """The share with a bar as long as it (60 px for all the time) before it."""
    width = max(1, round(60 * record["share"]))
    return f'<span class="bar" style="width:{width}px"></span>{_share(record)}'


def _rate(value: float | None, unit: str) -> str:
    if not value:
        return "-"
    if unit == "FLOP/s":
        return format_flops(value) + "/s"
    return format_bytes(value) + "/s"


def _reached(value: float | None) -> str:
    """The share of the roofline reached; over 100% means the estimate, not the chip, is off."""
    if value is not None and value > 1:
        return f"{value:.0%}*"
    return _percent(value)


def _percent(value: float | None) -> str:
    return f"{value:.0%}" if value is not None else "-"


def _roofline_text(record: dict[str, Any]) -> str:
    if not record.get("roofline_seconds"):
        return "-"
    return f"{format_seconds(record['roofline_seconds'])} {record['bound']}"
