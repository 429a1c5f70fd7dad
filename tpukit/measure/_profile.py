"""Where a compiled program's time goes: measured time per HLO instruction, and per layer.

``Compiled.profile`` runs the program under ``jax.profiler`` (``_trace_events``: no
TensorBoard, no server) and gives a `Profile`: a table of the instructions and of the
user's groups (a training step's sections and layers, as the graph groups them) by
measured time, with the source line, the estimated FLOPs and bytes, the achieved FLOP/s
and bandwidth and, where the device's peak is known, the roofline bound and the share
of it reached; ``table()`` gives the same as plain records, and ``graph()`` the HLO
graph coloured by time. ``Profile.from_trace`` reads a trace taken elsewhere (a TPU or
GPU job) beside the optimized HLO of the program it ran.

    >>> f = lambda x: jnp.tanh(x @ x.T)
    >>> p = tpukit.compile(f, tpukit.shape("f32[256,784]")).profile(repeat=2)
    >>> p.table()[0]["seconds"] > 0, p.table()[0]["share"] <= 1
    (True, True)

Read from a trace taken anywhere (here a TPU v6e's), with the HLO it carries:

    >>> tpukit.Profile.from_trace(trace).table()[0]["name"]
    'copy-done.2'
"""

from __future__ import annotations

import contextlib
import operator
import os
import pathlib
import statistics
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import jax

from tpukit import hlo
from tpukit._errors import ArgumentError, user_facing
from tpukit.display import (
    Column,
    Line,
    Report,
    Table,
    format_seconds,
)
from tpukit.hlo import (
    SECTIONS,
    HloInstruction,
    HloModule,
    instruction_bytes,
    instruction_flops,
)
from tpukit.measure._peaks import DevicePeak, peak_for
from tpukit.measure._profile_cells import _KIND, _RULES, table_columns
from tpukit.measure._profile_places import (
    _NESTED_PROGRAM,
    instruction_places,
    short_place,
    source_of,
)
from tpukit.measure._trace_events import InstructionTimes, RunEvidence, instruction_times
from tpukit.measure._trace_programs import (
    entry_shapes,
    hlo_text,
    layout_shapes,
    others_line,
    pick_program,
    trace_programs,
)
from tpukit.measure._trace_runs import read_traces, run_failures, trace_runs
from tpukit.measure._verdict import verdict
from tpukit.measure._xspace import TraceFile, from_profile_data, read_xspace

#: Rows of each table in the notebook view (``table()`` has them all).
TOP_ROWS = 15


def profile_call(
    call: Callable[[], Any],
    module: HloModule,
    *,
    name: str,
    device_kind: str,
    repeat: int,
    trace_dir: str | os.PathLike | None = None,
) -> Profile:
    """Run ``call`` ``repeat`` times under ``jax.profiler`` and time ``module``'s instructions.

    ``call`` runs the compiled program once (on ready device data); it is run once
    more before the trace starts, so allocation and first-call work stay out of it.
    The trace goes to ``trace_dir`` when given (open it with XProf), else to a
    temporary folder removed afterwards.
    """
    repeat = runs_count(repeat)
    with run_failures(name, "its warm-up run, before the trace"):
        jax.block_until_ready(call())  # warm-up: first-call transfers and allocation
    walls, files = trace_runs(call, repeat, trace_dir, name=name)
    return Profile.from_profile_data(
        files, module, name=name, device_kind=device_kind, wall_seconds=walls, repeat=repeat
    )


def runs_count(repeat: Any) -> int:
    """``repeat`` as an ``int`` of at least 1: any integral type (NumPy's too), no bool."""
    value = None
    if not isinstance(repeat, bool):
        with contextlib.suppress(TypeError):
            value = operator.index(repeat)
    if value is None or value < 1:
        raise ArgumentError(f"repeat must be a whole number of runs, at least 1; got {repeat!r}.")
    return value


