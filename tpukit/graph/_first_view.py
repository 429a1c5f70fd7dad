"""Which groups the HLO graph shows open when it first draws: the work, not the plumbing.

Groups open while at most `OPEN_NODES` nodes show and the drawing fits, the heaviest
first, wherever it is: a group that opens offers its children, and the heaviest of all
the groups offered opens next. So the path down to the heaviest stage opens before a
lighter sibling of a group on it takes the room (breadth first, a stage of stages' lighter
neighbours took the frame's height and its heaviest stage stayed closed). These rules
decide what that budget goes to:

- a call or loop that holds most of its computation's instructions is entered
  whatever the budget: a GPU module runs all its work in one ``call`` to a command
  buffer, and a training loop's body is the program, so one closed box says nothing;
- among the groups that could open, those holding the most FLOPs (loops counted times
  their trip count) open first, then those moving the most bytes, so the layers and
  fusions that compute come before parameters, constants and tuples, and a loop's body
  before its condition; a stage of stages counts as its heaviest stage (down to a stage
  of ops), so that a long chain framed on its heaviest stage (`_graph_parts`) opens that
  one, not the stage of the many stages after it, which holds more but shows only boxes;
- a group that holds less than half of one that could not open (the frame or the node
  budget had no room for it; it shows closed) stays closed too: drawn open, a light
  neighbour would say it is the work (a step's passes aside: each opens as it fits; and
  ``fit=False``, a diff's sides, which frame their own part of the groups);
- a group of nothing but parameters, constants, values computed from constants alone
  and the tuples, tuple elements and bitcasts that pass them on never opens (a model's
  RoPE tables or shape constants, a loop body's unpacked state are not its work);
- a loop's condition never opens; the body of a loop the view enters always does (it is
  the work; the loop's box says its trip count);
- a stage of ops right under a body the view enters (a loop's body, a call's computation,
  cut into stages by `_graph_parts`) opens where the drawing fits the frame as its ranks
  add up, without the slack `_graph_frame` allows for dagre's alignment: the body opens
  whatever its size, and a body of closed stages says no more than the loop's box
  (fori_matmul's body: its dot's stage, 807 units drawn, where the slack said 1,091);
- so does a stage of ops in a stage of stages that no data joins (`_graph_parts` puts
  the heaviest of independent stages beside a stage of the others: one row, exactly as
  wide as its boxes): gpu_cudnn_conv's heaviest convolution and its reduction;
- a group opens only if the whole drawing still fits the first view's frame, as
  `_graph_frame` estimates it; where even the closed root does not fit (a flat program of
  thousands of instructions), one group opens per level, the heaviest, and the page
  frames the view on it;
- a training step opens on its sections with the forward and backward passes open when
  they fit, their layers closed, the forward pass first: where only one fits, it is the
  forward, the model in its layers' order, each layer's heaviest op two clicks away (the
  backward, about twice its FLOPs, ties op for op with it: a layer's gradient dots, in
  reverse order, its layers cut deeper); the ``inputs`` group (a step's parameters, or the
  parameters of any computation that has many) and the ``outputs`` stay closed.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from tpukit.graph._graph_costs import node_costs
from tpukit.graph._graph_frame import Frame
from tpukit.graph._graph_nodes import INSTRUCTION, PART, PLUMBING
from tpukit.graph._graph_sizes import FRAME_H, FRAME_W
from tpukit.hlo.analysis import BACKWARD, FORWARD, PARAMETER_CONSTANT_OPS
from tpukit.hlo.text import HloComputation

if TYPE_CHECKING:
    from tpukit.graph._graph_data import GraphTree

#: The first view expands groups, heaviest first, while at most this many nodes show.
OPEN_NODES = 60
# Sections the first view shows open (their layers closed); the others stay closed.
_OPEN_SECTIONS = frozenset({FORWARD, BACKWARD})
# Instructions the first view enters when they hold most of their computation's work.
_ENTERED = frozenset({"call", "while", "conditional", "async-start"})


def first_view(data: GraphTree, *, fit: bool = True) -> list[int]:
    """The groups to show open, the root first (see the module docstring for the rules).

    Worked out once per tree and kept on it: the payload and the text fallback both ask.
    ``fit=False`` leaves out the frame: the groups the node budget allows, for a view
    that shows its own part of them (each side of a diff, half as wide).
    """
    if not fit:
        return _opened(data, fit=False)
    if data._first_view is None:
        data._first_view = _opened(data)
    return list(data._first_view)


def _opened(data: GraphTree, *, fit: bool = True) -> list[int]:
    sizes = [1 if kind == INSTRUCTION else 0 for kind in data.kind]
    for node, hidden in data.hidden.items():  # bodies a glance's tree leaves out
        sizes[node] += hidden
    for node in range(len(data.kind) - 1, 0, -1):
        sizes[data.parent[node]] += sizes[node]
    flops, _, nbytes = node_costs(data)  # computed once, with the payload's
    plumbing = _plumbing(data)
    frame = Frame(data)

    def heaviest(node: int) -> tuple[int, int]:  # a stage of stages: its heaviest stage's
        kids = data.children[node]
        while data.kind[node] == PART and any(data.kind[k] == PART for k in kids):
            node = min(kids, key=lambda k: (-flops[k], -nbytes[k]))
            kids = data.children[node]
        return -flops[node], -nbytes[node]

    opened = [0]
    shown = {0}
    fits = not fit or frame.fits(shown)  # a root too big to fit: its heaviest groups
    visible = len(data.children[0])
    # (not a forward pass, weight, order, group, depth): a step's forward pass first
    waiting: list[tuple[bool, tuple[int, int], int, int, int]] = []
    levels: set[int] = set()  # depths where a group opened (a root too big: one a level)
    order = itertools.count()  # of equals, the first offered: program order, outer first
    refused: tuple[int, int] | None = None  # the heaviest group that could not open

    def offer(node: int, depth: int) -> None:
        for k in data.children[node]:
            if not plumbing(k) and _opens(data, k, node, sizes):
                later = data.section.get(k) != FORWARD
                heapq.heappush(waiting, (later, heaviest(k), next(order), k, depth))

    offer(0, 1)
    while waiting:
        _, weight, _, group, depth = heapq.heappop(waiting)
        extra = len(data.children[group]) - 1
        entered = data.kind[group] == INSTRUCTION or _is_body(data, group)
        if not entered and _much_lighter(weight, refused):
            continue  # not drawn open beside a group at least twice as heavy shut
        if not (entered or fits) and depth in levels:
            continue  # too big to fit: one group per level, the heaviest
        shown.add(group)
        if entered or (
            visible + extra <= OPEN_NODES
            and (
                not fit
                or not fits
                or frame.fits(shown)
                or (
                    (_work_of_entered(data, group) or _stage_beside(data, frame, group))
                    and _fits_unslacked(frame, shown)
                )
            )
        ):
            opened.append(group)
            levels.add(depth)
            visible += extra
            offer(group, depth + 1)
            continue
        shown.discard(group)
        if fit and group not in data.section and (refused is None or weight < refused):
            refused = weight  # (a step's passes open as they fit, each; a diff's side frames
            # its own part of the groups: `first_view`)
    return _level_order(data, set(opened), heaviest)


def _work_of_entered(data: GraphTree, group: int) -> bool:
    """Whether ``group`` is a stage of ops (a part that holds no parts) right under a call
    or loop body the first view enters: the body is drawn open whatever the frame says, and
    a body of closed stages says no more than its loop's box."""
    parent = data.parent[group] if group else -1
    return (
        parent >= 0
        and data.kind[group] == PART
        and not any(data.kind[k] == PART for k in data.children[group])
        and (data.kind[parent] == INSTRUCTION or _is_body(data, parent))
    )


