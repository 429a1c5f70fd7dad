"""The graph the HLO viewer draws: a tree of groups over an HLO module.

A big training step has thousands of instructions in its ENTRY computation, and
no layout library lays that out interactively. `GraphTree` therefore turns an
`HloModule` into a tree: the user's groups from the ``op_name`` metadata (a
training step's sections, its layers and name scopes: `_user_scopes`; a scope's
unconnected uses apart: `_scope_pieces`), consecutive parts of at most `MAX_CHILDREN` nodes when a group is too big, stages of
its data flow when its children would not fit the view (`_graph_parts`), and
every fusion, while, call or conditional as one node whose called computations
open in place. What each node is and says lives in `_graph_nodes`, which groups
the first view opens in `_first_view`, and the JSON the browser reads in
`_graph_payload`; `_graph_view.HloGraph` ships that `payload` to the browser.
"""

from __future__ import annotations

import heapq
from array import array
from collections import defaultdict
from itertools import compress
from operator import attrgetter

from tpukit.graph._graph_bodies import builds_in_page
from tpukit.graph._graph_children import Children
from tpukit.graph._graph_edges import Edges
from tpukit.graph._graph_nodes import CATEGORIES as CATEGORIES
from tpukit.graph._graph_nodes import CATEGORY_LABELS as CATEGORY_LABELS
from tpukit.graph._graph_nodes import COMPUTATION, INSTRUCTION, SCOPE
from tpukit.graph._graph_nodes import PART as PART
from tpukit.graph._graph_parts import MAX_CHILDREN as MAX_CHILDREN
from tpukit.graph._graph_parts import PartsMixin
from tpukit.graph._graph_visible import VisibleMixin
from tpukit.graph._scope_pieces import PiecesMixin
from tpukit.hlo.analysis import (
    BACKWARD,
    BACKWARD_SUFFIX,
    FORWARD,
    INPUTS,
    OUTPUTS,
    SECTION_NOTES,
    SECTIONS,
    forget_parsed_scopes,
    function_name,
    place_label,
    plan_scopes,
    run_computations,
    user_path,
)
from tpukit.hlo.text import HloComputation, HloInstruction, HloModule

_ROLE_LABELS = {"body": "body", "condition": "condition", "branch": "branch"}
#: Key of ``HloModule._analysis``: ``{JAX's argument path prefix: the user's name}``, put
#: there by the program holding the module (`HloProgram`'s ``argument_names``).
ARGUMENT_NAMES = "argument_names"
_NAME = attrgetter("name")
_CALLED = attrgetter("called_computations")
#: The children of every leaf while the tree is built (`GraphTree._add_computation`).
_NO_CHILDREN: tuple[int, ...] = ()


