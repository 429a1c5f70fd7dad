"""What one node of the HLO graph is and says: its kind, colour category and texts.

`_graph_data` builds the tree of nodes and `_graph_payload` ships it; both read the
node vocabulary from here: the node kinds and the colour categories in legend order
(defined once, with their colours, in `_graph_schema`), which category an instruction
falls in, and the short texts (a part's label, an instruction's HLO line) the viewer shows.

    >>> from tpukit.hlo import parse_hlo
    >>> module = parse_hlo('''
    ... HloModule m
    ... ENTRY e {
    ...   x = f32[4]{0} parameter(0)
    ...   ROOT y = f32[4]{0} exponential(x), metadata={op_name="jit(f)/exp"}
    ... }
    ... ''')
    >>> category(module.instruction("y"), module)
    'elementwise'
    >>> what_it_does(module.instruction("y"), module)
    'exp'
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import attrgetter

from tpukit.display import format_bytes, format_flops
from tpukit.graph._graph_schema import CATEGORIES as CATEGORIES
from tpukit.graph._graph_schema import CATEGORY_LABELS as CATEGORY_LABELS
from tpukit.graph._graph_schema import COMPUTATION as COMPUTATION
from tpukit.graph._graph_schema import FUSION_COLOURED_BY
from tpukit.graph._graph_schema import INSTRUCTION as INSTRUCTION
from tpukit.graph._graph_schema import PART as PART
from tpukit.graph._graph_schema import SCOPE as SCOPE
from tpukit.hlo.analysis import instruction_bytes, instruction_flops, op_category, split_scope
from tpukit.hlo.text import METADATA_VALUE as _METADATA_VALUE
from tpukit.hlo.text import HloInstruction, HloModule, metadata_text

_OPCODE = attrgetter("opcode")

#: Ops that carry values around without computing: a part's label leaves them out.
PLUMBING = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast"})


def category(instr: HloInstruction, module: HloModule) -> str:
    """The colour category; a fusion takes the most telling category of what it fuses."""
    found = op_category(instr)
    if found != "fusion":
        return found if found in CATEGORIES else "other"
    return _fusion_category(_first_of_each_category(instr, module))


def what_it_does(instr: HloInstruction, module: HloModule) -> str:
    """A fusion's dot/convolution/collective/reduce, else the JAX op that made it, else the opcode."""
    if instr.opcode == "fusion":
        inside = _fused_work(_first_of_each_category(instr, module))
        if inside is not None:
            return inside
    return _jax_op(instr.metadata.op_name, instr.opcode)


class OpFacts:
    """`category`, `what_it_does` and `part_label` of many instructions of one module.

    A graph asks them of hundreds of thousands of instructions with few distinct answers:
    what a fusion holds is read once per fused computation, and the JAX op of an op name
    once per name.
    """

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self._inside: dict[tuple, dict[str, str]] = {}
        self._named: dict[tuple[str, str], str] = {}

    def category(self, instr: HloInstruction) -> str:
        """`category` of ``instr``."""
        if instr.opcode == "fusion":  # (the one opcode `op_category` calls "fusion")
            return _fusion_category(self._first_of_each_category(instr))
        found = op_category(instr)
        return found if found in CATEGORIES else "other"

    def name(self, instr: HloInstruction) -> str:
        """`what_it_does` of ``instr``."""
        opcode = instr.opcode
        if opcode == "fusion":
            inside = _fused_work(self._first_of_each_category(instr))
            if inside is not None:
                return inside
        key = (instr.metadata.op_name, opcode)
        found = self._named.get(key)
        if found is None:
            found = self._named[key] = _jax_op(*key)
        return found

    def part_label(self, instrs: list[HloInstruction], costs: Iterable[tuple[int, int]]) -> str:
        """`part_label` of ``instrs``, whose ``(flops, bytes)`` are ``costs`` (in order)."""
        flops, nbytes = zip(*costs) if instrs else ((), ())
        return self.members_label(range(len(instrs)), instrs, flops, nbytes)

    def members_label(
        self,
        members: Sequence[int],
        instrs: Sequence[HloInstruction],
        flops: Sequence[int],
        nbytes: Sequence[int],
    ) -> str:
        """`part_label` of ``instrs[k]`` for each ``k`` of ``members``, whose FLOPs and bytes
        are ``flops[k]`` and ``nbytes[k]``: a graph's columns, read in one pass."""
        totals, count = self.members_totals(members, instrs, flops, nbytes)
        return totals_label(totals, count, lambda: [instrs[k] for k in members])

    def members_totals(
        self,
        members: Iterable[int],
        instrs: Sequence[HloInstruction],
        flops: Sequence[int],
        nbytes: Sequence[int],
    ) -> tuple[dict[str, list[int]], int]:
        """What `members_label` counts of ``members``: ``[ops, FLOPs, bytes]`` by the name
        their work goes by, in order of first use, and how many members (plumbing too)."""
        named = self._named
        totals: dict[str, list[int]] = {}  # name -> [ops, FLOPs, bytes], in order of first use
        count = 0
        for k in members:
            count += 1
            instr = instrs[k]
            opcode = instr.opcode
            if opcode in PLUMBING:
                continue
            name = named.get((instr.metadata.op_name, opcode)) if opcode != "fusion" else None
            if name is None:
                name = self.name(instr)
            entry = totals.get(name)
            if entry is None:
                totals[name] = [1, flops[k], nbytes[k]]
            else:
                entry[0] += 1
                entry[1] += flops[k]
                entry[2] += nbytes[k]
        return totals, count

    def _first_of_each_category(self, instr: HloInstruction) -> dict[str, str]:
        called = tuple(instr.called_computations)
        found = self._inside.get(called)
        if found is None:
            found = self._inside[called] = _first_of_each_category(instr, self.module)
        return found


