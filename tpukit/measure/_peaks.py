"""Published peak throughput of accelerators, for MFU and roofline figures.

Figures are dense bf16 TFLOP/s and HBM GB/s per chip (JAX's ``tpu_info.py`` for
TPUs, the scaling book and vendor sheets for GPUs). A device that is not listed,
the host CPU included, gets no peak: tpukit then shows no MFU rather than a guess.

>>> peak_for("TPU v5 lite").bf16_tflops
197.0
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
]


def peak_for(device_kind: str) -> DevicePeak | None:
    """The peak of a device given its ``device_kind`` string, or ``None`` when unknown."""
    kind = device_kind.lower()
    for keywords, peak in _PEAKS:
        if all(keyword in kind for keyword in keywords):
            return peak
    return None
