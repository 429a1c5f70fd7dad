"""One description of a result's output, lowered to aligned text and to styled HTML.

A result describes what it shows once, as a `Report` (a headline, lines and `Table`s),
and its ``__repr__`` and ``_repr_html_`` are that report's `Report.text` and
`Report.html`: the terminal and the notebook show the same rows, in the same order,
with the same numbers. Columns carry their alignment and formatter; HTML escaping and
the table styles of ``_html_style`` are applied here and nowhere else.

>>> ops = Table(
...     [Column("opcode"), Column("count", align="right", format="{:,}".format)],
...     [("add", 1200), ("dot", 2)],
...     caption="op counts",
... )
>>> print(Report("tpukit-example", "Compiled f", [Line("f(x: f32[8])"), ops]).text())
Compiled f
  f(x: f32[8])
  op counts
    opcode  count
    add     1,200
    dot         2
>>> ops.html()[:60]
'<details open><summary>op counts</summary><table><thead><tr>'
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tpukit.display._html_style import root_classes, table_style

Align = Literal["left", "right"]


@dataclass(frozen=True)
class Column:
    """One column: its name, how its cells align and how a value becomes text.

    ``format`` turns a cell's value into text (both renderings); ``markup``, when
    given, turns it into HTML for notebooks instead (already escaped, e.g. a bar
    beside a share). ``heading`` makes the body cells row headers (``<th>``), as the
    keys of a table of facts; ``nowrap`` keeps a cell on one line in HTML;
    ``html_class`` is a class of the column's body cells, for an output's own styles.
    """

    name: str
    align: Align = "left"
    format: Callable[[Any], str] = str
    markup: Callable[[Any], str] | None = None
    heading: bool = False
    nowrap: bool = False
    html_class: str = ""


@dataclass(frozen=True)
class Row:
    """A row with a mark or of prose.

    ``mark`` is the row's HTML class (``"changed"`` in a diff). A ``prose`` row's
    cells are text, left-aligned and outside the column widths; as text it lists
    each non-empty cell under its first, after the column's name. ``attributes`` are
    more HTML attributes of the row, ``(name, value)`` pairs (values are escaped here),
    such as the ``data-*`` a script finds the row by.
    """

    cells: Sequence[Any]
    mark: str = ""
    prose: bool = False
    attributes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Section:
    """A row that titles the rows after it (as text: a line, those rows indented)."""

    title: str


@dataclass(frozen=True)
class Table:
    """Columns and rows, with an optional caption and notes.

    ``header=False`` leaves out the row of column names (a table of facts); ``rule``
    draws dashes under the names in text. In HTML a caption makes the table
    collapsible (``details``), open unless ``open=False``. ``marked_only_in_text``
    lets the text list only marked rows (a diff's changed ones) while the HTML shows
    every row, the marked ones highlighted; ``text_limit`` keeps a terminal's text
    to that many rows and ends it with how many more there are and ``more`` (where
    to find them, such as ``".op_counts(stage)"``). ``html_class`` is the class of
    the ``<table>`` element, for an output's own styles and scripts.
    """

    columns: Sequence[Column]
    rows: Sequence[Sequence[Any] | Row | Section]
    caption: str = ""
    notes: Sequence[str] = ()
    header: bool = True
    rule: bool = False
    open: bool = True
    marked_only_in_text: bool = False
    text_limit: int | None = None
    more: str = ""
    html_class: str = ""

    def text(self, indent: str = "") -> str:
        """Aligned plain text; the caption at ``indent``, the table two spaces in."""
        lines = [indent + self.caption] if self.caption else []
        inner = indent + "  " if self.caption else indent
        rows = [_as_row(r) for r in self.rows]
        if self.marked_only_in_text:
            rows = _marked(rows)
            if not rows:
                return "\n".join(lines)
        hidden = 0
        if self.text_limit is not None and len(rows) > self.text_limit:
            hidden, rows = len(rows) - self.text_limit, rows[: self.text_limit]
        sections = any(isinstance(r, Section) for r in rows)
        body = inner + "  " if sections else inner
        cells = [
            [c.format(v) for c, v in zip(self.columns, r.cells)]
            for r in rows
            if isinstance(r, Row) and not r.prose
        ]
        names = [c.name for c in self.columns]
        widths = [
            max([len(n) if self.header else 0] + [len(row[i]) for row in cells])
            for i, n in enumerate(names)
        ]

        def line(texts: Sequence[str]) -> str:
            aligned = [
                t.rjust(w) if c.align == "right" else t.ljust(w)
                for t, w, c in zip(texts, widths, self.columns)
            ]
            return (body + "  ".join(aligned)).rstrip()

        if self.header:
            lines.append(line(names))
            if self.rule:
                lines.append(line(["-" * w for w in widths]))
        label_width = max(len(n) for n in names[1:]) if len(names) > 1 else 0
        for r in rows:
            if isinstance(r, Section):
                lines.append(inner + r.title)
            elif r.prose:
                lines.append(body + str(r.cells[0]))
                lines += [
                    f"{body}  {name.ljust(label_width)}  {value}"
                    for name, value in zip(names[1:], r.cells[1:])
                    if str(value)
                ]
            else:
                lines.append(line([c.format(v) for c, v in zip(self.columns, r.cells)]))
        if hidden:
            lines.append(f"{body}... {hidden} more" + (f": {self.more}" if self.more else ""))
        lines += [inner + note for note in self.notes]
        return "\n".join(lines)

    def html(self) -> str:
        """A ``<table>`` (in ``details`` under its caption), cells escaped, numbers right."""
        parts = [
            f'<table class="{html.escape(self.html_class)}">' if self.html_class else "<table>"
        ]
        if self.header:
            head = "".join(
                f"<th{_classes(c.align == 'right')}>{html.escape(c.name)}</th>"
                for c in self.columns
            )
            parts.append(f"<thead><tr>{head}</tr></thead>")
        parts.append("<tbody>")
        for r in map(_as_row, self.rows):
            if isinstance(r, Section):
                parts.append(
                    f'<tr><th colspan="{len(self.columns)}" class="section">'
                    f"{html.escape(r.title)}</th></tr>"
                )
                continue
            mark = f' class="{r.mark}"' if r.mark else ""
            extra = "".join(f' {name}="{html.escape(value)}"' for name, value in r.attributes)
            parts.append(
                f"<tr{mark}{extra}>"
                + "".join(self._cell(c, v, r.prose) for c, v in zip(self.columns, r.cells))
                + "</tr>"
            )
        parts.append("</tbody></table>")
        parts += [f'<div class="note">{html.escape(note)}</div>' for note in self.notes]
        table = "".join(parts)
        if not self.caption:
            return table
        state = " open" if self.open else ""
        return f"<details{state}><summary>{html.escape(self.caption)}</summary>{table}</details>"

    @staticmethod
    def _cell(column: Column, value: Any, prose: bool) -> str:
        tag = "th" if column.heading else "td"
        if prose:
            return f"<{tag}>{html.escape(str(value))}</{tag}>"
        content = column.markup(value) if column.markup else html.escape(column.format(value))
        classes = _classes(column.align == "right", column.nowrap, column.html_class)
        return f"<{tag}{classes}>{content}</{tag}>"


@dataclass(frozen=True)
class Line:
    """A line of a report: ``style`` is its HTML class (``"note"``, ``"warn"``...);
    ``code`` sets it in code (a signature), ``bold`` in bold (a verdict)."""

    text: str
    style: str = ""
    code: bool = False
    bold: bool = False


@dataclass(frozen=True)
class Figure:
    """A drawing in a report (an inline ``<svg>`` chart, already escaped): shown in HTML,
    and as ``text`` (a sentence on what it shows, or nothing) in a terminal."""

    html: str
    text: str = ""


@dataclass(frozen=True)
class Report:
    """A result's whole output: a headline, then lines and tables, in one frame.

    ``kind`` is the output's CSS class (``"tpukit-summary"``), under which
    ``_html_style``'s rules and the report's own ``rules`` apply; ``title_style`` is
    the headline's class. In text the blocks sit ``indent`` in from the headline.
    """

    kind: str
    title: str
    blocks: Sequence[Line | Table | Figure] = field(default_factory=tuple)
    rules: str = ""
    title_style: str = ""
    indent: str = "  "

    def text(self) -> str:
        """The headline, then each block ``indent`` in."""
        lines = [self.title]
        for block in self.blocks:
            if isinstance(block, Figure):
                lines += [self.indent + block.text] if block.text else []
                continue
            text = block.text if isinstance(block, Line) else block.text(self.indent)
            lines.append(self.indent + text if isinstance(block, Line) else text)
        return "\n".join(lines)

    def html(self) -> str:
        """One self-contained fragment: its ``<style>`` and a ``div`` holding the rest."""
        parts = [
            table_style(self.kind, self.rules),
            f'<div class="{root_classes(self.kind)}">',
            _line_html(Line(self.title, self.title_style, bold=True)),
        ]
        for block in self.blocks:
            if isinstance(block, Figure):
                parts.append(block.html)
            else:
                parts.append(block.html() if isinstance(block, Table) else _line_html(block))
        parts.append("</div>")
        return "".join(parts)


def fact_table(pairs: Sequence[tuple[str, str]]) -> Table:
    """A table of facts: each row a name (a row header in HTML) and its value."""
    return Table([Column("fact", heading=True), Column("value")], pairs, header=False)


def _line_html(line: Line) -> str:
    content = html.escape(line.text)
    if line.code:
        content = f"<code>{content}</code>"
    if line.bold:
        content = f"<b>{content}</b>"
    style = f' class="{line.style}"' if line.style else ""
    return f"<div{style}>{content}</div>"


def _as_row(row: Sequence[Any] | Row | Section) -> Row | Section:
    return row if isinstance(row, (Row, Section)) else Row(tuple(row))


def _marked(rows: list[Row | Section]) -> list[Row | Section]:
    """The marked rows, each under its section's title when it has one."""
    kept: list[Row | Section] = []
    section: Section | None = None
    for r in rows:
        if isinstance(r, Section):
            section = r
        elif r.mark:
            if section is not None:
                kept.append(section)
                section = None
            kept.append(r)
    return kept


def _classes(numeric: bool, nowrap: bool = False, extra: str = "") -> str:
    names = ["num"] * numeric + ["nowrap"] * nowrap + [extra] * bool(extra)
    return f' class="{" ".join(names)}"' if names else ""
