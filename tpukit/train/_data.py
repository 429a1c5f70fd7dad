"""Training data: device-resident arrays, shuffled each epoch, or streamed batches.

Two sources feed the training loop, and both hand it *chunks* of
``steps_per_execution`` batches:

- :class:`ResidentData`: in-memory arrays (NumPy or JAX), an ``(inputs, labels)``
  tuple or a dict. They are put on the device once, split along the example axis
  over all local devices. Each epoch is shuffled from ``(seed, epoch)``: the host
  draws a permutation of the example indices (NumPy; a few hundred kilobytes, sent
  once per block of epochs, ``_setup.shuffle_block``; much cheaper than a sort-based
  shuffle on a CPU device), and the compiled step gathers its batch from the resident
  arrays, so no example crosses the host link after the first transfer.
  **The remainder is dropped in training**: an epoch is ``len(data) // batch_size``
  steps, and because every epoch is shuffled, a different handful of examples is
  left out each time. :func:`tpukit.evaluate` instead covers every example once.
- :class:`StreamedData`: an iterable of batches (each an ``(inputs, labels)`` tuple
  or a dict of equal-sized arrays) for data that does not fit in device memory.
  Batches are stacked into chunks on the host and the next chunk is transferred
  while the current one runs. Batches are used in the order given; a final batch
  of a different size is dropped (with a warning).

A notebook calls ``fit`` again and again on the same NumPy arrays (a few more epochs,
a new learning rate). Putting 188 MB of MNIST on the devices each time costs more
than an epoch of a small model, so a placed copy is kept beside the model
(:class:`KeptData`, in its ``_kept.KeptForModel``) and a later call given **the same
array objects** trains on it without sending anything (:func:`resident`). The
guarantee against stale data: a NumPy array can be changed in place (``x /= 255``,
``rng.shuffle(x)``), so each kept host array has a content fingerprint
(``_content.content_fingerprint``: one pass over its bytes, the CRC of a small array's
bytes or of a large one's per-example word sums). A later call recomputes it on the
host *while the device runs that call's first compiled call* and compares before
applying anything; when an array changed, nothing of the call is kept, the data is
placed again and the call starts over (it says so). The fingerprint finds any changed
value and any reordering of examples; in a large array of wide examples it cannot see
two values swapped inside one example (a sum of words), which in-place edits of real
data do not do. JAX arrays cannot change, so for them the identity is the whole check.
The kept copy lives as long as the model and the arrays it came from (it holds them
weakly).

Example::

    >>> import numpy as np
    >>> from tpukit.train._mesh import resolve_plan
    >>> data = ResidentData((np.zeros((20, 3), np.float32), np.zeros(20, np.int32)),
    ...                     resolve_plan("data"), name="train_data")
    >>> data.n, data.kind
    (20, 'pair')
    >>> x = np.arange(12, dtype=np.float32).reshape(4, 3)
    >>> before = content_fingerprint(x)
    >>> x[2, 1] += 1
    >>> content_fingerprint(x) == before
    False
"""

from __future__ import annotations

import itertools
import time
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpukit._counts import as_count

from ._content import content_fingerprint
from ._exceptions import TrainingInputError, TrainingTypeError
from ._kept import KeptForModel
from ._layout import place_all
from ._mesh import Plan


def _kind_and_arrays(data: Any, name: str) -> tuple[str, Any]:
    """``("pair", (x, y))`` or ``("dict", {...})``; raise for anything else."""
    if isinstance(data, dict):
        if not data:
            raise TrainingInputError(f"{name} is an empty dict; expected a dict of arrays.")
        if {"inputs", "labels"} <= set(data) and len(data) == 2:
            return "pair", (data["inputs"], data["labels"])
        return "dict", dict(data)
    if isinstance(data, (tuple, list)) and len(data) == 2:
        return "pair", tuple(data)
    raise TrainingTypeError(
        f"{name} should be an (inputs, labels) tuple of arrays, a dict of arrays, or an "
        f"iterable of such batches; got {type(data).__name__}."
    )


def arrays_of_dataset(data: Any) -> Any:
    """A dataset object that carries ``images`` and ``labels`` arrays (a
    ``tpukit.datasets.mnist(...)`` ``Split``) as its ``(images, labels)`` pair; any
    other ``data`` unchanged."""
    if isinstance(data, (dict, tuple, list)):
        return data
    images, labels = getattr(data, "images", None), getattr(data, "labels", None)
    if hasattr(images, "shape") and hasattr(labels, "shape"):
        return (images, labels)
    return data


