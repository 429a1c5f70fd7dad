"""The parser's quick paths read as its plain ones (see ``_fast_rows._read_rows``).

`_ROW` is spelled with possessive runs, and a line's rest that calls computations is read
once per distinct text, its attributes split when asked for; none of it may change what
a record says.
"""

from __future__ import annotations

import random
import re

from tpukit.hlo.text import (
    _fast_rows,
    _instruction_line,
    _metadata,
    _parser,
    metadata_text,
    parse_hlo,
)
from tpukit.hlo.text._model import HloMetadata
from tpukit.hlo.text._parsed import PARSED

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


_TEXT = """HloModule m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %e (x: f32[8]) -> f32[] {
  %x = f32[8]{0} parameter(0)
  %z = f32[] constant(0)
  %r = f32[] reduce(%x, %z), dimensions={0}, to_apply=%add, metadata={op_name="a/r"}
  %q = f32[] reduce(%x, %z), dimensions={0}, to_apply=%add, metadata={op_name="a/r"}
  ROOT %n = f32[] negate(%r), metadata={op_name="jit(f)/metadata" source_line=3}
}
"""


def test_rests_that_call_computations_are_read_once_and_split_when_asked():
    PARSED.cache_clear()
    entry = parse_hlo(_TEXT).entry
    r, q = entry["r"], entry["q"]
    assert [tuple(ref) for ref in r.called_computations] == [("add", "to_apply")]
    assert r.called_computations == q.called_computations
    assert r.called_computations is not q.called_computations  # each record its own list
    assert r.metadata is q.metadata and r.metadata.op_name == "a/r"
    assert r.attributes == {
        "dimensions": "{0}", "to_apply": "%add", "metadata": '{op_name="a/r"}'
    }  # fmt: skip
    assert parse_hlo(_TEXT).computations["add"].kind == "applied"
    PARSED.cache_clear()


def test_metadata_text_of_a_rest_naming_metadata_twice():
    PARSED.cache_clear()
    n = parse_hlo(_TEXT).entry["n"]
    assert n.metadata.op_name == "jit(f)/metadata" and n.metadata.source_line == 3
    assert metadata_text(n) == '{op_name="jit(f)/metadata" source_line=3}'
    PARSED.cache_clear()


def test_parameter_numbers_are_read_without_the_line():
    PARSED.cache_clear()
    module = parse_hlo(_TEXT)
    assert [p.parameter_number for p in module.computations["add"].parameters] == [0, 1]
    assert [p.operand_text for p in module.entry.parameters] == ["0"]
    assert module.entry["z"].operand_text == "0"
    PARSED.cache_clear()


def _reference_ending(rest: str) -> tuple:
    """The metadata and called computations of a full split of ``rest``."""
    called: list = []
    metadata = _instruction_line._parse_attributes(rest.strip(), {}, called)
    return metadata or HloMetadata(), [tuple(ref) for ref in called]


_RESTS = [
    ", kind=kLoop, calls=%fused_computation.3", ", kind=kCustom, calls=f.1",
    ", dimensions={0,1}, to_apply=%region_1.2", ", to_apply=%add", ", calls=%a, calls=%b",
    ', metadata={op_name="jit(f)/add" stack_frame_id=3}', ", metadata={}",
    ', backend_config={"outer_dimension_partitions":[]}', ", body=%b, condition=%c",
    ', metadata={op_name="a/to_apply=%x"}', ", index=3", ", calls=%{f}", ", to_apply=%f.1}",
    ', backend_config="metadata={}"', ", kind=kLoop,calls=%f", " ", ",", ", calls=%f ",
    ", dimensions={}", ", index=7", ", slice={[0:1]}", ", direction=LT", ", body=b",
    ", select=s", ", x=metadata", ', metadata={op_name="while/body/select" stack_frame_id=9}',
    ', metadata={op_name="calls=x" source_line=3}', ", metadata={op_type=\"a\\\"b\"}",
    ', metadata={op_name="while/body=%g" stack_frame_id=2}', ', backend_config={"a":"calls=%g"}',
    ", metadata={}, calls=%h", ', metadata={op_name="x"}, body=%b',
]  # fmt: skip


