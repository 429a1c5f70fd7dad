"""The content fingerprint of a host array: how a kept copy of it knows it changed in place.

``fit`` keeps the device copy of the NumPy arrays it was given (``_data.KeptData``) and a
later call given the same array objects trains on it, after checking, while its first
compiled call runs, that every array still holds what was placed. A NumPy array can be
changed in place (``x /= 255``, ``rng.shuffle(x)``, one value), so the check reads all of
its bytes, once per call: on a CPU that read competes with the device's own threads,
and its cost is the memory's speed (some 10 GB/s once the device's work has emptied the
caches), so the fingerprint does nothing per byte that memory does not already pay for.

Two ways, by the array's shape:

- an array of at most :data:`WHOLE_BYTES`, or whose examples (first-axis rows) are a
  machine word or narrower (labels): the CRC-32 of its bytes. Any changed byte and any
  moved value changes it. (Summing such rows would only widen every value to 64 bits,
  twice the bytes for the CRC, as MNIST's 60,000 labels cost before: 376 -> 100 µs.)
- a larger array of wider examples (images): each example's bytes summed as machine
  words (``np.add.reduce`` along the row, at memory speed; the CRC reads bytes at a
  third of it), then the CRC-32 of those sums in example order. A changed value and a
  moved example change it; two values swapped, or changed by amounts that cancel,
  inside one example do not, which in-place edits of real data do not do.

Example::

    >>> x = np.arange(12, dtype=np.float32).reshape(4, 3)
    >>> before = content_fingerprint(x)
    >>> x[2, 1] += 1
    >>> content_fingerprint(x) == before
    False
"""

from __future__ import annotations

import zlib

import numpy as np

#: Arrays of at most this many bytes are fingerprinted whole, by the CRC of their bytes
#: (a few µs): exact to the byte's place, cheaper than the sums' extra work below it.
WHOLE_BYTES = 64 * 1024

#: The widest machine word that divides a row's bytes, by the lowest set bit of its width.
_WORDS = (np.uint8, np.uint16, np.uint32)
_add = np.add.reduce


def content_fingerprint(array: np.ndarray) -> tuple:
    """``(shape, dtype, crc)`` of ``array``'s contents (see the module): the CRC-32 of
    its bytes, or, for a large array of wide examples, of each example's word sum."""
    a = array if array.flags.c_contiguous else np.ascontiguousarray(array)
    size = a.nbytes
    rows = a.shape[0] if a.ndim else 1
    if size <= WHOLE_BYTES or size <= 8 * rows:
        return a.shape, a.dtype.str, zlib.crc32(a.reshape(-1).view(np.uint8))
    width = size // rows
    word = _WORDS[(width & -width).bit_length() - 1] if width % 8 else np.uint64
    sums = _add(a.reshape(rows, -1).view(np.uint8).view(word), axis=1, dtype=np.uint64)
    return a.shape, a.dtype.str, zlib.crc32(sums)
