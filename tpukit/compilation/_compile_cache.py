"""JAX's persistent compilation cache, switched on with notebook-friendly defaults.

A big model can take minutes to compile; with the cache on, a restarted kernel
(or a Colab runtime with Drive mounted) reuses the executable XLA built before.

Once per kernel, before the first compile::

    path = tpukit.enable_compile_cache()  # or enable_compile_cache("/tmp/jax-cache")

>>> default_cache_dir().name  # off Colab, without $TPUKIT_COMPILE_CACHE: ~/.cache/tpukit/...
'jax-compile'
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import jax

from tpukit._errors import CompileCacheError

_hits = 0
_hits_lock = threading.Lock()
_listening = False

_COLAB_DRIVE = Path("/content/drive/MyDrive")


def default_cache_dir() -> Path:
    """Where the cache goes when no path is given.

    ``$TPUKIT_COMPILE_CACHE`` if set; on Colab with Drive mounted, a folder on
    Drive (it survives a runtime restart and even a new runtime); otherwise the
    user's cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``)/tpukit/jax-compile.
    """
    if os.environ.get("TPUKIT_COMPILE_CACHE"):
        return Path(os.environ["TPUKIT_COMPILE_CACHE"]).expanduser()
    if _COLAB_DRIVE.is_dir():
        return _COLAB_DRIVE / "tpukit" / "jax-compile-cache"
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "tpukit" / "jax-compile"


def enable_compile_cache(
    path: str | os.PathLike | None = None, *, min_compile_seconds: float = 0.0
) -> Path:
    """Turn on JAX's persistent compilation cache and return its folder.

    Args:
      path: the cache folder; see ``default_cache_dir`` for the default.
      min_compile_seconds: only compiles slower than this are stored (JAX's own
        default is 1 s; 0 stores every compile, which suits notebooks).

    After this, ``Compiled`` summaries say when a compile was served from the cache.
    The cache is trusted code: do not share the folder with people you do not trust.
    """
    folder = Path(path).expanduser() if path is not None else default_cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CompileCacheError(
            f"Cannot create the compile cache folder {str(folder)!r} ({exc.strerror}). "
            "Pass a writable folder: tpukit.enable_compile_cache('/tmp/jax-cache')."
        ) from None
    from jax.experimental.compilation_cache import compilation_cache

    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    compilation_cache.reset_cache()
    compilation_cache.set_cache_dir(str(folder))
    _listen_for_cache_hits()
    return folder


def cache_hit_count() -> int:
    """How many compiles the persistent cache has served since tpukit started listening."""
    _listen_for_cache_hits()
    return _hits


def _listen_for_cache_hits() -> None:
    global _listening
    with _hits_lock:
        if _listening:
            return
        _listening = True
    jax.monitoring.register_event_listener(_on_event)


def _on_event(event: str, **_: object) -> None:
    global _hits
    if event == "/jax/compilation_cache/cache_hits":
        with _hits_lock:
            _hits += 1
