"""The panel's texts of the lines of fusion bodies the page builds (`_graph_bodies`), read
a column at a time.

A large module's fused bodies hold most of its lines (400,000 in a chain of 400 fusions of
1,000 ops), and the payload carries each one's text as the panel shows it: the line up to
its metadata, without its head where it opens with it. Cut line by line (`display_cut`)
that is most of the payload's time, so `body_texts` reads the lines of the parser's rows
in place, where the parser's own records say they are (`parsed_text`): one metadata
object's lines mostly end alike, so one rest per metadata object is cut, and every line
that ends in it is cut the same; plain metadata is checked on all the rests at once
(`_all_plain`). Any other line is cut alone, as the whole tree cuts it (`_line_text`).
`tests/graph/test_lazy_bodies.py` and `tests/graph/test_body_texts.py` hold the page's
texts to the whole tree's.
"""

from __future__ import annotations

import re
from itertools import chain, compress, repeat
from operator import add, and_, attrgetter, ne, not_, or_, sub

from tpukit.graph._graph_nodes import clip, display_cut, rest_cut
from tpukit.hlo.text import HloInstruction

#: The longest HLO text a node carries (`_graph_payload`'s limit).
TEXT_LIMIT = 4000
_METADATA = attrgetter("metadata")
_AT, _TEXT, _END = attrgetter("_at"), attrgetter("_text"), attrgetter("_end")
_REST_AT, _ATTRIBUTES = attrgetter("_rest_at"), attrgetter("_attributes")
#: Every byte but a brace, a quote, a backslash and NUL (`_all_plain` drops them), and what
#: plain metadata keeps then: its braces around paired quotes.
_NOT_MARKS = bytes(sorted(set(range(256)).difference(b'{}"\\\0')))
_PLAIN_MARKS = re.compile(rb'\{(?:"")*+\}')


def body_texts(
    instructions: list[HloInstruction],
    heads: list[str],
    keys: list[int] | None = None,
    parsed: str | None = None,
) -> tuple[list[str], list[int]]:
    """Each line's text for the panel and its head (``bodyText``, ``bodyHead``), as
    `_graph_payload._instruction_columns` writes an instruction's ``text`` and
    ``textHead`` on the wire: the line up to its metadata (`display_cut`), clipped to
    `TEXT_LIMIT`, without its head (``heads``: ``%name = shape opcode``) where it opens
    with it (1, or True), or with it after ``ROOT `` (2); else whole (0, or False).

    A body of parser's rows (`HloInstruction`: ``_end`` -1, attributes not split) in order
    in one ASCII text is read in place, a column at a time (`_texts_in_place`): lines of
    one metadata object mostly end alike (``keys``: each line's metadata, a number or an
    id; by default its id), so one line's rest (the text after its operands) per key is
    cut (`_rest_cuts`), and every line that ends in that rest is cut as it is; the others
    as their own rest tells (`_texts_by_rest`). Only its text is made of each line. Any
    other line is cut out of its text (`_line_text`). ``parsed``: the text the lines all
    are the parser's rows of, unchanged, where their computations say so (`parsed_text`:
    then no record is asked its text, end and attributes).

        >>> from tpukit.hlo.text import parse_hlo
        >>> comp = parse_hlo(
        ...     "HloModule m\\n%fused {\\n  %p = f32[4]{0} parameter(0)\\n"
        ...     '  ROOT %e = f32[4]{0} negate(f32[4]{0} %p), metadata={op_name="a/neg"}\\n}\\n'
        ...     "ENTRY %main {\\n  %x = f32[4]{0} parameter(0)\\n"
        ...     "  ROOT %f = f32[4]{0} fusion(f32[4]{0} %x), kind=kLoop, calls=%fused\\n}\\n"
        ... ).computations["fused"]
        >>> body_texts(comp.instructions, ["%p = f32[4]{0} parameter", "%e = f32[4]{0} negate"])
        (['(0)', '(f32[4]{0} %p)'], [True, 2])
    """
    count = len(instructions)
    texts: list[str] = [""] * count
    kinds = [0] * count
    if keys is None:
        keys = list(map(id, map(_METADATA, instructions)))
    left = _texts_in_place(instructions, heads, keys, texts, kinds, parsed)
    tails: dict[str, str] = {}
    for k in left:
        texts[k], kinds[k] = _line_text(instructions[k], heads[k], tails)
    return texts, kinds


