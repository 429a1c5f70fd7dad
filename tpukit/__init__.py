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

This module is the map of the product: everything public is imported here from
the face (``__init__.py``) of the package that implements it. ``import tpukit`` does not import
IPython; the magics live in ``tpukit.magics``.
"""

from tpukit import datasets, hlo, train, zoo
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
)
from tpukit.compilation import (
    CallSpec,
    Compiled,
    CompilePhases,
    CompileRecord,
    Compiles,
    DiffRow,
    HloDiff,
    Memory,
    NanOrigin,
    RecompileError,
    Signature,
    compile,
    compiles,
    diff,
    enable_compile_cache,
    find_nan,
    format_shape,
    no_recompile,
    parse_call_line,
    parse_shape,
    plot_fusions,
    plot_ops,
    plot_roofline,
    set_device_memory,
)
from tpukit.hlo import Cost, Fusion, MemoryView
from tpukit.measure import DevicePeak, Profile, ProfileError, TimingResult, peak_for
from tpukit.runtime import DeviceInfo, DeviceTable, connect, devices, fetch, put
from tpukit.train import (
    CheckpointError,
    History,
    NonFiniteLossError,
    NonFiniteLossWarning,
    Trainer,
    evaluate,
    fit,
)

__version__ = "0.1.0"

shape = parse_shape


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
    "CallSpec",
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
    "parse_call_line",
    "parse_shape",
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
