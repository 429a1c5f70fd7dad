"""Read back the time of each HLO instruction of one program from a trace.

The trace (``_xspace``: one `TraceFile` per host) holds planes of lines of timed
events; each event is matched to the instruction of the optimized module it ran for.
Where the events are depends on the backend, as recorded on real machines:

- CPU: the plane ``/host:CPU``; the XLA CPU client's threads (``tf_XLAPjRtCpuClient/...``)
  have one event per executed instruction, with the stats ``hlo_op``, ``hlo_module``
  and ``run_id``.
- TPU: the device planes ``/device:TPU:N``; the line ``XLA Modules`` has one event per
  run, named ``jit_f(<fingerprint>)``; ``XLA Ops`` one event per executed instruction,
  named with the instruction's whole HLO text (``%copy-done = f32[...] copy-done(...)``)
  and its bare name as ``display_name``, with the stat ``program_id``; ``Async XLA Ops``
  the time an asynchronous copy was in flight (overlapping the others, so kept apart).
  The plane's stat ``device_type_string`` names the chip (``"TPU v6 Lite"``).
- GPU: ``/device:GPU:N``; an ``XLA Ops`` line where XLA writes one, else the kernels on
  the stream lines, each with ``hlo_op``, ``hlo_module`` and ``program_id``, placed at
  their instruction by ``_gpu_kernels`` (ROCm's names end in ``.kd``), and at their run
  by ``_gpu_runs`` (the host's ``ExecuteThunks`` around each kernel's launch). Several
  kernels of one library call (cuDNN, MIOpen, TransformerEngine) are one execution;
  kernels of different runs never are. The chip is named from the plane's stats
  (``_peaks.gpu_kind``: an MI300X, an MI355X).

What the verdict needs of the runs (`RunEvidence`: busy time, start-to-start period and
the host's launch time per run, as means) comes from the ``XLA Modules`` runs where the
trace has them, else from each run's events; where the trace does not say which run an
event belongs to, or has one run per device, it says so rather than guess.

Each host's file names its chips ``/device:TPU:0..N`` again, so runs are keyed by host,
plane and run. An event that holds others on its line (a ``while`` running its body)
counts only its own time, so the instructions' times add up to the program's. XLA:CPU
runs some instructions asynchronously (JAX 0.7's matmuls): their event covers only the
launch, and such an instruction is timed until the next instruction of its run starts.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tpukit._errors import ProfileError
from tpukit.hlo import HloModule
from tpukit.measure._gpu_kernels import attribute_kernels, kernel_name
from tpukit.measure._gpu_runs import host_executions, kernel_runs, launch_groups
from tpukit.measure._peaks import gpu_kind
from tpukit.measure._trace_programs import MODULE_LINE, split_program
from tpukit.measure._xspace import TraceEvent, TraceFile, TracePlane

#: The trace's plane of the host CPU (XLA:CPU runs each instruction on its client's threads).
CPU_PLANE = "/host:CPU"
#: Device planes, one per chip: ``/device:GPU:0``, ``/device:TPU:3``.
DEVICE_PLANE_PREFIXES = ("/device:GPU:", "/device:TPU:")
#: The lines of a device plane with one event per HLO instruction, and with the module's runs.
DEVICE_OP_LINE = "XLA Ops"
DEVICE_ASYNC_LINE = "Async XLA Ops"
DEVICE_MODULE_LINE = MODULE_LINE
_ROCM_SUFFIX = ".kd"


@dataclass(frozen=True)
class OpEvent:
    """One execution of one instruction, on one line of one plane (times in ns)."""

    name: str
    start: float
    duration: float
    line: tuple[str, str, str]  # (host, plane, line)
    run: tuple[Any, ...] | None  # (host, plane, device, run) when the trace says which run
    flow: Any = None  # XLA:CPU's id for the event, which its "end: NAME" marker closes
    done: float | None = None  # when that marker came, if it did
    continues: bool = False  # one more kernel of the instruction's execution just before


@dataclass(frozen=True)
class RunEvidence:
    """What the trace says of the program's runs, for the verdict: the device's busy time
    per run, the time from one run's start to the next (both means over every run and
    device), the host's time to launch a run where it recorded its launches, and why the
    period is unknown where it is."""

    busy_seconds: float | None = None
    period_seconds: float | None = None
    launch_seconds: float | None = None
    unknown: str = ""  # why there is no period (empty when there is one)


@dataclass(frozen=True)
class InstructionTimes:
    """Measured time per instruction (own seconds and executions, per program run), and
    what the trace says of the runs: the device busy time per run on each host, the time
    from one run's start to the next, and asynchronous copies in flight."""

    seconds: dict[str, float]
    calls: dict[str, float]
    runs: int
    device: str
    busy_seconds: float | None = None  # the program's device time per run (XLA Modules)
    period_seconds: float | None = None  # mean start-to-start time of consecutive runs
    hosts: dict[str, float] = field(default_factory=dict)  # busy seconds per run, per host
    in_flight: dict[str, float] = field(default_factory=dict)  # async copies, per run
    devices: int = 1  # the devices (over every host) the events are on
    evidence: RunEvidence = field(default_factory=RunEvidence)


