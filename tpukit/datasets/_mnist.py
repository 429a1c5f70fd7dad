"""MNIST handwritten digits, downloaded once, checked, cached, and ready to train on.

Where the data comes from, first match wins:

1. ``source=`` or the ``TPUKIT_MNIST`` environment variable: a folder holding the IDX
   files (``.gz`` or raw), a keras ``mnist.npz``, the classic ``mnist.pkl.gz``, or
   ``"sample"`` for the small sample bundled with tpukit;
2. the cache folder (``cache_dir=``, else ``$TPUKIT_CACHE/datasets/mnist``, else
   ``~/.cache/tpukit/datasets/mnist``);
3. the public mirrors in :data:`MIRRORS`, each file checked against :data:`CHECKSUMS`;
4. offline, the bundled sample (10,000 training and 2,000 test images of real MNIST),
   with a :class:`SampleDataWarning`.

Example::

    from tpukit.datasets import mnist

    x_train, y_train = mnist("train")          # (60000, 784) float32 in [0, 1], int32
    x_test, y_test = mnist("test")             # (10000, 784)
    train, val = mnist(["train", "validation"], validation_size=5_000)
    images = mnist("test", flatten=False).images   # (10000, 28, 28, 1) for a conv net
"""

from __future__ import annotations

import gzip
import os
import pickle
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpukit._errors import (
    ArgumentError,
    DownloadError,
    IDXFormatError,
    MnistSourceError,
    MnistSourceNotFoundError,
)
from tpukit.datasets._download import fetch
from tpukit.datasets._idx import read_idx

#: Where :func:`mnist` downloads from, in order. A URL ending in ``/`` is a folder that
#: holds the four IDX ``.gz`` files; any other URL is a keras-style ``mnist.npz``.
MIRRORS: tuple[str, ...] = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
    "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz",
)

#: Published SHA-256 of each file. The ``.gz`` files: tensorflow/datasets,
#: ``tensorflow_datasets/url_checksums/mnist.txt``; ``mnist.npz``: keras-team/keras,
#: ``keras/src/datasets/mnist.py`` (``file_hash``).
CHECKSUMS: dict[str, str] = {
    "train-images-idx3-ubyte.gz": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    "train-labels-idx1-ubyte.gz": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    "t10k-images-idx3-ubyte.gz": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    "t10k-labels-idx1-ubyte.gz": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
    "mnist.npz": "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1",
}

SPLITS = ("train", "validation", "test")
SAMPLE_PATH = Path(__file__).parent / "data" / "mnist_sample.npz"
_IDX_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_FULL_SIZES = {"train": 60_000, "test": 10_000}
_SOURCE_HELP = (
    "Pass source= (or set TPUKIT_MNIST to) a folder holding train-images-idx3-ubyte.gz and "
    "the other IDX files, a keras mnist.npz, the classic mnist.pkl.gz, or 'sample'."
)

_Parts = dict[str, tuple[np.ndarray, np.ndarray]]


class SampleDataWarning(UserWarning):
    """MNIST could not be downloaded, so the small bundled sample is used instead.

    Shown once per session (its text is the same for every split); ``download_errors``
    says what each mirror answered.
    """

    def __init__(self, message: str, download_errors: str = ""):
        super().__init__(message)
        self.download_errors = download_errors


# One sample-data warning per session, from whichever cell or split first meets it.
# Appended, so a filter of the user's own ("ignore", "error") still comes first.
warnings.filterwarnings("once", category=SampleDataWarning, append=True)


@dataclass(frozen=True, eq=False, repr=False)
class Split:
    """One split of a dataset: images and labels, and where they came from.

    It unpacks like a pair, so ``x, y = mnist("train")`` works.

    Attributes:
        images: ``(N, 784)`` or ``(N, 28, 28, 1)``; float in ``[0, 1]``, or uint8 0-255.
        labels: ``(N,)`` int32 digits 0-9.
        name: ``"train"``, ``"validation"`` or ``"test"``.
        source: the folder, file or URL the data was read from.
        sample: True when this is the small bundled sample, not the full dataset.
    """

    images: np.ndarray
    labels: np.ndarray
    name: str
    source: str
    sample: bool = False

    def __iter__(self):
        return iter((self.images, self.labels))

    def __len__(self) -> int:
        return len(self.labels)

    def __repr__(self) -> str:
        origin = "the bundled MNIST sample" if self.sample else self.source
        return (
            f"Split({self.name!r}: {len(self):,} images {self.images.shape} "
            f"{self.images.dtype}, labels {self.labels.dtype}, from {origin})"
        )