def _texts_in_place(
    instructions: list[HloInstruction],
    heads: list[str],
    keys: list[int],
    texts: list[str],
    kinds: list[int],
    parsed: str | None = None,
) -> list[int] | range:
    """`body_texts` of the lines read in place, written into ``texts`` and ``kinds``: the
    rows left to read one by one (all of them where they are not one text's rows).

    Each key's last line's rest is cut once; a line ends alike where its text from its
    rest on is that rest and a line break (``str.startswith``). Its cut then holds where
    no ``, metadata={`` (nor a line break) lies before it: checked on all the texts and
    heads at once (joined), not line by line."""
    count = len(instructions)
    ats = list(map(_AT, instructions))
    source = _one_text(instructions, ats, parsed)
    if source is None:
        return range(count)
    if not source.isascii():
        return _texts_by_rest(instructions, heads, texts, kinds, source)
    rest_ats = list(map(_REST_AT, instructions))
    rests_at = list(map(add, ats, rest_ats))
    last = dict(zip(keys, rests_at))  # (each key's last line: where its rest starts)
    froms = list(last.values())
    ends = list(map(source.find, repeat("\n", len(froms)), froms))
    if min(ends) < 0:  # (the text's last line: no line break)
        return _texts_by_rest(instructions, heads, texts, kinds, source)
    rests = list(map(source.__getitem__, map(slice, froms, ends)))
    known = _rest_cuts(list(dict.fromkeys(rests)))
    offsets = list(map(known.__getitem__, rests))
    endings: dict[int, str | tuple] = dict(zip(last, map(add, rests, repeat("\n"))))
    for key in compress(last, map((0).__gt__, offsets)):  # (its cut not a place)
        endings[key] = ()  # (no text starts with none of no prefixes)
    alike = list(map(source.startswith, map(endings.__getitem__, keys), rests_at))
    if max(offsets) > 0:  # (metadata after other attributes, or none)
        cuts = list(map(add, rests_at, map(dict(zip(last, offsets)).__getitem__, keys)))
    else:
        cuts = rests_at
    longest = max(rest_ats) + max(max(offsets), 0)  # (a bound: the lines clipped are read alone)
    if longest > TEXT_LIMIT and max(map(sub, cuts, ats)) > TEXT_LIMIT:
        alike = list(map(and_, alike, map(TEXT_LIMIT.__ge__, map(sub, cuts, ats))))
    _cut_out(source, heads, ats, cuts, texts, kinds)
    odd = [] if all(alike) else list(compress(range(count), map(not_, alike)))
    checked = (texts, heads) if not odd else (compress(texts, alike), compress(heads, alike))
    joined = "\0".join(chain.from_iterable(checked))  # (each line's text from its start on)
    if ", metadata={" in joined or "\n" in joined:
        return _texts_by_rest(instructions, heads, texts, kinds, source)
    if not odd:
        return []
    rows = [instructions[k] for k in odd]
    row_texts, row_kinds = [""] * len(odd), [0] * len(odd)
    row_left = _texts_by_rest(rows, [heads[k] for k in odd], row_texts, row_kinds, source)
    for k, text, kind in zip(odd, row_texts, row_kinds):
        texts[k], kinds[k] = text, kind
    return [odd[k] for k in row_left]


