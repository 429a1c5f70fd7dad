"""A computation's instructions in the list the parser filled: one that knows whether they
are still the parser's rows of one text.

`_fast_rows._read_rows` makes the record of each common line as a place in the module's
text (`HloInstruction`: ``_text`` that text, ``_end`` -1, attributes not split). A reader
of many lines at once (`_body_texts.body_texts`: a large module's fused bodies) cuts
such lines in place, and has to know each record is one: three attributes a line to read,
a tenth of its time. `ParsedRows` is the list the parser fills with them: its ``text`` is
the module's text while the list holds nothing else, and stays unchanged; anything else
appended (a line the line reader makes, `_line_reader._flush`), any other change to the
list (its every changing method sets ``text`` to None: the parser appends through
`append_row`, which does not), or a change to any record's text or attributes since
(`HloInstruction` counts them all, lazy splits too: ``edits``) ends it. `parsed_text` is
the one question a reader asks per computation.

    >>> from tpukit.hlo.text import parse_hlo
    >>> comp = parse_hlo("HloModule m\\nENTRY e {\\n  ROOT x = f32[] parameter(0)\\n}\\n").entry
    >>> parsed_text(comp) is comp.instructions[0]._text
    True
    >>> comp.instructions.append(comp.instructions[0])
    >>> parsed_text(comp) is None
    True

Imports: this package's model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tpukit.hlo.text._model import HloInstruction

if TYPE_CHECKING:
    from tpukit.hlo.text._model import HloComputation


class ParsedRows(list):
    """A computation's instructions as the parser appends them (`append_row`): ``text``,
    the text they are all rows of while the list is unchanged, else None; ``edits``,
    `HloInstruction`'s count of changed records when the list was made."""

    __slots__ = ("text", "edits")

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text: str | None = text
        self.edits = HloInstruction._edits

    def __reduce__(self) -> tuple:
        # A copy or a pickle is a plain list: its records' edits were counted elsewhere (a
        # pickle loads in another process, whose count says nothing of them).
        return (list, (list(self),))


def _changing(name: str) -> Callable[..., Any]:
    """``list``'s method ``name``, setting ``text`` to None first."""
    method = getattr(list, name)

    def changed(self: ParsedRows, *args: Any, **kwargs: Any) -> Any:
        self.text = None
        return method(self, *args, **kwargs)

    changed.__name__ = changed.__qualname__ = name
    changed.__doc__ = method.__doc__
    return changed


for _name in (
    "append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
    "__setitem__", "__delitem__", "__iadd__", "__imul__",
):  # fmt: skip
    setattr(ParsedRows, _name, _changing(_name))


def append_row(rows: list) -> Callable[[HloInstruction], None]:
    """``rows.append`` as a plain list has it: the parser's rows leave ``text`` as it is."""
    return list.append.__get__(rows)  # type: ignore[attr-defined, no-any-return]


def parsed_text(comp: HloComputation) -> str | None:
    """The text whose rows, made by the parser's fast path, ``comp``'s instructions all
    are, unchanged since the parse (`ParsedRows`); None where they may not be."""
    rows = comp.instructions
    if rows.__class__ is ParsedRows and rows.edits == HloInstruction._edits:  # type: ignore[attr-defined]
        return rows.text  # type: ignore[attr-defined, no-any-return]
    return None
