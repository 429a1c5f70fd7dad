"""Time a compiled call on the device, with proper synchronisation.

JAX dispatches asynchronously: a call returns before the device has finished.
``time_call`` therefore waits for every output of a batch of calls before it
stops the clock, warms up first, and picks the batch size like ``%timeit``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax

from tpukit._errors import ArgumentError
from tpukit.display import Line, Report, format_flops, format_seconds
from tpukit.measure._peaks import DevicePeak


def time_call(
    call: Callable[[], Any],
    *,
    number: int | None = None,
    repeat: int = 7,
    min_seconds: float = 0.2,
    one_at_a_time: bool = False,
) -> tuple[list[float], int]:
    """Run ``call`` ``repeat`` times ``number`` times; return seconds per call of each repeat.

    With ``number=None`` the batch grows (1, 2, 5, 10, ...) until one batch takes at
    least ``min_seconds``, as ``%timeit`` does. A batch's calls are dispatched before
    the first is awaited, so the device never waits on the host; with
    ``one_at_a_time`` each call is awaited before the next is dispatched (a program
    over several simulated CPU devices, which XLA:CPU can deadlock with two in flight:
    ``tpukit.runtime.one_at_a_time``).
    """
    if repeat < 1 or (number is not None and number < 1):
        raise ArgumentError("number and repeat must be at least 1.")
    jax.block_until_ready(call())  # warm-up: first-call transfers and allocation

    def run(n: int) -> float:
        start = time.perf_counter()
        if one_at_a_time:
            for _ in range(n):
                jax.block_until_ready(call())
        else:
            jax.block_until_ready([call() for _ in range(n)])
        return time.perf_counter() - start

    if number is None:
        number = 1
        for candidate in _growing_counts():
            number = candidate
            if run(candidate) >= min_seconds or candidate >= 100_000:
                break
    return [run(number) / number for _ in range(repeat)], number


def _growing_counts():
    scale = 1
    while True:
        for step in (1, 2, 5):
            yield step * scale
        scale *= 10


@dataclass(frozen=True)
class TimingResult:
    """Timings of a compiled call: seconds per call, and throughput where the FLOPs are known.

    ``mfu`` is the share of the device's published bf16 peak (``None`` when the
    device's peak is unknown, as for CPUs). ``one_at_a_time``: each call was awaited
    before the next was dispatched (a program over several simulated CPU devices), so
    the figures include the host's dispatch of every call.
    """

    name: str
    times: list[float]
    number: int
    flops: float | None
    device_kind: str
    peak: DevicePeak | None
    one_at_a_time: bool = False

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def best(self) -> float:
        return min(self.times)

    @property
    def flops_per_second(self) -> float | None:
        return self.flops / self.median if self.flops else None

    @property
    def mfu(self) -> float | None:
        if self.peak is None or not self.flops_per_second:
            return None
        return self.flops_per_second / self.peak.flops_per_second

    def lines(self) -> list[str]:
        runs = f"{len(self.times)} runs x {self.number} call{'s' if self.number != 1 else ''}"
        if self.one_at_a_time:
            runs += ", each awaited: XLA:CPU can deadlock two calls in flight over its devices"
        lines = [
            f"{self.name} on {self.device_kind}: median {format_seconds(self.median)}, "
            f"min {format_seconds(self.best)} per call ({runs})"
        ]
        if self.flops_per_second:
            rate = f"{format_flops(self.flops_per_second)}/s achieved"
            if self.mfu is not None:
                rate += f", {self.mfu:.1%} of the {self.peak.name} bf16 peak ({self.peak.bf16_tflops:g} TFLOP/s)"
            else:
                rate += " (no published peak for this device, so no MFU)"
            lines.append(rate)
        return lines

    def _report(self) -> Report:
        first, *rest = self.lines()
        return Report("tpukit-timeit", first, [Line(line) for line in rest], indent="")

    def __repr__(self) -> str:
        return self._report().text()

    def _repr_html_(self) -> str:
        return self._report().html()
