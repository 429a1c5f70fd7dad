"""What a later ``fit`` call on the same model keeps from the last one: placed data, a shuffle.

A notebook calls ``fit`` again and again on the same NumPy arrays (a few more epochs,
a new learning rate). Putting 188 MB of MNIST on the devices each time costs more
than an epoch of a small model, so the placed copy is kept beside the model (in its
:class:`~tpukit.train.TrainingState`) and a later call given **the same array
objects** trains on it without sending anything.

The guarantee against stale data: a NumPy array can be changed in place
(``x /= 255``, ``rng.shuffle(x)``), so each kept host array has a content
fingerprint (:func:`content_fingerprint`: one pass over its bytes, summing each
example's words, then a CRC of those sums in order). A later call recomputes it on
the host *while the device runs that call's first compiled call* and compares before
applying anything; when an array changed, nothing of the call is kept, the data is
placed again and the call starts over (it says so). The fingerprint finds any
changed value and any reordering of examples; it cannot see two values swapped
inside one example (a sum of words), which in-place edits of real data do not do.
JAX arrays cannot change, so for them the identity is the whole check.

The kept copy lives as long as the model and the arrays it came from (it holds them
weakly); ``TrainingState.of(model).release_data()`` frees its device memory now.

Example::

    >>> import numpy as np
    >>> x = np.arange(12, dtype=np.float32).reshape(4, 3)
    >>> before = content_fingerprint(x)
    >>> x[2, 1] += 1
    >>> content_fingerprint(x) == before
    False
"""

from __future__ import annotations

import time
import weakref
import zlib
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

#: The widest machine word that divides a row's bytes, by the lowest set bit of its width.
_WORDS = (np.uint8, np.uint16, np.uint32)


def content_fingerprint(array: np.ndarray) -> tuple:
    """``(shape, dtype, crc)`` of ``array``'s contents: each example's (row's) bytes
    summed as machine words, then the CRC-32 of those sums in example order, so a
    changed value and a moved example both change it. One pass, at memory speed."""
    a = array if array.flags.c_contiguous else np.ascontiguousarray(array)
    rows = a.reshape(a.shape[0] if a.ndim else 1, -1).view(np.uint8)
    width = rows.shape[1]
    if width == 0:
        return a.shape, a.dtype.str, 0
    word = _WORDS[(width & -width).bit_length() - 1] if width % 8 else np.uint64
    sums = rows.view(word).sum(axis=1, dtype=np.uint64)
    return a.shape, a.dtype.str, zlib.crc32(sums.data)


def _weak(x: Any, lost: Callable[[Any], None]) -> Callable[[], Any] | None:
    try:
        return weakref.ref(x, lost)
    except TypeError:
        return None