def is_array_dataset(data: Any) -> bool:
    """Whether ``data`` is in-memory arrays (as opposed to an iterable of batches)."""
    if isinstance(data, dict):
        return True
    return (
        isinstance(data, (tuple, list))
        and len(data) == 2
        and all(hasattr(a, "shape") and hasattr(a, "dtype") for a in data)
    )


def _as_array(a: Any, name: str) -> Any:
    if isinstance(a, jax.Array):
        return a
    arr = np.asarray(a)
    if arr.dtype == object:
        raise TrainingTypeError(f"{name} holds Python objects, not numbers; pass numeric arrays.")
    if arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif arr.dtype == np.int64:
        arr = arr.astype(np.int32)
    return arr


def check_lengths(arrays: Any, name: str) -> int:
    """The common length of every array's first axis, or a clear error."""
    leaves = jax.tree_util.tree_leaves_with_path(arrays)
    lengths = {}
    for path, a in leaves:
        if np.ndim(a) == 0:
            raise TrainingInputError(
                f"{name}{jax.tree_util.keystr(path)} is a scalar; every array needs a "
                "first axis of examples."
            )
        lengths[jax.tree_util.keystr(path)] = a.shape[0]
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{name}{k}: {v}" for k, v in lengths.items())
        raise TrainingInputError(
            f"{name} arrays have different numbers of examples ({shown}). Inputs and "
            "labels must have the same first-axis length."
        )
    return next(iter(lengths.values()))


def check_batch_size(batch_size: Any, n: int | None, plan: Plan, name: str) -> int:
    """Validate ``batch_size`` against the dataset size and how the plan splits batches."""
    shards = plan.batch_shards
    batch_size = as_count(batch_size, "batch_size", error=TrainingInputError)
    if n is not None and batch_size > n:
        raise TrainingInputError(
            f"batch_size={batch_size} is larger than {name}, which has {n} examples. "
            f"Pick batch_size <= {n - n % shards or shards}."
        )
    if batch_size % shards:
        lower = batch_size - batch_size % shards
        upper = lower + shards
        choices = f"{lower} or {upper}" if lower else f"{upper}"
        raise TrainingInputError(
            f"batch_size={batch_size} does not divide evenly over {plan.describe_batch_split()} "
            f"the batch is split across (mesh {dict(plan.mesh.shape)}). Pick a multiple of "
            f"{shards}, e.g. {choices}."
        )
    return batch_size


def data_source(
    data: Any,
    plan: Plan,
    batch_size: int | None,
    epochs: int,
    name: str,
    kept: KeptForModel | None = None,
) -> tuple[ResidentData | StreamedData, int]:
    """``(source, batch_size)`` for ``fit``'s ``data``: arrays are put on the devices
    (``batch_size`` required; the copy ``kept`` holds when they are the same arrays), an
    iterable is streamed (its batches give the size)."""
    data = arrays_of_dataset(data)
    if is_array_dataset(data):
        if batch_size is None:
            raise TrainingInputError(
                f"batch_size is required when {name} is arrays; e.g. batch_size=128."
            )
        source = resident(data, plan, name, kept)
        check_batch_size(batch_size, source.n, plan, name)
        return source, int(batch_size)
    source = StreamedData(data, plan, batch_size, name, epochs)
    return source, source.batch_size


def in_memory(data: Any, name: str, plan: Plan, kept: KeptForModel | None = None) -> ResidentData:
    """``data`` placed on the devices (or the copy ``kept`` holds of the same arrays);
    refused unless it is in-memory arrays (evaluation)."""
    data = arrays_of_dataset(data)
    if not is_array_dataset(data):
        raise TrainingTypeError(
            f"{name} must be in-memory arrays for evaluation: an (inputs, labels) tuple or "
            f"a dict of arrays; got {type(data).__name__}."
        )
    return resident(data, plan, name, kept)


def resident(data: Any, plan: Plan, name: str, kept: KeptForModel | None) -> ResidentData:
    """In-memory ``data`` on the devices: placed now, or, when ``kept`` holds a copy of
    these very arrays on this layout, that copy (checked against in-place changes while
    the run's first call runs: :class:`KeptData`)."""
    if kept is None:
        return ResidentData(data, plan, name)
    form, given = _form(data, plan, name)
    return kept_resident(kept, name, form, given, lambda: ResidentData(data, plan, name))


