"""An instruction's ``metadata={...}``: found in a line, and read into `HloMetadata`.

One job: the metadata text. `_metadata_alone` finds the ``{...}`` in the text after the
operands without splitting the other attributes; `_parse_metadata` reads any such text,
`_xla_metadata` the match of `_XLA_METADATA` or `_XLA_COMMON` (the spelling XLA's own
printer uses, most of a dump's texts) with no search per field. A parse reads each
distinct text once (`metadata_table`, kept in the parse's table of shared objects).

    >>> _parse_metadata('{op_type="dot" op_name="jit(f)/dot" source_line=3}').source_line
    3

Imports: this package's model and its stack-frame links (``_module_links``).
"""

from __future__ import annotations

import functools
import re

from tpukit.hlo.text._model import HloInstruction, HloMetadata
from tpukit.hlo.text._module_links import _META_FIELD

# The ``{...}`` of ``metadata={...}``: strings may hold any character.
METADATA_VALUE = re.compile(r'\{(?:[^{}"]++|"(?:[^"\\]++|\\.)*+")*+\}')


_new_object = object.__new__


#: The key of `metadata_table` in a parse's table of shared objects (not a str: no name).
_METADATA_TABLE = ("metadata texts",)


def metadata_table(shared: dict) -> dict[str, HloMetadata]:
    """The metadata of a parse by its ``{...}`` text, kept in its table of shared names
    (``parse_instruction``'s ``shared``) under a key that no name can be."""
    table = shared.get(_METADATA_TABLE)
    if table is None:
        table = shared[_METADATA_TABLE] = {}
    return table


def metadata_text(instr: HloInstruction, text: str | None = None) -> str:
    """The raw ``{...}`` of ``instr``'s ``metadata=`` (``""`` when none), read without
    splitting its other attributes when the parser left them for later. ``text`` is
    ``instr.text`` when the caller has it already."""
    if instr._attributes is None:  # the parser found it alone: it finds it again
        found = _metadata_alone((instr.text if text is None else text)[instr._rest_at :])
        if found is not None:  # (None: only the split can tell, e.g. "metadata" in a name)
            return found
    return instr.attributes.get("metadata", "")


@functools.lru_cache(maxsize=8192)  # most lines of a module end as others do (4 in 5)
def _metadata_alone(rest: str) -> str | None:
    """The ``metadata={...}`` value of ``rest`` (``""`` when it has none), found without
    splitting the other attributes; None when only a full split can tell."""
    at = rest.find("metadata")
    if at < 0:
        return ""
    if rest.find("metadata", at + 8) >= 0 or rest[:at].rstrip()[-1:] != ",":
        return None
    found = METADATA_VALUE.match(rest, at + 9) if rest.startswith("=", at + 8) else None
    if found is None:
        return None
    end = found.end()
    if end != len(rest) and rest[end:].strip()[:1] not in ("", ","):
        return None
    return found.group()


# The fields XLA's printer writes in ``metadata={...}``, in its order (OpMetadataToString).
_XLA_FIELDS = (
    "op_type", "op_name", "source_file", "source_line", "source_end_line", "source_column",
    "source_end_column", "deduplicated_name", "preserve_layout", "scheduling_name",
    "stack_frame_id",
)  # fmt: skip
_QUOTED_FIELDS = ("op_type", "op_name", "source_file", "deduplicated_name", "scheduling_name")
# A ``{...}`` of those fields, in that order, space-separated: quoted values with no quote
# or backslash inside, plain values with no space, quote or brace (possessive, as there).
# In such text `_META_FIELD` finds exactly these fields (so `_parse_metadata` reads them
# the same), and `METADATA_VALUE` ends at its last brace (`_metadata_alone` finds it).
_XLA_METADATA = re.compile(
    r"\{"
    + " ?".join(
        f'(?:{key}="([^"\\\\]*)")?' if key in _QUOTED_FIELDS else f'(?:{key}=([^\\s{{}}"]++))?'
        for key in _XLA_FIELDS
    )
    + r"\}"
)
# What most of XLA's metadata texts hold: an op name, then a source file and line (JAX's
# lowered text, older XLA) or a stack frame (newer XLA); `_XLA_METADATA` reads each such
# text the same, with eleven optional fields tried (twice as long). The op name may hold
# escapes (``mu[\'bn1\']``, a pytree key's quotes), as a string that `_META_FIELD` reads.
_XLA_AFTER_NAME = (
    r'"(?: source_file="([^"\\]*+)" source_line=([0-9]++))?(?: stack_frame_id=([0-9]++))?\}'
)
_XLA_COMMON = re.compile(r'\{op_name="((?:[^"\\]++|\\.)*+)' + _XLA_AFTER_NAME)
# The same with its op name a run of non-quotes: `re` runs through one excluded character
# 3x quicker than through two, ``[^"\\]``; `_common_metadata` tells when they differ.
_XLA_QUICK = re.compile(r'\{op_name="([^"]*+)' + _XLA_AFTER_NAME)