def mnist(
    split: str | Sequence[str] = "train",
    *,
    flatten: bool = True,
    dtype: str | np.dtype = "float32",
    validation_size: int | float = 0,
    source: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    fallback: bool = True,
    mirrors: Sequence[str] | None = None,
    checksums: dict[str, str] | None = None,
    progress: bool = True,
    timeout: float = 30.0,
) -> Split | tuple[Split, ...]:
    """Load MNIST, downloading and caching it the first time.

    Args:
        split: ``"train"`` (60,000 images, less any validation), ``"validation"`` (the
            last ``validation_size`` training images) or ``"test"`` (10,000); or a list
            of these, which returns a tuple of splits in the same order.
        flatten: ``(N, 784)`` rows for an MLP if True, else ``(N, 28, 28, 1)`` (NHWC).
        dtype: a float dtype scales pixels to ``[0, 1]``; ``"uint8"`` keeps raw 0-255.
        validation_size: how many training images (an int) or what fraction (a float
            below 1) to hold out, taken from the end of the training set.
        source: read from here instead of downloading (see the module docstring).
        cache_dir: folder for downloaded files.
        fallback: when every mirror is unreachable, use the bundled sample with a
            :class:`SampleDataWarning` (True) or raise :class:`DownloadError` (False).
        mirrors: override :data:`MIRRORS`.
        checksums: override :data:`CHECKSUMS`; a file missing from it is not checked.
        progress: show a progress bar while downloading.
        timeout: seconds to wait on a silent connection before trying the next mirror.

    Returns:
        A :class:`Split` (unpacks as ``images, labels``), or a tuple of them.

    Raises:
        ValueError: an unknown split, dtype or validation size.
        FileNotFoundError: ``source`` does not exist or holds no MNIST files.
        IDXFormatError: a file is not valid IDX (bad magic number, truncated).
        ChecksumError: a mirror served a file with the wrong SHA-256.

    Example::

        >>> x, y = mnist("test", source="sample")
        >>> x.shape, x.dtype, y.dtype
        ((2000, 784), dtype('float32'), dtype('int32'))
    """
    names = _check_splits(split)
    dtype = _check_dtype(dtype)
    wanted = {"test" if name == "test" else "train" for name in names}
    if source is None:
        source = os.environ.get("TPUKIT_MNIST") or None
    sample = False
    if source is not None and str(source) == "sample":
        parts, origin, sample = _load_npz(SAMPLE_PATH, wanted), str(SAMPLE_PATH), True
    elif source is not None:
        parts, origin = _load_path(Path(source).expanduser(), wanted), str(source)
    else:
        cache = Path(cache_dir).expanduser() if cache_dir is not None else _default_cache()
        try:
            parts = _load_cached_or_download(
                cache,
                wanted,
                MIRRORS if mirrors is None else tuple(mirrors),
                CHECKSUMS if checksums is None else checksums,
                progress=progress,
                timeout=timeout,
            )
            origin = str(cache)
        except DownloadError as exc:
            if not fallback:
                raise
            _warn_sample(exc)
            parts, origin, sample = _load_npz(SAMPLE_PATH, wanted), str(SAMPLE_PATH), True
    splits = tuple(
        _make_split(parts, name, validation_size, flatten, dtype, origin, sample) for name in names
    )
    return splits[0] if isinstance(split, str) else splits


def _check_splits(split: str | Sequence[str]) -> tuple[str, ...]:
    names = (split,) if isinstance(split, str) else tuple(split)
    bad = [name for name in names if name not in SPLITS]
    if bad or not names:
        raise ArgumentError(
            f"mnist() expected split to be one of {', '.join(map(repr, SPLITS))} or a list of "
            f"them, received {split!r}. For example: mnist('train') or "
            "mnist(['train', 'validation'], validation_size=5000)."
        )
    return names


def _check_dtype(dtype: str | np.dtype) -> np.dtype:
    try:
        result = np.dtype(dtype)
    except TypeError as exc:
        raise ArgumentError(f"mnist() could not understand dtype={dtype!r}: {exc}") from exc
    if result != np.uint8 and result.kind != "f" and not result.name.startswith("bfloat16"):
        raise ArgumentError(
            f"mnist() expected dtype to be a float type (pixels scaled to [0, 1]) or 'uint8' "
            f"(raw 0-255), received {result}. Use dtype='float32' or dtype='uint8'."
        )
    return result


def _default_cache() -> Path:
    root = os.environ.get("TPUKIT_CACHE")
    if root:
        return Path(root).expanduser() / "datasets" / "mnist"
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(xdg) / "tpukit" / "datasets" / "mnist"


