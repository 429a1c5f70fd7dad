"""Take a ``jax.profiler`` trace and read back the time of each HLO instruction.

No TensorBoard or server: the trace is written with ``jax.profiler.start_trace`` and
read with ``jax.profiler.ProfileData``, whose planes hold lines of timed events. Each
event is matched to the instruction of the optimized module it is named after. Where
the events are depends on the backend:

- CPU: the plane ``/host:CPU``; each line is a thread, and the XLA CPU client's threads
  (``tf_XLAPjRtCpuClient/...``) have one event per executed instruction, with the stats
  ``hlo_op``, ``hlo_module`` and ``run_id``;
- GPU and TPU: the device planes ``/device:GPU:N`` and ``/device:TPU:N``, on the line
  ``XLA Ops``, with the module's runs on the line ``XLA Modules``. Where a GPU trace has
  no ``XLA Ops`` line (XLA:GPU from JAX 0.11), the kernels on the stream lines are read:
  a kernel XLA generated is named after its fusion with ``.`` and ``-`` written ``_``
  (``loop_pad_fusion_1`` for ``loop_pad_fusion.1``), and one a library launched (cuDNN,
  cuBLAS) carries its instruction in the stat ``hlo_op``. Inside a command buffer (a CUDA
  graph) ``hlo_op`` names the buffer (``command_buffer_1``), so the kernel's name is
  tried first.

An event that holds others on its line (a ``while`` running its body) counts only its
own time, so the instructions' times add up to the program's. XLA:CPU runs some
instructions asynchronously (JAX 0.7's matmuls, on Eigen's threads): their event covers
only the launch, and their ``end: NAME`` marker comes when the executor has long moved
on; such an instruction is timed until the next instruction of its run starts.
"""

from __future__ import annotations

import pathlib
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import jax
from jax.profiler import ProfileData

from tpukit._errors import TpukitError
from tpukit.compilation._gpu_kernels import attribute_kernels, kernel_name
from tpukit.hlo import HloModule

#: The trace's plane of the host CPU (XLA:CPU runs each instruction on its client's threads).
CPU_PLANE = "/host:CPU"
#: Device planes, one per chip: ``/device:GPU:0``, ``/device:TPU:3``.
DEVICE_PLANE_PREFIXES = ("/device:GPU:", "/device:TPU:")
#: The lines of a device plane with one event per HLO instruction, and with the module's runs.
DEVICE_OP_LINE = "XLA Ops"
DEVICE_MODULE_LINE = "XLA Modules"
_TRACE_FILES = "*.xplane.pb"


class ProfileError(TpukitError, RuntimeError):
    """A trace could not be taken or held no per-instruction times for the program."""


@dataclass(frozen=True)
class OpEvent:
    """One execution of one instruction, on one line of one plane (times in ns)."""

    name: str
    start: float
    duration: float
    line: tuple[str, str]
    run: tuple[Any, ...] | None  # (plane, device, run) when the trace says which run
    flow: Any = None  # XLA:CPU's id for the event, which its "end: NAME" marker closes
    done: float | None = None  # when that marker came, if it did
    continues: bool = False  # one more kernel of the instruction's execution just before


@dataclass(frozen=True)
class InstructionTimes:
    """Measured time per instruction: own seconds and executions, both per program run."""

    seconds: dict[str, float]
    calls: dict[str, float]
    runs: int
    device: str


