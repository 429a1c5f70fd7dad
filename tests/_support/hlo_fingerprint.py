"""A fingerprint of everything tpukit reads from an HLO module: one hash per figure.

`fingerprint` parses a module and hashes, each on its own, the parsed model (every
instruction's fields, every computation, the header and stack tables), the op counts,
the executed FLOPs and bytes, the fusions, the graph's tree of groups with its first
view, and the viewer's payload. A test stores today's hashes; a faster parser or
grouping must give the same ones, so a speed-up cannot change a number unnoticed.
"""

from __future__ import annotations

import hashlib
import json

from tpukit import hlo
from tpukit.graph._first_view import first_view
from tpukit.graph._graph_data import GraphTree
from tpukit.graph._graph_payload import graph_payload
from tpukit.hlo import HloInstruction, HloModule
from tpukit.hlo._program import program_cost


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, default=repr, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _instruction(i: HloInstruction) -> list:
    m = i.metadata
    return [
        i.name, i.opcode, str(i.shape), repr(i.shape.dims), repr(i.shape.dynamic),
        i.shape.nbytes, list(i.operands), dict(i.attributes),
        [tuple(r) for r in i.called_computations], i.is_root, i.text, i.operand_text,
        i.computation, m.op_name, m.op_type, m.source_file, m.source_line,
        m.stack_frame_id, dict(m.fields), [tuple(f) for f in m.stack],
    ]  # fmt: skip


def _model(module: HloModule) -> list:
    comps = [
        [c.name, c.kind, c.is_entry, c.signature, [_instruction(i) for i in c.instructions]]
        for c in module.computations.values()
    ]
    frames = {k: [tuple(f) for f in v] for k, v in module.stack_frames.items()}
    return [module.name, module.entry_name, module.attributes, frames, module.unparsed, comps]


def _groups(data: GraphTree) -> list:
    instrs = [None if i is None else (i.computation, i.name) for i in data.instr]
    children = [list(c) for c in data.children]
    return [
        list(data.kind), list(data.parent), data.label, list(data.order), instrs, children,
        sorted(data.params.items()), sorted(data.roots.items()),
        [(owner, list(edges)) for owner, edges in data.blocks],
        sorted(data.notes.items()), sorted(data.section.items()), first_view(data),
    ]  # fmt: skip


def fingerprint(text: str) -> dict[str, str]:
    """Short hashes of the parsed model and of every figure tpukit computes from ``text``."""
    program = hlo.open(text)
    module = program.hlo_module()
    cost = program_cost(module)
    graph = program.graph()
    data = graph._data
    return {
        "model": _digest(_model(module)),
        "ops": _digest(
            [
                sorted(program.op_counts().items()),
                sorted(program.op_counts(open_fusions=False).items()),
            ]
        ),
        "cost": _digest(
            [cost.counted_flops, cost.all_flops, cost.bytes_accessed, cost.unknown_loops]
        ),
        "fusions": _digest([vars(f) for f in program.fusions()]),
        "groups": _digest(_groups(data)),
        "payload": _digest(graph_payload(data, program.name, program.stage)),
        "view": _digest(list(graph.view_counts())),
    }
