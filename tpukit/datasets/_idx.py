"""Read and write the IDX format that the MNIST files use.

An IDX file is a tiny header followed by the raw array in big-endian order:

* two zero bytes;
* one byte naming the element type (``0x08`` unsigned byte, ``0x09`` signed byte,
  ``0x0B`` int16, ``0x0C`` int32, ``0x0D`` float32, ``0x0E`` float64);
* one byte giving the number of dimensions;
* one big-endian uint32 per dimension;
* the data, C order.

So ``train-images-idx3-ubyte`` starts ``00 00 08 03`` then 60000, 28, 28.

Example::

    >>> import numpy as np
    >>> data = write_idx(np.arange(6, dtype=np.uint8).reshape(2, 3))
    >>> data[:4].hex()
    '00000802'
    >>> read_idx(data).tolist()
    [[0, 1, 2], [3, 4, 5]]
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

import numpy as np

from tpukit._errors import IDXFormatError, WrongTypeError

_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype("u1"),
    0x09: np.dtype("i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_GZIP_MAGIC = b"\x1f\x8b"


def read_idx(source: bytes | str | os.PathLike[str]) -> np.ndarray:
    """Parse an IDX file, gzipped or not, into a NumPy array in native byte order.

    Args:
        source: the file's bytes, or a path to it. Gzip compression is detected from
            the content, so ``train-images-idx3-ubyte`` and ``...-ubyte.gz`` both work.

    Returns:
        The array, with the shape written in the header.

    Raises:
        IDXFormatError: the data is not IDX, is cut short, or is corrupt gzip.

    Example::

        >>> read_idx(write_idx(np.array([7, 2, 1], dtype=np.uint8)))
        array([7, 2, 1], dtype=uint8)
    """
    name = "the data" if isinstance(source, bytes) else f"'{source}'"
    data = source if isinstance(source, bytes) else Path(source).read_bytes()
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise IDXFormatError(
                f"{name} looks gzipped but does not decompress ({exc}). The file is probably "
                "a partial download: delete it and download it again."
            ) from exc
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _DTYPES:
        raise IDXFormatError(
            f"{name} is not an IDX file: expected a header starting 00 00 <type> <ndim> with "
            f"type one of {', '.join(f'{t:#04x}' for t in _DTYPES)}, "
            f"received {data[:4].hex(' ') or 'an empty file'}. "
            "Pass an MNIST IDX file such as train-images-idx3-ubyte.gz."
        )
    dtype, ndim = _DTYPES[data[2]], data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise IDXFormatError(f"{name} is cut short: its header names {ndim} dimensions.")
    shape = tuple(int(n) for n in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) != expected:
        raise IDXFormatError(
            f"{name} has {len(data)} bytes but its header (shape {shape}, {dtype.name}) "
            f"needs {expected}. The file is truncated or corrupt: download it again."
        )
    array = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="))


def write_idx(array: np.ndarray) -> bytes:
    """Encode an array as IDX bytes (uncompressed); the inverse of :func:`read_idx`.

    Example::

        >>> len(write_idx(np.zeros((2, 28, 28), dtype=np.uint8)))
        1584
    """
    array = np.asarray(array)
    codes = {dtype.newbyteorder("="): code for code, dtype in _DTYPES.items()}
    code = codes.get(array.dtype.newbyteorder("="))
    if code is None:
        raise WrongTypeError(
            f"write_idx expected an array of uint8, int8, int16, int32, float32 or float64, "
            f"received {array.dtype}. Convert it first, e.g. array.astype(np.uint8)."
        )
    header = bytes([0, 0, code, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
    return header + np.ascontiguousarray(array, dtype=_DTYPES[code]).tobytes()