@dataclass
class _Runs:
    """The runs of the program on one device plane (from its ``XLA Modules`` line)."""

    intervals: list[tuple[float, float]] = field(default_factory=list)


def instruction_times(
    files: Sequence[TraceFile],
    module: HloModule,
    repeat: int | None = None,
    program_id: str = "",
) -> InstructionTimes:
    """Each instruction's own time and executions per run of ``module`` in the traces.

    ``program_id`` (a TPU fingerprint, a GPU program id) keeps only that program's events
    when several programs share the module's name. ``repeat`` (the runs tpukit made) is
    used when the trace does not say which event belongs to which run; without it, the
    ENTRY instruction seen least often is taken to have run once per run.
    """
    reader = _Reader(module, program_id, files)
    events = reader.events
    if not events:
        planes = sorted({plane.name for trace in files for plane in trace.planes})
        raise ProfileError(
            f"The trace holds no per-instruction events of {module.name!r} (planes: "
            f"{', '.join(planes) or 'none'}). tpukit reads them from {CPU_PLANE}'s XLA "
            f"client threads and from the {DEVICE_OP_LINE!r} lines or kernels of "
            f"{DEVICE_PLANE_PREFIXES[0]}N and {DEVICE_PLANE_PREFIXES[1]}N planes; this "
            "backend's trace has none there. Time the whole call with .timeit() instead, "
            "or open the trace in XProf (profile(trace_dir=...) keeps it)."
        )
    runs = _run_count(events, module, repeat)
    seconds: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for index, own in _own_times(events).items():
        seconds[events[index].name] += own * 1e-9 / runs
        count[events[index].name] += 0 if events[index].continues else 1
    # Only some chips record asynchronous copies (a TPU's first): per run of those chips.
    per_plane: dict[tuple[str, str], int] = defaultdict(int)
    for key in {event.run for event in events if event.run is not None}:
        per_plane[key[:2]] += 1
    planes = len({event.line[:2] for event in events}) or 1
    recording = {where for _, _, where in reader.in_flight}
    recorded_runs = sum(
        len(reader.runs[where].intervals) or per_plane.get(where) or runs / planes
        for where in recording
    )
    in_flight: dict[str, float] = defaultdict(float)
    for name, nanoseconds, _ in reader.in_flight:
        in_flight[name] += nanoseconds * 1e-9 / recorded_runs
    return InstructionTimes(
        seconds=dict(seconds),
        calls={name: n / runs for name, n in count.items()},
        runs=runs,
        device=reader.device_kind(events),
        busy_seconds=reader.busy_per_run(),
        period_seconds=reader.period(),
        hosts=reader.hosts_busy(),
        in_flight=dict(in_flight),
        devices=len({event.line[:2] for event in events}),
        evidence=reader.evidence(events, runs),
    )


def instruction_name(event: TraceEvent) -> str:
    """The instruction an op event ran: its ``display_name`` or ``hlo_op`` where recorded,
    else the name before `` = `` of a TPU event named with the whole HLO text.

        >>> instruction_name(TraceEvent("%copy-done = f32[8]{0} copy-done(%s)", "", 0, 1, {}))
        'copy-done'
    """
    hlo_op = event.stats.get("hlo_op")
    if hlo_op is not None and not event.name.startswith("%"):
        return str(hlo_op)
    name = event.name
    if " = " in name:
        name = name.split(" = ", 1)[0]
    return name.lstrip("%").strip()


