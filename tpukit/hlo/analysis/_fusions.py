"""The fusions and the collectives of an HLO module: what XLA merged, what it communicates.

Both read only the module, so they work on a program compiled here or on a dump from
anywhere::

    >>> from tpukit.hlo import parse_hlo, fusions_of
    >>> path = f"{dump}/module_0003.jit_predict.cpu_after_optimizations.txt"  # a dump's file
    >>> module = parse_hlo(open(path).read())
    >>> [(f.name, f.op_count) for f in fusions_of(module)]
    [('loop_fusion', 5)]
"""

from __future__ import annotations

from dataclasses import dataclass

from tpukit.hlo.analysis._cost import instruction_bytes, instruction_flops
from tpukit.hlo.analysis._executed import executed
from tpukit.hlo.text import HloModule


@dataclass(frozen=True)
class Fusion:
    """One fusion XLA made: a kernel that runs several HLO ops without writing temporaries.

    ``ops`` counts the instructions inside by opcode (parameters left out).
    ``source_location`` is the line most of those instructions came from (the first of
    them on a tie), which is steadier than the fusion's own metadata: that names one op,
    and an op inside a library function JAX traced before (``jax.nn.relu``) can keep the
    line of whoever called it first.
    """

    name: str
    kind: str
    ops: dict[str, int]
    flops: int
    bytes: int
    source_location: str

    @property
    def op_count(self) -> int:
        return sum(self.ops.values())


def fusions_of(module: HloModule) -> list[Fusion]:
    """Every fusion instruction outside fusion bodies, largest FLOPs first (computations
    that ENTRY never reaches left out)."""
    found = []
    reached = module.reachable()
    for computation in module.computations.values():
        if computation.kind == "fusion" or computation.name not in reached:
            continue
        for instr in computation.instructions:
            if instr.opcode != "fusion":
                continue
            ops: dict[str, int] = {}
            lines: dict[str, int] = {}  # in program order: a tie goes to the first
            for body in module.called(instr):
                for inner in body.instructions:
                    if inner.opcode != "parameter":
                        ops[inner.opcode] = ops.get(inner.opcode, 0) + 1
                        if inner.source_location:
                            lines[inner.source_location] = lines.get(inner.source_location, 0) + 1
            found.append(
                Fusion(
                    name=instr.name,
                    kind=instr.fusion_kind,
                    ops=ops,
                    flops=instruction_flops(instr, module),
                    bytes=instruction_bytes(instr, module),
                    source_location=max(lines, key=lines.get) if lines else instr.source_location,
                )
            )
    return sorted(found, key=lambda f: (-f.flops, -f.bytes, f.name))


@dataclass(frozen=True)
class Collective:
    """Cross-device communication of one kind in a program: how often, how many bytes.

    Counted *as executed* in one run of the program (the rule of
    `tpukit.hlo.analysis._executed`): a collective inside a loop body counts once per
    iteration, async pairs once (at the ``-start``). ``bytes`` sums what each delivers
    per device: every array of a tuple result (tokens as 0), and what ``send``/``recv``
    carry.
    """

    opcode: str
    count: int
    bytes: int


def collectives_of(module: HloModule) -> list[Collective]:
    """All-reduce, all-gather, reduce-scatter, all-to-all, collective-permute... largest first."""
    found = executed(module).collectives
    return sorted(
        (Collective(op, count, nbytes) for op, (count, nbytes) in found.items()),
        key=lambda c: (-c.bytes, c.opcode),
    )
