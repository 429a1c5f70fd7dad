"""Which source file is the user's: one rule for HLO metadata stacks and Python tracebacks.

A compiled program's instructions and a failed trace both carry a stack of frames;
tpukit shows the innermost one the user wrote. Library code is anything installed
(``site-packages``, ``dist-packages``) and the folders of JAX, jaxlib, Flax, optax,
NumPy and tpukit itself (which may be a checkout, not installed); ``<frozen ...>``
frames are Python's own. Everything else, scripts and notebook cells included, is the
user's::

    >>> is_user_file("/tmp/ipykernel_4242/2170432108.py")
    True
    >>> is_user_file("/usr/lib/python3/dist-packages/flax/nnx/module.py")
    False
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable

_INSTALLED = re.compile(r"[/\\](site-packages|dist-packages)[/\\]")
_LIBRARIES = ("jax", "jaxlib", "flax", "optax", "numpy")
# tpukit's own folder (this file is tpukit/hlo/text/_sources.py): its frames are not the user's.
_TPUKIT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))


def _library_folders() -> tuple[str, ...]:
    # Only libraries already imported: this layer never imports JAX itself.
    files = tuple(getattr(sys.modules.get(name), "__file__", None) for name in _LIBRARIES)
    return _folders_of(files)


@functools.lru_cache(maxsize=16)
def _folders_of(files: tuple[str | None, ...]) -> tuple[str, ...]:
    return (_TPUKIT, *(os.path.dirname(os.path.abspath(file)) for file in files if file))


def is_user_file(path: str) -> bool:
    """Whether ``path`` (a frame's file name) is the user's code rather than a library's."""
    return _is_user_file(path, _library_folders())


@functools.lru_cache(maxsize=4096)  # a module names a few files in thousands of frames
def _is_user_file(path: str, library_folders: tuple[str, ...]) -> bool:
    if not path or path.startswith("<frozen") or path == "<tpu_compile call>":
        return False
    if path.startswith("<"):  # <ipython-input-3-...>, <string>: typed by the user
        return True
    absolute = os.path.abspath(path)
    if _INSTALLED.search(absolute):
        return False
    return not any(absolute.startswith(folder + os.sep) for folder in library_folders)


LocationNamer = Callable[[str, int], str]


@functools.lru_cache(maxsize=4096)
def file_location(filename: str, line: int) -> str:
    """``'model.py:12'``: a file's base name and line, ``''`` for no file.

    >>> file_location("/home/me/model.py", 12), file_location("", 0)
    ('model.py:12', '')
    """
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    return f"{base}:{line}" if line else base


_namer: list[LocationNamer] = [file_location]


def name_locations_with(namer: LocationNamer | None) -> LocationNamer:
    """Hand in how a source line is named (``None``: a file's base name and line).

    This layer never asks who runs it. The layer that does (tpukit's compiling, which
    runs in the user's notebook) hands in a namer that calls a cell ``In [7], line 3``;
    every ``HloInstruction.source_location`` then reads it. Returns the namer it replaces.

        >>> before = name_locations_with(lambda file, line: f"{file}@{line}")
        >>> describe_location("/home/me/model.py", 3)
        '/home/me/model.py@3'
        >>> _ = name_locations_with(None)
        >>> describe_location("/home/me/model.py", 3)
        'model.py:3'
        >>> _ = name_locations_with(before)
    """
    before = _namer[0]
    _namer[0] = file_location if namer is None else namer
    return before


def describe_location(filename: str, line: int) -> str:
    """A short label for ``filename:line`` by the namer handed in; ``''`` for none."""
    return _namer[0](filename, line) if filename else ""