def _one_text(
    instructions: list[HloInstruction], ats: list[int], parsed: str | None = None
) -> str | None:
    """The text whose lines ``instructions`` all are, as the parser's rows (``_end`` -1,
    attributes not split; ``ats``: where each starts); None where they are not.
    ``parsed``: their text where the computations they come from say they are its rows
    (`parsed_text`), then not asked of each."""
    source = instructions[0]._text if instructions else None
    if source is None or min(ats) < 0:
        return None
    if source is parsed:
        return source
    if (
        set(map(_TEXT, instructions)) != {source}
        or set(map(_END, instructions)) != {-1}
        or list(map(_ATTRIBUTES, instructions)).count(None) != len(instructions)
    ):
        return None
    return source


def _texts_by_rest(
    instructions: list[HloInstruction],
    heads: list[str],
    texts: list[str],
    kinds: list[int],
    source: str,
) -> list[int]:
    """`_texts_in_place` of the rows of ``source`` (`_one_text`), each cut as its own rest
    tells: the stretch of text its lines fill is checked ASCII once, and where no
    ``, metadata={`` starts before a line's rest, its cut follows from the rest alone
    (`_rest_cuts`), worked out once per distinct rest."""
    count = len(instructions)
    ats = list(map(_AT, instructions))
    ends = list(map(source.find, repeat("\n", count), ats))
    rests_at = list(map(add, ats, map(_REST_AT, instructions)))
    # Each line's first ", metadata={": none (most lines of many modules), or in its rest
    # (cut there where it ends the line and is plain: `_rest_cuts`, once per distinct rest),
    # or before it (the line is read alone).
    marks = list(map(source.find, repeat(", metadata={", count), ats, ends))
    cuts = ends[:]  # (where each text ends in the module's text)
    left = []
    if max(marks) >= 0:
        rows = list(compress(range(count), map((-1).__ne__, marks)))
        rests = [source[rests_at[k] : ends[k]] for k in rows]
        known = _rest_cuts(list(dict.fromkeys(rests)))
        for k, rest in zip(rows, rests):
            in_rest = known[rest]
            if marks[k] < rests_at[k] or in_rest < 0:
                left.append(k)
            else:
                cuts[k] = rests_at[k] + in_rest
    if not source.isascii() or min(ends) < 0 or max(map(sub, cuts, ats)) > TEXT_LIMIT:
        lines = map(source.__getitem__, map(slice, ats, ends))
        ascii = repeat(True) if source.isascii() else map(str.isascii, lines)
        odd = [
            k
            for k, (at, end, cut, fine) in enumerate(zip(ats, ends, cuts, ascii))
            if end < 0 or not fine or cut - at > TEXT_LIMIT
        ]
        left = sorted(set(left).union(odd))
    _cut_out(source, heads, ats, cuts, texts, kinds)
    return left


def _cut_out(
    source: str,
    heads: list[str],
    ats: list[int],
    cuts: list[int],
    texts: list[str],
    kinds: list[int],
) -> None:
    """Each line's text, from ``ats`` to ``cuts`` in ``source``, written into ``texts``:
    without its head where it opens with it (``kinds`` True, which the payload's array
    reads as 1), or with it after ``ROOT `` (2); else whole (False)."""
    starts = list(map(add, ats, map(len, heads)))
    texts[:] = map(source.__getitem__, map(slice, starts, cuts))
    opens = list(map(source.startswith, heads, ats, cuts))
    kinds[:] = opens
    if not all(opens):  # (the root's head, after ``ROOT ``, or none)
        for k in compress(range(len(opens)), map(not_, opens)):
            at, cut = ats[k], cuts[k]
            if source.startswith("ROOT ", at, cut) and source.startswith(heads[k], at + 5, cut):
                texts[k], kinds[k] = source[starts[k] + 5 : cut], 2
            else:
                texts[k] = source[at:cut]


