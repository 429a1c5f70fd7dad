"""What one run of an HLO program does: FLOPs, bytes and collectives, as executed.

The counting rules, one per figure (the summary, ``op_counts``, the graph and ``diff``
all use these):

- **instructions** are counted *as written*: each computation that ENTRY reaches counts
  once, however often it is called or a loop runs it (`HloModule.reachable`); computations that
  ENTRY never reaches are left out of every figure.
- **FLOPs, bytes and collectives** are counted *as executed* in one run of the program:
  a computation counts at every place that calls it, a ``while`` body times the loop's
  trip count (`tpukit.hlo.analysis._loops.trip_count`; a loop whose count is unknown counts once
  and is listed in ``unknown_loops``), its condition one time more, and a
  ``conditional`` its most expensive branch.
- **dot/conv FLOPs** are 2 x multiply-adds of dots, convolutions and cuBLAS/cuDNN calls;
  **all FLOPs** add one FLOP per output element of elementwise arithmetic and one per
  element a reduction combines, so a matrix-vector product that XLA rewrote into
  multiply + reduce still reads as work, and an ``fft``'s FLOPs as XLA counts them
  (`fft_flops`).
- **bytes** are what each instruction outside fusion bodies reads and writes (a fusion's
  traffic at its boundary).

    >>> from tpukit.hlo import parse_hlo
    >>> scan_16_steps = parse_hlo('''
    ... HloModule scan
    ... body {
    ...   p = (s32[], f32[4,4]) parameter(0)
    ...   i = s32[] get-tuple-element(p), index=0
    ...   one = s32[] constant(1)
    ...   next = s32[] add(i, one)
    ...   x = f32[4,4] get-tuple-element(p), index=1
    ...   y = f32[4,4] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    ...   ROOT t = (s32[], f32[4,4]) tuple(next, y)
    ... }
    ... cond {
    ...   p = (s32[], f32[4,4]) parameter(0)
    ...   i = s32[] get-tuple-element(p), index=0
    ...   n = s32[] constant(16)
    ...   ROOT lt = pred[] compare(i, n), direction=LT
    ... }
    ... ENTRY main {
    ...   zero = s32[] constant(0)
    ...   x = f32[4,4] parameter(0)
    ...   init = (s32[], f32[4,4]) tuple(zero, x)
    ...   ROOT w = (s32[], f32[4,4]) while(init), condition=cond, body=body
    ... }''')
    >>> run = executed(scan_16_steps)
    >>> per_step_dot_flops = 2 * 4 * 4 * 4
    >>> run.dot_flops == 16 * per_step_dot_flops, run.unknown_loops
    (True, ())
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tpukit.hlo.analysis._cost import (
    COLLECTIVE_OPS,
    ELEMENTWISE_OPS,
    collective_bytes,
    instruction_bytes,
    run_computations,
)
from tpukit.hlo.analysis._loops import trip_count
from tpukit.hlo.analysis._matmul_flops import first_array, operand_shape, own_dot_conv_flops
from tpukit.hlo.text import HloComputation, HloInstruction, HloModule

#: Instructions whose traffic and work are those of the computations they run.
RUNS_COMPUTATIONS = frozenset({"call", "while", "conditional", "async-start"})
# Elementwise ops that move or relabel values without arithmetic: no FLOPs.
_NOT_ARITHMETIC = frozenset(
    "bitcast-convert convert reduce-precision stochastic-convert real imag complex map".split()
)
_WINDOW_SIZE = re.compile(r"size=([\dx]+)")


@dataclass
class Tally:
    """FLOPs, bytes and collectives of one run of a computation (see the module rules).

    ``collectives`` maps an opcode (``all-reduce``; async pairs under their plain name)
    to ``[count, bytes]``; ``unknown_loops`` names the ``while`` instructions whose trip
    count could not be read (each counted once).
    """

    dot_flops: int = 0
    all_flops: int = 0
    bytes: int = 0
    collectives: dict[str, list[int]] = field(default_factory=dict)
    unknown_loops: tuple[str, ...] = ()

    def add(self, other: Tally, times: int = 1) -> None:
        self.dot_flops += other.dot_flops * times
        self.all_flops += other.all_flops * times
        self.bytes += other.bytes * times
        for opcode, (count, nbytes) in other.collectives.items():
            entry = self.collectives.setdefault(opcode, [0, 0])
            entry[0] += count * times
            entry[1] += nbytes * times
        for name in other.unknown_loops:
            if name not in self.unknown_loops:
                self.unknown_loops += (name,)

    def _key(self) -> tuple[int, int, int]:
        return self.all_flops, self.dot_flops, self.bytes


def executed(module: HloModule) -> Tally:
    """The `Tally` of one run of ``module`` from its ENTRY computation (cached per module)."""
    cache = module._analysis.setdefault("tallies", {})
    return _computation(module.entry, module, cache, count_bytes=True)


def instruction_tally(instr: HloInstruction, module: HloModule) -> Tally:
    """The `Tally` of one execution of ``instr``, with what it calls (loops times trips)."""
    cache = module._analysis.setdefault("tallies", {})
    comp = module.computations.get(instr.computation)
    program = comp is None or comp.kind != "fusion"
    return _instruction(instr, module, cache, count_bytes=program)


def executed_bytes(
    instr: HloInstruction,
    module: HloModule,
    own_bytes: Callable[[HloComputation], Mapping[int, int]],
) -> int:
    """``instruction_tally(instr, module).bytes``, counted without the FLOPs and collectives.

    The graph asks it of every loop, call and conditional, and has each instruction's
    `instruction_bytes` already: ``own_bytes(comp)`` gives them for a computation, by the
    instruction's ``id`` (`tpukit.hlo.analysis._cost.computation_bytes`). Each computation's bytes
    are summed once per module (as `_computation` sums its tally); a conditional, whose
    branch is the one with the most FLOPs, takes its tally's bytes.
    """
    comp = module.computations.get(instr.computation)
    if comp is not None and comp.kind == "fusion":
        return 0  # inside a fusion nothing counts bytes (`instruction_tally`'s ``program``)
    cache = module._analysis.setdefault("executed_bytes", {})
    return _instruction_bytes(instr, module, cache, own_bytes)


def _instruction_bytes(
    instr: HloInstruction,
    module: HloModule,
    cache: dict[str, int],
    own_bytes: Callable[[HloComputation], Mapping[int, int]],
) -> int:
    """What a loop, call or conditional runs, in bytes (`_instruction`'s, counting bytes)."""
    opcode = instr.opcode
    if opcode == "conditional":
        tallies = module._analysis.setdefault("tallies", {})
        return _instruction(instr, module, tallies, count_bytes=True).bytes
    called = run_computations(instr, module)
    if opcode != "while":
        return sum([_computation_bytes(c, module, cache, own_bytes) for c, _ in called])
    trips = trip_count(instr, module)
    return sum(
        [
            _computation_bytes(c, module, cache, own_bytes)
            * (1 if trips is None else trips + (role == "condition"))
            for c, role in called
        ]
    )


def _computation_bytes(
    comp: HloComputation,
    module: HloModule,
    cache: dict[str, int],
    own_bytes: Callable[[HloComputation], Mapping[int, int]],
) -> int:
    """Bytes of one run of ``comp`` (`_computation`'s tally, counting bytes)."""
    found = cache.get(comp.name)
    if found is None:
        cache[comp.name] = 0  # guards against a (malformed) recursive call graph
        table = own_bytes(comp)
        found = 0
        for instr in comp.instructions:
            opcode = instr.opcode
            if opcode in RUNS_COMPUTATIONS:
                found += _instruction_bytes(instr, module, cache, own_bytes)
                continue
            found += table[id(instr)]
            if instr.called_computations and opcode != "fusion":  # a fusion's: at its boundary
                for called, _ in run_computations(instr, module):
                    found += _computation_bytes(called, module, cache, own_bytes)
        cache[comp.name] = found
    return found


def own_all_flops(instr: HloInstruction, module: HloModule) -> int:
    """FLOPs of the instruction itself: dot/conv, elementwise arithmetic or a reduction."""
    opcode = instr.opcode
    if opcode in ELEMENTWISE_OPS and opcode not in _NOT_ARITHMETIC:
        return instr.shape.num_elements
    if opcode == "reduce":
        comp = module.computations.get(instr.computation)
        inputs = instr.operands[: len(instr.operands) // 2]
        read = sum(
            s.shape.num_elements
            for s in (comp.get(n) if comp is not None else None for n in inputs)
            if s is not None
        )
        return max(0, read - instr.shape.num_elements)
    if opcode == "reduce-window":
        found = _WINDOW_SIZE.search(instr.attributes.get("window", ""))
        window = math.prod(int(v) for v in found.group(1).split("x")) if found else 1
        return instr.shape.num_elements * max(window - 1, 0)
    if opcode == "fft":
        return fft_flops(instr, module)
    return own_dot_conv_flops(instr, module)


def fft_flops(instr: HloInstruction, module: HloModule) -> int:
    """FLOPs of an ``fft`` as XLA's ``HloCostAnalysis::HandleFft`` counts them: 2 (a
    multiply-add) x 4 (multiply-adds in a complex multiply) x the product of
    ``log2(length)`` over ``fft_length`` x the elements of the input; 0 for another op.

    Not a dot or convolution, so not in the matmul FLOPs (``dot_flops``): XLA:TPU has no
    FFT unit and makes each ``fft`` into DFT matmuls, which are; so a lowered program's
    matmul FLOPs can be far below its optimized one's (`tpukit.graph._diff_view` says why).

        >>> from tpukit.hlo import parse_hlo
        >>> module = parse_hlo('''
        ... HloModule m
        ... ENTRY e {
        ...   x = c64[8,256]{1,0} parameter(0)
        ...   ROOT f = c64[8,256]{1,0} fft(x), fft_type=FFT, fft_length={256}
        ... }''')
        >>> fft_flops(module.instruction("f"), module)  # 2 * 4 * log2(256) * 8*256
        131072
    """
    lengths = re.findall(r"\d+", instr.attributes.get("fft_length", ""))
    if instr.opcode != "fft" or not lengths:
        return 0
    source = first_array(operand_shape(instr, module, 0))
    logs = math.prod(max(int(n), 1).bit_length() - 1 for n in lengths)  # XLA's Log2Floor
    return 2 * 4 * logs * (source.num_elements if source is not None else 0)


def _computation(
    comp: HloComputation, module: HloModule, cache: dict, *, count_bytes: bool
) -> Tally:
    key = (comp.name, count_bytes)
    if key not in cache:
        cache[key] = Tally()  # guards against a (malformed) recursive call graph
        total = Tally()
        for instr in comp.instructions:
            total.add(_instruction(instr, module, cache, count_bytes=count_bytes))
        cache[key] = total
    return cache[key]


def _instruction(instr: HloInstruction, module: HloModule, cache: dict, *, count_bytes: bool):
    opcode = instr.opcode
    own = Tally(dot_flops=own_dot_conv_flops(instr, module), all_flops=own_all_flops(instr, module))
    if count_bytes and opcode not in RUNS_COMPUTATIONS:
        own.bytes = instruction_bytes(instr, module)
    if opcode in COLLECTIVE_OPS and not opcode.endswith(("-done", "-update")):
        own.collectives[opcode.removesuffix("-start")] = [1, collective_bytes(instr, module)]
    called = run_computations(instr, module)
    if not called:
        return own
    inner = count_bytes and opcode != "fusion"  # a fusion's traffic is at its boundary
    if opcode == "conditional":
        branches = [_computation(c, module, cache, count_bytes=inner) for c, _ in called]
        own.add(max(branches, key=Tally._key))
    elif opcode == "while":
        trips = trip_count(instr, module)
        for comp, role in called:
            runs = 1 if trips is None else trips + (role == "condition")
            own.add(_computation(comp, module, cache, count_bytes=inner), runs)
        if trips is None:
            own.unknown_loops += (instr.name,)
    else:
        for comp, _ in called:
            own.add(_computation(comp, module, cache, count_bytes=inner))
    return own
