"""The graph's payload as the page carries it: shorter columns, compressed, in base64.

`_graph_payload` builds the payload as the viewer reads it; most of its bytes are the
HLO line of every instruction, whose head (``%name = f32[8]{0} add``) repeats the
``label``, ``shape`` and ``op`` columns beside it, and shapes and opcodes that many
instructions share. On the wire an instruction's text keeps only what follows that head
(``textHead`` says which head: 1 ``%name = shape op``, 2 the same after ``ROOT ``, 0 none,
the text whole), and ``shape`` and ``op`` hold indices into ``shapes`` and ``ops``; the
viewer (``unpackColumns`` in ``assets/graph_view.js``) puts them back as it loads. A quarter
less JSON to write, compress, inflate and read, and about a fifth less HTML.

    >>> wire = pack({"label": ["x"], "shape": ["f32[]"], "op": ["exp"],
    ...              "text": ["%x = f32[] exp(%a)"]})
    >>> wire["text"], wire["textHead"], wire["shape"], wire["shapes"], wire["op"], wire["ops"]
    (['(%a)'], [1], [0], ['f32[]'], [0], ['exp'])

The columns of whole numbers (a node's kind, parent, opcode, FLOPs, bytes, interned
strings; the data edges of ``blocks`` as `block_columns`, ``params`` and ``roots`` as
`link_columns`) travel as typed arrays after the JSON, not as JSON: writing tens of
thousands of numbers as JSON text, and parsing them back in the page, took most of the
JSON's time. So do the long columns of texts (`LINE_COLUMNS`: HLO text, labels, the
interned strings), as UTF-8 lines: a text has no line break (else its column goes as
JSON), and writing one string is a third of the time of writing each as JSON.
`encode_payload` writes, before deflating: a zero byte (JSON starts with ``{``, so the page
tells the two apart), the JSON's length (4 bytes, little-endian), the JSON of the other
fields, whose ``binary`` lists each array as ``[name, type, length]`` (a column of texts
as ``[name, "lines", bytes]``), then each array in that order, little-endian, each
starting at a multiple of 8 bytes. `decode_payload` reads it back, as the page does.

    >>> read_wire(wire_bytes({"kind": [0, 3], "parent": [-1, 0], "flops": [2**40, 0],
    ...                       **block_columns([[0, [1, 1, 8, 0]]])}))
    {'kind': [0, 3], 'parent': [-1, 0], 'flops': [1099511627776, 0], 'blockOwner': [0], 'blockSize': [4], 'blockFrom': [1], 'blockTo': [1], 'blockBytes': [8], 'blockIndex': [0]}
"""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
import zlib
from array import array
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from tpukit.graph._graph_bodies import BODY_COLUMNS
from tpukit.graph._graph_lines import (
    _LINES_AT_A_TIME,
    DeferredBytes,
    EncodedLines,
    _lines,
    deferred_lines,
)
from tpukit.graph._graph_lines import LineColumn as LineColumn  # (read here by tests)

if TYPE_CHECKING:
    from tpukit.graph._graph_edges import Edges

# Level 2: a quarter of level 6's time on a 3 MB payload (ResNet-50's training step:
# 26 ms against 100), 20% larger; level 3 takes half as long again for 5% less.
_LEVEL = 2
# The two bytes that open a zlib stream of that level (`deflate` writes them itself).
_ZLIB_HEADER = zlib.compress(b"", _LEVEL)[:2]
#: `deflate` splits payloads of at least this many bytes over two cores (below it, a
#: thread's start is a larger share of the time saved).
SPLIT_AT = 1 << 20

#: The payload's columns of whole numbers, one per node: typed arrays on the wire.
NUMBER_COLUMNS = (
    "kind", "parent", "op", "cat", "shape", "scope", "location", "source", "note", "count",
    "textHead", "flops", "bytes",
)  # fmt: skip
#: ``blocks``, ``params``, ``roots`` (`block_columns`, `link_columns`): typed arrays too.
OWNED_COLUMNS = (
    "blockOwner", "blockSize", "blockFrom", "blockTo", "blockBytes", "blockIndex",
    "paramOwner", "paramSize", "paramNodes", "rootOwner", "rootNode",
)  # fmt: skip
#: The long columns of texts: UTF-8 after the arrays, one text a line (``lines``).
LINE_COLUMNS = ("text", "label", "strings", "bodyText", "bodyLabel")

