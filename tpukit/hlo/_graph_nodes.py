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
from collections.abc import Iterable, Mapping

from tpukit.display import format_bytes, format_flops
from tpukit.hlo._cost import instruction_bytes, instruction_flops, op_category
from tpukit.hlo._graph_schema import CATEGORIES as CATEGORIES
from tpukit.hlo._graph_schema import CATEGORY_LABELS as CATEGORY_LABELS
from tpukit.hlo._graph_schema import COMPUTATION as COMPUTATION
from tpukit.hlo._graph_schema import FUSION_COLOURED_BY
from tpukit.hlo._graph_schema import INSTRUCTION as INSTRUCTION
from tpukit.hlo._graph_schema import PART as PART
from tpukit.hlo._graph_schema import SCOPE as SCOPE
from tpukit.hlo._model import HloInstruction, HloModule
from tpukit.hlo._parser import metadata_text
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


def part_label(
    instrs: Iterable[HloInstruction],
    module: HloModule,
    costs: Mapping[int, tuple[int, int]] | None = None,
) -> str:
    """A part's label: the op that carries its work, then its size.

    Named by what dominates its FLOPs (``dot ×4 (12.3 TFLOP) · 40 ops``), else its
    bytes (``copy ×213 (1.2 GiB) · 540 ops``), so the dots that do the work are named
    even where the HLO carries no op names; a part of parameters and constants says so.
    ``costs`` gives each instruction's ``(flops, bytes)`` by ``id`` when they are known
    already (`_graph_costs.instruction_costs`), so they are not computed again.
    """
    instrs = list(instrs)
    flops: Counter[str] = Counter()
    nbytes: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for instr in instrs:
        if instr.opcode in PLUMBING:
            continue
        name = what_it_does(instr, module)
        count[name] += 1
        known = costs.get(id(instr)) if costs is not None else None
        if known is None:
            known = instruction_flops(instr, module), instruction_bytes(instr, module)
        flops[name] += known[0]
        nbytes[name] += known[1]
    if not count:
        kinds = {i.opcode for i in instrs}
        return "constants" if kinds <= {"constant"} else "parameters"
    size = f" · {len(instrs)} ops" if len(instrs) > 1 else ""
    if sum(flops.values()):
        name, figure = flops.most_common(1)[0][0], format_flops(flops.most_common(1)[0][1])
    elif sum(nbytes.values()):
        name, figure = nbytes.most_common(1)[0][0], format_bytes(nbytes.most_common(1)[0][1])
    else:
        name, figure = count.most_common(1)[0][0], ""
    k = count[name]
    return f"{name}{f' ×{k}' if k > 1 else ''}{f' ({figure})' if figure else ''}{size}"


def display_text(instr: HloInstruction) -> str:
    """The instruction's HLO line without its metadata, which the panel shows apart."""
    text = instr.text
    if ", metadata={" not in text:  # nothing the replace below could remove
        return text
    metadata = metadata_text(instr, text)
    if metadata:
        text = text.replace(f", metadata={metadata}", "")
    return text


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
