"""Parts of a group: how `GraphTree` keeps every open group small enough to read.

Two rules, applied to each group of a program's computation (ENTRY, a loop's body, a
branch) once its user groups are placed:

- a group of more than `MAX_CHILDREN` nodes becomes consecutive parts (a fusion's body
  too: thousands of ops);
- a group whose children, drawn closed, would not fit the first view's frame (more
  ranks of data flow than its height holds, or a rank wider than it) becomes *stages*:
  parts of consecutive ranks of its data flow, each `STAGE_RANKS` ranks at most and no
  wider than the frame. A flat PyTorch/XLA program of 40 ops (no layers to group by) so
  opens as a short chain of stages, each named by the op that holds its FLOPs
  (`_graph_nodes.part_label`), and the first view opens the heaviest (`_first_view`),
  instead of a drawing three frames tall. Where the chain is too long for its heaviest
  stage to be drawn open beside the others (VGG-19's 44 ops: 8 stages; BERT's 700: 200),
  it is *framed* on it: the heaviest stage, a neighbour each side, and the stages before
  and after them each one stage of stages, at most `STAGE_RANKS` to a level, as few
  levels as that allows (BERT's work shows at once, the rest two or three clicks away).
  Where even that does not fit, stages of stages are made while they are too many. A
  training step's sections are never put in a stage; where its forward pass is too
  tall, its layers are, a stage of layers named by its first and last
  (``layer1[0] … layer2[1]``); the parameters and outputs stay as they are.

Ranks are the page's (dagre's): the longest path of data flow to a child, an
operand-less child (parameter, constant) one rank above its first user.

    >>> stages([100.0] * 4, {(0, 1), (1, 2), (2, 3)})  # a chain that fits: as it is
    >>> [len(s) for s in stages([100.0] * 30, {(k, k + 1) for k in range(29)})]
    [6, 6, 6, 6, 6]
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from itertools import compress
from typing import TYPE_CHECKING

from tpukit.graph._flow_components import (
    fits_stage,
    flow_components,
    flow_ranks,
    pieces,
    row_width,
)
from tpukit.graph._graph_nodes import COMPUTATION, INSTRUCTION, PART, SCOPE
from tpukit.graph._graph_sizes import (
    CHAR_W,
    EDGE_SEP,
    FRAME_H,
    FRAME_W,
    LAYOUT,
    MAX_CHARS,
    NODE_SEP,
    PAD,
    WIDTH_SLACK,
)
from tpukit.hlo.analysis import (
    FLOP_OPS,
    INPUTS,
    OUTPUTS,
    bytes_with_operands,
    instruction_flops,
)

if TYPE_CHECKING:
    from tpukit.hlo.text import HloInstruction, HloModule

#: A group with more children than this is split into consecutive parts.
MAX_CHILDREN = 40
#: A part's label in the tree; the payload names it by its work (`_graph_nodes.part_label`).
PART_LABEL = "part"
#: Ranks of data flow in one stage: a stage drawn open, with the closed stages around
#: it, still fits the frame's height (a rank is a box and the gap under it: 70 units).
STAGE_RANKS = 6
# The ranks and the width (drawing units) a group's closed children may take as they are.
_FIT_RANKS = (FRAME_H - 60) // 70
_FIT_WIDTH = FRAME_W / WIDTH_SLACK - 2 * PAD
# A stage's widest rank: drawn open, it has a margin and edges pass it (4, dagre's dummies).
_STAGE_WIDTH = _FIT_WIDTH - 2 * PAD - 4 * (NODE_SEP + EDGE_SEP) / 2
# The ranks a group and one child drawn open in it may take together: a group of ``n``
# ranks, one of them a child of ``m`` ranks, is ``70 (n + m) - 36`` units tall.
_OPEN_RANKS = (FRAME_H + 36) // 70
# An open group's header at its longest (`_graph_frame.Frame.size`).
_HEADER_W = (MAX_CHARS + 20) * CHAR_W + 40
# Sections whose members stay as they are: a program's parameters, its outputs.
_AS_IS = frozenset({INPUTS, OUTPUTS})


def stages(widths: list[float], links: set[tuple[int, int]]) -> list[list[int]] | None:
    """Items ``0..n-1`` (boxes ``widths`` wide, data flowing along ``links``) as stages of
    consecutive ranks, each in item order; None when they fit the frame as they are.

    A rank wider than the frame is cut into pieces that fit (two items at least), each
    its own stage; where its boxes are too wide to pair, the group is cut into the parts
    no data joins (`flow_components`), where each fits a stage.
    """
    rank = flow_ranks(len(widths), links)
    rows = _rows(rank)
    if _fits(rows, widths):  # as `Frame` ranks
        return None
    wide = {r: row_width(members, widths) > _STAGE_WIDTH for r, members in rows.items()}
    cut = [p for r in rows if wide[r] for p in pieces(rows[r], widths, _STAGE_WIDTH)]
    if any(row_width(p, widths) > _STAGE_WIDTH for p in cut):  # boxes too wide to pair:
        parts = flow_components(len(widths), links)  # the parts no data joins, if stages
        fit = all(fits_stage(p, rank, widths, STAGE_RANKS, _STAGE_WIDTH) for p in parts)
        if fit and 1 < len(parts) < len(widths):
            return parts
    per = math.ceil(len(rows) / math.ceil(len(rows) / STAGE_RANKS))  # even stages
    found: list[list[int]] = []
    current: list[int] = []
    count = 0
    for r in sorted(rows):
        if not wide[r]:
            if count == per:
                found.append(current)
                current, count = [], 0
            current += rows[r]
            count += 1
            continue
        if current:
            found.append(current)
            current, count = [], 0
        found.extend(pieces(rows[r], widths, _STAGE_WIDTH))
    if current:
        found.append(current)
    return [sorted(stage) for stage in found]


@functools.lru_cache(maxsize=256)
def _small_stages(
    widths: tuple[float, ...], links: frozenset[tuple[int, int]]
) -> list[list[int]] | None:
    """`stages` of a group of a few items, once per distinct group (read, never changed)."""
    return stages(list(widths), set(links))


def _rows(rank: list[int]) -> dict[int, list[int]]:
    rows: dict[int, list[int]] = defaultdict(list)
    for item, r in enumerate(rank):
        rows[r].append(item)
    return rows


def _fits(rows: dict[int, list[int]], widths: list[float]) -> bool:
    return len(rows) <= _FIT_RANKS and all(
        row_width(members, widths) <= _FIT_WIDTH for members in rows.values()
    )


def _drawn_width(rank: list[int], widths: list[float], links: set[tuple[int, int]]) -> float:
    """The widest rank of items ranked ``rank``, ``widths`` wide, with the edges of
    ``links`` that pass through it (dagre's dummy nodes), as `_graph_frame.Frame` sizes it."""
    row = [0.0] * (max(rank) + 1)
    for item, r in enumerate(rank):
        row[r] += widths[item] + NODE_SEP
    for a, b in links:
        for r in range(min(rank[a], rank[b]) + 1, max(rank[a], rank[b])):
            row[r] += (NODE_SEP + EDGE_SEP) / 2
    return max(row) - NODE_SEP


def _split(items: list[int], most: int) -> list[list[int]]:
    """``items`` in as few consecutive runs of at most ``most`` as there can be, evenly."""
    if not items:
        return []
    size = math.ceil(len(items) / math.ceil(len(items) / most))
    return [items[i : i + size] for i in range(0, len(items), size)]


def box_width(kind: int, label: str, instr: HloInstruction | None, grouped: bool) -> float:
    """A closed box's width, as `_graph_frame.Frame.closed` estimates it from the tree
    (a part, named by its work only in the payload, at its longest)."""
    if kind == INSTRUCTION and instr is not None:
        second = _instruction_chars(instr.opcode, str(instr.shape))
    else:
        second = MAX_CHARS if kind == PART else 32
    chars = min(MAX_CHARS, max(len(label), second))
    return max(70.0, chars * CHAR_W + 20 + (18 if grouped else 0))


@functools.lru_cache(maxsize=1024)  # a module's instructions have few opcodes and shapes
def _instruction_chars(opcode: str, shape: str) -> int:
    """The characters of an instruction box's second line (its opcode and short shape)."""
    return len(opcode) + 1 + len(LAYOUT.sub("", shape)) + (12 if opcode == "fusion" else 0)


class PartsMixin:
    """`GraphTree`'s parts: `MAX_CHILDREN` at most per group, and stages that fit."""

    module: HloModule
    kind: list[int]
    parent: list[int]
    label: list[str]
    instr: list[HloInstruction | None]
    order: list[float]
    children: list[list[int]]
    section: dict[int, str]
    _room: int = _OPEN_RANKS  # the ranks the group `_staged` frames may take (`_room_in`)
    _weighed: dict[int, int]  # id of an instruction -> its bytes (`_weight`)
    _weighed_flops: dict[int, int]  # ... -> its FLOPs, where it has any to count (`_weight`)

    def _add(self, kind: int, parent: int, label: str, instr, order: float) -> int: ...

    def _split_into_parts(
        self, node: int, tables: tuple[dict[int, list[int]], dict[int, int]] | None = None
    ) -> None:
        """Keep groups at most MAX_CHILDREN wide: runs of loose instructions become parts;
        with the ``tables`` of the computation's edges (each instruction's users, the bytes
        it reads: `GraphTree._group_by_scope`'s), groups too big to fit become stages as well."""
        users, read = tables if tables is not None else (None, {})
        # (each group's pairs of children that data flows between: one pass over the edges)
        pairs = self._child_pairs(node, users) if users is not None else {}
        weights: dict[int, tuple[int, int]] = {}  # each group's `_weight`, once
        stack = [node]
        while stack:
            group = stack.pop()
            kids = sorted(self.children[group], key=self.order.__getitem__)
            self.children[group] = kids
            kinds = list(map(self.kind.__getitem__, kids))
            stack.extend(compress(kids, map(SCOPE.__eq__, kinds)))
            if users is not None and len(kids) > 2 and self.section.get(group) not in _AS_IS:
                kids = self._staged(kids, group, pairs, read, weights)
                kinds = list(map(self.kind.__getitem__, kids))
            if len(kids) > MAX_CHILDREN:
                kids = self._split_runs(kids, kinds)
            self.children[group] = []
            for kid in kids:
                self.parent[kid] = group
                self.children[group].append(kid)

    def _child_pairs(
        self, node: int, users: dict[int, list[int]]
    ) -> dict[int, list[tuple[int, int]]]:
        """Each group under ``node`` (``node`` too) -> the pairs ``(a, b)`` of its children
        that data flows from ``a`` to ``b`` (an instruction under ``a`` is read by one under
        ``b``), before any is staged: each edge of ``users`` where its two ends first share a
        group (their nearest common one), found once, not at every level of groups above.

        `_links` reads a group's pairs for its children, or for stages of them."""
        kind, children, parent = self.kind, self.children, self.parent
        depth = {node: 0}
        stack = [node]
        while stack:
            group = stack.pop()
            below = depth[group] + 1
            for kid in children[group]:
                depth[kid] = below
                if kind[kid] != INSTRUCTION:
                    stack.append(kid)
        pairs: dict[int, list[tuple[int, int]]] = defaultdict(list)
        level = depth.get
        for source, targets in users.items():
            at = level(source)
            if at is None:
                continue
            up = parent[source]
            for target in targets:
                other = level(target)
                if other is None:
                    continue
                if parent[target] == up:  # (most edges: both in one group)
                    pairs[up].append((source, target))
                    continue
                a, b = source, target
                for _ in range(at - other):
                    a = parent[a]
                for _ in range(other - at):
                    b = parent[b]
                while parent[a] != parent[b]:
                    a, b = parent[a], parent[b]
                if a != b:
                    pairs[parent[a]].append((a, b))
        return pairs

    def _split_runs(self, kids: list[int], kinds: list[int]) -> list[int]:
        runs: list[list[int]] = [[]]
        if kinds.count(INSTRUCTION) == len(kinds):  # a fusion's ops: one run
            runs[-1] = kids
        else:
            for kid, kind in zip(kids, kinds):
                if kind == INSTRUCTION:
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
        return kids

    def _chunk(self, kids: list[int]) -> list[int]:
        """Consecutive parts of at most MAX_CHILDREN nodes each, as new PART nodes."""
        count = math.ceil(len(kids) / MAX_CHILDREN)
        size = math.ceil(len(kids) / count)
        return [self._part(kids[index : index + size]) for index in range(0, len(kids), size)]

    def _part(self, members: list[int]) -> int:
        part = self._add(PART, -1, PART_LABEL, None, self.order[members[0]])
        for kid in members:
            self.parent[kid] = part
        self.children[part] = members
        return part

    def _staged(
        self,
        kids: list[int],
        group: int,
        pairs: dict[int, list[tuple[int, int]]],
        read: dict[int, int],
        weights: dict[int, tuple[int, int]],
    ) -> list[int]:
        """``kids`` as stages that fit (`stages`), framed on the heaviest (`_framed`); as
        they are when they fit. Strict even for a few ops: a loop's body or a branch is
        drawn open whatever its size (`_first_view`), so it must fit. ``kids``: those of
        ``group``; ``pairs``: `_child_pairs`'."""
        kept = [k for k in kids if k in self.section]  # a step's sections stay as they are
        self._room = self._room_in(group, pairs)  # (`_framed` reads it)
        if kept:
            kids = [k for k in kids if k not in self.section]
        level = pairs.get(group, ())
        staged = self._stages_of(kids, level) if len(kids) > 2 else None
        if staged is None:
            return kept + kids
        framed = self._framed(staged, kept, level, pairs, read, weights)
        if framed is not None:
            return kept + framed
        if self._room < _OPEN_RANKS:  # no frame fits the room: as if it had the whole frame
            self._room = _OPEN_RANKS
            framed = self._framed(staged, kept, level, pairs, read, weights)
            if framed is not None:
                return kept + framed
        beside = self._beside(staged, level, read, weights)
        if beside is not None:
            return kept + [beside]
        while len(staged) > 2:  # no frame fits: stages of stages, while they are too many
            more = self._stages_of(staged, level)
            if more is None:
                break
            staged = more
        return kept + staged

    def _stages_of(self, kids: list[int], level: list[tuple[int, int]]) -> list[int] | None:
        """``kids`` as stages (`stages`); None when they fit as they are. ``level``: the
        pairs of their group's children (`_child_pairs`)."""
        widths = self._widths(kids)
        if len(kids) <= _FIT_RANKS and row_width(list(range(len(kids))), widths) <= _FIT_WIDTH:
            return None  # fits however its data flows: no links to find
        links = self._links(kids, level)
        if len(kids) <= _FIT_RANKS:  # (a model's layers repeat the same few small groups)
            found = _small_stages(tuple(widths), frozenset(links))
        else:
            found = stages(widths, links)
        if found is None or len(found) >= len(kids):
            return None
        return [self._stage([kids[i] for i in s]) if len(s) > 1 else kids[s[0]] for s in found]

    def _widths(self, kids: list[int]) -> list[float]:
        """The closed boxes' widths (`box_width`)."""
        kind, label, instr, children = self.kind, self.label, self.instr, self.children
        lazy = self.lazy  # (a fusion whose body the page builds opens too: `_graph_bodies`)
        return [
            box_width(kind[k], label[k], instr[k], bool(children[k]) or k in lazy) for k in kids
        ]

    def _framed(
        self,
        staged: list[int],
        kept: list[int],
        level: list[tuple[int, int]],
        pairs: dict[int, list[tuple[int, int]]],
        read: dict[int, int],
        weights: dict[int, tuple[int, int]],
    ) -> list[int] | None:
        """The stages ``staged`` (in data-flow order, beside the ``kept`` sections) as the
        group shows them: as they are when the heaviest, drawn open among them, fits the
        frame; else framed on it -- the heaviest stage, a neighbour each side where it
        fits, and the stages before and after them each one stage of stages (`_nest`);
        None when even that does not fit (stages beside the heaviest, not after it).

        A long chain of stages (a VGG's 44 convolutions and activations: 8 stages) has no
        room for a stage of 6 ranks beside the others; framed, the first view opens the
        heaviest (`_first_view` ranks a stage of stages by its heaviest stage), and the
        others are a click away, two or three for a program of a thousand ops.
        """
        n = len(staged)
        heft = [self._weight(k, read, weights) for k in staged]
        h = heft.index(max(heft))  # the first of equals: those before rank below it
        items = sorted(kept + staged, key=self.order.__getitem__)  # in data-flow order
        links = self._links(items, level)
        widths = self._widths(items)
        index = {k: i for i, k in enumerate(staged)}
        heavy = items.index(staged[h])
        # (a scope's children are joined by its own pairs; a stage's, by this group's)
        opened = pairs.get(staged[h], ()) if self.kind[staged[h]] == SCOPE else level
        inner, widths[heavy] = self._open_size(staged[h], opened)
        nested = box_width(PART, PART_LABEL, None, True)  # named by its work, at its longest

        def fits(lo: int, hi: int) -> bool:  # staged[lo:hi] as they are, the others nested
            group: list[int] = []
            first: dict[object, int] = {}
            for k in items:
                i = index.get(k, -1)
                key = k if i < 0 or lo <= i < hi else ("before" if i < lo else "after")
                group.append(first.setdefault(key, len(first)))
            sizes = [nested] * len(first)
            for position, g in enumerate(group):
                if group.count(g) == 1:
                    sizes[g] = widths[position]
            joined = {(group[x], group[y]) for x, y in links if group[x] != group[y]}
            rank = flow_ranks(len(first), joined)
            rows = max(rank) + 1
            return (
                rows <= _FIT_RANKS
                and rows + inner <= self._room
                and _drawn_width(rank, sizes, joined) <= _FIT_WIDTH
            )

        if fits(0, n):
            return staged
        lo, hi = h, h + 1
        if not fits(lo, hi):
            return None
        if lo > 0 and fits(lo - 1, hi):  # a neighbour each side, where it fits: more
            lo -= 1  # would draw more of the long edges around the open stage
        if hi < n and fits(lo, hi + 1):
            hi += 1
        before, after = staged[:lo], staged[hi:]
        return [
            *([self._nest(before, heft[:lo])] if before else []),
            *staged[lo:hi],
            *([self._nest(after, heft[hi:])] if after else []),
        ]

    def _room_in(self, group: int, pairs: dict[int, list[tuple[int, int]]]) -> int:
        """Ranks ``group`` and an open child may take: a scope under a computation, less its rows."""
        parent = self.parent[group]
        if self.kind[group] != SCOPE or group in self.section or self.kind[parent] != COMPUTATION:
            return _OPEN_RANKS  # (kz_llama2_tp4_pp2's aten__norm.14, under 4 ranks: 7, not 11)
        kids = sorted(self.children[parent], key=self.order.__getitem__)  # as drawn
        links = self._links(kids, pairs.get(parent, ()))
        return (FRAME_H + 72) // 70 - max(flow_ranks(len(kids), links)) - 1

    def _beside(
        self,
        staged: list[int],
        level: list[tuple[int, int]],
        read: dict[int, int],
        weights: dict[int, tuple[int, int]],
    ) -> int | None:
        """Stages no data joins, too wide to frame, as one stage of two in one row: the
        heaviest stage of ops and a stage of the others (gpu_cudnn_conv); None if not."""
        if len(staged) < 3 or self._links(staged, level):
            return None
        heavy = max(staged, key=lambda k: self._weight(k, read, weights))  # first of equals
        if self.kind[heavy] != PART or any(self.kind[k] == PART for k in self.children[heavy]):
            return None  # (a stage of ops: what the first view opens beside the others)
        _, width = self._open_size(heavy, level)
        if width + NODE_SEP + box_width(PART, PART_LABEL, None, True) + 4 * PAD > FRAME_W:
            return None
        others = [k for k in staged if k != heavy]
        rest = self._nest(others, [self._weight(k, read, weights) for k in others])
        return self._stage(sorted([heavy, rest], key=self.order.__getitem__))

    def _nest(self, items: list[int], heft: list[tuple[int, int]]) -> int:
        """``items`` (consecutive stages, each weighing ``heft``: `_weight`) as one stage of
        stages, at most `STAGE_RANKS` children per level, as few levels as that allows
        (`_even`), except that the heaviest item stands alone at the top level, between
        those before it and those after it, each side in as few stages of stages as keep
        it that deep (`STAGE_RANKS` + 1 children at most). So the heaviest op of a long nest
        is two clicks from its box, not three: wq_linear_tp4_pp8's 28 stages (of two to
        ten ops) before its heaviest stage were six of five, its heaviest op in the third."""
        if len(items) <= STAGE_RANKS:
            return self._even(items)
        levels = 1
        while STAGE_RANKS**levels < len(items):
            levels += 1
        most = STAGE_RANKS ** (levels - 1)  # the items a stage of stages below may hold
        h = heft.index(max(heft))  # the first of equals
        chunks = [*_split(items[:h], most), [items[h]], *_split(items[h + 1 :], most)]
        return self._stage([self._even(chunk) for chunk in chunks])

    def _even(self, items: list[int]) -> int:
        """``items`` as one stage of stages, at most `STAGE_RANKS` children per level, as
        few levels as that allows, evenly filled (one item: itself)."""
        if len(items) == 1:
            return items[0]
        if len(items) <= STAGE_RANKS:
            return self._stage(items)
        levels = math.ceil(math.log(len(items)) / math.log(STAGE_RANKS))
        count = math.ceil(len(items) ** (1 / levels))
        size = math.ceil(len(items) / count)
        return self._stage([self._even(items[i : i + size]) for i in range(0, len(items), size)])

    def _open_size(self, node: int, level: list[tuple[int, int]]) -> tuple[int, float]:
        """The ranks of ``node``'s children and the box's width, drawn open (no ranks and
        its closed width for a box that does not open). A scope is cut into stages after
        the group it sits in (`_split_into_parts` walks down): it is weighed as those
        stages (`stages`), not as its ops, which may be more ranks than any frame holds
        (kz_llama2_tp4_pp2's ``aten__norm.14``: 13 ranks of ops, 3 stages). ``level``: the
        pairs its children are joined by (`_child_pairs`)."""
        kids = self.children[node]
        opens = bool(kids) or node in self.lazy  # (`_widths`)
        closed = box_width(self.kind[node], self.label[node], self.instr[node], opens)
        if self.kind[node] == INSTRUCTION or not kids:
            return 0, closed
        links = self._links(kids, level)
        widths = self._widths(kids)
        found = stages(widths, links) if self.kind[node] == SCOPE and len(kids) > 2 else None
        if found is not None:  # drawn open, the scope shows its stages
            at = {k: s for s, stage in enumerate(found) for k in stage}
            links = {(at[a], at[b]) for a, b in links if at[a] != at[b]}
            nested = box_width(PART, PART_LABEL, None, True)
            widths = [widths[s[0]] if len(s) == 1 else nested for s in found]
        rank = flow_ranks(len(widths), links)
        return max(rank) + 1, max(_drawn_width(rank, widths, links) + 2 * PAD, _HEADER_W)

    def _weight(
        self, node: int, read: dict[int, int], weights: dict[int, tuple[int, int]]
    ) -> tuple[int, int]:
        """``(FLOPs, bytes)`` of ``node``'s instructions as `_graph_costs.node_costs` counts
        them (an instruction's FLOPs with what it calls, its own bytes: it reads them from
        ``_weighed_flops`` and ``_weighed``); a group's kept in ``weights`` (weighed at every
        level framed above)."""
        found = weights.get(node)
        if found is not None:
            return found
        module, kind, children, instrs = self.module, self.kind, self.children, self.instr
        flops = nbytes = 0
        for k in children[node] if kind[node] != INSTRUCTION or instrs[node] is None else (node,):
            instr = instrs[k]
            if kind[k] != INSTRUCTION or instr is None:
                f, b = self._weight(k, read, weights)
            else:
                if instr.called_computations or instr.opcode in FLOP_OPS:
                    f = self._weighed_flops[id(instr)] = instruction_flops(instr, module)
                else:
                    f = 0
                b = self._weighed[id(instr)] = bytes_with_operands(instr, module, read.get(k, 0))
            flops += f
            nbytes += b
        found = weights[node] = (flops, nbytes)
        return found

    def _stage(self, members: list[int]) -> int:
        """A part of ``members``; one holding layers (user groups) is named by the first
        and last (``layer1[0] … layer2[1]``, their types left out), any other by its work
        in the payload (`_graph_nodes.part_label`)."""
        part = self._part(members)
        scopes = [self.label[k].split(" (")[0] for k in members if self.kind[k] == SCOPE]
        if len(scopes) > 1:
            self.label[part] = f"{scopes[0]} … {scopes[-1]}"
        elif scopes:
            self.label[part] = f"{scopes[0]} …"
        return part

    def _links(self, kids: list[int], level: list[tuple[int, int]]) -> set[tuple[int, int]]:
        """The pairs ``(a, b)`` of positions in ``kids`` that data flows from ``a`` to
        ``b`` (between the instructions they hold), from ``level``: the pairs of the
        children of one group (`_child_pairs`), ``kids`` those children or stages of them."""
        kind, children = self.kind, self.children
        at: dict[int, int] = {}  # each child of the group -> its place in ``kids``
        for position, kid in enumerate(kids):
            if kind[kid] != PART:  # most are: no stage to walk
                at[kid] = position
                continue
            stack = [kid]
            while stack:
                node = stack.pop()
                if kind[node] == PART:
                    stack.extend(children[node])
                else:
                    at[node] = position
        links = set()
        add, find = links.add, at.get
        for a, b in level:
            here = find(a)
            if here is not None:
                there = find(b)
                if there is not None and there != here:
                    add((here, there))
        return links
