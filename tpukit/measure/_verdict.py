"""What bounds a program's step, in words: the first line of every profile.

The verdict compares the device's busy time per run with the time per run (the wall
time of the runs tpukit timed, or for a trace read offline the mean time from one run's
start to the next). A device idle most of the time is *launch-bound* when the host's
launching fills the run (the trace's launch time per run where it has one, else a run
too short to outlast its dispatch) or *waiting on the host* when it does not (input,
Python between calls). A device busy most of the time is *memory-bound* or
*compute-bound* by where its time goes on the roofline, when the chip's peak is known.
Where the trace cannot tell (one run, no run boundaries) the verdict says so and why.

    >>> verdict(busy=41e-6, wall=1.01e-3, records=[], peak_known=False)
    'Verdict: the device was busy 41 µs of 1.01 ms per run (4%): launch-bound; run more steps per call (`steps_per_execution`, a `lax.scan` over batches) so one dispatch feeds the device longer.'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tpukit.display import format_seconds

#: Below this share of the wall time busy, the device mostly waits.
IDLE_SHARE = 0.5
#: A run shorter than this is dominated by the host's dispatch when the device idles.
SHORT_RUN = 1e-3
_MORE_STEPS = (
    "run more steps per call (`steps_per_execution`, a `lax.scan` over batches) so one "
    "dispatch feeds the device longer."
)
_HOST = "prefetch the next batch to the device while this one runs, or keep the data on the device."


def verdict(
    *,
    busy: float,
    wall: float | None,
    records: Sequence[dict[str, Any]],
    peak_known: bool,
    launch: float | None = None,
    unknown: str = "",
) -> str:
    """One line: busy against wall per run, what bounds the step, and what to do.

    ``launch`` is the host's time to launch one run where the trace recorded it;
    ``unknown`` says why there is no time per run to compare, where there is none."""
    if not wall:
        why = unknown or "the trace gives no time per run to compare with"
        return (
            f"Verdict: the device was busy {format_seconds(busy)} per run; whether the "
            f"device or the host bounds the step cannot be told: {why}. On the device, "
            + _device_side(records, peak_known)
        )
    share = min(busy / wall, 1.0)
    percent = f"{share:.1%}" if share < 0.01 else f"{share:.0%}"
    head = (
        f"Verdict: the device was busy {format_seconds(busy)} of {format_seconds(wall)} "
        f"per run ({percent})"
    )
    if share >= IDLE_SHARE:
        return head + ": " + _device_bound(records, peak_known)
    if launch is not None:
        launching = f"the host took {format_seconds(launch)} per run to launch its kernels"
        if launch >= IDLE_SHARE * wall:
            return head + f": launch-bound ({launching}); " + _MORE_STEPS
        return head + (
            f": waiting on the host ({launching}; the device idles between runs: input, "
            "Python or other programs between calls); " + _HOST
        )
    if busy < SHORT_RUN:
        return head + ": launch-bound; " + _MORE_STEPS
    return head + ": waiting on the host (input, Python between calls); " + _HOST


def _waits(record: dict[str, Any]) -> bool:
    """An instruction whose time is waiting for a transfer: an async copy's or collective's
    ``*-done``, a send or receive, a collective run in place."""
    opcode = record.get("opcode", "")
    return opcode.endswith("-done") or opcode in _TRANSFERS


_TRANSFERS = frozenset(
    {
        "all-reduce",
        "all-gather",
        "all-to-all",
        "reduce-scatter",
        "collective-permute",
        "send",
        "recv",
        "infeed",
        "outfeed",
    }
)


def _device_bound(records: Sequence[dict[str, Any]], peak_known: bool) -> str:
    side = _device_side(records, peak_known)
    return side if side.startswith(("waiting", "memory", "compute")) else "device-bound; " + side


def _device_side(records: Sequence[dict[str, Any]], peak_known: bool) -> str:
    """Where the device's own time goes: waiting on transfers, or its roofline bound."""
    total = sum(r["seconds"] for r in records) or 1.0
    waiting = [r for r in records if _waits(r)]
    waited = sum(r["seconds"] for r in waiting)
    if waited >= IDLE_SHARE * total:
        names = ", ".join(r["name"] for r in waiting[:3]) + (" ..." if len(waiting) > 3 else "")
        return (
            f"waiting on transfers: {waited / total:.0%} of the time in copies and collectives "
            f"waited for ({names}); overlap them with compute, or move less data "
            "(keep it on the device, shard it so less crosses chips)."
        )
    if not peak_known:
        return (
            "no published peak for this device, so no roofline to tell memory from "
            "compute; the table shows where the time goes."
        )
    time = {"memory": 0.0, "compute": 0.0}
    roof = {"memory": 0.0, "compute": 0.0}
    for record in records:
        bound = record.get("bound")
        if bound in time:
            time[bound] += record["seconds"]
            roof[bound] += min(record["roofline_seconds"] or 0.0, record["seconds"])
    kind = "memory" if time["memory"] >= time["compute"] else "compute"
    if not time[kind]:
        return "the time is in instructions with no FLOPs or bytes counted (see the table)."
    reached = roof[kind] / time[kind]
    roofline = "bandwidth" if kind == "memory" else "compute"
    advice = (
        "read fewer bytes: bf16 activations, larger fusions, a bigger batch per step"
        if kind == "memory"
        else "use bf16 (or fp8) matmuls and shapes that fill the matrix units"
    )
    if reached > 0.8:
        advice = "it runs near the roof; only less work makes it faster"
    unbound = [r for r in records if r.get("bound") is None and r["seconds"]]
    untold = sum(r["seconds"] for r in unbound)
    if untold > time[kind]:  # most of the time is where no bound is known: say so first
        names = ", ".join(r["name"] for r in unbound[:3]) + (" ..." if len(unbound) > 3 else "")
        return (
            f"no roofline bound for {untold / total:.0%} of the time (instructions tpukit counts "
            f"no FLOPs for: {names}); {time[kind] / total:.0%} is in instructions "
            f"bounded by {roofline}, at {reached:.0%} of the {roofline} roof."
        )
    return (
        f"{kind}-bound: {time[kind] / total:.0%} of the time in instructions bounded by "
        f"{roofline}, at {reached:.0%} of the {roofline} roof; {advice}."
    )
