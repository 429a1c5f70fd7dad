"""Can ``checkpoint_dir`` hold checkpoints? Found out by writing there, before any step trains.

Permission bits do not answer it: root passes every ``os.access`` check, yet a
filesystem may still refuse the write (``/proc``, ``/sys``, a read-only mount, a
full disk), and orbax would only find out after the first epoch has trained. So
:func:`check_writable` creates the folder if missing, writes and removes a small
file in it, and removes again the folders it created; any refusal becomes one
``CheckpointError`` naming the folder and what to do.

Example::

    >>> check_writable(Path("/proc/self/fd/run1"))
    Traceback (most recent call last):
    tpukit._errors.CheckpointError: checkpoint_dir '/proc/self/fd/run1' cannot be created ...
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from tpukit._errors import CheckpointError

_PROBE = ".tpukit-write-probe"


def refuse(folder: Path, problem: str) -> CheckpointError:
    """The error for a ``checkpoint_dir`` that cannot be used, saying what to pass instead."""
    return CheckpointError(
        f"checkpoint_dir {str(folder)!r} {problem}, so checkpoints could not be saved. "
        "Pass a folder you can write to (it is created if missing), or "
        "checkpoint_dir=None to train without checkpoints."
    )


def os_reason(error: OSError) -> str:
    """``PermissionError: Permission denied``: an OS error without its repeated path."""
    return f"{type(error).__name__}: {error.strerror or error}"


def check_writable(folder: Path, keep_created: bool = False) -> None:
    """Refuse a folder that cannot hold checkpoints, by writing a small file into it.

    ``keep_created`` leaves the folders it had to create in place (several processes
    of one run probe the same folder: one must not remove it under another).
    """
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if folder.exists() and not folder.is_dir():
        raise refuse(folder, "is a file, not a folder")
    if existing is not None and not existing.is_dir():
        raise refuse(folder, f"cannot be created: {existing} is a file")
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise refuse(folder, f"cannot be created ({os_reason(error)})") from None
    try:
        _write_and_remove(folder / f"{_PROBE}-{os.getpid()}")
    except OSError as error:
        raise refuse(folder, f"cannot be written ({os_reason(error)})") from None
    finally:
        if not keep_created:
            for created in missing:  # innermost first
                with contextlib.suppress(OSError):
                    created.rmdir()


def _write_and_remove(probe: Path) -> None:
    descriptor = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(descriptor, b"tpukit checks that checkpoints can be written here\n")
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
        with contextlib.suppress(FileNotFoundError):
            probe.unlink()
