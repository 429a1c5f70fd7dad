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
HLO line up to its metadata without the head its name, shape and opcode give (``bodyText``,
as the wire's ``text``; ``bodyHead`` 2 after ``ROOT ``, else 1: the panel's text, decoded
when one is shown), its opcode and shape (indices into ``bodyOps`` and ``bodyShapes``; its
colour category is its opcode's, ``bodyOpCat``), its operands (``bodyArgs`` of them in
``bodyFrom``: indices into the body, -1 for a name it does not hold), the bytes it makes
(``bodyMade``: its edges'), its metadata (``bodyMeta``: the metadata objects' interned op
name, source label and path, and the JAX op it names, in ``bodyWorks``, 0 for none: four
numbers apiece in ``bodyMetas``); per body, its root
and parameters (``bodyRoot``, ``bodyParams`` in parameter order) and where its edges go
among the blocks. Its FLOPs and bytes as tpukit costs them (`_graph_costs` of the same
instruction in a tree built with it) come only where the page cannot tell them: the FLOPs
of dots and convolutions, and any of an instruction that applies a computation (rows
``bodyFlopsAt``, figures ``bodyFlopsOf``; any other's are 0), the bytes of the rows ``bodyBytesAt`` (``bodyBytesOf``). Any other instruction's bytes
follow from its opcode (`bytes_rule`, in ``bodyOpBytes``): none, or (an array, its
operands read whole) those it makes and reads, which the page sums. (Three quarters of a
large module's instructions are in these bodies: a column left out is a number per
instruction Python neither works out nor writes.) What the page works out itself is
where each node goes (a parameter or constant just before its first user, as
`_graph_data._edges_and_order` orders them), the edges and those sums; and, in a body of
more than `MAX_CHILDREN` instructions (``bodyMaxChildren``), the parts Python's tree cuts
them into (`_graph_parts.PartsMixin._chunk`: consecutive, while more than that), each
with its members' sums and named by its work (`_graph_nodes.totals_label`: the JAX op its
metadata names, else its opcode, with Python's rounding of its figures).

A body is left to the page only where the page's reading of its lines is exact: a
fused computation none of whose instructions runs another computation as program (a
reduce's or sort's region, applied per element, is in no tree: `_runs_program`) or
varies in category (a fusion, a library call), every line
ASCII, its metadata (if any) last (the panel's text is the line up to it: `display_cut`;
its op name and source go as the payload's interned ``bodyScope``, ``bodyLocation``,
``bodySource``), within the panel's length, and opening with the head the wire leaves
out (``%name = shape opcode``, or after ``ROOT ``). Any other body is built as before.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable

from tpukit.graph._graph_nodes import _jax_op, clip, display_cut
from tpukit.graph._graph_parts import MAX_CHILDREN
from tpukit.graph._graph_schema import CATEGORIES
from tpukit.hlo.analysis import (
    FLOP_OPS,
    OWN_BYTES,
    RUNS_COMPUTATIONS,
    SUMMED_BYTES,
    bytes_rule,
    bytes_with_operands,
    instruction_flops,
    op_category,
)
from tpukit.hlo.text import HloComputation, HloInstruction, HloMetadata, HloModule

#: The longest shape and HLO text a node carries (`_graph_payload`'s limits).
SHAPE_LIMIT, TEXT_LIMIT = 400, 4000
#: Opcodes whose category depends on more than the opcode, or that run computations.
_VARIES = frozenset({"fusion", "custom-call"})
#: The roles of the computations an instruction applies per element (a reduce's or a
#: sort's ``to_apply``, a select-and-scatter's ``select`` and ``scatter``): no tree holds
#: them (`run_computations` leaves them out), so its node is a leaf as any other.
_APPLIED = frozenset({"to_apply", "select", "scatter"})
#: A stand-in opcode: `_jax_op` gives it back where a metadata names no JAX op.
_NO_OP = "\0opcode"
#: The payload's body columns of whole numbers (typed arrays on the wire).
BODY_COLUMNS = (
    "bodyOwner", "bodySize", "bodyOp", "bodyShape", "bodyArgs", "bodyFrom",
    "bodyMade", "bodyFlopsAt", "bodyFlopsOf", "bodyBytesAt", "bodyBytesOf", "bodyRoot",
    "bodyParams", "bodyBlock", "bodyHead", "bodyMeta", "bodyMetas",
)  # fmt: skip


def builds_in_page(comp: HloComputation, shapes: dict[int, str]) -> bool:
    """Whether the page can build ``comp``'s nodes itself (see the module docstring).

    ``shapes`` keeps each shape's text by ``id`` across calls (shapes are shared).

    A large module's group stage asks this of every fusion of its ENTRY (23,000 bodies,
    300,000 lines at 400,000 instructions): most bodies are answered at once
    (`_reads_at_once`), the others line by line (`_reads_line_by_line`), with the same
    answer.

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
        >>> builds_in_page(module.computations["fused"], {})
        True
    """
    if comp.kind != "fusion":
        return False
    return _reads_at_once(comp, shapes) or _reads_line_by_line(comp, shapes)


def _reads_at_once(comp: HloComputation, shapes: dict[int, str]) -> bool:
    """Whether every line of ``comp`` passes `builds_in_page`'s checks, the line-wide ones
    made once over the stretch of the module's text the lines fill; False where that
    cannot tell (then `_reads_line_by_line` answers).

    The parser keeps each line as its place in the module's text (`HloInstruction`'s
    ``_text``, ``_at``; ``_end`` -1: up to its line break). Where a body's lines lie in
    order in one text, the stretch from the first to the end of the last holds them all:
    if it is ASCII and holds no ``, metadata={``, so does every line, and each line's text
    for the panel is the whole line; a line is no longer than the gap to the next one's
    start (each gap, and the last line, at most `TEXT_LIMIT`). What is left per line is
    its opcode and its head (``%name = shape opcode``, after ``ROOT `` on the root line),
    read in place (it holds no line break: the parser's names, shapes and opcodes have
    none): no string of the line is made (a new string per line and the checks on it
    were most of the cost)."""
    instructions = comp.instructions
    if not instructions:
        return False
    source, first, last = instructions[0]._text, instructions[0]._at, instructions[-1]._at
    end = source.find("\n", last) if 0 <= first <= last else -1
    if end < 0 or end - last > TEXT_LIMIT or end - first > TEXT_LIMIT * len(instructions):
        return False
    lines = source[first:end]  # (checked first: a body whose lines have metadata, as a
    if not lines.isascii() or ", metadata={" in lines:  # real module's do, is read by line)
        return False
    at = -1
    for instr in instructions:
        opcode = instr.opcode
        if (instr.called_computations and _runs_program(instr)) or opcode in _VARIES:
            return False
        start = instr._at
        if instr._text is not source or instr._end != -1 or not at < start <= last:
            return False  # (not the parser's row in that text, or out of order)
        if start - at > TEXT_LIMIT and at >= 0:  # (the line before may be too long)
            return False
        at = start
        shape = shapes.get(id(instr.shape))
        if shape is None:
            shape = shapes[id(instr.shape)] = clip(str(instr.shape), SHAPE_LIMIT)
        if instr.is_root and source.startswith("ROOT ", start):
            start += 5
        if not source.startswith(f"%{instr.name} = {shape} {opcode}", start):
            return False
    return True


def _reads_line_by_line(comp: HloComputation, shapes: dict[int, str]) -> bool:
    """`builds_in_page`, each line cut out of the text (`HloInstruction.text`)."""
    tails: dict[str, str] = {}
    for instr in comp.instructions:
        opcode = instr.opcode
        if (instr.called_computations and _runs_program(instr)) or opcode in _VARIES:
            return False
        text = instr.text
        if not text.isascii() or "\n" in text:
            return False
        cut = text.find(", metadata={")
        if cut < 0:
            cut = len(text)
        else:
            found = display_cut(instr, tails, text)
            if found != cut and (found.__class__ is int or found != text[:cut]):
                return False
        if cut > TEXT_LIMIT:
            return False
        shape = shapes.get(id(instr.shape))
        if shape is None:
            shape = shapes[id(instr.shape)] = clip(str(instr.shape), SHAPE_LIMIT)
        head = f"%{instr.name} = {shape} {opcode}"
        if not (
            text.startswith(head, 0, cut)
            or (text.startswith("ROOT ", 0, cut) and text.startswith(head, 5, cut))
        ):
            return False
    return True


def _runs_program(instr: HloInstruction) -> bool:
    """Whether ``instr`` (which calls computations) runs one as program (a loop, a call:
    its node holds the computation's in the whole tree), not only applies one per element
    (a reduce's region: its node is a leaf)."""
    refs = instr.called_computations
    return instr.opcode in RUNS_COMPUTATIONS or any(ref.role not in _APPLIED for ref in refs)


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
    bodies: Iterable[tuple[int, HloComputation]],
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
    owner: list[int] = []
    size: list[int] = []
    block: list[int] = []
    roots: list[int] = []
    params: list[int] = []
    made: list[int] = []
    sources: list[int] = []
    # (lists while they are written, a bound method each: quicker than arrays; arrays after)
    op, shape, args, meta_of = [], [], [], []  # type: ignore[var-annotated]
    add_op, add_shape, add_args, add_meta = op.append, shape.append, args.append, meta_of.append
    add_source = sources.append
    flops_at: list[int] = []  # (the rows of dots and convolutions, and their FLOPs)
    flops: list[int] = []
    bytes_at: list[int] = []  # (the rows whose bytes are neither 0 nor a sum: `bytes_rule`)
    nbytes: list[int] = []
    metas: list[int] = []  # (each metadata object's strings and work, four numbers apiece)
    works: dict[str, int] = {"": 0}  # (the JAX op a metadata names: 0, none)
    by_meta: dict[int, int] = {}
    ops: dict[str, int] = {}
    shapes: dict[int, int] = {}
    shape_texts: dict[str, int] = {}
    categories = {name: k for k, name in enumerate(CATEGORIES)}
    by_op: dict[str, tuple[int, int]] = {}  # (its id, its `bytes_rule`)
    op_cat: list[int] = []  # (each opcode's category: by opcode alone in these bodies)
    op_bytes: list[int] = []  # (each opcode's `bytes_rule`)
    lines: list[str] = []
    names: list[str] = []  # (the labels: read as the page loads, the lines when shown)
    head: list[int] = []
    shape_text: list[str] = []  # (by id: `shape_texts`' keys in order)
    for node, comp in bodies:
        instructions = comp.instructions
        owner.append(node)
        block.append(blocks[node])
        size.append(len(instructions))
        local = {instr.name: k for k, instr in enumerate(instructions)}
        sizes = [instr.shape.nbytes for instr in instructions]
        made += sizes
        roots.append(local[comp.root.name])  # type: ignore[union-attr]
        params += [local[p.name] for p in comp.parameters]
        for instr in instructions:
            opcode = instr.opcode
            found = by_op.get(opcode)
            if found is None:
                category = op_category(opcode)
                op_cat.append(categories[category if category in categories else "other"])
                op_bytes.append(bytes_rule(opcode))
                found = by_op[opcode] = ops.setdefault(opcode, len(ops)), op_bytes[-1]
            add_op(found[0])
            said = shapes.get(id(instr.shape))
            if said is None:
                written = clip(str(instr.shape), SHAPE_LIMIT)
                said = shapes[id(instr.shape)] = shape_texts.setdefault(written, len(shape_texts))
                if said == len(shape_text):
                    shape_text.append(written)
            add_shape(said)
            first = len(sources)
            for operand in instr.operands:  # (as `_graph_data._edges_and_order` finds them)
                source = local.get(operand)
                if source is None:
                    found_instr = comp.get(operand) if operand[:1] == "%" else None
                    if found_instr is None:
                        add_source(-1)  # no edge, but its place among the operands
                        continue
                    source = local[found_instr.name]
                add_source(source)
            add_args(len(instr.operands))
            if opcode in FLOP_OPS:
                flops_at.append(len(op) - 1)
                flops.append(instruction_flops(instr, module))
            elif instr.called_computations:  # (a reduce's region: any FLOPs it runs)
                found_flops = instruction_flops(instr, module)
                if found_flops:
                    flops_at.append(len(op) - 1)
                    flops.append(found_flops)
            rule = found[1]  # (no bytes, or a sum, the page works out: any other are given)
            if rule == OWN_BYTES or (rule == SUMMED_BYTES and instr.shape.dtype == "tuple"):
                read = sum(sizes[k] for k in sources[first:] if k >= 0)
                bytes_at.append(len(op) - 1)
                nbytes.append(bytes_with_operands(instr, module, read))
            text = instr.text
            cut = text.find(", metadata={")  # (`builds_in_page`: where its display text ends)
            root = text.startswith("ROOT ")  # (its head: `builds_in_page` checked it)
            start = (5 if root else 0) + len(instr.name) + len(shape_text[said]) + len(opcode) + 5
            lines.append(text[start:] if cut < 0 else text[start:cut])
            head.append(2 if root else 1)
            names.append(instr.name)
            meta = instr.metadata
            said_meta = by_meta.get(id(meta))
            if said_meta is None:
                said_meta = by_meta[id(meta)] = len(metas) // 4
                metas += strings_of(meta)
                work = _jax_op(meta.op_name, _NO_OP)  # (a part's label names its ops by it)
                metas.append(0 if work is _NO_OP else works.setdefault(work, len(works)))
            add_meta(said_meta)
    ids = {
        "bodyOwner": owner, "bodySize": size, "bodyOp": op, "bodyShape": shape,
        "bodyArgs": args, "bodyFrom": sources, "bodyRoot": roots, "bodyParams": params,
        "bodyBlock": block, "bodyHead": head, "bodyMeta": meta_of, "bodyMetas": metas,
        "bodyFlopsAt": flops_at, "bodyBytesAt": bytes_at,
    }  # fmt: skip
    figures = {"bodyMade": made, "bodyFlopsOf": flops, "bodyBytesOf": nbytes}
    return {
        **{name: array("i", column) for name, column in ids.items()},
        **{name: _figures(column) for name, column in figures.items()},
        "bodyOps": list(ops), "bodyOpCat": op_cat, "bodyOpBytes": op_bytes,
        "bodyShapes": list(shape_texts),
        "bodyText": lines, "bodyLabel": names, "bodyWorks": list(works),
        "bodyMaxChildren": MAX_CHILDREN,
    }  # fmt: skip


def _figures(column: list[int]) -> array | list[int]:
    """A column of bytes or FLOPs as 64-bit ints, or as it is where one is beyond them."""
    try:
        return array("q", column)
    except OverflowError:
        return column
