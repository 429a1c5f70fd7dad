"""Which HLO instruction each kernel on a GPU's streams ran for.

XLA:GPU (JAX 0.11) writes no ``XLA Ops`` line: the trace holds the kernels themselves,
each with the stat ``hlo_op``. That names the instruction for a kernel launched on its
own (a cuDNN convolution outside a command buffer), but inside a command buffer (a CUDA
graph recorded from a stretch of the schedule) it names the buffer (``command_buffer_12``).
There the kernel's own name says more: XLA names a kernel it generates after its fusion,
with ``.`` and ``-`` written ``_`` (``loop_pad_fusion_1`` for ``loop_pad_fusion.1``). Two
things spoil that name: XLA compiles identical fusions once and launches the same kernel
for all of them (every launch then bears the first fusion's name), and libraries launch
kernels of their own names (cuBLAS, cuDNN: ``sm90_xmma_gemm_...``).

The optimized module is scheduled, so a run's kernels come in the order of its
instructions (a loop's body in its own order, once per iteration). Each kernel is placed at the next instruction of that order that could have
launched it: its own fusion, else one of the same family (``input_reduce_fusion.94``
for a launch of ``input_reduce_fusion_97``), else, for a library kernel, the next
library call. A kernel that fits nowhere is left out rather than guessed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tpukit.hlo import HloInstruction, HloModule

#: Instructions that launch nothing on the device: XLA turns them into no kernel.
_NO_KERNEL = frozenset(
    {
        "parameter",
        "constant",
        "get-tuple-element",
        "bitcast",
        "tuple",
        "after-all",
        "opt-barrier",
        "partition-id",
        "replica-id",
        "add-dependency",
    }
)
_NUMBER = re.compile(r"[._]\d+$")


def kernel_name(instruction: str) -> str:
    """The name XLA:GPU gives the kernel it generates for an instruction (a fusion)."""
    return instruction.replace(".", "_").replace("-", "_")


def _family(name: str) -> str:
    """``input_reduce_fusion`` for ``input_reduce_fusion.94`` or ``input_reduce_fusion_97``."""
    return kernel_name(_NUMBER.sub("", name))


def _launches_a_library_kernel(instr: HloInstruction) -> bool:
    return instr.opcode == "custom-call" or (
        instr.opcode == "fusion" and instr.fusion_kind == "kCustom" and "gemm" not in instr.name
    )


def attribute_kernels(
    kernels: Sequence[tuple[str, str]], module: HloModule, names: dict[str, str]
) -> list[str | None]:
    """The instruction of each ``(kernel name, hlo_op)``, the kernels in time order.

    ``names`` maps instruction names and their kernel names to instruction names. The
    walk follows the program into the computations it runs (a loop's body, a branch):
    a kernel named after an instruction there moves it there, and the search for the
    next instruction wraps around inside that computation, as the next iteration does.
    """
    schedules: dict[str, list[HloInstruction]] = {}
    owner: dict[str, str] = {}
    for comp in module.computations.values():
        if comp.kind == "fusion":
            continue
        schedules[comp.name] = [i for i in comp.instructions if i.opcode not in _NO_KERNEL]
        owner.update((i.name, comp.name) for i in schedules[comp.name])
    position = {i.name: k for schedule in schedules.values() for k, i in enumerate(schedule)}
    current = module.entry.name
    placed: list[str | None] = []
    next_index = 0
    last_library: int | None = None  # a library call whose kernels are still coming
    for kernel, hlo_op in kernels:
        own = names.get(hlo_op)
        if own is not None and not hlo_op.startswith("command_buffer"):
            placed.append(own)  # launched on its own: the stat is the instruction
            if own in owner:
                current, next_index = owner[own], position[own] + 1
            last_library = None
            continue
        named = names.get(kernel)
        if named is not None and named in owner:
            if owner[named] != current:  # the program went into a loop body, a branch...
                current, next_index = owner[named], position[named]
            family = _family(kernel)
            tests = [lambda i, named=named: i.name == named]
            tests.append(lambda i, family=family: _family(i.name) == family)
            last_library = None
        elif last_library is not None:
            tests = [lambda i, index=last_library: position[i.name] == index]
        else:
            tests = [_launches_a_library_kernel]
        schedule = schedules[current]
        index = _find(schedule, next_index, tests)
        if named is None:
            last_library = index  # a library call may launch several kernels
        if index is None:
            placed.append(None)
            continue
        placed.append(schedule[index].name)
        next_index = index + 1
    return placed


def _find(schedule: list[HloInstruction], start: int, tests: list[Any]) -> int | None:
    """The first instruction from ``start`` that passes a test, the tests tried in turn; from
    the top of the schedule when none does (the kernel began a new run)."""
    for order in (range(start, len(schedule)), range(0, start)):
        for fits in tests:
            for index in order:
                if fits(schedule[index]):
                    return index
    return None
