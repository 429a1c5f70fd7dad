"""The parser's fast paths give what its exact, slower paths give.

`split_top` (in `_brackets`) matches bracket groups inside one regex and falls back to counting tokens
(`_split_tokens`) when the text is nested too deep or unbalanced; both must split the
same way on any text. `_META_FIELD` skips the insides of words, and must find what the
plain pattern finds; so must the other patterns written for speed (`_XLA_METADATA`, read
against the general metadata path, and the possessive or reordered ones). `paused_gc`
must leave the collector as it found it. `stack_frames` shares a parent's stack where the
parents fall, and must give the stacks a walk from each frame gives. A bracket group closes
where `close_bracket` closes it, and a tuple's array elements read as they read alone.
A line's rest that calls computations is read once per distinct text, its attributes split
only when asked for; none of it may change what a record says.
"""

from __future__ import annotations

import gc
import random
import re

import pytest

from tpukit.hlo.text import _fast_rows, _instruction_line, _metadata, _parser
from tpukit.hlo.text._brackets import (
    _NESTING,
    _STRING,
    _TOKEN,
    _split_tokens,
    close_bracket,
    open_brackets,
    split_top,
)
from tpukit.hlo.text._fast_rows import _metadata_of
from tpukit.hlo.text._instruction_line import _CALL_KEY, _close_group
from tpukit.hlo.text._line_reader import _COMPUTATION_HEADER
from tpukit.hlo.text._metadata import (
    _XLA_COMMON,
    _common_metadata,
    _metadata_alone,
    _parse_metadata,
    metadata_text,
)
from tpukit.hlo.text._model import HloMetadata, HloShape
from tpukit.hlo.text._module_links import _META_FIELD, stack_frames
from tpukit.hlo.text._parsed import PARSED
from tpukit.hlo.text._parser import _MODULE_LINE, _module_starts, module_names, parse_hlo, paused_gc
from tpukit.hlo.text._shape_text import _ARRAY_SHAPE, parse_shape

CASES = [
    "a, b",
    'metadata={op_name="jit(f)/dot_general" stack_frame_id=3}, backend_config={"a":[1,2]}',
    'custom_call_target="foo, bar", api_version=API_VERSION_STATUS_RETURNING',
    "replica_groups={{0,1},{2,3}}, to_apply=%add",
    "output_to_operand_aliasing={{0}: (0, {})}, slice={[0:8], [0:128]}",
    'op_name="a\\"b, c" , x=1',
    "x=/* a, (b) */ 1, y=/* unterminated, z=(2)",
    "x=(1, 2, y=3",  # unclosed: the rest is one piece
    "x=1), y=2, z=3",  # an extra closing bracket: later commas still split
    'x="unterminated, y=2',
    "x=" + "{" * (_NESTING + 2) + "1, 2" + "}" * (_NESTING + 2) + ", y=3",  # deeper than the regex
    "x=" + "(" * _NESTING + "1, 2" + ")" * _NESTING + ", y=3",  # as deep as the regex goes
    "(a], b",  # brackets of different kinds still nest, as the token count does
    "a/b, c//d, e/*f*/g",
    ",,",
    "",
]


def reference(text: str) -> list[str]:
    """What `split_top` (in `_brackets`) gave before its regex: a plain split when no bracket or quote."""
    if not any(char in text for char in '"([{'):
        return text.split(",")
    return _split_tokens(text)


@pytest.mark.parametrize("text", CASES)
def test_split_top_agrees_with_the_token_count(text):
    assert split_top(text) == reference(text)


def test_split_top_on_random_attribute_text():
    alphabet = ['"', "\\", "(", ")", "[", "]", "{", "}", ",", "/", "*", "a", "=", " "]
    rng = random.Random(12)
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        assert split_top(text) == reference(text), text


def test_split_top_hand_examples():
    assert split_top("x={1,2}, y=(a, b)") == ["x={1,2}", " y=(a, b)"]
    assert split_top('x="{, }", y=2') == ['x="{, }"', " y=2"]
    deep = "x=" + "[" * 9 + "1,2" + "]" * 9
    assert split_top(deep + ", y=3") == [deep, " y=3"]


