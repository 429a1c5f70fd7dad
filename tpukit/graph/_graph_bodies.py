"""Fusion bodies the page builds itself: which, and what their payload carries.

Fused computations hold most of a large module's instructions (three quarters of a
400,000-instruction training step's nodes), and a user opens few of them. Building each
body's nodes in Python (the tree's ids, edges, order; the payload's columns of each
node) was a third of the graph's time. A page's tree (`GraphTree` with ``lazy``) leaves
out the bodies `builds_in_page` accepts: the fusion is a leaf whose ``held`` instructions
come in the payload's body columns (`body_columns`), and the page (``insertBodies`` in
``assets/graph_bodies.js``) puts each body's nodes in place as it loads: the same nodes,
ids, labels, texts, edges and costs as a tree built with them.

The payload carries, per body instruction (program order): its name (``bodyLabel``), its
HLO text as the wire writes an instruction's (``bodyText``, ``bodyHead``: `body_texts`,
decoded when the panel shows one), its opcode and shape (indices into ``bodyOps`` and
``bodyShapes``; its colour category is its opcode's, ``bodyOpCat``), its operands
(``bodyArgs`` of them in ``bodyFrom``: indices into the body, -1 for a name it does not
hold), the bytes it makes (``bodyMade``: its edges'), its metadata (``bodyMeta``: the
metadata objects' interned op name, source label and path, and the JAX op it names, in
``bodyWorks``, 0 for none: four numbers apiece in ``bodyMetas``); per body, its root and
parameters (``bodyRoot``, ``bodyParams`` in parameter order) and where its edges go among
the blocks. Its FLOPs and bytes as tpukit costs them (`_graph_costs` of the same
instruction in a tree built with it) come only where the page cannot tell them: the FLOPs
of dots and convolutions (rows ``bodyFlopsAt``, figures ``bodyFlopsOf``; any other's are
0, a reduce's too: `instruction_flops` counts only what runs as program), the bytes of the rows
``bodyBytesAt`` (``bodyBytesOf``). Any other instruction's bytes follow from its opcode
(`bytes_rule`, in ``bodyOpBytes``): none, or (an array, its operands read whole) those it
makes and reads, which the page sums. (Three quarters of a large module's instructions
are in these bodies: a column left out is a number per instruction Python neither works
out nor writes.) What the page works out itself is where each node goes (a parameter or
constant just before its first user, as `_graph_data._edges_and_order` orders them), the
edges and those sums; and, in a body of more than `MAX_CHILDREN` instructions
(``bodyMaxChildren``), the parts Python's tree cuts them into (`_graph_parts`'s
``_chunk``: consecutive, while more than that), each with its members' sums and named by
its work (`_graph_nodes.totals_label`: the JAX op its metadata names, else its opcode,
with Python's rounding of its figures).

A body is left to the page where its nodes follow from its instructions alone: a fused
computation none of whose instructions runs another computation as program (a reduce's
or sort's region, applied per element, is in no tree: `run_computations`) or varies in
category (a fusion, a library call: Python builds those as before). Its lines are read
once, by the payload (`body_texts`): the tree does not read them.
"""

from __future__ import annotations

import math
import re
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from itertools import accumulate, chain, compress, repeat
from operator import add, and_, attrgetter, ne, not_, or_, sub

from tpukit.graph._graph_nodes import _jax_op, clip, display_cut, rest_cut
from tpukit.graph._graph_parts import MAX_CHILDREN
from tpukit.graph._graph_schema import CATEGORIES
from tpukit.hlo.analysis import (
    FLOP_OPS,
    OWN_BYTES,
    SUMMED_BYTES,
    bytes_rule,
    bytes_with_operands,
    instruction_flops,
    op_category,
    run_computations,
)
from tpukit.hlo.text import (
    HloComputation,
    HloInstruction,
    HloMetadata,
    HloModule,
    parsed_text,
)