#: Typed array kinds, narrowest first: the page's name and `array`'s code.
_TYPES = (("u8", "B"), ("u16", "H"), ("i32", "i"))
_FLOAT = ("f64", "d")  # beyond 32 bits, or not whole: as JSON would give it (a double)
_CODES = dict((*_TYPES, _FLOAT))


def pack(payload: dict) -> dict:
    """``payload`` with its ``text``, ``shape``, ``op``, ``blocks``, ``params`` and
    ``roots`` in their wire form (a copy; the columns of blocks, params and roots stand
    where those stood).

    (`_graph_payload.graph_wire` makes the same for a graph in one pass.)
    """
    wire = {}
    for key, value in payload.items():
        if key == "blocks":
            wire.update(block_columns(value))
        elif key == "params":  # (after it, always: "roots")
            roots = payload.get("roots", {}).items()
            wire.update(link_columns(((int(k), v) for k, v in value.items()), roots))
        elif key != "roots":
            wire[key] = value
    heads, tails = [], []
    columns = (payload["text"], payload["label"], payload["shape"], payload["op"])
    for text, label, shape, op in zip(*columns, strict=True):
        head, tail = split_head(text, label, shape, op)
        heads.append(head)
        tails.append(tail)
    wire["text"], wire["textHead"] = tails, heads
    wire["shape"], wire["shapes"] = indexed(payload["shape"])
    wire["op"], wire["ops"] = indexed(payload["op"])
    return wire


def indexed(values: list[str]) -> tuple[list[int], list[str]]:
    """``values`` as indices into a table of the distinct values, in order of first use."""
    table: dict[str, int] = {}
    return [table.setdefault(value, len(table)) for value in values], list(table)


def first_use(ids: list[int] | array, table: list[str]) -> tuple[list[int] | array, list[str]]:
    """`indexed` of ``[table[k] for k in ids]`` (``table``'s values distinct), from the ids:
    renumbered in order of first use, an ``array`` kept an ``array``.

        >>> first_use([2, 0, 2, 1], ["a", "b", "c"])
        ([0, 1, 0, 2], ['c', 'a', 'b'])
    """
    if isinstance(ids, array) and len(table) <= 256:  # (most modules' ops and shapes)
        return _first_use_bytes(ids, table)
    used = list(dict.fromkeys(ids))  # (in order of first use)
    renumber = [0] * len(table)
    for new, old in enumerate(used):
        renumber[old] = new
    again = map(renumber.__getitem__, ids)
    found = array(ids.typecode, again) if isinstance(ids, array) else list(again)
    return found, [table[k] for k in used]


def _first_use_bytes(ids: array, table: list[str]) -> tuple[array, list[str]]:
    """`first_use` of an array of ids below 256, as bytes: each id's first place found by
    ``bytes.find``, the column renumbered by ``bytes.translate`` (no int object per id)."""
    raw = ids.tobytes() if ids.typecode == "B" else bytes(iter(ids))
    first = {k: raw.find(k) for k in range(len(table))}
    used = sorted((k for k in first if first[k] >= 0), key=first.__getitem__)
    renumber = bytearray(256)
    for new, old in enumerate(used):
        renumber[old] = new
    return array("B", raw.translate(renumber)), [table[k] for k in used]


def block_columns(blocks: Iterable[tuple[int, Iterable[int]]]) -> dict[str, list[int]]:
    """``blocks`` (``[[owner, [from, to, bytes, index, ...]], ...]``) as the wire carries
    them: ``blockOwner``, ``blockSize`` (each block's count of numbers), and each of the
    four numbers of every edge in a column of its own (``blockFrom``, ``blockTo``,
    ``blockBytes``, ``blockIndex``): node ids and indices fit narrower arrays than the
    bytes, and deflate faster apart (a third less time on a training step's edges)."""
    columns = _owned("block", "Edges", blocks)
    edges = columns.pop("blockEdges")
    for k, name in enumerate(("blockFrom", "blockTo", "blockBytes", "blockIndex")):
        columns[name] = edges[k::4]
    return columns


