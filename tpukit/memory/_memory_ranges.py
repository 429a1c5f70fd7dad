"""Which buffers a program holds at each step: XLA's own live ranges, or an estimate.

XLA decides where every value of a scheduled program lives (its *buffer assignment*)
and for how long (its *live ranges*). With ``XLA_FLAGS=--xla_dump_to=DIR
--xla_dump_hlo_as_text`` it writes both next to the optimized HLO, per module:

- ``*-buffer-assignment.txt``: each allocation (``parameter 3``, ``maybe-live-out``,
  ``preallocated-temp``, ``thread-local``, ``constant``) and the values in it, with
  their sizes;
- ``*-live-range.txt``: the instruction sequence, each value's live range as positions
  in it (``dot.3{}:12-40``), the moment of the peak and the values live then.

`read_live_ranges` reads those two files into `LiveRanges`; `estimate_live_ranges`
computes the same from HLO text alone (each value lives from the instruction that makes
it to its last use in the schedule), for programs that come without the files, and
says it is an estimate.

    >>> from tpukit.hlo import parse_hlo
    >>> ranges = estimate_live_ranges(parse_hlo('''
    ... HloModule f, is_scheduled=true
    ... ENTRY main {
    ...   x = f32[256]{0} parameter(0)
    ...   e = f32[256]{0} exponential(x)
    ...   ROOT n = f32[256]{0} negate(e)
    ... }
    ... '''))
    >>> [(v.name, v.kind, v.start, v.end, v.size) for v in ranges.values]
    [('x', 'argument', 0, 2, 1024), ('e', 'temporary', 1, 2, 1024), ('n', 'output', 2, 2, 1024)]
    >>> ranges.peak_position, ranges.peak_bytes  # at ``n``: x, e and n are all held
    (2, 3072)
"""

from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass, field

from tpukit._errors import ArgumentError
from tpukit.hlo.text import HloComputation, HloInstruction, HloModule

#: What a buffer holds: an argument of the program, part of its result, a value made
#: and dropped inside it, or a constant baked into it.
KINDS = ("argument", "output", "temporary", "constant")
#: XLA's allocations: an argument's buffer (donated ones included), an output not in an
#: argument's buffer, the one preallocated buffer the temporaries are packed into,
#: constants, and thread-local scratch of a kernel.
ALLOCATION_KINDS = ("argument", "output", "temporary", "constant", "thread-local")

# Ops whose result is (part of) another value's buffer: they allocate nothing.
_ALIASING = frozenset({"bitcast", "get-tuple-element", "tuple", "opt-barrier"})
# Ops that run other computations of the program, inlined into the sequence before them.
_CONTROL = frozenset({"while", "conditional", "call"})


@dataclass(frozen=True)
class LiveValue:
    """One buffer of the program: the value ``name{index}`` and the positions it is held.

    ``start`` and ``end`` are positions in `LiveRanges.sequence`, both included;
    ``index`` is the element of a tuple-shaped instruction (``{}`` for the whole value).
    """

    name: str
    index: str
    start: int
    end: int
    size: int
    kind: str
    shape: str = ""
    #: Where the buffer assignment put it: allocation number and offset (-1: unknown).
    #: Several values can share one slot (a conditional's result and the branch value
    #: that writes it; a donated argument and the new state written over it).
    allocation: int = -1
    offset: int = 0

    @property
    def slot(self) -> tuple[int, int, int] | None:
        """``(allocation, offset, size)`` in XLA's buffer assignment, None if unknown."""
        return None if self.allocation < 0 else (self.allocation, self.offset, self.size)

    @property
    def key(self) -> str:
        """``name{index}``, as XLA's reports write it."""
        return f"{self.name}{self.index or '{}'}"

    @property
    def label(self) -> str:
        return self.name if self.index in ("", "{}") else f"{self.name}{self.index}"


