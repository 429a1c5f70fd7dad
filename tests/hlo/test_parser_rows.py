"""The whole-text reader (`_fast_rows._ROW`) reads every text as the line-by-line reader does.

`parse_hlo` cuts the text into lines with one regex and makes the record of each common
instruction line at once; any other line (headers, closing braces, continuation lines,
comments, odd spacing) goes through the line-by-line reader, which is also what reads a
text whose line breaks are not all "\\n". Here the same texts are read both ways -- the
fixtures, and the fixtures with lines split, spaced, commented and moved about at random --
and every field of every instruction must agree. `_ROW` itself, spelled with possessive
runs for speed, must match what its plain spelling matches. Also: parsing equal text twice
gives one module while it is alive (`_parsed.PARSED`), and never a module of other text.
"""

from __future__ import annotations

import gc
import random
import re

import pytest

from tests._support.data import HLO_DATA as DATA
from tests._support.hlo_fingerprint import _model
from tpukit.hlo.text import _fast_rows, _line_reader, _parser
from tpukit.hlo.text._parsed import PARSED
from tpukit.hlo.text._parser import parse_hlo

FIXTURES = sorted(p.name for p in DATA.glob("*.hlo"))


def _both(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list, list]:
    """The model of ``text`` read by rows, and read line by line."""
    PARSED.cache_clear()
    rows = _model(parse_hlo(text))
    PARSED.cache_clear()
    with monkeypatch.context() as patch:
        patch.setattr(_parser, "_rows_apply", lambda text: False)
        lines = _model(parse_hlo(text))
    PARSED.cache_clear()
    return rows, lines


@pytest.mark.parametrize("name", FIXTURES)
def test_fixtures_read_the_same_by_rows_and_by_lines(name, monkeypatch):
    rows, lines = _both((DATA / name).read_text(), monkeypatch)
    assert rows == lines


def _shuffled(text: str, rng: random.Random) -> str:
    """``text`` with odd but valid spelling: trailing spaces, instructions continued on
    the next line, comments, blank lines, tabs, a missing last line break."""
    out = []
    for line in text.splitlines():
        roll = rng.random()
        if roll < 0.1:
            line += " " * rng.randint(1, 3)
        elif roll < 0.2 and " = " in line and ", " in line[line.index(" = ") :]:
            cut = line.index(", ", line.index(" = ")) + 1
            out.append(line[:cut])
            line = "      " + line[cut:].lstrip()
        elif roll < 0.25:
            out.append("  // a comment")
        elif roll < 0.3:
            out.append("")
        elif roll < 0.35 and line.startswith("  "):
            line = "\t" + line.lstrip()
        elif roll < 0.38 and " = " in line:
            line = line.replace(" = ", " =\u00a0", 1)  # not a space the rows read
        elif roll < 0.41 and "(" in line:
            line = line.replace("(", "( /* c */", 1)
        out.append(line)
    joined = "\n".join(out)
    return joined if rng.random() < 0.5 else joined + "\n"


@pytest.mark.parametrize("seed", range(12))
def test_odd_spelling_reads_the_same_by_rows_and_by_lines(seed, monkeypatch):
    rng = random.Random(seed)
    for name in FIXTURES:
        text = _shuffled((DATA / name).read_text(), rng)
        try:
            rows, lines = _both(text, monkeypatch)
        except Exception as rows_error:  # then the line-by-line reader refuses it too
            with pytest.raises(type(rows_error)):
                _both_lines(text, monkeypatch)
            continue
        assert rows == lines, name