def edge_columns(blocks: Iterable[tuple[int, Edges]], typed: bool = False) -> dict[str, list]:
    """`block_columns` of the tree's own blocks, each column joined from the blocks' typed
    columns (`_graph_edges.Edges`) rather than from every edge's four numbers in turn.

    With ``typed`` the four edge columns stay typed arrays, for `wire_parts` alone (a
    training step has hundreds of thousands of edges: as lists, an int object each).
    """
    owners, sizes = [], []
    blocks = list(blocks)
    total = sum(len(edges.source) for _, edges in blocks)  # (each column made at its size,
    columns = [array(code, [0]) * total for code in "iiqi"]  # not grown block by block)
    at = 0
    for owner, edges in blocks:
        owners.append(owner)
        sizes.append(4 * len(edges))
        end = at + len(edges.source)
        for column, part in zip(columns, (edges.source, edges.target, edges.nbytes, edges.index)):
            column[at:end] = part
        at = end
    names = ("blockFrom", "blockTo", "blockBytes", "blockIndex")
    return {
        "blockOwner": owners,
        "blockSize": sizes,
        **{name: column if typed else column.tolist() for name, column in zip(names, columns)},
    }


def link_columns(
    params: Iterable[tuple[int, Iterable[int]]], roots: Iterable[tuple[object, int]]
) -> dict[str, list[int]]:
    """``params`` (each call's or loop's node, its computation's parameter nodes) and
    ``roots`` (its root node) as the wire carries them: ``paramOwner``, ``paramSize``,
    ``paramNodes`` as `block_columns`, ``rootOwner`` and ``rootNode``."""
    owners, nodes = [], []
    for owner, node in roots:
        owners.append(int(owner))  # (the payload's keys are texts, as JSON's are)
        nodes.append(node)
    return {**_owned("param", "Nodes", params), "rootOwner": owners, "rootNode": nodes}


def _owned(prefix: str, values: str, groups: Iterable[tuple[int, Iterable[int]]]) -> dict:
    owners, sizes, numbers = [], [], []
    for owner, group in groups:
        start = len(numbers)
        numbers.extend(group)
        owners.append(owner)
        sizes.append(len(numbers) - start)
    return {f"{prefix}Owner": owners, f"{prefix}Size": sizes, f"{prefix}{values}": numbers}


def split_head(text: str, label: str, shape: str, op: str) -> tuple[int, str]:
    """``(head, rest)``: which head ``text`` starts with (1 ``%label = shape op``, 2 the same
    after ``ROOT ``, 0 none) and what follows it (``text`` whole for 0)."""
    if text:
        head = f"%{label} = {shape} {op}"
        if text.startswith(head):
            return 1, text[len(head) :]
        if text.startswith("ROOT ") and text.startswith(head, 5):
            return 2, text[len(head) + 5 :]
    return 0, text


def encode_payload(payload: dict) -> str:
    """The payload as the page carries it: packed, then `encode_wire`."""
    return encode_wire(pack(payload))


def encode_wire(wire: dict, compress: bool = True, *, spend: bool = False) -> str:
    """A packed payload as the page carries it: `wire_bytes`, deflated (`deflate`), in base64.

    Without ``compress`` the bytes go as they are (they open with a zero byte, which no
    zlib stream does): a payload of a few kilobytes (a glance) then needs no inflating,
    which the page can only do asynchronously, so it draws in the script's own task.

    With ``spend`` the columns are taken out of ``wire`` as they are written (the caller
    reads it no more): a large module's columns are then let go before they are deflated.
    """
    return "".join(encode_wire_pieces(wire, compress, spend=spend))


#: Deflated bytes put into base64 at a time by `encode_wire_pieces` (a multiple of 3: the
#: pieces' base64 joins into the whole's): a megabyte of text each.
_BASE64_STEP = 3 << 18


def encode_wire_pieces(wire: dict, compress: bool = True, *, spend: bool = False) -> list[str]:
    """`encode_wire` as the texts it joins, each the base64 of `_BASE64_STEP` bytes.

    A page takes its payload as these pieces (`_graph_page.TextPieces`), which it copies
    into itself once: the whole base64 is never made as bytes and again as a text (the
    two at once were the peak of a large module's payload), and the deflated bytes are
    let go of as their pieces are made (`deflated_pieces`, never joined).
    """
    parts = wire_parts(wire, spend=spend)
    packed = deflated_pieces(parts, spend=True) if compress else list(_pieces(parts))
    del parts
    return _base64_pieces(packed)


def _base64_pieces(pieces: list) -> list[str]:
    """The base64 of ``b"".join(pieces)`` as the texts of `_BASE64_STEP` bytes each (the
    last of the rest); ``pieces`` is emptied, each let go of once it is read."""
    out: list[str] = []
    held = bytearray()
    pieces.reverse()
    while pieces:
        held += pieces.pop()
        while len(held) >= _BASE64_STEP:
            out.append(base64.b64encode(held[:_BASE64_STEP]).decode())
            del held[:_BASE64_STEP]
    if held:
        out.append(base64.b64encode(held).decode())
    return out


