"""Turn HLO text into an `HloModule`.

The parser reads the text JAX prints at both stages -- ``lowered.as_text(dialect="hlo")``
and ``compiled.as_text()`` -- one line at a time. It understands the module
header, computations (``ENTRY``, fused, while bodies, branches, reducers), the
stack-frame tables newer XLA prints (``FileNames``, ``FunctionNames``,
``FileLocations``, ``StackFrames``) and every instruction line. Whatever it does
not recognise is kept as a raw string (an attribute, or ``HloModule.unparsed``):
odd text never raises.

    >>> x, w = jnp.ones((8, 16)), jnp.ones((16, 4))
    >>> module = parse_hlo(jax.jit(lambda x, w: jnp.tanh(x @ w)).lower(x, w).compile().as_text())
    >>> str(module.entry.root.shape), module.entry.parameters[0].name
    ('f32[8,4]{1,0}', 'x.1')

Speed and memory (a 400,000-instruction dump is what a large model gives): one regex,
`_ROW`, cuts the text into lines and reads the common instruction line (name, shape --
an array or a tuple of arrays --, opcode, operands as ``[shape ]%name`` pieces -- the
first two names captured -- and the rest) in the same match; ``findall`` over a megabyte
of text at a time gives one tuple per line, and `_read_rows` makes each common line's
record from its tuple with no further regex (more operand names by ``str.split``; the
metadata of each distinct rest of a line found once, XLA's own metadata text read by one
regex, `_XLA_METADATA`, and each distinct text parsed once; a computation's header,
``%name (...) -> ... {``, is matched in place). Every other line -- other headers,
closing braces, continuation lines, other comments, odd spacing -- goes through
`_Reader.line`, the line-by-line reader, which is also what reads text with line breaks
other than "\\n"; both read any text the same way (``tests/test_hlo_parser_rows.py``). A
record keeps its place in the module's text rather than a copy of its line; an
instruction's attributes are split only when someone asks (`HloInstruction.attributes`),
the parser itself reading just the called computations and the metadata, once per
distinct rest of a line (`_ending`: XLA's metadata after plain pieces and a fusion's or
reduce's one call are read without a split); a parameter keeps its number's text (every
view sorts parameters by it); equal metadata of one module, and its fields' keys and
short values, are stored once (names are not: a table of 400,000 names costs more time
than its strings cost memory); the garbage collector pauses while the objects pile up,
and the objects made are then moved to its oldest generation unscanned (`paused_gc`).
Equal text parsed again while its module is alive is not parsed again
(`_parsed.PARSED`).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import re
from collections.abc import Iterator

from tpukit._errors import HloTextError, WrongTypeError
from tpukit.hlo.text._attributes import attribute_pairs
from tpukit.hlo.text._brackets import _GROUP, close_bracket, open_brackets, split_top
from tpukit.hlo.text._model import (
    ComputationRef,
    HloComputation,
    HloInstruction,
    HloMetadata,
    HloModule,
    HloShape,
)
from tpukit.hlo.text._module_links import _META_FIELD, assign_kinds, link_sources, stack_frames
from tpukit.hlo.text._parsed import PARSED

_COMMENT = re.compile(r"/\*.*?\*/")
_INSTRUCTION_START = re.compile(r"\s*(ROOT\s+)?%?([^\s=(){}\[\],]+)\s*=\s*")
_OPCODE = re.compile(r"\s*([A-Za-z][\w\-.$]*)")
# (Its signature ends at the last non-space before the "{": ``(?:.*\S)?``, which finds
# it from the end, matches what a lazy ``.*?`` would, 5x quicker on a long signature.)
_COMPUTATION_HEADER = re.compile(r"(ENTRY\s+)?%?([\w.\-$]+)\s*(\(.*\)\s*->(?:.*\S)?)?\s*\{$")
# An instruction's first line: ``[ROOT] [%]name = <shape> ...`` (spaces around ``=``).
_NEW_INSTRUCTION = re.compile(r"(ROOT\s+)?%?[\w.\-$]+\s+=\s+[a-z(]")
_ARRAY_SHAPE = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\](?:\{([^}]*)\})?")
#: Tuple shapes nest at most this deep (XLA's own programs stay within a few levels).
MAX_TUPLE_DEPTH = 64
# Any key that names a called computation (then the attributes are split at parse time).
_CALL_KEY = re.compile(
    r"(?<![\w-])(?:calls|to_apply|body|condition|true_computation|false_computation"
    r"|branch_computations|select|scatter|called_computations)\s*="
)
# A rest whose first call key is a ``calls=``/``to_apply=`` of one plain name, after plain
# ``key=value`` pieces only (`_one_call` checks that no other call key follows).
_ONE_CALL = re.compile(
    r"(?:, [a-z_]++=(?:\{[0-9,]*+\}|\w++))*, (calls|to_apply)=%?([\w.\-$]++)(?=,|$)"
)
# Plain ``, key=value`` pieces (no call key, no string, no nested brackets) and then
# ``, metadata={``: ``, dimensions={0}, metadata={...}``, ``, index=7, metadata={...}``.
_PLAIN_THEN_METADATA = re.compile(
    r"(?:, (?!(?:calls|to_apply|body|condition|true_computation|false_computation"
    r"|branch_computations|select|scatter|called_computations)=)"
    r"[a-z_]++=(?:\{[0-9,:\[\]]*+\}|\w++))*+, metadata=\{"
)
# The ``{...}`` of ``metadata={...}``: strings may hold any character.
_METADATA_VALUE = re.compile(r'\{(?:[^{}"]++|"(?:[^"\\]++|\\.)*+")*+\}')
# The common instruction line: ``[ROOT] [%]name = f32[8]{0} opcode(<no nesting, no quotes>)``.
_COMMON = re.compile(
    r"\s*(ROOT\s+)?%?([^\s=(){}\[\],]+)\s*=\s*([a-z][a-z0-9]*\[[^\]]*\](?:\{[^}]*\})?)"
    r'\s*([A-Za-z][\w\-.$]*)\(([^()"]*)\)'
)
# Operands that are plain ``[shape] [%]name`` pieces, and the names in them.
_PIECE_SHAPE = r"(?:[a-z][a-z0-9]*\[[^\]]*\](?:\{[^}]*\})?\s+)?"
_OPERANDS = re.compile(rf"(?:\s*{_PIECE_SHAPE}%?[^\s,()\[\]{{}}%\"]+\s*(?:,(?!\s*$)|$))*")
_OPERAND_NAME = re.compile(rf"\s*{_PIECE_SHAPE}%?([^\s,()\[\]{{}}%\"]+)")
# Operands that are names alone, ``%a, %b`` (what `_OPERANDS` and `_OPERAND_NAME` read
# the same way, split at ", ").
_PLAIN_OPERANDS = re.compile(r'%?[^\s,()\[\]{}%"]+(?:, %?[^\s,()\[\]{}%"]+)*')
# `_ROW`'s operands (before its catch-all): ``[shape ]%name`` pieces split by ", ", a
# shape without spaces, so ", " splits the pieces and `_ROW_SHAPE` drops the shapes.
_ROW_SHAPE = re.compile(r"[a-z][a-z0-9]*\[[^\]\s]*\](?:\{[^}\s]*\})? ")
# (Their dimensions and names, and the dimensions of the line's shape, in classes of the
# characters XLA writes there: a bitmap each, quicker for `re` to test than the negated
# classes `_OPERANDS` uses; `_ROW` 5-8% quicker. Other pieces take its catch-all.)
_DIMS = r"[0-9,<=?]"
_NAME = r"[A-Za-z0-9_.\-$]"
_ROW_PIECE = rf"(?:[a-z][a-z0-9]*+\[{_DIMS}*+\](?:\{{[^}}\s]*+\}})?+ )?+%?{_NAME}++"
# The same pieces, the names of the first two captured (most instructions have one or
# two operands: their names come out of the regex), the pieces after them as they are.
_NAMED_PIECE = rf"(?:[a-z][a-z0-9]*+\[{_DIMS}*+\](?:\{{[^}}\s]*+\}})?+ )?+%?({_NAME}++)"
# (Its optional pieces possessive too: a piece's name ends before ", ", ")" or what fails
# anyway, so fewer pieces never match where more do not; `_ROW` 10% quicker.)
# (XLA numbers every fifth operand past the fourth, ``, /*index=5*/%f``: `_INDEX`.)
_INDEX = r"(?:/\*index=[0-9]++\*/)?+"
_LISTED = (
    rf"(?:{_NAMED_PIECE}(?:, {_NAMED_PIECE}(?:, ({_ROW_PIECE}(?:, {_INDEX}{_ROW_PIECE})*+))?+)?+)?+"
)
# A tuple of arrays, as XLA prints one: ``(f32[8]{0}, s32[], /*index=5*/u32[4]{0})``. Its
# layouts hold no bracket but a tile's ``(8,128)``: it ends where `_close_group`, the line
# reader's bracket match, ends it.
_IN_LAYOUT = r'[^(){}\[\]"/\n]'
_ELEMENT = rf"[a-z][a-z0-9]*+\[{_DIMS}*+\](?:\{{(?:{_IN_LAYOUT}++|\({_IN_LAYOUT}*+\))*+\}})?+"
_TUPLE = rf"\((?:{_ELEMENT}(?:, {_INDEX}{_ELEMENT})*+)?+\)"


# One line of the text, a common instruction (the lines `_NEW_INSTRUCTION` and `_COMMON`
# both read, or such a line with XLA's ``/*index=N*/`` numbers, on one line, no trailing
# space) or any other: indent, ``ROOT `` and ``%`` (the lead: "", "%", "ROOT " or
# "ROOT %"), name, shape, opcode, operands (their text; when `_LISTED`, also the first name,
# the second, the pieces after), the rest after them; or (other lines) nothing but the
# indent. The groups and the line's fixed characters add up to the line, so `_read_rows`
# finds where the next line starts with no search. `str.findall` over the whole text
# gives every line as one tuple. (No group holds the whole line: a copy of every line,
# and the groups' strings are half of findall's time.)
# XLA's own spelling only (single spaces, ASCII names, lower-case opcodes: 10% quicker
# than any spacing); lines spelled otherwise are read by `_Reader.line`, as the same.
# Its runs are possessive where what follows a run cannot start with a character of the
# run, and so are its optional layouts and operand shapes (what follows one cannot match
# where it starts): the same matches, found with no backtracking (runs 10-15% quicker,
# optional parts another 15% on operands with shapes, as XLA prints them; `_PLAIN_ROW` in
# ``tests/test_hlo_parser_speed.py`` is the plain spelling); the rest runs to the line's
# end and is kept when its last character is not a space (the plain ``(?:[^\n]*\S)?``).
def _row(shape: str) -> re.Pattern[str]:
    """`_ROW` for lines whose shape is ``shape`` (a regex)."""
    return re.compile(
        rf"([ \t]*+)(?:((?:ROOT )?%?)({_NAME}++) = ({shape}) ([a-z][a-z0-9\-]*+)"
        rf"\(({_LISTED}|[^()\"\n]*+)\)((?:[^\n]*+(?<=\S))?+)|[^\n]*)\n"
    )


_ROW = _row(rf"[a-z][a-z0-9]*+\[{_DIMS}*+\](?:\{{[^}}\n]*+\}})?+")
# The same with a `_TUPLE` shape, tried on the lines `_ROW` does not read that hold " = (":
# as an alternative in `_ROW` it would cost every line 5% more (`re` then grows its stack
# again for each line, which it frees after each match).
_TUPLE_ROW = _row(_TUPLE)
#: The empty list of operands and of called computations that records share.
_NONE: list = []
# `_ROW` reads this many characters at a time (then up to a line's end).
_CHUNK = 1 << 20
# `_read_rows` forgets the metadata of the rests of lines it saw past this many.
_ALONE_KEPT = 1 << 14
_MODULE_LINE = re.compile(r"^[ \t]*HloModule[ \t]+([^\s,]+)", re.MULTILINE)
_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")

#: Attributes that name called computations, and the role they get in `ComputationRef`.
CALL_ROLES = {
    "calls": "calls",
    "to_apply": "to_apply",
    "body": "body",
    "condition": "condition",
    "true_computation": "branch",
    "false_computation": "branch",
    "branch_computations": "branch",
    "select": "select",
    "scatter": "scatter",
    "called_computations": "called_computations",
}


def parse_hlo(text: str) -> HloModule:
    """Parse HLO text into an `HloModule`.

    Args:
      text: what ``jax.jit(f).lower(*args).as_text(dialect="hlo")`` or
        ``jax.jit(f).lower(*args).compile().as_text()`` returns (or any HLO dump).

    Returns:
      The module, with its computations in file order. Equal text parsed again while
      the first module is alive gives that module (`tpukit.hlo.text._parsed`): treat it as
      read-only.

    Raises:
      ValueError: when the text has neither an ``HloModule`` header nor a
        computation, i.e. it is not HLO (StableHLO/MLIR text, for example).

    Example:
        >>> module = parse_hlo(jax.jit(jnp.sin).lower(1.0).as_text(dialect="hlo"))
        >>> [i.opcode for i in module.entry]
        ['parameter', 'sine']
    """
    if not isinstance(text, str):
        raise WrongTypeError(
            f"parse_hlo expects the HLO text as a str, got {type(text).__name__}; "
            "pass e.g. jax.jit(f).lower(x).as_text(dialect='hlo')."
        )
    module = PARSED.get(text)
    if module is not None:  # parsed already, and someone still holds it (see _parsed)
        return module
    # One ``HloModule`` word at most: no need to look for more module lines (4.6 MB: 20 ms).
    names = module_names(text) if text.count("HloModule") > 1 else []
    if len(names) > 1:
        raise HloTextError(
            f"This text holds {len(names)} HLO modules ({', '.join(names[:6])}"
            f"{', ...' if len(names) > 6 else ''}); parse_hlo reads one. Pick one with "
            f"tpukit.hlo.open(text, module={names[0]!r}), or split the text at its "
            "'HloModule' lines."
        )
    with paused_gc(keep=True):
        module, callers = _parse(text)
    check_complete(module, callers)
    PARSED.put(text, module)
    return module


def module_names(text: str) -> list[str]:
    """The names on the ``HloModule`` lines of ``text``, in order (a dump may hold several).

    >>> module_names("HloModule a\\nENTRY e {...}\\nHloModule b, is_scheduled=true\\n...")
    ['a', 'b']
    """
    return [_MODULE_LINE.match(text, at).group(1) for at in _module_starts(text)]  # type: ignore[union-attr]


def split_modules(text: str) -> list[tuple[str, str]]:
    """``(name, text)`` of each module in text holding several ``HloModule``s, in order."""
    starts = _module_starts(text)
    if len(starts) <= 1:
        return [(module_names(text)[0] if starts else "", text)]
    bounds = zip(starts, [*starts[1:], len(text)])
    return [(_MODULE_LINE.match(text, a).group(1), text[a:b]) for a, b in bounds]  # type: ignore[union-attr]


def _module_starts(text: str) -> list[int]:
    """Where the lines `_MODULE_LINE` matches start: the lines where the word
    ``HloModule`` comes after nothing but spaces. (Found by ``str.find``: the regex tries
    every character of the text, 1 s on 50 MB, as its lines may start anywhere.)"""
    starts = []
    at = text.find("HloModule")
    while at >= 0:
        line = text.rfind("\n", 0, at) + 1
        if not text[line:at].strip(" \t") and _MODULE_LINE.match(text, line):
            starts.append(line)
        at = text.find("HloModule", at + 9)
    return starts


def check_complete(module: HloModule, callers: list[HloInstruction] | None = None) -> None:
    """Refuse a module that is cut short or misses a computation it calls.

    A dump cut while it was written (a full disk, a killed job, a partial copy) still
    parses line by line; its figures would be those of a smaller program. Raises
    `HloTextError` naming what is missing: the ENTRY computation, or a computation
    that an instruction calls. ``callers``, when given, are the module's instructions
    that call computations, in its order (the parser's list: no walk over every record).
    """
    if module.computations and module.entry_name not in module.computations:
        raise HloTextError(
            f"HLO module {module.name or '(unnamed)'!r} has no ENTRY computation (its "
            f"{len(module.computations)} computation(s) end with "
            f"{list(module.computations)[-1]!r}): the text looks cut short. Open the "
            "whole file XLA wrote (XLA marks its last computation ENTRY), or mark the "
            "program's computation 'ENTRY' in hand-written HLO."
        )
    if callers is None:
        callers = [i for c in module.computations.values() for i in c.instructions]
    for instr in callers:
        for ref in instr.called_computations:
            if ref.name not in module.computations:
                raise HloTextError(
                    f"Instruction {instr.name!r} in {instr.computation!r} calls computation "
                    f"{ref.name!r}, which module {module.name or '(unnamed)'!r} does not "
                    "hold: the text is incomplete (cut short or edited). Open the whole "
                    "module XLA wrote."
                )


@contextlib.contextmanager
def paused_gc(keep: bool = False) -> Iterator[None]:
    """Pause the cyclic garbage collector: parsing makes hundreds of thousands of objects
    and no cycles, and collections triggered by them would scan the whole heap again
    and again (a third of the parse time on a 20k-instruction module).

    With ``keep`` (what was made is kept: a parsed module), the young objects are moved
    to the oldest generation when the block ends (``gc.freeze``, then ``gc.unfreeze``:
    no scan). Otherwise the first allocation after it would scan them all as young
    objects (0.2 s for 400,000 instructions) and again as middle-aged ones, only to
    find them alive. They are scanned at the next full collection, as old objects are;
    so are any other young objects of the process at that moment (cyclic garbage among
    them is freed then rather than at the next young collection)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if keep:
            gc.freeze()
            gc.unfreeze()
        if enabled:
            gc.enable()


def _parse(text: str) -> tuple[HloModule, list[HloInstruction] | None]:
    """The module of ``text``, and its instructions that call computations (None when
    only the module can tell: see `_Reader.known_callers`)."""
    reader = _Reader(text)
    if _rows_apply(text):
        _read_rows(reader, text)
    else:  # line breaks other than "\n": read line by line, as `str.splitlines` splits
        end = 0
        for line in text.splitlines(True):
            start, end = end, end + len(line)
            reader.line(line, start)
    return reader.finish(), reader.known_callers()


def _rows_apply(text: str) -> bool:
    """Whether `_ROW` cuts ``text`` into the lines `str.splitlines` gives: "\\n" is its
    only line break (a plain ``in`` per character: a regex class search is 20x slower)."""
    breaks = "\r\x0b\x0c\x1c\x1d\x1e" + ("" if text.isascii() else "\x85\u2028\u2029")
    return not any(char in text for char in breaks)


def _read_rows(reader: _Reader, text: str) -> None:
    """Read ``text`` one `_ROW` (line) at a time: a common instruction line inside a
    computation becomes its record at once; every other line goes through `_Reader.line`,
    which knows that the last record may still be continued (``reader.fast``).

    Names are not interned here: a table of every name costs more than the strings it
    saves (a lookup in a dict of 400,000 names misses the CPU's caches; 1.2 us a name)."""
    last = text.rfind("\n") + 1
    find = text.find
    # Where the next comment starts (past the end: none): a line holding one is read by
    # `_Reader.line`. (One search per comment, not one per line: a `str.find` with a
    # start costs as much as a record's fields.)
    comment = find("/*") if "*" in text else -1  # (one character: a memchr, 10x quicker)
    comment = len(text) if comment < 0 else comment
    metas = metadata_table(reader.shared)
    callers = reader.callers
    strings: dict[str, str] = {}  # metadata fields' values (`_parse_metadata`)
    shapes: dict[str, HloShape] = {}
    opcodes: dict[str, str] = {}  # (a few dozen: a small table stays in the CPU's cache)
    drop_shapes = _ROW_SHAPE.sub
    new = _new_object
    # One empty metadata per module, as for equal texts (``metadata={}`` reads the same).
    empty = metas.setdefault("{}", HloMetadata())
    # A line's rest -> its metadata, or (metadata, called computations) when the rest
    # calls some (`_ending`); most lines of a module end as others do.
    endings: dict[str, HloMetadata | tuple] = {"": empty}
    # No operands, no called computations: one empty list for all records (a module is
    # read-only once parsed; 56 bytes a record, a quarter of the text's size).
    none: list = _NONE
    comp_name = ""
    pos = 0
    comp: HloComputation | None = None
    append = None
    pending = False  # the reader holds lines of an instruction that is not common
    fast = False  # the last line was a common instruction (its record already made)
    at = size = 0  # where the last instruction line starts in ``text``, and its length
    for rows in _chunks(text, last):
        if len(endings) > _ALONE_KEPT:  # (bounded: most repeats are near each other)
            endings.clear()
            endings[""] = empty
        for indent, lead, name, shape, opcode, listed, first, second, more, rest in rows:
            start = pos
            if not name:
                pos = find("\n", start) + 1
                if append is not None and find(" = (", start, pos) >= 0:  # a tuple's shape?
                    row = _TUPLE_ROW.match(text, start, pos).groups("")  # type: ignore[union-attr]
                    indent, lead, name, shape, opcode, listed, first, second, more, rest = row
                    at = start + len(indent)  # (as below, from the line's end)
                    size = pos - 1 - at
                    after = size - len(rest)
                    op_at = after - len(listed) - 1
            else:  # the line is its groups and `_ROW`'s 6 characters, then "\n"
                at = start + len(indent)
                op_at = len(lead) + len(name) + len(shape) + len(opcode) + 5  # in the line
                after = op_at + len(listed) + 1  # the rest's place in the line
                size = after + len(rest)  # (`_ROW`'s lines have no trailing space)
                pos = at + (size + 1)  # (a sum of small numbers first: no new int object)
            if name and append is not None and (comment >= pos or _indexed(text, at, after, size)):
                if comment < pos:  # its comments are XLA's ``/*index=N*/``: the next one
                    comment = find("/*", pos)
                    comment = len(text) if comment < 0 else comment
                    more = _INDEXES.sub("", more)  # (as `_operand_names` drops them)
                if pending:  # the reader holds an odd instruction's lines: this one ends it
                    reader.flush()
                    pending = False
                found = shapes.get(shape)
                if found is None:
                    found = shapes[shape] = parse_shape(shape)
                opcode = opcodes.setdefault(opcode, opcode)
                if opcode == "parameter":  # its number kept as text: asked for by every view
                    operands = none
                    operand_text = listed
                elif opcode == "constant":
                    operands = none
                    operand_text = listed if ")" in listed else op_at
                elif not second:  # not `_LISTED` when the first name is missing
                    operands = [first] if first else _operand_names(listed) if listed else none
                    operand_text = listed if ")" in listed else op_at
                else:
                    if not more:
                        operands = [first, second]
                    else:  # ``[shape ]%name`` pieces (see _LISTED): the name ends each
                        if "[" not in more:
                            names = more.replace("%", "").split(", ")
                        elif more.count(" ") == 2 * more.count(", ") + 1:  # a shape in each
                            names = more.replace("%", "").replace(", ", " ").split(" ")[1::2]
                        else:
                            names = drop_shapes("", more).replace("%", "").split(", ")
                        operands = [first, second, *names]
                    # (Read up to its first ")" when asked: kept whole when a shape's
                    # tiled layout, ``{1,0:T(8,128)}``, holds one.)
                    operand_text = listed if ")" in listed else op_at
                metadata = endings.get(rest)
                if metadata is None:
                    metadata = endings[rest] = _ending(rest, metas, strings, empty)
                # Its fields as stored (no __init__, no checks: a call costs a tenth of the record).
                record = new(HloInstruction)
                record.name = name
                record.opcode = opcode
                record.shape = found
                record.operands = operands
                record._attributes = None  # split from the rest when asked for
                if metadata.__class__ is tuple:  # called computations: read from the rest once
                    metadata, called = metadata
                    if called:
                        record.called_computations = called.copy()
                        callers.append(record)
                    else:
                        record.called_computations = none
                else:
                    record.called_computations = none
                record.metadata = metadata
                record.is_root = len(lead) > 1  # "ROOT " or "ROOT %"
                record._text = text
                record._at = at
                record._end = -1  # its "\n", found when asked
                record._operand_text = operand_text
                record.computation = comp_name
                record._rest_at = after
                append(record)
                fast = True
                continue
            if comment < pos:  # this line holds it: find the next one
                comment = find("/*", pos)
                comment = len(text) if comment < 0 else comment
            if append is None and pos == start + 1:  # a blank line between computations
                reader.table = None  # (what `_Reader.line` does with it)
                continue
            if append is None and text.startswith(("%", "ENTRY "), start):
                header = _COMPUTATION_HEADER.match(text, start, pos - 1)  # (its line, no "\n")
                if header is not None:  # a computation starts (no strip, no copy of the line)
                    comp = reader.open(header)
                    comp_name, append = comp.name, comp.instructions.append
                    fast = pending = False
                    continue
            if fast and text.startswith("}\n", start):  # a closing brace after a record
                depth = open_brackets(text[at : at + size])  # (most computations end so)
                if depth <= 0:
                    reader.close(depth)
                    fast = False
                    comp, comp_name, append = None, "", None
                    continue
            reader.fast = fast
            reader.line(text[start:pos], start)
            fast = reader.fast
            comp = reader.comp
            comp_name = "" if comp is None else comp.name
            append = None if comp is None else comp.instructions.append
            pending = bool(reader.pending)
    reader.fast = fast
    if last < len(text):
        reader.line(text[last:], last)


def _ending(
    rest: str, metas: dict[str, HloMetadata], strings: dict[str, str], empty: HloMetadata
) -> HloMetadata | tuple[HloMetadata, list[ComputationRef]]:
    """What a common line's ``rest`` (its text after the operands) gives its record: the
    metadata, or (metadata, called computations) when the rest calls some or only
    splitting all of it can tell (the record's attributes are split when asked for,
    from the same text: the same dict)."""
    if rest.startswith(", metadata={"):  # XLA's metadata last, after plain pieces or none:
        at = 11  # nothing in the rest can name a computation (and a split would read
    else:  # the same fields: see `_XLA_METADATA`)
        plain = _PLAIN_THEN_METADATA.match(rest)
        at = 0 if plain is None else plain.end() - 1
    if at:
        found = _common_metadata(rest, at) or _XLA_METADATA.fullmatch(rest, at)
        if found is not None:
            value = rest[at:]
            metadata = metas.get(value)
            if metadata is None:
                metadata = metas[value] = _xla_metadata(found, strings)
            return metadata
    one = _one_call(rest, metas, strings, empty)  # (before `_metadata_of`, which refuses it)
    if one is not None:
        return one
    metadata = _metadata_of(rest, metas, strings, empty)
    if metadata is not None:
        return metadata
    called: list[ComputationRef] = []
    metadata = _parse_attributes(rest.strip(), {}, called, metas, strings)
    return (empty if metadata is None else metadata), called


def _one_call(
    rest: str, metas: dict[str, HloMetadata], strings: dict[str, str], empty: HloMetadata
) -> tuple[HloMetadata, list[ComputationRef]] | None:
    """(metadata, called computation) of a rest whose one call is a ``calls=`` or a
    ``to_apply=`` after plain pieces -- a fusion's ``, kind=kLoop, calls=%f, ...``, a
    reduce's ``, dimensions={0}, to_apply=%add, ...`` -- read as a split reads them,
    without the split (a fifth of a step's parse); None for any other rest."""
    found = _ONE_CALL.match(rest)
    if found is None or _CALL_KEY.search(rest, 0, found.start(1)) is not None:
        return None
    end = found.end()
    xla = _xla_after_call(rest, end)
    if xla is not None:  # XLA's metadata right after the call (most fusions, reduces)
        value, tail = xla.group(), rest[xla.end() :]
    else:
        value = _metadata_alone(rest)
        if value is None:
            return None
        tail = rest[end:]
        if value:
            at = rest.find("metadata") + 9  # (`_metadata_alone` found it once, its value)
            if at >= end:
                tail = rest[end:at] + rest[at + len(value) :]
    # What follows the match, less the metadata's value (a split reads it as one piece,
    # and op names hold words such as ``while/body``): any other call key?
    if (  # (the words first: the regex tries every place of a long rest)
        "calls" in tail or "to_apply" in tail or "body" in tail or "condition" in tail
        or "_computation" in tail or "select" in tail or "scatter" in tail
    ) and _CALL_KEY.search(tail) is not None:  # fmt: skip
        return None
    metadata = metas.get(value) if value else empty
    if metadata is None:
        if xla is None:
            xla = _common_metadata(value, 0) or _XLA_METADATA.fullmatch(value)
        metadata = metas[value] = (
            _parse_metadata(value, strings) if xla is None else _xla_metadata(xla, strings)
        )
    key, name = found.groups()
    return metadata, [ComputationRef(name, CALL_ROLES[key])]


def _xla_after_call(rest: str, end: int) -> re.Match[str] | None:
    """`_XLA_COMMON`'s match of the ``metadata={...}`` right after a call that ends at
    ``end`` in ``rest``, when it is the rest's one metadata and ends a piece (what
    `_metadata_alone` would find, found without its searches); else None."""
    if not rest.startswith(", metadata={", end) or rest.find("metadata") != end + 2:
        return None
    found = _common_metadata(rest, end + 11, whole=False)
    if found is None:
        return None
    after = rest[found.end() :]
    if "metadata" in after or after.strip()[:1] not in ("", ","):
        return None
    return found


def _metadata_of(
    rest: str, metas: dict[str, HloMetadata], strings: dict[str, str], empty: HloMetadata
) -> HloMetadata | None:
    """The metadata of a common line whose text after the operands is ``rest``, parsed
    once per distinct ``{...}`` text (``metas``; its field values stored once in
    ``strings``); None when ``rest`` names a called computation, or when only splitting
    all of it can tell."""
    if (  # a plain search per word is quicker than one regex of all of them
        "calls" in rest or "to_apply" in rest or "body" in rest or "condition" in rest
        or "_computation" in rest or "select" in rest or "scatter" in rest
    ) and _CALL_KEY.search(rest):  # fmt: skip
        return None
    at = rest.find(", metadata={") + 11
    if at > 10 and rest.count("metadata") == 1:  # most lines end with XLA's own metadata
        found = _common_metadata(rest, at) or _XLA_METADATA.fullmatch(rest, at)
        if found is not None:
            value = rest[at:]
            metadata = metas.get(value)
            if metadata is None:
                metadata = metas[value] = _xla_metadata(found, strings)
            return metadata
    value = _metadata_alone(rest)
    if not value:
        return None if value is None else empty
    metadata = metas.get(value)
    if metadata is None:
        metadata = metas[value] = _parse_metadata(value, strings)
    return metadata


_new_object = object.__new__
_INDEXES = re.compile(r"/\*index=[0-9]+\*/")


def _indexed(text: str, at: int, after: int, size: int) -> bool:
    """Whether the comments of a row, ``text[at:at + size]``, are all XLA's numbers of
    operands and tuple elements, ``/*index=N*/``, and all before its rest (which starts
    at ``after``): where `_ROW` reads them, and no other comment shifts what the line
    reader, which drops them, reads."""
    return text.count("/*", at, at + size) == len(_INDEXES.findall(text, at, at + after))


def _chunks(text: str, end: int) -> Iterator[list[tuple[str, ...]]]:
    """`_ROW`'s tuples for ``text[:end]`` (whole lines), a chunk of about `_CHUNK`
    characters at a time: the tuples of a whole 60 MB text at once would take twice its
    size in memory, and Python's allocator would keep that memory after the parse."""
    pos = 0
    findall = _ROW.findall
    while pos < end:
        stop = min(text.find("\n", pos + _CHUNK) + 1 or end, end)
        yield findall(text, pos, stop)
        pos = stop


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


#: The key of `metadata_table` in a parse's table of shared objects (not a str: no name).
_METADATA_TABLE = ("metadata texts",)


def metadata_table(shared: dict) -> dict[str, HloMetadata]:
    """The metadata of a parse by its ``{...}`` text, kept in its table of shared names
    (``parse_instruction``'s ``shared``) under a key that no name can be."""
    table = shared.get(_METADATA_TABLE)
    if table is None:
        table = shared[_METADATA_TABLE] = {}
    return table


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


@functools.lru_cache(maxsize=4096)
def parse_shape(text: str) -> HloShape:
    """Parse one HLO shape: ``f32[8,128]{1,0}``, ``(s32[], bf16[<=4])``, ``token[]``.

    Text that is not a shape gives ``HloShape("unknown")`` rather than an error.

        >>> parse_shape("(f32[2,3]{1,0}, pred[])").elements[0].dims
        (2, 3)
    """
    text = _COMMENT.sub("", text) if "/*" in text else text
    shape, _ = _shape_at(text.strip(), 0)
    return shape


def _shape_at(text: str, pos: int, depth: int = 0) -> tuple[HloShape, int]:
    while pos < len(text) and text[pos] in " ,":
        pos += 1
    if pos < len(text) and text[pos] == "(":
        if depth >= MAX_TUPLE_DEPTH:
            raise HloTextError(
                f"A tuple shape nests more than {MAX_TUPLE_DEPTH} levels deep "
                f"({text[:40]!r}...); no XLA program does that. Check that this is the HLO "
                "text XLA wrote (compiled.as_text() or a --xla_dump_to file)."
            )
        pos += 1
        elements = []
        while pos < len(text):
            while pos < len(text) and text[pos] in " ,":
                pos += 1
            if pos >= len(text) or text[pos] == ")":
                pos += 1
                break
            # An array element as `parse_shape` reads it alone: once per text (the tuples
            # of a step repeat their elements; its ROOT tuple holds hundreds).
            array = _ARRAY_SHAPE.match(text, pos)
            if array is not None:
                elements.append(parse_shape(array.group()))
                pos = array.end()
                continue
            element, new_pos = _shape_at(text, pos, depth + 1)
            if new_pos == pos:
                break
            elements.append(element)
            pos = new_pos
        return HloShape("tuple", elements=tuple(elements)), pos
    match = _ARRAY_SHAPE.match(text, pos)
    if not match:
        return HloShape("unknown"), pos
    dtype, dims_text, layout = match.groups()
    dims: list[int] = []
    dynamic: list[bool] = []
    for dim in dims_text.split(",") if dims_text else ():
        dim = dim.strip()
        bounded = dim.startswith("<=")
        dim = dim[2:] if bounded else dim
        dims.append(int(dim) if dim.isdigit() else -1)
        dynamic.append(bounded or dim == "?")
    return (
        HloShape(dtype, tuple(dims), layout=layout, dynamic=tuple(dynamic) if any(dynamic) else ()),
        match.end(),
    )


def parse_instruction(
    line: str,
    computation: str = "",
    shared: dict | None = None,
    source: str | None = None,
    at: int = 0,
) -> HloInstruction:
    """Parse one instruction line; unknown syntax degrades to raw attribute strings.

    ``shared`` maps what the instructions of one module repeat -- names (an operand is
    another instruction's name) and ``metadata={...}`` texts -- to one object each, so
    equal names are one string and equal metadata one `HloMetadata` (the metadata by
    text in `metadata_table`). (A table of the parse, unlike ``sys.intern``'s, is freed
    with it.) When ``line`` is
    ``source[at:at + len(line)]``, pass ``source`` and ``at``: the record then keeps that
    place in ``source`` instead of its own copy of the line.

    >>> parse_instruction("ROOT %t = f32[2]{0} tanh(f32[2]{0} %x), metadata={op_name=\\"a/b\\"}")
    HloInstruction(name='t', opcode='tanh', shape=f32[2]{0}, operands=['x'])
    """
    common = None if "/*" in line else _COMMON.match(line)
    if common is not None:  # most lines: one match finds name, shape, opcode and operands
        is_root, name, shape_text, opcode, operand_text = common.groups()
        if shared is not None:
            name = shared.setdefault(name, name)
            opcode = shared.setdefault(opcode, opcode)
        pos = common.end()
        operands = (
            [] if opcode in ("constant", "parameter") else _operand_names(operand_text, shared)
        )
        # The operand text is kept as its place in the line (see HloInstruction); a
        # parameter's as its text, its number, which every view asks for.
        return _record(
            is_root is not None, name, parse_shape(shape_text), opcode, operands,
            operand_text if opcode == "parameter" else pos - 1 - len(operand_text),
            line[pos:], pos, line, source, at, computation, shared,
        )  # fmt: skip
    head = _general_head(line, computation, shared)
    if isinstance(head, HloInstruction):
        return head
    is_root, name, shape, opcode, operand_text, operands, pos = head
    return _record(
        is_root, name, shape, opcode, operands, operand_text, line[pos:], pos, line, source,
        at, computation, shared,
    )  # fmt: skip


def _record(
    is_root: bool,
    name: str,
    shape: HloShape,
    opcode: str,
    operands: list[str],
    operand_text: str | int,
    rest: str,
    pos: int,
    line: str,
    source: str | None,
    at: int,
    computation: str,
    shared: dict | None,
) -> HloInstruction:
    called: list[ComputationRef] = []
    metadata = None
    attributes: dict[str, str] | None = {}
    metas = None if shared is None else metadata_table(shared)
    if rest and not rest.isspace():
        calls = (  # a plain search per word is quicker than one regex of all of them
            "calls" in rest or "to_apply" in rest or "body" in rest or "condition" in rest
            or "_computation" in rest or "select" in rest or "scatter" in rest
        ) and _CALL_KEY.search(rest)  # fmt: skip
        quick = None if calls else _metadata_alone(rest)
        if quick is not None:  # no called computation: the rest is split when asked for
            attributes, value = None, quick
            if value:
                metadata = metas.get(value) if metas is not None else None
                if metadata is None:
                    metadata = _parse_metadata(value)
                    if metas is not None:
                        metas[value] = metadata
        else:
            metadata = _parse_attributes(rest.strip(), attributes, called, metas)
    if metadata is None and metas is not None:  # one empty metadata per module, as for
        metadata = metas.get("{}")  # equal texts (``metadata={}`` reads the same)
        if metadata is None:
            metadata = metas["{}"] = HloMetadata()
    return HloInstruction(  # by position: a keyword call costs more, 400,000 times
        name, opcode, shape, operands, attributes, called, metadata, is_root, line,
        operand_text, computation, rest_at=pos if attributes is None else -1,
        source=source, at=at,
    )  # fmt: skip


def _general_head(line: str, computation: str, shared: dict | None) -> HloInstruction | tuple:
    """Name, shape, opcode and operands of any line (tuple shapes, nested or quoted
    operands, comments); an ``unknown`` instruction when the line is not one."""
    start = _INSTRUCTION_START.match(line)
    if not start:
        return HloInstruction(
            name=line.split()[0].lstrip("%") if line.split() else "?",
            opcode="unknown",
            shape=HloShape("unknown"),
            attributes={"": line},
            text=line,
            computation=computation,
        )
    pos = start.end()
    if line.startswith("(", pos):
        shape_end = _close_group(line, pos)
    elif array := _ARRAY_SHAPE.match(line, pos):  # ``f32[8, 16]{1,0}``: spaces are valid
        shape_end = array.end()
    else:
        shape_end = line.find(" ", pos)
        shape_end = len(line) if shape_end < 0 else shape_end
    shape = parse_shape(line[pos:shape_end])
    name = start.group(2)
    found = _OPCODE.match(line, shape_end)
    if not found:
        return HloInstruction(
            name=name,
            opcode="unknown",
            shape=shape,
            attributes={"": line[shape_end:].strip()},
            is_root=bool(start.group(1)),
            text=line,
            computation=computation,
        )
    opcode = found.group(1)
    pos = found.end()
    operand_text = ""
    operands = []
    if line.startswith("(", pos):
        close = line.find(")", pos) + 1
        inner = line[pos + 1 : close - 1]
        if close == 0 or "(" in inner or '"' in inner:  # nested or quoted: match properly
            close = _close_group(line, pos)
            inner = line[pos + 1 : close - 1]
        operand_text = inner
        if opcode not in ("constant", "parameter"):
            operands = _operand_names(inner, shared)
        pos = close
    return bool(start.group(1)), name, shape, opcode, operand_text, operands, pos


# A bracket group nested up to `_brackets._NESTING` deep (strings and comments skipped):
# where it matches, it ends where `close_bracket` finds the closing bracket.
_BRACKET_GROUP = re.compile(_GROUP)


def _close_group(line: str, start: int) -> int:
    """`close_bracket` of ``line`` at ``start``: one regex match over a tuple shape or
    operands (a step's ROOT tuple is 20,000 characters: 6.6 ms token by token, 0.1 ms so),
    token by token when nested deeper or unbalanced."""
    found = _BRACKET_GROUP.match(line, start)
    return close_bracket(line, start) if found is None else found.end()


def metadata_text(instr: HloInstruction, text: str | None = None) -> str:
    """The raw ``{...}`` of ``instr``'s ``metadata=`` (``""`` when none), read without
    splitting its other attributes when the parser left them for later. ``text`` is
    ``instr.text`` when the caller has it already."""
    if instr._attributes is None:  # the parser found it alone: it finds it again
        found = _metadata_alone((instr.text if text is None else text)[instr._rest_at :])
        if found is not None:  # (None: only the split can tell, e.g. "metadata" in a name)
            return found
    return instr.attributes.get("metadata", "")


@functools.lru_cache(maxsize=8192)  # most lines of a module end as others do (4 in 5)
def _metadata_alone(rest: str) -> str | None:
    """The ``metadata={...}`` value of ``rest`` (``""`` when it has none), found without
    splitting the other attributes; None when only a full split can tell."""
    at = rest.find("metadata")
    if at < 0:
        return ""
    if rest.find("metadata", at + 8) >= 0 or rest[:at].rstrip()[-1:] != ",":
        return None
    found = _METADATA_VALUE.match(rest, at + 9) if rest.startswith("=", at + 8) else None
    if found is None:
        return None
    end = found.end()
    if end != len(rest) and rest[end:].strip()[:1] not in ("", ","):
        return None
    return found.group()


def _operand_names(inner: str, shared: dict | None = None) -> list[str]:
    if "/*" in inner:
        inner = _COMMENT.sub("", inner)
    elif "[" not in inner and _PLAIN_OPERANDS.fullmatch(inner):  # ``%a, %b``: split at ", "
        names = [n[1:] if n[0] == "%" else n for n in inner.split(", ")]
        return names if shared is None else [shared.setdefault(n, n) for n in names]
    if _OPERANDS.fullmatch(inner):  # ``f32[8]{0} %a, %b``: each name ends a piece
        names = _OPERAND_NAME.findall(inner)
    else:
        names = [part.rsplit(None, 1)[-1].lstrip("%") for part in split_top(inner) if part.strip()]
    return names if shared is None else [shared.setdefault(n, n) for n in names]


# The fields XLA's printer writes in ``metadata={...}``, in its order (OpMetadataToString).
_XLA_FIELDS = (
    "op_type", "op_name", "source_file", "source_line", "source_end_line", "source_column",
    "source_end_column", "deduplicated_name", "preserve_layout", "scheduling_name",
    "stack_frame_id",
)  # fmt: skip
_QUOTED_FIELDS = ("op_type", "op_name", "source_file", "deduplicated_name", "scheduling_name")
# A ``{...}`` of those fields, in that order, space-separated: quoted values with no quote
# or backslash inside, plain values with no space, quote or brace (possessive, as there).
# In such text `_META_FIELD` finds exactly these fields (so `_parse_metadata` reads them
# the same), and `_METADATA_VALUE` ends at its last brace (`_metadata_alone` finds it).
_XLA_METADATA = re.compile(
    r"\{"
    + " ?".join(
        f'(?:{key}="([^"\\\\]*)")?' if key in _QUOTED_FIELDS else f'(?:{key}=([^\\s{{}}"]++))?'
        for key in _XLA_FIELDS
    )
    + r"\}"
)
# What most of XLA's metadata texts hold: an op name, then a source file and line (JAX's
# lowered text, older XLA) or a stack frame (newer XLA); `_XLA_METADATA` reads each such
# text the same, with eleven optional fields tried (twice as long). The op name may hold
# escapes (``mu[\'bn1\']``, a pytree key's quotes), as a string that `_META_FIELD` reads.
_XLA_AFTER_NAME = (
    r'"(?: source_file="([^"\\]*+)" source_line=([0-9]++))?(?: stack_frame_id=([0-9]++))?\}'
)
_XLA_COMMON = re.compile(r'\{op_name="((?:[^"\\]++|\\.)*+)' + _XLA_AFTER_NAME)
# The same with its op name a run of non-quotes: `re` runs through one excluded character
# 3x quicker than through two, ``[^"\\]``; `_common_metadata` tells when they differ.
_XLA_QUICK = re.compile(r'\{op_name="([^"]*+)' + _XLA_AFTER_NAME)


def _common_metadata(text: str, at: int, whole: bool = True) -> re.Match[str] | None:
    """`_XLA_COMMON`'s match at ``at`` in ``text`` (``fullmatch`` when ``whole``, else
    ``match``), found by `_XLA_QUICK` unless a backslash may escape a quote there."""
    found = (_XLA_QUICK.fullmatch if whole else _XLA_QUICK.match)(text, at)
    if "\\" in text and (found is None or "\\" in found.group(1)):
        return (_XLA_COMMON.fullmatch if whole else _XLA_COMMON.match)(text, at)
    return found


#: The keys XLA writes in ``metadata={...}``, one string each for every parse.
_FIELD_KEYS = {
    key: key
    for key in (
        "op_type", "op_name", "source_file", "source_line", "source_end_line", "source_column",
        "source_end_column", "stack_frame_id", "scheduling_name", "deduplicated_name",
        "preserve_layout", "profile_type",
    )
}  # fmt: skip


def _NOT_SHARED(value: str, _same: str) -> str:
    return value


def _parse_attributes(
    rest: str,
    attributes: dict[str, str],
    called: list[ComputationRef],
    metas: dict[str, HloMetadata] | None = None,
    strings: dict[str, str] | None = None,
) -> HloMetadata | None:
    """Fill ``attributes`` and ``called`` from the text after the operands; the metadata
    (one per distinct text in ``metas``, as `_metadata_of` keeps it)."""
    metadata = None
    for key, value in attribute_pairs(rest):
        if not key:
            attributes[""] = (attributes.get("", "") + ", " + value).lstrip(", ")
            continue
        attributes[key] = value
        role = CALL_ROLES.get(key)
        if role is not None:
            for name in value.strip("{}").split(","):
                name = name.strip().lstrip("%")
                if name:
                    called.append(ComputationRef(name, role))
        elif key == "metadata":
            metadata = None if metas is None else metas.get(value)
            if metadata is None:
                metadata = _parse_metadata(value, strings)
                if metas is not None:
                    metas[value] = metadata
    return metadata


def _xla_metadata(found: re.Match[str], strings: dict[str, str]) -> HloMetadata:
    """The `HloMetadata` of an `_XLA_METADATA` (or `_XLA_COMMON`) match: what
    `_parse_metadata` gives for its text, with no search for the fields (one test per
    field of `_XLA_FIELDS`, in its order: a loop over the eleven pairs costs twice as
    much, for the two to four present)."""
    keep = strings.setdefault
    if found.re is not _XLA_METADATA:  # `_XLA_COMMON`'s groups
        op_name, source_file, line, frame = found.groups()
        if "\\" in op_name:  # (as `_parse_metadata` unquotes it)
            op_name = op_name.replace('\\"', '"').replace("\\\\", "\\")
        fields = {"op_name": op_name}
        if source_file is not None:
            fields["source_file"] = source_file = keep(source_file, source_file)
            fields["source_line"] = keep(line, line)
        if frame is not None:
            fields["stack_frame_id"] = keep(frame, frame)
        # Its fields as stored, as `_read_rows` makes records (the dataclass's __init__
        # costs a third of this function; most metadata texts of a module read so).
        metadata = _new_object(HloMetadata)
        metadata.op_name = op_name
        metadata.op_type = ""
        metadata.source_file = source_file or ""
        metadata.source_line = int(line) if line is not None else 0
        metadata.stack_frame_id = int(frame) if frame is not None else 0
        metadata.fields = fields
        metadata.stack = ()
        return metadata
    (
        op_type, op_name, source_file, line, end_line, column, end_column, deduplicated,
        preserve, scheduling, frame,
    ) = found.groups()  # fmt: skip
    fields = {}
    if op_type is not None:
        fields["op_type"] = op_type = keep(op_type, op_type)
    else:
        op_type = ""
    if op_name is not None:
        fields["op_name"] = op_name
    else:
        op_name = ""
    if source_file is not None:
        fields["source_file"] = source_file = keep(source_file, source_file)
    else:
        source_file = ""
    if line is not None:
        fields["source_line"] = keep(line, line)
    if end_line is not None:
        fields["source_end_line"] = keep(end_line, end_line)
    if column is not None:
        fields["source_column"] = keep(column, column)
    if end_column is not None:
        fields["source_end_column"] = keep(end_column, end_column)
    if deduplicated is not None:
        fields["deduplicated_name"] = keep(deduplicated, deduplicated)
    if preserve is not None:
        fields["preserve_layout"] = keep(preserve, preserve)
    if scheduling is not None:
        fields["scheduling_name"] = keep(scheduling, scheduling)
    if frame is not None:
        fields["stack_frame_id"] = keep(frame, frame)
    return HloMetadata(  # by position: op_name, op_type, source_file, line, frame, fields
        op_name, op_type, source_file, int(line) if line is not None and line.isdigit() else 0,
        int(frame) if frame is not None and frame.isdigit() else 0, fields,
    )  # fmt: skip


def _parse_metadata(value: str, strings: dict[str, str] | None = None) -> HloMetadata:
    """The `HloMetadata` of one ``{...}`` text (a parse reads each distinct text once).

    Its keys, and the values other than ``op_name`` (source files, lines, frame ids:
    few distinct ones), are stored once per module when ``strings`` is given: a dump
    holds tens of thousands of metadata texts (a fifth of a parsed module's memory)."""
    fields = {}
    keep = _NOT_SHARED if strings is None else strings.setdefault
    for key, raw in _META_FIELD.findall(value):
        if len(raw) >= 2 and raw[0] == '"' and raw[-1] == '"':  # `_unquote`, inlined
            raw = raw[1:-1]
            if "\\" in raw:
                raw = raw.replace('\\"', '"').replace("\\\\", "\\")
        key = _FIELD_KEYS.get(key, key)
        fields[key] = raw if key == "op_name" else keep(raw, raw)
    get = fields.get
    line = get("source_line", "")
    frame = get("stack_frame_id", "")
    return HloMetadata(  # by position: op_name, op_type, source_file, line, frame, fields
        get("op_name", ""), get("op_type", ""), get("source_file", ""),
        int(line) if line.isdigit() else 0, int(frame) if frame.isdigit() else 0, fields,
    )  # fmt: skip
