"""Where each instruction belongs in the user's terms: sections, layers and name scopes.

JAX writes the trace's name stack into every op's ``op_name`` metadata, wrapped in the
transformations that made the op: ``jit(step)/jvp(model (MLP))/layers[0] (Linear)/dot``
is the forward pass of the first layer, ``jit(step)/transpose(jvp(model (MLP)))/...``
its backward pass, ``jit(step)/jvp(jit(take_along_axis))/...`` part of the loss, with
JAX's own helper functions (``jit(_where)``) mixed in. `plan_scopes` turns that into
the path of groups a user expects: JAX's function names are dropped, transformations
become sections, and a computation that runs a training step (it has both a forward
and a backward pass) is laid out as the sections

    inputs · forward (by layer) · loss · backward (by layer) · optimizer update · outputs

where the backward of ``layers[0] (Linear)`` is the group ``layers[0] (Linear) backward``.
Ops outside any scope after the backward pass are the optimizer's update. A fusion
goes where most of its work is (FLOPs, then bytes), and says so when it mixes places.
Scope names come from JAX's ``jax.named_scope`` and, for Flax NNX models,
from ``tpukit.compile``, which traces each module call under its path and class.
"""

from __future__ import annotations

import functools
import operator
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from tpukit.hlo.analysis._fused_work import fused_work, names_a_scope
from tpukit.hlo.text import HloComputation, HloInstruction, HloModule

INPUTS, FORWARD, LOSS, BACKWARD, UPDATE, OUTPUTS = (
    "inputs", "forward", "loss", "backward", "optimizer update", "outputs",
)  # fmt: skip
#: The sections of a training step, in the order they run.
SECTIONS = (INPUTS, FORWARD, LOSS, BACKWARD, UPDATE, OUTPUTS)
SECTION_NOTES = {
    INPUTS: "the program's parameters: weights, optimizer state and data",
    FORWARD: "the forward pass, by layer (or name scope)",
    LOSS: "forward ops outside every layer and name scope: the loss",
    BACKWARD: "the backward pass (JAX's transpose of the forward), by layer",
    UPDATE: "ops after the backward pass outside every name scope: the optimizer's update",
    OUTPUTS: "what the program returns",
}
BACKWARD_SUFFIX = " backward"

_TRANSFORM = re.compile(r"([a-z_]+)\((.*)\)", re.DOTALL)
_FUNCTION_TRANSFORMS = frozenset({"jit", "pjit", "xla_pmap", "core_call", "custom_jvp_call"})
# Names JAX gives the parts of its control flow and calls, not the user's scopes.
_STRUCTURE = re.compile(
    r"while|body|cond|scan|closed_call|core_call|remat|checkpoint|shard_map|"
    r"custom_jvp_call|custom_vjp_call|branch_\d+_fun|eval_jaxpr"
)
# A computation with more parameters than this (a model's weights, a command buffer's
# operands) collects them into "inputs", as a training step does; a few stay in view.
_MANY_PARAMETERS = 4
# Ops that do no work of their own: they do not make a computation a training step.
_TRIVIAL = frozenset(
    "parameter constant iota tuple get-tuple-element bitcast copy broadcast".split()
)
_PLUMBING = frozenset(
    {"tuple", "get-tuple-element", "bitcast", "copy", "copy-start", "copy-done", "opt-barrier"}
)
_OP_NAME = operator.attrgetter("metadata.op_name")