def kept_resident(
    kept: KeptForModel, name: str, form: Any, given: list[Any], build: Callable[[], Any]
) -> Any:
    """The source for ``name``'s arrays ``given`` (in structure ``form``): the copy
    ``kept`` holds when they are the same objects, else ``build()``, timed and kept
    there. The source's ``kept`` is its :class:`KeptData`."""
    found = _find(kept, name, form, given)
    if found is not None:
        found.reuse()
        return found.source
    kept.data.pop(name, None)  # free the old copy before placing the new one
    start = time.perf_counter()
    source = build()
    jax.block_until_ready(jax.tree.leaves(source.arrays))
    owner = weakref.ref(kept)

    def lost(_: Any) -> None:  # the user let go of an array: free the device copy now
        me = owner()
        if me is not None and me.data.get(name) is copy:
            me.forget([name])

    copy = KeptData(form, given, source, time.perf_counter() - start, lost)
    copy.name = name
    source.kept = copy
    if copy.keepable:
        kept.data[name] = copy
    return source


def kept_copy(data: Any, plan: Plan, name: str, kept: KeptForModel) -> KeptData | None:
    """The copy ``kept`` holds of in-memory ``data``'s very arrays on this layout, or
    ``None``; nothing is placed or checked (``_setup``'s repeated call)."""
    data = arrays_of_dataset(data)
    if not is_array_dataset(data):
        return None
    form, given = _form(data, plan, name)
    return _find(kept, name, form, given)


def _find(kept: KeptForModel, name: str, form: Any, given: list[Any]) -> KeptData | None:
    """The copy ``kept`` holds of ``name`` when ``given`` are its very arrays (in
    structure ``form``), else ``None``; nothing is placed, and the copy is not yet
    counted as reused (:meth:`KeptData.reuse`)."""
    copy = kept.data.get(name)
    return copy if copy is not None and copy.matches(form, given) else None


def _form(data: Any, plan: Plan, name: str) -> tuple[tuple, list[Any]]:
    """``(form, arrays)``: how a kept copy is known again (its kind and
    structure, and the layout) and the arrays as given."""
    kind, arrays = _kind_and_arrays(data, name)
    given, treedef = jax.tree.flatten(arrays)
    return (kind, treedef, plan), given


class ResidentData:
    """In-memory arrays placed once on the devices, split along the example axis.

    The arrays are padded (with zeros) to a multiple of the device count so they
    split evenly; padding rows are never used: shuffles and slices only index
    the first :attr:`n` rows.
    """

    def __init__(self, data: Any, plan: Plan, name: str):
        self.kind, arrays = _kind_and_arrays(data, name)
        arrays = jax.tree.map(lambda a: _as_array(a, name), arrays)
        self.n = check_lengths(arrays, name)
        host_labels = arrays[1] if self.kind == "pair" else arrays.get("labels")
        pad = (-self.n) % plan.batch_shards
        if pad:
            arrays = jax.tree.map(
                lambda a: jnp.concatenate(
                    [jnp.asarray(a), jnp.zeros((pad, *a.shape[1:]), a.dtype)]
                ),
                arrays,
            )
        self.arrays = place_all(arrays, plan.batch_sharding(0))
        self.plan = plan
        #: The labels array (pair data, or a dict's ``"labels"``) or ``None``.
        self.labels = host_labels
        #: When placing it is kept for later calls: how (:class:`KeptData`).
        self.kept: KeptData | None = None

    def sample(self, batch_size: int) -> Any:
        """Abstract shapes of one batch, for checking the model and loss without running."""
        return jax.tree.map(
            lambda a: jax.ShapeDtypeStruct((batch_size, *a.shape[1:]), a.dtype), self.arrays
        )


def _weak(x: Any, lost: Callable[[Any], None]) -> Callable[[], Any] | None:
    try:
        return weakref.ref(x, lost)
    except TypeError:
        return None


class KeptData:
    """One placed data set, kept for later calls given the same arrays.

    ``given`` are the arrays as the user passed them (before any conversion);
    ``source`` is what was built from them (a :class:`ResidentData`).
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


def epoch_indices(
    key: np.random.SeedSequence, n: int, steps: int, batch_size: int, shuffle: bool
) -> np.ndarray:
    """Example indices for one epoch, ``int32 [steps, batch_size]``; the remainder is dropped.

    ``key`` is :func:`epoch_key`; the same key gives the same order on every host.

    Example::

        >>> epoch_indices(epoch_key(0, 0), 10, 2, 4, False).tolist()
        [[0, 1, 2, 3], [4, 5, 6, 7]]
        >>> first, second = (epoch_indices(epoch_key(0, e), 10, 2, 4, True) for e in (0, 1))
        >>> first.tolist() != second.tolist()
        True
    """
    order = np.random.default_rng(key).permutation(n) if shuffle else np.arange(n)
    return order[: steps * batch_size].reshape(steps, batch_size).astype(np.int32)


def epoch_key(seed: int, epoch: int) -> np.random.SeedSequence:
    """The shuffle seed of ``epoch`` (counted over the model's whole training)."""
    return np.random.SeedSequence([int(seed) % 2**64, int(epoch)])


def _stack(batches: list[Any]) -> Any:
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *batches)