class _Reader:
    """Collects the program's op events from every host and device plane of a trace."""

    def __init__(self, module: HloModule, program_id: str, files: Sequence[TraceFile]):
        self.module, self.program_id = module, program_id
        instructions = [instr.name for instr in module.instructions()]
        self.names = {kernel_name(name): name for name in instructions}
        self.names.update({name: name for name in instructions})
        self.launches = launch_groups(files)
        self.hosts = host_executions(files)
        self.launch_ns: list[float] = []  # the host's time to launch each GPU run
        self.runs: dict[tuple[str, str], _Runs] = {}
        self.kinds: dict[tuple[str, str], str] = {}
        self.plane_stats: dict[tuple[str, str], dict[str, Any]] = {}
        self.in_flight: list[tuple[str, float, tuple[str, str]]] = []
        self.events: list[OpEvent] = []
        for trace in files:
            for plane in trace.planes:
                if plane.name.startswith(DEVICE_PLANE_PREFIXES):
                    self.events += self._plane_events(trace.host, plane, device=True)
        if not self.events:
            for trace in files:
                for plane in trace.planes:
                    if plane.name == CPU_PLANE:
                        self.events += self._plane_events(trace.host, plane, device=False)

    # -- which events are the program's -------------------------------------------------

    def _is_program(self, text: str) -> bool:
        """Whether an ``XLA Modules`` event (``jit_f(123)``) is a run of the program."""
        name, program_id = split_program(text)
        if name != self.module.name:
            return False
        return not self.program_id or not program_id or program_id == self.program_id

    def _stats_fit(self, stats: dict[str, Any]) -> bool:
        if str(stats.get("hlo_module", self.module.name)) != self.module.name:
            return False
        program = stats.get("program_id")
        return not self.program_id or program is None or str(program) == self.program_id

    def _plane_events(self, host: str, plane: TracePlane, *, device: bool) -> list[OpEvent]:
        lines = plane.lines
        runs = _Runs()
        for line in lines:
            if line.name == DEVICE_MODULE_LINE:
                for event in line.events:
                    if self._is_program(event.name):
                        runs.intervals.append((event.start_ns, event.start_ns + event.duration_ns))
        runs.intervals.sort()
        self.runs[(host, plane.name)] = runs
        kind = plane.stats.get("device_type_string")
        if kind:
            self.kinds[(host, plane.name)] = str(kind)
        self.plane_stats[(host, plane.name)] = plane.stats
        op_lines = [line for line in lines if line.name == DEVICE_OP_LINE] if device else []
        found: list[OpEvent | None] = []
        kernels: list[tuple[TraceEvent, str]] = []  # GPU kernels: (event, line name)
        done: dict[Any, float] = {}  # XLA:CPU's "end: NAME" markers by the flow id they close
        where = (host, plane.name)
        for line in lines:
            if line.name == DEVICE_ASYNC_LINE and op_lines:
                for event in line.events:
                    name = self.names.get(instruction_name_of_start(event))
                    if name and self._stats_fit(event.stats) and _inside(runs, event.start_ns):
                        self.in_flight.append((name, event.duration_ns, where))
                continue
            if line.name == DEVICE_MODULE_LINE or (op_lines and line.name != DEVICE_OP_LINE):
                continue
            for event in line.events:
                stats = event.stats
                if not device and event.name.startswith("end: ") and "_c" in stats:
                    done[stats["_c"]] = float(event.start_ns)
                if not op_lines and "hlo_op" not in stats:
                    continue
                if not self._stats_fit(stats):
                    continue
                if not op_lines and device:  # a kernel on a GPU stream: placed below
                    kernels.append((event, line.name))
                    continue
                name = self.names.get(event.display_name) or self.names.get(instruction_name(event))
                if name is None:
                    continue
                found.append(_op_event(where, line.name, name, event, runs))
        found += self._kernel_events(where, kernels, runs)
        events = [event for event in found if event is not None]
        if device:
            return events
        return _until_the_next_starts([replace(e, done=done.get(e.flow)) for e in events])

    def _kernel_events(
        self, where: tuple[str, str], kernels: list[tuple[TraceEvent, str]], runs: _Runs
    ) -> list[OpEvent | None]:
        """GPU kernels placed at their instructions; one execution spans several kernels only
        for a library call launched within one host execution of the program."""
        kernels.sort(key=lambda k: k[0].start_ns)
        named = [
            (e.name.removesuffix(_ROCM_SUFFIX), str(e.stats["hlo_op"]).removesuffix(_ROCM_SUFFIX))
            for e, _ in kernels
        ]
        placed = attribute_kernels(named, self.module, self.names)
        run_of, launch = kernel_runs(
            [e for e, _ in kernels], self.module.name, self.hosts.get(where[0])
        )
        self.launch_ns += launch
        library = {
            i.name
            for i in self.module.instructions()
            if i.opcode == "custom-call" or (i.opcode == "fusion" and i.fusion_kind == "kCustom")
        }
        found: list[OpEvent | None] = []
        previous: tuple[str | None, Any] = (None, None)
        for (event, line_name), name, run in zip(kernels, placed, run_of):
            group: Any = run
            if run is None:
                group = self.launches.get((where[0], event.stats.get("correlation_id")))
            if name is not None:
                op = _op_event(where, line_name, name, event, runs)
                if op is not None and run is not None:
                    op = replace(op, run=(*where, None, run))
                same = previous[0] == name and name in library
                if same and group is not None and previous[1] is not None:
                    same = group == previous[1]
                found.append(op and replace(op, continues=same))
            previous = (name, group)
        return found

    # -- what the trace says of the runs ------------------------------------------------

    def device_kind(self, events: list[OpEvent]) -> str:
        first = events[0].line
        kind = self.kinds.get(first[:2]) or gpu_kind(self.plane_stats.get(first[:2], {}))
        if kind:
            return kind
        if first[1].startswith(DEVICE_PLANE_PREFIXES):
            return first[1].removeprefix("/device:").split(":")[0].lower()
        return "cpu"

    def _timed_planes(self) -> dict[tuple[str, str], _Runs]:
        return {key: runs for key, runs in self.runs.items() if runs.intervals}

    def busy_per_run(self) -> float | None:
        """The program's device time per run (mean over devices and runs), from its runs on
        ``XLA Modules``; None where the trace has no such line (CPU, GPU streams)."""
        intervals = [i for runs in self._timed_planes().values() for i in runs.intervals]
        if not intervals:
            return None
        return statistics.mean(end - start for start, end in intervals) * 1e-9

    def period(self) -> float | None:
        """The mean time from one run's start to the next's, on each device."""
        gaps = [
            b[0] - a[0]
            for runs in self._timed_planes().values()
            for a, b in zip(runs.intervals, runs.intervals[1:])
        ]
        return statistics.mean(gaps) * 1e-9 if gaps else None

    def evidence(self, events: list[OpEvent], runs: int) -> RunEvidence:
        """Busy time and period per run from the runs on ``XLA Modules`` where the trace has
        that line, else from the events of each run (a GPU's kernels grouped by the host's
        executions, XLA:CPU's by ``run_id``): busy is the time some event of the run ran.
        Where the events do not say their run, busy is the time some event ran on each
        device over the ``runs`` (not their times added up: XLA:CPU runs instructions on
        several threads at once, which made a busy time longer than the run)."""
        launch = statistics.mean(self.launch_ns) * 1e-9 if self.launch_ns else None
        if self._timed_planes():
            period = self.period()
            unknown = "" if period else "each device ran the program once in the trace"
            return RunEvidence(self.busy_per_run(), period, launch, unknown)
        if any(event.run is None for event in events):
            by_device: dict[Any, list[OpEvent]] = defaultdict(list)
            for event in events:
                by_device[event.line[:2]].append(event)
            return RunEvidence(
                busy_seconds=sum(map(_union, by_device.values())) / max(runs, 1) * 1e-9,
                unknown="the trace does not say which run each event belongs to (no "
                "'XLA Modules' line, no host executions of the program around its launches)",
            )
        by_run: dict[Any, list[OpEvent]] = defaultdict(list)
        for event in events:
            by_run[event.run].append(event)
        starts: dict[Any, list[float]] = defaultdict(list)
        busy = []
        for key, members in by_run.items():
            starts[key[:2]].append(min(e.start for e in members))
            busy.append(_union(members))
        gaps = [b - a for s in starts.values() for a, b in zip(sorted(s), sorted(s)[1:])]
        unknown = "" if gaps else "each device ran the program once in the trace"
        period = statistics.mean(gaps) * 1e-9 if gaps else None
        return RunEvidence(statistics.mean(busy) * 1e-9, period, launch, unknown)

    def hosts_busy(self) -> dict[str, float]:
        """Per host, the device time per run (the mean over its devices)."""
        by_host: dict[str, list[float]] = defaultdict(list)
        for (host, _), runs in self._timed_planes().items():
            by_host[host] += [end - start for start, end in runs.intervals]
        return {host: statistics.mean(values) * 1e-9 for host, values in sorted(by_host.items())}


