"""Parts of a group: how `GraphTree` keeps every open group small enough to read.

Two rules, applied to each group of a program's computation (ENTRY, a loop's body, a
branch) once its user groups are placed:

- a group of more than `MAX_CHILDREN` nodes becomes consecutive parts (a fusion's body
  too: thousands of ops);
- a group whose children, drawn closed, would not fit the first view's frame (more
  ranks of data flow than its height holds, or a rank wider than it) becomes *stages*:
  parts of consecutive ranks of its data flow, each `STAGE_RANKS` ranks at most and no
  wider than the frame, and stages of stages while they are too many. A flat
  PyTorch/XLA program of 40 ops (no layers to group by) so opens as a short chain of
  stages, each named by the op that holds its FLOPs (`_graph_nodes.part_label`), and the
  first view opens the heaviest that fits (`_first_view`), instead of a drawing three
  frames tall. A training step's sections are never put in a stage; where its forward
  pass is too tall, its layers are, a stage of layers named by its first and last
  (``layer1[0] … layer2[1]``); the parameters and outputs stay as they are.

Ranks are the page's (dagre's): the longest path of data flow to a child, an
operand-less child (parameter, constant) one rank above its first user.

    >>> stages([100.0] * 4, {(0, 1), (1, 2), (2, 3)})  # a chain that fits: as it is
    >>> [len(s) for s in stages([100.0] * 30, {(k, k + 1) for k in range(29)})]
    [6, 6, 6, 6, 6]
"""

from __future__ import annotations

import math
from collections import defaultdict
from itertools import compress
from typing import TYPE_CHECKING

from tpukit.graph._graph_nodes import INSTRUCTION, PART, SCOPE
from tpukit.graph._graph_sizes import (
    CHAR_W,
    FRAME_H,
    FRAME_W,
    LAYOUT,
    MAX_CHARS,
    PAD,
    WIDTH_SLACK,
)
from tpukit.hlo.analysis import INPUTS, OUTPUTS

if TYPE_CHECKING:
    from tpukit.hlo.text import HloInstruction

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
_NODE_SEP = 18
# Sections whose members stay as they are: a program's parameters, its outputs.
_AS_IS = frozenset({INPUTS, OUTPUTS})


def stages(widths: list[float], links: set[tuple[int, int]]) -> list[list[int]] | None:
    """Items ``0..n-1`` (boxes ``widths`` wide, data flowing along ``links``) as stages of
    consecutive ranks, each in item order; None when they fit the frame as they are.

    A rank wider than the frame is cut into pieces that fit (two items at least), each
    its own stage.
    """
    if _fits(_rows(_ranks(len(widths), links, pull=False)), widths):  # as `Frame` ranks
        return None
    rows = _rows(_ranks(len(widths), links))
    wide = {r: _row_width(members, widths) > _FIT_WIDTH for r, members in rows.items()}
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
        piece: list[int] = []
        for item in rows[r]:  # two at least: a piece of one would change nothing
            if len(piece) > 1 and _row_width([*piece, item], widths) > _FIT_WIDTH:
                found.append(piece)
                piece = []
            piece.append(item)
        found.append(piece)
    if current:
        found.append(current)
    return [sorted(stage) for stage in found]


def _rows(rank: list[int]) -> dict[int, list[int]]:
    rows: dict[int, list[int]] = defaultdict(list)
    for item, r in enumerate(rank):
        rows[r].append(item)
    return rows


def _fits(rows: dict[int, list[int]], widths: list[float]) -> bool:
    return len(rows) <= _FIT_RANKS and all(
        _row_width(members, widths) <= _FIT_WIDTH for members in rows.values()
    )


def _ranks(count: int, links: set[tuple[int, int]], *, pull: bool = True) -> list[int]:
    """Each item's rank: the longest path of ``links`` to it (``a < b`` for each link
    ``(a, b)``: items are in data-flow order); with ``pull``, an item no link enters sits
    one rank above its first user, as dagre pulls a source next to its user (the frame's
    estimate, `_graph_frame.Frame.ranks`, leaves it at the top: the fit test asks that)."""
    rank = [0] * count
    entered = [False] * count
    users: dict[int, list[int]] = defaultdict(list)
    for a, b in sorted(links):
        entered[b] = True
        users[a].append(b)
        if rank[b] < rank[a] + 1:
            rank[b] = rank[a] + 1
    for item in range(count) if pull else ():
        if not entered[item] and users[item]:
            rank[item] = max(0, min(rank[u] for u in users[item]) - 1)
    return rank


