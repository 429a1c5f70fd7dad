"""Find the brackets and top-level commas of HLO text, strings and comments skipped.

HLO attributes nest (``replica_groups={{0,1},{2,3}}``, ``backend_config={"a":[1,2]}``,
``metadata={op_name="f(x)/dot"}``) and strings and ``/* comments */`` may hold any
bracket or comma, so the parser splits and matches brackets with these helpers.
`split_top` does most of its work inside one regex (bracket groups nested up to
`_NESTING` deep), and counts tokens one at a time only for deeper or unbalanced text.

    >>> split_top('x={1,2}, y="a, b"')
    ['x={1,2}', ' y="a, b"']
    >>> open_brackets("f(a, {b"), close_bracket("(a, (b)) c", 0)
    (2, 8)
"""

from __future__ import annotations

import functools
import re

# (Possessive: its alternatives start with different characters, so it matches what the
# plain pattern matches, ten times quicker on a line's metadata.)
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"')
# Brackets, commas, strings and comments: the only tokens that matter for nesting.
_TOKEN = re.compile(r'"(?:[^"\\]++|\\.)*+"|/\*.*?\*/|[()\[\]{},]')
# `split_top` in one regex match per piece: a piece is a run of plain characters,
# strings, comments and bracket groups (nested up to `_NESTING` deep), each alternative
# told apart by its first character so nothing backtracks; deeper or unbalanced text
# falls back to counting tokens (`_split_tokens`).
_ATOM = r'/(?!\*)|"(?:[^"\\]++|\\.)*+"|/\*.*?\*/'
_NESTING = 6
_GROUP = rf'[(\[{{](?:[^()\[\]{{}}"/]++|{_ATOM})*+[)\]}}]'
for _ in range(_NESTING - 1):
    _GROUP = rf'[(\[{{](?:[^()\[\]{{}}"/]++|{_ATOM}|{_GROUP})*+[)\]}}]'
_PIECE = re.compile(rf'(?:[^()\[\]{{}},"/]++|{_ATOM}|{_GROUP})*+')


def open_brackets(text: str) -> int:
    """How many brackets ``text`` leaves open (strings ignored)."""
    if "\\" in text:  # (escapes: only `_STRING` tells where the strings end)
        return _open_brackets(text)
    # Its brackets and quotes alone, in order (UTF-8 writes no other character with their
    # bytes): a few dozen such skeletons make a module's lines, each counted once.
    return _skeleton_brackets(text.encode("utf-8", "surrogatepass").translate(None, _OTHER))


# Every byte but those of brackets and quotes.
_OTHER = bytes(byte for byte in range(256) if chr(byte) not in '()[]{}"')


@functools.lru_cache(maxsize=4096)
def _skeleton_brackets(skeleton: bytes) -> int:
    return _open_brackets(skeleton.decode())


def _open_brackets(text: str) -> int:
    """`open_brackets`, by counting."""
    if '"' in text:
        if "\\" not in text and not text.count('"') % 2:  # the strings lie between quote pairs
            text = "".join(text.split('"')[::2])  # (5x quicker than the regex)
        else:
            text = _STRING.sub("", text)
    return (
        text.count("(") - text.count(")")
        + text.count("{") - text.count("}")
        + text.count("[") - text.count("]")
    )  # fmt: skip


def close_bracket(text: str, start: int) -> int:
    """Index just past the bracket that closes the one at ``text[start]``."""
    depth = 0
    for match in _TOKEN.finditer(text, start):
        char = match.group()[0]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return match.end()
    return len(text)


def split_top(text: str) -> list[str]:
    """Split at the commas that are outside brackets and strings."""
    if '"' not in text and "(" not in text and "{" not in text and "[" not in text:
        return text.split(",")
    parts = []
    pos, end = 0, len(text)
    while True:
        piece = _PIECE.match(text, pos)
        stop = piece.end()
        parts.append(piece.group())
        if stop == end:
            return parts
        if text[stop] != ",":  # deeper than _NESTING, or unbalanced: count the tokens
            return _split_tokens(text)
        pos = stop + 1


def _split_tokens(text: str) -> list[str]:
    """`split_top` one token at a time: any nesting, and unbalanced text too."""
    parts = []
    depth = 0
    begin = 0
    for match in _TOKEN.finditer(text):
        char = match.group()[0]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth <= 0:
            parts.append(text[begin : match.start()])
            begin = match.end()
    parts.append(text[begin:])
    return parts