def _union(events: list[OpEvent]) -> float:
    """How long at least one of ``events`` was running (ns)."""
    total, reach = 0.0, float("-inf")
    for event in sorted(events, key=lambda e: e.start):
        end = event.start + event.duration
        if end > reach:
            total += end - max(event.start, reach)
            reach = end
    return total


def instruction_name_of_start(event: TraceEvent) -> str:
    """The instruction that started an async op (``copy-start``), from the event's HLO text."""
    return instruction_name(replace(event, stats={}))


def _inside(runs: _Runs, start: float) -> bool:
    return not runs.intervals or _run_index(runs.intervals, start) is not None


def _op_event(
    where: tuple[str, str], line: str, name: str, event: TraceEvent, runs: _Runs
) -> OpEvent | None:
    """The event of one execution of instruction ``name``; None outside the module's runs."""
    start = float(event.start_ns)
    stats = event.stats
    run: Any = stats.get("run_id")
    if runs.intervals:
        run = _run_index(runs.intervals, start)
        if run is None:  # outside every run of this module: another program's op
            return None
    device_id = stats.get("device_ordinal", stats.get("device_id"))
    key = (*where, device_id, run) if run is not None else None
    return OpEvent(name, start, float(event.duration_ns), (*where, line), key, stats.get("_p"))


