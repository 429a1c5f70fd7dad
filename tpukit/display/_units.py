"""Bytes, seconds and FLOPs as people read them, the same everywhere tpukit prints one.

>>> format_bytes(1536), format_seconds(0.00123), format_flops(3.9e12), format_count(1, "device")
('1.5 KiB', '1.23 ms', '3.9 TFLOP', '1 device')
"""

from __future__ import annotations


def format_bytes(n: float | None) -> str:
    """``1536`` -> ``'1.5 KiB'``; ``None`` -> ``'-'``."""
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def format_seconds(seconds: float) -> str:
    """``0.00123`` -> ``'1.23 ms'``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if seconds >= scale or unit == "ns":
            return f"{seconds / scale:.3g} {unit}"
    raise AssertionError("unreachable")


def format_flops(flops: float) -> str:
    """``3.9e12`` -> ``'3.9 TFLOP'``."""
    for unit, scale in (
        ("PFLOP", 1e15),
        ("TFLOP", 1e12),
        ("GFLOP", 1e9),
        ("MFLOP", 1e6),
        ("kFLOP", 1e3),
    ):
        if flops >= scale:
            return f"{flops / scale:.3g} {unit}"
    return f"{flops:.0f} FLOP"


def format_count(n: int, noun: str, plural: str | None = None) -> str:
    """``(1, "device")`` -> ``'1 device'``, ``(8, "device")`` -> ``'8 devices'``: the noun
    agrees with the count (``plural`` where adding an s is wrong)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
