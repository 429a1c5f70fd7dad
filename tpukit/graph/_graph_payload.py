"""The graph as the viewer reads it: one compact, JSON-ready dict of columns.

`_graph_data.GraphTree` is the tree of nodes; `graph_payload` adds what each node
costs and says (FLOPs, bytes, colour category, HLO text, scope, source line), the
groups the first view opens and, from a profile, the measured time of every node
(`time_payload`). Every payload opens with `_graph_schema.schema_payload()`: its
schema version, the node kinds, the categories and their light and dark colours,
the heat scale. `_graph_view.HloGraph` compresses the dict into the page.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Mapping
from itertools import chain, compress
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from tpukit.graph._first_view import first_view
from tpukit.graph._graph_bodies import body_columns
from tpukit.graph._graph_costs import node_costs
from tpukit.graph._graph_frame import FRAME_H, FRAME_W
from tpukit.graph._graph_glance import Glance
from tpukit.graph._graph_lines import SlicedLines
from tpukit.graph._graph_nodes import (
    OpFacts,
    clip,
    display_cut,
    rest_cut,
    totals_label,
)
from tpukit.graph._graph_parts import PART_LABEL
from tpukit.graph._graph_schema import CATEGORIES, INSTRUCTION, PART, schema_payload
from tpukit.graph._graph_wire import (
    LineColumn,
    edge_columns,
    first_use,
    link_columns,
)
from tpukit.hlo.analysis import instruction_count, trip_count
from tpukit.hlo.text import HloInstruction, HloMetadata, HloModule, describe_location

if TYPE_CHECKING:
    from tpukit.graph._graph_data import GraphTree

#: The longest shape and HLO text a node carries (the panel shows no more).
_SHAPE_LIMIT, _TEXT_LIMIT = 400, 4000


def graph_payload(
    data: GraphTree,
    title: str,
    stage: str | None,
    times: Mapping[str, float] | None = None,
    memory: Mapping[str, int] | None = None,
) -> dict:
    """The compact, JSON-ready description of ``data`` that the viewer reads."""
    return _payload(data, title, stage, times, memory, wire=False)


def graph_wire(
    data: GraphTree,
    title: str,
    stage: str | None,
    times: Mapping[str, float] | None = None,
    memory: Mapping[str, int] | None = None,
    *,
    typed: bool = False,
) -> dict:
    """`graph_payload` as the page carries it (`_graph_wire.pack` of it), made in one pass:
    each instruction's text is cut to what follows its head as it is made, not written
    whole and cut again.

    ``typed``, for `_graph_wire.encode_wire` alone, gives what it writes to the same bytes
    with far less memory: columns of numbers as typed arrays (no int object per number:
    `edge_columns`, `_numbers`, `node_costs`), the texts as UTF-8 run by run as they are
    made (`_graph_wire.LineColumn`)."""
    return _payload(data, title, stage, times, memory, wire=True, typed=typed)


def glance_wire(
    data: GraphTree,
    title: str,
    stage: str | None,
    times: Mapping[str, float] | None = None,
    memory: Mapping[str, int] | None = None,
) -> dict:
    """`graph_wire` of the first view alone (`_graph_glance`): the nodes it can draw, each
    with what the whole graph's payload says of it, and ``glance`` set."""
    return _payload(data, title, stage, times, memory, wire=True, glance=Glance(data))