def _stage_beside(data: GraphTree, frame: Frame, group: int) -> bool:
    """Whether ``group`` is a stage of ops in a stage of stages that no data joins (one
    row: `_graph_parts` puts the heaviest of independent stages beside a stage of the
    others): the row is exactly as wide as its boxes, and the stage's own ops are
    what the view is for (gpu_cudnn_conv's heaviest convolution and its reduction: 784
    units estimated, 786 drawn, where the slack said 964)."""
    parent = data.parent[group] if group else -1
    return (
        parent > 0
        and data.kind[group] == PART
        and data.kind[parent] == PART
        and not any(data.kind[k] == PART for k in data.children[group])
        and not any(frame.ranks(parent)[0])
    )


def _fits_unslacked(frame: Frame, shown: set[int]) -> bool:
    """Whether the drawing with ``shown`` open fits the frame as its ranks add up, without
    the slack `Frame.fits` allows for dagre's alignment (fori_matmul's loop body with its dot
    stage open: 752 units estimated, 807 drawn, where the slack said 1,091)."""
    w, h = frame.size(0, shown)
    return w <= FRAME_W and h <= FRAME_H


def _much_lighter(weight: tuple[int, int], than: tuple[int, int] | None) -> bool:
    """Whether a group of ``weight`` (`_opened`'s key: minus FLOPs, minus bytes) holds
    less than half of ``than``: its FLOPs, or with no FLOPs on either side its bytes."""
    if than is None:
        return False
    if than[0]:
        return 2 * weight[0] > than[0]
    return not weight[0] and 2 * weight[1] > than[1]


