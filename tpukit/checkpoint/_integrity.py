"""Is a checkpoint what was written? Array checksums, file digests, and finiteness.

Orbax checks neither the bytes it reads back nor the values (its own CRC covers
only a shard's index), so a checkpoint whose data bytes were flipped restores
without complaint. Two records close that gap:

- :func:`array_summary` gives each array a 32-bit checksum and a finite flag,
  computed on the devices in one compiled call (no copy to the host, and the same
  for any sharding: the checksum is a position-weighted sum of the array's bits in
  wrapping integer arithmetic, so any one changed element changes it). The saved
  record holds the checksums; a restore must reproduce them and be finite.
- :func:`write_file_digests` writes the SHA-256 of every file of a finished
  checkpoint next to it, and :func:`check_file_digests` compares them before
  anything is read, so a damaged file is reported before orbax opens it (which on
  a bad file leaves background reads that print "Event loop is closed" tracebacks).

Example::

    >>> import jax.numpy as jnp
    >>> sums, finite = array_summary([jnp.arange(4.0), jnp.array([1.0, jnp.nan])])
    >>> finite
    [True, False]
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

DIGESTS = "tpukit_files.json"
_CHUNK = 1 << 22


def _bits(x: jax.Array) -> jax.Array:
    """The array's bits as ``uint32`` values (wider types give several per element)."""
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        x = jnp.stack([x.real, x.imag])
    if x.dtype == jnp.bool_:
        return x.astype(jnp.uint32).ravel()
    width = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint32}[x.dtype.itemsize]
    return jax.lax.bitcast_convert_type(x, width).astype(jnp.uint32).ravel()


def _checksum(x: jax.Array) -> jax.Array:
    bits = _bits(x)
    weights = jnp.arange(bits.size, dtype=jnp.uint32) * jnp.uint32(0x9E3779B1) | jnp.uint32(1)
    return jnp.sum(bits * weights, dtype=jnp.uint32)


def _finite(x: jax.Array) -> jax.Array:
    if jnp.issubdtype(x.dtype, jnp.inexact):
        return jnp.all(jnp.isfinite(x))
    return jnp.bool_(True)


@jax.jit
def _summaries(leaves: list[jax.Array]) -> tuple[jax.Array, jax.Array]:
    if not leaves:
        return jnp.zeros((0,), jnp.uint32), jnp.zeros((0,), jnp.bool_)
    return jnp.stack([_checksum(x) for x in leaves]), jnp.stack([_finite(x) for x in leaves])


def array_summary(leaves: list[Any]) -> tuple[list[int], list[bool]]:
    """``(checksums, finite)``: one 32-bit checksum and one finite flag per array."""
    sums, finite = jax.device_get(_summaries([jnp.asarray(x) for x in leaves]))
    return [int(s) for s in np.asarray(sums)], [bool(f) for f in np.asarray(finite)]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != DIGESTS)


def write_file_digests(folder: Path) -> None:
    """Record the size and SHA-256 of every file under a finished checkpoint ``folder``."""
    digests = {str(p.relative_to(folder)): [p.stat().st_size, _sha256(p)] for p in _files(folder)}
    tmp = folder / f".{DIGESTS}.tmp"
    tmp.write_text(json.dumps(digests))
    os.replace(tmp, folder / DIGESTS)


def check_file_digests(folder: Path) -> str | None:
    """What is wrong with the files of ``folder``, or ``None`` (also when nothing was recorded)."""
    try:
        recorded = json.loads((folder / DIGESTS).read_text())
    except FileNotFoundError:
        return None  # written before digests, or stopped between the save and its digests
    except (OSError, ValueError) as error:
        return f"its file list {DIGESTS} is unreadable ({type(error).__name__})"
    for name, (size, digest) in recorded.items():
        path = folder / name
        if not path.is_file():
            return f"the file {name} is missing"
        try:
            if path.stat().st_size != size:
                return f"the file {name} has {path.stat().st_size} bytes, {size} were written"
            if _sha256(path) != digest:
                return f"the file {name} differs from what was written"
        except OSError as error:  # no read permission, an I/O error: it cannot be restored
            return f"the file {name} cannot be read ({type(error).__name__}: {error.strerror})"
    return None
