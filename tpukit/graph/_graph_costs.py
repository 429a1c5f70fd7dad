"""What each node of the HLO graph costs: FLOPs and bytes, computed once per graph.

The first view ranks groups by their FLOPs and bytes (`_first_view`) and the payload
shows them (`_graph_payload`); both read `node_costs`, which costs every instruction
once and keeps the columns on the `GraphTree`, so a second view of the program costs
nothing more.

    >>> text = '''HloModule m
    ...
    ... ENTRY main {
    ...   a = f32[4,8]{1,0} parameter(0)
    ...   b = f32[8,2]{1,0} parameter(1)
    ...   ROOT d = f32[4,2]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    ... }
    ... '''
    >>> from tpukit.graph._graph_data import GraphTree
    >>> from tpukit.hlo.text import parse_hlo
    >>> flops, nbytes, own = node_costs(GraphTree(parse_hlo(text)))
    >>> flops[0], nbytes[0]  # the root: the whole program's
    (128, 224)
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING

from tpukit.hlo.analysis import (
    FLOP_OPS,
    RUNS_COMPUTATIONS,
    bytes_with_operands,
    computation_bytes,
    executed_bytes,
    instruction_flops,
)

if TYPE_CHECKING:
    from tpukit.graph._graph_data import GraphTree
    from tpukit.hlo.text import HloComputation


#: One figure per node: an ``array`` of 64-bit ints (no int object per node), or where a
#: figure is beyond 64 bits, a list of Python's own ints.
Column = array | list


def node_costs(data: GraphTree) -> tuple[Column, Column, Column]:
    """``(flops, bytes, own_bytes)`` of every node, computed once per graph and kept on it.

    An instruction's FLOPs include what it calls (a loop's times its trips); its bytes are
    its own traffic, except that a loop, call or conditional moves what it runs
    (`executed_bytes`); ``own_bytes`` keeps the instruction's own traffic there, which
    is what the first view ranks by (`_first_view`). A group's figures are its children's
    sums. The payload and the first view both read these: each instruction is costed once.
    The columns are arrays (`Column`): a large module keeps them with its graph.
    """
    found = data._costs
    if found is None:
        n = len(data.kind)
        try:
            found = _costed(data, *(array("q", bytes(8 * n)) for _ in range(4)))
        except OverflowError:  # a figure beyond 64 bits
            found = _costed(data, *([0] * n for _ in range(4)))
        data._costs = found  # type: ignore[assignment]
    return found


def _costed(data: GraphTree, flops: Column, nbytes: Column, own: Column, read: Column) -> tuple:
    """`node_costs` written into the columns given, zeros (``read``: a scratch column)."""
    module = data.module
    instrs, children = data.instr, data.children
    _operand_bytes(data, read)
    tables: dict[str, dict[int, int]] = {}  # instruction bytes of what loops and calls run

    def computation_table(comp: HloComputation) -> dict[int, int]:
        table = tables.get(comp.name)
        if table is None:
            table = tables[comp.name] = computation_bytes(comp, module)
        return table

    for node in range(len(instrs) - 1, -1, -1):
        instr = instrs[node]
        if instr is None:
            kids = children[node]
            flops[node] = sum([flops[k] for k in kids])
            nbytes[node] = sum([nbytes[k] for k in kids])
            own[node] = sum([own[k] for k in kids])
            continue
        opcode = instr.opcode
        if instr.called_computations or opcode in FLOP_OPS:  # the others count none
            flops[node] = instruction_flops(instr, module)
        own[node] = own_bytes = bytes_with_operands(instr, module, read[node])
        if opcode in RUNS_COMPUTATIONS:  # a loop or call moves what it runs
            nbytes[node] = executed_bytes(instr, module, computation_table)
        else:
            nbytes[node] = own_bytes
    return flops, nbytes, own


def _operand_bytes(data: GraphTree, read: Column) -> None:
    """Adds to ``read`` the bytes of each instruction node's operands, from the tree's data
    edges.

    The tree draws an edge from every operand its computation holds (looked up as
    `HloComputation.get` looks it up), to each place the operand list names it, and
    each edge carries the operand's bytes: their sum is what `bytes_with_operands` needs,
    found without looking up any operand again.
    """
    for _, edges in data.blocks:
        for target, size in zip(edges.target, edges.nbytes):
            read[target] += size