@dataclass
class ScopePlan:
    """The groups of one computation: each instruction's section and path inside it.

    ``section`` is one of `SECTIONS` or ``""`` (no section: the computation is not a
    training step, or the op sits in the user's own top-level scope); ``path`` is the
    group labels inside it, outermost first. ``notes`` say why a fusion sits where it
    does when its ops come from several places.
    """

    section: dict[str, str] = field(default_factory=dict)
    path: dict[str, list[str]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    has_sections: bool = False


def split_scope(op_name: str) -> list[str]:
    """``jit(f)/transpose(jvp(g))/dot`` -> ``['jit(f)', 'transpose(jvp(g))', 'dot']``."""
    return list(_split_scope(op_name))


@functools.lru_cache(maxsize=65536)  # a module repeats a few thousand op names many times
def _split_scope(op_name: str) -> tuple[str, ...]:
    parts: list[str] = []
    depth, piece = 0, None  # brackets open before the slash; the piece they hold open
    for part in op_name.split("/"):
        piece = part if piece is None else f"{piece}/{part}"
        depth += part.count("(") + part.count("[") - part.count(")") - part.count("]")
        if depth <= 0:  # a slash outside brackets ends the piece
            if piece:
                parts.append(piece)
            piece = None
    if piece:
        parts.append(piece)
    return tuple(parts)


def parse_scope(components: list[str]) -> tuple[str, tuple[str, ...]]:
    """``(direction, names)`` of a name stack: ``"forward"``, ``"backward"`` or ``"plain"``.

    Transformations are unwrapped (``transpose(jvp(x))`` -> ``x``, a backward op);
    the names of jitted functions are dropped, for they are JAX's helpers (``_where``,
    ``take_along_axis``) far more often than the user's own functions, and so are the
    names of control flow (``while/body``, ``cond/branch_1_fun``, ``closed_call``).

        >>> parse_scope(["jit(step)", "transpose(jvp(model (MLP)))", "layers[0] (Linear)"])
        ('backward', ('model (MLP)', 'layers[0] (Linear)'))
    """
    return _parse_components(tuple(components))


@functools.lru_cache(maxsize=65536)  # ops of one layer share their name stack
def _parse_components(components: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    direction, names = "plain", []
    for component in components:
        backward, forward, name = _parse_component(component)
        if backward:
            direction = "backward"
        elif direction == "plain" and forward:
            direction = "forward"
        if name:
            names.append(name)
    return direction, tuple(names)


@functools.lru_cache(maxsize=65536)  # a module's name stacks share a few hundred components
def _parse_component(component: str) -> tuple[bool, bool, str]:
    """``(backward, forward, name)`` of one name-stack component: whether its
    transformations make it the backward or the forward pass, and the name it adds
    (``""`` for a jitted function's or a control-flow part's)."""
    transforms = []
    found = _TRANSFORM.fullmatch(component)
    while found:
        transforms.append(found.group(1))
        component = found.group(2)
        found = _TRANSFORM.fullmatch(component)
    if transforms and transforms[-1] in _FUNCTION_TRANSFORMS:
        component = ""
    elif _STRUCTURE.fullmatch(component):
        component = ""
    return (
        "transpose" in transforms,
        "jvp" in transforms or "linearize" in transforms,
        component,
    )


def function_name(comp: HloComputation) -> str | None:
    """The jitted function a computation comes from (``step`` of ``jit(step)/...``), if any."""
    counts: dict[str, int] = defaultdict(int)
    op_names = list(map(_OP_NAME, comp.instructions))
    # Where every op name's text before its first slash closes its brackets, that text is
    # its first component: counted by it (in C, in first-use order), not per op name (a
    # large module's are mostly distinct: 80,000 of 95,000).
    heads = Counter(map(_FIRST, map(_AT_SLASH, op_names)))
    if all(map(_closes, filter(None, heads))) and heads.get("", 0) == op_names.count(""):
        found = heads.items()
    else:  # each op name read once (in first-use order), each first component parsed once
        found = ((_first_component(n), uses) for n, uses in Counter(op_names).items())
    for component, uses in found:
        name = _jitted_function(component)
        if name:
            counts[name] += uses
    return max(counts, key=counts.__getitem__) if counts else None


_AT_SLASH = operator.methodcaller("partition", "/")
_FIRST = operator.itemgetter(0)


def _closes(text: str) -> bool:
    """Whether ``text``'s brackets all close (a slash after it ends a component)."""
    return text.count("(") + text.count("[") <= text.count(")") + text.count("]")


def _first_component(op_name: str) -> str:
    """``split_scope(op_name)[0]`` (``""`` for none), without splitting the rest."""
    head = op_name.partition("/")[0]
    if head and _closes(head):
        return head  # its brackets close before the first slash
    first = _split_scope(op_name)[:1]
    return first[0] if first else ""


@functools.lru_cache(maxsize=4096)
def _jitted_function(component: str) -> str | None:
    """``f`` of ``jit(f)`` or ``pjit(f)``, else None."""
    found = _TRANSFORM.fullmatch(component) if component else None
    if found and found.group(1) in ("jit", "pjit") and found.group(2):
        return found.group(2)
    return None


def plan_scopes(
    comp: HloComputation, module: HloModule, caller: HloInstruction | None
) -> ScopePlan:
    """Sections and group paths for the instructions of ``comp`` (see the module docstring).

    ``caller`` is the instruction that runs ``comp`` (a while, call or conditional);
    the scopes its own op_name already has are left out of its body's paths.
    """
    keys: dict[str, tuple[str, tuple[str, ...]] | None] = {}
    # (the fusions that mix scopes: their weight per scope, for their notes)
    weights: dict[str, dict[tuple[str, tuple[str, ...]], list[int]]] = {}
    strip = parse_scope(split_scope(caller.metadata.op_name))[1] if caller is not None else ()
    passes: set[str] = set()  # the directions of its ops that work (`_is_step`'s, read here)
    for instr in comp.instructions:
        if instr.opcode == "fusion":
            key, weight = _owner(instr, module)
            if len(weight) > 1:
                weights[instr.name] = weight
            if instr.metadata.op_name:
                passes.add(_parse_op_name(instr.metadata.op_name)[0])
        else:  # what `_owner` says of any other op, without the call
            op_name = instr.metadata.op_name
            key = _parse_op_name(op_name) if op_name and instr.opcode != "parameter" else None
            if key is not None and instr.opcode not in _TRIVIAL:
                passes.add(key[0])
        if key is not None and strip and key[1][: len(strip)] == strip:
            key = (key[0], key[1][len(strip) :])
        keys[instr.name] = key
    called = [
        module.computations[ref.name]
        for instr in comp.instructions
        if instr.opcode in ("while", "call", "conditional")
        for ref in instr.called_computations
        if ref.name in module.computations
    ]
    # (each op name parsed once: a large module's outnumber the parses' caches)
    plan = ScopePlan(has_sections=_PASSES <= passes and not any(_is_step(c) for c in called))
    place = _placer(keys, plan.has_sections)
    if plan.has_sections:
        _sections(comp, keys, plan, place)
    else:
        for name, key in keys.items():
            where = place(key) if key is not None else None
            if where is not None:
                plan.section[name], plan.path[name] = where
    if plan.has_sections or len(comp.parameters) > _MANY_PARAMETERS:
        for param in comp.parameters:
            plan.section[param.name], plan.path[param.name] = INPUTS, []
    # The users of each op not placed yet: what both steps below read (they place only
    # such ops, and placed ops stay placed).
    users: dict[str, list[str]] = defaultdict(list)
    placed = plan.section
    for instr in comp.instructions:
        for operand in instr.operands:
            if operand not in placed:
                users[operand].append(instr.name)
    if comp.root is not None and (plan.has_sections or comp.root.opcode == "tuple"):
        _outputs(comp, plan, users)
    _follow_neighbours(comp, plan, users)
    label = _labeller(place, strip)
    for name, weight in weights.items():
        placed = place_label(plan.section[name], plan.path[name])
        plan.notes[name] = _mixed_note(weight, label, placed)
    return plan


def forget_parsed_scopes() -> None:
    """Empty the op-name caches: they serve one module's grouping, then hold its names."""
    for cached in (_split_scope, _parse_components, _parse_component, _parse_op_name):
        cached.cache_clear()
    _parse_closed_scope.cache_clear()
    _parse_open_scope.cache_clear()


def _is_step(comp: HloComputation) -> bool:
    """Does ``comp`` run a forward and a backward pass itself (not only bits XLA hoisted)?"""
    seen = set()
    for instr in comp.instructions:
        if instr.opcode not in _TRIVIAL and instr.metadata.op_name:
            seen.add(_parse_op_name(instr.metadata.op_name)[0])
            if len(seen) > 1 and _PASSES <= seen:  # both passes seen: no need to read on
                return True
    return False


_PASSES = frozenset({"forward", "backward"})


@functools.lru_cache(maxsize=4096)
def _parse_op_name(op_name: str) -> tuple[str, tuple[str, ...]]:
    """The scope of an op: its name stack less the op's own last component.

    Ops of one layer differ in that last component alone (``.../dense/dot``,
    ``.../dense/add``), so the stack before its last slash is parsed, once for all of
    them: where its brackets all close, the text after that slash is the last
    component whatever it holds (`_parse_closed_scope`); where one stays open, that slash
    is inside the last component, which starts inside the stack (`_parse_open_scope`:
    a backward op's ``jit(f)/transpose(jvp(g)/dense/dot)``).
    """
    head, slash, last = op_name.rpartition("/")
    if slash and last:
        found = _parse_closed_scope(head)
        return found if found is not None else _parse_open_scope(head)
    return parse_scope(split_scope(op_name)[:-1])


@functools.lru_cache(maxsize=4096)
def _parse_closed_scope(head: str) -> tuple[str, tuple[str, ...]] | None:
    """``parse_scope`` of ``head``'s components, or None if a bracket in it stays open
    (a slash after it would then not end a component).

    A last component with no bracket (``experts.3/up``'s ``up``) is its own component,
    a name that changes no direction: the parse is its parent's (cached: the scopes of
    a layer share it) with that name added, unless it names JAX's control flow.
    """
    parent, slash, last = head.rpartition("/")
    if parent and last and _BRACKET.search(last) is None:
        found = _parse_closed_scope(parent)
        if found is None or _STRUCTURE.fullmatch(last):
            return found
        return found[0], (*found[1], last)
    if head.count("(") + head.count("[") > head.count(")") + head.count("]"):
        return None
    return parse_scope(split_scope(head))


@functools.lru_cache(maxsize=4096)
def _parse_open_scope(head: str) -> tuple[str, tuple[str, ...]]:
    """``parse_scope`` of ``head``'s components but its last, for a ``head`` whose
    brackets do not all close (its last component is still open at its end).

    Bracket depth adds up over the whole text, so the last component is open at a
    slash exactly when the brackets before that slash do not all close: ``head``'s
    components but its last are those of the text before its last slash where that
    text closes (its last slash then starts the open component), else those of that
    text but its last, found the same way (cached: a layer's backward ops share them).
    """
    parent, slash, last = head.rpartition("/")
    if not slash:
        return parse_scope([])
    found = _parse_closed_scope(parent) if last else None
    return found if found is not None else _parse_open_scope(parent)


_BRACKET = re.compile(r"[()\[\]]")


def _owner(
    instr: HloInstruction, module: HloModule
) -> tuple[tuple[str, tuple[str, ...]] | None, dict]:
    """The scope that owns an instruction: its own, or for a fusion the heaviest of its ops.

    A fusion with any op of the backward pass belongs to the backward pass (XLA copies
    cheap forward ops, a ReLU's mask, into the backward fusions that read them); among
    the candidates the one with the most FLOPs wins, then the most bytes written (the
    fusion's result goes to the ops making it), then read (each parameter to the op
    reading it), then ops: a fusion is what it makes. Returns the key and, for a fusion
    of ops from several scopes, ``[FLOPs, bytes written, bytes read, ops]`` for each
    scope in it (an empty dict otherwise: one scope needs no weighing).
    """
    weight: dict[tuple[str, tuple[str, ...]], list[int]] = {}
    if instr.opcode == "fusion":
        called = module.called(instr)
        single = _single_scope(called)
        if single is not None:
            return single, weight
        if not names_a_scope(called, module):  # nothing to weigh: the fusion's own name
            called = []
        work, traffic = fused_work(called, module)
        for op_name, (flops, ops) in work.items():
            key = _parse_op_name(op_name)
            totals = weight.get(key)
            if totals is None:
                weight[key] = [flops, 0, 0, ops]
            else:
                totals[0] += flops
                totals[3] += ops
        for inner, nbytes, written in traffic:
            key = _parse_op_name(inner.metadata.op_name)
            weight.setdefault(key, [0] * 4)[1 if written else 2] += nbytes
    if weight:
        if len(weight) == 1:
            return next(iter(weight)), {}
        candidates = [k for k in weight if k[0] == "backward"] or list(weight)
        return max(candidates, key=weight.__getitem__), weight
    if not instr.metadata.op_name or instr.opcode == "parameter":
        return None, weight
    return _parse_op_name(instr.metadata.op_name), weight


def _single_scope(called: list[HloComputation]) -> tuple[str, tuple[str, ...]] | None:
    """The scope of a fusion whose named ops all share one (most fusions), else None.

    Then `fused_work` has nothing to weigh: every op it would weigh (the named ops,
    those reading the parameters, those making the result) has that scope. One plain
    loop that stops at the first op of another scope (a fusion holding other fusions,
    or whose ROOT has no name scope, takes the long way); each op name is parsed
    unless the op before had it, as ops of one name mostly follow each other."""
    if len(called) != 1:
        return None
    fused = called[0]
    root = fused.root
    if root is None or root.opcode == "parameter" or not root.metadata.op_name:
        return None  # no named op but (maybe) parameters: the long way says
    key, last = None, ""
    for inner in fused.instructions:
        if inner.opcode == "fusion":
            return None
        op_name = inner.metadata.op_name
        if op_name and op_name != last:
            last = op_name
            found = _parse_op_name(op_name)
            if key is None:
                key = found
            elif found != key:
                return None
    return key


def _common_root(names: list[tuple[str, ...]]) -> int:
    """1 when every one of ``names`` starts with the same scope (the model itself), else 0."""
    firsts = {n[0] for n in names if n}
    return 1 if len(firsts) == 1 and all(names) else 0


def _placer(keys: dict, sectioned: bool):
    """A function from a scope key to ``(section, path)``, or None for an unnamed plain op."""
    forward = [k[1] for k in keys.values() if k is not None and k[0] == "forward" and k[1]]
    backward = [k[1] for k in keys.values() if k is not None and k[0] == "backward" and k[1]]
    skip_forward, skip_backward = _common_root(forward), _common_root(backward)

    known: dict[tuple[str, tuple[str, ...]], tuple[str, list[str]] | None] = {}

    def place(key: tuple[str, tuple[str, ...]]) -> tuple[str, list[str]] | None:
        # Once per key: the ops of a layer share theirs, and their path (read-only).
        found = known.get(key, _UNKNOWN)
        if found is _UNKNOWN:
            found = known[key] = where(key)
        return found  # type: ignore[return-value]

    def where(key: tuple[str, tuple[str, ...]]) -> tuple[str, list[str]] | None:
        direction, names = key
        if not sectioned or direction == "plain":
            return ("", list(names)) if names else None
        if not forward:  # no layer or scope names anything: the passes stay whole
            return (FORWARD if direction == "forward" else BACKWARD), []
        if direction == "forward":
            return (FORWARD, list(names[skip_forward:])) if names else (LOSS, [])
        names = names[skip_backward:] if names else ("loss",)
        return BACKWARD, [n + BACKWARD_SUFFIX for n in names]

    return place


_UNKNOWN = object()


def _sections(comp: HloComputation, keys: dict, plan: ScopePlan, place) -> None:
    after_backward: set[str] = set()
    for instr in comp.instructions:
        key = keys[instr.name]
        if (key is not None and key[0] == "backward") or not after_backward.isdisjoint(
            instr.operands
        ):
            after_backward.add(instr.name)
        if key is None:
            continue
        where = place(key)
        if where is None and instr.name in after_backward:
            where = (UPDATE, [])
        if where is not None:
            plan.section[instr.name], plan.path[instr.name] = where


def _outputs(comp: HloComputation, plan: ScopePlan, users: dict[str, list[str]]) -> None:
    """The ROOT, and plumbing that only feeds it, form the outputs (``users``: the
    names of the users of each instruction not placed yet, a dict that makes an empty
    list for a name)."""
    outputs = {comp.root.name}
    plan.section[comp.root.name], plan.path[comp.root.name] = OUTPUTS, []
    for instr in reversed(comp.instructions):
        if (
            instr.name not in plan.section
            and instr.opcode in _PLUMBING
            and users[instr.name]
            and all(u in outputs for u in users[instr.name])
        ):
            outputs.add(instr.name)
            plan.section[instr.name], plan.path[instr.name] = OUTPUTS, []


def _follow_neighbours(comp: HloComputation, plan: ScopePlan, users: dict[str, list[str]]) -> None:
    """Place the rest (constants, XLA's copies, unnamed ops) beside their first user;
    a constant in the scope its users share (`_shared`).

    Without a placed user, beside their first placed operand other than an input;
    copies and tuples of the inputs alone (made for a loop's initial state) are inputs.
    ``users`` are the names of the users of each instruction not placed yet (as
    `_outputs` reads them).
    """
    section, path = plan.section, plan.path
    # The ops not placed yet, last first (read three times: a large computation's few)
    rest = [instr for instr in reversed(comp.instructions) if instr.name not in section]
    for instr in rest:
        if instr.name not in section:
            placed = [u for u in users[instr.name] if u in section and section[u] != OUTPUTS]
            if placed and instr.opcode in ("constant", "iota") and not instr.operands:
                section[instr.name], path[instr.name] = _shared(placed, plan)
            elif placed:
                section[instr.name], path[instr.name] = section[placed[0]], path[placed[0]]
    rest.reverse()
    for instr in rest:
        if (
            instr.name not in section
            and instr.opcode in _PLUMBING
            and instr.operands
            and all(section.get(o) == INPUTS for o in instr.operands)
        ):
            section[instr.name], path[instr.name] = INPUTS, []
            continue
        if instr.name not in section:
            for operand in instr.operands:
                if operand in section and section[operand] != INPUTS:
                    section[instr.name] = section[operand]
                    path[instr.name] = path[operand]
                    break
    for instr in rest:
        if instr.name not in section:
            section[instr.name], path[instr.name] = "", []


def _shared(users: list[str], plan: ScopePlan) -> tuple[str, list[str]]:
    """Where a constant goes: the section of its first user, in the scope that all its
    users there share (a scalar ``0`` every layer's ReLU reads is in none of the layers)."""
    section = plan.section[users[0]]
    paths = [plan.path[u] for u in users if plan.section[u] == section]
    common = next((i for i, names in enumerate(zip(*paths)) if len(set(names)) > 1), None)
    return section, paths[0][: min(map(len, paths)) if common is None else common]


def place_label(section: str, path: list[str]) -> str:
    """``forward › layers[0] (Linear)``: where a group or instruction sits, for notes."""
    return " › ".join(([section] if section else []) + path) or "the top level"


def _labeller(place, strip: tuple[str, ...]):
    """A function from a scope key to where `_mixed_note` says its ops sit (``placed``'s
    words): once per key, for the fusions of a training step mix the same few scopes."""
    known: dict[tuple[str, tuple[str, ...]], str] = {}

    def label(key: tuple[str, tuple[str, ...]]) -> str:
        found = known.get(key)
        if found is None:
            k = (key[0], key[1][len(strip) :]) if key[1][: len(strip)] == strip else key
            where = place(k)
            found = known[key] = (
                place_label(*where) if where is not None else "code outside every scope"
            )
        return found

    return label


def _mixed_note(weight: dict, label, placed: str) -> str:
    """What a fusion holds from several places, and why it sits where it does (``label``:
    where a scope key's ops sit, from `_labeller`)."""
    flops = sum(w[0] for w in weight.values())
    written = sum(w[1] for w in weight.values())
    key = max([k for k in weight if k[0] == "backward"] or weight, key=weight.__getitem__)
    mine = weight[key]
    if flops:
        share = f"{100 * mine[0] / flops:.0f}% of its FLOPs"
    elif written:
        share = f"{100 * mine[1] / written:.0f}% of the bytes it writes"
    else:
        share = f"{mine[3]} of its {sum(w[3] for w in weight.values())} ops"
    others = sorted({label(k) for k in weight} - {label(key), placed})
    text = f"placed in {placed}, the source of {share}"
    return text + (f"; it also holds ops from {', '.join(others)}" if others else "")


def user_path(path: str, renames: dict[str, str]) -> str:
    """``traced_args[0]['w']`` -> ``x['w']`` with ``{"traced_args[0]": "x"}`` (a prefix
    renames a whole argument: ``traced_args[1]`` is no prefix of ``traced_args[10]``).
    A whole path is looked up first: fit's step names each of its flat leaves."""
    whole = renames.get(path)
    if whole is not None:
        return whole
    for prefix, name in renames.items():
        if path.startswith(prefix) and path[len(prefix) : len(prefix) + 1] in ("", "[", "."):
            return name + path[len(prefix) :]
    return path