def _first_of_each_category(instr: HloInstruction, module: HloModule) -> dict[str, str]:
    """The opcode of the first instruction of each op category in what ``instr`` calls.

    A fused computation holds thousands of instructions of a few opcodes: each opcode's
    category is asked once (a ``custom-call``'s depends on its target: those ask each).
    """
    first: dict[str, str] = {}
    for comp in module.called(instr):
        opcodes = dict.fromkeys(map(_OPCODE, comp.instructions))  # in order of first use
        if "custom-call" in opcodes:
            for inner in comp:
                first.setdefault(op_category(inner), inner.opcode)
        else:
            for opcode in opcodes:
                first.setdefault(_opcode_category(opcode), opcode)
    return first


@functools.lru_cache(maxsize=1024)  # asked for each opcode of each fused computation
def _opcode_category(opcode: str) -> str:
    return op_category(opcode)


def _fusion_category(inside: dict[str, str]) -> str:
    """A fusion's colour: the first of `FUSION_COLOURED_BY` among what it holds."""
    return next((c for c in FUSION_COLOURED_BY if c in inside), "other")


def _fused_work(inside: dict[str, str]) -> str | None:
    """The opcode of the first dot/convolution, else collective, else reduction a fusion runs."""
    return inside.get("matmul") or inside.get("collective") or inside.get("reduction")


def _jax_op(op_name: str, opcode: str) -> str:
    """The JAX op at the end of ``op_name`` (``dot_general``), else ``opcode``.

    `split_scope`'s last component, read off the end: bracket depth adds up over the
    whole text, so where the brackets before the last slash all close, the piece after
    it is the last component, whatever it holds; where one stays open, the last
    component is the head's open one and that piece (a backward op's
    ``jit(f)/transpose(jvp(g)/dot)``), the head split once for the ops that share it.
    (Most op names are an op's own, met once: split whole, each would stay in
    `split_scope`'s cache, megabytes of them.)

        >>> _jax_op("jit(f)/jvp(g)/dot_general", "dot"), _jax_op("", "dot")
        ('dot_general', 'dot')
        >>> _jax_op("jit(f)/transpose(jvp(g)/dense/dot)", "dot")
        'transpose(jvp(g)/dense/dot)'
    """
    head, slash, last = op_name.rpartition("/")
    if not slash:
        return op_name or opcode
    if head.count("(") + head.count("[") > head.count(")") + head.count("]"):
        return f"{split_scope(head)[-1]}/{last}"
    if last:
        return last
    found = split_scope(op_name)[-1:]
    return found[0] if found else opcode


def part_label(
    instrs: Iterable[HloInstruction],
    module: HloModule,
    costs: Mapping[int, tuple[int, int]] | None = None,
) -> str:
    """A part's label: the op that carries its work, then its size.

    Named by what dominates its FLOPs (``dot ×4 (12.3 TFLOP) · 40 ops``), else its
    bytes (``copy ×213 (1.2 GiB) · 540 ops``), so the dots that do the work are named
    even where the HLO carries no op names; a part of parameters and constants says so.
    ``costs`` gives each instruction's ``(flops, bytes)`` by ``id`` when they are known
    already, so they are not computed again (the graph's payload uses `OpFacts`).
    """
    instrs = list(instrs)
    work = []
    for instr in instrs:
        if instr.opcode in PLUMBING:
            continue
        known = costs.get(id(instr)) if costs is not None else None
        if known is None:
            known = instruction_flops(instr, module), instruction_bytes(instr, module)
        work.append((what_it_does(instr, module), known))
    return _label(work, instrs)


def _label(work: list[tuple[str, tuple[int, int]]], instrs: list[HloInstruction]) -> str:
    """`part_label` from ``(name, (flops, bytes))`` of each instruction that is not plumbing."""
    totals: dict[str, list[int]] = {}  # name -> [ops, FLOPs, bytes], in order of first use
    for name, (own_flops, own_bytes) in work:
        entry = totals.get(name)
        if entry is None:
            totals[name] = [1, own_flops, own_bytes]
        else:
            entry[0] += 1
            entry[1] += own_flops
            entry[2] += own_bytes
    if not totals:
        return _plumbing_label(instrs)
    return _named_label(totals, len(instrs))


