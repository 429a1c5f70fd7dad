"""The payload's long columns of texts as the wire carries them: UTF-8 lines, run by run.

`_graph_wire.wire_parts` writes a column of texts (HLO text, labels, the interned strings)
as its texts joined by line breaks, in UTF-8, unless a text holds a line break (then the
column goes as JSON). A large module's columns are tens of megabytes: each is made in runs
of `_LINES_AT_A_TIME` texts, never as one string beside its UTF-8. The HLO texts of a
whole graph (`SlicedLines`) are not held at all until they are deflated: each is a cut of
its instruction's line, which the module holds anyway, so the column keeps where each cut
starts and ends and makes its UTF-8 run by run as the compressor reads it (`DeferredBytes`).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tpukit.hlo.text import HloInstruction

#: Texts joined and encoded at a time by `_lines`, `LineColumn` and `SlicedLines`: a
#: column's UTF-8 is made in pieces of about a megabyte, never beside a whole copy of it as
#: one string.
_LINES_AT_A_TIME = 8192


class EncodedLines:
    """A column of texts already as `_graph_wire.wire_parts` writes it (``pieces``:
    `_lines`), for `_graph_wire.encode_wire` alone: a large module's HLO texts held as
    UTF-8 once made, not as a string object each (`LineColumn`, `graph_wire` with
    ``typed``)."""

    __slots__ = ("pieces",)

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces


class DeferredBytes:
    """A column of the wire whose bytes are made only as it is deflated, a run at a time:
    ``sizes``, the bytes of each run, are known beforehand (the wire's header gives the
    column's length); ``make(k)`` makes run ``k``'s bytes (a run of texts of `SlicedLines`
    or `deferred_lines`, or a column of numbers as doubles: `_graph_wire.wire_parts`).

        >>> column = DeferredBytes([3, 2], [b"ab\\n", b"cd"].__getitem__)
        >>> column.size, [bytes(piece) for piece in column.pieces(1, 4)]
        (5, [b'b\\n', b'c'])
    """

    __slots__ = ("sizes", "size", "_make")

    def __init__(self, sizes: list[int], make: Callable[[int], bytes]) -> None:
        self.sizes = sizes
        self.size = sum(sizes)
        self._make = make

    def pieces(self, begin: int = 0, end: int | None = None) -> Iterator[bytes | memoryview]:
        """The column's bytes from ``begin`` to ``end`` (its end when None), a run at a time:
        only the runs that hold some of them are made."""
        end = self.size if end is None else end
        at = 0
        for k, size in enumerate(self.sizes):
            if at >= end:
                break
            if at + size > begin:
                piece = self._make(k)
                if len(piece) != size:  # (the pass that measured it and this one disagree)
                    raise RuntimeError(f"a run of texts is {len(piece)} bytes, not {size}")
                if at < begin or end < at + size:  # (a run the stretch begins or ends in)
                    piece = memoryview(piece)[max(begin - at, 0) : end - at]
                yield piece
            at += size


class LineColumn:
    """A column of ``n`` texts written from its last text to its first (`_graph_payload`
    reads the nodes last to first), each run of `_LINES_AT_A_TIME` texts encoded as
    `_lines` encodes it once every text in it is written (`written_from`): a large module's
    HLO texts are never all held as strings, nor as strings and UTF-8 at once.

        >>> column = LineColumn(3)
        >>> column.texts[2], column.texts[1], column.texts[0] = "c", "b", "a"
        >>> column.column().pieces
        [b'a\\nb\\nc']

    A text that holds a line break sends the column as JSON (`column` gives the texts).
    """

    __slots__ = ("texts", "_pieces", "_encoded")
    #: Texts encoded at a time: `written_from` encodes a run once a multiple of it is written.
    step = _LINES_AT_A_TIME

    def __init__(self, n: int) -> None:
        self.texts: list = [""] * n
        self._pieces: list[bytes] | None = []
        self._encoded = n  # texts[_encoded:] are in _pieces, the last first

    def written_from(self, start: int) -> None:
        """Every text from ``start`` on is written: encodes the runs wholly after it."""
        texts, pieces, end, step = self.texts, self._pieces, self._encoded, self.step
        while pieces is not None and end > start:
            begin = (end - 1) // step * step
            if begin < start:
                break
            piece = _piece(texts[begin:end], end < len(texts))
            if piece is None:  # a line break: the texts go as JSON
                texts[end:] = b"".join(reversed(pieces)).decode().split("\n") if pieces else []
                self._pieces = pieces = None
                break
            pieces.append(piece)
            texts[begin:end] = [None] * (end - begin)
            self._encoded = end = begin

    def column(self) -> list | EncodedLines:
        """The whole column, for `wire_parts`: `EncodedLines`, or the texts as they are."""
        self.written_from(0)
        if self._pieces is None:
            return self.texts
        return EncodedLines(self._pieces[::-1])


class SlicedLines:
    """The HLO texts of every node of a graph, each kept as where it lies in its
    instruction's line (`HloInstruction.text`, which the module holds anyway), not as a
    string: ``cut(node, start, end)`` (``end`` at most ``limit``, when given: then two
    bytes a place where that fits). A text that is not such a cut of an ASCII line without
    line breaks is kept as it is, in ``texts`` (a dict by node). `column` gives a
    `DeferredBytes` that makes the UTF-8 of each run of texts as it is deflated: a large
    module's 20 MB of texts are never held (as `LineColumn` holds them, encoded).

        >>> from tpukit.hlo import parse_hlo
        >>> text = "HloModule m\\nENTRY e {\\n  ROOT x = f32[] parameter(0)\\n}"
        >>> line = parse_hlo(text).entry.instructions[0]
        >>> column = SlicedLines([line, None, line])
        >>> column.cut(0, 15, 27)
        >>> column.texts[2] = "é"
        >>> b"".join(column.column().pieces())
        b'parameter(0)\\n\\n\\xc3\\xa9'
    """

    __slots__ = ("texts", "_instrs", "_starts", "_ends", "_kept")
    #: Texts encoded at a time (`DeferredBytes` makes a run at a time).
    step = _LINES_AT_A_TIME

    def __init__(self, instrs: Sequence[HloInstruction | None], limit: int | None = None) -> None:
        n = len(instrs)
        self._instrs = instrs
        self.texts: dict[int, str] = {}
        code = "H" if limit is not None and limit < 1 << 16 else "i"
        self._starts, self._ends = array(code, [0]) * n, array(code, [0]) * n
        self._kept: dict[int, list[int]] = {}  # by run, the nodes whose text is in texts

    def cut(self, node: int, start: int, end: int) -> None:
        """``node``'s text is ``instrs[node].text[start:end]`` (an ASCII line, no line break)."""
        self._starts[node], self._ends[node] = start, end

    def column(self) -> list[str] | DeferredBytes:
        """The whole column: `DeferredBytes`, or where a text holds a line break (or has no
        UTF-8) the texts as strings (the column goes as JSON)."""
        n, step = len(self._instrs), self.step
        kept, owned = self._kept, {}  # owned: each run's bytes of texts kept as they are
        for node, text in sorted(self.texts.items()):
            try:
                size = len(text.encode())
            except UnicodeEncodeError:  # (a lone surrogate)
                size = -1
            if size < 0 or "\n" in text:
                kept.clear()
                kept[0] = sorted(self.texts)
                return self._texts(0, n)
            kept.setdefault(node // step, []).append(node)
            owned[node // step] = owned.get(node // step, 0) + size
        sizes = []
        for begin in range(0, n, step):
            end = min(begin + step, n)
            cut = sum(self._ends[begin:end]) - sum(self._starts[begin:end])
            # (each text but the last of all ends in a line break)
            sizes.append(cut + owned.get(begin // step, 0) + end - begin - (end == n))
        return DeferredBytes(sizes, lambda k: self._run(k * step, min(k * step + step, n)))

    def _texts(self, begin: int, end: int) -> list[str]:
        """The texts of nodes ``begin`` to ``end`` (a run, or all of them)."""
        instrs, starts, ends = self._instrs, self._starts, self._ends
        # Cut from where `HloInstruction.text` is read (its line is ``_text[_at:]`` when
        # ``_at`` is set): the line itself is not made again, only the cut.
        found = [
            ""
            if instr is None
            else instr._text[start:stop]
            if instr._at < 0
            else instr._text[instr._at + start : instr._at + stop]
            for instr, start, stop in zip(instrs[begin:end], starts[begin:end], ends[begin:end])
        ]
        for node in self._kept.get(begin // self.step, ()):
            found[node - begin] = self.texts[node]
        return found

    def _run(self, begin: int, end: int) -> bytes:
        joined = "\n".join(self._texts(begin, end))
        return (joined + "\n" if end < len(self._instrs) else joined).encode()


def deferred_lines(values: object, step: int = _LINES_AT_A_TIME) -> DeferredBytes | None:
    """`_lines` of ``values`` as `DeferredBytes`: each run's size found now (its texts
    joined, not encoded where they are ASCII), its UTF-8 made as it is deflated, so that a
    large module's labels and strings are not held twice, as texts and as UTF-8."""
    if not isinstance(values, list) or not values:
        return None
    n, sizes = len(values), []
    for start in range(0, n, step):
        chunk = values[start : start + step]
        try:
            joined = "\n".join(chunk)
            size = len(joined) if joined.isascii() else len(joined.encode())
        except (TypeError, UnicodeEncodeError):  # not all texts, or a lone surrogate
            return None
        if joined.count("\n") != len(chunk) - 1:
            return None
        sizes.append(size + (start + step < n))
    return DeferredBytes(
        sizes, lambda k: _piece(values[k * step : k * step + step], k * step + step < n)
    )


def _lines(values: object, step: int = _LINES_AT_A_TIME) -> list[bytes] | None:
    """A column of texts as UTF-8 lines, in pieces of ``step`` texts that join into them
    (None when a text holds a line break, or for anything else: it goes as JSON)."""
    if not isinstance(values, list) or not values:
        return None
    pieces = []
    for start in range(0, len(values), step):
        piece = _piece(values[start : start + step], start + step < len(values))
        if piece is None:
            return None
        pieces.append(piece)
    return pieces


def _piece(chunk: list, more: bool) -> bytes | None:
    """``chunk``'s texts as UTF-8 lines (ending in a line break if ``more`` follow), or None."""
    try:
        joined = "\n".join(chunk)
        if joined.count("\n") != len(chunk) - 1:
            return None
        return (joined + "\n" if more else joined).encode()
    except (TypeError, UnicodeEncodeError):  # not all texts, or a lone surrogate
        return None