def deflate(raw: bytes) -> bytes:
    """``raw`` in zlib's format, as ``zlib.compress(raw, _LEVEL)`` but on two cores when
    it is large (`SPLIT_AT`) and two are free.

    The halves are deflated at once, the first ending on a byte boundary (a sync flush),
    each with a compressor of its own (zlib lets go of the interpreter while it works):
    the two are one valid deflate stream, which `zlib.decompress` and the page's
    ``DecompressionStream`` read whole (pigz's trick). A training step's 2.4 MB takes half
    the time (21 -> 12 ms) and 0.3% more bytes; the second half just cannot refer back
    into the first.

        >>> raw = bytes(range(256)) * 8192
        >>> zlib.decompress(deflate(raw)) == raw
        True
    """
    return deflate_parts([raw])


#: What `wire_parts` gives: bytes, or a column of texts made as it is deflated.
Part = bytes | DeferredBytes


def deflate_parts(parts: list[Part], *, spend: bool = False) -> bytes:
    """`deflate` of ``b"".join(parts)``, the same bytes, without joining them first.

    A large module's payload is tens of megabytes (`wire_parts`): its one joined copy
    would be the peak of the process's memory while the graph is made. zlib's output does
    not depend on how its input is cut, so each compressor is fed the parts (or the
    slices of them) of its half in turn, a `DeferredBytes` column a run of texts at a time.
    With ``spend`` each part is let go of (taken out of ``parts``) once it is deflated:
    the deflated bytes grow as the payload they replace shrinks.

        >>> parts = [bytes(range(256)) * 4096, b"x" * 3000, bytes(range(256)) * 4096]
        >>> deflate_parts(parts) == deflate(b"".join(parts))
        True
    """
    return b"".join(deflated_pieces(parts, spend=spend))


