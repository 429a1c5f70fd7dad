"""The graph as the viewer reads it: one compact, JSON-ready dict of columns.

`_graph_data.GraphTree` is the tree of nodes; `graph_payload` adds what each node
costs and says (FLOPs, bytes, colour category, HLO text, scope, source line), the
groups the first view opens and, from a profile, the measured time of every node
(`time_payload`). Every payload opens with `_graph_schema.schema_payload()`: its
schema version, the node kinds, the categories and their light and dark colours,
the heat scale. `_graph_view.HloGraph` compresses the dict into the page.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from tpukit.hlo._cost import op_counts
from tpukit.hlo._first_view import first_view
from tpukit.hlo._graph_costs import instruction_costs, node_costs
from tpukit.hlo._graph_nodes import category, clip, display_text, part_label
from tpukit.hlo._graph_schema import CATEGORIES, INSTRUCTION, PART, schema_payload
from tpukit.hlo._loops import trip_count
from tpukit.hlo._model import HloInstruction, HloModule

if TYPE_CHECKING:
    from tpukit.hlo._graph_data import GraphTree


def graph_payload(
    data: GraphTree,
    title: str,
    stage: str | None,
    times: Mapping[str, float] | None = None,
    memory: Mapping[str, int] | None = None,
) -> dict:
    """The compact, JSON-ready description of ``data`` that the viewer reads."""
    module = data.module
    strings: dict[str, int] = {"": 0}

    def intern(text: str) -> int:
        return strings.setdefault(text, len(strings))

    n = len(data.kind)
    flops, nbytes, _ = node_costs(data)
    count = [0] * n
    cat, op, shape, text = [CATEGORIES.index("group")] * n, [""] * n, [""] * n, [""] * n
    scope, location, source = [0] * n, [0] * n, [0] * n
    categories = {name: k for k, name in enumerate(CATEGORIES)}
    # Many instructions share an opcode, a fusion's kind of work, a shape or an
    # `HloMetadata` object (the parser shares equal ones): each is worked out once.
    by_op: dict[object, int] = {}
    by_shape: dict[int, str] = {}
    by_meta: dict[int, tuple[int, int, int]] = {}
    instrs = data.instr
    for node in range(n - 1, -1, -1):
        instr = instrs[node]
        if instr is not None:
            opcode = instr.opcode
            key = (
                tuple(instr.called_computations)
                if opcode == "fusion"
                else (instr.custom_call_target if opcode == "custom-call" else opcode)
            )
            found = by_op.get(key)
            if found is None:
                found = by_op[key] = categories[category(instr, module)]
            cat[node] = found
            op[node] = opcode
            written = by_shape.get(id(instr.shape))
            if written is None:
                written = by_shape[id(instr.shape)] = clip(str(instr.shape), 400)
            shape[node] = written
            line_text = display_text(instr)
            text[node] = line_text if len(line_text) <= 4000 else clip(line_text, 4000)
            meta = instr.metadata
            said = by_meta.get(id(meta))
            if said is None:
                said = by_meta[id(meta)] = _metadata_strings(instr, intern)
            scope[node], location[node], source[node] = said
        else:
            count[node] = sum(
                1 if data.kind[k] == INSTRUCTION else count[k] for k in data.children[node]
            )
            if data.kind[node] == PART:
                data.label[node] = part_label(_members(data, node), module, instruction_costs(data))
    for node in range(n):
        if data.kind[node] == INSTRUCTION and data.children[node]:
            count[node] = _direct_count(data, node)
    label = list(data.label)
    notes = dict(data.notes)
    for node in range(n):
        instr = data.instr[node]
        if instr is not None and instr.opcode == "while":
            label[node], notes[node] = _loop_label(instr, module, label[node], notes.get(node))
    note = [intern(notes.get(node, "")) for node in range(n)]
    return {
        **schema_payload(),
        "title": title,
        "stage": stage or "",
        "module": module.name,
        "strings": list(strings),
        "kind": data.kind,
        "parent": data.parent,
        "label": label,
        "op": op,
        "cat": cat,
        "shape": shape,
        "flops": flops,
        "bytes": nbytes,
        "count": count,
        "scope": scope,
        "location": location,
        "source": source,
        "text": text,
        "note": note,
        # As written, the summary's and diff's rule: each computation once (`op_counts`).
        "instructions": sum(op_counts(module).values()),
        "params": {str(k): v for k, v in data.params.items()},
        "roots": {str(k): v for k, v in data.roots.items()},
        "blocks": [[owner, [x for edge in edges for x in edge]] for owner, edges in data.blocks],
        "open": first_view(data),
        **time_payload(data, times),
        **memory_payload(data, memory),
    }


def _metadata_strings(instr: HloInstruction, intern) -> tuple[int, int, int]:
    """The interned op name, short source label and full source path of ``instr``."""
    meta = instr.metadata
    scope = intern(meta.op_name)
    if not meta.source_file:
        return scope, 0, 0
    line = meta.source_line  # the short label on show, the full path beside it
    location = intern(instr.source_location)
    return scope, location, intern(meta.source_file + (f":{line}" if line else ""))


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


def _members(data: GraphTree, node: int) -> list:
    """The instructions a group holds, through nested groups (not inside instructions)."""
    found = []
    stack = list(data.children[node])
    while stack:
        kid = stack.pop()
        instr = data.instr[kid]
        if instr is None:
            stack.extend(data.children[kid])
        else:
            found.append(instr)
    return found


def _direct_count(data: GraphTree, node: int) -> int:
    total = 0
    for kid in data.children[node]:
        total += 1 if data.kind[kid] == INSTRUCTION else _direct_count(data, kid)
    return total
