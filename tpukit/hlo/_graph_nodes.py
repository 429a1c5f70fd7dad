"""What one node of the HLO graph is and says: its kind, colour category and texts.

`_graph_data` builds the tree of nodes and `_graph_payload` ships it; both read the
node vocabulary from here: the node kinds and the colour categories in legend order
(defined once, with their colours, in `_graph_schema`), which category an instruction
falls in, and the short texts (a part's label, an instruction's HLO line) the viewer shows.

    >>> from tpukit.hlo import parse_hlo
    >>> module = parse_hlo('''
    ... HloModule m
    ... ENTRY e {
    ...   x = f32[4]{0} parameter(0)
    ...   ROOT y = f32[4]{0} exponential(x), metadata={op_name="jit(f)/exp"}
    ... }
    ... ''')
    >>> category(module.instruction("y"), module)
    'elementwise'
    >>> what_it_does(module.instruction("y"), module)
    'exp'
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from tpukit.hlo._cost import op_category
from tpukit.hlo._graph_schema import CATEGORIES as CATEGORIES
from tpukit.hlo._graph_schema import CATEGORY_LABELS as CATEGORY_LABELS
from tpukit.hlo._graph_schema import COMPUTATION as COMPUTATION
from tpukit.hlo._graph_schema import FUSION_COLOURED_BY
from tpukit.hlo._graph_schema import INSTRUCTION as INSTRUCTION
from tpukit.hlo._graph_schema import PART as PART
from tpukit.hlo._graph_schema import SCOPE as SCOPE
from tpukit.hlo._model import HloInstruction, HloModule
from tpukit.hlo._user_scopes import split_scope

#: Ops that carry values around without computing: a part's label leaves them out.
PLUMBING = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast"})


def category(instr: HloInstruction, module: HloModule) -> str:
    """The colour category; a fusion takes the most telling category of what it fuses."""
    found = op_category(instr)
    if found != "fusion":
        return found if found in CATEGORIES else "other"
    inside = {op_category(i) for c in module.called(instr) for i in c}
    return next((c for c in FUSION_COLOURED_BY if c in inside), "other")


def what_it_does(instr: HloInstruction, module: HloModule) -> str:
    """A fusion's dot/convolution/collective/reduce, else the JAX op that made it, else the opcode."""
    if instr.opcode == "fusion":
        inside = [i for c in module.called(instr) for i in c]
        for wanted in ("matmul", "collective", "reduction"):
            for inner in inside:
                if op_category(inner) == wanted:
                    return inner.opcode
    jax_op = split_scope(instr.metadata.op_name)[-1:]
    return jax_op[0] if jax_op else instr.opcode


def part_label(instrs: Iterable[HloInstruction], module: HloModule) -> str:
    """A part's label: what its ops do, most frequent first (``conv ×2, add ×9``)."""
    ops: Counter[str] = Counter(
        what_it_does(instr, module) for instr in instrs if instr.opcode not in PLUMBING
    )
    top = [f"{name} ×{k}" if k > 1 else name for name, k in ops.most_common(3)]
    return ", ".join(top) or "parameters"


def display_text(instr: HloInstruction) -> str:
    """The instruction's HLO line without its metadata, which the panel shows apart."""
    text = instr.text
    metadata = instr.attributes.get("metadata")
    if metadata:
        text = text.replace(f", metadata={metadata}", "")
    return text


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
