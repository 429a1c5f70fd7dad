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
once, by the payload (`_body_texts.body_texts`): the tree does not read them.
"""

from __future__ import annotations

import math
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from itertools import accumulate, chain, compress
from operator import and_, attrgetter

from tpukit.graph._body_texts import body_texts
from tpukit.graph._graph_nodes import _jax_op, clip
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
    HloMetadata,
    HloModule,
    parsed_text,
)

#: The longest shape a node carries (`_graph_payload`'s limit; a text's: `_body_texts`).
SHAPE_LIMIT = 400
#: Opcodes whose category depends on more than the opcode, or that run computations.
_VARIES = frozenset({"fusion", "custom-call"})
#: A stand-in opcode: `_jax_op` gives it back where a metadata names no JAX op.
_NO_OP = "\0opcode"
_NAME, _OPCODE, _SHAPE, _OPERANDS = (
    attrgetter(name) for name in ("name", "opcode", "shape", "operands")
)
_CALLED, _METADATA = attrgetter("called_computations"), attrgetter("metadata")
#: The lines `body_columns` reads at a time (their places in the text are an int object
#: each: a large module's, all at once, were 1.8 times its text's size).
_TEXTS_AT_ONCE = 8192  # (a line's head: its name, shape and opcode)
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
