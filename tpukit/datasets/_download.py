"""Fetch a file from the first mirror that serves it, check it, and cache it atomically.

The cache is never left holding a bad file: each download goes to a hidden
temporary file in the cache folder and is renamed into place only after its
SHA-256 matches. An interrupted transfer or a wrong checksum deletes the
temporary file and moves on to the next mirror.

Example::

    path = fetch(
        ["https://mirror-a.example/mnist.npz", "https://mirror-b.example/mnist.npz"],
        Path("~/.cache/tpukit/datasets/mnist/mnist.npz").expanduser(),
        sha256="731c5ac6...",
    )
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from tpukit._errors import TpukitError

_CHUNK = 1 << 16
_USER_AGENT = "tpukit-datasets (+https://github.com/tpukit)"


class DownloadError(TpukitError, OSError):
    """No mirror could deliver a file: offline, not found, or the transfer broke off."""


class ChecksumError(TpukitError, ValueError):
    """A file arrived whole but its SHA-256 is not the published one."""


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Return the hex SHA-256 of a file, read in chunks.

    Example::

        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "empty"
        >>> p.write_bytes(b"")
        0
        >>> sha256_file(p)[:12]
        'e3b0c44298fc'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(
    urls: Sequence[str],
    dest: str | os.PathLike[str],
    sha256: str | None,
    *,
    progress: bool = True,
    timeout: float = 30.0,
) -> Path:
    """Download ``dest`` from the first of ``urls`` that delivers it with the right checksum.

    If ``dest`` already exists it is returned at once (a cache hit, no request).

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
    dest = Path(dest)
    if dest.exists():
        return dest
    if not urls:
        raise DownloadError(f"No mirror given for {dest.name}: pass at least one URL.")
    dest.parent.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    mismatches: list[str] = []
    for url in urls:
        try:
            _download_verified(url, dest, sha256, progress=progress, timeout=timeout)
            return dest
        except ChecksumError as exc:
            mismatches.append(str(exc))
        except (OSError, http.client.HTTPException, ValueError) as exc:
            failures.append(f"{url}: {_describe(exc)}")
    if mismatches:
        raise ChecksumError(
            f"{dest.name} did not match its published SHA-256, so it was not cached.\n  "
            + "\n  ".join(mismatches + failures)
            + "\nThe mirror may serve a different or damaged file. Try again later, or "
            "download the file yourself and pass its folder as source=."
        )
    raise DownloadError(
        f"Could not download {dest.name} from any mirror:\n  "
        + "\n  ".join(failures)
        + "\nCheck the network connection, or download the file yourself and pass its "
        "folder as source=."
    )


def _download_verified(
    url: str, dest: Path, sha256: str | None, *, progress: bool, timeout: float
) -> None:
    """Stream ``url`` into a temporary file beside ``dest``; rename it only if it checks out."""
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(request, timeout=timeout) as resp:
            expected_size = _content_length(resp)
            received = 0
            with _progress_bar(dest.name, expected_size, progress) as bar:
                while chunk := resp.read(_CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    received += len(chunk)
                    bar.update(len(chunk))
        if expected_size is not None and received != expected_size:
            raise DownloadError(f"transfer broke off after {received:,} of {expected_size:,} bytes")
        if sha256 is not None and digest.hexdigest() != sha256.lower():
            raise ChecksumError(
                f"{url}: expected sha256 {sha256.lower()}, received {digest.hexdigest()} "
                f"({received:,} bytes)"
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def _content_length(resp: http.client.HTTPResponse) -> int | None:
    value = resp.headers.get("Content-Length")
    return int(value) if value and value.isdigit() else None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return f"unreachable ({exc.reason})"
    if isinstance(exc, http.client.IncompleteRead):
        return f"transfer broke off after {len(exc.partial):,} bytes"
    return str(exc) or type(exc).__name__


class _NoBar:
    def update(self, n: int) -> None:
        pass


def _progress_bar(name: str, total: int | None, enabled: bool):
    if not enabled:
        return contextlib.nullcontext(_NoBar())
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return contextlib.nullcontext(_NoBar())
    return tqdm(total=total, desc=name, unit="B", unit_scale=True, unit_divisor=1024, leave=False)