def _payload(
    data: GraphTree,
    title: str,
    stage: str | None,
    times: Mapping[str, float] | None,
    memory: Mapping[str, int] | None,
    wire: bool,
    glance: Glance | None = None,
    typed: bool = False,
) -> dict:
    module = data.module
    strings: dict[str, int] = {"": 0}

    def intern(text: str) -> int:
        return strings.setdefault(text, len(strings))

    flops, nbytes, own = node_costs(data)
    if not typed and glance is None:  # (a glance takes its nodes' figures alone)
        flops, nbytes = list(flops), list(nbytes)
    facts = OpFacts(module)
    kept = glance.nodes if glance is not None else None
    columns = _instruction_columns(data, intern, facts, wire, kept, typed)
    label = _labels_with_parts_named(data, flops, own, facts, kept)
    del facts  # (what it learnt of a large module's op names: megabytes, not needed again)
    notes = dict(data.notes)
    for node, (loop_label, loop_note) in columns.pop("loops").items():
        label[node], notes[node] = loop_label, loop_note
    n = len(data.kind)
    op, ops, shape, shapes = columns["op"], columns["ops"], columns["shape"], columns["shapes"]
    # The tree's typed columns as they are where no JSON is made of them: the wire's, and
    # a glance's (`Glance.cut` takes its nodes' values out as lists).
    arrays = typed or glance is not None
    note = _numbers(n, typed, "i", sparse=glance is not None)
    for node in sorted(notes):  # interned in node order: the strings' order is the wire's
        if 0 <= node < n and (glance is None or node in glance.new_id):
            note[node] = intern(notes[node])
    bodies = {}
    if data.lazy and glance is None:  # the bodies the page builds (a page's tree)
        bodies = body_columns(
            module, sorted(data.lazy.items()), data.lazy_block, _metadata_strings(intern)
        )
    payload = {
        **schema_payload(),
        "title": title,
        "stage": stage or "",
        "module": module.name,
        "strings": list(strings),
        "kind": data.kind if arrays else list(data.kind),  # (typed arrays in the tree)
        "parent": data.parent if arrays else list(data.parent),
        "label": label,
        "op": op if wire else [ops[k] for k in op],  # (on the wire: `first_use`, below)
        "cat": columns["cat"],
        "shape": shape if wire else [shapes[k] for k in shape],
        "flops": flops,
        "bytes": nbytes,
        "count": _counts(data, arrays),
        "scope": columns["scope"],
        "location": columns["location"],
        "source": columns["source"],
        "text": columns["text"],
        "note": note,
        # As written, the summary's and diff's rule: each computation once (`op_counts`).
        "instructions": instruction_count(module),
        **(
            glance.edges()
            if glance is not None
            else {**_links(data, wire), **_blocks(data, wire, typed)}
        ),
        "open": first_view(data),
        "frame": [FRAME_W, FRAME_H],  # the box the first view fits (`_graph_frame`)
        **time_payload(data, times),
        **memory_payload(data, memory),
    }
    if bodies:
        payload.update(bodies if typed else {k: _listed(v) for k, v in bodies.items()})
    if wire:  # the fields `pack` adds, where it adds them
        payload["textHead"] = columns["textHead"]
    if glance is not None:
        payload = glance.cut(payload)
    if wire:
        payload["shape"], payload["shapes"] = first_use(payload["shape"], shapes)
        payload["op"], payload["ops"] = first_use(payload["op"], ops)
    return payload


def _listed(values: object) -> object:
    """An ``array`` column as a list (JSON's), anything else as it is."""
    return values.tolist() if isinstance(values, array) else values


def _links(data: GraphTree, wire: bool) -> dict:
    """Each call's or loop's parameter and root nodes: ``params`` and ``roots``, or on the
    wire their columns."""
    if wire:
        return link_columns(data.params.items(), data.roots.items())
    return {
        "params": {str(k): v for k, v in data.params.items()},
        "roots": {str(k): v for k, v in data.roots.items()},
    }


def _blocks(data: GraphTree, wire: bool, typed: bool = False) -> dict:
    """The data edges of each computation shown: ``blocks``, or on the wire its columns."""
    if wire:
        return edge_columns(data.blocks, typed)
    return {"blocks": [[owner, list(chain.from_iterable(edges))] for owner, edges in data.blocks]}


