"""The line-by-line reader: the state of a parse, and every line the fast path leaves.

One job: `_Reader` holds what a parse has read (module header, stack-frame tables, the
open computation, an instruction whose lines are still coming) and reads one line at a
time: headers, closing braces, continuation lines, comments, odd spacing, and text with
line breaks other than "\\n". `_fast_rows._read_rows` hands it every line it does not
read itself; both read any text the same way (``tests/test_hlo_parser_rows.py``).

Imports: this package's model, instruction lines, metadata, brackets, module links and
parsed rows.
"""

from __future__ import annotations

import re

from tpukit._errors import HloTextError
from tpukit.hlo.text._brackets import open_brackets, split_top
from tpukit.hlo.text._instruction_line import parse_instruction
from tpukit.hlo.text._metadata import metadata_table
from tpukit.hlo.text._model import HloComputation, HloInstruction, HloModule
from tpukit.hlo.text._module_links import (
    assign_kinds,
    frame_places,
    link_sources,
    stack_frames,
)
from tpukit.hlo.text._parsed_rows import ParsedRows

# (Its signature ends at the last non-space before the "{": ``(?:.*\S)?``, which finds
# it from the end, matches what a lazy ``.*?`` would, 5x quicker on a long signature.)
_COMPUTATION_HEADER = re.compile(r"(ENTRY\s+)?%?([\w.\-$]+)\s*(\(.*\)\s*->(?:.*\S)?)?\s*\{$")
# An instruction's first line: ``[ROOT] [%]name = <shape> ...`` (spaces around ``=``).
_NEW_INSTRUCTION = re.compile(r"(ROOT\s+)?%?[\w.\-$]+\s+=\s+[a-z(]")
_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