def _line_text(instr: HloInstruction, head: str, tails: dict[str, str]) -> tuple[str, int]:
    """`body_texts` of one line, cut out of its text (`HloInstruction.text`)."""
    text = instr.text
    cut = display_cut(instr, tails, text)
    line = cut if cut.__class__ is str else text[:cut]  # type: ignore[index]
    if len(line) > TEXT_LIMIT:
        line = clip(line, TEXT_LIMIT)
    if line.startswith(head):
        return line[len(head) :], 1
    if line.startswith("ROOT ") and line.startswith(head, 5):
        return line[len(head) + 5 :], 2
    return line, 0


def _rest_cuts(rests: list[str]) -> dict[str, int]:
    """`rest_cut` of each of ``rests`` (distinct), most at once: a rest whose metadata is
    last and plain (no brace, backslash or ``metadata`` inside, its quotes paired: what
    `_graph_nodes._metadata_ends` reads at once) is cut where its metadata starts, found
    a column at a time; any other is asked alone.

        >>> _rest_cuts([', metadata={op_name="a"}', ", index=1", ', k={1}, metadata={a="{"}'])
        {', metadata={op_name="a"}': 0, ', index=1': 9, ', k={1}, metadata={a="{"}': 7}
    """
    count = len(rests)
    at = list(map(str.find, rests, repeat(", metadata={", count)))
    found = dict(zip(rests, map(len, rests)))  # (no metadata: the whole rest)
    some = list(compress(range(count), map((-1).__ne__, at)))
    if not some:
        return found
    marked = list(map(rests.__getitem__, some))
    starts = list(map(at.__getitem__, some))
    found.update(zip(marked, starts))
    if _all_plain(marked, starts):
        return found
    insides = list(
        map(str.__getitem__, marked, map(slice, map(add, starts, repeat(12)), repeat(-1)))
    )
    odd = [
        "{" in inside or "}" in inside or "\\" in inside or "metadata" in inside
        for inside in insides
    ]
    odd = list(map(or_, odd, map(not_, map(str.endswith, marked, repeat("}")))))
    firsts = map(str.find, marked, repeat("metadata"))
    odd = list(map(or_, odd, map(ne, firsts, map(add, starts, repeat(2)))))
    odd = list(map(or_, odd, map(bool, map((1).__and__, map(str.count, insides, repeat('"'))))))
    for rest in compress(marked, odd):  # (asked alone)
        found[rest] = rest_cut(rest)
    return found


def _all_plain(marked: list[str], starts: list[int]) -> bool:
    """Whether each of ``marked`` (rests whose first ``, metadata={`` is at ``starts``)
    ends in plain metadata as `_rest_cuts` reads one, checked on them joined (most
    modules' are, all of them): from its ``, metadata={`` on, a rest ends in ``}``, holds
    ``metadata`` once, and kept to its braces, quotes and backslashes (the rests' UTF-8
    joined, `_NOT_MARKS` dropped by one ``bytes.translate``; each distinct leftover
    matched once) reads ``{``, paired quotes, ``}``.

        >>> _all_plain([', metadata={a="b"}', ', k=1, metadata={}'], [0, 5])
        True
        >>> _all_plain([', metadata={a="b}"}'], [0]), _all_plain([', metadata={a="}'], [0])
        (False, False)
        >>> _all_plain([', metadata={a="b"} '], [0]), _all_plain([', metadata={a="\\\\"}'], [0])
        (False, False)
    """
    count = len(marked)
    tails = (
        marked
        if not any(starts)
        else list(map(str.__getitem__, marked, map(slice, starts, repeat(None))))
    )
    joined = "\0".join(tails)
    try:
        marks = joined.encode().translate(None, _NOT_MARKS).split(b"\0")
    except UnicodeEncodeError:  # (a lone surrogate)
        return False
    return (
        len(marks) == count  # (no NUL inside: each ends where a separator is)
        and joined.count("}\0") == count - 1 and joined.endswith("}")
        and all(map(_PLAIN_MARKS.fullmatch, set(marks)))
        and "\0".join(marked).count("metadata") == count  # (the one after the comma)
    )  # fmt: skip
