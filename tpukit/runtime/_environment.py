"""Where the notebook runs, found without starting JAX, and what to tell the user.

JAX only reports the devices its installed plugins can drive. When the wanted
platform is missing, the useful answer depends on the machine: a Colab runtime of
the wrong type, a legacy Colab TPU that current JAX cannot use, a TPU or NVIDIA
GPU present but a JAX build without its plugin, or no such hardware at all.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

INSTALL_COMMANDS = {
    "cpu": "pip install -U jax",
    "gpu": 'pip install -U "jax[cuda13]"   (or "jax[cuda12]" for a CUDA 12 driver)',
    "tpu": 'pip install -U "jax[tpu]"',
}

_TPU_PCI_VENDOR = "0x1ae0"


@dataclass(frozen=True)
class Environment:
    """Facts about the runtime that JAX does not report."""

    colab: bool
    colab_legacy_tpu_address: str | None
    tpu_hardware: bool
    nvidia_hardware: bool

    @property
    def name(self) -> str:
        return "Google Colab" if self.colab else "local runtime"


def detect_environment() -> Environment:
    """Look at the process environment and ``/sys`` and ``/dev`` (JAX is not touched)."""
    return Environment(
        colab=_in_colab(),
        colab_legacy_tpu_address=os.environ.get("COLAB_TPU_ADDR") or None,
        tpu_hardware=_has_tpu_hardware(),
        nvidia_hardware=Path("/dev/nvidia0").exists() or Path("/dev/nvidiactl").exists(),
    )


def _in_colab() -> bool:
    if os.environ.get("COLAB_RELEASE_TAG") or os.environ.get("COLAB_GPU") is not None:
        return True
    import sys

    return "google.colab" in sys.modules


def _has_tpu_hardware() -> bool:
    for vendor_file in glob.glob("/sys/bus/pci/devices/*/vendor"):
        try:
            if Path(vendor_file).read_text().strip() == _TPU_PCI_VENDOR:
                return True
        except OSError:
            continue
    return bool(glob.glob("/dev/accel*")) or bool(glob.glob("/dev/vfio/[0-9]*"))


def missing_platform_advice(platform: str, available: list[str], env: Environment) -> str:
    """Exactly what to do when ``platform`` is wanted but JAX only sees ``available``."""
    seen = ", ".join(available) or "no devices"
    head = f"No {platform.upper()} is available to JAX here (it sees: {seen})."
    if platform == "tpu" and env.colab_legacy_tpu_address:
        return (
            f"{head} This Colab runtime exposes a legacy remote TPU at "
            f"{env.colab_legacy_tpu_address}, which current JAX cannot use (Colab moved to TPU "
            "VMs in 2024). Pick a current TPU runtime: Runtime > Change runtime type > "
            "TPU v5e-1 (or v6e-1), then Runtime > Restart session."
        )
    if env.colab:
        runtime = {"tpu": "TPU v5e-1", "gpu": "T4 GPU (or A100/L4/H100)", "cpu": "CPU"}[platform]
        present = env.tpu_hardware if platform == "tpu" else env.nvidia_hardware
        if platform != "cpu" and present:
            return (
                f"{head} The runtime has the hardware, so JAX's installed build cannot see it: "
                "a reinstalled or mismatched jax/jaxlib is the usual cause. Use Colab's "
                "preinstalled JAX: Runtime > Disconnect and delete runtime, reconnect, and "
                "install tpukit without upgrading jax."
            )
        return (
            f"{head} Colab gave this notebook a runtime without one. Choose Runtime > Change "
            f"runtime type > {runtime}, save, and run the notebook again."
        )
    if platform == "tpu" and env.tpu_hardware:
        return (
            f"{head} A TPU is attached to this machine but JAX has no TPU plugin. Install it "
            f"with `{INSTALL_COMMANDS['tpu']}` and restart the kernel."
        )
    if platform == "gpu" and env.nvidia_hardware:
        return (
            f"{head} An NVIDIA GPU is attached but this JAX build has no CUDA plugin. Install "
            f"it with `{INSTALL_COMMANDS['gpu']}` and restart the kernel."
        )
    return (
        f"{head} This machine has no {platform.upper()}. Run the notebook on a machine or "
        f"Colab runtime that has one (JAX for it: `{INSTALL_COMMANDS[platform]}`), or use "
        "platform='auto' to take what is here."
    )