class KeptData:
    """One placed data set, kept for later calls given the same arrays.

    ``given`` are the arrays as the user passed them (before any conversion);
    ``source`` is what was built from them (a ``_data.ResidentData``).
    """

    def __init__(
        self,
        form: Any,
        given: list[Any],
        source: Any,
        seconds: float,
        lost: Callable[[Any], None] = lambda _: None,
    ):
        self.name = "data"  # the argument it was given as (``train_data``, ``eval_data``)
        self.form = form  # the data's kind and structure (dict keys), compared by ==
        self.refs = [_weak(x, lost) for x in given]  # ``lost`` runs when one is deleted
        self.source = source
        self.seconds = seconds  # how long placing took
        self.uses = 0  # later calls that reused it
        self._host = [i for i, x in enumerate(given) if not isinstance(x, jax.Array)]
        self._fingerprints: list[tuple] | None = None
        self._pending = False  # a later call holds it, unchecked

    @property
    def keepable(self) -> bool:
        return all(r is not None for r in self.refs)

    def matches(self, form: Any, given: list[Any]) -> bool:
        """Whether ``given`` are the very arrays this copy was placed from (still alive,
        in the same structure ``form``, its device arrays not deleted)."""
        if form != self.form or len(given) != len(self.refs):
            return False
        if any(r() is not x for r, x in zip(self.refs, given, strict=True)):
            return False
        return not any(a.is_deleted() for a in jax.tree.leaves(self.source.arrays))

    def fingerprints(self) -> list[tuple]:
        arrays = [r() for r in self.refs]
        return [content_fingerprint(np.asarray(arrays[i])) for i in self._host]

    def record(self) -> None:
        """Fingerprint the host arrays as they are now (the first call, while it runs)."""
        if self._fingerprints is None and self._host and all(r() is not None for r in self.refs):
            self._fingerprints = self.fingerprints()

    def reuse(self) -> None:
        """A later call takes this copy; :meth:`unchanged` must pass before it applies."""
        self.uses += 1
        self._pending = bool(self._host)

    def unchanged(self) -> bool:
        """Whether the host arrays still hold what was placed (``True`` when nothing is
        pending: a first placement, or JAX arrays only)."""
        if not self._pending:
            self.record()
            return True
        self._pending = False
        if self._fingerprints is None:  # placed, never fingerprinted: cannot vouch for it
            return False
        return self.fingerprints() == self._fingerprints

    def note(self) -> str:
        """What the progress line says about this data."""
        if self.uses:
            return "data kept on device"
        return f"data placed in {_ms(self.seconds)}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f} ms" if seconds >= 0.01 else f"{seconds * 1e3:.1f} ms"


class StaleData(Exception):
    """Raised inside a run, before anything is applied, when kept data changed in place."""

    def __init__(self, names: list[str]):
        super().__init__(", ".join(names))
        self.names = names


class KeptForModel:
    """Everything kept beside one model for its next ``fit``: data by role, the
    next epoch's shuffle, already on the devices, the model's split as the last
    call wrote it (``_kept_split.KeptSplit``) and the last call's set-up
    (``_again.LastSetUp``)."""

    def __init__(self) -> None:
        self.data: dict[str, KeptData] = {}
        self.indices: tuple[tuple, Any] | None = None  # (what they are, the device array)
        self.split: Any = None  # the model as the last call wrote it (``_kept_split``)
        self.last: Any = None  # the last call's set-up, for a call that repeats it

    def find(self, name: str, form: Any, given: list[Any]) -> KeptData | None:
        """The copy kept of ``name`` when ``given`` are its very arrays (in structure
        ``form``), else ``None``; nothing is placed, and the copy is not yet counted
        as reused (:meth:`KeptData.reuse`)."""
        kept = self.data.get(name)
        return kept if kept is not None and kept.matches(form, given) else None

    def resident(self, name: str, form: Any, given: list[Any], build: Callable[[], Any]) -> Any:
        """The source for ``name``'s arrays ``given`` (in structure ``form``): the kept one
        when they are the same objects, else ``build()``, timed and kept. The source's
        ``kept`` is its :class:`KeptData`."""
        kept = self.find(name, form, given)
        if kept is not None:
            kept.reuse()
            return kept.source
        self.data.pop(name, None)  # free the old copy before placing the new one
        start = time.perf_counter()
        source = build()
        jax.block_until_ready(jax.tree.leaves(source.arrays))
        owner = weakref.ref(self)

        def lost(_: Any) -> None:  # the user let go of an array: free the device copy now
            me = owner()
            if me is not None and me.data.get(name) is kept:
                me.forget([name])

        kept = KeptData(form, given, source, time.perf_counter() - start, lost)
        kept.name = name
        source.kept = kept
        if kept.keepable:
            self.data[name] = kept
        return source

    def forget(self, names: list[str] | None = None) -> None:
        """Drop the kept copies of ``names`` (all when ``None``)."""
        for name in list(self.data) if names is None else names:
            self.data.pop(name, None)
        self.last = None  # its set-up held the copies

    def take_indices(self, what: tuple) -> Any:
        """The shuffle kept for ``what`` (settings and epoch), or ``None``."""
        kept, self.indices = self.indices, None
        return kept[1] if kept is not None and kept[0] == what else None
