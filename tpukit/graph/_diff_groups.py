"""One program's graph read as the diff reads it: its groups by key, its working ops.

`ProgramGroups` is each side of `_diff_match.match_programs` and of `_diff_parts`: a group's
key is the path of its labels from the top, less XLA's numbers and ``.clone`` suffixes
(see `_diff_match`'s docstring); ``ops`` are the working ops (not plumbing) in program
order, ``signature`` says what one is independent of the number XLA gave it.
"""

from __future__ import annotations

import re
from collections import defaultdict

from tpukit.graph._first_view import first_view
from tpukit.graph._graph_nodes import COMPUTATION, INSTRUCTION, PART, SCOPE
from tpukit.graph._graph_payload import graph_payload
from tpukit.graph._graph_view import HloGraph
from tpukit.hlo.analysis import executed, op_counts, parse_scope, split_scope

#: Ops that do no work of their own: never matched, never added or removed.
PLUMBING = frozenset(
    "parameter constant get-tuple-element tuple bitcast opt-barrier after-all "
    "add-dependency domain".split()
)
# Ops inside a fusion that say what it is, beyond its root.
HEAVY = frozenset(
    "dot convolution reduce reduce-window scatter gather sort custom-call all-reduce "
    "all-gather reduce-scatter all-to-all collective-permute".split()
)
NUMBER = re.compile(r"\.\d+\b")
# What XLA appends to an instruction or computation it copies (``cond.8`` becomes
# ``cond.8.clone``, a branch ``region_0.1.clone.clone``): not part of the name.
CLONE = re.compile(r"\.clone\b")


class ProgramGroups:
    """One program's graph, its groups by key and its working ops by signature."""

    def __init__(self, view: HloGraph) -> None:
        self.graph = view
        data = self.data = view._data
        self.payload = graph_payload(data, view.title, view.stage, view.times)
        self.payload["open"] = first_view(data, fit=False)  # each side shows what fits it
        n = len(data.kind)
        self.group_of = [0] * n  # each node's nearest group (itself for a group)
        self.groups: dict[tuple[str, ...], int] = {(): 0}
        self.children: dict[tuple[str, ...], list[tuple[str, ...]]] = defaultdict(list)
        self.ops: list[int] = []
        key_of: dict[int, tuple[str, ...]] = {0: ()}
        # the loops, calls and branches around each group (its key without the scopes)
        self.structure: dict[int, tuple[str, ...]] = {0: ()}
        seen: dict[tuple, int] = defaultdict(int)
        inside = [False] * n  # inside a fusion (or another op's own computation)
        for node in range(1, n):
            parent = data.parent[node]
            if inside[parent] or (data.kind[parent] == INSTRUCTION and parent not in key_of):
                inside[node] = True
                continue
            kind, instr = data.kind[node], data.instr[node]
            if kind == PART:
                key_of[node] = key_of[parent]
                self.structure[node] = self.structure[parent]
                self.group_of[node] = self.group_of[parent]
                continue
            if kind in (SCOPE, COMPUTATION) or (
                instr is not None and data.children[node] and instr.opcode != "fusion"
            ):
                label = data.label[node] if kind == SCOPE else unnumbered(data.label[node])
                if kind == COMPUTATION and ": " in label:  # a loop's body by its role: XLA
                    label = label.split(": ", 1)[0]  # renames it ("wide.region_0.clone.sunk")
                base = key_of[parent]
                seen[(base, label)] += 1
                if seen[(base, label)] > 1:
                    label = f"{label} #{seen[(base, label)]}"
                key_of[node] = (*base, label)
                self.structure[node] = self.structure[parent] + (() if kind == SCOPE else (label,))
                self.groups[key_of[node]] = node
                self.children[base].append(key_of[node])
                self.group_of[node] = node
                continue
            self.group_of[node] = self.group_of[parent]
            if instr is not None and instr.opcode not in PLUMBING:
                self.ops.append(node)
        self.key_of = key_of

    def whole(self, name: str) -> int:
        """A whole-program figure as ``tpukit.diff`` counts it (`tpukit.hlo.analysis._executed`):
        instructions as written (fusions opened), FLOPs and bytes as executed."""
        module = self.data.module
        if name == "instructions":
            return sum(op_counts(module).values())
        run = executed(module)
        return run.dot_flops if name == "flops" else run.bytes

    def figure(self, name: str, node: int | None) -> int | float | None:
        if node is None:
            return None
        values = self.payload.get(name)
        return None if values is None else values[node]

    def signature(self, node: int) -> tuple:
        """What an op is, independent of the number XLA gave it (see the module docstring)."""
        instr = self.data.instr[node]
        module = self.data.module
        direction, names = parse_scope(split_scope(instr.metadata.op_name)[:-1])
        group = self.group_of[node]
        # An op without a scope of its own is told apart by the group it sits in.
        context = self.structure[group] if names else self.key_of[group]
        roots: tuple[str, ...] = ()
        heavy: tuple[str, ...] = ()
        if instr.opcode == "fusion":
            called = module.called(instr)
            if called and called[0].root is not None:
                root = called[0].root
                operands = [called[0].get(o) for o in root.operands]
                roots = (
                    tuple(sorted(o.opcode for o in operands if o is not None))
                    if root.opcode == "tuple"
                    else (root.opcode,)
                )
                heavy = tuple(sorted({i.opcode for c in called for i in c if i.opcode in HEAVY}))
        return (
            context,
            direction,
            names,
            instr.opcode,
            instr.fusion_kind if instr.opcode == "fusion" else "",
            instr.custom_call_target if instr.opcode == "custom-call" else "",
            roots,
            heavy,
        )


def unnumbered(label: str) -> str:
    """A loop's, call's or branch's label less XLA's numbers and clone suffixes."""
    return CLONE.sub("", NUMBER.sub("", label))