#: The longest shape and HLO text a node carries (`_graph_payload`'s limits).
SHAPE_LIMIT, TEXT_LIMIT = 400, 4000
#: Opcodes whose category depends on more than the opcode, or that run computations.
_VARIES = frozenset({"fusion", "custom-call"})
#: A stand-in opcode: `_jax_op` gives it back where a metadata names no JAX op.
_NO_OP = "\0opcode"
_NAME, _OPCODE, _SHAPE, _OPERANDS = (
    attrgetter(name) for name in ("name", "opcode", "shape", "operands")
)
_CALLED, _METADATA = attrgetter("called_computations"), attrgetter("metadata")
_AT, _TEXT, _END = attrgetter("_at"), attrgetter("_text"), attrgetter("_end")
_REST_AT, _ATTRIBUTES = attrgetter("_rest_at"), attrgetter("_attributes")
#: The lines `body_columns` reads at a time (their places in the text are an int object
#: each: a large module's, all at once, were 1.8 times its text's size).
_TEXTS_AT_ONCE = 8192  # (a line's head: its name, shape and opcode)
#: Every byte but a brace, a quote, a backslash and NUL (`_all_plain` drops them), and what
#: plain metadata keeps then: its braces around paired quotes.
_NOT_MARKS = bytes(sorted(set(range(256)).difference(b'{}"\\\0')))
_PLAIN_MARKS = re.compile(rb'\{(?:"")*+\}')
#: The payload's body columns of whole numbers (typed arrays on the wire).
BODY_COLUMNS = (
    "bodyOwner", "bodySize", "bodyOp", "bodyShape", "bodyArgs", "bodyFrom",
    "bodyMade", "bodyFlopsAt", "bodyFlopsOf", "bodyBytesAt", "bodyBytesOf", "bodyRoot",
    "bodyParams", "bodyBlock", "bodyHead", "bodyMeta", "bodyMetas",
)  # fmt: skip


def builds_in_page(comp: HloComputation, module: HloModule) -> bool:
    """Whether the page can build ``comp``'s nodes itself (see the module docstring): a
    fused computation none of whose instructions runs another computation as program or
    varies in category. Its lines are not read here: `body_columns` reads each once.

        >>> from tpukit.hlo.text import parse_hlo
        >>> module = parse_hlo('''HloModule m
        ... %fused {
        ...   %p = f32[4]{0} parameter(0)
        ...   ROOT %e = f32[4]{0} exponential(f32[4]{0} %p)
        ... }
        ... ENTRY %main {
        ...   %x = f32[4]{0} parameter(0)
        ...   ROOT %f = f32[4]{0} fusion(f32[4]{0} %x), kind=kLoop, calls=%fused
        ... }
        ... ''')
        >>> builds_in_page(module.computations["fused"], module)
        True
    """
    instructions = comp.instructions
    if comp.kind != "fusion" or not _VARIES.isdisjoint(map(_OPCODE, instructions)):
        return False
    # (an instruction that only applies a computation per element, a reduce's region, is a
    # leaf in the whole tree: it runs none as program)
    calling = compress(instructions, map(_CALLED, instructions))
    return not any(run_computations(instr, module) for instr in calling)


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
    starts = list(map(add, ats, map(len, heads)))
    texts[:] = map(source.__getitem__, map(slice, starts, cuts))
    opens = list(map(source.startswith, heads, ats, cuts))
    kinds[:] = opens  # (True: 1, as the payload's array takes it)
    if not all(opens):  # (the root's head, after ``ROOT ``, or none)
        for k in compress(range(count), map(not_, opens)):
            at, cut = ats[k], cuts[k]
            if source.startswith("ROOT ", at, cut) and source.startswith(heads[k], at + 5, cut):
                texts[k], kinds[k] = source[starts[k] + 5 : cut], 2
            else:
                texts[k] = source[at:cut]
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
    starts = list(map(add, ats, map(len, heads)))
    texts[:] = map(source.__getitem__, map(slice, starts, cuts))
    opens = list(map(source.startswith, heads, ats, cuts))
    kinds[:] = map(int, opens)
    if not all(opens):  # (the root's head, after ``ROOT ``, or none)
        for k in compress(range(count), map(not_, opens)):
            at, cut = ats[k], cuts[k]
            if source.startswith("ROOT ", at, cut) and source.startswith(heads[k], at + 5, cut):
                texts[k], kinds[k] = source[starts[k] + 5 : cut], 2
            else:
                texts[k] = source[at:cut]
    return left


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


def body_nodes(size: int) -> int:
    """The nodes a fused computation of ``size`` instructions puts under its fusion in the
    whole tree: its instructions and, past `MAX_CHILDREN`, the parts they are cut into
    (`_graph_parts.PartsMixin._chunk`, while there are more than `MAX_CHILDREN`).

        >>> body_nodes(40), body_nodes(1020), body_nodes(1601)
        (40, 1046, 1644)
    """
    nodes = count = size
    while count > MAX_CHILDREN:
        width = math.ceil(count / math.ceil(count / MAX_CHILDREN))
        count = math.ceil(count / width)
        nodes += count
    return nodes


