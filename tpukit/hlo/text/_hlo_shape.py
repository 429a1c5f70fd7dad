"""The shape of an HLO value (``HloShape``) and how many bits its elements take.

Shapes are the model's smallest part: every instruction has one, and costs and memory
views read their bytes. ``parse_shape`` (``_shape_text``) reads them from text.

    >>> shape = HloShape("f32", (128, 784), layout="1,0")
    >>> shape.nbytes, element_bits("bf16"), element_bits("f8e4m3fn")
    (401408, 16, 8)
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from tpukit._errors import HloTextError

#: Bits per element of each HLO element type. ``token`` and ``opaque`` carry no data.
DTYPE_BITS: dict[str, int] = {
    "pred": 8,
    "s2": 2, "u2": 2, "s4": 4, "u4": 4, "s8": 8, "u8": 8,
    "s16": 16, "u16": 16, "s32": 32, "u32": 32, "s64": 64, "u64": 64,
    "f16": 16, "bf16": 16, "f32": 32, "f64": 64,
    "f4e2m1fn": 4, "f8e8m0fnu": 8,
    "f8e3m4": 8, "f8e4m3": 8, "f8e4m3fn": 8, "f8e4m3fnuz": 8, "f8e4m3b11fnuz": 8,
    "f8e5m2": 8, "f8e5m2fnuz": 8,
    "c64": 64, "c128": 128,
    "token": 0, "opaque": 0,
}  # fmt: skip

_MEMORY_SPACE = re.compile(r"S\((\d+)\)")
#: The dtype the parser gives a shape it could not read; such lines degrade to raw text.
UNREADABLE = "unknown"
_LEADING_BITS = re.compile(r"[a-z]+?(\d+)")


def element_bits(dtype: str) -> int:
    """Bits of one element of an HLO element type. A type newer than this table
    (``f8e8m0fnu``) is as wide as the number its name starts with (8); a name without
    one is refused rather than counted as 0 bytes.

        >>> element_bits("bf16"), element_bits("f6e3m2fn")
        (16, 6)
    """
    bits = DTYPE_BITS.get(dtype)
    if bits is not None:
        return bits
    if dtype == UNREADABLE:  # the parser's mark for a shape it could not read (odd lines)
        return 0
    found = _LEADING_BITS.match(dtype)
    if found is None:
        raise HloTextError(
            f"Unknown HLO element type {dtype!r}: tpukit cannot tell how many bytes it holds. "
            f"Known types: {', '.join(t for t in DTYPE_BITS if DTYPE_BITS[t])}."
        )
    return int(found.group(1))


@dataclass(frozen=True)
class HloShape:
    """The shape of an HLO value: an array (``f32[128,784]{1,0}``) or a tuple.

    ``dims`` holds the sizes; a dynamic dimension (``<=16``) holds its bound and
    is marked in ``dynamic``; an unbounded one (``?``) holds -1. A tuple has
    ``dtype == "tuple"`` and its element shapes in ``elements``.

        >>> shape = HloShape("bf16", (8, 128), layout="1,0")
        >>> str(shape), shape.num_elements, shape.nbytes
        ('bf16[8,128]{1,0}', 1024, 2048)
    """

    dtype: str
    dims: tuple[int, ...] = ()
    elements: tuple[HloShape, ...] = ()
    layout: str | None = None
    dynamic: tuple[bool, ...] = ()

    @property
    def is_tuple(self) -> bool:
        return self.dtype == "tuple"

    @property
    def rank(self) -> int:
        return len(self.dims)

    @cached_property  # asked for often (bytes of every operand): a shape never changes
    def num_elements(self) -> int:
        """Elements of an array (1 for a scalar, 0 for a token); summed over a tuple's leaves."""
        if self.is_tuple:
            return sum(e.num_elements for e in self.elements)
        if self.dtype in ("token", "opaque"):
            return 0
        return math.prod(max(d, 0) for d in self.dims)

    @cached_property
    def nbytes(self) -> int:
        """Bytes of the data (sub-byte types packed, dynamic dims at their bound)."""
        if self.is_tuple:
            return sum(e.nbytes for e in self.elements)
        return (self.num_elements * element_bits(self.dtype) + 7) // 8

    @property
    def memory_space(self) -> int:
        """The layout's memory space, ``S(1)`` in ``{1,0:S(1)}``; 0 when not given."""
        found = _MEMORY_SPACE.search(self.layout or "")
        return int(found.group(1)) if found else 0

    def leaves(self) -> Iterator[HloShape]:
        """The array shapes inside this shape, depth first (itself if an array)."""
        if self.is_tuple:
            for element in self.elements:
                yield from element.leaves()
        else:
            yield self

    def __repr__(self) -> str:
        return f"HloShape({self})"

    def __str__(self) -> str:
        return self._text

    @cached_property  # parsed shapes are shared, and a graph prints each instruction's
    def _text(self) -> str:
        if self.is_tuple:
            return "(" + ", ".join(str(e) for e in self.elements) + ")"
        dims = ",".join(
            "?" if d < 0 else (f"<={d}" if self.dynamic and self.dynamic[i] else str(d))
            for i, d in enumerate(self.dims)
        )
        layout = "" if self.layout is None else "{" + self.layout + "}"
        return f"{self.dtype}[{dims}]{layout}"
