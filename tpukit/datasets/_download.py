"""Fetch a file from the first mirror that serves it; pooch checks and caches it.

One download is `pooch <https://www.fatiando.org/pooch>`_'s job, as it is for SciPy's
and scikit-image's datasets: it streams into a temporary file in the cache folder and
moves the file into place only after its SHA-256 matches, so the cache never holds a
bad file. tpukit adds what pooch leaves to its callers: the same file on several
mirrors, tried in order, and errors that say which mirrors were tried and what to do
(:class:`DownloadError`, :class:`ChecksumError`) instead of pooch's ``ValueError`` and
``requests``' exceptions.

Example::

    path = fetch(
        ["https://mirror-a.example/mnist.npz", "https://mirror-b.example/mnist.npz"],
        Path("~/.cache/tpukit/datasets/mnist/mnist.npz").expanduser(),
        sha256="731c5ac6...",
    )
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType

from tpukit._errors import ChecksumError, DownloadError

_CHUNK = 1 << 16  # pooch's 1 KiB default flushes every KiB: 3x slower on a local 10 MB file
_USER_AGENT = "tpukit-datasets (+https://github.com/tpukit)"
_ADVICE = "download the file yourself and pass its folder as source= (or set TPUKIT_MNIST to it)."


def fetch(
    urls: Sequence[str],
    dest: str | os.PathLike[str],
    sha256: str | None,
    *,
    progress: bool = True,
    timeout: float = 30.0,
) -> Path:
    """Download ``dest`` from the first of ``urls`` that delivers it with the right checksum.

    If ``dest`` already exists with the right checksum (or ``sha256`` is ``None``), pooch
    returns it without a request; with a wrong one it is downloaded again.

    Args:
        urls: the same file on several mirrors, tried in order.
        dest: where the verified file lands; its folder is created if needed.
        sha256: the expected hex digest, or ``None`` to accept any content.
        progress: show a tqdm progress bar while downloading.
        timeout: seconds to wait on a silent connection before giving up on a mirror.

    Returns:
        ``dest`` as a :class:`~pathlib.Path`.

    Raises:
        ChecksumError: at least one mirror sent a whole file with the wrong SHA-256 and
            none sent the right one (a tampered or different file: not retried silently).
        DownloadError: every mirror failed to deliver the whole file.
    """
    pooch = _pooch()
    dest = Path(dest)
    known_hash = f"sha256:{sha256.lower()}" if sha256 is not None else None
    if not urls:
        raise DownloadError(f"No mirror given for {dest.name}: pass at least one URL.")
    import requests  # pooch itself loads it only to download (40 ms)

    failures: list[str] = []
    mismatches: list[str] = []
    for url in urls:
        bar = _Bar(dest.name) if progress else False
        downloader = pooch.HTTPDownloader(
            progressbar=bar,
            chunk_size=_CHUNK,
            timeout=timeout,
            headers={"User-Agent": _USER_AGENT},
        )
        try:
            with _quiet(pooch):
                pooch.retrieve(
                    url, known_hash, fname=dest.name, path=dest.parent, downloader=downloader
                )
            return dest
        except requests.RequestException as exc:
            failures.append(f"{url}: {_describe(exc, timeout)}")
        except ValueError as exc:  # pooch: the hash did not match; it deleted the download
            received = re.search(r"got ([0-9a-fA-F]{64})", str(exc))
            if received is None:
                failures.append(f"{url}: {exc}")
            else:
                mismatches.append(
                    f"{url}: expected sha256 {sha256.lower()}, received {received[1]}"
                )
        except OSError as exc:
            failures.append(f"{url}: {exc}")
        finally:
            if bar:
                bar.close()
    if mismatches:
        raise ChecksumError(
            f"{dest.name} did not match its published SHA-256, so it was not cached.\n  "
            + "\n  ".join(mismatches + failures)
            + "\nThe mirror may serve a different or damaged file. Try again later, or "
            + _ADVICE
        )
    raise DownloadError(
        f"Could not download {dest.name} from any mirror:\n  "
        + "\n  ".join(failures)
        + "\nCheck the network connection, or "
        + _ADVICE
    )


def _describe(exc: BaseException, timeout: float) -> str:
    """One short line for a ``requests`` failure (its own text nests three exceptions)."""
    import requests

    text = str(exc)
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        return f"HTTP {exc.response.status_code} {exc.response.reason}"
    if isinstance(exc, requests.Timeout):
        return f"no answer within {timeout:g} s"
    if broke := re.search(r"IncompleteRead\((\d+) bytes read, (\d+) more expected", text):
        got, more = int(broke[1]), int(broke[2])
        return f"transfer broke off after {got:,} of {got + more:,} bytes"
    if isinstance(exc, requests.ConnectionError):
        reason = re.search(r"\[Errno [^\]]+\] [^'\")]+", text)
        return f"unreachable ({reason[0] if reason else text})"
    return text or type(exc).__name__


@functools.cache
def _pooch() -> ModuleType:
    """pooch, imported on the first download rather than with tpukit.

    Its import loads ``tqdm.auto``, which in a Jupyter kernel without ipywidgets warns
    "IProgress not found" in red; a download's progress bar needs no widget. Once only:
    each ``catch_warnings`` resets the "once" filters (one SampleDataWarning a session).
    """
    from tqdm import TqdmWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TqdmWarning)
        import pooch
    return pooch


@contextlib.contextmanager
def _quiet(pooch: ModuleType) -> Iterator[None]:
    """pooch logs each download to stderr; tpukit shows its progress bar instead."""
    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


class _Bar:
    """pooch's progress-bar protocol (set ``total``; ``update``, ``reset``, ``close``) on tqdm.

    The bar is made when pooch sets the size, so a notebook widget gets its length, and
    it looks like tpukit's other bars: the file name, binary units, gone when done.
    """

    def __init__(self, name: str):
        self._name = name
        self._bar = None

    def _start(self, total: int) -> None:
        from tqdm.auto import tqdm  # already loaded by pooch

        self._bar = tqdm(
            total=total or None,
            desc=self._name,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            leave=False,
        )

    total = property(fset=_start)

    def update(self, n: int) -> None:
        self._bar.update(n)

    def reset(self) -> None:
        self._bar.reset(total=self._bar.total)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
