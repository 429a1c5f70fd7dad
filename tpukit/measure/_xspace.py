"""Read a ``jax.profiler`` trace file (``*.xplane.pb``) into plain Python objects.

A trace file is one host's ``XSpace`` protobuf (``tsl/profiler/protobuf/xplane.proto``):
planes (``/device:TPU:0``, ``/host:CPU``, ``/host:metadata``) of lines of timed events,
each event naming an entry of its plane's event metadata, with stats whose names are in
the plane's stat metadata. ``jax.profiler.ProfileData`` reads the same file but hides
what tpukit needs: an event's ``display_name`` (a TPU ``XLA Ops`` event's bare
instruction name), the stats of the event metadata (the HLO protos of the
``/host:metadata`` plane) and the host's name. So the message definitions are vendored
here (six small messages, built with ``protobuf``'s descriptor API: no generated code,
no new dependency) and decoded by the ``protobuf`` package JAX already depends on.

    >>> space = read_xspace(trace)  # e.g. a TPU's <run>/plugins/profile/<date>/<host>.xplane.pb
    >>> [plane.name for plane in space.planes][:2]
    ['/device:TPU:0', '/host:metadata']
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from tpukit._errors import ProfileError


@dataclass(frozen=True)
class TraceEvent:
    """One timed event: ``name`` as recorded, ``display_name`` when the trace has one."""

    name: str
    display_name: str
    start_ns: float
    duration_ns: float
    stats: dict[str, Any]


@dataclass
class TraceLine:
    """A timeline of a plane: a thread, a GPU stream, a TPU's ``XLA Ops``."""

    name: str
    events: list[TraceEvent]


@dataclass
class TracePlane:
    """A device or the host: its lines, its own stats (``device_type_string``) and the
    stats of its event metadata by name (the HLO protos of ``/host:metadata``)."""

    name: str
    stats: dict[str, Any]
    lines: list[TraceLine]
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class TraceFile:
    """One host's trace: the host's name and its planes."""

    host: str
    planes: list[TracePlane]
    path: str = ""


# -- the vendored message definitions -------------------------------------------------

_I64, _U64, _DBL, _STR, _BYTES, _MSG = (
    descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
    descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
    descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
    descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
)
_PACKAGE = "tpukit.vendored.xplane"
# message: [(field, number, type, repeated, message type or "", oneof index or None)]
_MESSAGES: dict[str, list[tuple[str, int, int, bool, str, int | None]]] = {
    "XSpace": [
        ("planes", 1, _MSG, True, "XPlane", None),
        ("errors", 2, _STR, True, "", None),
        ("warnings", 3, _STR, True, "", None),
        ("hostnames", 4, _STR, True, "", None),
    ],
    "XPlane": [
        ("id", 1, _I64, False, "", None),
        ("name", 2, _STR, False, "", None),
        ("lines", 3, _MSG, True, "XLine", None),
        ("event_metadata", 4, _MSG, True, "EventMetadataEntry", None),  # map<int64, ...>
        ("stat_metadata", 5, _MSG, True, "StatMetadataEntry", None),
        ("stats", 6, _MSG, True, "XStat", None),
    ],
    "EventMetadataEntry": [
        ("key", 1, _I64, False, "", None),
        ("value", 2, _MSG, False, "XEventMetadata", None),
    ],
    "StatMetadataEntry": [
        ("key", 1, _I64, False, "", None),
        ("value", 2, _MSG, False, "XStatMetadata", None),
    ],
    "XLine": [
        ("id", 1, _I64, False, "", None),
        ("name", 2, _STR, False, "", None),
        ("timestamp_ns", 3, _I64, False, "", None),
        ("events", 4, _MSG, True, "XEvent", None),
        ("duration_ps", 9, _I64, False, "", None),
        ("display_id", 10, _I64, False, "", None),
        ("display_name", 11, _STR, False, "", None),
    ],
    "XEvent": [
        ("metadata_id", 1, _I64, False, "", None),
        ("offset_ps", 2, _I64, False, "", 0),
        ("duration_ps", 3, _I64, False, "", None),
        ("stats", 4, _MSG, True, "XStat", None),
        ("num_occurrences", 5, _I64, False, "", 0),
    ],
    "XStat": [
        ("metadata_id", 1, _I64, False, "", None),
        ("double_value", 2, _DBL, False, "", 0),
        ("uint64_value", 3, _U64, False, "", 0),
        ("int64_value", 4, _I64, False, "", 0),
        ("str_value", 5, _STR, False, "", 0),
        ("bytes_value", 6, _BYTES, False, "", 0),
        ("ref_value", 7, _U64, False, "", 0),
    ],
    "XEventMetadata": [
        ("id", 1, _I64, False, "", None),
        ("name", 2, _STR, False, "", None),
        ("metadata", 3, _BYTES, False, "", None),
        ("display_name", 4, _STR, False, "", None),
        ("stats", 5, _MSG, True, "XStat", None),
        ("child_id", 6, _I64, True, "", None),
    ],
    "XStatMetadata": [
        ("id", 1, _I64, False, "", None),
        ("name", 2, _STR, False, "", None),
        ("description", 3, _STR, False, "", None),
    ],
}
_ONEOFS = {"XEvent": "data", "XStat": "value"}