def _length(data: Any) -> int | None:
    """``len(data)``, or None where its ``__len__`` does not give a count."""
    try:
        return int(len(data))
    except (TypeError, ValueError):
        return None


class StreamedData:
    """An iterable of batches, delivered to the device in chunks of ``steps`` batches.

    ``batch_size`` is taken from the first batch when not given. A one-shot
    iterator (a generator) can feed a single epoch; pass a list or an object whose
    ``__iter__`` starts over to train several.
    """

    def __init__(self, data: Iterable, plan: Plan, batch_size: int | None, name: str, epochs: int):
        if not isinstance(data, Iterable):
            raise TrainingTypeError(
                f"{name} should be an (inputs, labels) tuple of arrays, a dict of arrays, or "
                f"an iterable of such batches; got {type(data).__name__}."
            )
        # One iter() for the first pass: an iterable whose __iter__ does work (reads a
        # file, draws a shuffle) must not lose a pass to a check.
        first_iter = iter(data)
        if hasattr(data, "__len__") and _length(data) == 0:
            raise TrainingInputError(
                f"{name} has no batches: len() of it is 0, so an epoch would train 0 steps. "
                "Pass data with batches in it (or a __len__ that counts them)."
            )
        if first_iter is data and epochs > 1:
            raise TrainingInputError(
                f"{name} is a one-shot iterator ({type(data).__name__}), which runs out after "
                f"one epoch, but epochs={epochs}. Pass a list of batches, or an object whose "
                "__iter__ starts a fresh pass, or train one epoch per fit call."
            )
        self.data = data
        self.plan = plan
        self.name = name
        self._first_iter: Iterator | None = first_iter
        try:
            first = next(self._first_iter)
        except StopIteration:
            raise TrainingInputError(f"{name} yielded no batches.") from None
        self._first = first
        self.kind, arrays = _kind_and_arrays(first, f"the first batch of {name}")
        inferred = check_lengths(arrays, f"the first batch of {name}")
        if batch_size is not None and batch_size != inferred:
            raise TrainingInputError(
                f"batch_size={batch_size} but the batches of {name} hold {inferred} examples. "
                "Leave batch_size=None for iterables, or re-batch the data."
            )
        self.batch_size = check_batch_size(inferred, None, plan, f"{name} batches")
        self._example = jax.tree.map(lambda a: _as_array(a, name), arrays)
        self._widths = [np.shape(a)[1:] for a in jax.tree.leaves(self._example)]
        self._warned = False
        #: The first batch's labels (pair data, or a dict's ``"labels"``) or ``None``.
        self.labels = self._example[1] if self.kind == "pair" else self._example.get("labels")

    def sample(self, batch_size: int) -> Any:
        return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), self._example)

    def _batches(self, skip: int) -> Iterator[Any]:
        if self._first_iter is not None:
            it = itertools.chain([self._first], self._first_iter)
            self._first_iter = None
        else:
            it = iter(self.data)
        for batch in itertools.islice(it, skip, None):
            _, arrays = _kind_and_arrays(batch, f"a batch of {self.name}")
            sizes = {np.shape(a)[0] for a in jax.tree.leaves(arrays)}
            if sizes != {self.batch_size}:
                if not self._warned:
                    warnings.warn(
                        f"Dropped a batch of {self.name} with {sorted(sizes)} examples; "
                        f"training uses only full batches of {self.batch_size}.",
                        stacklevel=4,
                    )
                    self._warned = True
                continue
            widths = [np.shape(a)[1:] for a in jax.tree.leaves(arrays)]
            if widths != self._widths:
                raise TrainingInputError(
                    f"A batch of {self.name} has arrays of shapes "
                    f"{[list(np.shape(a)) for a in jax.tree.leaves(arrays)]}, but its first "
                    f"batch's were {[list(np.shape(a)) for a in jax.tree.leaves(self._example)]}: "
                    "every batch must have the same shape past the batch dimension."
                )
            yield arrays

    def chunks(self, steps: int, skip: int = 0) -> Iterator[tuple[Any, int]]:
        """Yield ``(device chunk [k, batch, ...], k)`` with ``k <= steps``.

        The next chunk is stacked and its transfer started only when asked for,
        which the loop does right after dispatching the current one, so copying
        overlaps computing.
        """
        batches = self._batches(skip)
        while True:
            group = list(itertools.islice(batches, steps))
            if not group:
                return
            yield place_all(_stack(group), self.plan.batch_sharding(1)), len(group)