def read_trace_path(trace: Any) -> list[TraceFile]:
    """The trace files of ``trace`` (a folder or one ``.xplane.pb``), or one clear error."""
    if not isinstance(trace, (str, os.PathLike)):
        raise ArgumentError(
            f"Profile.from_trace takes the path of a trace (a folder or an .xplane.pb file), "
            f"got {type(trace).__name__}: pass the folder given to jax.profiler.trace(...)."
        )
    path = pathlib.Path(trace)
    if path.is_dir():
        return read_traces(path)
    if path.is_file():
        return [read_xspace(path)]
    raise ArgumentError(
        f"No trace at {str(path)!r}: pass the folder given to jax.profiler.trace(...) "
        "or one of its plugins/profile/*/*.xplane.pb files."
    )


class Profile:
    """Measured device time of a compiled program, per HLO instruction and per group.

    ``table()`` gives the instructions as plain records, longest first, and
    ``table(by="group")`` the user's groups (a training step's sections and layers);
    in a notebook the profile shows both tables, and ``graph()`` the HLO graph coloured
    by time. Times are per run of the program (the mean over the traced runs, per
    device): an instruction in a loop body counts all its iterations.

    Attributes:
      name: the function's name.
      module: the optimized `HloModule` the times belong to.
      device_kind: the device the program ran on (``"cpu"``, ``"TPU v5 lite"``, ...).
      peak: the device's published peak, or None (then there is no roofline).
      runs: how many runs of the program the trace holds (per device).
      wall_seconds: wall time of each traced run, when tpukit ran them (else None).
      total_seconds: the instructions' times added up, per run.
    """

    def __init__(
        self,
        module: HloModule,
        own_seconds: Mapping[str, float],
        calls: Mapping[str, float],
        *,
        name: str,
        device_kind: str,
        runs: int,
        wall_seconds: list[float] | None = None,
        trace: InstructionTimes | None = None,
    ):
        self.module = module
        self.name = name
        self.device_kind = device_kind
        self.peak: DevicePeak | None = peak_for(device_kind)
        self.runs = runs
        self.wall_seconds = wall_seconds
        self._own = dict(own_seconds)
        self._calls = dict(calls)
        self.total_seconds = sum(self._own.values())
        #: The program's device time per run as the trace's ``XLA Modules`` line gives it
        #: (TPU), else None; per host (one trace file each) in ``host_seconds``.
        self.busy_seconds: float | None = trace.busy_seconds if trace else None
        self.host_seconds: dict[str, float] = dict(trace.hosts) if trace else {}
        #: Time asynchronous copies were in flight per run, by the instruction that started
        #: them (overlapping the others, so not in ``total_seconds``).
        self.in_flight_seconds: dict[str, float] = dict(trace.in_flight) if trace else {}
        #: What the trace says of the runs (busy time, period, launch time) for the verdict.
        self.evidence = trace.evidence if trace else RunEvidence()
        #: How many devices (chips, over every host) the runs were on.
        self.devices = trace.devices if trace else 1
        self._records: dict[str, list[dict[str, Any]]] = {}
        #: The trace files read (every host's, from every run folder).
        self.sources: list[str] = []
        #: The other programs the trace ran, where this one was picked as the longest.
        self._others_line = ""

    # -- building --------------------------------------------------------------

    @classmethod
    def from_profile_data(
        cls,
        data: Iterable[Any],
        module: HloModule,
        *,
        name: str | None = None,
        device_kind: str | None = None,
        wall_seconds: list[float] | None = None,
        repeat: int | None = None,
        program_id: str = "",
    ) -> Profile:
        """A profile of ``module`` from a trace: `TraceFile` objects (one per host) or
        ``jax.profiler.ProfileData`` objects (each taken as one host)."""
        files = [
            item if isinstance(item, TraceFile) else from_profile_data(item, host=f"host{k}")
            for k, item in enumerate(data)
        ]
        times = instruction_times(files, module, repeat, program_id)
        profile = cls(
            module,
            times.seconds,
            times.calls,
            name=name or module.name,
            device_kind=device_kind or times.device,
            runs=times.runs,
            wall_seconds=wall_seconds,
            trace=times,
        )
        profile.sources = [f.path or f.host for f in files]
        return profile

    @classmethod
    @user_facing
    def from_trace(
        cls,
        trace: str | os.PathLike,
        hlo_module: HloModule | str | None = None,
        *,
        program: str | int | None = None,
        name: str | None = None,
        device_kind: str | None = None,
    ) -> Profile:
        """A profile from a trace taken elsewhere (any JAX job on TPU, GPU or CPU).

        Args:
          trace: an ``.xplane.pb`` file or a folder that holds the trace (what
            ``jax.profiler.trace(dir)`` writes; with several hosts, one file each).
          hlo_module: the optimized module as an `HloModule` or HLO text (a dump's
            ``*after_optimizations.txt``, ``compiled.as_text()``). Left out, the HLO the
            trace carries in its ``/host:metadata`` plane is used.
          program: which program of the trace: its name (``"jit_train_step"``), or name
            and id as the trace writes them (``"jit_dot(49)"``, a TPU fingerprint). Needed
            when several programs share a name; left out, the module's name or else the
            program with the most device time (the profile then names the others that ran).

        Example:
            >>> p = tpukit.Profile.from_trace(trace)  # a folder, or one file
            >>> p = tpukit.Profile.from_trace(trace, program="jit_f(12190760917235803885)")
        """
        files = read_trace_path(trace)
        where = str(trace)
        if hlo_module is not None and not isinstance(hlo_module, (HloModule, str)):
            raise ArgumentError(
                f"hlo_module must be an HloModule or HLO text, got {type(hlo_module).__name__}"
                ": pass compiled.as_text(), a dump's *after_optimizations.txt text, or leave "
                "it out to use the HLO the trace carries."
            )
        if isinstance(hlo_module, str):
            hlo_module = hlo.parse_hlo(hlo_module)
        picked_longest = hlo_module is None and program is None
        programs = trace_programs(files)
        chosen = pick_program(
            programs, program, hlo_module.name if hlo_module is not None else None, where
        )
        if hlo_module is not None and chosen is not None and chosen.hlo_proto is not None:
            _same_shapes(hlo_module, chosen, programs, where)
        if hlo_module is None:
            if chosen is None or chosen.hlo_proto is None:
                label = chosen.label if chosen else "its programs"
                raise ArgumentError(
                    f"The trace {where!r} carries no HLO for {label} (it was taken without "
                    "HLO protos). Pass the optimized HLO as hlo_module= (compiled.as_text(), "
                    "or a dump's *after_optimizations.txt)."
                )
            hlo_module = hlo.parse_hlo(hlo_text(chosen.hlo_proto))
        profile = cls.from_profile_data(
            files,
            hlo_module,
            name=name,
            device_kind=device_kind,
            program_id=chosen.program_id if chosen else "",
        )
        if picked_longest and chosen is not None:
            profile._others_line = others_line(programs, chosen)
        return profile

    # -- numbers ---------------------------------------------------------------

    @property
    def wall_seconds_per_run(self) -> float | None:
        """The mean wall time of a traced run (dispatch and waiting included): a mean, as
        the busy time it is compared with is."""
        return statistics.mean(self.wall_seconds) if self.wall_seconds else None

    def seconds(self, name: str) -> float:
        """Time of one instruction per run, with what runs inside it (a loop's body)."""
        return self.instruction_seconds().get(name, 0.0)

    def instruction_seconds(self) -> dict[str, float]:
        """Every timed instruction's time per run, including the instructions it runs
        (a ``while``'s body, a ``call``'s computation): the graph's node times."""
        total = dict(self._own)

        def inside(instr: HloInstruction, active: frozenset[str]) -> float:
            extra = 0.0
            for comp in self.module.called(instr):
                if comp.kind not in _NESTED_PROGRAM or comp.name in active:
                    continue
                for inner in comp.instructions:
                    extra += self._own.get(inner.name, 0.0) + inside(inner, active | {comp.name})
            return extra

        for instr in self.module.instructions():
            if any(c.kind in _NESTED_PROGRAM for c in self.module.called(instr)):
                seconds = self._own.get(instr.name, 0.0) + inside(instr, frozenset())
                if seconds:
                    total[instr.name] = seconds
        return total

    @user_facing
    def table(self, by: str = "instruction") -> list[dict[str, Any]]:
        """The measured times as plain records, longest first.

        ``by="instruction"``: one record per timed instruction, with ``name``,
        ``opcode``, ``group`` (where the graph places it), ``source``, ``calls``
        (executions per run: a loop's body runs several times; the several kernels of one
        cuDNN or cuBLAS call count once), ``seconds`` (its own time per run, a loop's body left out), ``share`` of
        the total, the estimated ``flops`` and ``bytes``, ``flops_per_second`` and
        ``bytes_per_second`` achieved and, where the peak is known,
        ``roofline_seconds`` (the least time the peak allows), ``bound``
        (``"compute"`` or ``"memory"``) and ``roofline_share`` (roofline / measured).
        ``by="group"``: one record per group with ``group``, ``section``, ``path``,
        ``instructions`` and the same figures summed.
        """
        if by not in ("instruction", "group"):
            raise ArgumentError(f"by must be 'instruction' or 'group', got {by!r}.")
        if by not in self._records:
            instructions = self._instruction_records()
            self._records["instruction"] = instructions
            self._records["group"] = self._group_records(instructions)
        return [dict(record) for record in self._records[by]]

    def _instruction_records(self) -> list[dict[str, Any]]:
        groups = instruction_places(self.module)
        records = []
        for instr in self.module.instructions():
            if instr.name not in self._own:
                continue
            seconds = self._own[instr.name]
            calls = self._calls.get(instr.name, 1.0)
            container = any(c.kind in _NESTED_PROGRAM for c in self.module.called(instr))
            # An async start only launches its copy: the bytes move while it is in flight.
            container = container or instr.opcode.endswith("-start")
            flops = None if container else instruction_flops(instr, self.module) * calls
            nbytes = None if container else instruction_bytes(instr, self.module) * calls
            # A library call tpukit counts no FLOPs for (TransformerEngine's attention): its
            # bound is not known, rather than "memory" for want of FLOPs.
            uncounted = instr.opcode == "custom-call" and not flops
            section, path = groups.get(instr.name, ("", []))
            records.append(
                {
                    "name": instr.name,
                    "opcode": instr.opcode,
                    "fusion_kind": instr.fusion_kind,
                    "group": short_place(section, path),
                    "source": source_of(instr, self.module),
                    "calls": round(calls, 3),
                    **self._figures(seconds, None if uncounted else flops, nbytes, uncounted),
                }
            )
        records.sort(key=lambda r: (-r["seconds"], r["name"]))
        return records

    def _group_records(self, instructions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        groups = instruction_places(self.module)
        summed: dict[str, dict[str, Any]] = {}
        for record in instructions:
            section, path = groups.get(record["name"], ("", []))
            entry = summed.setdefault(
                record["group"],
                {"section": section, "path": list(path), "n": 0, "s": 0.0, "f": 0, "b": 0},
            )
            entry["n"] += 1
            entry["s"] += record["seconds"]
            entry["f"] += record["flops"] or 0
            entry["b"] += record["bytes"] or 0
        records = [
            {
                "group": label,
                "section": entry["section"],
                "path": entry["path"],
                "instructions": entry["n"],
                **self._figures(entry["s"], entry["f"], entry["b"]),
            }
            for label, entry in summed.items()
        ]
        records.sort(key=lambda r: (-r["seconds"], r["group"]))
        return records

    def _figures(
        self, seconds: float, flops: float | None, nbytes: float | None, uncounted: bool = False
    ) -> dict:
        figures: dict[str, Any] = {
            "seconds": seconds,
            "share": seconds / self.total_seconds if self.total_seconds else 0.0,
            "flops": flops,
            "bytes": nbytes,
            "flops_per_second": flops / seconds if flops and seconds else None,
            "bytes_per_second": nbytes / seconds if nbytes and seconds else None,
        }
        if self.peak is not None and uncounted:
            figures.update(roofline_seconds=None, bound=None, roofline_share=None)
        elif self.peak is not None:
            compute = (flops or 0) / self.peak.flops_per_second
            memory = (nbytes or 0) / self.peak.bytes_per_second
            bound = max(compute, memory)
            figures["roofline_seconds"] = bound if bound else None
            figures["bound"] = ("compute" if compute >= memory else "memory") if bound else None
            figures["roofline_share"] = bound / seconds if bound and seconds else None
        return figures

    def verdict(self) -> str:
        """What bounds the step, in one line (the first of the profile's view).

        The busy time is the union of the run's events, at most the run's wall time: the
        two are read on different clocks (the profiler's, the host's around each call), so
        a device busy nearly all the time could read busy 2.43 ms of 2.37 ms."""
        evidence = self.evidence
        busy = self.busy_seconds if self.busy_seconds is not None else evidence.busy_seconds
        if busy is None:
            busy = self.total_seconds
        wall = self.wall_seconds_per_run or evidence.period_seconds
        if wall:
            busy = min(busy, wall)
        return verdict(
            busy=busy,
            wall=wall,
            records=self.table(),
            peak_known=self.peak is not None,
            launch=evidence.launch_seconds,
            unknown=evidence.unknown,
        )

    def _sources_line(self) -> str:
        """``Read 3 trace files: ...`` where the trace has several (hosts, run folders)."""
        if len(self.sources) < 2:
            return ""
        names = [pathlib.Path(p).parent.name + "/" + pathlib.Path(p).name for p in self.sources]
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        return f"Read {len(names)} trace files (every host and run folder): {shown}."

    def _hosts_line(self) -> str:
        """``Hosts: vm-0 1.2 ms, vm-1 1.5 ms per run (slowest vm-1)`` for several hosts."""
        if len(self.host_seconds) < 2:
            return ""
        slowest = max(self.host_seconds, key=self.host_seconds.get)
        each = ", ".join(f"{h} {format_seconds(s)}" for h, s in self.host_seconds.items())
        return f"Hosts: device time per run {each} (slowest {slowest})."

    # -- views -----------------------------------------------------------------

    def graph(self):
        """The optimized HLO's interactive graph, coloured by measured time (a heat scale;
        click a node for its time; a group's time is its members' sum)."""
        title = f"{self.name} · measured on {self.device_kind}"
        return hlo.graph(
            self.module, title=title, stage="optimized", times=self.instruction_seconds()
        )

    def _headline(self) -> str:
        runs = f"{self.runs} run{'s' if self.runs != 1 else ''}"
        if self.devices > 1 and self.runs % self.devices == 0:
            runs += f": {self.runs // self.devices} on each of {self.devices} devices"
        text = (
            f"{self.name} on {self.device_kind}: {format_seconds(self.total_seconds)} per run "
            f"in {len(self._own)} instructions (mean of {runs}"
        )
        wall = self.wall_seconds_per_run
        if wall is not None:
            text += f"; wall time {format_seconds(wall)} per run, dispatch included"
        if self.busy_seconds:
            text += f"; {self.total_seconds / self.busy_seconds:.1%} of the program's device time"
        return text + ")"

    def untraced_iterations(self) -> list[str]:
        """Warnings for loop bodies whose instructions were not all traced as often as the
        loop ran (XLA:CPU traces some library calls, YNNPACK's, on the first iteration only):
        their later iterations' time is counted in the instruction traced before them."""
        warnings = []
        for comp in self.module.computations.values():
            if comp.kind not in _NESTED_PROGRAM:
                continue
            calls = {
                i.name: self._calls[i.name] for i in comp.instructions if i.name in self._calls
            }
            # Some instructions run twice per iteration; one traced far less is missing.
            if len(calls) < 2 or max(calls.values()) < 8 * min(calls.values()):
                continue
            most = max(calls.values())
            few = sorted(n for n, c in calls.items() if c < most / 8)
            shown = ", ".join(few[:4]) + (f" and {len(few) - 4} more" if len(few) > 4 else "")
            warnings.append(
                f"In {comp.name}, {shown} traced fewer times than the loop ran ({most:g}): "
                "their later iterations' time is counted in the instruction before them."
            )
        return warnings

    def _section_line(self) -> str:
        """``forward 26% · loss 1% · backward 62% · optimizer update 8%``, in program order;
        empty for a program without a training step's sections."""
        shares: dict[str, float] = {}
        for record in self.table("group"):
            if record["section"]:
                shares[record["section"]] = shares.get(record["section"], 0) + record["share"]
        if not shares:
            return ""
        order = {name: k for k, name in enumerate(SECTIONS)}
        named = sorted(shares, key=lambda name: order.get(name, len(order)))
        share = {n: f"{100 * v:.1f}%" if v < 0.1 else f"{100 * v:.0f}%" for n, v in shares.items()}
        return "By section: " + " · ".join(f"{name} {share[name]}" for name in named)

    def _peak_line(self) -> str:
        if self.peak is None:
            return f"No published peak for {self.device_kind}, so no roofline."
        return (
            f"Roofline: {self.peak.name} peak {self.peak.bf16_tflops:g} TFLOP/s (bf16), "
            f"{self.peak.hbm_gbps:g} GB/s; 'reached' is the roofline time over the measured"
            " (* over 100%: the bytes or FLOPs estimated from the HLO exceed what ran, e.g. an"
            " operand read only in part)."
        )

    def _columns(self, by: str) -> list[Column]:
        """The columns of a table of records (each cell is given the whole record)."""
        return table_columns(by, self._calls_column(), with_peak=self.peak is not None)

    def _calls_column(self) -> list[Column]:
        """Runs per program run, shown only when some instruction runs more than once."""
        if all(round(calls, 3) == 1 for calls in self._calls.values()):
            return []
        return [Column("calls", "right", lambda r: f"{r['calls']:g}")]

    def _report(self) -> Report:
        lines = [
            Line(self._headline()),
            *(
                Line(t)
                for t in (
                    self._sources_line(),
                    self._others_line,
                    self._hosts_line(),
                    self._section_line(),
                )
                if t
            ),
            *(Line(w, "warn") for w in self.untraced_iterations()),
            Line(
                f"{self._peak_line()} Graph: .graph(); records: .table(), .table('group').", "note"
            ),
        ]
        tables = []
        for by, title in (("instruction", "top instructions"), ("group", "groups (layers)")):
            records = self.table(by)
            columns = self._columns(by)
            shown = records[:TOP_ROWS]
            more = f"; {len(shown)} longest shown" if len(records) > len(shown) else ""
            tables.append(
                Table(
                    columns,
                    [[record] * len(columns) for record in shown],
                    caption=f"{title} by time ({len(records)}{more})",
                    notes=[f"{len(records) - len(shown)} more: .table({by!r})"] if more else [],
                )
            )
        return Report(
            _KIND, self.verdict(), [*lines, *tables], _RULES, title_style="verdict", indent=""
        )

    def __repr__(self) -> str:
        return self._report().text()

    def _repr_html_(self) -> str:
        return self._report().html()


def _same_shapes(module: HloModule, chosen: Any, programs: list[Any], where: str) -> None:
    """Refuse a module compiled for other shapes than the program of the trace it is
    paired with (the same name, another program): its FLOPs and bytes would be wrong."""
    layout = module.attributes.get("entry_computation_layout")
    ran = entry_shapes(chosen.hlo_proto)
    given = layout_shapes(f"entry_computation_layout={layout}") if layout else ""
    if not given or not ran or given == ran:
        return
    others = [p.label for p in programs if p.name == chosen.name and p is not chosen]
    listed = (
        f" (the trace's others named {chosen.name!r}: {', '.join(others[:6])})" if others else ""
    )
    raise ArgumentError(
        f"The module given was compiled for {given}, but {chosen.label} in {where} ran "
        f"{ran}: its times would be paired with another program's FLOPs and bytes. Pass the "
        f"module compiled for those shapes, leave hlo_module out to use the HLO the trace "
        f"carries, or pass program= another program{listed}."
    )