def _message_classes() -> dict[str, type]:
    """The message classes of the vendored ``xplane.proto`` (proto3, field numbers as in tsl)."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="tpukit_vendored_xplane.proto", package=_PACKAGE, syntax="proto3"
    )
    for message_name, fields in _MESSAGES.items():
        message = proto.message_type.add(name=message_name)
        if message_name in _ONEOFS:
            message.oneof_decl.add(name=_ONEOFS[message_name])
        for name, number, kind, repeated, type_name, oneof in fields:
            spec = message.field.add(name=name, number=number, type=kind)
            spec.label = spec.LABEL_REPEATED if repeated else spec.LABEL_OPTIONAL
            if type_name:
                spec.type_name = f".{_PACKAGE}.{type_name}"
            if oneof is not None:
                spec.oneof_index = oneof
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name in _MESSAGES
    }


_CLASSES = _message_classes()


# -- decoding ---------------------------------------------------------------------------


def read_xspace(path: str | os.PathLike) -> TraceFile:
    """The trace file at ``path`` as a `TraceFile`; a `ProfileError` naming the file when it
    is empty, damaged (cut short, re-saved as text) or no JAX/XLA trace at all."""
    path = pathlib.Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ProfileError(
            f"Cannot read the trace file {str(path)!r}: {exc.strerror or exc}. Check the path "
            "and its permissions."
        ) from None
    return parse_xspace(data, source=str(path))


def parse_xspace(data: bytes, *, source: str = "<bytes>") -> TraceFile:
    """A serialized ``XSpace`` as a `TraceFile` (``source`` names it in errors)."""
    if not data:
        raise ProfileError(
            f"The trace file {source!r} is empty (0 bytes): the trace was not written to the "
            "end. Take the trace again (leave the `with jax.profiler.trace(...)` block first)."
        )
    space = _CLASSES["XSpace"]()
    try:
        space.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ProfileError(
            f"The trace file {source!r} is not a readable XSpace protobuf ({len(data):,} bytes, "
            f"{_first_bytes(data)}; {exc}): it was cut short, damaged or saved as text. Take the "
            "trace again, or copy the file as binary."
        ) from None
    planes = [_plane(plane) for plane in space.planes]
    if not planes or not any(p.name.startswith(("/device:", "/host:")) for p in planes):
        raise ProfileError(
            f"The file {source!r} holds no profiler planes ({len(data):,} bytes read as an "
            f"XSpace with {len(planes)} planes: {_first_bytes(data)}): it is not a "
            "jax.profiler trace. Pass a *.xplane.pb that jax.profiler.trace(...) wrote."
        )
    host = space.hostnames[0] if space.hostnames else _host_from_path(source)
    return TraceFile(host=host, planes=planes, path=source)


def _first_bytes(data: bytes) -> str:
    head = data[:24]
    if all(32 <= b < 127 or b in (9, 10, 13) for b in head):
        return f"starts as text {head.decode('ascii')!r}"
    return f"starts {head[:12].hex(' ')}"


def _host_from_path(source: str) -> str:
    return pathlib.Path(source).name.removesuffix(".xplane.pb") or source


def _plane(plane: Any) -> TracePlane:
    stat_names = {entry.key: entry.value.name for entry in plane.stat_metadata}

    def stats(values: Iterable[Any]) -> dict[str, Any]:
        out = {}
        for stat in values:
            which = stat.WhichOneof("value")
            value = getattr(stat, which) if which else None
            if which == "ref_value":
                value = stat_names.get(value, value)
            out[stat_names.get(stat.metadata_id, str(stat.metadata_id))] = value
        return out

    event_meta = {entry.key: entry.value for entry in plane.event_metadata}
    meta_stats = {key: stats(meta.stats) for key, meta in event_meta.items()}
    lines = []
    for line in plane.lines:
        events = []
        base_ps = line.timestamp_ns * 1000
        for event in line.events:
            meta = event_meta.get(event.metadata_id)
            merged = dict(meta_stats.get(event.metadata_id, {}))
            merged.update(stats(event.stats))
            events.append(
                TraceEvent(
                    name=meta.name if meta is not None else str(event.metadata_id),
                    display_name=meta.display_name if meta is not None else "",
                    start_ns=(base_ps + event.offset_ps) / 1000,
                    duration_ns=event.duration_ps / 1000,
                    stats=merged,
                )
            )
        lines.append(TraceLine(name=line.name, events=events))
    metadata = {meta.name: meta_stats[key] for key, meta in event_meta.items() if meta_stats[key]}
    return TracePlane(plane.name, stats(plane.stats), lines, metadata)


def from_profile_data(data: Any, host: str = "") -> TraceFile:
    """A ``jax.profiler.ProfileData`` (what ``from_text_proto`` or a caller built) as a
    `TraceFile`: the same planes, lines and events, without display names."""
    planes = []
    for plane in data.planes:
        lines = []
        for line in plane.lines:
            events = [
                TraceEvent(e.name, "", float(e.start_ns), float(e.duration_ns), _stats_of(e))
                for e in line.events
            ]
            lines.append(TraceLine(line.name, events))
        planes.append(TracePlane(plane.name, _stats_of(plane), lines))
    return TraceFile(host=host, planes=planes)


def _stats_of(item: Any) -> dict[str, Any]:
    try:
        return dict(item.stats)
    except Exception:  # a stat the reader cannot convert
        return {}
