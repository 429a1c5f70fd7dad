"""Graphviz DOT export of an HLO graph, for ``dot -Tsvg`` and other tools.

The DOT holds the ENTRY computation: each instruction one node (a fusion is one
node, its fused computation is not drawn), name-scope groups and parts as
nested clusters, colours by op category and edge widths by bytes -- the same
tree the interactive view opens from.

    >>> import pathlib
    >>> compiled = jax.jit(lambda x: jnp.tanh(x @ x)).lower(jnp.ones((8, 8))).compile()
    >>> dot = tpukit.hlo.graph(compiled.as_text()).to_dot()
    >>> dot.startswith("digraph")
    True
    >>> _ = pathlib.Path("step.dot").write_text(dot)   # then: dot -Tsvg step.dot > step.svg
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tpukit.graph._graph_nodes import category
from tpukit.graph._graph_schema import COLOURS, INSTRUCTION

if TYPE_CHECKING:
    from tpukit.graph._graph_data import GraphTree

#: Fill colours by op category, the same as the interactive view's.
CATEGORY_COLORS = {name: entry.light for name, entry in COLOURS.items()}


def quote(text: str) -> str:
    """A DOT double-quoted string holding ``text`` literally."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("\r", "").replace("\n", "\\n")
    return f'"{escaped}"'


def graph_to_dot(data: GraphTree, title: str) -> str:
    """DOT text for the ENTRY computation of ``data`` (see the module docstring)."""
    lines = [
        f"digraph {quote(title)} {{",
        f"  label={quote(title)}; labelloc=t; rankdir=TB; newrank=true;",
        '  node [shape=box, style="rounded,filled", fontname="monospace", fontsize=10];',
        '  edge [color="#8a93a6", arrowsize=0.6];',
    ]

    def emit(node: int, indent: str) -> None:
        for kid in data.children[node]:
            instr = data.instr[kid]
            if data.kind[kid] == INSTRUCTION and instr is not None:
                color = CATEGORY_COLORS.get(category(instr, data.module), "#ffffff")
                label = f"{instr.name}\n{instr.opcode} {instr.shape}"
                lines.append(f"{indent}n{kid} [label={quote(label)}, fillcolor={quote(color)}];")
            else:
                lines.append(f"{indent}subgraph cluster_{kid} {{")
                lines.append(
                    f'{indent}  label={quote(data.label[kid])}; style=rounded; color="#98a2b3";'
                )
                emit(kid, indent + "  ")
                lines.append(f"{indent}}}")

    emit(0, "  ")
    totals: dict[tuple[int, int], int] = {}
    for owner, edges in data.blocks:
        if owner != 0:
            continue
        for source, target, nbytes, _ in edges:
            totals[(source, target)] = totals.get((source, target), 0) + nbytes
    for (source, target), nbytes in totals.items():
        width = min(7.0, max(0.7, 0.6 + 0.55 * math.log2(1 + nbytes / 65536)))
        lines.append(f"  n{source} -> n{target} [penwidth={width:.2f}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