def _instruction_columns(
    data: GraphTree,
    intern: Callable[[str], int],
    facts: OpFacts,
    wire: bool = False,
    nodes: list[int] | None = None,
    typed: bool = False,
) -> dict:
    """The columns only instructions fill: colour category, HLO text, the interned op name
    and source of their metadata, and the opcode and shape as ids into ``ops`` and
    ``shapes`` (`_graph_wire.first_use` numbers them for the wire); ``loops``, each
    ``while`` node's label and note (`_loop_label`). With ``wire``, ``text`` holds what
    `_graph_wire.split_head` leaves of each text and ``textHead`` which head it took.

    A group's entries are empty (its ``cat`` is ``group``). Many instructions share an
    opcode, a fusion's kind of work, a shape, an `HloMetadata` object (the parser shares
    equal ones) or a source line: each is worked out once. Metadata is interned from the
    last node to the first, the order the strings table has always had. With ``nodes``
    (in order), only theirs are filled. With ``typed`` (`graph_wire` for `encode_wire`)
    the columns of numbers are arrays and ``text`` is UTF-8, each run of texts encoded as
    soon as it is written (`_graph_wire.LineColumn`): a large module's columns hold no
    object per node.
    """
    n = len(data.kind)
    sparse = nodes is not None  # (a glance's: `Glance.cut` takes its nodes' values)
    group = CATEGORIES.index("group")
    cat, head_kind = _numbers(n, typed, "B", group, sparse), _numbers(n, typed, "B", 0, sparse)
    op, shape = _numbers(n, typed, "i", 0, sparse), _numbers(n, typed, "i", 0, sparse)
    scope, location, source = (_numbers(n, typed, "i", 0, sparse) for _ in range(3))
    # A whole graph's texts for `encode_wire`: each where it lies in its line, if it can
    sliced = SlicedLines(data.instr, _TEXT_LIMIT) if typed and nodes is None else None
    lines = sliced if sliced is not None else LineColumn(0 if sparse else n)
    text = _Sparse("") if sparse else lines.texts  # (a text kept as it is)
    labels = data.label
    loops = {}
    categories = {name: k for k, name in enumerate(CATEGORIES)}
    ops: dict[str, int] = {"": 0}
    by_op: dict[str, tuple[int, int]] = {}  # by opcode: a fusion's and library call's vary
    shapes: dict[str, int] = {"": 0}
    by_shape: dict[int, tuple[str, int]] = {}
    by_meta: dict[int, tuple[int, int, int]] = {}
    strings_of = _metadata_strings(intern)
    tails: dict[str, str] = {}
    rests: dict[str, int] = {}  # a row's text after its operands -> where its text ends there
    ascii_sources: dict[int, bool] = {}  # (a module's text, checked once)
    instrs, notes, module = data.instr, data.notes, data.module
    written_from = lines.written_from if typed and sliced is None else None  # type: ignore[union-attr]
    for node in _last_first(n, nodes, written_from):
        instr = instrs[node]
        if instr is None:
            continue
        opcode = instr.opcode
        found = by_op.get(opcode)
        if found is None:
            varies = opcode == "fusion" or opcode == "custom-call"  # (by what they run)
            category = -1 if varies else categories[facts.category(instr)]
            found = by_op[opcode] = category, ops.setdefault(opcode, len(ops))
        category, op[node] = found
        cat[node] = category if category >= 0 else categories[facts.category(instr)]
        said = by_shape.get(id(instr.shape))
        if said is None:
            written = clip(str(instr.shape), _SHAPE_LIMIT)
            said = by_shape[id(instr.shape)] = written, shapes.setdefault(written, len(shapes))
        written, shape[node] = said
        label = labels[node]
        if opcode == "while":
            label, note = loops[node] = _loop_label(instr, module, label, notes.get(node))
        cut_whole = True  # (a text not cut in place below)
        if sliced is not None and instr._end == -1 and instr._attributes is None:
            # A parser's row (`_fast_rows`): its line is ``whole[at:]`` to its line break,
            # and where no ", metadata={" starts before its rest (the text after its
            # operands), `display_cut` follows from the rest alone: found once per rest.
            whole, at, rest_at = instr._text, instr._at, instr._rest_at
            ascii = ascii_sources.get(id(whole))
            if ascii is None:
                ascii = ascii_sources[id(whole)] = whole.isascii()
            end = whole.find("\n", at)
            if ascii and end >= 0 and whole.find(", metadata={", at, at + rest_at + 11) < 0:
                rest = whole[at + rest_at : end]
                in_rest = rests.get(rest)
                if in_rest is None:
                    if len(rests) >= _RESTS_KEPT:  # (most rests repeat near each other)
                        rests.clear()
                    in_rest = rests[rest] = rest_cut(rest)
                cut = rest_at + in_rest
                if in_rest >= 0 and cut <= _TEXT_LIMIT:  # `split_head`, as below, in place
                    head, start = f"%{label} = {written} {opcode}", 0
                    if whole.startswith(head, at, at + cut):
                        head_kind[node], start = 1, len(head)
                    elif whole.startswith("ROOT ", at, at + cut) and whole.startswith(
                        head, at + 5, at + cut
                    ):
                        head_kind[node], start = 2, len(head) + 5
                    sliced.cut(node, start, cut)
                    cut_whole = False
        if cut_whole:
            line_text = instr.text
            cut = display_cut(instr, tails, line_text)
            plain = sliced is not None and cut.__class__ is int and cut <= _TEXT_LIMIT  # type: ignore[operator]
            if plain and line_text.isascii() and "\n" not in line_text:
                # `split_head` of ``line_text[:cut]``, kept as where its rest lies
                head, start = f"%{label} = {written} {opcode}", 0
                if line_text.startswith(head, 0, cut):
                    head_kind[node], start = 1, len(head)
                elif line_text.startswith("ROOT ", 0, cut) and line_text.startswith(head, 5, cut):
                    head_kind[node], start = 2, len(head) + 5
                sliced.cut(node, start, cut)
            else:
                line_text = cut if cut.__class__ is str else line_text[:cut]  # type: ignore[index]
                if len(line_text) > _TEXT_LIMIT:
                    line_text = clip(line_text, _TEXT_LIMIT)
                if wire:  # `split_head`, inline: it runs for every instruction
                    head = f"%{label} = {written} {opcode}"
                    if line_text.startswith(head):
                        head_kind[node], line_text = 1, line_text[len(head) :]
                    elif line_text.startswith("ROOT ") and line_text.startswith(head, 5):
                        head_kind[node], line_text = 2, line_text[len(head) + 5 :]
                text[node] = line_text
        meta = instr.metadata
        said = by_meta.get(id(meta))
        if said is None:
            said = by_meta[id(meta)] = strings_of(meta)
        scope[node], location[node], source[node] = said
    return {
        "cat": cat, "op": op, "ops": list(ops), "shape": shape, "shapes": list(shapes),
        "text": lines.column() if typed else text, "scope": scope, "location": location,
        "source": source, "loops": loops, "textHead": head_kind,
    }  # fmt: skip


