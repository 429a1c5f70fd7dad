"""What fills the device: a program's memory along its schedule, and who holds the peak.

`MemoryView` joins a program's `LiveRanges` (XLA's own, or tpukit's estimate) with its
HLO, so every buffer gets the instruction that made it, its layer and section (the
groups the graph shows: ``backward › layers[0] (Linear) backward``) and its source
line. It answers: how high is the peak and where, which buffers are live then (largest
first, with their lifetimes), how much each layer holds at the peak, and how the peak
compares with the device's capacity. It shows as a chart and tables in a notebook and
as text elsewhere; ``Compiled.memory_view()`` and ``HloProgram.memory_view()`` make one.

What the figures count (XLA's buffer assignment; measured on CPU, JAX 0.10):

- `MemoryView.peak_bytes`, the headline: what the device allocates to run the program,
  arguments + outputs not written into a donated argument + the one buffer XLA packs
  all temporaries into. It equals ``memory_analysis()``'s ``argument_size_in_bytes +
  output_size_in_bytes - alias_size_in_bytes + temp_size_in_bytes`` exactly
  (``temp_size_in_bytes`` is that packed buffer's size: the heap simulator's peak, gaps
  for alignment included). Constants and a kernel's thread-local scratch are left out,
  as XLA leaves them out of those fields.
- `MemoryView.values_at_peak_bytes`: XLA's live-range report's "peak usage" line, at its
  peak moment "Live ranges at N (peak)": the sum of the *logical* values live then.
  Values that share one slot (a conditional's result and the branch's copy that writes
  it; a donated argument, the loop's copy of it and the new state written over it) each
  count, so it is more than the device holds.
- `MemoryView.in_use_at_peak_bytes`: the same values, each slot once: the bytes really
  occupied at XLA's peak moment. The buffer list, the roll-ups and the chart use this.
  The chart's highest point can be elsewhere (XLA picks its moment by logical sum); the
  packed temporaries' buffer is as large as the most they ever occupy, plus gaps.
- ``memory_analysis().peak_memory_in_bytes`` (``xla_peak``): on CPU, arguments + outputs -
  aliases + constants; it leaves the temporaries out (the CPU buffer assignment carries
  no heap trace for them), so it is below the headline by ``temp_size_in_bytes``.

    >>> from tpukit.hlo import parse_hlo
    >>> from tpukit.memory._memory_ranges import estimate_live_ranges
    >>> module = parse_hlo('''
    ... HloModule f, is_scheduled=true
    ... ENTRY main {
    ...   x = f32[256]{0} parameter(0)
    ...   e = f32[256]{0} exponential(x)
    ...   ROOT n = f32[256]{0} negate(e)
    ... }
    ... ''')
    >>> view = MemoryView(module, estimate_live_ranges(module), capacity=2048)
    >>> view.peak_bytes, view.fits
    (3072, False)
    >>> [(b.name, b.kind, b.size) for b in view.buffers_at_peak()]
    [('e', 'temporary', 1024), ('n', 'output', 1024), ('x', 'argument', 1024)]
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from tpukit._errors import ArgumentError
from tpukit.display import BORDER_COLOR, Column, Figure, Report, Table, format_bytes
from tpukit.graph import HloGraph
from tpukit.hlo.analysis import FORWARD, place_label, plan_scopes, user_path
from tpukit.hlo.text import HloInstruction, HloModule
from tpukit.memory._memory_chart import PLURAL, chart_svg
from tpukit.memory._memory_ranges import KINDS, LiveRanges, LiveValue

_TOP = 20
# Kinds listed together in the roll-up by layer and section, not by where they are made.
_TOGETHER = frozenset({"argument", "output"})


@dataclass(frozen=True)
class PeakBuffer:
    """One buffer live at the peak: what it is, who made it, and how long it is held.

    ``start``/``end`` are positions in the program's instruction sequence; ``group`` is
    its layer and section (``forward › layers[0] (Linear)``), or the argument's name for
    an argument (``state[0]['layers'][0]['kernel'].value``).
    """

    name: str
    size: int
    shape: str
    kind: str
    opcode: str
    group: str
    source: str
    start: int
    end: int
    shares: str = ""  # a buffer listed before it whose slot holds this one's bytes

    @property
    def lifetime(self) -> str:
        return f"{self.start}-{self.end}"


_UNITS = {
    "": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip
_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*")


def parse_bytes(text: str | int) -> int:
    """``"2GiB"`` -> 2147483648; an int is bytes already. Quotes around the size (a
    magic's ``--capacity '16 GiB'``) and spaces before the unit are allowed.

        >>> parse_bytes("'16 GiB'"), parse_bytes(512)
        (17179869184, 512)
    """
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    found = _SIZE.fullmatch(str(text).strip().strip("'\""))
    if isinstance(text, bool) or not found or found.group(2).lower() not in _UNITS:
        raise ArgumentError(
            f"Cannot read the memory size {text!r}: write a number of bytes or a number with "
            "a unit, e.g. 2GiB, 512MiB or 800MB."
        )
    return int(float(found.group(1)) * _UNITS[found.group(2).lower()])


class MemoryView:
    """A program's memory: the peak, the buffers at the peak, and live bytes over time.

    Args:
      module: the optimized, scheduled program.
      ranges: its buffers' live ranges (`read_live_ranges` or `estimate_live_ranges`).
      name: a title.
      xla_peak: ``memory_analysis().peak_memory_in_bytes`` when the compiler gave one.
      capacity: the device's memory in bytes, to compare the peak with.
      capacity_source: where ``capacity`` comes from, for the report.
      xla_peak_note: why ``xla_peak`` differs from the live ranges' peak, when it does.
      roles: for a training step, ``{argument name prefix: role}`` (``"state[0]"``:
        ``"parameters"``) used by `breakdown`.
      argument_names: ``{traced name prefix: the user's name}``, applied to the arguments'
        paths: ``{"traced_args[0]": "x"}`` names ``traced_args[0]['w']`` ``x['w']``.
      output_names: the path of each leaf of the program's result, in the order of the
        entry's ROOT tuple (``["result[0]", "result[1]"]``): an output buffer is listed
        under ``outputs › result[0]``.
    """

    def __init__(
        self,
        module: HloModule,
        ranges: LiveRanges,
        *,
        name: str | None = None,
        xla_peak: int | None = None,
        capacity: int | None = None,
        capacity_source: str = "",
        xla_peak_note: str = "",
        roles: dict[str, str] | None = None,
        argument_names: dict[str, str] | None = None,
        output_names: list[str] | None = None,
    ) -> None:
        self.module = module
        self.ranges = ranges
        self.name = name or module.name
        self.xla_peak = xla_peak
        self.capacity = capacity
        self.capacity_source = capacity_source
        self.xla_peak_note = xla_peak_note
        self.roles = dict(roles or {})
        self.argument_names = dict(argument_names or {})
        self.output_names = list(output_names or [])
        self._outputs: dict[tuple[int, int] | str, str] | None = None
        self._instructions = {i.name: i for i in module.instructions()}
        self._groups: dict[str, str] | None = None
        self._sections: dict[str, str] = {}

    # ----------------------------------------------------------------- the numbers
    @property
    def is_estimate(self) -> bool:
        """True when the live ranges were computed by tpukit, not read from XLA."""
        return self.ranges.is_estimate

    @property
    def peak_bytes(self) -> int:
        """The headline: the bytes the device allocates for the program, XLA's
        ``argument + output - alias + temp`` sizes (see the module docstring); for an
        estimate, the most the estimated live ranges hold at once."""
        allocated = self.ranges.allocated_bytes
        return self.ranges.peak_bytes if allocated is None else allocated

    @property
    def values_at_peak_bytes(self) -> int:
        """XLA's live-range "peak usage": the logical values live at its peak, summed."""
        return self.ranges.peak_bytes

    @property
    def in_use_at_peak_bytes(self) -> int:
        """The bytes the values live at the peak moment occupy, each slot once."""
        return sum(v.size for v in self.ranges.distinct(self._live_at_peak()))

    def _live_at_peak(self) -> list[LiveValue]:
        return self.ranges.live_at(self.peak_position)

    @property
    def peak_position(self) -> int:
        return self.ranges.peak_position

    @property
    def peak_instruction(self) -> str:
        """The instruction that runs at the peak."""
        sequence = self.ranges.sequence
        return sequence[self.peak_position] if sequence else ""

    @property
    def fits(self) -> bool | None:
        """Whether the peak is within ``capacity`` (None when the capacity is unknown)."""
        return None if self.capacity is None else self.peak_bytes <= self.capacity

    def timeline(self) -> list[dict[str, int]]:
        """Bytes in use at each position of the schedule, by kind (argument, output, ...):
        each slot of XLA's buffer assignment once; for an estimate, each value."""
        if self.ranges.allocations:
            return [self.ranges.in_use(k) for k in range(len(self.ranges.sequence))]
        return self.ranges.timeline()

    def buffers_at_peak(self) -> list[PeakBuffer]:
        """Every value live at XLA's peak moment, largest first (XLA's live-range list);
        ``shares`` names an earlier one whose slot already holds its bytes."""
        live = self._live_at_peak()
        kept = {id(v) for v in self.ranges.distinct(live)}
        buffers = []
        for value in live:
            shares = ""
            if id(value) not in kept:
                shares = next(
                    (
                        o.label
                        for o in live
                        if id(o) in kept
                        and o.allocation == value.allocation
                        and o.offset <= value.offset
                        and value.offset + value.size <= o.offset + o.size
                    ),
                    "",
                )
            buffers.append(self._buffer(value, shares))
        return buffers

    def by_group(self) -> list[tuple[str, int]]:
        """Bytes in use at the peak per layer and section (arguments together, outputs
        together), each slot once, largest first: they add up to `in_use_at_peak_bytes`."""
        totals: dict[str, int] = defaultdict(int)
        for buffer in self.buffers_at_peak():
            if buffer.shares:
                continue
            group = PLURAL[buffer.kind] if buffer.kind in _TOGETHER else buffer.group
            totals[group] += buffer.size
        return sorted(totals.items(), key=lambda item: (-item[1], item[0]))

    def breakdown(self) -> list[tuple[str, int]]:
        """For a training step: the peak as parameters, optimizer state, data, activations
        kept for the backward pass, new state (outputs) and workspace. Empty without roles."""
        if not self.roles:
            return []
        totals: dict[str, int] = defaultdict(int)
        for value in self.ranges.distinct(self._live_at_peak()):
            totals[self._role(value)] += value.size
        return sorted(totals.items(), key=lambda item: -item[1])

    def _role(self, value: LiveValue) -> str:
        instr = self._instructions.get(value.name)
        if value.kind == "argument":
            label = self._group(value.name, instr) if instr is not None else value.name
            for prefix, role in self.roles.items():
                if label.startswith(prefix):
                    return role
            if instr is not None and instr.opcode != "parameter":
                return "new state (in donated buffers)"
            return "other arguments"
        if value.kind == "output":
            return "results (new state)"
        if value.kind == "constant":
            return "constants"
        if self._section(value.name) == FORWARD:
            return "activations kept for backward"
        return "workspace"

    def bytes_by_instruction(self) -> dict[str, int]:
        """Bytes each instruction's buffers hold at XLA's peak moment, each slot once:
        what "Colour: memory" in `graph` paints (they add up to `in_use_at_peak_bytes`)."""
        held: dict[str, int] = defaultdict(int)
        for value in self.ranges.distinct(self._live_at_peak()):
            held[value.name] += value.size
        return dict(held)

    def graph(self) -> HloGraph:
        """The program's graph coloured by memory: each node by the bytes it holds at the
        peak ("Colour: memory"; "Colour: kind" in its toolbar goes back to op kinds)."""
        return HloGraph(self.module, title=self.name, memory=self.bytes_by_instruction())

    # ----------------------------------------------------------------- where each buffer is from
    def _buffer(self, value: LiveValue, shares: str = "") -> PeakBuffer:
        instr = self._instructions.get(value.name)
        shape = value.shape or (str(instr.shape) if instr is not None else "")
        return PeakBuffer(
            name=value.label,
            size=value.size,
            shape=shape.split("{")[0] if shape.endswith("}") else shape,
            kind=value.kind,
            opcode=instr.opcode if instr is not None else "",
            group=self._output_group(value)
            if value.kind == "output"
            else self._group(value.name, instr),
            source=instr.source_location if instr is not None else "",
            start=value.start,
            end=value.end,
            shares=shares,
        )

    def _group(self, name: str, instr: HloInstruction | None) -> str:
        if instr is None:
            return ""
        if instr.opcode == "parameter" and instr.metadata.op_name:
            return self._argument_name(instr.metadata.op_name.replace("\\'", "'"))
        if self._groups is None:
            self._plan()
        return self._groups.get(name, "")

    def _argument_name(self, path: str) -> str:
        """``traced_args[0]['w']`` as the user wrote it: ``x['w']``."""
        return user_path(path, self.argument_names)

    def _output_group(self, value: LiveValue) -> str:
        """``outputs › result[1]``: which leaf of the result an output buffer holds (found
        by its slot in XLA's buffer assignment, or by name in an estimate)."""
        if self._outputs is None:
            self._outputs = self._output_slots()
        slot = value.slot
        name = self._outputs.get(slot[:2] if slot is not None else value.key, "")
        return f"outputs › {name}" if name else "outputs"

    def _output_slots(self) -> dict[tuple[int, int] | str, str]:
        """``{slot or value key: output path}`` for the leaves of the entry's ROOT."""
        root = self.module.entry.root
        if root is None:
            return {}
        leaves = root.operands if root.opcode == "tuple" else [root.name]
        if len(leaves) != len(self.output_names):
            return {}
        by_key = {v.key: v for v in self.ranges.values}
        found: dict[tuple[int, int] | str, str] = {}
        for operand, path in zip(leaves, self.output_names):
            key = self._defining_key(operand)
            value = by_key.get(key)
            found[key] = path
            if value is not None and value.slot is not None:
                found[value.slot[:2]] = path
        return found

    def _defining_key(self, name: str) -> str:
        """The ``name{index}`` of the value an instruction of the entry returns: through
        bitcasts and get-tuple-elements to the instruction that defines it."""
        index: list[str] = []
        instr = self._instructions.get(name)
        while instr is not None and instr.opcode in ("bitcast", "get-tuple-element"):
            if instr.opcode == "get-tuple-element":
                index.insert(0, instr.attributes.get("index", "0"))
            name = instr.operands[0] if instr.operands else name
            instr = self._instructions.get(name)
        return f"{name}{{{','.join(index)}}}"

    def _section(self, name: str) -> str:
        if self._groups is None:
            self._plan()
        return self._sections.get(name, "")

    def _plan(self) -> None:
        self._groups = {}
        for comp in self.module.computations.values():
            if comp.kind not in ("entry", "while_body", "while_condition", "branch", "called"):
                continue
            callers = self.module.callers(comp.name)
            plan = plan_scopes(comp, self.module, callers[0] if callers else None)
            for instr in comp.instructions:
                section = plan.section.get(instr.name, "")
                self._sections[instr.name] = section
                self._groups[instr.name] = place_label(section, plan.path.get(instr.name, []))

    # ----------------------------------------------------------------- one description, two outputs
    def _xla_peak_text(self) -> str:
        xla_peak, peak = self.xla_peak or 0, self.peak_bytes
        if xla_peak == peak:
            return f"{format_bytes(xla_peak)} (the same)"
        note = f": {self.xla_peak_note}" if self.xla_peak_note else ""
        return f"{format_bytes(xla_peak)} ({xla_peak:,} B against {peak:,} B{note})"

    def _headline(self) -> str:
        kind = "estimated from the HLO schedule" if self.is_estimate else "XLA's buffer assignment"
        return f"Memory of {self.name} ({kind})"

    def _facts(self) -> list[tuple[str, str]]:
        at = f"step {self.peak_position} of {len(self.ranges.sequence)} ({self.peak_instruction})"
        allocated = self.ranges.allocated()
        if allocated:
            parts = ", ".join(
                f"{what} {format_bytes(allocated[kind])}"
                for kind, what in (
                    ("argument", "arguments"),
                    ("output", "outputs"),
                    ("temporary", "temporaries (one packed buffer)"),
                )
                if allocated[kind]
            )
            facts = [
                (
                    "peak",
                    f"{format_bytes(self.peak_bytes)} ({self.peak_bytes:,} B) allocated: {parts}",
                ),
                (
                    "at XLA's peak",
                    f"{at}: {format_bytes(self.in_use_at_peak_bytes)} in use; XLA's live-range "
                    f"'peak usage' {self.values_at_peak_bytes:,} B counts every value, those sharing a "
                    "slot included",
                ),
            ]
        else:
            facts = [("peak", f"{format_bytes(self.peak_bytes)} at {at}")]
        if self.xla_peak is not None:
            facts.append(("XLA's peak_memory", self._xla_peak_text()))
        if self.capacity is not None:
            share = self.peak_bytes / self.capacity if self.capacity else float("inf")
            verdict = "fits" if self.fits else "does NOT fit"
            where = f" ({self.capacity_source})" if self.capacity_source else ""
            facts.append(
                ("device", f"{format_bytes(self.capacity)}{where}: {verdict}, {share:.0%} used")
            )
        at_peak = self.timeline()[self.peak_position] if self.ranges.sequence else {}
        split = ", ".join(f"{k} {format_bytes(at_peak[k])}" for k in KINDS if at_peak.get(k))
        if split:
            facts.append(("in use at the peak", split))
        return facts

    def _tables(self) -> list[Table]:
        peak = (self.peak_bytes if self.is_estimate else self.in_use_at_peak_bytes) or 1
        buffers = self.buffers_at_peak()

        def share(n: int) -> str:
            return f"{n / peak:.1%}"

        size = Column("size", align="right", format=format_bytes, nowrap=True)
        rows = [
            (
                b.size,
                b.size,
                b.shape,
                b.kind,
                self._made_by(b),
                b.group,
                b.source,
                b.lifetime,
                f"in {b.shares}'s slot" if b.shares else "",
            )
            for b in buffers[:_TOP]
        ]
        more = f" ({_TOP} largest of {len(buffers)})" if len(buffers) > _TOP else ""
        shared = any(b.shares for b in buffers[:_TOP])  # a "shares" column only when needed
        tables = [
            Table(
                [
                    size,
                    Column("share", align="right", format=share),
                    Column("shape", nowrap=True),
                    Column("kind", nowrap=True),
                    Column("made by"),
                    Column("layer / section"),
                    Column("source", nowrap=True),
                    Column("live", nowrap=True),
                    *([Column("shares")] if shared else []),
                ],
                [r if shared else r[:-1] for r in rows],
                caption=f"Buffers live at the peak{more}",
            ),
            Table(
                [
                    Column("group"),
                    Column("bytes", align="right", format=format_bytes, nowrap=True),
                    Column("share", align="right", format=share),
                ],
                [(g, n, n) for g, n in self.by_group()[:_TOP]],
                caption="In use at the peak, by layer and section (each slot once)",
            ),
        ]
        breakdown = self.breakdown()
        if breakdown:
            tables.append(
                Table(
                    [
                        Column("what"),
                        Column("bytes", align="right", format=format_bytes, nowrap=True),
                        Column("share", align="right", format=share),
                    ],
                    [(w, n, n) for w, n in breakdown],
                    caption="Training step at the peak",
                )
            )
        return tables

    def _made_by(self, buffer: PeakBuffer) -> str:
        """``dot.3 (dot)``; an argument by its place in the call: ``parameter 0``."""
        instr = self._instructions.get(buffer.name)
        if buffer.kind == "argument" and instr is not None and instr.parameter_number is not None:
            return f"parameter {instr.parameter_number}"
        return f"{buffer.name} ({buffer.opcode})" if buffer.opcode else buffer.name

    def _report(self, chart: str = "") -> Report:
        """The view as one description: the facts, the chart (HTML only), the tables."""
        facts = Table(
            [Column("fact", heading=True, nowrap=True), Column("value")],
            self._facts(),
            header=False,
        )
        blocks: list[Table | Figure] = [facts]
        if chart:
            blocks.append(Figure(chart))
        return Report(_KIND, self._headline(), [*blocks, *self._tables()], rules=_RULES)

    def __repr__(self) -> str:
        return self._report().text()

    def _repr_html_(self) -> str:
        return self._report(self._chart_svg()).html()

    def _chart_svg(self, width: int = 720, height: int = 180) -> str:
        """Live bytes along the schedule, stacked by kind, the peak and capacity marked."""
        return chart_svg(
            self.timeline(),
            self.name,
            peak_bytes=self.peak_bytes,
            peak_position=self.peak_position,
            allocated=self.ranges.allocated_bytes,
            capacity=self.capacity,
            width=width,
            height=height,
        )


_KIND = "tpukit-memory"
_RULES = (
    f"&{{border:1px solid {BORDER_COLOR};border-radius:4px;padding:6px 10px;max-width:1100px;"
    "overflow-x:auto}"
    "& svg text{fill-opacity:1}"
    # Names (an argument's HLO name, its path) stay whole: a wider table scrolls.
    "& th.nowrap,& details td{white-space:nowrap}"
    "& svg text.halo{paint-order:stroke;stroke:var(--jp-layout-color0,#fff);stroke-width:3px}"
)
