"""Where each instruction of a profiled program sits: its section and layers, its source.

One job: the places a `Profile` lists its times by, as the graph groups the program
(`plan_scopes`), the body of a loop or call under the instruction that runs it, and the
source line of a fusion without its own (that of the work inside).

Imports: ``tpukit.hlo``.
"""

from __future__ import annotations

from tpukit.hlo import (
    HloComputation,
    HloInstruction,
    HloModule,
    instruction_flops,
    place_label,
    plan_scopes,
)

# Computation kinds whose instructions run as program steps with events of their own.
_NESTED_PROGRAM = frozenset({"while_body", "while_condition", "branch", "called", "async"})


def short_place(section: str, path: list[str]) -> str:
    """Where an instruction sits, without what the deeper names repeat.

    ``backward › layer2[0] (Bottleneck) backward › layer2[0].conv2 (Conv) backward`` reads
    ``backward › layer2[0].conv2 (Conv)``: a module's path holds its parents', and the
    section already says backward. A user's scope inside a module keeps the module.

        >>> short_place("backward", ["layer2[0] (Bottleneck) backward",
        ...                          "layer2[0].conv2 (Conv) backward"])
        'backward › layer2[0].conv2 (Conv)'
    """
    names = [p.removesuffix(f" {section}") if section else p for p in path]
    kept = [
        name
        for name, deeper in zip(names, [*names[1:], None])
        if deeper is None or not deeper.startswith(name.split(" (", 1)[0] + ".")
    ]
    return place_label(section, kept)


def instruction_places(module: HloModule) -> dict[str, tuple[str, list[str]]]:
    """Each instruction's (section, path) as the graph groups it. The body of a loop or
    call is grouped in its own right, under the place of the instruction that runs it
    (fit's step: the training step inside the loop over batches)."""
    placed: dict[str, tuple[str, list[str]]] = {}
    seen: set[str] = set()

    def place(comp: HloComputation, caller: HloInstruction | None, where: tuple[str, list[str]]):
        seen.add(comp.name)
        plan = plan_scopes(comp, module, caller)
        for instr in comp.instructions:
            section = plan.section.get(instr.name, "") or where[0]
            here = (section, [*where[1], *plan.path.get(instr.name, [])])
            placed.setdefault(instr.name, here)
            for called in module.called(instr):
                if called.kind in _NESTED_PROGRAM and called.name not in seen:
                    place(called, instr, here)

    place(module.entry, None, ("", []))
    return placed


def source_of(instr: HloInstruction, module: HloModule) -> str:
    """The instruction's source line; for a fusion without one, that of the work inside."""
    if instr.source_location:
        return instr.source_location
    inside = [i for comp in module.called(instr) for i in comp.instructions if i.source_location]
    inside.sort(key=lambda i: -instruction_flops(i, module))
    return inside[0].source_location if inside else ""
