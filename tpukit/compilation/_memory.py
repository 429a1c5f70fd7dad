"""A compiled program's memory from XLA's own buffer assignment, and the device's capacity.

``Compiled.memory_view()`` compiles the program's lowering once more with XLA's dump
options (``xla_dump_to``, ``xla_dump_hlo_as_text``) into a temporary folder and reads
the buffer assignment and live ranges XLA wrote there (`tpukit.memory._memory_ranges`): the
figures are XLA's, not tpukit's. When XLA writes no live-range report (a persistent-cache
hit skips the compiler; older XLA versions), the view falls back to live ranges computed
from the optimized program's schedule and says it is an estimate.

The capacity a program is checked against is, in order: `set_device_memory`, the
``TPUKIT_DEVICE_MEMORY`` environment variable (``"2GiB"``, ``"512MB"``, bytes), and the
device's own ``memory_stats()["bytes_limit"]``. Setting one makes a small device out of
any device, so out-of-memory paths can be tried on a CPU::

    >>> parse_bytes("1.5GiB"), parse_bytes("512MB"), parse_bytes("4096")
    (1610612736, 512000000, 4096)
"""

from __future__ import annotations

import os
import pathlib
import re
import tempfile
from typing import Any

import jax

from tpukit.hlo import (
    LiveRanges,
    MemoryView,
    dump_memory_files,
    estimate_live_ranges,
    parse_bytes,
    parse_hlo,
    read_live_ranges,
    user_path,
)

ENVIRONMENT_VARIABLE = "TPUKIT_DEVICE_MEMORY"
# fit's step takes state = (parameters, other model state, optimizer state) and data.
_STEP_ROLES = {
    "state[0]": "parameters",
    "state[1]": "other model state",
    "state[2]": "optimizer state",
    "data": "data",
}
_capacity_override: int | None = None


def set_device_memory(size: str | int | None) -> None:
    """Check every program against ``size`` bytes of device memory (None: the device's own).

    For trying out-of-memory handling on a small budget, on any device, CPU included:
    ``tpukit.set_device_memory("64MiB")``. The environment variable
    ``TPUKIT_DEVICE_MEMORY`` does the same for a whole process (tests, CI).
    """
    global _capacity_override
    _capacity_override = None if size is None else parse_bytes(size)


def configured_capacity() -> tuple[int, str] | None:
    """The capacity set by `set_device_memory` or ``TPUKIT_DEVICE_MEMORY``, with its origin."""
    if _capacity_override is not None:
        return _capacity_override, "set by tpukit.set_device_memory"
    text = os.environ.get(ENVIRONMENT_VARIABLE)
    if text:
        return parse_bytes(text), f"set by {ENVIRONMENT_VARIABLE}={text}"
    return None


def device_capacity(device: Any) -> tuple[int | None, str]:
    """The memory a program may use on ``device``: a configured capacity, else the device's."""
    configured = configured_capacity()
    if configured is not None:
        return configured
    try:
        stats = device.memory_stats() or {}
    except Exception:  # CPU devices and some plugins have no memory statistics
        stats = {}
    limit = stats.get("bytes_limit")
    if limit:
        return int(limit), f"{device.device_kind} bytes_limit"
    return None, ""


def xla_live_ranges(lowered: Any, module_name: str) -> tuple[LiveRanges, str] | None:
    """XLA's live ranges and optimized HLO text of ``lowered``, compiled again with dumps on.

    None when XLA wrote no live-range report (an older XLA, or a persistent-cache hit).
    """
    with tempfile.TemporaryDirectory(prefix="tpukit-memory-") as folder:
        options = {
            "xla_dump_to": folder,
            "xla_dump_hlo_as_text": True,
            "xla_dump_hlo_module_re": re.escape(module_name),
            "xla_dump_hlo_pass_re": "",
        }
        try:
            lowered.compile(compiler_options=options)
        except Exception:  # an option this XLA does not know, or a compile that fails
            return None
        path = pathlib.Path(folder)
        for live in sorted(path.glob("*after_optimizations-live-range.txt")):
            prefix = live.name.split(".", 1)[0] + "." + module_name
            files = dump_memory_files(path, prefix)
            texts = sorted(path.glob(f"{prefix}.*after_optimizations.txt"))
            if files is not None and texts:
                return read_live_ranges(*files), texts[0].read_text()
    return None


def memory_view_of(compiled: Any, *, capacity: int | str | None = None) -> MemoryView:
    """The `MemoryView` of a ``tpukit.Compiled`` (see ``Compiled.memory_view``)."""
    module = compiled.program.hlo_module("optimized")
    found = xla_live_ranges(compiled.lowered, module.name)
    if found is not None:
        ranges, text = found
        module = parse_hlo(text)
    else:
        ranges = estimate_live_ranges(module)
    if capacity is not None:
        limit, origin = parse_bytes(capacity), "given"
    else:
        limit, origin = device_capacity(compiled.devices[0])
    stats = _memory_analysis(compiled.jax_compiled)
    xla_peak = getattr(stats, "peak_memory_in_bytes", None) if stats is not None else None
    names = _argument_names(compiled)
    arguments = [user_path(p.metadata.op_name, names) for p in module.entry.parameters]
    is_step = any(name.startswith("state[2]") for name in arguments)
    return MemoryView(
        module,
        ranges,
        name=compiled.name,
        xla_peak=int(xla_peak) if xla_peak else None,
        xla_peak_note=_peak_note(compiled, stats, estimate=found is None),
        capacity=limit,
        capacity_source=origin,
        roles=_STEP_ROLES if is_step else None,
        argument_names=names,
        output_names=_output_names(compiled),
    )


def _argument_names(compiled: Any) -> dict[str, str]:
    """``{"traced_args[0]": "x"}``: the view names the arguments as the user did
    (``Compiled.argument_paths``: fit's step's flat leaves by their place in its state)."""
    paths = getattr(compiled, "argument_paths", None)
    return paths() if paths is not None else {}


def _output_names(compiled: Any) -> list[str]:
    """The path of each leaf of the result (``result[0]['w']``), in XLA's output order."""
    output = getattr(getattr(compiled, "signature", None), "output", None)
    if output is None:
        return []
    leaves = jax.tree_util.tree_flatten_with_path(output)[0]
    return ["result" + jax.tree_util.keystr(path) for path, _ in leaves]


def _memory_analysis(executable: Any) -> Any:
    try:
        return executable.memory_analysis()
    except Exception:
        return None


def _peak_note(compiled: Any, stats: Any, *, estimate: bool = False) -> str:
    """Why XLA's ``peak_memory_in_bytes`` differs from the live-range peak, where known."""
    if estimate:
        return (
            "this XLA wrote no live-range report, so the peak above is tpukit's estimate "
            "from the schedule, each value in its own buffer; XLA's figure is its own "
            "buffer assignment's"
        )
    if stats is None or compiled.devices[0].platform != "cpu":
        return "XLA's buffer-assignment figure, against the live-range report's"
    temp = getattr(stats, "temp_size_in_bytes", 0) or 0
    return (
        "on CPU, XLA's figure is arguments + outputs - aliases + constants: it leaves out "
        f"the packed temporaries' buffer (temp_size_in_bytes, {temp:,} B), which the peak "
        "above counts"
    )
