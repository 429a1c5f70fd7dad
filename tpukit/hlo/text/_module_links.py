"""What a parse learns only after the last line: source lines and computation kinds.

`_parser` reads an HLO module line by line; two things need the whole module first.
Newer XLA prints each instruction's source as a ``stack_frame_id`` into tables printed
before the computations (``FileNames``, ``FunctionNames``, ``FileLocations``,
``StackFrames``): `link_sources` turns those into call stacks and gives each instruction
the user's innermost frame. And a computation's kind (fusion, while body, reducer, ...)
is how others call it: `assign_kinds` reads it from the callers.

    >>> text = '''HloModule m
    ...
    ... fused_computation {
    ...   p = f32[8]{0} parameter(0)
    ...   ROOT e = f32[8]{0} exponential(p)
    ... }
    ...
    ... ENTRY main {
    ...   x = f32[8]{0} parameter(0)
    ...   ROOT f = f32[8]{0} fusion(x), kind=kLoop, calls=fused_computation
    ... }
    ... '''
    >>> from tpukit.hlo.text._parser import parse_hlo
    >>> module = parse_hlo(text)  # calls both
    >>> module.computations["fused_computation"].kind
    'fusion'
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tpukit.hlo.text._model import (
    HloComputation,
    HloInstruction,
    HloMetadata,
    HloModule,
    HloSourceFrame,
)
from tpukit.hlo.text._sources import is_user_file

# ``key=value`` fields; a key starts a word (the same matches as without the look-behind,
# found without retrying inside every word of a long op_name).
_META_FIELD = re.compile(r'(?<!\w)(\w++)=("(?:[^"\\]++|\\.)*+"|[^\s}]++)')
# Computation kinds that run as program (as opposed to scalar reducers/comparators).
_PROGRAM_KINDS = ("entry", "fusion", "while_body", "while_condition", "branch", "called", "async")


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        return value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return value


def stack_frames(tables: dict[str, dict[int, str]]) -> dict[int, tuple[HloSourceFrame, ...]]:
    """Map each ``StackFrames`` id to its call stack, innermost frame first.

    XLA prints ``parent_frame_id`` one higher than the frame ids it prints (the
    proto's parent ids are 1-based with 0 for none, and the printer adds one), so
    the parent of printed frame ``k`` is printed frame ``parent_frame_id - 1``.
    """
    files = {k: _unquote(v) for k, v in tables["FileNames"].items()}
    functions = {k: _unquote(v) for k, v in tables["FunctionNames"].items()}
    locations = {}
    for key, value in tables["FileLocations"].items():
        fields = dict(_META_FIELD.findall(value))
        line = fields.get("line", "0")
        locations[key] = HloSourceFrame(
            files.get(int(fields.get("file_name_id", "0") or 0), ""),
            int(line) if line.isdigit() else 0,
            functions.get(int(fields.get("function_name_id", "0") or 0), ""),
        )
    frames: dict[int, HloSourceFrame] = {}
    parents: dict[int, int] = {}
    for key, value in tables["StackFrames"].items():
        fields = dict(_META_FIELD.findall(value))
        location = fields.get("file_location_id", "")
        if location.isdigit() and int(location) in locations:
            frames[key] = locations[int(location)]
        parent = fields.get("parent_frame_id", "")
        if parent.isdigit() and int(parent) > 1:
            parents[key] = int(parent) - 1
    stacks: dict[int, tuple[HloSourceFrame, ...]] = {}
    # Stacks whose parent ids fall all the way down (XLA prints a parent before its
    # children): a frame whose parent is lower and falling shares that parent's stack
    # (tens of frames deep, hundreds of frames: the walk from each one cost 6 ms).
    falling: set[int] = set()
    for key in frames:
        current = parents.get(key, 0)
        if current not in frames:
            stacks[key] = (frames[key],)
            falling.add(key)
        elif current < key and current in falling:
            stacks[key] = (frames[key], *stacks[current])
            falling.add(key)
        else:  # a parent printed later, or a cycle: walk it, stopping where it repeats
            stack, seen, current = [], set(), key
            while current in frames and current not in seen:
                seen.add(current)
                stack.append(frames[current])
                current = parents.get(current, 0)
            stacks[key] = tuple(stack)
    return stacks


def frame_places(tables: dict[str, dict[int, str]]) -> dict[int, tuple[tuple, ...]]:
    """Map each ``StackFrames`` id to where it is, innermost frame first: each frame as
    ``(file, function, line, end_line, column, end_column)``.

    `stack_frames` keeps file, line and function; two calls on one line (``irfft(rfft(y))``)
    differ only in their columns. Two modules of one program (before and after XLA's
    passes) number their frames apart, so a frame is compared by its place, never its id.
    """
    files, functions = tables["FileNames"], tables["FunctionNames"]
    locations = {}
    for key, value in tables["FileLocations"].items():
        fields = dict(_META_FIELD.findall(value))
        locations[key] = (
            _unquote(files.get(int(fields.get("file_name_id", "0") or 0), "")),
            _unquote(functions.get(int(fields.get("function_name_id", "0") or 0), "")),
            *(fields.get(k, "") for k in ("line", "end_line", "column", "end_column")),
        )
    own: dict[int, tuple] = {}
    parents: dict[int, int] = {}
    for key, value in tables["StackFrames"].items():
        fields = dict(_META_FIELD.findall(value))
        location = fields.get("file_location_id", "")
        own[key] = locations.get(int(location), ()) if location.isdigit() else ()
        parent = fields.get("parent_frame_id", "")
        parents[key] = int(parent) - 1 if parent.isdigit() and int(parent) > 1 else 0
    places: dict[int, tuple[tuple, ...]] = {}
    for key in own:  # each stack walked once: a frame below a known one ends the walk
        chain, seen, current = [], set(), key
        while current in own and current not in seen and current not in places:
            seen.add(current)
            chain.append(current)
            current = parents[current]
        below = places.get(current, ())
        for frame in reversed(chain):
            below = places[frame] = ((own[frame],) if own[frame] else ()) + below
    return places


def user_frame(stack: tuple[HloSourceFrame, ...]) -> HloSourceFrame | None:
    """The innermost frame of the user's code (see `is_user_file`), else the innermost."""
    for frame in stack:
        if is_user_file(frame.file):
            return frame
    return stack[0] if stack else None


def link_sources(module: HloModule, metadata: Iterable[HloMetadata] | None = None) -> None:
    """Give each metadata with a ``stack_frame_id`` its stack and the user's frame.
    ``metadata``, when given, holds every metadata of the module's instructions (the
    parser's table: each distinct one once, rather than one per instruction)."""
    if not module.stack_frames:
        return
    users: dict[int, HloSourceFrame | None] = {}  # thousands of instructions, few stacks
    for meta in (i.metadata for i in module.instructions()) if metadata is None else metadata:
        if meta.stack_frame_id and not meta.source_file:
            stack = module.stack_frames.get(meta.stack_frame_id, ())
            meta.stack = stack
            if meta.stack_frame_id not in users:
                users[meta.stack_frame_id] = user_frame(stack)
            frame = users[meta.stack_frame_id]
            if frame is not None:
                meta.source_file, meta.source_line = frame.file, frame.line


def _kind(opcode: str, role: str, comp: HloComputation) -> str:
    if role == "body":
        return "while_body"
    if role == "condition":
        return "while_condition"
    if role == "branch":
        return "branch"
    if role == "calls":
        if opcode == "fusion":
            return "fusion"
        return "async" if opcode.endswith("-start") else "called"
    if role == "to_apply" and opcode == "call":
        return "called"
    if role == "called_computations":  # a custom-call's: a program (Shardy's shard_map
        return "applied" if _per_element(comp) else "called"  # body) or TopK's comparator
    return "applied"


def _per_element(comp: HloComputation) -> bool:
    """Whether ``comp`` maps scalars to a scalar: a comparator or reducer applied per
    element (TopK's ``compare-greater-than``), not a program run once."""
    root = comp.root
    return (
        root is not None
        and not root.shape.is_tuple
        and root.shape.rank == 0
        and all(not p.shape.is_tuple and p.shape.rank == 0 for p in comp.parameters)
    )


def assign_kinds(module: HloModule, callers: list[HloInstruction] | None = None) -> None:
    """Give each computation the kind its callers make it. ``callers``, when given, are
    the module's instructions that call computations, in its order (the others call
    none: the parser's list spares a walk over every record)."""
    for instr in module.instructions() if callers is None else callers:
        for ref in instr.called_computations:
            comp = module.computations.get(ref.name)
            if comp is None or comp.is_entry:
                continue
            kind = _kind(instr.opcode, ref.role, comp)
            if comp.kind in ("unused", "applied") and kind != comp.kind:
                comp.kind = kind if comp.kind == "unused" or kind in _PROGRAM_KINDS else comp.kind