def deflated_pieces(parts: list[Part], *, spend: bool = False) -> list[bytes]:
    """`deflate_parts` as the pieces the compressors gave, not joined: `encode_wire_pieces`
    puts them into base64 a piece at a time, so the deflated bytes are never held twice."""
    total = sum(map(_size, parts))
    if total < SPLIT_AT or _free_cores() < 2:
        compressor = zlib.compressobj(_LEVEL)
        out = [compressor.compress(piece) for piece in _fed(parts, spend)]
        out.append(compressor.flush())
        return out
    first_half, second_half = _halves(parts, total // 2)
    if spend:
        parts.clear()
    second: list = []

    def deflate_second() -> None:
        compressor = zlib.compressobj(_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)  # raw deflate
        out, checksum = [], 1
        for piece in _fed(second_half, True):
            out.append(compressor.compress(piece))
            checksum = zlib.adler32(piece, checksum)
        out.append(compressor.flush())
        second.extend((out, checksum))

    worker = threading.Thread(target=deflate_second, name="tpukit-deflate")
    worker.start()
    compressor = zlib.compressobj(_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    first, checksum = [_ZLIB_HEADER], 1
    for piece in _fed(first_half, True):
        first.append(compressor.compress(piece))
        checksum = zlib.adler32(piece, checksum)
    first.append(compressor.flush(zlib.Z_SYNC_FLUSH))
    worker.join()
    checksum = _adler32_combine(checksum, second[1], total - total // 2)
    first += second[0]
    first.append(checksum.to_bytes(4, "big"))
    return first


def _adler32_combine(first: int, second: int, length: int) -> int:
    """The Adler-32 of ``a + b`` from that of ``a`` (``first``), of ``b`` (``second``) and
    ``b``'s ``length``, as zlib's ``adler32_combine`` (which Python's zlib does not offer):
    each half's checksum is found as it is deflated, by the thread that deflates it.

        >>> a, b = b"tpukit " * 1000, bytes(range(256)) * 300
        >>> _adler32_combine(zlib.adler32(a), zlib.adler32(b), len(b)) == zlib.adler32(a + b)
        True
    """
    base = 65521  # (the largest prime below 2 ** 16)
    rem = length % base
    low = first & 0xFFFF
    high = (rem * low + (first >> 16) + (second >> 16) + base - rem) % base
    low = (low + (second & 0xFFFF) + base - 1) % base
    return high << 16 | low


#: A part of one half (`_halves`): a view of bytes, or a stretch of a `DeferredBytes`.
_Cut = memoryview | tuple[DeferredBytes, int, int]


def _halves(parts: list[Part], half: int) -> tuple[list[_Cut], list[_Cut]]:
    """``parts`` cut at byte ``half`` of their concatenation: two lists of views (of a
    `DeferredBytes`: the column, where its stretch begins and where it ends)."""
    first: list[_Cut] = []
    second: list[_Cut] = []
    start = 0
    for part in parts:
        size = _size(part)
        end = start + size
        if isinstance(part, DeferredBytes):
            cut = min(max(half - start, 0), size)
            if cut:
                first.append((part, 0, cut))
            if cut < size:
                second.append((part, cut, size))
        else:
            view = memoryview(part)
            if end <= half:
                first.append(view)
            elif start >= half:
                second.append(view)
            else:
                first.append(view[: half - start])
                second.append(view[half - start :])
        start = end
    return first, second


def _size(part: Part) -> int:
    return part.size if isinstance(part, DeferredBytes) else len(part)


def _pieces(parts: list) -> Iterator[bytes | memoryview]:
    """The bytes of ``parts`` (`Part`, or `_halves`' cuts), a `DeferredBytes` as it is made."""
    for part in parts:
        if isinstance(part, DeferredBytes):
            yield from part.pieces()
        elif isinstance(part, tuple):
            yield from part[0].pieces(part[1], part[2])
        else:
            yield part


def _fed(parts: list, spend: bool) -> Iterator[bytes | memoryview]:
    """`_pieces` of ``parts``; with ``spend``, each part taken out of the list as it is
    read, so that none is held once the compressor has it."""
    if not spend:
        yield from _pieces(parts)
        return
    parts.reverse()
    while parts:
        yield from _pieces([parts.pop()])


def _free_cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (macOS, Windows)
        return os.cpu_count() or 1


def wire_bytes(wire: dict) -> bytes:
    """``wire``'s bytes before deflating: the zero byte, JSON's length, JSON, the arrays."""
    return b"".join(_pieces(wire_parts(wire)))


def wire_parts(wire: dict, *, spend: bool = False) -> list[Part]:
    """`wire_bytes` in the pieces it is joined from (`deflate_parts` reads them as they are:
    a `DeferredBytes` column, `graph_wire`'s HLO texts with ``typed``, is made as it is
    read); with ``spend``, the binary columns are taken out of ``wire`` itself
    (`encode_wire`)."""
    fields = wire if spend else dict(wire)
    names = (*NUMBER_COLUMNS, *OWNED_COLUMNS, *BODY_COLUMNS)  # (`_graph_bodies`: by fusions)
    arrays = {}
    for name in names:
        if name in fields:
            values = fields.pop(name)
            found = _narrowed(values, spend) if isinstance(values, array) else None
            doubles = _doubles(values) if spend and found is None else None
            if doubles is not None:
                arrays[name] = _FLOAT[0], len(values), [doubles]
                continue
            kind, raw = _typed(values) if found is None else found
            arrays[name] = kind, len(values), [raw]
    for name in LINE_COLUMNS:
        value = fields.get(name)
        if isinstance(value, DeferredBytes):
            lines: list | None = [value]
        elif isinstance(value, EncodedLines):
            lines = value.pieces
        elif spend:  # (made as they are deflated: `encode_wire`)
            deferred = deferred_lines(value, _LINES_AT_A_TIME)
            lines = None if deferred is None else [deferred]
        else:
            lines = _lines(value, _LINES_AT_A_TIME)
        if lines is not None:
            del fields[name]
            arrays[name] = "lines", sum(map(_size, lines)), lines
    fields["binary"] = [[name, kind, length] for name, (kind, length, _) in arrays.items()]
    text = json.dumps(fields, separators=(",", ":")).encode()
    parts = [b"\0", len(text).to_bytes(4, "little"), text]
    size = 5 + len(text)
    for _, _, pieces in arrays.values():
        pad = -size % 8
        parts.append(b"\0" * pad)
        parts += pieces
        size += pad + sum(map(_size, pieces))
    return parts


def _doubles(values: list | array) -> DeferredBytes | None:
    """A column of 64-bit figures that `_typed` writes as doubles (some beyond 32 bits: a
    large module's FLOPs and bytes) as `DeferredBytes`, made as it is deflated: not held
    beside the payload's other columns. None for any other column."""
    if not isinstance(values, array) or values.typecode not in "qQ" or not values:
        return None
    if -(2**31) <= min(values) and max(values) < 2**31:  # (a narrower kind holds it)
        return None

    def doubles(_: int) -> memoryview:
        return memoryview(_little_endian(array(_FLOAT[1], values))).cast("B")

    return DeferredBytes([8 * len(values)], doubles)


def _typed(values: list | array) -> tuple[str, bytes]:
    """The bytes of the narrowest typed array that holds ``values`` exactly, and its
    page-side name.

    Each kind is tried in turn: a value it cannot hold stops the copy there, and in most
    columns such a value comes first (a parent of -1, the root's total), so this costs
    about one copy, where finding the range first would cost a pass more. Bytes come
    first, by ``bytes`` (a third of the time of an array's copy). An ``array``
    (`_graph_payload.graph_wire` with ``typed``) is copied as it is, not as a list: no int
    object per number.
    """
    if isinstance(values, array):
        found = _narrowed(values)
        if found is not None:
            return found
    try:
        return _TYPES[0][0], bytes(iter(values) if isinstance(values, array) else values)
    except ValueError:  # a value out of a byte's range
        pass
    except TypeError:  # a value that is not whole
        return _FLOAT[0], _little_endian(array(_FLOAT[1], values)).tobytes()
    for name, code in _TYPES[1:]:
        try:
            return name, _little_endian(array(code, values)).tobytes()
        except OverflowError:  # a value out of this kind's range
            continue
        except TypeError:  # a value that is not whole
            break
    return _FLOAT[0], _little_endian(array(_FLOAT[1], values)).tobytes()


def _narrowed(values: array, view: bool = False) -> tuple[str, bytes | memoryview] | None:
    """`_typed` of an array of ints from its bytes alone (None where it cannot tell: a
    negative value in a wider kind than its own, a value beyond 32 bits, a big-endian
    machine): each byte of the kind's width sliced out, and the narrowest kind whose
    higher bytes are all zero, in a few milliseconds where a copy number by number took
    tens (a large module's columns of ids, counts and edges). With ``view``, an array of
    the kind it goes as is given as a view of its bytes, not a copy (`encode_wire`: a
    large module's tree columns and ids, megabytes each, are deflated from where they lie).
    """
    size = values.itemsize
    if values.typecode not in "BHiIlLqQ" or sys.byteorder != "little":
        return None
    raw = memoryview(values).cast("B") if view else values.tobytes()
    if size == 1:
        return (_TYPES[0][0], raw) if values.typecode == "B" else None
    columns = [raw[k::size] for k in range(size)]  # byte k of every value
    zero = bytes(len(values))
    wide = next((k for k in range(size - 1, 0, -1) if columns[k] != zero), 0) + 1
    signed = values.typecode in "hilq"
    if wide <= 2:  # (unsigned: a negative value sets its highest byte)
        kind = 1 if wide == 1 else 2
    elif size == 4 and signed:  # an i32 as it is
        return _TYPES[2][0], raw
    elif wide <= 4 and max(columns[3]) < 0x80:  # fits a signed 32 bits, not negative
        kind = 4
    else:
        return None
    out = bytearray(kind * len(values))
    for k in range(kind):
        out[k::kind] = columns[k]
    return {1: _TYPES[0][0], 2: _TYPES[1][0], 4: _TYPES[2][0]}[kind], out if view else bytes(out)


def _little_endian(values: array) -> array:
    if sys.byteorder == "big":
        values.byteswap()
    return values


def decode_payload(b64: str) -> dict:
    """The wire dict a page's payload holds, its arrays as lists (`encode_payload` undone,
    but for `pack`): what the page reads, for tests and tools."""
    raw = base64.b64decode(b64)
    return read_wire(raw if raw[:1] == b"\0" else zlib.decompress(raw))


def read_wire(raw: bytes) -> dict:
    """`wire_bytes` undone (a payload of JSON alone, as tpukit wrote before, read as JSON)."""
    if raw[:1] != b"\0":
        return json.loads(raw)
    size = int.from_bytes(raw[1:5], "little")
    wire = json.loads(raw[5 : 5 + size])
    at = 5 + size
    for name, kind, length in wire.pop("binary"):
        at += -at % 8
        if kind == "lines":
            wire[name] = raw[at : at + length].decode().split("\n")
            at += length
            continue
        values = array(_CODES[kind])
        values.frombytes(raw[at : at + length * values.itemsize])
        at += length * values.itemsize
        wire[name] = _little_endian(values).tolist()
        if kind == _FLOAT[0]:  # whole numbers as JSON gives them back
            wire[name] = [int(v) if v.is_integer() else v for v in wire[name]]
    return wire