def _both_lines(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        patch.setattr(_parser, "_rows_apply", lambda text: False)
        PARSED.cache_clear()
        parse_hlo(text)


def test_a_last_line_with_open_brackets_takes_the_closing_brace():
    text = "HloModule m\nENTRY e {\n  ROOT x = f32[] parameter(0), a={\n}\n}\n"
    module = parse_hlo(text)
    assert module.entry.root.text == "ROOT x = f32[] parameter(0), a={ }"


def test_operands_with_and_without_shapes():
    text = (
        "HloModule m\nENTRY e {\n  a = f32[2]{0} parameter(0)\n  b = f32[2]{0} parameter(1)\n"
        "  c = f32[2]{0} add(f32[2]{0} %a, %b)\n  d = f32[2]{0} add(f32[2]{0} a, f32[2]{0} c)\n"
        "  ROOT e = f32[2]{0} add(%d, %c)\n}\n"
    )
    entry = parse_hlo(text).entry
    assert [i.operands for i in entry.instructions[2:]] == [["a", "b"], ["a", "c"], ["d", "c"]]
    assert entry["c"].operand_text == "f32[2]{0} %a, %b"
    assert entry["e"].text == "ROOT e = f32[2]{0} add(%d, %c)"


def test_equal_text_gives_the_module_while_it_lives():
    PARSED.cache_clear()
    text = (DATA / "jax_mlp.hlo").read_text()
    first = parse_hlo(text)
    assert parse_hlo("".join(text)) is first  # equal text, another string
    assert parse_hlo(text.replace("HloModule", "HloModule ", 1)) is not first
    del first
    gc.collect()
    assert len(PARSED) == 0  # held weakly: gone with the last holder
    again = parse_hlo(text)
    assert len(PARSED) == 1 and parse_hlo(text) is again
    PARSED.cache_clear()
    assert parse_hlo(text) is not again


@pytest.mark.parametrize("name", FIXTURES)
def test_rows_keep_their_place_in_the_text(name):
    """A record made from a row points into the module's text as other code reads it:
    ``_at`` where its line's content starts (after the indent), ``_end`` -1 (the line
    ends at the next "\\n"), ``_rest_at`` where its rest starts, relative to ``_at``."""
    text = (DATA / name).read_text()
    PARSED.cache_clear()
    module = parse_hlo(text)
    rows = [i for c in module.computations.values() for i in c.instructions if i._end == -1]
    assert rows
    for instr in rows:
        assert instr._text is text
        line = text[instr._at : text.index("\n", instr._at)]
        assert line == instr.text == line.strip()
        assert text[text.rfind("\n", 0, instr._at) + 1 : instr._at].strip(" \t") == ""
        assert line[instr._rest_at - 1] == ")"
        assert line[: instr._rest_at].startswith(("ROOT ", "%", instr.name))
    PARSED.cache_clear()


def test_metadata_made_without_init_is_a_whole_dataclass():
    """XLA's common metadata is made field by field (`_metadata._xla_metadata`, without the
    dataclass's ``__init__``): each has every field of `HloMetadata`, and equals the one
    the dataclass makes from the same values (a field added later must be set there too)."""
    from dataclasses import fields

    from tpukit.hlo.text._model import HloMetadata

    PARSED.cache_clear()
    module = parse_hlo(
        "HloModule m\n\nENTRY e {\n  ROOT x = f32[] parameter(0), metadata="
        '{op_name="jit(f)/x" source_file="/a/f.py" source_line=7}\n}\n'
    )
    meta = module.entry.root.metadata
    values = {f.name: getattr(meta, f.name) for f in fields(HloMetadata)}  # (unset: raises)
    assert meta == HloMetadata(**values)
    assert (meta.op_name, meta.source_file, meta.source_line) == ("jit(f)/x", "/a/f.py", 7)


# Computation headers as XLA prints them and as others may: `_read_rows` matches those that
# start with "%" or "ENTRY " in place; the others (spaced, no "%") go to the line reader.
HEADERS = """HloModule m

%add.1 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%body (p: (s32[], f32[2]{0})) -> (s32[], f32[2]{0}) {
  ROOT %p = (s32[], f32[2]{0}) parameter(0)
}

%plain {
  ROOT %c = f32[] constant(1)
}
 %spaced   ()->f32[]{
  ROOT %c = f32[] constant(2)
}

cond.2 (q: f32[]) -> pred[] {
  ROOT %q = pred[] constant(true)
}
%x = f32[] parameter(0)

ENTRY %main.3 (x: f32[2]{0}, y: f32[]) -> (f32[2]{0}) {
  %x = f32[2]{0} parameter(0)
  %y = f32[] parameter(1)
  %r = f32[] reduce(%x, %y), dimensions={0}, to_apply=%add.1
  ROOT %t = (f32[2]{0}) tuple(%x)
}
"""


def _calls(monkeypatch, method: str, text: str) -> list[tuple]:
    """The arguments `_line_reader._Reader.<method>` is called with while ``text`` is parsed
    afresh: which lines the fast path leaves to the line reader."""
    calls: list[tuple] = []
    original = getattr(_line_reader._Reader, method)

    def record(reader, *args):
        calls.append(args)
        return original(reader, *args)

    with monkeypatch.context() as patch:
        patch.setattr(_line_reader._Reader, method, record)
        PARSED.cache_clear()
        parse_hlo(text)
    PARSED.cache_clear()
    return calls


def test_headers_read_in_place_as_by_the_line_reader(monkeypatch):
    """A computation's header line read by `_read_rows` itself (`_Reader.open`) gives the
    computation the line reader gives: name, ENTRY, signature, and what follows."""
    rows, lines = _both(HEADERS, monkeypatch)
    assert rows == lines
    assert [c[:4] for c in rows[5]] == [
        ["add.1", "applied", False, "(a: f32[], b: f32[]) -> f32[]"],
        ["body", "unused", False, "(p: (s32[], f32[2]{0})) -> (s32[], f32[2]{0})"],
        ["plain", "unused", False, ""],
        ["spaced", "unused", False, "()->f32[]"],
        ["cond.2", "unused", False, "(q: f32[]) -> pred[]"],
        ["main.3", "entry", True, "(x: f32[2]{0}, y: f32[]) -> (f32[2]{0})"],
    ]
    assert rows[4] == ["%x = f32[] parameter(0)"]  # (outside any computation: kept raw)
    outside = [stripped for _, stripped in _calls(monkeypatch, "_outside", HEADERS)]
    assert outside == [  # the lines that `_read_rows` leaves to the line reader
        "HloModule m", "%spaced   ()->f32[]{", "cond.2 (q: f32[]) -> pred[] {", "%x = f32[] parameter(0)"
    ]  # fmt: skip


# Tuple-shaped lines and operand lists numbered by XLA (``/*index=5*/``), as a step's while
# loops, calls and ROOT tuples print them; then lines `_ROW` leaves to the line reader: a
# nested tuple, a layout with unbalanced brackets, comments of other kinds.
TUPLES = """HloModule m

%body (p: (s32[], f32[2]{0})) -> (s32[], f32[2]{0}) {
  %p = (s32[], f32[2]{0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %v = f32[2]{0} get-tuple-element(%p), index=1
  ROOT %t = (s32[], f32[2]{0}) tuple(%i, %v)
}

%cond (p: (s32[], f32[2]{0})) -> pred[] {
  %p = (s32[], f32[2]{0}) parameter(0)
  ROOT %c = pred[] constant(true)
}

%two (a: f32[2], b: f32[2]) -> (f32[2], f32[2]) {
  %a = f32[2]{0} parameter(0)
  %b = f32[2]{0} parameter(1)
  ROOT %both = (f32[2]{0:T(2)}, f32[2]{0}) tuple(f32[2]{0} %a, f32[2]{0} %b)
}

ENTRY %main (a: f32[2], b: s32[]) -> (f32[2], s32[], f32[2], f32[2], f32[2], f32[2], f32[2]) {
  %a = f32[2]{0} parameter(0)
  %b = s32[] parameter(1)
  %in = (s32[], f32[2]{0}) tuple(%b, %a)
  %w = (s32[], f32[2]{0}) while(%in), condition=%cond, body=%body, metadata={op_name="w"}
  %f = (f32[2]{0:T(2)}, f32[2]{0}) call(%a, %a), to_apply=%two
  %s = f32[2]{0} add(%a, %a, %a, %a, %a, /*index=5*/%a, f32[2]{0} %a), metadata={op_name="s"}
  %n = ((s32[], f32[2]{0}), s32[]) tuple(%w, %b)
  %u = (f32[2]{(}, s32[]) tuple(%a, %b)
  %o = f32[2]{0} add(%a, %a, %a, %a, %a, /*index=5*/%a, /* other */%a)
  %r = f32[2]{0} add(%a, %a), metadata={op_name="r"} /*index=5*/
  %e = (f32[]) tuple(/*index=x*/%a)
  ROOT %out = (f32[2]{0}, s32[], f32[2]{0}, f32[2]{0}, f32[2]{0}, /*index=5*/f32[2]{0}, f32[2]{0}) tuple(%a, %b, %a, %a, %s, /*index=5*/%o, %r)
}
"""


def test_tuple_shapes_and_numbered_operands_read_in_place_as_by_the_line_reader(monkeypatch):
    """A row with a flat tuple shape, or XLA's ``/*index=N*/`` in its operands or tuple,
    gives the record the line reader gives; the others are left to the line reader."""
    rows, lines = _both(TUPLES, monkeypatch)
    assert rows == lines
    entry = {i[0]: i for i in rows[5][-1][4]}
    assert entry["out"][6] == ["a", "b", "a", "a", "s", "o", "r"]  # the operands
    assert entry["out"][2].startswith("(f32[2]{0}, s32[], ") and entry["s"][6] == ["a"] * 7
    assert entry["w"][8] == [("cond", "condition"), ("body", "body")]
    read = [text.strip() for text, _ in _calls(monkeypatch, "line", TUPLES)]
    odd = [text.split(" = ")[0] for text in read if " = " in text]
    assert odd == ["%n", "%u", "%o", "%r", "%e"]


# `_ROW` spelled without possessive runs (as it was before they were made possessive).
_PLAIN_PIECE = r"(?:[a-z][a-z0-9]*\[[0-9,<=?]*\](?:\{[^}\s]*\})? )?%?[A-Za-z0-9_.\-$]+"
_PLAIN_NAMED = r"(?:[a-z][a-z0-9]*\[[0-9,<=?]*\](?:\{[^}\s]*\})? )?%?([A-Za-z0-9_.\-$]+)"
_PLAIN_INDEX = r"(?:/\*index=[0-9]+\*/)?"
_PLAIN_MORE = rf"({_PLAIN_PIECE}(?:, {_PLAIN_INDEX}{_PLAIN_PIECE})*)"
_PLAIN_LISTED = rf"(?:{_PLAIN_NAMED}(?:, {_PLAIN_NAMED}(?:, {_PLAIN_MORE})?)?)?"
_PLAIN_IN_LAYOUT = r'[^(){}\[\]"/\n]'
_PLAIN_ELEMENT = (
    rf"[a-z][a-z0-9]*\[[0-9,<=?]*\](?:\{{(?:{_PLAIN_IN_LAYOUT}|\({_PLAIN_IN_LAYOUT}*\))*\}})?"
)
_PLAIN_TUPLE = rf"\((?:{_PLAIN_ELEMENT}(?:, {_PLAIN_INDEX}{_PLAIN_ELEMENT})*)?\)"


def _plain_row(shape: str) -> re.Pattern[str]:
    return re.compile(
        rf"([ \t]*)(?:((?:ROOT )?%?)([A-Za-z0-9_.\-$]+) = ({shape}) ([a-z][a-z0-9\-]*)"
        rf"\(({_PLAIN_LISTED}|[^()\"\n]*)\)((?:[^\n]*\S)?)|[^\n]*)\n"
    )


_PLAIN_ROW = _plain_row(r"[a-z][a-z0-9]*\[[0-9,<=?]*\](?:\{[^}\n]*\})?")
_PLAIN_TUPLE_ROW = _plain_row(_PLAIN_TUPLE)

_PIECES = [
    "  ", " ", "\t", "ROOT ", "%", "x.1", "p_0", "ROOT", " = ", "=", "f32[8,4]{1,0}", "f32[]",
    "bf16[2]{0:T(8,128)}", "(", ")", ", ", ",", "add", "fusion", "parameter", "0", "%a",
    "f32[2]{0} %b", "{", "}", "[", "]", '"', "metadata={op_name=\"a\"}", "calls=%f", "\\",
    "s32[<=4]", "-", "$", "/*c*/", "  ", "/*index=5*/", "(s32[], f32[2]{0})", "/*index=",
    "((f32[]), s32[])",
]  # fmt: skip


_OPERANDS = ["%a", "b.1", "f32[2]{0} %c", "bf16[8]{0:T(8)} %d", "", "{1, 2}", "0", "%e"]
_OPERANDS += ["/*index=5*/%f", "/*index=10*/f32[2]{0} %g"]
_SHAPES = ["f32[8,4]{1,0}", "f32[]", "s32[<=4]", "(f32[2]{0}, s32[])", "()"]
_SHAPES += ["(bf16[8]{0:T(8)(2,1)}, /*index=5*/u32[4]{0}, token[])"]


def _line(rng: random.Random) -> str:
    """An instruction line as XLA spells it, a piece of it replaced now and then."""
    operands = ", ".join(rng.choice(_OPERANDS) for _ in range(rng.randint(0, 4)))
    parts = [
        rng.choice(["  ", "", "\t"]), rng.choice(["", "ROOT "]), rng.choice(["%", ""]),
        rng.choice(["x.1", "p_0", "a-b$"]), " = ", rng.choice(_SHAPES),
        " ", rng.choice(["add", "fusion", "all-reduce", "parameter"]), "(", operands, ")",
        rng.choice(["", ", metadata={op_name=\"a\"}", ", calls=%f ", ", x={(1)}"]),
    ]  # fmt: skip
    for _ in range(rng.randint(0, 2)):
        parts[rng.randrange(len(parts))] = rng.choice(_PIECES)
    return "".join(parts)


def test_row_pattern_matches_as_its_plain_spelling():
    rng = random.Random(3)
    instructions = tupled = 0
    for _ in range(20000):
        lines = [
            "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 14)))
            if rng.random() < 0.3
            else _line(rng)
            for _ in range(rng.randint(1, 4))
        ]
        text = "\n".join(lines) + "\n"
        rows = _fast_rows._ROW.findall(text)
        assert rows == _PLAIN_ROW.findall(text), text
        tuples = _fast_rows._TUPLE_ROW.findall(text)
        assert tuples == _PLAIN_TUPLE_ROW.findall(text), text
        instructions += sum(1 for row in rows if row[2])
        tupled += sum(1 for row in tuples if row[2])
    assert instructions + tupled > 10000 and tupled > 3000  # most lines read as instructions
