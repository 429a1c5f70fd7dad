"""A computation says its instructions are the parser's rows of one text, unchanged
(`_parsed_rows.parsed_text`), only while they are: any change to its list or to a record's
text or attributes since the parse, or a line the line reader made, ends it."""

from __future__ import annotations

import pytest

from tpukit.hlo.text import HloComputation, HloInstruction, HloShape, parse_hlo, parsed_text

_TEXT = """HloModule rows_{tag}

%fused (p: f32[4]) -> f32[4] {{
  %p = f32[4]{{0}} parameter(0)
  %n = f32[4]{{0}} negate(f32[4]{{0}} %p), metadata={{op_name="a/neg"}}
  ROOT %e = f32[4]{{0}} exponential(f32[4]{{0}} %n)
}}

ENTRY %main (x: f32[4]) -> f32[4] {{
  %x = f32[4]{{0}} parameter(0)
  ROOT %f = f32[4]{{0}} fusion(f32[4]{{0}} %x), kind=kLoop, calls=%fused
}}
"""


def _fused(tag: str) -> tuple[HloComputation, str]:
    """A fresh module's fused computation (a module of its own text each: `parse_hlo` gives
    one module per text while it lives) and that text."""
    text = _TEXT.format(tag=tag)
    return parse_hlo(text).computations["fused"], text


def test_the_parsers_rows_of_a_computation_say_their_text():
    comp, text = _fused("plain")
    assert parsed_text(comp) == text
    assert all(instr._text is parsed_text(comp) for instr in comp.instructions)


_CHANGES = {
    "append": lambda rows: rows.append(rows[0]),
    "extend": lambda rows: rows.extend([rows[0]]),
    "insert": lambda rows: rows.insert(0, rows[0]),
    "pop": lambda rows: rows.pop(),
    "remove": lambda rows: rows.remove(rows[0]),
    "clear": lambda rows: rows.clear(),
    "sort": lambda rows: rows.sort(key=lambda instr: instr.name),
    "reverse": lambda rows: rows.reverse(),
    "setitem": lambda rows: rows.__setitem__(0, rows[1]),
    "delitem": lambda rows: rows.__delitem__(0),
    "iadd": lambda rows: rows.__iadd__([rows[0]]),
    "imul": lambda rows: rows.__imul__(1),
}


@pytest.mark.parametrize("change", sorted(_CHANGES))
def test_any_change_to_the_list_ends_it(change):
    comp, _ = _fused(f"list_{change}")
    _CHANGES[change](comp.instructions)
    assert parsed_text(comp) is None


@pytest.mark.parametrize("change", ["text", "attributes", "split"])
def test_a_records_text_or_attributes_changed_end_it(change):
    comp, _ = _fused(f"record_{change}")
    negate = comp.instructions[1]
    if change == "text":
        negate.text = negate.text.replace("a/neg", "b/neg")
    elif change == "attributes":
        negate.attributes = {"metadata": '{op_name="b/neg"}'}
    else:  # (split on first use, kept: the record no longer reads its attributes lazily)
        assert negate.attributes["metadata"] == '{op_name="a/neg"}'
    assert parsed_text(comp) is None


def test_a_line_the_line_reader_makes_and_a_computation_made_by_hand_have_none():
    text = _TEXT.format(tag="odd").replace(
        "%e = f32[4]{0} exponential(", "%e  =  f32[4]{0} exponential("
    )
    comp = parse_hlo(text).computations["fused"]
    assert comp.instructions[2].name == "e" and parsed_text(comp) is None
    shape = HloShape("f32", (4,))
    assert parsed_text(HloComputation("c", [HloInstruction("p", "parameter", shape)])) is None


def test_a_deep_copy_or_a_pickle_of_edited_rows_vouches_for_nothing(monkeypatch):
    # Edited, then pickled: a process that loads it counts its own edits (as many as were
    # counted here at the parse, say), so the rows' count would read as unchanged there.
    import copy
    import pickle

    module = parse_hlo("HloModule m\nENTRY e {\n  ROOT x = f32[] parameter(0), k=1\n}\n")
    comp, at_parse = module.entry, HloInstruction._edits
    comp.instructions[0].attributes = {"k": "2"}
    saved = pickle.dumps(comp)
    copies = [copy.deepcopy(comp)]  # (a shallow copy shares the list: this process counts)
    monkeypatch.setattr(HloInstruction, "_edits", at_parse)  # (the loading process's count)
    for again in (pickle.loads(saved), *copies):
        assert parsed_text(again) is None
        assert again.instructions[0].attributes == {"k": "2"}
