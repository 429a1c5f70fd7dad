"""One instruction line, read in general: any spacing, tuple shapes, nested or quoted
operands, comments, attributes split and called computations found.

One job: the record of one line the fast path (`_fast_rows`) does not read, and the
attributes of any line when they are asked for. `parse_instruction` tries `_COMMON`
(one match for name, shape, opcode and operands) and falls back to `_general_head`.

    >>> parse_instruction("ROOT %t = f32[2]{0} tanh(f32[2]{0} %x)").operands
    ['x']

Imports: this package's model, shapes, metadata, attributes and brackets.
"""

from __future__ import annotations

import re

from tpukit.hlo.text._attributes import attribute_pairs
from tpukit.hlo.text._brackets import _GROUP, close_bracket, split_top
from tpukit.hlo.text._metadata import _metadata_alone, _parse_metadata, metadata_table
from tpukit.hlo.text._model import ComputationRef, HloInstruction, HloMetadata, HloShape
from tpukit.hlo.text._shape_text import _ARRAY_SHAPE, _COMMENT, parse_shape

_INSTRUCTION_START = re.compile(r"\s*(ROOT\s+)?%?([^\s=(){}\[\],]+)\s*=\s*")
_OPCODE = re.compile(r"\s*([A-Za-z][\w\-.$]*)")
# Any key that names a called computation (then the attributes are split at parse time).
_CALL_KEY = re.compile(
    r"(?<![\w-])(?:calls|to_apply|body|condition|true_computation|false_computation"
    r"|branch_computations|select|scatter|called_computations)\s*="
)
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


def names_a_call(rest: str) -> bool:
    """Whether the text after an instruction's operands holds a key that names a called
    computation (`_CALL_KEY`; op names hold words such as ``while/body``, so the key is
    matched, not the word). A plain search per word comes first: quicker than the regex,
    which tries every place of a long rest.

    >>> names_a_call(", dimensions={0}, to_apply=%add"), names_a_call(', op_name="while/body"')
    (True, False)
    """
    return (
        "calls" in rest or "to_apply" in rest or "body" in rest or "condition" in rest
        or "_computation" in rest or "select" in rest or "scatter" in rest
    ) and _CALL_KEY.search(rest) is not None  # fmt: skip


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
        quick = None if names_a_call(rest) else _metadata_alone(rest)
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
