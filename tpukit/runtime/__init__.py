"""The machine tpukit runs on: its devices, its processes and the data on them.

Imports: ``tpukit.display``, ``tpukit._errors``, ``tpukit._counts``.

Finding and describing devices and connecting to a multi-host run (``_devices.py``),
where the kernel runs and what to do when a platform is missing (``_environment.py``),
moving pytrees to and from devices (``_transfer.py``), keeping one multi-device program in
flight at a time on simulated CPU devices (``_one_in_flight.py``), and launching local processes of
one ``jax.distributed`` run (``_launch.py``). (Named ``runtime`` rather than
``devices``: ``tpukit.devices`` is the public function.) This face is what tpukit's
other packages import.
"""

from tpukit._errors import LaunchError
from tpukit.runtime._devices import (
    DeviceInfo,
    DeviceTable,
    available_bytes,
    backends_started,
    connect,
    devices,
)
from tpukit.runtime._environment import Environment, detect_environment, missing_platform_advice
from tpukit.runtime._launch import free_port, launch, process_environment
from tpukit.runtime._one_in_flight import devices_of, one_at_a_time, settled
from tpukit.runtime._transfer import fetch, put

__all__ = [
    "DeviceInfo",
    "DeviceTable",
    "Environment",
    "LaunchError",
    "available_bytes",
    "backends_started",
    "connect",
    "detect_environment",
    "devices",
    "devices_of",
    "fetch",
    "free_port",
    "launch",
    "missing_platform_advice",
    "one_at_a_time",
    "process_environment",
    "put",
    "settled",
]