def test_a_rest_read_without_a_split_reads_as_its_split():
    rng = random.Random(7)
    for _ in range(20000):
        rest = "".join(rng.choice(_RESTS) for _ in range(rng.randint(1, 4)))
        got = _fast_rows._ending(rest, {}, {}, HloMetadata())
        metadata, called = got if got.__class__ is tuple else (got, [])
        assert (metadata, [tuple(ref) for ref in called]) == _reference_ending(rest), rest


def test_common_metadata_reads_as_xla_metadata():
    """`_XLA_COMMON` reads what `_XLA_METADATA` reads, or nothing."""
    rng = random.Random(11)
    odd = ["", " ", "  ", '"', "\\", "x", "}", "{", 'op_type="dot" ', " source_line=1x"]
    common = 0
    for _ in range(20000):
        parts = [
            "{", rng.choice(['op_name="a/b"', 'op_name="while/body"', 'op_name=""']),
            rng.choice(["", ' source_file="/m.py" source_line=12']),
            rng.choice(["", " stack_frame_id=3"]), "}",
        ]  # fmt: skip
        if rng.random() < 0.4:
            at = rng.randrange(len(parts))
            parts.insert(at, rng.choice(odd))
        value = "".join(parts)
        found = _metadata._XLA_COMMON.fullmatch(value)
        if found is None:
            continue
        common += 1
        plain = _metadata._XLA_METADATA.fullmatch(value)
        assert plain is not None, value
        assert _metadata._xla_metadata(found, {}) == _metadata._xla_metadata(plain, {}), value
        assert _metadata._xla_metadata(found, {}) == _metadata._parse_metadata(value), value
        assert list(_metadata._xla_metadata(found, {}).fields) == list(
            _metadata._parse_metadata(value).fields
        )
    assert common > 10000


def test_operand_text_with_a_tiled_layout_reads_whole_by_rows_and_by_lines(monkeypatch):
    text = (
        "HloModule m\nENTRY e {\n  a = f32[8]{0:T(8)} parameter(0)\n"
        "  b = f32[8]{0:T(8)} negate(f32[8]{0:T(8)} %a)\n"
        "  ROOT c = f32[8]{0:T(8)} add(f32[8]{0:T(8)} %a, f32[8]{0:T(8)} %b)\n}\n"
    )
    expected = {"b": "f32[8]{0:T(8)} %a", "c": "f32[8]{0:T(8)} %a, f32[8]{0:T(8)} %b"}
    PARSED.cache_clear()
    entry = parse_hlo(text).entry
    assert {name: entry[name].operand_text for name in expected} == expected
    PARSED.cache_clear()
    monkeypatch.setattr(_parser, "_rows_apply", lambda text: False)
    entry = parse_hlo(text).entry
    assert {name: entry[name].operand_text for name in expected} == expected
    PARSED.cache_clear()


def test_a_fusion_s_kind_is_read_without_splitting_its_attributes():
    text = """HloModule m

f {
  p = f32[4]{0} parameter(0)
  ROOT e = f32[4]{0} exponential(p)
}

ENTRY main {
  a = f32[4]{0} parameter(0)
  ROOT x = f32[4]{0} fusion(a), kind=kLoop, calls=f, metadata={op_name="a/kind=kInput"}
}
"""
    PARSED.cache_clear()
    fusion = parse_hlo(text).entry["x"]
    assert fusion.fusion_kind == "kLoop"
    assert fusion._attributes is None  # the split is still to come, if ever asked for
    assert fusion.attributes["kind"] == fusion.fusion_kind
    assert parse_hlo(text).entry["a"].fusion_kind == ""
    PARSED.cache_clear()
