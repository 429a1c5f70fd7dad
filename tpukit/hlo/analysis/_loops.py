"""How many times a ``while`` loop runs, read from its HLO.

XLA writes ``known_trip_count`` into a loop's backend config only sometimes (none of the
59 loops in 31 published dumps had it), yet the count is plain in the text: a counter
in the loop's tuple starts at a constant, the body adds a constant to it, and the
condition compares it with a constant. `trip_count` reads that pattern, through the
copies, converts, fusions and calls XLA wraps around it, and says None when the loop
is not of that form (a data-dependent loop, a bound passed in as a parameter)::

    >>> from tpukit.hlo import parse_hlo
    >>> module = parse_hlo('''
    ... HloModule scan
    ... body {
    ...   p = (s32[], f32[4]) parameter(0)
    ...   i = s32[] get-tuple-element(p), index=0
    ...   one = s32[] constant(1)
    ...   next = s32[] add(i, one)
    ...   x = f32[4] get-tuple-element(p), index=1
    ...   ROOT t = (s32[], f32[4]) tuple(next, x)
    ... }
    ... cond {
    ...   p = (s32[], f32[4]) parameter(0)
    ...   i = s32[] get-tuple-element(p), index=0
    ...   n = s32[] constant(16)
    ...   ROOT lt = pred[] compare(i, n), direction=LT
    ... }
    ... ENTRY main {
    ...   zero = s32[] constant(0)
    ...   x = f32[4] parameter(0)
    ...   init = (s32[], f32[4]) tuple(zero, x)
    ...   ROOT w = (s32[], f32[4]) while(init), condition=cond, body=body
    ... }
    ... ''')
    >>> trip_count(module.instruction("w"), module)
    16
"""

from __future__ import annotations

import re

from tpukit.hlo.text import HloComputation, HloInstruction, HloModule

_KNOWN_TRIP_COUNT = re.compile(r'known_trip_count\\?"\s*:\s*\{\s*\\?"n\\?"\s*:\s*\\?"?(\d+)')
# Ops that pass a scalar through unchanged (for the counter's value).
_PASS_THROUGH = frozenset({"copy", "convert", "bitcast", "reshape", "broadcast"})
_SWAPPED = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "EQ": "EQ", "NE": "NE"}
_DEPTH = 32  # how far a value is followed back through the graph

# A value of the counter analysis: (tuple index of the loop parameter or None, offset).
# ``(k, c)`` means "element k of the loop's parameter plus c"; ``(None, c)`` the constant c.
_Affine = tuple[int | None, int]


def trip_count(instr: HloInstruction, module: HloModule) -> int | None:
    """How many times the ``while`` instruction ``instr`` runs its body, or None if unknown.

    ``known_trip_count`` in the backend config wins; otherwise the counter pattern
    (constant start, constant step, comparison with a constant: ``LT``, ``LE``, ``GT``,
    ``GE`` or ``NE``) is read from the loop's init, body and condition.
    """
    found = _KNOWN_TRIP_COUNT.search(instr.attributes.get("backend_config", ""))
    if found:
        return int(found.group(1))
    refs = {ref.role: ref.name for ref in instr.called_computations}
    body = module.computations.get(refs.get("body", ""))
    cond = module.computations.get(refs.get("condition", ""))
    if body is None or cond is None or cond.root is None or not instr.operands:
        return None
    compared = _comparison(cond.root, cond, module)
    if compared is None:
        return None
    index, direction, bound = compared
    step = _step(body, index, module)
    outer = module.computations.get(instr.computation)
    if step is None or outer is None:
        return None
    start = _value(outer.get(instr.operands[0]), outer, module, {}, element=index)
    if start is None or start[0] is not None:
        return None
    return _count(start[1], step, direction, bound)


