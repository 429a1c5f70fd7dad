"""Test session set-up shared by every test file.

JAX reads ``XLA_FLAGS`` once, when its CPU backend starts, so the eight simulated
CPU devices that the sharding tests need are requested here, before any test
imports JAX. Tests never touch the network or ``../shared``.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=8").strip()