def _row_width(members: list[int], widths: list[float]) -> float:
    return sum(widths[m] for m in members) + _NODE_SEP * (len(members) - 1)


def box_width(kind: int, label: str, instr: HloInstruction | None, grouped: bool) -> float:
    """A closed box's width, as `_graph_frame.Frame.closed` estimates it from the tree
    (a part, named by its work only in the payload, at its longest)."""
    if kind == INSTRUCTION and instr is not None:
        shape = LAYOUT.sub("", str(instr.shape))
        second = len(instr.opcode) + 1 + len(shape) + (12 if instr.opcode == "fusion" else 0)
    else:
        second = MAX_CHARS if kind == PART else 32
    chars = min(MAX_CHARS, max(len(label), second))
    return max(70.0, chars * CHAR_W + 20 + (18 if grouped else 0))


class PartsMixin:
    """`GraphTree`'s parts: `MAX_CHILDREN` at most per group, and stages that fit."""

    kind: list[int]
    parent: list[int]
    label: list[str]
    instr: list[HloInstruction | None]
    order: list[float]
    children: list[list[int]]
    section: dict[int, str]

    def _add(self, kind: int, parent: int, label: str, instr, order: float) -> int: ...

    def _split_into_parts(
        self, node: int, edges: list[tuple[int, int, int, int]] | None = None
    ) -> None:
        """Keep groups at most MAX_CHILDREN wide: runs of loose instructions become parts;
        with the computation's ``edges``, groups too big to fit become stages as well."""
        users: dict[int, list[int]] | None = None
        if edges is not None:
            users = defaultdict(list)
            for source, target, _, _ in edges:
                users[source].append(target)
        stack = [node]
        while stack:
            group = stack.pop()
            kids = sorted(self.children[group], key=self.order.__getitem__)
            self.children[group] = kids
            kinds = list(map(self.kind.__getitem__, kids))
            stack.extend(compress(kids, map(SCOPE.__eq__, kinds)))
            if users is not None and len(kids) > 2 and self.section.get(group) not in _AS_IS:
                kids = self._staged(kids, users)
                kinds = list(map(self.kind.__getitem__, kids))
            if len(kids) > MAX_CHILDREN:
                kids = self._split_runs(kids, kinds)
            self.children[group] = []
            for kid in kids:
                self.parent[kid] = group
                self.children[group].append(kid)

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

    def _staged(self, kids: list[int], users: dict[int, list[int]]) -> list[int]:
        """``kids`` as stages that fit (`stages`), stages of stages while there are more
        than fit; as they are when they fit. Strict even for a few ops: a loop's body or a
        branch is drawn open whatever its size (`_first_view`), so it must fit."""
        kept = [k for k in kids if k in self.section]  # a step's sections stay as they are
        if kept:
            kids = [k for k in kids if k not in self.section]
        while len(kids) > 2:
            widths = [
                box_width(self.kind[k], self.label[k], self.instr[k], bool(self.children[k]))
                for k in kids
            ]
            if len(kids) <= _FIT_RANKS and _row_width(list(range(len(kids))), widths) <= _FIT_WIDTH:
                break  # fits however its data flows: no links to find
            found = stages(widths, self._links(kids, users))
            if found is None or len(found) >= len(kids):
                break
            kids = [self._stage([kids[i] for i in s]) if len(s) > 1 else kids[s[0]] for s in found]
        return kept + kids

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

    def _links(self, kids: list[int], users: dict[int, list[int]]) -> set[tuple[int, int]]:
        """The pairs ``(a, b)`` of positions in ``kids`` that data flows from ``a`` to
        ``b`` (between the instructions they hold), ``a < b``."""
        kind, children = self.kind, self.children
        at: dict[int, int] = {}
        for position, kid in enumerate(kids):
            if kind[kid] == INSTRUCTION:  # most are: no subtree to walk
                at[kid] = position
                continue
            stack = [kid]
            while stack:
                node = stack.pop()
                at[node] = position
                if kind[node] != INSTRUCTION:
                    stack.extend(children[node])
        links = set()
        add, find, none = links.add, at.get, ()
        for node, position in at.items():
            for user in users.get(node, none):
                other = find(user)
                if other is not None and other != position:
                    add((position, other) if position < other else (other, position))
        return links
