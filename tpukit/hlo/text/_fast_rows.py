"""The fast path: XLA's common instruction lines read by one regex, `_ROW`, a megabyte
of text at a time.

One job: `_read_rows` cuts the text into lines with ``findall`` and makes each common
line's record from its tuple with no further regex (more operand names by
``str.split``; the metadata of each distinct rest of a line found once, `_ending`); every
other line goes to the line-by-line reader (`_line_reader._Reader.line`). The regexes'
spelling, and why each part is possessive, is written beside them.

Imports: this package's model, shapes, metadata, instruction lines, the line reader and
parsed rows.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from tpukit.hlo.text._brackets import open_brackets
from tpukit.hlo.text._instruction_line import (
    _CALL_KEY,
    CALL_ROLES,
    _operand_names,
    _parse_attributes,
    names_a_call,
)
from tpukit.hlo.text._line_reader import _COMPUTATION_HEADER, _Reader
from tpukit.hlo.text._metadata import (
    _XLA_METADATA,
    _common_metadata,
    _metadata_alone,
    _new_object,
    _parse_metadata,
    _xla_metadata,
    metadata_table,
)
from tpukit.hlo.text._model import (
    ComputationRef,
    HloComputation,
    HloInstruction,
    HloMetadata,
    HloShape,
)
from tpukit.hlo.text._parsed_rows import append_row
from tpukit.hlo.text._shape_text import parse_shape

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
                    comp_name, append = comp.name, append_row(comp.instructions)
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
            append = None if comp is None else append_row(comp.instructions)
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
        metadata = _xla_metadata_at(rest, at, metas, strings)
        if metadata is not None:
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


def _xla_metadata_at(
    rest: str, at: int, metas: dict[str, HloMetadata], strings: dict[str, str]
) -> HloMetadata | None:
    """The metadata whose ``{...}`` ends ``rest`` from ``at`` when XLA's printer spelled
    it (`_XLA_COMMON`, `_XLA_METADATA`), read once per distinct text (``metas``); None
    when it is spelled otherwise."""
    found = _common_metadata(rest, at) or _XLA_METADATA.fullmatch(rest, at)
    if found is None:
        return None
    value = rest[at:]
    metadata = metas.get(value)
    if metadata is None:
        metadata = metas[value] = _xla_metadata(found, strings)
    return metadata


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
    if names_a_call(tail):
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
    if names_a_call(rest):
        return None
    at = rest.find(", metadata={") + 11
    if at > 10 and rest.count("metadata") == 1:  # most lines end with XLA's own metadata
        metadata = _xla_metadata_at(rest, at, metas, strings)
        if metadata is not None:
            return metadata
    value = _metadata_alone(rest)
    if not value:
        return None if value is None else empty
    metadata = metas.get(value)
    if metadata is None:
        metadata = metas[value] = _parse_metadata(value, strings)
    return metadata


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