def test_metadata_fields_match_the_plain_pattern():
    plain = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^\s}]+)')
    texts = [
        '{op_name="jit(f)/jvp(model (GPT))/blocks[6] (Block)/add" stack_frame_id=171}',
        '{op_name="a=b c\\"d=e" source_file="/x/y.py" source_line=3}',
        '{scheduling_name="param_2.19741"}',
        "file_name_id=1 function_name_id=2 line=12 end_line=12 column=4",
    ]
    rng = random.Random(3)
    alphabet = ["a", "b", "_", "1", "=", '"', "\\", " ", "}", "{", "x"]
    texts += [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25))) for _ in range(20000)
    ]
    for text in texts:
        assert _META_FIELD.findall(text) == plain.findall(text), text


@pytest.mark.parametrize("enabled", [True, False])
def test_paused_gc_restores_the_collector(enabled):
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with paused_gc():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(ValueError), paused_gc():
            raise ValueError("inside")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_parse_hlo_leaves_the_collector_on_after_bad_text():
    assert gc.isenabled()
    with pytest.raises(ValueError):
        parse_hlo("this is not HLO")
    assert gc.isenabled()


def _metadata_reference(rest: str) -> HloMetadata | None:
    """What a line's rest gave before `_XLA_METADATA`: the metadata found alone, or None
    when the rest calls a computation or must be split whole."""
    if _CALL_KEY.search(rest):
        return None
    value = _metadata_alone.__wrapped__(rest)
    if value is None:
        return None
    return _parse_metadata(value) if value else HloMetadata()


def _random_rest(rng: random.Random) -> str:
    """A line's rest with XLA-like metadata, spelled oddly now and then."""
    values = {
        "op_type": '"dot"',
        "op_name": '"jit(f)/jvp(model (GPT))/blocks[6] (Block)/add"',
        "source_file": '"/home/user/model.py"',
        "source_line": "12",
        "source_end_line": "13",
        "source_column": "4",
        "deduplicated_name": '"fusion.3"',
        "preserve_layout": "true",
        "scheduling_name": '"add.7"',
        "stack_frame_id": "171",
    }
    keys = [key for key in values if rng.random() < 0.5] or ["op_name"]
    if rng.random() < 0.1:
        rng.shuffle(keys)
    odd = ['"', "\\", "{", "}", " ", "=", "metadata", "a", "x=1", "source_line=3", ""]
    parts = []
    for key in keys:
        value = values[key]
        if rng.random() < 0.1:
            at = rng.randint(0, len(value))
            value = value[:at] + rng.choice(odd) + value[at:]
        parts.append(f"{key}={value}")
    seps = [rng.choice([" ", " ", " ", "", "  "]) for _ in parts]
    body = "".join(sep + part for sep, part in zip(seps, parts)).removeprefix(" ")
    rest = ", metadata={" + body + "}"
    if rng.random() < 0.2:
        rest = rng.choice([", dimensions={1}", ", x=metadata", ", to_apply=%add", ",y=2"]) + rest
    if rng.random() < 0.1:
        rest += rng.choice([", b=1", " ", "}", ', backend_config="{}"'])
    return rest


def test_xla_metadata_reads_as_the_general_path():
    rng = random.Random(5)
    rests = [_random_rest(rng) for _ in range(20000)]
    rests += [', metadata={op_name="a" source_line=12source_end_line=3}', ", metadata={}"]
    empty = HloMetadata()
    fast = 0
    for rest in rests:
        shared: dict = {}
        got = _metadata_of(rest, shared, {}, empty)
        assert got == _metadata_reference(rest), rest
        fast += any(isinstance(v, HloMetadata) for v in shared.values())
    assert fast > 10000  # most of them took the fast path


@pytest.mark.parametrize(
    "op_name",
    [
        "traced_args[1][0].mu[\\'bn1\\'][\\'bias\\'].value",  # a pytree key's quotes, escaped
        'a\\"b\\"c',  # an escaped quote
        "a\\\\b",  # an escaped backslash
        'a\\\\\\"b',  # both
        "a\\\\",  # a backslash last
    ],
)
def test_escaped_op_names_read_in_one_match_as_the_general_path(op_name):
    """XLA's common metadata with escapes in its op name: one `_XLA_COMMON` match, read
    as `_parse_metadata` reads the text."""
    for tail in ("", ' source_file="/a/f.py" source_line=3', " stack_frame_id=7"):
        value = f'{{op_name="{op_name}"{tail}}}'
        assert _XLA_COMMON.fullmatch(value), value
        rest = ", metadata=" + value
        got = _metadata_of(rest, {}, {}, HloMetadata())
        assert got == _metadata_reference(rest), rest
        assert got.fields == _parse_metadata(value).fields


