"""A compiled call's figures in one array: one read back per call, not one per figure.

A ``fit`` call hands the host a few scalars (each figure's sum, ``steps``,
``bad_step``, ``end_finite``; the diagnosis run's ``finite`` flags too). Read one by one,
each is a device buffer to fetch and free; packed, the call returns one ``int32``
vector and the host reads it once. The step packs them while tracing (:func:`pack`):
32-bit values are bitcast into the vector, so ints and floats (NaN included) come back
bit for bit, booleans go in as 0 or 1; anything else (a 64-bit figure) stays apart, as
it came. The :class:`Layout` says where each figure lies; it is fixed by the traced
program, so it is recorded once per program while tracing. On the host one
``struct.unpack_from`` reads the scalars (a µs; NumPy's scalars a few µs each).

Example::

    >>> import jax.numpy as jnp
    >>> packed, apart, layout = pack({"loss": jnp.float32(0.5), "bad_step": jnp.int32(-1)})
    >>> Figures(packed, apart, layout).on_host()
    {'bad_step': -1, 'loss': 0.5}
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class Entry(NamedTuple):
    """Where one figure lies in the packed vector, and what it was."""

    name: str
    start: int
    stop: int
    dtype: np.dtype
    shape: tuple[int, ...]


#: How ``struct`` reads a packed scalar of each dtype (a bool: the low byte of its word).
_CODES = {
    np.dtype(np.float32): "f",
    np.dtype(np.int32): "i",
    np.dtype(np.uint32): "I",
    np.dtype(np.bool_): "3x?" if sys.byteorder == "big" else "?3x",
}


@dataclass(frozen=True)
class Layout:
    """The packed figures' places (``entries``) and the figures' order (``names``);
    ``scalars`` reads the packed scalars named ``scalar_names`` in one go."""

    entries: tuple[Entry, ...]
    names: tuple[str, ...]
    scalar_names: tuple[str, ...] = field(init=False, compare=False, repr=False)
    scalars: struct.Struct = field(init=False, compare=False, repr=False)
    whole: bool = field(init=False, compare=False, repr=False)  # all are packed scalars

    def __post_init__(self) -> None:
        codes, names = ["="], []
        for e in self.entries:
            code = _CODES.get(e.dtype) if e.shape == () else None
            codes.append(code or f"{4 * (e.stop - e.start)}x")
            names += [e.name] if code else []
        object.__setattr__(self, "scalar_names", tuple(names))
        object.__setattr__(self, "scalars", struct.Struct("".join(codes)))
        object.__setattr__(self, "whole", tuple(names) == self.names)


def pack(stats: dict) -> tuple[jax.Array, dict, Layout]:
    """``(packed, apart, layout)`` of a dict of arrays (traced or not): the 32-bit and
    boolean ones in one ``int32`` vector, the others in ``apart`` as they are. Read
    back, the dict's keys come in sorted order, as a dict returned by ``jax.jit`` has them."""
    words, entries, apart, start = [], [], {}, 0
    for name, value in sorted(stats.items()):
        value = jnp.asarray(value)
        if value.dtype == jnp.bool_:
            word = value.astype(jnp.int32)
        elif value.dtype.itemsize == 4:
            word = jax.lax.bitcast_convert_type(value, jnp.int32)
        else:
            apart[name] = value
            continue
        words.append(word.reshape(-1))
        entries.append(Entry(name, start, start + value.size, np.dtype(value.dtype), value.shape))
        start += value.size
    packed = jnp.concatenate(words) if words else jnp.zeros((0,), jnp.int32)
    return packed, apart, Layout(tuple(entries), tuple(sorted(stats)))


class Figures:
    """A call's figures on the device: the packed vector, the figures kept apart, and
    their layout; :meth:`on_host` reads them back as the dict the step made."""

    __slots__ = ("packed", "apart", "layout")

    def __init__(self, packed: jax.Array, apart: dict, layout: Layout) -> None:
        self.packed = packed
        self.apart = apart
        self.layout = layout

    def on_host(self) -> dict[str, Any]:
        """``{name: value}``: each scalar as a Python number (exact: a float32 is a
        double exactly, an int32 an int), anything else as a NumPy array of the dtype
        and shape the step made."""
        layout, words = self.layout, np.asarray(self.packed)
        found = dict(zip(layout.scalar_names, layout.scalars.unpack_from(words), strict=True))
        if layout.whole:
            return found
        for name, start, stop, dtype, shape in layout.entries:
            if name not in found:
                word = words[start:stop]
                found[name] = (word != 0 if dtype == np.bool_ else word.view(dtype)).reshape(shape)
        for name, value in self.apart.items():
            found[name] = np.asarray(value)
        return {name: found[name] for name in layout.names}

    def on_device(self) -> dict[str, jax.Array]:
        """The same dict as JAX arrays (``tpukit.Compiled``'s calls of fit's step)."""
        found: dict[str, Any] = dict(self.apart)
        for name, start, stop, dtype, shape in self.layout.entries:
            word = self.packed[start:stop]
            value = word != 0 if dtype == np.bool_ else jax.lax.bitcast_convert_type(word, dtype)
            found[name] = value.reshape(shape)
        return {name: found[name] for name in self.layout.names}
