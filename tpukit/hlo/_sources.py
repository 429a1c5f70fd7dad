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

import os
import re
import sys

_INSTALLED = re.compile(r"[/\\](site-packages|dist-packages)[/\\]")
_LIBRARIES = ("jax", "jaxlib", "flax", "optax", "numpy")
_TPUKIT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _library_folders() -> list[str]:
    # Only libraries already imported: this layer never imports JAX itself.
    folders = [_TPUKIT]
    for name in _LIBRARIES:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            folders.append(os.path.dirname(os.path.abspath(module.__file__)))
    return folders


def is_user_file(path: str) -> bool:
    """Whether ``path`` (a frame's file name) is the user's code rather than a library's."""
    if not path or path.startswith("<frozen") or path == "<tpu_compile call>":
        return False
    if path.startswith("<"):  # <ipython-input-3-...>, <string>: typed by the user
        return True
    absolute = os.path.abspath(path)
    if _INSTALLED.search(absolute):
        return False
    return not any(absolute.startswith(folder + os.sep) for folder in _library_folders())
