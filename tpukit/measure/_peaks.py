"""Published peak throughput of accelerators, for MFU and roofline figures.

Figures are dense bf16 TFLOP/s and HBM GB/s per chip (JAX's ``tpu_info.py`` for
TPUs, the scaling book and vendor sheets for GPUs: AMD's Instinct MI300X, MI325X,
MI350X and MI355X data sheets). A device that is not listed, the host CPU included, gets
no peak: tpukit then shows no MFU rather than a guess.

>>> peak_for("TPU v5 lite").bf16_tflops
197.0

A GPU trace names no chip, but its device planes carry what tells one: the vendor, the
compute capability (AMD's gfx version), the compute units, the memory and the clock.

>>> gpu_kind({"device_vendor": "AMD", "compute_cap_major": 9, "compute_cap_minor": 4,
...           "core_count": 304, "memory_size": 206141652992, "clock_rate": 2100000})
'AMD Instinct MI300X'
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DevicePeak:
    """Peak dense bf16 compute and memory bandwidth of one chip."""

    name: str
    bf16_tflops: float
    hbm_gbps: float

    @property
    def flops_per_second(self) -> float:
        return self.bf16_tflops * 1e12

    @property
    def bytes_per_second(self) -> float:
        return self.hbm_gbps * 1e9


# Ordered: the first entry whose every keyword appears in the device kind wins,
# so more specific names ("TPU v5 lite", "H100 PCIe") come before general ones.
_PEAKS: list[tuple[tuple[str, ...], DevicePeak]] = [
    (("tpu v2",), DevicePeak("TPU v2", 46.0, 716.0)),
    (("tpu v3",), DevicePeak("TPU v3", 140.0, 825.0)),
    (("tpu v4",), DevicePeak("TPU v4", 275.0, 1230.0)),
    (("tpu v5 lite",), DevicePeak("TPU v5e", 197.0, 820.0)),
    (("tpu v5e",), DevicePeak("TPU v5e", 197.0, 820.0)),
    (("tpu v5",), DevicePeak("TPU v5p", 459.0, 2460.0)),
    (("tpu v6 lite",), DevicePeak("TPU v6e", 920.0, 1640.0)),
    (("tpu v6e",), DevicePeak("TPU v6e", 920.0, 1640.0)),
    (("tpu7x",), DevicePeak("TPU7x", 2310.0, 7400.0)),
    (("h100", "pcie"), DevicePeak("H100 PCIe", 756.0, 2000.0)),
    (("h100",), DevicePeak("H100 SXM", 990.0, 3350.0)),
    (("h200",), DevicePeak("H200", 990.0, 4800.0)),
    (("a100",), DevicePeak("A100", 312.0, 2000.0)),
    ((" t4",), DevicePeak("T4 (fp16)", 65.0, 320.0)),
    (("mi300x",), DevicePeak("MI300X", 1307.4, 5300.0)),
    (("mi300a",), DevicePeak("MI300A", 980.6, 5300.0)),
    (("mi325x",), DevicePeak("MI325X", 1307.4, 6000.0)),
    (("mi350x",), DevicePeak("MI350X", 2306.9, 8000.0)),
    (("mi355x",), DevicePeak("MI355X", 2516.6, 8000.0)),
]
_GIB = 1 << 30


def peak_for(device_kind: str) -> DevicePeak | None:
    """The peak of a device given its ``device_kind`` string, or ``None`` when unknown."""
    kind = device_kind.lower()
    for keywords, peak in _PEAKS:
        if all(keyword in kind for keyword in keywords):
            return peak
    return None


def gpu_kind(stats: dict) -> str | None:
    """The chip a GPU trace's device plane describes (its stats ``device_vendor``,
    ``compute_cap_major``/``minor``, ``core_count``, ``memory_size`` in bytes and
    ``clock_rate`` in kHz), or None when they do not single one out."""
    vendor = str(stats.get("device_vendor", ""))
    try:
        cap = (int(stats["compute_cap_major"]), int(stats["compute_cap_minor"]))
        cores = int(stats["core_count"])
    except (KeyError, TypeError, ValueError):
        return None
    memory = float(stats.get("memory_size") or 0) / _GIB
    clock = float(stats.get("clock_rate") or 0) / 1e6  # GHz
    if vendor == "AMD":
        if cap == (9, 4):  # gfx942
            if cores == 228:
                return "AMD Instinct MI300A"
            if cores == 304:
                return "AMD Instinct MI325X" if memory > 224 else "AMD Instinct MI300X"
        if cap == (9, 5) and cores == 256:  # gfx950: the MI355X clocks 2.4 GHz, the MI350X 2.2
            if clock >= 2.3:
                return "AMD Instinct MI355X"
            if clock:
                return "AMD Instinct MI350X"
        return None
    if vendor == "NVIDIA" or "nvidia" in vendor.lower():
        if cap == (9, 0):
            if memory > 100:
                return "NVIDIA H200"
            return "NVIDIA H100 SXM" if cores >= 132 else "NVIDIA H100 PCIe"
        if cap == (8, 0):
            return "NVIDIA A100"
    return None