def _plumbing_label(instrs: list[HloInstruction]) -> str:
    """A part of plumbing alone: of constants, else of parameters."""
    return "constants" if {i.opcode for i in instrs} <= {"constant"} else "parameters"


def totals_label(
    totals: dict[str, list[int]], count: int, plumbing: Callable[[], list[HloInstruction]]
) -> str:
    """`part_label` from `OpFacts.members_totals`' ``totals`` and ``count``; ``plumbing``
    gives the members, asked only when all of them are plumbing."""
    if not totals:
        return _plumbing_label(plumbing())
    return _named_label(totals, count)


def _named_label(totals: dict[str, list[int]], ops: int) -> str:
    """`part_label` of a part of ``ops`` instructions, from ``[ops, FLOPs, bytes]`` of each
    name its work goes by (``totals``, in order of first use)."""
    size = f" · {ops} ops" if ops > 1 else ""
    # The name with the most FLOPs, else bytes, else ops; the first of equals (`max`).
    column = next((c for c in (1, 2) if any(entry[c] for entry in totals.values())), 0)
    name = max(totals, key=lambda n: totals[n][column])
    k, name_flops, name_bytes = totals[name]
    if column == 1:
        figure = format_flops(name_flops)
    elif column == 2:
        figure = format_bytes(name_bytes)
    else:
        figure = ""
    return f"{name}{f' ×{k}' if k > 1 else ''}{f' ({figure})' if figure else ''}{size}"


#: The endings `display_text` keeps at most: a large module's are mostly their own.
_TAILS_KEPT = 4096


def display_text(instr: HloInstruction, tails: dict[str, str] | None = None) -> str:
    """The instruction's HLO line without its metadata, which the panel shows apart.

    ``tails``, a dict kept across the instructions of a module, serves the lines whose
    metadata is not the last of their attributes: it holds each distinct text after the
    operands without its metadata (many lines of a module end as others do), so each
    ending is cut once (the dict is emptied every `_TAILS_KEPT` endings). A line whose
    metadata comes last (`_metadata_ends`: most of them, and in a large module most
    endings are their own, an op name or source line apiece) is cut where it starts,
    without splitting it or keeping its ending.
    """
    text = instr.text
    cut = display_cut(instr, tails, text)
    return cut if isinstance(cut, str) else text[:cut]


def display_cut(instr: HloInstruction, tails: dict[str, str] | None, text: str) -> int | str:
    """`display_text` as where it ends in the instruction's line ``text`` (``text[:end]``),
    where it is a start of it (most lines: no metadata, or metadata last), else the text:
    a large graph's page keeps where each text lies, not the text (`_graph_lines`)."""
    at = text.find(", metadata={")
    if at < 0:  # nothing the replace below could remove
        return len(text)
    rest_at = instr._rest_at
    if tails is None or instr._attributes is not None or at < rest_at:
        return _without_metadata(text, metadata_text(instr, text))
    # Every ", metadata={" lies after the operands, so cutting the ending cuts the line;
    # attributes the parser left unsplit are read from that ending alone (`metadata_text`).
    if _metadata_ends(text, at, rest_at):
        return at
    rest = text[rest_at:]
    tail = tails.get(rest)
    if tail is None:
        if len(tails) >= _TAILS_KEPT:  # (a line's whole ending each: megabytes, few met again)
            tails.clear()
        tail = tails[rest] = _without_metadata(rest, metadata_text(instr, text))
    return text[:rest_at] + tail


def _metadata_ends(text: str, at: int, rest_at: int) -> bool:
    """Whether the ``, metadata={...}`` at ``at`` ends the line and is the only
    ``metadata`` after the operands (from ``rest_at``): then `metadata_text` finds it
    alone and cutting it leaves ``text[:at]``."""
    if text.find("metadata", rest_at) != at + 2 or text.find("metadata", at + 10) >= 0:
        return False
    # Most values are quoted strings and plain fields: with no brace or backslash inside
    # and the quotes paired, `_METADATA_VALUE` matches to the end (checked in a fifth of
    # its time); any other value is matched.
    inside = text[at + 12 : -1]
    if (
        text[-1:] == "}"
        and "{" not in inside and "}" not in inside and "\\" not in inside
        and not inside.count('"') % 2
    ):  # fmt: skip
        return True
    found = _METADATA_VALUE.match(text, at + 11)
    return found is not None and found.end() == len(text)


def rest_cut(rest: str) -> int:
    """Where `display_cut` of a line ends in its ``rest`` (the text after its operands),
    when no ", metadata={" starts before the rest and the cut is a place (-1 otherwise):
    ``len(rest)`` without metadata, where the metadata starts when it ends the line
    (`_metadata_ends`, which reads from the rest on alone).

        >>> rest_cut(', dimensions={0}, metadata={op_name="a"}'), rest_cut(", index=1")
        (16, 9)
    """
    at = rest.find(", metadata={")
    if at < 0:
        return len(rest)
    return at if _metadata_ends(rest, at, 0) else -1


def _without_metadata(text: str, metadata: str) -> str:
    return text.replace(f", metadata={metadata}", "") if metadata else text


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
