"""Which programs a trace ran, and the optimized HLO it carries for each.

A JAX trace names each program it ran twice: on the device planes (a TPU's
``XLA Modules`` events are named ``jit_f(12190760917235803885)``, the program's
fingerprint; GPU kernels carry the stats ``hlo_module`` and ``program_id``) and in the
``/host:metadata`` plane, whose event metadata ``jit_f(<id>)`` hold the optimized
module as an ``HloProto`` (stat ``Hlo Proto``). Several programs may share a name
(``jit_dot`` for every shape ``jnp.dot`` was called with): `pick_program` tells them
apart by id and lists them when the choice is the user's.

    >>> from tpukit.measure._xspace import read_xspace
    >>> programs = trace_programs([read_xspace(trace)])  # one file per host
    >>> [(p.name, p.program_id) for p in programs][:1]
    [('jit_f', '12190760917235803885')]
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from tpukit._errors import ArgumentError, ProfileError
from tpukit.display import format_seconds
from tpukit.measure._xspace import TraceFile

METADATA_PLANE = "/host:metadata"
HLO_PROTO_STAT = "Hlo Proto"
MODULE_LINE = "XLA Modules"
_NAMED_ID = re.compile(r"^(?P<name>.+)\((?P<id>\d+)\)$")


@dataclass
class TraceProgram:
    """One program of a trace: its module name, id, device time and HLO (when carried)."""

    name: str
    program_id: str  # "" when the trace gives none (XLA:CPU)
    device_seconds: float = 0.0  # on every device of every host, all runs
    hlo_proto: bytes | None = None
    op_names: set[str] = field(default_factory=set)  # instructions seen running (XLA:CPU)

    @property
    def label(self) -> str:
        """``jit_dot(49)``, as the trace names it and `pick_program` accepts."""
        return f"{self.name}({self.program_id})" if self.program_id else self.name


def split_program(text: str) -> tuple[str, str]:
    """``("jit_f", "7")`` for ``"jit_f(7)"``; ``(text, "")`` for a bare name."""
    found = _NAMED_ID.match(text)
    return (found["name"], found["id"]) if found else (text, "")


def trace_programs(files: Sequence[TraceFile]) -> list[TraceProgram]:
    """Every program the traces ran or carry, the longest on the devices first."""
    programs: dict[tuple[str, str], TraceProgram] = {}

    def get(name: str, program_id: str) -> TraceProgram:
        return programs.setdefault((name, program_id), TraceProgram(name, program_id))

    for trace in files:
        for plane in trace.planes:
            if plane.name == METADATA_PLANE:
                for label, stats in plane.metadata.items():
                    proto = stats.get(HLO_PROTO_STAT)
                    if isinstance(proto, bytes):
                        get(*split_program(label)).hlo_proto = proto
                continue
            if plane.name == "/host:CPU":  # XLA:CPU: events on the client threads
                for line in plane.lines:
                    for event in line.events:
                        module = event.stats.get("hlo_module")
                        if module is not None and "hlo_op" in event.stats:
                            program = get(str(module), str(event.stats.get("program_id", "")))
                            program.device_seconds += event.duration_ns * 1e-9
                            program.op_names.add(str(event.stats["hlo_op"]))
                continue
            if not plane.name.startswith("/device:"):
                continue
            kernels: dict[tuple[str, str], float] = defaultdict(float)
            for line in plane.lines:
                if line.name == MODULE_LINE:
                    for event in line.events:
                        get(*split_program(event.name)).device_seconds += event.duration_ns * 1e-9
                    break
                for event in line.events:  # a GPU without XLA Modules: its kernels
                    module = event.stats.get("hlo_module")
                    if module is not None:
                        key = (str(module), str(event.stats.get("program_id", "")))
                        kernels[key] += event.duration_ns * 1e-9
            else:
                for key, seconds in kernels.items():
                    get(*key).device_seconds += seconds
    for (name, program_id), program in list(programs.items()):
        same = [p for (n, i), p in programs.items() if n == name and i]
        if not program_id and len(same) == 1:  # the trace's id for a name XLA:CPU gives bare
            same[0].device_seconds += program.device_seconds
            del programs[(name, program_id)]
    return sorted(programs.values(), key=lambda p: (-p.device_seconds, p.name, p.program_id))


def pick_program(
    programs: Sequence[TraceProgram], wanted: str | int | None, module_name: str | None, where: str
) -> TraceProgram | None:
    """The program ``wanted`` names (``"jit_dot(49)"``, ``"jit_dot"``, an id), else the one of
    ``module_name``, else the longest on the devices. None when the trace names no program
    (a CPU trace read with its module). Errors list the programs with ids and shapes."""
    ran = [p for p in programs if p.device_seconds or p.hlo_proto]
    if wanted is not None:
        text = str(wanted)
        name, program_id = split_program(text)
        found = [
            p
            for p in ran
            if p.label == text or p.program_id == text or (not program_id and p.name == name)
        ]
        if not found:
            raise ArgumentError(
                f"No program {text!r} in {where}. It holds: {_listing(ran)}. Pass one of "
                "these as program=, by name or as name(id)."
            )
    elif module_name is not None:
        # The caller has the module: only a program of that name that ran can be it
        # (a notebook's trace carries every program the process compiled).
        found = [p for p in ran if p.name == module_name and p.device_seconds]
        if not found:
            return None
    else:
        if not ran:
            raise ProfileError(
                f"{where} names no XLA program (no 'XLA Modules' events, no kernels with an "
                "hlo_module, no HLO in /host:metadata): it is not a trace of JAX/XLA work. "
                "Pass the trace of a jitted call."
            )
        found = [p for p in ran if p.name == ran[0].name]
    if any(p.device_seconds for p in found):  # a notebook's trace carries every program
        found = [p for p in found if p.device_seconds]  # it compiled; keep those that ran
    if len(found) == 1 and not found[0].program_id and wanted is None:
        bare = found[0]  # XLA:CPU names the program that ran without its id
        if module_name is not None:
            return bare  # the caller's module gives the HLO
        carried = _running(bare, [p for p in ran if p.name == bare.name and p.hlo_proto])
        if carried is not None:
            return carried
    with_ids = [p for p in found if p.program_id]
    if len(with_ids) > 1:
        raise ArgumentError(
            f"{len(with_ids)} programs in {where} are named {found[0].name!r}: "
            f"{_listing(with_ids)}. Pass program='{with_ids[0].label}' (or another of these)."
        )
    return with_ids[0] if with_ids else found[0]


def others_line(programs: Sequence[TraceProgram], chosen: TraceProgram) -> str:
    """What else ran in a trace whose program was picked as the longest (no ``program=``,
    no module): a notebook cell's trace often holds small programs beside the user's
    (on JAX 0.7, ``jnp.ones`` runs ``jit_broadcast_in_dim``), and the one picked should
    not pass for the only one. Empty when no program of another name ran.

        >>> ran = [TraceProgram("jit_step", "", 2e-3), TraceProgram("jit_iota", "", 4e-6)]
        >>> others_line(ran, ran[0])
        "The trace ran 1 other program: jit_iota 4 µs. This profile is jit_step's, the longest; pass program='jit_iota' for another."
    """
    others = [p for p in programs if p.device_seconds and p.name != chosen.name]
    if not others:
        return ""
    shown = ", ".join(f"{p.label} {format_seconds(p.device_seconds)}" for p in others[:6])
    more = f" and {len(others) - 6} more" if len(others) > 6 else ""
    return (
        f"The trace ran {len(others)} other program{'s' if len(others) > 1 else ''}: "
        f"{shown}{more}. This profile is {chosen.name}'s, the longest; pass "
        f"program={others[0].label!r} for another."
    )


def _running(bare: TraceProgram, carried: Sequence[TraceProgram]) -> TraceProgram | None:
    """The one program whose carried HLO holds every instruction seen running, with the
    bare entry's time and no id (XLA:CPU events carry none); None when not one alone."""
    matches = []
    for program in carried:
        try:
            text = hlo_text(program.hlo_proto)
        except ProfileError:
            continue
        defined = set(re.findall(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=", text, re.MULTILINE))
        if bare.op_names <= defined:
            matches.append(program)
    if len(matches) != 1:
        return None
    return replace(matches[0], program_id="", device_seconds=bare.device_seconds)


def _listing(programs: Sequence[TraceProgram]) -> str:
    parts = []
    for program in programs[:12]:
        shapes = entry_shapes(program.hlo_proto) if program.hlo_proto else ""
        time = (
            f", {format_seconds(program.device_seconds)} on the devices"
            if program.device_seconds
            else ""
        )
        parts.append(f"{program.label}{' ' + shapes if shapes else ''}{time}")
    more = f" and {len(programs) - 12} more" if len(programs) > 12 else ""
    return "; ".join(parts) + more if parts else "no programs"


def hlo_text(proto: bytes) -> str:
    """The HLO text of an ``HloProto`` (what the metadata plane holds), through jaxlib."""
    from jax._src.lib import xla_client  # jaxlib's own HLO printer

    module = _hlo_module_field(proto)
    try:
        return xla_client.XlaComputation(module).as_hlo_text()
    except Exception as exc:  # jaxlib raises its own error types
        raise ProfileError(f"The HLO this trace carries could not be read ({exc}).") from None


def entry_shapes(proto: bytes) -> str:
    """``(f32[8,8]) -> f32[8,8]``: the entry computation's layout, from the HLO text."""
    try:
        first = hlo_text(proto).split("\n", 1)[0]
    except ProfileError:
        return ""
    return layout_shapes(first)


def layout_shapes(header: str) -> str:
    """The ``entry_computation_layout`` of an ``HloModule`` line without its layouts,
    nothing after it (``frontend_attributes={...}``).

        >>> layout_shapes("HloModule m, entry_computation_layout={(f32[8]{0})->f32[8]{0}}, "
        ...               "frontend_attributes={a=\\"b\\"}")
        '(f32[8])->f32[8]'
    """
    key = "entry_computation_layout={"
    start = header.find(key)
    if start < 0:
        return ""
    depth, index = 1, start + len(key)
    for index in range(start + len(key), len(header)):
        depth += {"{": 1, "}": -1}.get(header[index], 0)
        if depth == 0:
            break
    layout = header[start + len(key) : index]
    return re.sub(r"\{[^{}]*\}", "", layout)


def _hlo_module_field(proto: bytes) -> bytes:
    """Field 1 of an ``HloProto`` (its ``HloModuleProto``), read from the wire format."""
    from google.protobuf.internal.decoder import _DecodeVarint

    index = 0
    while index < len(proto):
        tag, index = _DecodeVarint(proto, index)
        if tag & 7 != 2:
            break
        length, index = _DecodeVarint(proto, index)
        if tag >> 3 == 1:
            return proto[index : index + length]
        index += length
    raise ProfileError("The HLO proto this trace carries holds no module.")
