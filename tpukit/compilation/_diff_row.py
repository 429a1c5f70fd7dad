"""One row of a diff: a figure of two compilations, and how its values differ.

One job: `DiffRow`, its delta and ratio, whether it changed (times within
`TIME_TOLERANCE` count as the same) and how its values read as text.

    >>> DiffRow("memory", "argument bytes", 2048, 1024, "bytes").cells()
    ('2.0 KiB', '1.0 KiB', '-1.0 KiB', 'x0.5')

Imports: ``tpukit.display``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpukit.display import format_bytes, format_flops, format_seconds

#: Wall-clock rows count as changed only when b/a leaves this range: two compiles
#: of one program never take exactly the same time.
TIME_TOLERANCE = (0.8, 1.25)
OPS_OPENED = "ops, fusions opened"
OPS_CLOSED = "ops, fusions closed"

Value = int | float | str | None


@dataclass(frozen=True)
class DiffRow:
    """One compared figure: ``a`` and ``b`` values, and how they differ.

    ``unit`` says how to read the values: ``"count"``, ``"flops"``, ``"bytes"``,
    ``"seconds"``, ``"flop/byte"`` or ``"text"``.
    """

    section: str
    metric: str
    a: Value
    b: Value
    unit: str

    @property
    def delta(self) -> float | None:
        """``b - a``, or ``None`` for text or a missing value."""
        if not _numeric(self.a) or not _numeric(self.b):
            return None
        return self.b - self.a

    @property
    def ratio(self) -> float | None:
        """``b / a``, or ``None`` when ``a`` is zero, missing or text."""
        if not _numeric(self.a) or not _numeric(self.b) or self.a == 0:
            return None
        return self.b / self.a

    @property
    def changed(self) -> bool:
        """Whether the values differ (times: by more than `TIME_TOLERANCE`)."""
        if self.unit == "seconds" and self.ratio is not None:
            low, high = TIME_TOLERANCE
            return not low <= self.ratio <= high
        return self.a != self.b

    def cells(self) -> tuple[str, str, str, str]:
        """The row as text: a, b, delta (``+1.5 KiB``) and ratio (``x0.5``)."""
        ratio = self.ratio
        if ratio is not None:
            ratio_text = f"x{ratio:.3g}"
        elif self.a == 0 and _numeric(self.b) and self.b:
            ratio_text = "new"
        else:
            ratio_text = ""
        delta = self.delta
        delta_text = "" if delta is None or delta == 0 else _signed(delta, self.unit)
        return _format(self.a, self.unit), _format(self.b, self.unit), delta_text, ratio_text


def _numeric(value: Value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _format(value: Value, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "text":
        return str(value)
    if unit == "flops":
        return format_flops(value)
    if unit == "bytes":
        return format_bytes(value)
    if unit == "seconds":
        return format_seconds(value)
    if unit == "flop/byte":
        return f"{value:.3g}"
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # XLA reports some counts (transcendentals) as floats
    return f"{value:,}"


def _signed(delta: float, unit: str) -> str:
    sign = "+" if delta > 0 else "-"
    return sign + _format(abs(delta), unit)
