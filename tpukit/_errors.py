"""The exceptions a tpukit user can meet, and the warning an old name gives.

Every tpukit error is a ``TpukitError`` so notebooks can catch them all at once;
each subclass also derives from the built-in exception a Python user would expect
(``ValueError`` for bad input, ``RuntimeError`` for a missing device), so code
written against plain JAX keeps working. Messages say what was expected, what was
received, and what to do next. A public name that was renamed stays one release
(`old_names`): using it warns and names what to write instead.

Every package's errors live here, grouped by package, so one file lists what tpukit
raises; training's are in ``tpukit/train/_exceptions.py``, beside the history and the
NaN origin that ``NonFiniteLossError`` carries, and the installer's ``InstallError`` stays
in ``_install.py``, a script that also runs alone before tpukit is installed.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])


class TpukitError(Exception):
    """Base class of every error tpukit raises on purpose."""


class ShapeSpecError(TpukitError, ValueError):
    """A shape string such as ``f32[128,784]`` could not be read."""


class CallLineError(TpukitError, ValueError):
    """A call line such as ``f(data)`` given to ``%tpu_compile`` could not be used."""


class ArgumentError(TpukitError, ValueError):
    """An argument has a value tpukit cannot use: out of range, not one of the choices,
    or (for a compile) neither traceable as an array nor usable as a static value."""


class CompileError(TpukitError, RuntimeError):
    """The user's function failed while JAX traced, lowered or compiled it."""


class SignatureMismatchError(TpukitError, TypeError):
    """A compiled object was called with arguments that do not match its signature."""


class DeviceNotFoundError(TpukitError, RuntimeError):
    """The platform the user asked for is not available in this runtime."""


class DeviceSetupError(TpukitError, RuntimeError):
    """A device setting can no longer take effect (JAX is already initialised)."""


class DeviceMemoryError(TpukitError, MemoryError):
    """A program or its data does not fit in the device's free memory."""


class WrongTypeError(TpukitError, TypeError):
    """A public function was given a value of a type it does not take."""


class UnknownNameError(TpukitError, KeyError):
    """A name looked up in a collection (a model, an instruction, a row) is not there.

    The message reads as written; a plain ``KeyError`` would print it quoted.

    >>> str(UnknownNameError("no model named 'mlp2'; valid names: mlp, lenet5"))
    "no model named 'mlp2'; valid names: mlp, lenet5"
    """

    def __str__(self) -> str:
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class HloTextError(TpukitError, ValueError):
    """HLO text that cannot be read as a whole module: cut short, incomplete or malformed."""


class HloFileError(TpukitError, OSError):
    """An HLO file or dump folder that cannot be read (missing, unreadable, not text)."""


# The HLO layer and its viewer.
class MissingHloFileError(HloFileError, FileNotFoundError):
    """The path given as an HLO file does not exist."""


class AssetError(TpukitError, ValueError):
    """A viewer asset holds text that would end its ``<script>`` early (a broken install)."""


# The machine.
class LaunchError(TpukitError, ValueError):
    """``launch`` was given something it cannot run (no script, a bad count)."""


# Measuring.
class ProfileError(TpukitError, RuntimeError):
    """A trace could not be taken or read, or held no per-instruction times for the program."""


# Compiling.
class CompileCacheError(TpukitError, OSError):
    """The compile cache folder cannot be created or written."""


class RecompileError(TpukitError, RuntimeError):
    """A function compiled again inside ``tpukit.no_recompile()``."""


# Models and data.
class StateDictError(TpukitError, ValueError):
    """A state dict does not match the model: tensors missing, extra, or mis-shaped."""


class DownloadError(TpukitError, OSError):
    """No mirror could deliver a file: offline, not found, or the transfer broke off."""


class ChecksumError(TpukitError, ValueError):
    """A file arrived whole but its SHA-256 is not the published one."""


class IDXFormatError(TpukitError, ValueError):
    """A file is not a valid IDX file (bad magic number, truncated, corrupt gzip)."""


class MnistSourceError(TpukitError, ValueError):
    """A local MNIST source (``source=`` or ``TPUKIT_MNIST``) that mnist() cannot read as MNIST."""


class MnistSourceNotFoundError(TpukitError, FileNotFoundError):
    """A local MNIST source that does not exist, or a folder without MNIST's files."""


def user_facing(function: _F) -> _F:
    """Make a public function's ``TpukitError`` start at the caller's line.

    A mistake in the input is the user's to fix, so the traceback shows their own
    line and tpukit's one-line message, not the tpukit internals that found it.
    IPython (8 and later) and pytest also hide this wrapper's frame.
    """

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # noqa: F841 - IPython and pytest hide this frame
        try:
            return function(*args, **kwargs)
        except TpukitError as exc:
            raise exc.with_traceback(None) from exc.__cause__

    return wrapper  # type: ignore[return-value]


def old_names(module: str, renamed: dict[str, str]) -> Callable[[str], Any]:
    """A module's ``__getattr__`` (PEP 562) keeping renamed names one more release.

    ``renamed`` maps each old name to the full dotted path of what replaced it; using
    an old name raises a ``DeprecationWarning`` at the user's line and gives the new
    object. Any other missing name is an ``AttributeError``, as Python says it. A
    module's own ``__getattr__`` that hands names on to this one passes ``depth=3``,
    so that the warning still points at the user's line.

    >>> import warnings
    >>> old = old_names("tpukit.zoo", {"list": "tpukit.zoo.list_models"})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     old("list").__name__
    'list_models'
    >>> print(caught[0].message)
    tpukit.zoo.list is deprecated and goes in the next release; use tpukit.zoo.list_models.
    >>> old("lst")
    Traceback (most recent call last):
    AttributeError: module 'tpukit.zoo' has no attribute 'lst'
    """

    def __getattr__(name: str, depth: int = 2) -> Any:
        new = renamed.get(name)
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module}.{name} is deprecated and goes in the next release; use {new}.",
            DeprecationWarning,
            stacklevel=depth,
        )
        home, _, attribute = new.rpartition(".")
        return getattr(importlib.import_module(home), attribute)

    return __getattr__
