"""Which run of a program each GPU kernel belongs to, from the host's launches.

A GPU trace has no ``XLA Modules`` line: the device planes hold kernels only. The host
plane says where each run began and ended. XLA:GPU wraps the launches of one run of a
program on one device in an event ``GpuExecutable::ExecuteThunks`` (stat
``module_name``; older traces: ``<module>:XLA GPU module``), and the runtime records each
launch (``hipModuleLaunchKernel``, ``cuLaunchKernel``) with the ``correlation_id`` its
kernel carries. A kernel belongs to the run whose host execution holds its launch,
whatever line the launch sits on (ROCm puts each launch on a line of its own). Several
devices' executions may overlap on the host, so consecutive kernels of one device stay
in one run while some execution holds all their launches.

Traces without those events (a hand-made trace, a profiler without host tracing) fall
back to the outermost host event around each launch (`launch_groups`), and the run of a
kernel is then not known.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tpukit.measure._xspace import TraceFile

HOST_PLANE = "/host:CPU"
#: XLA:GPU's host event around the launches of one run on one device (stat ``module_name``).
EXECUTE_THUNKS = "GpuExecutable::ExecuteThunks"
#: The same in older traces: an event named ``<module>:XLA GPU module``.
MODULE_SUFFIX = ":XLA GPU module"


@dataclass
class HostExecutions:
    """One host's executions of each program (by module name) and its kernel launches."""

    windows: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    launches: dict[Any, float] = field(default_factory=dict)  # correlation id -> launch start
    longest: dict[str, float] = field(default_factory=dict)  # each module's longest window

    def containing(self, module: str, at: float) -> frozenset[int]:
        """The executions of ``module`` (indices into its windows) that hold time ``at``."""
        spans = self.windows.get(module, [])
        found = set()
        for index in range(bisect.bisect_right(spans, (at, float("inf"))) - 1, -1, -1):
            start, end = spans[index]
            if end >= at:
                found.add(index)
            elif at - start > self.longest[module]:
                break
        return frozenset(found)


def host_executions(files: Sequence[TraceFile]) -> dict[str, HostExecutions]:
    """Per host, the programs' executions on the host and the launches of their kernels."""
    hosts: dict[str, HostExecutions] = {}
    for trace in files:
        found = hosts.setdefault(trace.host, HostExecutions())
        thunks: dict[str, list[tuple[float, float]]] = defaultdict(list)
        named: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for plane in trace.planes:
            if plane.name != HOST_PLANE:
                continue
            for line in plane.lines:
                for event in line.events:
                    span = (event.start_ns, event.start_ns + event.duration_ns)
                    if event.name == EXECUTE_THUNKS and "module_name" in event.stats:
                        thunks[str(event.stats["module_name"])].append(span)
                    elif event.name.endswith(MODULE_SUFFIX):
                        named[event.name.removesuffix(MODULE_SUFFIX)].append(span)
                    elif "correlation_id" in event.stats:
                        found.launches[event.stats["correlation_id"]] = event.start_ns
        for module in {*thunks, *named}:
            spans = sorted(thunks.get(module) or named[module])
            found.windows[module] = sorted([*found.windows.get(module, []), *spans])
            longest = max(end - start for start, end in spans)
            found.longest[module] = max(found.longest.get(module, 0.0), longest)
    return hosts


def kernel_runs(
    kernels: Sequence[Any], module: str, host: HostExecutions | None
) -> tuple[list[int | None], list[float]]:
    """The run (0, 1, ... in time order) of each kernel of one device, the kernels in time
    order, and the host's time to launch each run (its execution's duration, ns). Runs are
    None where the host recorded no executions of ``module`` or not the kernel's launch."""
    if host is None or not host.windows.get(module):
        return [None] * len(kernels), []
    spans = host.windows[module]
    runs: list[int | None] = []
    launch: list[float] = []
    held: frozenset[int] = frozenset()
    run = -1
    for event in kernels:
        at = host.launches.get(event.stats.get("correlation_id"))
        here = host.containing(module, at) if at is not None else frozenset()
        if not here:  # launched outside every execution: keep it in the run it follows
            runs.append(run if run >= 0 else None)
            continue
        if held & here:
            held = held & here
        else:
            if run >= 0:
                launch.append(_shortest(spans, held))
            run, held = run + 1, here
        runs.append(run)
    if run >= 0:
        launch.append(_shortest(spans, held))
    return runs, launch


def _shortest(spans: list[tuple[float, float]], indices: frozenset[int]) -> float:
    return min(spans[i][1] - spans[i][0] for i in indices)


def launch_groups(files: Sequence[TraceFile]) -> dict[tuple[str, Any], tuple[str, int]]:
    """``(host, correlation id)`` -> the host execution that launched it: the outermost
    event on the host thread around the launch (one call of the program)."""
    groups: dict[tuple[str, Any], tuple[str, int]] = {}
    for trace in files:
        for plane in trace.planes:
            if plane.name != HOST_PLANE:
                continue
            for line in plane.lines:
                if not any("correlation_id" in e.stats for e in line.events):
                    continue
                ordered = sorted(line.events, key=lambda e: (e.start_ns, -e.duration_ns))
                top, end = -1, float("-inf")
                for event in ordered:
                    if event.start_ns >= end:
                        top, end = top + 1, event.start_ns + event.duration_ns
                    if "correlation_id" in event.stats:
                        groups[(trace.host, event.stats["correlation_id"])] = (line.name, top)
    return groups
