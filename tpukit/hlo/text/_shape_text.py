"""HLO shapes as text: ``f32[8,128]{1,0}``, ``(s32[], bf16[<=4])``, ``token[]``.

One job: read a shape's text into an `HloShape`, once per distinct text (a module
repeats its shapes). The parser's readers (`_fast_rows`, `_instruction_line`) call it;
nothing here knows about lines or instructions.

    >>> parse_shape("bf16[<=4,?]").dynamic
    (True, True)

Imports: this package's model and ``tpukit._errors``.
"""

from __future__ import annotations

import functools
import re

from tpukit._errors import HloTextError
from tpukit.hlo.text._model import HloShape

_COMMENT = re.compile(r"/\*.*?\*/")
_ARRAY_SHAPE = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\](?:\{([^}]*)\})?")
#: Tuple shapes nest at most this deep (XLA's own programs stay within a few levels).
MAX_TUPLE_DEPTH = 64


@functools.lru_cache(maxsize=4096)
def parse_shape(text: str) -> HloShape:
    """Parse one HLO shape: ``f32[8,128]{1,0}``, ``(s32[], bf16[<=4])``, ``token[]``.

    Text that is not a shape gives ``HloShape("unknown")`` rather than an error.

        >>> parse_shape("(f32[2,3]{1,0}, pred[])").elements[0].dims
        (2, 3)
    """
    text = _COMMENT.sub("", text) if "/*" in text else text
    shape, _ = _shape_at(text.strip(), 0)
    return shape


def _shape_at(text: str, pos: int, depth: int = 0) -> tuple[HloShape, int]:
    while pos < len(text) and text[pos] in " ,":
        pos += 1
    if pos < len(text) and text[pos] == "(":
        if depth >= MAX_TUPLE_DEPTH:
            raise HloTextError(
                f"A tuple shape nests more than {MAX_TUPLE_DEPTH} levels deep "
                f"({text[:40]!r}...); no XLA program does that. Check that this is the HLO "
                "text XLA wrote (compiled.as_text() or a --xla_dump_to file)."
            )
        pos += 1
        elements = []
        while pos < len(text):
            while pos < len(text) and text[pos] in " ,":
                pos += 1
            if pos >= len(text) or text[pos] == ")":
                pos += 1
                break
            # An array element as `parse_shape` reads it alone: once per text (the tuples
            # of a step repeat their elements; its ROOT tuple holds hundreds).
            array = _ARRAY_SHAPE.match(text, pos)
            if array is not None:
                elements.append(parse_shape(array.group()))
                pos = array.end()
                continue
            element, new_pos = _shape_at(text, pos, depth + 1)
            if new_pos == pos:
                break
            elements.append(element)
            pos = new_pos
        return HloShape("tuple", elements=tuple(elements)), pos
    match = _ARRAY_SHAPE.match(text, pos)
    if not match:
        return HloShape("unknown"), pos
    dtype, dims_text, layout = match.groups()
    dims: list[int] = []
    dynamic: list[bool] = []
    for dim in dims_text.split(",") if dims_text else ():
        dim = dim.strip()
        bounded = dim.startswith("<=")
        dim = dim[2:] if bounded else dim
        dims.append(int(dim) if dim.isdigit() else -1)
        dynamic.append(bounded or dim == "?")
    return (
        HloShape(dtype, tuple(dims), layout=layout, dynamic=tuple(dynamic) if any(dynamic) else ()),
        match.end(),
    )