def _load_cached_or_download(
    cache: Path,
    wanted: set[str],
    mirrors: Sequence[str],
    checksums: dict[str, str],
    *,
    progress: bool,
    timeout: float,
) -> _Parts:
    """Use the cache if it has the files, else download: IDX folders first, then mnist.npz."""
    gz_names = [f"{name}.gz" for part in sorted(wanted) for name in _IDX_FILES[part]]
    if all((cache / name).exists() for name in gz_names):
        return _load_idx_folder(cache, wanted)
    if (cache / "mnist.npz").exists():
        return _load_npz(cache / "mnist.npz", wanted)
    folders = [m for m in mirrors if m.endswith("/")]
    npz_urls = [m for m in mirrors if not m.endswith("/")]
    errors: list[str] = []
    if folders:
        try:
            for name in gz_names:
                urls = [folder + name for folder in folders]
                fetch(urls, cache / name, checksums.get(name), progress=progress, timeout=timeout)
            return _load_idx_folder(cache, wanted)
        except DownloadError as exc:
            errors.append(str(exc))
    if npz_urls:
        try:
            path = fetch(
                npz_urls,
                cache / "mnist.npz",
                checksums.get("mnist.npz"),
                progress=progress,
                timeout=timeout,
            )
            return _load_npz(path, wanted)
        except DownloadError as exc:
            errors.append(str(exc))
    raise DownloadError("\n".join(errors) or "No MNIST mirrors given: pass mirrors=[...].")


def _warn_sample(exc: DownloadError) -> None:
    with np.load(SAMPLE_PATH) as f:
        n_train, n_test = len(f["y_train"]), len(f["y_test"])
    warnings.warn(
        SampleDataWarning(
            f"MNIST could not be downloaded, so tpukit uses its bundled sample of real MNIST: "
            f"{n_train:,} training and {n_test:,} test images. For the full set, connect to the "
            "internet or pass source='path/to/mnist'; source='sample' skips this warning.",
            download_errors=str(exc),
        ),
        stacklevel=3,
    )


def _load_path(path: Path, wanted: set[str]) -> _Parts:
    if not path.exists():
        raise MnistSourceNotFoundError(f"MNIST source '{path}' does not exist. {_SOURCE_HELP}")
    if path.is_dir():
        for folder in (path, path / "raw", path / "MNIST" / "raw"):
            if _find_idx(folder, _IDX_FILES["test"][0]) or _find_idx(
                folder, _IDX_FILES["train"][0]
            ):
                return _load_idx_folder(folder, wanted)
        for name in ("mnist.npz", "mnist.pkl.gz", "mnist.pkl"):
            if (path / name).is_file():
                return _load_path(path / name, wanted)
        raise MnistSourceNotFoundError(
            f"The folder '{path}' holds no MNIST files: expected train-images-idx3-ubyte(.gz) "
            f"and the other IDX files, mnist.npz or mnist.pkl.gz. {_SOURCE_HELP}"
        )
    if path.suffix == ".npz":
        return _load_npz(path, wanted)
    if path.name.endswith((".pkl.gz", ".pkl")):
        return _load_pickle(path, wanted)
    raise MnistSourceError(
        f"MNIST source '{path}' is a file mnist() cannot read: expected a .npz, .pkl.gz or "
        f".pkl file, or a folder of IDX files. {_SOURCE_HELP}"
    )


def _find_idx(folder: Path, stem: str) -> Path | None:
    """Find an IDX file by stem, gzipped or not, with either '-' or '.' before 'idx'."""
    dotted = stem.replace("-idx", ".idx")
    for name in (f"{stem}.gz", stem, f"{dotted}.gz", dotted):
        if (folder / name).is_file():
            return folder / name
    return None


def _load_idx_folder(folder: Path, wanted: set[str]) -> _Parts:
    parts: _Parts = {}
    for part in sorted(wanted):
        images_stem, labels_stem = _IDX_FILES[part]
        images_path, labels_path = _find_idx(folder, images_stem), _find_idx(folder, labels_stem)
        if images_path is None or labels_path is None:
            missing = images_stem if images_path is None else labels_stem
            raise MnistSourceNotFoundError(
                f"The {part} split needs {missing}(.gz) in '{folder}', and it is not there. "
                f"{_SOURCE_HELP}"
            )
        parts[part] = _checked(read_idx(images_path), read_idx(labels_path), str(folder), part)
    return parts