def trace_runs(
    call: Callable[[], Any], repeat: int, folder: pathlib.Path, *, lean: bool
) -> tuple[list[float], list[Any]]:
    """Run ``call`` ``repeat`` times under the profiler writing to ``folder``.

    Returns the wall seconds of each run and the ``ProfileData`` of the trace files this
    trace wrote (not older ones in the folder). A ``lean`` trace leaves out what only
    XProf reads (Python function calls, the HLO protos); a kept one has everything.
    """
    options = jax.profiler.ProfileOptions()
    if lean:
        options.python_tracer_level = 0
        options.enable_hlo_proto = False
    before = {(path, path.stat().st_mtime_ns) for path in folder.rglob(_TRACE_FILES)}
    try:
        jax.profiler.start_trace(str(folder), profiler_options=options)
    except RuntimeError as exc:
        raise ProfileError(
            f"Could not start the JAX profiler ({exc}). Another trace is running: stop it "
            "with jax.profiler.stop_trace() (or leave its `with jax.profiler.trace(...)` "
            "block), then profile again."
        ) from None
    walls = []
    try:
        for _ in range(repeat):
            start = time.perf_counter()
            jax.block_until_ready(call())
            walls.append(time.perf_counter() - start)
    finally:
        jax.profiler.stop_trace()
    return walls, read_traces(folder, skip=before)


def read_traces(
    folder: pathlib.Path, skip: set[tuple[pathlib.Path, int]] = frozenset()
) -> list[Any]:
    """``ProfileData`` of the trace files under ``folder`` (what ``jax.profiler`` wrote),
    but those in ``skip`` as ``(path, modification time)``: files there before a trace."""
    found = {(path, path.stat().st_mtime_ns) for path in folder.rglob(_TRACE_FILES)}
    files = sorted(path for path, _ in found - skip)
    if not files:
        raise ProfileError(
            f"No JAX profiler trace ({_TRACE_FILES}) under {str(folder)!r}. Pass the folder "
            "given to jax.profiler.trace(...); if tpukit wrote it, check that the folder is "
            "writable and that `with jax.profiler.trace('/tmp/t'): ...` writes one here."
        )
    return [ProfileData.from_file(str(path)) for path in files]


