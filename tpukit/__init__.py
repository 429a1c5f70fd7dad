"""tpukit: a notebook cockpit for XLA accelerators (TPU, GPU, CPU).

Compile plain Python/JAX from a notebook cell, see what XLA made of it, and run
it on the device::

    %load_ext tpukit
    %tpu_devices

    %%tpu_compile f(f32[128,784])
    def f(x):
        return jax.nn.relu(x @ w)

The same from Python::

    import tpukit
    tpukit.connect()                          # find and describe the devices
    c = tpukit.compile(f, tpukit.shape("f32[128,784]"))
    c.cost.flops, c.op_counts(), c(tpukit.put(x))

This module is the map of the product: everything public is named here, with the
face (``__init__.py``) of the package that implements it, and imported from it on
first use, so ``import tpukit`` is quick and ``import tpukit.hlo`` loads no JAX.
``import tpukit`` does not import IPython; the magics live in ``tpukit.magics``.
"""

import importlib
from typing import Any

from tpukit._errors import (
    ArgumentError,
    CallLineError,
    CompileError,
    DeviceNotFoundError,
    DeviceSetupError,
    ShapeSpecError,
    SignatureMismatchError,
    TpukitError,
    UnknownNameError,
    WrongTypeError,
    old_names,
)

__version__ = "0.1.0"

# Each public name, by the face that holds it: imported on first use (PEP 562), so that
# ``import tpukit.hlo`` reads an HLO dump without loading JAX, Flax, orbax or matplotlib.
_FACES = {
    "tpukit.compilation": (
        "Compiled",
        "CompilePhases",
        "CompileRecord",
        "Compiles",
        "DiffRow",
        "HloDiff",
        "Memory",
        "NanOrigin",
        "RecompileError",
        "Signature",
        "compile",
        "compiles",
        "diff",
        "enable_compile_cache",
        "find_nan",
        "format_shape",
        "no_recompile",
        "plot_fusions",
        "plot_ops",
        "plot_roofline",
        "set_device_memory",
        "shape",
    ),
    "tpukit.hlo": ("Cost", "Fusion", "MemoryView"),
    "tpukit.measure": ("DevicePeak", "Profile", "ProfileError", "TimingResult", "peak_for"),
    "tpukit.runtime": ("DeviceInfo", "DeviceTable", "connect", "devices", "fetch", "put"),
    "tpukit.train": (
        "CheckpointError",
        "History",
        "NonFiniteLossError",
        "NonFiniteLossWarning",
        "Trainer",
        "evaluate",
        "fit",
    ),
}
_FACE_OF = {name: face for face, names in _FACES.items() for name in names}
# every package is reachable as ``tpukit.<package>`` after ``import tpukit``, as before
_PACKAGES = (
    "compilation",
    "datasets",
    "display",
    "graph",
    "hlo",
    "measure",
    "memory",
    "runtime",
    "train",
    "zoo",
)
_old_name = old_names(
    __name__,
    {
        "parse_shape": "tpukit.shape",  # tpukit.hlo.parse_shape reads an HLO shape instead
        "CallSpec": "tpukit.compilation.CallSpec",
        "parse_call_line": "tpukit.compilation.parse_call_line",
    },
)


def __getattr__(name: str) -> Any:
    """Import a public name's package on its first use, and keep what it gave."""
    if name in _PACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    face = _FACE_OF.get(name)
    if face is None:
        return _old_name(name, depth=3)
    value = globals()[name] = getattr(importlib.import_module(face), name)
    return value


def __dir__() -> list[str]:
    return sorted({*__all__, *_PACKAGES, "__version__"})


def load_ipython_extension(ipython) -> None:
    """Called by ``%load_ext tpukit``: registers ``%%tpu_compile`` and friends."""
    from tpukit.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython) -> None:
    """Called by ``%unload_ext tpukit``."""
    from tpukit.magics import unload_ipython_extension as unload

    unload(ipython)


__all__ = [
    "ArgumentError",
    "CallLineError",
    "CheckpointError",
    "CompileRecord",
    "Compiled",
    "CompilePhases",
    "Compiles",
    "CompileError",
    "Cost",
    "DeviceInfo",
    "DeviceNotFoundError",
    "DevicePeak",
    "DeviceSetupError",
    "DeviceTable",
    "DiffRow",
    "Fusion",
    "History",
    "HloDiff",
    "Memory",
    "MemoryView",
    "NanOrigin",
    "NonFiniteLossError",
    "NonFiniteLossWarning",
    "Profile",
    "ProfileError",
    "RecompileError",
    "ShapeSpecError",
    "Signature",
    "SignatureMismatchError",
    "TimingResult",
    "TpukitError",
    "Trainer",
    "UnknownNameError",
    "WrongTypeError",
    "compile",
    "compiles",
    "connect",
    "datasets",
    "devices",
    "diff",
    "enable_compile_cache",
    "evaluate",
    "fetch",
    "find_nan",
    "fit",
    "format_shape",
    "hlo",
    "load_ipython_extension",
    "no_recompile",
    "peak_for",
    "plot_fusions",
    "plot_ops",
    "plot_roofline",
    "put",
    "set_device_memory",
    "shape",
    "train",
    "unload_ipython_extension",
    "zoo",
]