def _load_npz(path: Path, wanted: set[str]) -> _Parts:
    try:
        with np.load(path, allow_pickle=False) as f:
            keys = {"train": ("x_train", "y_train"), "test": ("x_test", "y_test")}
            raw = {part: (f[keys[part][0]], f[keys[part][1]]) for part in sorted(wanted)}
    except (OSError, ValueError, KeyError) as exc:
        raise MnistSourceError(
            f"'{path}' is not a readable MNIST .npz ({exc}): expected arrays x_train, y_train, "
            f"x_test, y_test as in keras' mnist.npz. {_SOURCE_HELP}"
        ) from exc
    return {part: _checked(x, y, str(path), part) for part, (x, y) in raw.items()}


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickle NumPy arrays and nothing else, so a pickle file cannot run code."""

    _ALLOWED = {
        ("_codecs", "encode"),  # how Python 3 writes bytes in protocol 2
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        *(
            (f"numpy.{core}.{module}", name)
            for core in ("core", "_core")
            for module, name in (
                ("multiarray", "_reconstruct"),
                ("multiarray", "scalar"),
                ("numeric", "_frombuffer"),
            )
        ),
    }

    def find_class(self, module: str, name: str):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}: not a NumPy array")
        return super().find_class(module, name)


def _load_pickle(path: Path, wanted: set[str]) -> _Parts:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            train, valid, test = _ArrayUnpickler(f, encoding="latin1").load()
        raw = {
            "train": (np.concatenate([train[0], valid[0]]), np.concatenate([train[1], valid[1]])),
            "test": (test[0], test[1]),
        }
    except (OSError, EOFError, ValueError, TypeError, IndexError, pickle.UnpicklingError) as exc:
        raise MnistSourceError(
            f"'{path}' is not the classic MNIST pickle ({exc}): expected three (images, labels) "
            f"pairs, train, validation and test, with images float in [0, 1]. {_SOURCE_HELP}"
        ) from exc
    return {
        part: _checked(_to_bytes(raw[part][0], path), raw[part][1], str(path), part)
        for part in sorted(wanted)
    }


def _to_bytes(images: np.ndarray, path: Path) -> np.ndarray:
    """Turn pickle pixels (byte/256 in the classic file, or byte/255) back into exact bytes."""
    images = np.asarray(images, dtype=np.float64).reshape(len(images), 28, 28)
    for scale in (256, 255):
        pixels = np.rint(images * scale)
        if (
            pixels.min() >= 0
            and pixels.max() <= 255
            and np.array_equal((pixels / scale).astype(np.float32), images.astype(np.float32))
        ):
            return pixels.astype(np.uint8)
    raise MnistSourceError(
        f"'{path}' holds pixels that are not whole multiples of 1/256 or 1/255, so they are "
        "not MNIST bytes. Pass the original mnist.pkl.gz."
    )


def _checked(images: np.ndarray, labels: np.ndarray, origin: str, part: str):
    images = np.asarray(images)
    labels = np.asarray(labels).reshape(-1)
    if images.ndim == 2 and images.shape[1] == 784:
        images = images.reshape(-1, 28, 28)
    if images.shape[1:] != (28, 28) or images.dtype != np.uint8:
        raise IDXFormatError(
            f"MNIST {part} images from '{origin}' should be uint8 of shape (N, 28, 28), "
            f"received {images.dtype} {images.shape}. {_SOURCE_HELP}"
        )
    if len(images) != len(labels) or (len(labels) and not 0 <= labels.min() <= labels.max() <= 9):
        raise IDXFormatError(
            f"MNIST {part} labels from '{origin}' should be {len(images):,} digits 0-9, "
            f"received {len(labels):,} values. The image and label files do not belong "
            f"together. {_SOURCE_HELP}"
        )
    return images, labels.astype(np.int32)


def _make_split(
    parts: _Parts,
    name: str,
    validation_size: int | float,
    flatten: bool,
    dtype: np.dtype,
    origin: str,
    sample: bool,
) -> Split:
    x, y = parts["test" if name == "test" else "train"]
    if name != "test":
        n_val = _validation_count(validation_size, len(y), name)
        cut = len(y) - n_val
        x, y = (x[:cut], y[:cut]) if name == "train" else (x[cut:], y[cut:])
    images = x.reshape(len(x), 784) if flatten else x[..., None]
    if dtype == np.uint8:
        images = np.ascontiguousarray(images)
    else:
        images = (images.astype(np.float32) / np.float32(255)).astype(dtype, copy=False)
    return Split(images, np.ascontiguousarray(y), name, origin, sample)


def _validation_count(validation_size: int | float, n_train: int, name: str) -> int:
    if isinstance(validation_size, float) and 0 <= validation_size < 1:
        count = round(validation_size * n_train)
    elif isinstance(validation_size, (int, np.integer)) and not isinstance(validation_size, bool):
        count = int(validation_size)
    else:
        count = -1
    if not 0 <= count < n_train:
        raise ArgumentError(
            f"mnist() expected validation_size to be a count from 0 to {n_train - 1:,} or a "
            f"fraction between 0 and 1, received {validation_size!r}. For example "
            "validation_size=5000 or validation_size=0.1."
        )
    if name == "validation" and count == 0:
        raise ArgumentError(
            "mnist('validation') needs validation_size > 0 to say how many training images to "
            "hold out, for example mnist(['train', 'validation'], validation_size=5000)."
        )
    return count