def _count(start: int, step: int, direction: str, bound: int) -> int | None:
    """Iterations of ``for (i = start; i <direction> bound; i += step)``."""
    if direction == "NE":
        distance = bound - start
        if step == 0 or distance % step or distance // step < 0:
            return None
        return distance // step
    if direction in ("LT", "LE"):
        if step <= 0:
            return None if start < bound or (direction == "LE" and start == bound) else 0
        last = bound - 1 if direction == "LT" else bound  # the largest value that passes
        return max(0, (last - start) // step + 1)
    if direction in ("GT", "GE"):
        if step >= 0:
            return None if start > bound or (direction == "GE" and start == bound) else 0
        last = bound + 1 if direction == "GT" else bound
        return max(0, (start - last) // -step + 1)
    return None


def _comparison(
    root: HloInstruction, comp: HloComputation, module: HloModule
) -> tuple[int, str, int] | None:
    """``(counter index, direction, bound)`` of a condition's ``counter <dir> constant``."""
    for _ in range(_DEPTH):  # a fused or called comparison: look inside
        if root.opcode in ("fusion", "call") and root.called_computations:
            inner = module.computations.get(root.called_computations[0].name)
            if inner is None or inner.root is None:
                return None
            bindings = _bindings(root, comp, module)
            comp, root = inner, inner.root
            if root.opcode == "compare":
                return _compare(root, comp, module, bindings)
            continue
        if root.opcode in _PASS_THROUGH and root.operands:
            root = comp.get(root.operands[0])
            if root is None:
                return None
            continue
        break
    if root.opcode != "compare":
        return None
    return _compare(root, comp, module, {})


def _compare(
    root: HloInstruction, comp: HloComputation, module: HloModule, bindings: dict
) -> tuple[int, str, int] | None:
    direction = root.attributes.get("direction", "")
    if len(root.operands) != 2 or direction not in _SWAPPED:
        return None
    lhs = _value(comp.get(root.operands[0]), comp, module, bindings)
    rhs = _value(comp.get(root.operands[1]), comp, module, bindings)
    if lhs is None or rhs is None:
        return None
    if lhs[0] is not None and rhs[0] is None:
        return lhs[0], direction, rhs[1] - lhs[1]
    if rhs[0] is not None and lhs[0] is None:
        return rhs[0], _SWAPPED[direction], lhs[1] - rhs[1]
    return None


def _step(body: HloComputation, index: int, module: HloModule) -> int | None:
    """What the body adds to element ``index`` of the loop tuple each iteration."""
    root = body.root
    if root is None:
        return None
    value = _value(root, body, module, {}, element=index)
    if value is None or value[0] != index:
        return None
    return value[1]


def _bindings(
    call: HloInstruction, comp: HloComputation, module: HloModule
) -> dict[int, _Affine | None]:
    """The affine values of a fusion's or call's operands, by parameter number."""
    return {k: _value(comp.get(name), comp, module, {}) for k, name in enumerate(call.operands)}


def _value(
    instr: HloInstruction | None,
    comp: HloComputation,
    module: HloModule,
    bindings: dict[int, _Affine | None],
    element: int | None = None,
    depth: int = 0,
) -> _Affine | None:
    """The affine value of ``instr`` (of its tuple element ``element`` when given).

    A computation's parameter 0 is the loop's tuple: ``get-tuple-element(param, k)`` is
    ``(k, 0)``. Inside a fusion or call, parameters take the ``bindings`` of the caller.
    """
    if instr is None or depth > _DEPTH:
        return None
    op = instr.opcode
    deeper = depth + 1
    if element is not None:
        if op == "tuple" and element < len(instr.operands):
            return _value(comp.get(instr.operands[element]), comp, module, bindings, None, deeper)
        if op in ("fusion", "call") and instr.called_computations:
            inner = module.computations.get(instr.called_computations[0].name)
            if inner is None or inner.root is None:
                return None
            return _value(
                inner.root, inner, module, _bindings(instr, comp, module), element, deeper
            )
        if op == "copy" and instr.operands:
            return _value(comp.get(instr.operands[0]), comp, module, bindings, element, deeper)
        return None
    if op == "constant":
        literal = instr.operand_text.strip()
        return (None, int(literal)) if re.fullmatch(r"-?\d+", literal) else None
    if op == "parameter":
        number = instr.parameter_number
        return bindings.get(number) if bindings else None
    if op == "get-tuple-element" and instr.operands:
        index = int(instr.attributes.get("index", "-1"))
        source = comp.get(instr.operands[0])
        if source is not None and source.opcode == "parameter" and not bindings:
            return (index, 0) if source.parameter_number == 0 else None
        return _value(source, comp, module, bindings, index, deeper)
    if op in _PASS_THROUGH and instr.operands:
        return _value(comp.get(instr.operands[0]), comp, module, bindings, None, deeper)
    if op in ("add", "subtract") and len(instr.operands) == 2:
        a = _value(comp.get(instr.operands[0]), comp, module, bindings, None, deeper)
        b = _value(comp.get(instr.operands[1]), comp, module, bindings, None, deeper)
        if a is None or b is None:
            return None
        if op == "subtract":
            return (a[0], a[1] - b[1]) if b[0] is None else None
        if a[0] is not None and b[0] is not None:
            return None
        return (a[0] if a[0] is not None else b[0], a[1] + b[1])
    if op in ("fusion", "call") and instr.called_computations:
        inner = module.computations.get(instr.called_computations[0].name)
        if inner is None or inner.root is None:
            return None
        return _value(inner.root, inner, module, _bindings(instr, comp, module), None, deeper)
    return None


def repeated_loops(module: HloModule) -> tuple[str, ...]:
    """The ``while`` loops ENTRY reaches whose body runs more than once, or an unknown
    number of times: where a figure that counts each body once (XLA's ``cost_analysis``)
    is not one run of the program as executed.

        >>> repeated_loops(module)  # the 16-step scan above
        ('w',)
    """
    reached = module.reachable()
    return tuple(
        instr.name
        for comp in module.computations.values()
        if comp.name in reached
        for instr in comp.instructions
        if instr.opcode == "while" and (trip_count(instr, module) or 2) > 1
    )