def test_common_metadata_matches_as_the_escape_aware_pattern():
    """`_common_metadata` (a run of non-quotes for the op name, `_XLA_COMMON` where a
    backslash may escape a quote) matches what `_XLA_COMMON` alone matches, and there."""
    rng = random.Random(9)
    pieces = ["a", "/", "(", '\\"', "\\'", "\\\\", "\\", '"', " ", "}", "{", "=", "op_name="]
    tails = ["}", '" stack_frame_id=3}', '" source_file="/m.py" source_line=2}', '"}, x=1']
    quick = 0
    for _ in range(20000):
        name = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        text = ', metadata={op_name="' + name + rng.choice(tails)
        for whole in (True, False):
            got = _common_metadata(text, 11, whole)
            want = (_XLA_COMMON.fullmatch if whole else _XLA_COMMON.match)(text, 11)
            assert (got and (got.span(), got.groups())) == (want and (want.span(), want.groups()))
            quick += got is not None and got.re is not _XLA_COMMON
    assert quick > 3000  # (the quick pattern's own matches)


def test_quick_patterns_match_as_the_plain_ones():
    """`_brackets._STRING` and `_TOKEN` (possessive) and `_COMPUTATION_HEADER` (its
    signature found from the end) match what their plain spellings match."""
    plain_string = re.compile(r'"(?:[^"\\]|\\.)*"')
    plain_token = re.compile(r'"(?:[^"\\]|\\.)*"|/\*.*?\*/|[()\[\]{},]')
    plain_header = re.compile(r"(ENTRY\s+)?%?([\w.\-$]+)\s*(\(.*\)\s*->.*?)?\s*\{$")
    rng = random.Random(1)
    alphabet = ['"', "\\", "a", " ", "(", ")", "{", "}", "/", "*", ",", "-", ">", "\t", "%"]
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
        assert plain_string.sub("", text) == _STRING.sub("", text), text
        assert [m.span() for m in plain_token.finditer(text)] == [
            m.span() for m in _TOKEN.finditer(text)
        ], text
        for header in (text, "f " + text, f"ENTRY %m ({text}) -> {text} {{", f"c ({text}{{"):
            plain, quick = plain_header.match(header), _COMPUTATION_HEADER.match(header)
            assert (plain and plain.groups()) == (quick and quick.groups()), header


def test_module_lines_found_as_the_regex_finds_them():
    """`split_modules` finds the ``HloModule`` lines by ``str.find``: where
    `_MODULE_LINE` (a multi-line regex, slow on a large text) finds them."""
    rng = random.Random(2)
    pieces = ["HloModule", " ", "\t", "\n", "a", ",", "HloModule m", "\r", "x"]
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert [m.start() for m in _MODULE_LINE.finditer(text)] == _module_starts(text), text
        assert _MODULE_LINE.findall(text) == module_names(text), text


def test_open_brackets_counts_as_with_the_strings_cut_out():
    rng = random.Random(4)
    alphabet = ['"', "\\", "a", "(", ")", "{", "}", "[", "]", ","]
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
        plain = re.sub(r'"(?:[^"\\]|\\.)*"', "", text)
        expected = sum(plain.count(a) - plain.count(b) for a, b in ("()", "{}", "[]"))
        assert open_brackets(text) == expected, text


def test_open_brackets_counts_skeletons_as_the_text():
    """`open_brackets` counts the brackets and quotes of a text without backslashes
    alone (its UTF-8 bytes, the others deleted), once per skeleton: as the text, with any
    character around them (wide, fullwidth brackets, a lone surrogate)."""
    rng = random.Random(7)
    alphabet = ['"', "a", "(", ")", "{", "}", "[", "]", "é", "€", "（", "）", "\ud800", "😀"]
    alphabet += ["\u0128", "\u0222", "\u297b"]  # ("(", '"', "{" in their UTF-16 bytes)
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
        plain = re.sub(r'"(?:[^"\\]|\\.)*"', "", text)
        expected = sum(plain.count(a) - plain.count(b) for a, b in ("()", "{}", "[]"))
        assert open_brackets(text) == expected, text


@pytest.mark.parametrize("enabled", [True, False])
def test_paused_gc_keep_moves_what_was_made_out_of_the_young_generation(enabled):
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with paused_gc(keep=True):
            assert not gc.isenabled()
            made = [[] for _ in range(5000)]
        assert gc.isenabled() is enabled
        assert gc.get_count()[0] < 1000  # not left young, to be scanned as young
        assert len(made) == 5000
    finally:
        (gc.enable if was else gc.disable)()