@dataclass
class LiveRanges:
    """The buffers of one program along its instruction sequence.

    ``source`` says where the figures come from: ``"xla"`` (XLA's buffer assignment and
    live ranges, read from its dump) or ``"estimate"`` (computed by tpukit from the
    schedule). ``reported_peak`` is XLA's own peak moment and bytes when its dump has
    them.
    """

    sequence: list[str]
    values: list[LiveValue]
    source: str
    reported_peak: tuple[int, int] | None = None
    reported_peak_values: list[str] = field(default_factory=list)
    #: XLA's allocations: ``{number: (size, kind)}``, kind one of `ALLOCATION_KINDS`.
    allocations: dict[int, tuple[int, str]] = field(default_factory=dict)

    @property
    def is_estimate(self) -> bool:
        return self.source != "xla"

    def live_at(self, position: int) -> list[LiveValue]:
        """The values held at ``position``, largest first."""
        live = [v for v in self.values if v.start <= position <= v.end]
        return sorted(live, key=lambda v: (-v.size, v.label))

    def timeline(self) -> list[dict[str, int]]:
        """Bytes held at each position of the sequence, by kind (see `KINDS`)."""
        steps = [dict.fromkeys(KINDS, 0) for _ in self.sequence]
        for value in self.values:
            for position in range(max(value.start, 0), min(value.end, len(steps) - 1) + 1):
                steps[position][value.kind] += value.size
        return steps

    @property
    def peak_position(self) -> int:
        """XLA's peak moment when it reported one, else the position holding the most."""
        if self.reported_peak is not None:
            return self.reported_peak[0]
        totals = [sum(step.values()) for step in self.timeline()]
        return max(range(len(totals)), key=totals.__getitem__) if totals else 0

    @property
    def peak_bytes(self) -> int:
        """The values held at `peak_position`, each at its buffer-assignment size, summed.

        This is what XLA's live-range report calls "peak usage": a sum over *logical*
        values, so values that share one allocation slot (a conditional's result and the
        branch's copy that writes it, a donated argument and the new state written into
        it) each count. It is more than the device holds; see `allocated_bytes`.
        """
        return sum(v.size for v in self.live_at(self.peak_position))

    def allocated(self) -> dict[str, int]:
        """Bytes of XLA's allocations by kind (see `ALLOCATION_KINDS`); empty if unknown."""
        totals = dict.fromkeys(ALLOCATION_KINDS, 0)
        for size, kind in self.allocations.values():
            totals[kind] += size
        return totals if self.allocations else {}

    @property
    def allocated_bytes(self) -> int | None:
        """What the device allocates to run the program: arguments + outputs that are not
        in an argument's (donated) buffer + the temporaries' one preallocated buffer.

        Equals ``memory_analysis()``'s ``argument_size_in_bytes + output_size_in_bytes -
        alias_size_in_bytes + temp_size_in_bytes``. Constants (baked into the executable)
        and thread-local scratch (kernel stack) are not counted, as XLA does not count
        them in those fields. None for an estimate.
        """
        totals = self.allocated()
        if not totals:
            return None
        return totals["argument"] + totals["output"] + totals["temporary"]

    def distinct(self, values: list[LiveValue]) -> list[LiveValue]:
        """``values`` less those whose bytes an earlier one already covers (same slot, or
        inside it): what they occupy on the device, each byte once. An estimate's values
        have no slots and are all kept."""
        kept, spans = [], []
        for value in values:
            if value.slot is None:
                kept.append(value)
                continue
            low, high = value.offset, value.offset + value.size
            if any(a == value.allocation and s <= low and high <= e for a, s, e in spans):
                continue
            spans.append((value.allocation, low, high))
            kept.append(value)
        return kept

    def in_use(self, position: int) -> dict[str, int]:
        """Bytes of XLA's allocations in use at ``position`` by kind: the values live
        then, each slot once (`distinct`). Empty for an estimate."""
        if not self.allocations:
            return {}
        totals = dict.fromkeys(KINDS, 0)
        for value in self.distinct(self.live_at(position)):
            totals[value.kind] += value.size
        return totals


# ----------------------------------------------------------------------------- XLA's files

_ALLOCATION = re.compile(r"^allocation (\d+): size (\d+)(.*)$")
_VALUE = re.compile(
    r"^\s*value: <\d+ (\S+?)(\{[^}]*\})?(?: \(phi\))? @\d+> \(size=(\d+),offset=(\d+)\): (.*)$"
)
_SEQUENCE = re.compile(r"^\s+(\d+):(\S+)\s*$", re.M)
_RANGE = re.compile(r"^\s+(\S+?)(\{[^}]*\}):(-?\d+)-(-?\d+)\s*$", re.M)
_PEAK = re.compile(r"Live ranges at (\d+) \(peak\):")
_PEAK_VALUE = re.compile(r"^\s+(\S+?\{[^}]*\}): \d+ bytes", re.M)
_PEAK_TOTAL = re.compile(r"Stack trace breakdown for peak usage: ([\d ]+) bytes")


def _allocation_kind(header: str) -> str:
    """An allocation's kind (`ALLOCATION_KINDS`), as ``CompiledMemoryStats`` sorts them."""
    if ", parameter " in header:
        return "argument"
    if ", constant" in header:
        return "constant"
    if "maybe-live-out" in header:
        return "output"
    if "thread-local" in header:
        return "thread-local"
    return "temporary"


def read_allocations(text: str) -> dict[int, tuple[int, str]]:
    """``{allocation number: (size, kind)}`` from a ``*-buffer-assignment.txt``."""
    return {
        int(found.group(1)): (int(found.group(2)), _allocation_kind(found.group(3)))
        for found in map(_ALLOCATION.match, text.splitlines())
        if found
    }


def read_buffer_assignment(text: str) -> dict[str, tuple[int, str, str, int, int]]:
    """``{value label: (size, kind, shape, allocation, offset)}`` from a
    ``*-buffer-assignment.txt`` (a thread-local value's kind is ``"temporary"``)."""
    values: dict[str, tuple[int, str, str, int, int]] = {}
    kind, number = None, -1
    for line in text.splitlines():
        found = _ALLOCATION.match(line)
        if found:
            kind, number = _allocation_kind(found.group(3)), int(found.group(1))
            kind = "temporary" if kind == "thread-local" else kind
            continue
        if kind is None:
            continue
        found = _VALUE.match(line)
        if found:
            label = found.group(1) + (found.group(2) or "{}")
            size, offset, shape = int(found.group(3)), int(found.group(4)), found.group(5)
            values.setdefault(label, (size, kind, shape.strip(), number, offset))
        elif line and not line.startswith(" "):
            kind = None  # the allocation list is over (the summary follows)
    return values