class GraphTree(PartsMixin, PiecesMixin, VisibleMixin):
    """The module as a tree of nodes (instructions and groups) plus its data edges.

    Nodes are numbered in depth-first order, so each node's subtree is the id
    range ``[i, i + size)``. Every column is indexed by node id: lists while the tree is
    built, then (numbered) ``kind`` and ``parent`` as typed arrays, ``order`` too, and
    ``children`` as `Children` (an ``array`` of ids per node).

    Without ``bodies`` each instruction of ENTRY that runs computations (a fusion, call,
    loop or conditional) is a leaf, and ``hidden`` says how many instruction nodes its
    bodies would add: the tree a glance is made from (`_graph_glance`), a tenth of a
    training step's nodes. ENTRY is as in the whole tree (a node's costs come from the
    module), in the same order, so the first view opens the same groups, unless it
    would enter a call or loop (`_first_view.BodiesLeftOut`).
    """

    def __init__(self, module: HloModule, *, bodies: bool = True, lazy: bool = False) -> None:
        self.module = module
        self._bodies = bodies
        #: With ``lazy`` (a page's tree): fusion node -> the body the page builds itself
        #: (`_graph_bodies`), not in this tree; its instructions are the node's ``held``.
        self._lazy = lazy
        self.lazy: dict[int, HloComputation] = {}
        self.lazy_block: dict[int, int] = {}  # (its edges' place among a whole tree's blocks)
        # (bytes and FLOPs `PartsMixin._weight` found, by instr: two tables of ints, not a
        # tuple each, 3 MB more at the peak of a 400,000-instruction module)
        self._weighed: dict[int, int] = {}
        self._weighed_flops: dict[int, int] = {}
        #: Leaf node -> the instruction nodes its bodies hold but this tree does not, and
        #: (``held``) those its bodies hold directly, as the panel counts them.
        self.hidden: dict[int, int] = {}
        self.held: dict[int, int] = {}
        self._body_sizes: dict[str, int] = {}
        self.kind: list[int] = []
        self.parent: list[int] = []
        self.label: list[str] = []
        self.instr: list[HloInstruction | None] = []
        self.order: list[float] = []
        self.children: list[list[int]] = []
        self.params: dict[int, list[int]] = {}
        self.roots: dict[int, int] = {}
        # (owner node, its data edges: `Edges`) per computation shown.
        self.blocks: list[tuple[int, Edges]] = []
        self.notes: dict[int, str] = {}  # node -> why it sits where it does (panel text)
        self.section: dict[int, str] = {}  # section group -> its name (see _user_scopes)
        self._active: set[str] = set()

        entry = module.entry
        root = self._add(COMPUTATION, -1, function_name(entry) or entry.name, None, 0.0)
        self._add_computation(entry, root, scoped=True, caller=None)
        forget_parsed_scopes()  # (the op names' parses: tens of megabytes of a large module)
        self._users = self._inputs = {}  # (the last computation's)
        self._sources: set[int] = set()
        self._whole: set[int] = set()
        self._renumber()
        # Filled on first use: the groups the first view opens (`_first_view`), and costs
        # per node (`_graph_costs`).
        self._first_view: list[int] | None = None
        self._costs: tuple[list[int], list[int], list[int]] | None = None

    # -- building --------------------------------------------------------------

    def _add(self, kind: int, parent: int, label: str, instr, order: float) -> int:
        self.kind.append(kind)
        self.parent.append(parent)
        self.label.append(label)
        self.instr.append(instr)
        self.order.append(order)
        self.children.append([])
        if parent >= 0:
            kids = self.children[parent]
            if kids is _NO_CHILDREN:  # an instruction's: its first (see `_add_computation`)
                kids = self.children[parent] = []
            kids.append(len(self.kind) - 1)
        return len(self.kind) - 1

    def _add_computation(
        self, comp: HloComputation, owner: int, *, scoped: bool, caller: HloInstruction | None
    ) -> None:
        if comp.name in self._active:  # a (malformed) recursive call graph
            return
        self._active.add(comp.name)
        # Every instruction becomes a node under ``owner`` (in bulk: most computations are
        # fusions, whose thousands of instructions need nothing else).
        instructions = comp.instructions
        first = len(self.kind)
        count = len(instructions)
        names = list(map(_NAME, instructions))
        ids = dict(zip(names, range(first, first + count)))
        edges, order, params = _edges_and_order(comp, ids, first)
        self.kind += [INSTRUCTION] * count
        self.parent += [owner] * count
        self.label += names if caller is not None else self._entry_labels(instructions, names)
        self.instr += instructions
        self.order += order
        # An instruction's children are the shared empty tuple until it gets its first (a
        # list each would be 56 bytes: most instructions are a fusion's and never get one).
        self.children += [_NO_CHILDREN] * count  # type: ignore[list-item]
        if self.children[owner] is _NO_CHILDREN:
            self.children[owner] = list(range(first, first + count))
        else:
            self.children[owner] += range(first, first + count)
        self.blocks.append((owner, edges))
        if self.kind[owner] == INSTRUCTION:
            self.params[owner] = [ids[p.name] for p in params]
            root = comp.root
            if root is not None:
                self.roots[owner] = ids[root.name]
        # (what staging reads of a scoped computation's edges: its users, bytes read)
        tables = self._group_by_scope(comp, ids, owner, caller, edges) if scoped else None
        for instr in compress(instructions, map(_CALLED, instructions)):
            called = _program_computations(instr, self.module)
            node = ids[instr.name]
            if not self._bodies:  # (only ENTRY's instructions get this far)
                self.hidden[node] = sum(self._instruction_nodes(sub) for sub, _ in called)
                self.held[node] = sum(len(sub.instructions) for sub, _ in called)
                continue
            if self._lazy and len(called) == 1 and builds_in_page(called[0][0], self.module):
                self.lazy_block[node] = len(self.blocks) + len(self.lazy)
                self.lazy[node] = called[0][0]
                self.hidden[node] = self.held[node] = len(called[0][0].instructions)
                continue
            if len(called) == 1:
                self._add_computation(
                    called[0][0], node, scoped=_is_program(called[0][0]), caller=instr
                )
            else:
                for sub, role in called:
                    label = f"{_ROLE_LABELS.get(role, role)}: {sub.name}"
                    group = self._add(COMPUTATION, node, label, None, 0.0)
                    self._add_computation(sub, group, scoped=_is_program(sub), caller=instr)
        if scoped or len(self.children[owner]) > MAX_CHILDREN:
            self._split_into_parts(owner, tables)
        # else nothing to split: the instructions of a small unscoped computation (a
        # fusion's body) sit under ``owner`` as they are; `_renumber` puts them in order.
        self._active.discard(comp.name)

    def _entry_labels(self, instructions: list[HloInstruction], names: list[str]) -> list[str]:
        """ENTRY's labels: its parameters named as the user named the arguments (JAX's
        path in their ``op_name``: ``x``, ``params['w']``; through the program's
        `ARGUMENT_NAMES` where its call renamed them: ``traced_args[0]`` is ``x``), not
        by their instruction names (``traced_args_0_.1``); the rest by their names."""
        renames = self.module._analysis.get(ARGUMENT_NAMES, {})
        labels = list(names)
        for k, instr in enumerate(instructions):
            path = instr.metadata.op_name if instr.opcode == "parameter" else ""
            if path:
                labels[k] = user_path(path.replace("\\'", "'"), renames)
        return labels

    def _instruction_nodes(self, comp: HloComputation) -> int:
        """The instruction nodes `_add_computation` makes for ``comp``, what it calls
        included (0 for a computation that calls itself back, which it leaves out)."""
        size = self._body_sizes.get(comp.name)
        if size is None:
            if comp.name in self._active:
                return 0
            self._active.add(comp.name)
            size = len(comp.instructions)
            for instr in comp.instructions:
                if instr.called_computations:
                    for sub, _ in _program_computations(instr, self.module):
                        size += self._instruction_nodes(sub)
            self._active.discard(comp.name)
            self._body_sizes[comp.name] = size
        return size

    def _group_by_scope(
        self,
        comp: HloComputation,
        ids: dict[str, int],
        owner: int,
        caller: HloInstruction | None,
        edges: Edges,
    ) -> tuple[dict[int, list[int]], dict[int, int]]:
        """Move the instructions of ``comp`` into nested groups under ``owner``.

        Groups are the user's: the sections of a training step, layers and name
        scopes (`plan_scopes`). A scope used in several unconnected places (one
        ``relu`` per layer) becomes one group per connected piece, so groups follow
        the data flow; a piece of one op, or a tiny piece of a scope scattered in
        many, stays in its parent. Returns the users of each op and the bytes each reads
        (its edges' tables, made once: `_split_into_parts` stages the groups with them).
        """
        plan = plan_scopes(comp, self.module, caller)
        for name, note in plan.notes.items():
            self.notes[ids[name]] = note
        trie: dict = {"": [], "/": {}}  # "" -> instruction ids, "/" -> sub-scopes
        sections: dict[str, dict] = {}
        # The trie of each (section, path): the ops of a scope share one path list (its
        # key's place, or the user's or operand's it follows), so each is walked once.
        walked: dict[tuple[str, int], dict] = {}
        for instr in comp.instructions:
            name = instr.name
            section, path = plan.section[name], plan.path[name]
            node = walked.get((section, id(path)))
            if node is None:
                node = _sub_trie(sections, section) if section else trie
                for part in path:
                    node = _sub_trie(node["/"], part)
                walked[section, id(path)] = node
            node[""].append(ids[name])
        while not trie[""] and len(trie["/"]) == 1:  # the scope every op shares
            trie = next(iter(trie["/"].values()))
        trie["sections"] = [(name, sections[name]) for name in SECTIONS if name in sections]
        self.children[owner] = []
        # The operand-less ops (parameters, constants), for `_connected_pieces` to take apart.
        operand_less = self._sources = {ids[i.name] for i in comp.instructions if not i.operands}
        # (An op's neighbours are its users and its inputs: `_connected_pieces` reads both;
        # of the inputs only those with operands, the only ones that join ops: filtered
        # here once, not at every level of scopes an op is in.)
        users: dict[int, list[int]] = defaultdict(list)
        inputs: dict[int, list[int]] = defaultdict(list)
        read: dict[int, int] = defaultdict(int)  # the bytes each op reads
        for source, target, size in zip(edges.source, edges.target, edges.nbytes):
            users[source].append(target)
            if source not in operand_less:
                inputs[target].append(source)
            read[target] += size
        self._users, self._inputs = users, inputs
        self._whole = self._whole_scopes(trie)
        self._place(trie, owner, None)
        self._order_sections(owner, len(comp.instructions))
        return users, read

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
        children = self.children
        child: dict[int, int] = {}  # every node under the group -> the child it is under
        for top in kids:
            stack = [top]
            while stack:
                node = stack.pop()
                child[node] = top
                if children[node]:
                    stack.extend(children[node])
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
            if members is None and (not split or id(sub) in self._whole):
                # every op of ``sub``, one piece (`_whole_scopes`; in a section, unsplit)
                self._scope_group(sub, parent, label, None, split)
                continue
            inside = _trie_members(sub)
            size = len(inside)
            if members is not None:
                inside &= members
            if split and len(inside) < 2:  # an op alone stays in its parent, as it would
                for node in inside:  # below in ``sub`` (each piece of it is that op alone)
                    self.parent[node] = parent
                    self.children[parent].append(node)
                continue
            pieces = self._connected_pieces(inside) if split else [inside]
            whole = len(inside) == size  # (``inside`` is every op of ``sub``)
            for piece in pieces:
                if split and (len(piece) == 1 or (len(pieces) > 3 and len(piece) < 4)):
                    self._place(sub, parent, piece, split)
                    continue
                # A piece of every op of ``sub`` goes on as no members: no set to filter below.
                whole_piece = whole and len(piece) == size
                self._scope_group(sub, parent, label, None if whole_piece else piece, split)

    def _scope_group(
        self, sub: dict, parent: int, label: str, members: set[int] | None, split: bool
    ) -> None:
        """A group under ``parent`` of the ops of ``sub`` (those in ``members`` if given),
        sorted among its siblings by its children's median order."""
        group = self._add(SCOPE, parent, label, None, 0.0)
        self._place(sub, group, members, split)
        orders = sorted(self.order[c] for c in self.children[group])
        self.order[group] = orders[len(orders) // 2]

    def _renumber(self) -> None:
        """Number the nodes depth first, children in program order."""
        children, key = self.children, self.order.__getitem__
        new_order: list[int] = []
        visit, visit_all = new_order.append, new_order.extend
        families: list[tuple[int, list[int]]] = []  # (node, its children in order)
        stack = [0]
        while stack:
            node = stack.pop()
            visit(node)
            kids = children[node]
            if not kids:
                continue
            if len(kids) > 1:
                kids = sorted(kids, key=key)
            families.append((node, kids))
            if any(map(children.__getitem__, kids)):
                stack.extend(reversed(kids))
            else:  # leaves only (a fusion's ops, a part of them): numbered right here
                visit_all(kids)
        new_id = _inverse(new_order, len(self.kind))
        renumbered = new_id.__getitem__
        # Changed no more once numbered: typed columns (no int or float object per node)
        # and the children as two arrays (`Children`), a large module's tree in a third
        # of the memory.
        self.kind = array("B", map(self.kind.__getitem__, new_order))  # type: ignore[assignment]
        self.label = list(map(self.label.__getitem__, new_order))
        self.instr = list(map(self.instr.__getitem__, new_order))
        self.order = array("d", map(self.order.__getitem__, new_order))  # type: ignore[assignment]
        self.parent = array("i", map(renumbered, map(self.parent.__getitem__, new_order)))  # type: ignore[assignment]
        # (Families come in the order they are numbered, so each one's ids come sorted.)
        self.children = Children.of(  # type: ignore[assignment]
            ((new_id[node], map(renumbered, kids)) for node, kids in families), len(new_order)
        )
        self.params = {new_id[k]: [new_id[v] for v in vs] for k, vs in self.params.items()}
        self.roots = {new_id[k]: new_id[v] for k, v in self.roots.items()}
        self.notes = {new_id[k]: v for k, v in self.notes.items()}
        self.section = {new_id[k]: v for k, v in self.section.items()}
        self.hidden = {new_id[k]: v for k, v in self.hidden.items()}
        self.held = {new_id[k]: v for k, v in self.held.items()}
        self.lazy = {new_id[k]: v for k, v in self.lazy.items()}
        self.lazy_block = {new_id[k]: v for k, v in self.lazy_block.items()}
        self.blocks = [(new_id[owner], edges.renumbered(new_id)) for owner, edges in self.blocks]


def _program_computations(
    instr: HloInstruction, module: HloModule
) -> list[tuple[HloComputation, str]]:
    """The computations ``instr`` runs as program (`run_computations`), a loop's body first."""
    called = [(comp, role) for comp, role in run_computations(instr, module) if not comp.is_entry]
    return sorted(called, key=_is_condition) if len(called) > 1 else called


def _is_condition(called: tuple[HloComputation, str]) -> bool:
    return called[1] == "condition"


def _edges_and_order(
    comp: HloComputation, ids: dict[str, int], first: int
) -> tuple[Edges, list[float], list[HloInstruction]]:
    """The data edges of ``comp`` (`Edges`: source, target, bytes, operand index) between the
    node ids ``ids`` gives, each instruction's sort key in program order (its index, or
    for an operand-less op -- parameter, constant -- its first user's index less 0.5, so
    it sits by that user), and its parameters (`HloComputation.parameters`: sorted once
    per computation, and `_user_scopes` has asked for most). One pass over the
    instructions, each source's bytes read where its edge is made: fusion bodies hold
    most instructions (a loop beats maps and zips here: most computations are a dozen
    instructions).
    """
    instructions = comp.instructions
    order = list(map(float, range(len(instructions))))
    # (a list per column, not a tuple per edge: `Edges` keeps columns)
    sources, targets, sizes, places = [], [], [], []  # type: ignore[var-annotated]
    add_source, add_target = sources.append, targets.append
    add_size, add_place = sizes.append, places.append
    find = ids.get
    index = -1  # counters, not enumerate: about twice as quick in these innermost loops
    for instr in instructions:
        index += 1
        operands = instr.operands
        if not operands:
            continue
        target = first + index
        position = -1
        for operand in operands:
            position += 1
            source = find(operand)
            if source is None:
                found = comp.get(operand) if operand[:1] == "%" else None
                if found is None:
                    continue
                source = ids[found.name]
            local = source - first
            made = instructions[local]
            # (An order moved already is a half, never its index: the first user moves it.)
            if not made.operands and order[local] == local:
                order[local] = index - 0.5
            add_source(source)
            add_target(target)
            add_size(made.shape.nbytes)
            add_place(position)
    return Edges.of_columns(sources, targets, sizes, places), order, comp.parameters


def _inverse(new_order: list[int], size: int) -> list[int]:
    """``new_id[old]`` for the ``size`` old ids, -1 for any left out and at ``new_id[-1]``."""
    new_id = [-1] * (size + 1)
    for new, old in enumerate(new_order):
        new_id[old] = new
    return new_id


def _is_program(comp: HloComputation) -> bool:
    return comp.kind not in ("fusion", "applied")


def _sub_trie(tries: dict[str, dict], name: str) -> dict:
    """The trie of scope ``name`` among ``tries``, new if need be (not a new one per op)."""
    found = tries.get(name)
    if found is None:
        found = tries[name] = {"": [], "/": {}}
    return found


def _trie_members(trie: dict) -> set[int]:
    """Every instruction id in ``trie`` and its sub-scopes (one set, filled as it is walked)."""
    members = set(trie[""])
    stack = list(trie["/"].values())
    while stack:
        sub = stack.pop()
        members.update(sub[""])
        stack.extend(sub["/"].values())
    return members