#: The rests `rest_cut` finds and keeps at most (the dict is emptied then).
_RESTS_KEPT = 4096


def _last_first(
    n: int, nodes: list[int] | None, written_from: Callable[[int], None] | None
) -> Iterator[int]:
    """``nodes`` (all ``n`` when None) from the last to the first; with ``written_from``
    (`LineColumn.written_from`), called each time a run of its texts is written."""
    if nodes is not None:
        yield from reversed(nodes)
        return
    step = LineColumn.step
    for start in range((n - 1) // step * step, -1, -step):
        yield from range(min(start + step, n) - 1, start - 1, -1)
        if written_from is not None:
            written_from(start)


def _numbers(n: int, typed: bool, code: str, value: int = 0, sparse: bool = False) -> list[int]:
    """A column of ``n`` numbers: with ``typed`` (`graph_wire`) an ``array`` of type
    ``code``, which `_graph_wire.wire_parts` copies as it is (no int object per number);
    with ``sparse`` (a glance's: a few hundred nodes of a large tree) a `_Sparse` dict."""
    if sparse:
        return _Sparse(value)  # type: ignore[return-value]
    return array(code, [value]) * n if typed else [value] * n  # type: ignore[return-value]


class _Sparse(dict):
    """A column of a glance's nodes (`Glance.cut` reads them alone) by node: the nodes
    written, any other ``default``, not a list of every node of the tree."""

    def __init__(self, default: object) -> None:
        super().__init__()
        self.default = default

    def __missing__(self, node: int) -> object:
        return self.default


def _metadata_strings(
    intern: Callable[[str], int],
) -> Callable[[HloMetadata], tuple[int, int, int]]:
    """A function from a metadata to its interned op name, short source label and full
    source path, as ``intern`` numbers them.

    Each op name is interned once, and each source line's two texts are worked out and
    interned once (a large module's bodies hold tens of thousands of metadata objects, a
    few hundred op names and lines): the strings come in the order interning each of a
    metadata's three texts in turn gives them, whatever was met before.
    """
    scopes: dict[str, int] = {}
    by_file: dict[str, dict[int, tuple[int, int]]] = {}

    def strings_of(meta: HloMetadata) -> tuple[int, int, int]:
        op_name = meta.op_name
        scope = scopes.get(op_name)
        if scope is None:
            scope = scopes[op_name] = intern(op_name)
        file = meta.source_file
        if not file:
            return scope, 0, 0
        line = meta.source_line
        lines = by_file.get(file)
        if lines is None:
            lines = by_file[file] = {}
        texts = lines.get(line)
        if texts is None:  # the short label on show (`HloInstruction.source_location`), the path
            texts = lines[line] = (
                intern(describe_location(file, line)),
                intern(file + (f":{line}" if line else "")),
            )
        return scope, texts[0], texts[1]

    return strings_of


def _labels_with_parts_named(
    data: GraphTree,
    flops: list[int],
    own: list[int],
    facts: OpFacts,
    nodes: list[int] | None = None,
) -> list[str]:
    """The nodes' labels, every part named by the work it holds (`part_label`) unless the
    tree named it (a stage of layers, `_graph_parts`), a stage of stages by that work and
    how many it holds (``dot ×12 (1.2 GFLOP) · 6 stages``; its box says its ops): with
    ``nodes``, the parts among them.

    A copy: ``data`` is shared by every view of the module (it is cached on the module,
    and modules by their text), so what the table, the diff's matching and ``to_dot``
    read of it must not depend on whether a payload was built before.
    """
    label, kinds = list(data.label), data.kind
    named = _PART_LABELS.get(data)
    if named is None:
        named = _PART_LABELS[data] = {}
    namer = _PartNamer(data, facts, flops, own, named)
    parts = compress(range(len(kinds)), map(PART.__eq__, kinds)) if nodes is None else nodes
    for node in parts:
        if kinds[node] == PART and label[node] == PART_LABEL:  # (a stage of layers: named)
            found = named.get(node)
            if found is None:
                namer.totals(node)
                found = named[node]
            label[node] = found
    return label


class _PartNamer:
    """Names the parts under a group and the group itself (``named``: a part's name, from
    `OpFacts.members_totals` of its `_members`), each part's totals made from its
    children's: a stage of stages holds stages, each named, so each member was counted
    once a level. The members in `_members`' order (the last child first), so that names
    come in the same order of first use and the first of equals is the same. (A class,
    not a closure that calls itself: that would be a cycle, holding ``facts`` and its
    megabytes past the payload's ``del`` while the collector is paused.)"""

    def __init__(
        self, data: GraphTree, facts: OpFacts, flops: list[int], own: list[int], named: dict
    ) -> None:
        self.data, self.facts, self.flops, self.own, self.named = data, facts, flops, own, named

    def totals(self, group: int) -> tuple[dict[str, list[int]], int]:
        """``group``'s totals and member count (`OpFacts.members_totals`), its parts named."""
        data, facts, flops, own = self.data, self.facts, self.flops, self.own
        instrs, children, kinds = data.instr, data.children, data.kind
        merged: dict[str, list[int]] = {}
        count = 0
        run: list[int] = []  # instructions in a row: counted together
        for kid in reversed(children[group]):
            if instrs[kid] is not None:
                run.append(kid)
                continue
            if run:
                merged, count = _merged(
                    merged, count, facts.members_totals(run, instrs, flops, own)
                )
                run = []
            merged, count = _merged(merged, count, self.totals(kid))
        if run:
            merged, count = _merged(merged, count, facts.members_totals(run, instrs, flops, own))
        if kinds[group] == PART and data.label[group] == PART_LABEL:
            found = totals_label(merged, count, lambda: [instrs[k] for k in _members(data, group)])
            held = children[group]
            if any(kinds[k] == PART for k in held):  # a stage of stages: says how many
                found = f"{found.rsplit(' · ', 1)[0]} · {len(held)} stages"
            self.named[group] = found
        return merged, count


def _merged(
    into: dict[str, list[int]], count: int, more: tuple[dict[str, list[int]], int]
) -> tuple[dict[str, list[int]], int]:
    """``into`` (totals of ``count`` members) with ``more``'s totals of the members after
    them added; ``more``'s dict itself where ``into`` holds none (it is no one else's)."""
    totals, added = more
    if not count:
        return totals, added
    for name, (ops, flops, nbytes) in totals.items():
        entry = into.get(name)
        if entry is None:
            into[name] = [ops, flops, nbytes]
        else:
            entry[0] += ops
            entry[1] += flops
            entry[2] += nbytes
    return into, count + added


#: Each tree's parts' labels (`_labels_with_parts_named`), made once: a large graph's page
#: names its parts for the whole payload, then again for its glance.
_PART_LABELS: WeakKeyDictionary[GraphTree, dict[int, str]] = WeakKeyDictionary()


def _counts(data: GraphTree, typed: bool = False) -> list[int]:
    """Instructions each node holds directly: a group's, through nested groups; a fusion's,
    call's or loop's, those of the computations it opens (not inside their instructions).

    Each node adds its share to its parent's, the last node first: nodes are numbered depth
    first, so a node's own count is whole before it is added. (A fusion whose bodies the
    tree leaves out starts with theirs: `GraphTree.held`.) With ``typed``, an ``array``.
    """
    kind, parent = data.kind, data.parent
    count = _numbers(len(kind), typed, "i")
    for node, held in data.held.items():
        count[node] = held
    for node in range(len(kind) - 1, 0, -1):
        count[parent[node]] += 1 if kind[node] == INSTRUCTION else count[node]
    return count


def memory_payload(data: GraphTree, memory: Mapping[str, int] | None) -> dict:
    """Bytes each node holds at the program's peak, for "Colour: memory" (``None``: none).

    ``memory`` maps an instruction's name to the bytes of its buffers live at the peak
    (`MemoryView.graph`); a group holds its members' sum, and a loop or call its own
    buffers and those of what it runs. ``memoryTotal`` is the bytes in use at the peak,
    the scale's 100%.
    """
    if not memory:
        return {}
    held: list[int | None] = [None] * len(data.kind)
    for node in range(len(data.kind) - 1, -1, -1):
        instr = data.instr[node]
        own = memory.get(instr.name) if instr is not None else None
        inside = [held[k] for k in data.children[node] if held[k] is not None]
        if own is not None or inside:
            held[node] = (own or 0) + sum(inside)
    return {"memory": held, "memoryTotal": sum(memory.values())}


def _loop_label(
    instr: HloInstruction, module: HloModule, label: str, note: str | None
) -> tuple[str, str]:
    """``while.3 x16`` and a panel note on where the count came from (or that it is unknown)."""
    trips = trip_count(instr, module)
    if trips is None:
        said = (
            "unknown trip count: the loop's counter pattern could not be read, so its "
            "body's FLOPs and bytes are counted once"
        )
        return f"{label} x?", "; ".join(filter(None, [note, said]))
    said = f"runs its body {trips} times per run; its FLOPs and bytes are multiplied by {trips}"
    return f"{label} x{trips}", "; ".join(filter(None, [note, said]))


def time_payload(data: GraphTree, times: Mapping[str, float] | None) -> dict:
    """Measured seconds per node for the viewer's heat colouring (``None``: not measured).

    An instruction has its own time (a loop's or call's includes what it runs); a group
    the sum of its members', so nothing is counted twice. ``timeTotal`` is the program's.
    """
    if not times:
        return {}
    seconds: list[float | None] = [None] * len(data.kind)
    for node in range(len(data.kind) - 1, -1, -1):
        instr = data.instr[node]
        if instr is not None:
            seconds[node] = times.get(instr.name)
        else:
            measured = [seconds[k] for k in data.children[node] if seconds[k] is not None]
            seconds[node] = sum(measured) if measured else None
    return {"time": seconds, "timeTotal": seconds[0] or 0.0}


def _members(data: GraphTree, node: int) -> list[int]:
    """The instruction nodes a group holds, through nested groups (not inside instructions)."""
    found = []
    stack = list(data.children[node])
    while stack:
        kid = stack.pop()
        if data.instr[kid] is None:
            stack.extend(data.children[kid])
        else:
            found.append(kid)
    return found