def read_live_ranges(live_range_text: str, buffer_assignment_text: str) -> LiveRanges:
    """`LiveRanges` from XLA's ``*-live-range.txt`` and ``*-buffer-assignment.txt``."""
    if "InstructionSequence:" not in live_range_text or "BufferLiveRange:" not in live_range_text:
        raise ArgumentError(
            "This is not an XLA live-range report (it has no InstructionSequence and "
            "BufferLiveRange sections); pass a *-live-range.txt file from --xla_dump_to."
        )
    head, _, rest = live_range_text.partition("BufferLiveRange:")
    ranges_text, _, peak_text = rest.partition("Live ranges at")
    sequence = [name for _, name in _SEQUENCE.findall(head.split("InstructionSequence:", 1)[1])]
    assignment = read_buffer_assignment(buffer_assignment_text)
    values = []
    for name, index, start, end in _RANGE.findall(ranges_text):
        size, kind, shape, number, offset = assignment.get(
            name + index, (0, "temporary", "", -1, 0)
        )
        values.append(
            LiveValue(name, index, int(start), int(end), size, kind, shape, number, offset)
        )
    reported, peak_values = None, []
    peak = _PEAK.search(live_range_text)
    total = _PEAK_TOTAL.search(live_range_text)
    if peak and total:
        reported = (int(peak.group(1)), int(total.group(1).replace(" ", "")))
        listing = peak_text.split("Stack trace", 1)[0]
        peak_values = _PEAK_VALUE.findall(listing)
    allocations = read_allocations(buffer_assignment_text)
    return LiveRanges(sequence, values, "xla", reported, peak_values, allocations)


def dump_memory_files(folder: pathlib.Path, prefix: str) -> tuple[str, str] | None:
    """The texts of the live-range and buffer-assignment files of the module ``prefix``
    (``module_0042.jit_step``) in a dump folder, or None when XLA did not write them."""
    live = sorted(folder.glob(f"{prefix}.*after_optimizations-live-range.txt"))
    assignment = sorted(folder.glob(f"{prefix}.*after_optimizations-buffer-assignment.txt"))
    if not live or not assignment:
        return None
    return live[0].read_text(), assignment[0].read_text()


# ----------------------------------------------------------------------------- estimate


def estimate_live_ranges(module: HloModule) -> LiveRanges:
    """Live ranges computed from a scheduled module's text: an estimate of XLA's.

    The entry computation runs in file order (a scheduled module's text is its schedule),
    with the computations of ``while``, ``conditional`` and ``call`` inlined before the
    instruction that runs them. A value lives from the instruction that makes it to its
    last use; arguments for the whole run; the result to the end. Ops that only rename
    a buffer (bitcast, tuple, get-tuple-element) allocate nothing and extend the life of
    what they rename. XLA may share or reuse buffers this does not see.
    """
    sequence: list[HloInstruction] = []
    _flatten(module, module.entry, sequence, set())
    position = {instr.name: k for k, instr in enumerate(sequence)}
    last = len(sequence) - 1
    owner: dict[str, list[str]] = {}  # an aliasing op's name -> the buffers it names
    end: dict[str, int] = {}
    for k, instr in enumerate(sequence):
        if instr.opcode in _ALIASING:
            owner[instr.name] = [b for op in instr.operands for b in owner.get(op, [op])]
        for operand in instr.operands:
            for buffer in owner.get(operand, [operand]):
                if buffer in position:
                    end[buffer] = max(end.get(buffer, 0), k)
    root = module.entry.root
    outputs = set(owner.get(root.name, [root.name])) if root is not None else set()
    values = []
    for k, instr in enumerate(sequence):
        if instr.opcode in _ALIASING or instr.opcode in _CONTROL:
            continue
        if instr.opcode == "parameter" and instr.computation != module.entry.name:
            continue  # a loop or branch parameter is its caller's buffer
        if instr.opcode == "parameter":
            kind, start, stop = "argument", 0, last
        elif instr.name in outputs:
            kind, start, stop = "output", k, last
        else:
            kind = "constant" if instr.opcode == "constant" else "temporary"
            start, stop = k, max(end.get(instr.name, k), k)
        values.append(
            LiveValue(instr.name, "{}", start, stop, instr.shape.nbytes, kind, str(instr.shape))
        )
    return LiveRanges([i.name for i in sequence], values, "estimate")


def _flatten(
    module: HloModule, comp: HloComputation, out: list[HloInstruction], seen: set[str]
) -> None:
    if comp.name in seen:  # a computation called twice is counted where it first runs
        return
    seen.add(comp.name)
    for instr in comp.instructions:
        if instr.opcode in _CONTROL:
            for called in module.called(instr):
                _flatten(module, called, out, seen)
        out.append(instr)