class _Reader:
    """The line-by-line state of a parse: module header, stack-frame tables, the open
    computation and the instruction whose lines are still coming (``pending``)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.module = HloModule(name="")
        self.tables: dict[str, dict[int, str]] = {name: {} for name in _TABLES}
        self.table: dict[int, str] | None = None
        self.comp: HloComputation | None = None
        self.pending: list[str] = []
        self.pending_at = 0  # where the pending instruction starts in ``text``
        self.depth: int | None = 0  # brackets it leaves open (None: not counted yet)
        self.seen_header = False
        # Names (of odd lines) and metadata texts (`metadata_table`) -> one object each.
        self.shared: dict = {}
        # The records that call computations, in file order (what `assign_kinds` and
        # `check_complete` read), and how many computations were closed.
        self.callers: list[HloInstruction] = []
        self.closed = 0
        # The last record, made from one common line by `_read_rows`, is what a
        # line-by-line reader would still hold pending: a next line may continue it.
        self.fast = False

    def line(self, line: str, start: int) -> None:
        """Read one line (with its line break) that starts at ``start`` in the text."""
        stripped = line.strip()
        comp = self.comp
        if comp is None:
            self._outside(line, stripped)
            return
        if not stripped or stripped.startswith("//"):
            return
        if _NEW_INSTRUCTION.match(stripped):
            self.flush()
            # Most instructions fit on one line: their depth is counted only when needed.
            self.pending, self.depth = [stripped], None
            self.pending_at = start + len(line) - len(line.lstrip())
            return
        if self.fast:
            depth = open_brackets(comp.instructions[-1].text)
            if (stripped.startswith("}") and depth <= 0) or _COMPUTATION_HEADER.match(stripped):
                self.pending, self.depth = [], depth
            else:  # a continuation line: read the record's line again with it
                last = comp.instructions.pop()
                if self.callers and self.callers[-1] is last:
                    self.callers.pop()
                self.pending, self.depth, self.pending_at = [last.text], depth, last._at
            self.fast = False
        if self.depth is None:
            self.depth = open_brackets(self.pending[0])
        if stripped.startswith("}") and self.depth <= 0:
            self.flush()
            self.module.computations[comp.name] = comp
            self.closed += 1
            self.comp = None
            return
        header = _COMPUTATION_HEADER.match(stripped)
        if header:
            # A new header before the closing brace: close the current computation.
            self.flush()
            self.depth = 0
            self.module.computations[comp.name] = comp
            self.closed += 1
            self.comp = _new_computation(header, self.module)
            return
        # A continuation line of a multi-line instruction (or an odd line: it is
        # kept in the previous instruction's text and raw attributes).
        if not self.pending:
            self.pending_at = start + len(line) - len(line.lstrip())
        self.pending.append(stripped)
        self.depth += open_brackets(stripped)

    def close(self, depth: int) -> None:
        """End the open computation at a closing brace right after its last record, one
        that `_read_rows` made and that leaves ``depth`` brackets open (none): what `line`
        does with that brace."""
        comp = self.comp
        self.pending, self.depth, self.fast = [], depth, False
        self.module.computations[comp.name] = comp  # type: ignore[union-attr]
        self.closed += 1
        self.comp = None

    def open(self, header: re.Match[str]) -> HloComputation:
        """Start the computation of a header line outside any (`_COMPUTATION_HEADER`'s
        match): what `line` does with it, also called by `_read_rows`, which matches the
        headers that start with ``%`` or ``ENTRY `` in place (no other branch of `_outside`
        takes such a line)."""
        self.comp = comp = _new_computation(header, self.module)
        comp.instructions = ParsedRows(self.text)  # (the parser's rows, while nothing else)
        self.pending, self.depth, self.fast = [], 0, False
        return comp

    def _outside(self, line: str, stripped: str) -> None:
        if not stripped or stripped.startswith("//"):
            self.table = None
        elif stripped.startswith("HloModule"):
            self.seen_header = True
            _parse_module_header(stripped, self.module)
        elif stripped in self.tables:
            self.table = self.tables[stripped]
        elif self.table is not None and stripped.partition(" ")[0].isdigit():
            key, _, value = stripped.partition(" ")
            self.table[int(key)] = value.strip()
        elif header := _COMPUTATION_HEADER.match(stripped):
            self.open(header)
        else:
            self.module.unparsed.append((line.splitlines() or [""])[0])

    def flush(self) -> None:
        """Make the pending instruction's record (a common line's is made already)."""
        self.fast = False
        if self.pending:
            instr = _flush(self.comp, self.pending, self.shared, self.text, self.pending_at)  # type: ignore[arg-type]
            if instr.called_computations:
                self.callers.append(instr)
            self.pending = []

    def finish(self) -> HloModule:
        module, comp, pending = self.module, self.comp, self.pending
        if comp is not None:
            if self.fast:  # the last record is the last line, as read already
                cut = open_brackets(comp.instructions[-1].text) > 0
            else:
                cut = bool(pending) and open_brackets(pending[0]) > 0
                if pending:
                    _flush(comp, pending, self.shared, self.text, self.pending_at)
            last = comp.instructions[-1].text if comp.instructions else ""
            raise HloTextError(
                f"HLO text is cut short: computation {comp.name!r} has no closing '}}'"
                + (f"; its last instruction is cut mid-line: {last[-70:]!r}" if cut else "")
                + (f"; its last line reads {last[-70:]!r}" if last and not cut else "")
                + ". Open the whole file XLA wrote (a dump still being written, or a partial "
                "copy, ends early)."
            )
        if not self.seen_header and not module.computations:
            preview = self.text.strip()[:60]
            raise HloTextError(
                f"This does not look like HLO text (no 'HloModule' line and no computation): "
                f"{preview!r}. Pass the HLO dialect, e.g. lowered.as_text(dialect='hlo') or "
                "compiled.as_text(); StableHLO (MLIR) text is not supported."
            )
        module.stack_frames = stack_frames(self.tables)
        module.frame_places = frame_places(self.tables)
        # Every metadata of the module is in its table of texts (`_metadata_of`,
        # `_parse_attributes`, `_record`), once for the many instructions that share it.
        link_sources(module, metadata_table(self.shared).values())
        assign_kinds(module, self.known_callers())
        return module

    def known_callers(self) -> list[HloInstruction] | None:
        """The records that call computations, in the module's order; None when a
        computation's name came twice (the module keeps the last one's instructions in
        the first one's place: ask the module itself)."""
        return self.callers if self.closed == len(self.module.computations) else None


def _new_computation(header: re.Match[str], module: HloModule) -> HloComputation:
    comp = HloComputation(
        header.group(2), is_entry=bool(header.group(1)), signature=(header.group(3) or "").strip()
    )
    if comp.is_entry:
        if module.entry_name and module.entry_name != comp.name:
            raise HloTextError(
                f"HLO module {module.name or '(unnamed)'!r} has two ENTRY computations, "
                f"{module.entry_name!r} and {comp.name!r}: a module has one. Two modules "
                "pasted together? Start each with its own 'HloModule' line, or keep one "
                "ENTRY."
            )
        module.entry_name = comp.name
    return comp


def _flush(
    comp: HloComputation,
    pending: list[str],
    shared: dict,
    source: str | None = None,
    at: int = 0,
) -> HloInstruction:
    """Append the record of the ``pending`` lines (one instruction) to ``comp``; it."""
    if len(pending) == 1:  # one line: the record points into the module's text
        line = pending[0]
        if source is not None and not source.startswith(line, at):
            source = None  # (never, unless the offsets are wrong: then keep a copy)
        instr = parse_instruction(line, comp.name, shared, source, at)
    else:
        instr = parse_instruction(" ".join(pending), comp.name, shared)
    comp.instructions.append(instr)
    return instr


def _parse_module_header(line: str, module: HloModule) -> None:
    rest = line[len("HloModule") :].strip()
    name, _, attrs = rest.partition(",")
    module.name = name.strip()
    for part in split_top(attrs):
        key, eq, value = part.strip().partition("=")
        if key:
            module.attributes[key.strip()] = value.strip() if eq else ""