def _until_the_next_starts(events: list[OpEvent]) -> list[OpEvent]:
    """Time an asynchronous CPU instruction until the next instruction of its run starts.

    An instruction is asynchronous when its ``end:`` marker comes after the next
    instruction of the run has started. One that holds others (a loop) keeps its time.
    """
    by_run: dict[Any, list[int]] = defaultdict(list)
    for index, event in enumerate(events):
        by_run[event.run].append(index)
    out = list(events)
    for indices in by_run.values():
        indices.sort(key=lambda i: events[i].start)
        for here, after in zip(indices, indices[1:]):
            event, following = events[here], events[after]
            if following.start < event.start + event.duration:  # holds or overlaps the next
                continue
            if event.done is not None and event.done > following.start:
                out[here] = replace(event, duration=following.start - event.start)
    return out


def _run_index(runs: list[tuple[float, float]], start: float) -> int | None:
    for index, (begin, end) in enumerate(runs):
        if begin <= start <= end:
            return index
    return None


def _own_times(events: list[OpEvent]) -> dict[int, float]:
    """Each event's duration less the events it holds on its own line (a loop's body)."""
    own = {}
    by_line: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for index, event in enumerate(events):
        by_line[event.line].append(index)
    for indices in by_line.values():
        indices.sort(key=lambda i: (events[i].start, -events[i].duration))
        stack: list[int] = []
        for index in indices:
            event = events[index]
            own[index] = event.duration
            while stack and events[stack[-1]].start + events[stack[-1]].duration <= event.start:
                stack.pop()
            if stack:
                parent = events[stack[-1]]
                if event.start + event.duration <= parent.start + parent.duration:
                    own[stack[-1]] -= event.duration
            stack.append(index)
    return {index: max(0.0, seconds) for index, seconds in own.items()}


def _run_count(events: list[OpEvent], module: HloModule, repeat: int | None) -> int:
    """How many runs of the program (per device, added over devices and hosts) there are."""
    keys = {event.run for event in events}
    if None not in keys:
        return len(keys)
    if repeat:  # the runs tpukit made, on each device that has events
        return repeat * len({event.line[:2] for event in events})
    # A trace read offline: the ENTRY instruction seen least often ran once per run (a
    # GPU instruction may launch several kernels, but not all of them do).
    entry = {instr.name for instr in module.entry.instructions}
    counts: dict[str, int] = defaultdict(int)
    for event in events:
        if event.name in entry and not event.continues:
            counts[event.name] += 1
    if counts:
        return max(1, min(counts.values()))
    return 1
