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
    The columns are counted in lists (quicker to write) and kept as arrays (`Column`): a
    large module keeps them with its graph, a list and an int object per figure 2.3 times
    the bytes.
    """
    found = data._costs
    if found is None:
        found = tuple(map(_packed, _costed(data)))
        data._costs = found  # type: ignore[assignment]
    return found  # type: ignore[return-value]


def _packed(figures: list[int]) -> Column:
    try:
        return array("q", figures)
    except OverflowError:  # a figure beyond 64 bits
        return figures


def _costed(data: GraphTree) -> tuple[list[int], list[int], list[int]]:
    """`node_costs` as lists."""
    module = data.module
    n = len(data.kind)
    flops, nbytes, own = [0] * n, [0] * n, [0] * n
    instrs, children = data.instr, data.children
    read = _operand_bytes(data)
    # The FLOPs and own bytes of each instruction the tree's parts weighed (for any of its
    # nodes: its operands' bytes are its computation's edges'), not worked out again.
    weighed, data._weighed = data._weighed, {}  # (not kept: a figure per instruction)
    weighed_flops, data._weighed_flops = data._weighed_flops, {}
    tables: dict[str, dict[int, int]] = {}  # instruction bytes of what loops and calls run

    def computation_table(comp: HloComputation) -> dict[int, int]:
        table = tables.get(comp.name)
        if table is None:
            table = tables[comp.name] = computation_bytes(comp, module)
        return table

    flops_of, bytes_of, own_of = flops.__getitem__, nbytes.__getitem__, own.__getitem__
    for node in range(n - 1, -1, -1):
        instr = instrs[node]
        if instr is None:
            kids = children[node]  # (summed in C: a large module has tens of thousands)
            flops[node] = sum(map(flops_of, kids))
            nbytes[node] = sum(map(bytes_of, kids))
            own[node] = sum(map(own_of, kids))
            continue
        opcode = instr.opcode
        if instr.called_computations or opcode in FLOP_OPS:  # the others count none
            found = weighed_flops.get(id(instr))  # (weighed as the tree was made: `_weight`)
            flops[node] = instruction_flops(instr, module) if found is None else found
        own_bytes = weighed.get(id(instr))
        if own_bytes is None:
            own_bytes = bytes_with_operands(instr, module, read[node])
        own[node] = own_bytes
        if opcode in RUNS_COMPUTATIONS:  # a loop or call moves what it runs
            nbytes[node] = executed_bytes(instr, module, computation_table)
        else:
            nbytes[node] = own_bytes
    return flops, nbytes, own


def _operand_bytes(data: GraphTree) -> list[int]:
    """The bytes of each instruction node's operands, from the tree's data edges.

    The tree draws an edge from every operand its computation holds (looked up as
    `HloComputation.get` looks it up), to each place the operand list names it, and
    each edge carries the operand's bytes: their sum is what `bytes_with_operands` needs,
    found without looking up any operand again.
    """
    read = [0] * len(data.kind)
    for _, edges in data.blocks:
        for target, size in zip(edges.target, edges.nbytes):
            read[target] += size
    return read