def instruction_times(
    data: Iterable[Any], module: HloModule, repeat: int | None = None
) -> InstructionTimes:
    """Each instruction's own time and executions per run of ``module`` in the traces.

    ``repeat`` (the runs tpukit made) is used when the trace does not say which event
    belongs to which run (GPU kernels carry no run id); without it, the ENTRY instruction
    seen least often is taken to have run once per run.
    """
    events, planes = op_events(data, module)
    if not events:
        raise ProfileError(
            f"The trace holds no per-instruction events of {module.name!r} (planes: "
            f"{', '.join(planes) or 'none'}). tpukit reads them from {CPU_PLANE}'s XLA "
            f"client threads and from the {DEVICE_OP_LINE!r} lines of "
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
    return InstructionTimes(
        seconds=dict(seconds),
        calls={name: n / runs for name, n in count.items()},
        runs=runs,
        device=_device_of(events),
    )


def op_events(data: Iterable[Any], module: HloModule) -> tuple[list[OpEvent], list[str]]:
    """The events of ``module``'s instructions in traces, and the names of the planes seen.

    Device planes (GPU, TPU) win over the host's: on a GPU, the host's threads only
    launch the kernels. On a device plane the ``XLA Ops`` line is read; without one, every
    event with an ``hlo_op`` stat (kernels on the stream lines). Events of other modules
    (by the ``hlo_module`` stat, or outside the module's runs on ``XLA Modules``) and
    names that are not instructions of ``module`` are left out.
    """
    instructions = [instr.name for instr in module.instructions()]
    names = {kernel_name(name): name for name in instructions}
    names.update({name: name for name in instructions})
    planes = [plane for profile in data for plane in profile.planes]
    devices = [p for p in planes if p.name.startswith(DEVICE_PLANE_PREFIXES)]
    events: list[OpEvent] = []
    for plane in devices:
        events += _plane_events(plane, module, names, device=True)
    if not events:
        for plane in planes:
            if plane.name == CPU_PLANE:
                events += _plane_events(plane, module, names, device=False)
    return events, [plane.name for plane in planes]


def _stats(event: Any) -> dict[str, Any]:
    try:
        return dict(event.stats)
    except Exception:  # an event whose stats the reader cannot convert
        return {}


def _plane_events(
    plane: Any, module: HloModule, names: dict[str, str], *, device: bool
) -> list[OpEvent]:
    """``names`` maps every instruction name, and the kernel name of each, to the instruction."""
    module_name = module.name
    lines = list(plane.lines)
    runs = []
    for line in lines:
        if line.name == DEVICE_MODULE_LINE:
            for event in line.events:
                if event.name == module_name or event.name.startswith(module_name + "("):
                    runs.append((event.start_ns, event.start_ns + event.duration_ns))
    runs.sort()
    op_lines = [line for line in lines if line.name == DEVICE_OP_LINE] if device else []
    found: list[OpEvent | None] = []
    kernels: list[tuple[Any, dict, str]] = []  # GPU kernels: (event, stats, line name)
    done: dict[Any, float] = {}  # XLA:CPU's "end: NAME" markers by the flow id they close
    for line in op_lines or lines:
        if line.name == DEVICE_MODULE_LINE:
            continue
        for event in line.events:
            stats = _stats(event)
            if not device and event.name.startswith("end: ") and "_c" in stats:
                done[stats["_c"]] = float(event.start_ns)
            if not op_lines and "hlo_op" not in stats:
                continue
            if str(stats.get("hlo_module", module_name)) != module_name:
                continue
            if not op_lines and device:  # a kernel on a GPU stream: placed below
                kernels.append((event, stats, line.name))
                continue
            name = names.get(str(stats.get("hlo_op") or event.name))
            if name is None:
                continue
            found.append(_op_event(plane.name, line.name, name, event, stats, runs))
    kernels.sort(key=lambda k: k[0].start_ns)
    placed = attribute_kernels([(e.name, str(s["hlo_op"])) for e, s, _ in kernels], module, names)
    previous = None
    for (event, stats, line_name), name in zip(kernels, placed):
        if name is not None:
            op = _op_event(plane.name, line_name, name, event, stats, runs)
            # A library call (cuDNN, cuBLAS) launches several kernels in one execution.
            found.append(op and replace(op, continues=name == previous))
        previous = name
    found = [event for event in found if event is not None]
    if device:
        return found
    return _until_the_next_starts([replace(e, done=done.get(e.flow)) for e in found])


def _op_event(
    plane: str, line: str, name: str, event: Any, stats: dict, runs: list
) -> OpEvent | None:
    """The event of one execution of instruction ``name``; None outside the module's runs."""
    start = float(event.start_ns)
    run: Any = stats.get("run_id")
    if run is None and runs:
        run = _run_index(runs, start)
        if run is None:  # outside every run of this module: another program's op
            return None
    device_id = stats.get("device_ordinal", stats.get("device_id"))
    key = (plane, device_id, run) if run is not None else None
    return OpEvent(name, start, float(event.duration_ns), (plane, line), key, stats.get("_p"))


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
    by_line: dict[tuple[str, str], list[int]] = defaultdict(list)
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
    """How many runs of the program (per device, added over devices) the events cover."""
    keys = {event.run for event in events}
    if None not in keys:
        return len(keys)
    if repeat:  # the runs tpukit made, on each device that has events
        return repeat * len({event.line[0] for event in events})
    # A trace read offline: the ENTRY instruction seen least often ran once per run (a
    # GPU instruction may launch several kernels, but not all of them do).
    entry = {instr.name for instr in module.entry.instructions}
    counts: dict[str, int] = defaultdict(int)
    for event in events:
        if event.name in entry:
            counts[event.name] += 1
    if counts:
        return max(1, min(counts.values()))
    return 1


def _device_of(events: list[OpEvent]) -> str:
    plane = events[0].line[0]
    if plane.startswith(DEVICE_PLANE_PREFIXES):
        return plane.removeprefix("/device:").split(":")[0].lower()
    return "cpu"
