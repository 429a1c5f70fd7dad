"""The graph the HLO viewer draws: a tree of groups over an HLO module, as compact JSON.

A big training step has thousands of instructions in its ENTRY computation, and
no layout library lays that out interactively. `_GraphData` therefore turns an
`HloModule` into a tree: the user's groups from the ``op_name`` metadata (a
training step's sections, its layers and name scopes: `_user_scopes`),
consecutive parts of at most `MAX_CHILDREN` nodes when a group is too big, and
every fusion, while, call or conditional as one node whose called computations
open in place. `_graph_view.HloGraph` ships its `payload` to the browser.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, defaultdict

from tpukit.hlo._cost import instruction_bytes, instruction_flops, op_category
from tpukit.hlo._model import HloComputation, HloInstruction, HloModule
from tpukit.hlo._user_scopes import (
    BACKWARD,
    BACKWARD_SUFFIX,
    FORWARD,
    INPUTS,
    OUTPUTS,
    SECTION_NOTES,
    SECTIONS,
    function_name,
    place_label,
    plan_scopes,
    split_scope,
)

#: A group with more children than this is split into consecutive parts.
MAX_CHILDREN = 40
#: The first view expands groups, breadth first, while at most this many nodes show.
OPEN_NODES = 60

#: Colour categories, in legend order; indices into this tuple are in the payload.
CATEGORIES = (
    "matmul",
    "elementwise",
    "reduction",
    "data_movement",
    "control_flow",
    "collective",
    "parameter/constant",
    "other",
    "group",
)
#: What the legend calls each category that it shows (in the order above).
CATEGORY_LABELS = {
    "matmul": "matmul / conv",
    "elementwise": "elementwise",
    "reduction": "reduction",
    "data_movement": "data movement",
    "control_flow": "control flow",
    "collective": "collective",
    "parameter/constant": "parameter / constant",
}
# Node kinds in the payload.
INSTRUCTION, SCOPE, PART, COMPUTATION = 0, 1, 2, 3
# The roles of a called computation that run as program (not a scalar reducer).
_RUN_ROLES = frozenset({"calls", "body", "condition", "branch", "called_computations"})
_ROLE_LABELS = {"body": "body", "condition": "condition", "branch": "branch"}
_PLUMBING = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast"})
# Sections the first view shows open (their layers closed), and those it leaves closed.
_OPEN_SECTIONS = frozenset({FORWARD, BACKWARD})
# Instructions the first view enters when they hold most of their computation's work.
_ENTERED = frozenset({"call", "while", "conditional", "async-start"})


class _GraphData:
    """The module as a tree of nodes (instructions and groups) plus its data edges.

    Nodes are numbered in depth-first order, so each node's subtree is the id
    range ``[i, i + size)``. Every column is a list indexed by node id.
    """

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self.kind: list[int] = []
        self.parent: list[int] = []
        self.label: list[str] = []
        self.instr: list[HloInstruction | None] = []
        self.order: list[float] = []
        self.children: list[list[int]] = []
        self.params: dict[int, list[int]] = {}
        self.roots: dict[int, int] = {}
        # (owner node, [(source, target, bytes, operand index)]) per computation shown.
        self.blocks: list[tuple[int, list[tuple[int, int, int, int]]]] = []
        self.notes: dict[int, str] = {}  # node -> why it sits where it does (panel text)
        self.section: dict[int, str] = {}  # section group -> its name (see _user_scopes)
        self._active: set[str] = set()

        entry = module.entry
        root = self._add(COMPUTATION, -1, function_name(entry) or entry.name, None, 0.0)
        self._add_computation(entry, root, scoped=True, caller=None)
        self._renumber()

    # -- building --------------------------------------------------------------

    def _add(self, kind: int, parent: int, label: str, instr, order: float) -> int:
        self.kind.append(kind)
        self.parent.append(parent)
        self.label.append(label)
        self.instr.append(instr)
        self.order.append(order)
        self.children.append([])
        if parent >= 0:
            self.children[parent].append(len(self.kind) - 1)
        return len(self.kind) - 1

    def _add_computation(
        self, comp: HloComputation, owner: int, *, scoped: bool, caller: HloInstruction | None
    ) -> None:
        if comp.name in self._active:  # a (malformed) recursive call graph
            return
        self._active.add(comp.name)
        ids = {
            instr.name: self._add(INSTRUCTION, owner, instr.name, instr, order)
            for instr, order in zip(comp.instructions, _program_order(comp))
        }
        edges = []
        for instr in comp.instructions:
            for index, operand in enumerate(instr.operands):
                source = comp.get(operand)
                if source is not None:
                    edges.append((ids[operand], ids[instr.name], source.shape.nbytes, index))
        self.blocks.append((owner, edges))
        if self.kind[owner] == INSTRUCTION:
            self.params[owner] = [ids[p.name] for p in comp.parameters]
            if comp.root is not None:
                self.roots[owner] = ids[comp.root.name]
        if scoped:
            self._group_by_scope(comp, ids, owner, caller, edges)
        for instr in comp.instructions:
            called = _program_computations(instr, self.module)
            node = ids[instr.name]
            if len(called) == 1:
                self._add_computation(
                    called[0][0], node, scoped=_is_program(called[0][0]), caller=instr
                )
            else:
                for sub, role in called:
                    label = f"{_ROLE_LABELS.get(role, role)}: {sub.name}"
                    group = self._add(COMPUTATION, node, label, None, 0.0)
                    self._add_computation(sub, group, scoped=_is_program(sub), caller=instr)
        self._split_into_parts(owner)
        self._active.discard(comp.name)

    def _group_by_scope(
        self,
        comp: HloComputation,
        ids: dict[str, int],
        owner: int,
        caller: HloInstruction | None,
        edges: list[tuple[int, int, int, int]],
    ) -> None:
        """Move the instructions of ``comp`` into nested groups under ``owner``.

        Groups are the user's: the sections of a training step, layers and name
        scopes (`plan_scopes`). A scope used in several unconnected places (one
        ``relu`` per layer) becomes one group per connected piece, so groups follow
        the data flow; a piece of one op, or a tiny piece of a scope scattered in
        many, stays in its parent.
        """
        plan = plan_scopes(comp, self.module, caller)
        for name, note in plan.notes.items():
            self.notes[ids[name]] = note
        trie: dict = {"": [], "/": {}}  # "" -> instruction ids, "/" -> sub-scopes
        sections: dict[str, dict] = {}
        for instr in comp.instructions:
            section = plan.section[instr.name]
            node = trie if not section else sections.setdefault(section, {"": [], "/": {}})
            for part in plan.path[instr.name]:
                node = node["/"].setdefault(part, {"": [], "/": {}})
            node[""].append(ids[instr.name])
        while not trie[""] and len(trie["/"]) == 1:  # the scope every op shares
            trie = next(iter(trie["/"].values()))
        trie["sections"] = [(name, sections[name]) for name in SECTIONS if name in sections]
        self.children[owner] = []
        self._neighbours: dict[int, list[int]] = defaultdict(list)
        self._users: dict[int, list[int]] = defaultdict(list)
        self._inputs: dict[int, list[int]] = defaultdict(list)
        for source, target, _, _ in edges:
            self._neighbours[source].append(target)
            self._neighbours[target].append(source)
            self._users[source].append(target)
            self._inputs[target].append(source)
        self._place(trie, owner, None)
        self._order_sections(owner, len(comp.instructions))

    def _order_sections(self, owner: int, size: int) -> None:
        """Sections in the order they run; a layer's backward names its forward, and back."""
        groups = {self.section[k]: k for k in self.children[owner] if k in self.section}
        if not groups:
            return
        middle = [groups[name] for name in SECTIONS if name in groups]
        middle = [g for g in middle if self.section[g] not in (INPUTS, OUTPUTS)]
        for group, order in zip(middle, sorted(self.order[g] for g in middle)):
            self.order[group] = order
        if INPUTS in groups:
            self.order[groups[INPUTS]] = -1.0
        if OUTPUTS in groups:
            self.order[groups[OUTPUTS]] = float(size)
        for name, group in groups.items():
            self.notes[group] = SECTION_NOTES[name]
            self._flow_sort(group)
        forward = self._scope_paths(groups.get(FORWARD))
        backward = self._scope_paths(groups.get(BACKWARD))
        for path, group in backward.items():
            twin = tuple(p.removesuffix(BACKWARD_SUFFIX) for p in path)
            if twin in forward:
                self.notes[group] = (
                    f"the backward pass of {twin[-1]}; its forward pass is in "
                    f"{place_label(FORWARD, list(twin))}"
                )
                self.notes[forward[twin]] = (
                    f"the forward pass of {twin[-1]}; its backward pass is in "
                    f"{place_label(BACKWARD, list(path))}"
                )

    def _flow_sort(self, group: int) -> None:
        """Order a group's children as data flows between them, then by program order.

        The backward pass runs from the last layer to the first whatever order the
        compiler printed it in; a cycle is broken at the child that comes first.
        """
        kids = self.children[group]
        child: dict[int, int] = {}
        stack = [(k, k) for k in kids]
        while stack:
            node, top = stack.pop()
            child[node] = top
            stack.extend((k, top) for k in self.children[node])
        after: dict[int, set[int]] = {k: set() for k in kids}
        waiting = dict.fromkeys(kids, 0)
        for node, top in child.items():
            for user in self._users.get(node, ()):
                other = child.get(user)
                if other is not None and other != top and other not in after[top]:
                    after[top].add(other)
                    waiting[other] += 1
        ready = [(self.order[k], k) for k in kids if not waiting[k]]
        heapq.heapify(ready)
        sequence: list[int] = []
        left = set(kids)
        while left:
            if not ready:  # a cycle: start from the earliest child left
                first = min(left, key=self.order.__getitem__)
                waiting[first] = 0
                ready.append((self.order[first], first))
            _, kid = heapq.heappop(ready)
            if kid not in left:
                continue
            left.discard(kid)
            sequence.append(kid)
            for other in after[kid]:
                waiting[other] -= 1
                if waiting[other] == 0 and other in left:
                    heapq.heappush(ready, (self.order[other], other))
        for kid, order in zip(sequence, sorted(self.order[k] for k in kids)):
            self.order[kid] = order

    def _scope_paths(self, group: int | None) -> dict[tuple[str, ...], int]:
        """The scope groups under ``group`` by their label path (the first of each)."""
        found: dict[tuple[str, ...], int] = {}
        stack = [(group, ())] if group is not None else []
        while stack:
            node, path = stack.pop()
            for kid in self.children[node]:
                if self.kind[kid] == SCOPE:
                    found.setdefault((*path, self.label[kid]), kid)
                    stack.append((kid, (*path, self.label[kid])))
        return found

    def _place(self, trie: dict, parent: int, members: set[int] | None, split=True) -> None:
        """Put the instructions of ``trie`` under ``parent``, a group per scope piece.

        Inside a section a scope is one group however its ops connect (the backward
        of a layer reads what other layers made), even a layer of one op; elsewhere,
        one per connected piece of more than one op.
        """
        for name, sub in trie.get("sections", ()):
            group = self._add(SCOPE, parent, name, None, 0.0)
            self.section[group] = name
            self._place(sub, group, None, split=False)
            orders = sorted(self.order[c] for c in self.children[group])
            self.order[group] = orders[len(orders) // 2] if orders else 0.0
        for node in trie[""]:
            if members is None or node in members:
                self.parent[node] = parent
                self.children[parent].append(node)
        for name, sub in trie["/"].items():
            label = name
            while not sub[""] and len(sub["/"]) == 1:
                ((child_name, sub),) = sub["/"].items()
                label = f"{label}/{child_name}"
            inside = _trie_members(sub)
            if members is not None:
                inside &= members
            pieces = self._connected_pieces(inside) if split else [inside]
            for piece in pieces:
                if split and (len(piece) == 1 or (len(pieces) > 3 and len(piece) < 4)):
                    self._place(sub, parent, piece, split)
                    continue
                group = self._add(SCOPE, parent, label, None, 0.0)
                self._place(sub, group, piece, split)
                orders = sorted(self.order[c] for c in self.children[group])
                self.order[group] = orders[len(orders) // 2]

    def _connected_pieces(self, nodes: set[int]) -> list[set[int]]:
        """Connected pieces of ``nodes`` by data edges and by operands they share.

        Two ops reading the same value belong together (a layer's backward computes
        its weight and input gradients from the same output gradient, made outside
        it). Operand-less ops (parameters, constants, iotas) join nothing -- one
        zero constant feeds every ``relu`` -- and go with their first user's piece.
        """
        sources = {n for n in nodes if not self.instr[n].operands}
        pieces: list[set[int]] = []
        piece_of: dict[int, int] = {}
        shared: set[int] = set()
        for start in sorted(nodes - sources):
            if start in piece_of:
                continue
            piece, stack = set(), [start]
            piece_of[start] = len(pieces)
            while stack:
                node = stack.pop()
                piece.add(node)
                near = list(self._neighbours.get(node, ()))
                for operand in self._inputs.get(node, ()):
                    if operand not in shared and self.instr[operand].operands:
                        shared.add(operand)
                        near.extend(self._users.get(operand, ()))
                for other in near:
                    if other in nodes and other not in sources and other not in piece_of:
                        piece_of[other] = len(pieces)
                        stack.append(other)
            pieces.append(piece)
        for source in sorted(sources):
            users = [piece_of[u] for u in self._neighbours.get(source, ()) if u in piece_of]
            if users:
                pieces[min(users)].add(source)
            else:
                pieces.append({source})
        return pieces

    def _split_into_parts(self, node: int) -> None:
        """Keep groups at most MAX_CHILDREN wide: runs of loose instructions become parts."""
        stack = [node]
        while stack:
            group = stack.pop()
            kids = sorted(self.children[group], key=self.order.__getitem__)
            self.children[group] = kids
            stack.extend(k for k in kids if self.kind[k] == SCOPE)
            if len(kids) <= MAX_CHILDREN:
                continue
            runs: list[list[int]] = [[]]
            for kid in kids:
                if self.kind[kid] == INSTRUCTION:
                    runs[-1].append(kid)
                else:
                    runs.extend([[kid], []])
            kids = []
            for run in runs:
                if len(run) > 4 and self.kind[run[0]] == INSTRUCTION:
                    kids.extend(self._chunk(run))
                else:
                    kids.extend(run)
            while len(kids) > MAX_CHILDREN:
                kids = self._chunk(kids)
            self.children[group] = []
            for kid in kids:
                self.parent[kid] = group
                self.children[group].append(kid)

    def _chunk(self, kids: list[int]) -> list[int]:
        """Consecutive parts of at most MAX_CHILDREN nodes each, as new PART nodes."""
        count = math.ceil(len(kids) / MAX_CHILDREN)
        size = math.ceil(len(kids) / count)
        parts = []
        for index in range(0, len(kids), size):
            chunk = kids[index : index + size]
            part = self._add(PART, -1, "part", None, self.order[chunk[0]])
            for kid in chunk:
                self.parent[kid] = part
            self.children[part] = chunk
            parts.append(part)
        return parts

    def _renumber(self) -> None:
        """Number the nodes depth first, children in program order."""
        new_order: list[int] = []
        stack = [0]
        while stack:
            node = stack.pop()
            new_order.append(node)
            kids = sorted(self.children[node], key=self.order.__getitem__)
            stack.extend(reversed(kids))
        new_id = {old: new for new, old in enumerate(new_order)}
        self.kind = [self.kind[o] for o in new_order]
        self.label = [self.label[o] for o in new_order]
        self.instr = [self.instr[o] for o in new_order]
        self.order = [self.order[o] for o in new_order]
        self.parent = [new_id.get(self.parent[o], -1) for o in new_order]
        self.children = [[] for _ in new_order]
        for node, parent in enumerate(self.parent):
            if parent >= 0:
                self.children[parent].append(node)
        self.params = {new_id[k]: [new_id[v] for v in vs] for k, vs in self.params.items()}
        self.roots = {new_id[k]: new_id[v] for k, v in self.roots.items()}
        self.notes = {new_id[k]: v for k, v in self.notes.items()}
        self.section = {new_id[k]: v for k, v in self.section.items()}
        self.blocks = [
            (new_id[owner], [(new_id[s], new_id[t], b, i) for s, t, b, i in edges])
            for owner, edges in self.blocks
        ]

    # -- questions about the tree ----------------------------------------------

    def initial_open(self) -> list[int]:
        """Groups to show open: breadth first, while at most OPEN_NODES nodes show.

        A training step opens on its sections with the forward and backward passes
        open and their layers closed; inputs, the loss, the optimizer update and the
        outputs stay closed. A call or loop that holds most of its computation's
        instructions (a command buffer, a training loop) is entered.
        """
        sizes = [1 if kind == INSTRUCTION else 0 for kind in self.kind]
        for node in range(len(self.kind) - 1, 0, -1):
            sizes[self.parent[node]] += sizes[node]
        opened = [0]
        visible = len(self.children[0])
        frontier = [0]
        while frontier:
            candidates = [
                k for node in frontier for k in self.children[node] if self._opens(k, node, sizes)
            ]
            frontier = []
            for group in candidates:
                extra = len(self.children[group]) - 1
                if visible + extra <= OPEN_NODES:
                    opened.append(group)
                    visible += extra
                    frontier.append(group)
        return opened

    def _opens(self, node: int, parent: int, sizes: list[int]) -> bool:
        if not self.children[node] or self.section.get(parent) in _OPEN_SECTIONS:
            return False
        if node in self.section:
            return self.section[node] in _OPEN_SECTIONS
        if self.kind[node] != INSTRUCTION:
            return True
        return self.instr[node].opcode in _ENTERED and 2 * sizes[node] > sizes[parent]

    def visible(self, opened: set[int]) -> tuple[list[int], dict[tuple[int, int], int]]:
        """The nodes drawn (not open groups) and the edges between them, for a set of open nodes."""
        nodes = []
        stack = [0]
        while stack:
            node = stack.pop()
            if node in opened and self.children[node]:
                stack.extend(self.children[node])
            else:
                nodes.append(node)

        def shown(node: int) -> int:
            shown_as, walk = node, self.parent[node]
            while walk >= 0:
                if walk not in opened:
                    shown_as = walk
                walk = self.parent[walk]
            return shown_as

        edges: dict[tuple[int, int], int] = defaultdict(int)
        for owner, block in self.blocks:
            if shown(owner) != owner or owner not in opened:
                continue
            for source, target, nbytes, index in block:
                while source in opened and source in self.roots:
                    source = self.roots[source]
                while target in opened and index < len(self.params.get(target, ())):
                    target = self.params[target][index]
                a, b = shown(source), shown(target)
                if a != b and not self._contains(a, b) and not self._contains(b, a):
                    edges[(a, b)] += nbytes
        return sorted(nodes), dict(edges)

    def _contains(self, group: int, node: int) -> bool:
        while node >= 0:
            if node == group:
                return True
            node = self.parent[node]
        return False

    def payload(self, title: str, stage: str | None) -> dict:
        """The compact, JSON-ready description of the graph that the viewer reads."""
        module = self.module
        strings: dict[str, int] = {"": 0}

        def intern(text: str) -> int:
            return strings.setdefault(text, len(strings))

        n = len(self.kind)
        flops, nbytes, count = [0] * n, [0] * n, [0] * n
        cat, op, shape, text, scope, location, source = (
            [8] * n,
            [""] * n,
            [""] * n,
            [""] * n,
            [0] * n,
            [0] * n,
            [0] * n,
        )
        for node in range(n - 1, -1, -1):
            instr = self.instr[node]
            if instr is not None:
                flops[node] = instruction_flops(instr, module)
                nbytes[node] = instruction_bytes(instr, module)
                cat[node] = CATEGORIES.index(_category(instr, module))
                op[node] = instr.opcode
                shape[node] = _clip(str(instr.shape), 400)
                text[node] = _clip(_display_text(instr), 4000)
                scope[node] = intern(instr.metadata.op_name)
                if instr.metadata.source_file:  # the short label on show, the full path beside it
                    line = instr.metadata.source_line
                    location[node] = intern(instr.source_location)
                    source[node] = intern(instr.metadata.source_file + (f":{line}" if line else ""))
            else:
                flops[node] = sum(flops[k] for k in self.children[node])
                nbytes[node] = sum(nbytes[k] for k in self.children[node])
                count[node] = sum(
                    1 if self.kind[k] == INSTRUCTION else count[k] for k in self.children[node]
                )
                if self.kind[node] == PART:
                    self.label[node] = _summary(self, node)
        for node in range(n):
            if self.kind[node] == INSTRUCTION and self.children[node]:
                count[node] = _direct_count(self, node)
        note = [intern(self.notes.get(node, "")) for node in range(n)]
        return {
            "version": 1,
            "title": title,
            "stage": stage or "",
            "module": module.name,
            "categories": list(CATEGORIES),
            "legend": list(CATEGORY_LABELS.items()),
            "strings": list(strings),
            "kind": self.kind,
            "parent": self.parent,
            "label": self.label,
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
            "instructions": sum(1 for kind in self.kind if kind == INSTRUCTION),
            "params": {str(k): v for k, v in self.params.items()},
            "roots": {str(k): v for k, v in self.roots.items()},
            "blocks": [
                [owner, [x for edge in edges for x in edge]] for owner, edges in self.blocks
            ],
            "open": self.initial_open(),
        }


def _direct_count(data: _GraphData, node: int) -> int:
    total = 0
    for kid in data.children[node]:
        total += 1 if data.kind[kid] == INSTRUCTION else _direct_count(data, kid)
    return total


def _summary(data: _GraphData, node: int) -> str:
    """A part's label: what its ops do, most frequent first (``conv ×2, add ×9``)."""
    ops: Counter[str] = Counter()
    stack = list(data.children[node])
    while stack:
        kid = stack.pop()
        instr = data.instr[kid]
        if instr is None:
            stack.extend(data.children[kid])
        elif instr.opcode not in _PLUMBING:
            ops[_what_it_does(instr, data.module)] += 1
    top = [f"{name} ×{k}" if k > 1 else name for name, k in ops.most_common(3)]
    return ", ".join(top) or "parameters"


def _program_computations(
    instr: HloInstruction, module: HloModule
) -> list[tuple[HloComputation, str]]:
    called = []
    for ref in instr.called_computations:
        comp = module.computations.get(ref.name)
        if comp is None or comp.is_entry:
            continue
        if ref.role in _RUN_ROLES or (ref.role == "to_apply" and instr.opcode == "call"):
            called.append((comp, ref.role))
    return called


def _program_order(comp: HloComputation) -> list[float]:
    """Sort keys in program order; an operand-less op (parameter, constant) sits by its first user."""
    index = {instr.name: i for i, instr in enumerate(comp.instructions)}
    first_user: dict[str, int] = {}
    for i, instr in enumerate(comp.instructions):
        for operand in instr.operands:
            first_user.setdefault(operand, i)
    return [
        first_user[instr.name] - 0.5
        if not instr.operands and instr.name in first_user
        else float(i)
        for instr, i in zip(comp.instructions, index.values())
    ]


def _is_program(comp: HloComputation) -> bool:
    return comp.kind not in ("fusion", "applied")


def _trie_members(trie: dict) -> set[int]:
    members = set(trie[""])
    for sub in trie["/"].values():
        members |= _trie_members(sub)
    return members


def _category(instr: HloInstruction, module: HloModule) -> str:
    """The colour category; a fusion takes the most telling category of what it fuses."""
    category = op_category(instr)
    if category != "fusion":
        return category if category in CATEGORIES else "other"
    inside = {op_category(i) for c in module.called(instr) for i in c}
    for choice in ("matmul", "collective", "reduction", "elementwise", "data_movement"):
        if choice in inside:
            return choice
    return "other"


def _what_it_does(instr: HloInstruction, module: HloModule) -> str:
    """A fusion's dot/convolution/collective/reduce, else the JAX op that made it, else the opcode."""
    if instr.opcode == "fusion":
        inside = [i for c in module.called(instr) for i in c]
        for wanted in ("matmul", "collective", "reduction"):
            for inner in inside:
                if op_category(inner) == wanted:
                    return inner.opcode
    jax_op = split_scope(instr.metadata.op_name)[-1:]
    return jax_op[0] if jax_op else instr.opcode


def _display_text(instr: HloInstruction) -> str:
    """The instruction's HLO line without its metadata, which the panel shows apart."""
    text = instr.text
    metadata = instr.attributes.get("metadata")
    if metadata:
        text = text.replace(f", metadata={metadata}", "")
    return text


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