def _common_metadata(text: str, at: int, whole: bool = True) -> re.Match[str] | None:
    """`_XLA_COMMON`'s match at ``at`` in ``text`` (``fullmatch`` when ``whole``, else
    ``match``), found by `_XLA_QUICK` unless a backslash may escape a quote there."""
    found = (_XLA_QUICK.fullmatch if whole else _XLA_QUICK.match)(text, at)
    if "\\" in text and (found is None or "\\" in found.group(1)):
        return (_XLA_COMMON.fullmatch if whole else _XLA_COMMON.match)(text, at)
    return found


#: The keys XLA writes in ``metadata={...}``, one string each for every parse.
_FIELD_KEYS = {
    key: key
    for key in (
        "op_type", "op_name", "source_file", "source_line", "source_end_line", "source_column",
        "source_end_column", "stack_frame_id", "scheduling_name", "deduplicated_name",
        "preserve_layout", "profile_type",
    )
}  # fmt: skip


def _NOT_SHARED(value: str, _same: str) -> str:
    return value


def _xla_metadata(found: re.Match[str], strings: dict[str, str]) -> HloMetadata:
    """The `HloMetadata` of an `_XLA_METADATA` (or `_XLA_COMMON`) match: what
    `_parse_metadata` gives for its text, with no search for the fields. `_XLA_COMMON`'s
    match (most texts) is read field by field, `_XLA_METADATA`'s by its groups, which are
    `_XLA_FIELDS` in order."""
    keep = strings.setdefault
    if found.re is not _XLA_METADATA:  # `_XLA_COMMON`'s groups
        op_name, source_file, line, frame = found.groups()
        if "\\" in op_name:  # (as `_parse_metadata` unquotes it)
            op_name = op_name.replace('\\"', '"').replace("\\\\", "\\")
        fields = {"op_name": op_name}
        if source_file is not None:
            fields["source_file"] = source_file = keep(source_file, source_file)
            fields["source_line"] = keep(line, line)
        if frame is not None:
            fields["stack_frame_id"] = keep(frame, frame)
        # Its fields as stored, as `_read_rows` makes records (the dataclass's __init__
        # costs a third of this function; most metadata texts of a module read so).
        metadata = _new_object(HloMetadata)
        metadata.op_name = op_name
        metadata.op_type = ""
        metadata.source_file = source_file or ""
        metadata.source_line = int(line) if line is not None else 0
        metadata.stack_frame_id = int(frame) if frame is not None else 0
        metadata.fields = fields
        metadata.stack = ()
        return metadata
    # Each field present, in `_XLA_FIELDS`' order, its value stored once (but the op name).
    fields = {
        key: value if key == "op_name" else keep(value, value)
        for key, value in zip(_XLA_FIELDS, found.groups())
        if value is not None
    }
    return _from_fields(fields)


def _parse_metadata(value: str, strings: dict[str, str] | None = None) -> HloMetadata:
    """The `HloMetadata` of one ``{...}`` text (a parse reads each distinct text once).

    Its keys, and the values other than ``op_name`` (source files, lines, frame ids:
    few distinct ones), are stored once per module when ``strings`` is given: a dump
    holds tens of thousands of metadata texts (a fifth of a parsed module's memory)."""
    fields = {}
    keep = _NOT_SHARED if strings is None else strings.setdefault
    for key, raw in _META_FIELD.findall(value):
        if len(raw) >= 2 and raw[0] == '"' and raw[-1] == '"':  # `_unquote`, inlined
            raw = raw[1:-1]
            if "\\" in raw:
                raw = raw.replace('\\"', '"').replace("\\\\", "\\")
        key = _FIELD_KEYS.get(key, key)
        fields[key] = raw if key == "op_name" else keep(raw, raw)
    return _from_fields(fields)


def _from_fields(fields: dict[str, str]) -> HloMetadata:
    """The `HloMetadata` of a text's fields by key (values unquoted), kept as ``fields``."""
    get = fields.get
    line = get("source_line", "")
    frame = get("stack_frame_id", "")
    return HloMetadata(  # by position: op_name, op_type, source_file, line, frame, fields
        get("op_name", ""), get("op_type", ""), get("source_file", ""),
        int(line) if line.isdigit() else 0, int(frame) if frame.isdigit() else 0, fields,
    )  # fmt: skip