def _level_order(
    data: GraphTree, opened: set[int], weight: Callable[[int], tuple[int, int]]
) -> list[int]:
    """``opened`` outer groups first, level by level, each level's heaviest first (of
    equals, in program order): the order the page opens them in (graph_camera.js: the
    first below the root is the work it frames)."""
    order = level = [0]
    while level:
        level = sorted(
            (k for node in level for k in data.children[node] if k in opened), key=weight
        )
        order = order + level
    return order


def _is_body(data: GraphTree, node: int) -> bool:
    """Whether ``node`` is the body of a loop (its first child: `_graph_data`)."""
    caller = data.instr[data.parent[node]] if node else None
    return (
        caller is not None
        and caller.opcode == "while"
        and data.children[node] != []
        and (data.children[data.parent[node]][0] == node)
    )


class BodiesLeftOut(Exception):
    """The first view would enter a call or loop whose bodies the tree leaves out
    (`GraphTree` without ``bodies``): only the whole tree can say what it opens."""


def _opens(data: GraphTree, node: int, parent: int, sizes: list[int]) -> bool:
    """May ``node`` open at all (a closed section or a small call stays closed)?"""
    left_out = node in data.hidden
    if not (data.children[node] or left_out) or data.section.get(parent) in _OPEN_SECTIONS:
        return False
    if node in data.section:
        return data.section[node] in _OPEN_SECTIONS
    caller = data.instr[parent]
    if caller is not None and caller.opcode == "while" and node != data.children[parent][0]:
        return False  # a loop's condition: its body (drawn first) is the work
    if data.kind[node] != INSTRUCTION:
        return True
    entered = data.instr[node].opcode in _ENTERED and 2 * sizes[node] > sizes[parent]
    if entered and left_out:
        raise BodiesLeftOut(data.instr[node].name)
    return entered


def _plumbing(data: GraphTree) -> Callable[[int], bool]:
    """Whether a node holds only setup: parameters, constants and what is computed from
    constants alone (RoPE tables, shape constants, iotas), and the tuples, their elements
    and bitcasts that pass them on (a part of those alone is named "parameters": a loop
    body's unpacked state), through its groups.

    Asked of the few nodes the first view may open: worked out for those alone, a group
    through its members until one does work, a computation's values when one of its
    instructions is asked (`_from_constants`).
    """
    module, instrs, children = data.module, data.instr, data.children
    known: dict[int, bool] = {}
    constants: dict[str, set[str]] = {}

    def only(node: int) -> bool:
        found = known.get(node)
        if found is None:
            instr = instrs[node]
            if instr is None:
                found = all(map(only, children[node]))
            elif children[node] or instr.opcode in PLUMBING:
                found = not children[node]
            else:
                names = constants.get(instr.computation)
                if names is None:
                    comp = module.computations.get(instr.computation)
                    names = constants[instr.computation] = (
                        _from_constants(comp) if comp is not None else set()
                    )
                found = instr.name in names
            known[node] = found
        return found

    return only


def _from_constants(comp: HloComputation) -> set[str]:
    """The names of every value of ``comp`` computed from constants alone."""
    names: set[str] = set()
    for instr in comp.instructions:  # HLO text defines a value before its uses
        if instr.called_computations and instr.opcode != "reduce":
            continue
        if instr.opcode in PARAMETER_CONSTANT_OPS and instr.opcode != "parameter":
            names.add(instr.name)
        elif instr.operands and names.issuperset(instr.operands):
            names.add(instr.name)
    return names