def body_columns(
    module: HloModule,
    bodies: list[tuple[int, HloComputation]],
    blocks: dict[int, int],
    strings_of: Callable[[HloMetadata], tuple[int, int, int]],
) -> dict:
    """The payload's columns of the bodies left to the page, ``(fusion node, body)`` in
    node order: `BODY_COLUMNS`, ``bodyLabel`` and ``bodyText`` (each instruction's name and
    line up to its metadata, line columns) and
    the tables ``bodyOps`` and ``bodyShapes``. Instructions come in program order.
    ``blocks``: where each fusion's edges go among the blocks of a tree built with them
    (``bodyBlock``: the page draws edges in that order). ``strings_of``: the interned op
    name, source label and source path of a metadata (the payload's ``scope``,
    ``location`` and ``source``), asked once per metadata object."""
    metas: list[int] = []  # (each metadata object's strings and work, four numbers apiece)
    works: dict[str, int] = {"": 0}  # (the JAX op a metadata names: 0, none)
    by_meta: dict[int, int] = {}
    shapes: dict[int, int] = {}
    shape_texts: dict[str, int] = {}
    categories = {name: k for k, name in enumerate(CATEGORIES)}
    by_op: dict[str, int] = {}  # (its id)
    own_ops: set[str] = set()  # (the opcodes whose `bytes_rule` is `OWN_BYTES`)
    summed_ops: set[str] = set()  # (those whose rule is `SUMMED_BYTES`: not a tuple's)
    shape_bytes: dict[int, int] = {}  # (by the shape's id: its bytes, its text)
    shape_written: dict[int, str] = {}
    tuples: set[int] = set()  # (the ids of tuple shapes)
    works_of: dict[str, int] = {}  # (each op name's JAX op, in ``works``)
    op_cat: list[int] = []  # (each opcode's category: by opcode alone in these bodies)
    op_bytes: list[int] = []  # (each opcode's `bytes_rule`)
    # Each column of every body at once (`map` over all their instructions, no Python step
    # per instruction: 23,000 bodies of a dozen each in a large training step): each
    # opcode, shape and metadata object is worked out once.
    comps = [comp for _, comp in bodies]
    owner = [node for node, _ in bodies]
    block = [blocks[node] for node in owner]
    size = [len(comp.instructions) for comp in comps]
    instructions = list(chain.from_iterable(comp.instructions for comp in comps))
    count = len(instructions)
    names = list(map(_NAME, instructions))  # (the labels: read as the page loads)
    opcodes = list(map(_OPCODE, instructions))
    for opcode in dict.fromkeys(opcodes):
        category = op_category(opcode)
        op_cat.append(categories[category if category in categories else "other"])
        op_bytes.append(bytes_rule(opcode))
        by_op[opcode] = len(by_op)
        if op_bytes[-1] == OWN_BYTES:
            own_ops.add(opcode)
        elif op_bytes[-1] == SUMMED_BYTES:
            summed_ops.add(opcode)
    op = list(map(by_op.__getitem__, opcodes))
    kept = list(map(_SHAPE, instructions))
    sids = list(map(id, kept))
    for sid, obj in dict(zip(sids, kept)).items():
        written = clip(str(obj), SHAPE_LIMIT)
        shapes[sid] = shape_texts.setdefault(written, len(shape_texts))
        shape_bytes[sid], shape_written[sid] = obj.nbytes, written
        if obj.dtype == "tuple":
            tuples.add(sid)
    shape = list(map(shapes.__getitem__, sids))
    made = list(map(shape_bytes.__getitem__, sids))
    # (operands as `_graph_data._edges_and_order` finds them: indices into their body, -1
    # for a name it does not hold, for its place among the operands)
    operands = list(map(_OPERANDS, instructions))
    args = list(map(len, operands))
    sources: list[int] = []
    roots: list[int] = []
    params: list[int] = []
    base = 0
    for comp, held in zip(comps, size):
        local = dict(zip(names[base : base + held], range(held)))
        roots.append(local[comp.root.name])  # type: ignore[union-attr]
        params += [local[p.name] for p in comp.parameters]
        try:
            sources += list(
                map(local.__getitem__, chain.from_iterable(operands[base : base + held]))
            )
        except KeyError:  # (a name the body does not hold as written: looked up, or -1)
            for name in chain.from_iterable(operands[base : base + held]):
                source = local.get(name)
                if source is None:
                    found = comp.get(name) if name[:1] == "%" else None
                    source = -1 if found is None else local[found.name]
                sources.append(source)
        base += held
    # (dots' and convolutions' FLOPs: an instruction that applies a computation, a
    # reduce, has none, `instruction_flops` counts only what runs as program)
    flops_at = list(compress(range(count), map(FLOP_OPS.__contains__, opcodes)))
    flops = [instruction_flops(instructions[k], module) for k in flops_at]
    # (the bytes of the rows whose bytes are neither none nor a sum the page works out)
    given = list(compress(range(count), map(own_ops.__contains__, opcodes)))
    if tuples:
        summed = map(summed_ops.__contains__, opcodes)
        given += compress(range(count), map(and_, map(tuples.__contains__, sids), summed))
    bytes_at = sorted(given)
    nbytes = []
    if given:
        starts = list(accumulate(args, initial=0))
        firsts = list(accumulate(size, initial=0))  # (each body's first row)
        for k in bytes_at:
            first = firsts[bisect_right(firsts, k) - 1]
            read = sum(made[first + s] for s in sources[starts[k] : starts[k + 1]] if s >= 0)
            nbytes.append(bytes_with_operands(instructions[k], module, read))
    kept = list(map(_METADATA, instructions))
    mids = list(map(id, kept))
    for mid, meta in dict(zip(mids, kept)).items():
        by_meta[mid] = len(metas) // 4
        metas += strings_of(meta)
        work = works_of.get(meta.op_name)  # (a part's label names its ops by it)
        if work is None:
            found_work = _jax_op(meta.op_name, _NO_OP)
            work = works_of[meta.op_name] = (
                0 if found_work is _NO_OP else works.setdefault(found_work, len(works))
            )
        metas.append(work)
    meta_of = list(map(by_meta.__getitem__, mids))
    del kept, mids  # (an int object each: not held while the texts are made)
    # (each line's text and head, `_TEXTS_AT_ONCE` lines at a time: a line's head, as the
    # page puts it back, is ``%name = shape opcode``; lines of one metadata object, its
    # number the key, mostly end alike: `body_texts`)
    lines: list[str] = []
    head: list[int] = []
    parsed = list(map(parsed_text, comps))  # (their rows' text, where the parser's as read)
    firsts = list(accumulate(size, initial=0))  # (each body's first row)
    for at in range(0, count, _TEXTS_AT_ONCE):
        end = at + _TEXTS_AT_ONCE
        shown = map(shape_written.__getitem__, sids[at:end])
        heads = [f"%{a} = {b} {c}" for a, b, c in zip(names[at:end], shown, opcodes[at:end])]
        held = parsed[bisect_right(firsts, at) - 1 : bisect_left(firsts, end)]
        known = held[0] if all(text is held[0] for text in held) else None
        texts, kinds = body_texts(instructions[at:end], heads, meta_of[at:end], known)
        lines += texts
        head += kinds
    ids = {
        "bodyOwner": owner, "bodySize": size, "bodyOp": op, "bodyShape": shape,
        "bodyArgs": args, "bodyFrom": sources, "bodyRoot": roots, "bodyParams": params,
        "bodyBlock": block, "bodyHead": head, "bodyMeta": meta_of, "bodyMetas": metas,
        "bodyFlopsAt": flops_at, "bodyBytesAt": bytes_at,
    }  # fmt: skip
    figures = {"bodyMade": made, "bodyFlopsOf": flops, "bodyBytesOf": nbytes}
    return {
        **{name: _ints(column) for name, column in ids.items()},
        **{name: _figures(column) for name, column in figures.items()},
        "bodyOps": list(by_op), "bodyOpCat": op_cat, "bodyOpBytes": op_bytes,
        "bodyShapes": list(shape_texts),
        "bodyText": lines, "bodyLabel": names, "bodyWorks": list(works),
        "bodyMaxChildren": MAX_CHILDREN,
    }  # fmt: skip


def _ints(column: list[int]) -> array:
    """``array("i", column)`` made through `struct` (packed at once, not checked number by
    number as `array` converts each: two thirds of the time on a large module's columns).

        >>> _ints([3, -1, 7])
        array('i', [3, -1, 7])
    """
    return array("i", struct.pack(f"{len(column)}i", *column))


def _figures(column: list[int]) -> array | list[int]:
    """A column of bytes or FLOPs as 64-bit ints, or as it is where one is beyond them."""
    try:
        return array("q", column)
    except OverflowError:
        return column