def _walked_stacks(tables: dict[str, dict[int, str]]) -> dict:
    """Each frame's stack walked from it, as `stack_frames` did before it shared them."""
    stacks = stack_frames(tables)  # (its frames: the stacks' first entries)
    frames = {key: stack[0] for key, stack in stacks.items()}
    parents = {}
    for key, value in tables["StackFrames"].items():
        parent = dict(_META_FIELD.findall(value)).get("parent_frame_id", "")
        if parent.isdigit() and int(parent) > 1:
            parents[key] = int(parent) - 1
    walked = {}
    for key in frames:
        stack, seen, current = [], set(), key
        while current in frames and current not in seen:
            seen.add(current)
            stack.append(frames[current])
            current = parents.get(current, 0)
        walked[key] = tuple(stack)
    return walked


def test_stack_frames_shared_with_parents_read_as_walked_ones():
    """Parents printed before or after their children, missing, or in cycles."""
    rng = random.Random(5)
    locations = {i: f"{{file_name_id=1 function_name_id=1 line={i}}}" for i in range(1, 8)}
    for _ in range(3000):
        count = rng.randint(0, 30)
        keys = list(range(0 if rng.random() < 0.2 else 1, count + 1))
        if rng.random() < 0.3:
            rng.shuffle(keys)
        frames = {}
        for key in keys:
            parent = rng.choice([rng.randint(0, key + 1), rng.randint(0, count + 3), 1])
            frames[key] = f"{{file_location_id={rng.randint(0, 9)} parent_frame_id={parent}}}"
        tables = {
            "FileNames": {1: '"a.py"'}, "FunctionNames": {1: '"f"'},
            "FileLocations": locations, "StackFrames": frames,
        }  # fmt: skip
        stacks = stack_frames(tables)
        assert stacks == _walked_stacks(tables) and list(stacks) == list(_walked_stacks(tables))


def test_bracket_groups_close_where_the_tokens_close():
    """`_close_group` (one regex match) ends where `close_bracket` (token by token) does."""
    rng = random.Random(6)
    alphabet = ["(", ")", "[", "]", "{", "}", '"', "\\", "/", "*", "/*", "*/", "a", ",", " "]
    alphabet += ["f32[2]{0}", "(s32[], f32[])"]
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        for start, char in enumerate(text):
            if char in "([{":
                assert _close_group(text, start) == close_bracket(text, start), (text, start)


def _tuple_shape(text: str) -> HloShape:
    """`parse_shape` of a tuple with each element read in place (no shape read alone)."""
    text = text.strip()
    if not text.startswith("("):
        return parse_shape(text)
    elements, pos = [], 1
    while pos < len(text):
        while pos < len(text) and text[pos] in " ,":
            pos += 1
        if pos >= len(text) or text[pos] == ")":
            break
        if text[pos] == "(":
            end = close_bracket(text, pos)
            elements.append(_tuple_shape(text[pos:end]))
        else:
            found = _ARRAY_SHAPE.match(text, pos)
            if found is None:
                break
            end = found.end()
            dims = [d.strip() for d in found.group(2).split(",")] if found.group(2) else []
            plain = [d[2:] if d.startswith("<=") else d for d in dims]
            elements.append(
                HloShape(
                    found.group(1),
                    tuple(int(d) if d.isdigit() else -1 for d in plain),
                    layout=found.group(3),
                    dynamic=(
                        tuple(d.startswith("<=") or p == "?" for d, p in zip(dims, plain))
                        if any(d.startswith("<=") or p == "?" for d, p in zip(dims, plain))
                        else ()
                    ),
                )
            )
        pos = end
    return HloShape("tuple", elements=tuple(elements))


def test_tuple_elements_read_as_shapes_alone():
    rng = random.Random(8)
    parts = ["(", ")", ", ", "f32[2]{0}", "s32[]", "f32[<=3,?]", "token[]", "bf16[8]{0:T(8)}"]
    for _ in range(5000):
        text = "(" + "".join(rng.choice(parts) for _ in range(rng.randint(0, 10))) + ")"
        if open_brackets(text) or text.count("(") != text.count(")"):
            continue
        parse_shape.cache_clear()
        assert parse_shape(text) == _tuple_shape(text), text


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
