"""Find the accelerator, describe it, and set JAX up before it starts.

``connect`` is the first cell of a tpukit notebook. It chooses the platform,
optionally simulates several CPU devices or joins a multi-host run, and returns
a ``DeviceTable`` that shows what JAX will compute on.

>>> import tpukit
>>> table = tpukit.connect()           # whatever is here: TPU, then GPU, then CPU
>>> table.platform in ("tpu", "gpu", "cpu")
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

import jax

from tpukit._counts import as_count
from tpukit._errors import ArgumentError, DeviceNotFoundError, DeviceSetupError
from tpukit.display import Column, Report, Table, format_bytes
from tpukit.runtime._environment import Environment, detect_environment, missing_platform_advice

Platform = Literal["auto", "tpu", "gpu", "cpu"]
_PLATFORMS = ("auto", "tpu", "gpu", "cpu")


@dataclass(frozen=True)
class DeviceInfo:
    """One device as JAX reports it, with its memory where the runtime tells."""

    id: int
    platform: str
    kind: str
    process_index: int
    coords: tuple[int, ...] | None
    core_on_chip: int | None
    bytes_in_use: int | None
    bytes_limit: int | None

    @classmethod
    def from_device(cls, device: Any) -> DeviceInfo:
        stats = None
        if device.process_index == jax.process_index():
            try:
                stats = device.memory_stats()
            except Exception:  # some runtimes raise instead of returning None
                stats = None
        stats = stats or {}
        coords = getattr(device, "coords", None)
        return cls(
            id=device.id,
            platform=device.platform,
            kind=device.device_kind,
            process_index=device.process_index,
            coords=tuple(coords) if coords is not None else None,
            core_on_chip=getattr(device, "core_on_chip", None),
            bytes_in_use=stats.get("bytes_in_use"),
            bytes_limit=stats.get("bytes_limit"),
        )


def available_bytes(device: Any) -> int | None:
    """Free memory of ``device`` in bytes: the runtime's figure, or the host's for CPUs.

    ``None`` when neither is known.
    """
    info = DeviceInfo.from_device(device)
    if info.bytes_limit is not None:
        return info.bytes_limit - (info.bytes_in_use or 0)
    if device.platform != "cpu":
        return None
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


class DeviceTable:
    """The devices JAX computes on, shown as a table in notebooks and terminals.

    Indexing and iteration give the ``jax.Device`` objects themselves, so a table
    can be passed wherever a list of devices is expected.
    """

    def __init__(self, devices: list[Any], environment: Environment):
        self.devices = list(devices)
        self.environment = environment
        self.infos = [DeviceInfo.from_device(d) for d in self.devices]

    @property
    def platform(self) -> str:
        return self.devices[0].platform if self.devices else "none"

    @property
    def default_device(self) -> Any:
        return self.devices[0]

    def __len__(self) -> int:
        return len(self.devices)

    def __iter__(self):
        return iter(self.devices)

    def __getitem__(self, index: int) -> Any:
        return self.devices[index]

    def _columns(self) -> list[str]:
        columns = ["id", "platform", "kind", "process"]
        if any(i.coords is not None for i in self.infos):
            columns.append("coords")
        if any(i.core_on_chip is not None for i in self.infos):
            columns.append("core")
        if any(i.bytes_limit is not None for i in self.infos):
            columns += ["memory in use", "memory limit"]
        return columns

    def _rows(self) -> list[list[str]]:
        columns = self._columns()
        rows = []
        for info in self.infos:
            cells = {
                "id": str(info.id),
                "platform": info.platform,
                "kind": info.kind,
                "process": str(info.process_index),
                "coords": ",".join(map(str, info.coords)) if info.coords is not None else "-",
                "core": "-" if info.core_on_chip is None else str(info.core_on_chip),
                "memory in use": format_bytes(info.bytes_in_use),
                "memory limit": format_bytes(info.bytes_limit),
            }
            rows.append([cells[c] for c in columns])
        return rows

    def _headline(self) -> str:
        count = len(self.devices)
        kinds = sorted({i.kind for i in self.infos})
        processes = jax.process_count()
        where = self.environment.name
        text = (
            f"{count} {self.platform.upper()} device{'s' if count != 1 else ''} "
            f"({', '.join(kinds)}) on {where}, JAX {jax.__version__}"
        )
        if processes > 1:
            text += f", process {jax.process_index()} of {processes}"
        return text

    def _report(self) -> Report:
        """The headline and one row per device: the text and the HTML of the table."""
        right = {"id", "process", "core", "memory in use", "memory limit"}
        columns = [Column(c, "right" if c in right else "left") for c in self._columns()]
        table = Table(columns, self._rows(), rule=True)
        return Report("tpukit-devices", self._headline(), [table])

    def __repr__(self) -> str:
        return self._report().text()

    def _repr_html_(self) -> str:
        return self._report().html()


def devices(platform: Platform = "auto") -> DeviceTable:
    """The devices of one platform (or the default one) as a ``DeviceTable``; changes nothing."""
    env = detect_environment()
    return DeviceTable(_devices_for(platform, env), env)


def connect(
    platform: Platform = "auto",
    cpu_devices: int | None = None,
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    initialization_timeout: int = 120,
) -> DeviceTable:
    """Choose where JAX computes and describe it.

    Args:
      platform: ``"auto"`` takes the best platform here (TPU, then GPU, then CPU);
        ``"tpu"``, ``"gpu"`` or ``"cpu"`` insist on one and say exactly what to do
        when it is missing. A named platform becomes JAX's default device.
      cpu_devices: simulate this many CPU devices (for sharding experiments). Must
        be called before JAX starts; afterwards it raises with how to restart.
      coordinator, num_processes, process_id: join a multi-host run through
        ``jax.distributed.initialize`` (on Cloud TPU pods all three are detected
        when omitted, which is what ``coordinator="auto"`` asks for). When all
        three are omitted, the environment variables ``TPUKIT_COORDINATOR``
        (``HOST:PORT``), ``TPUKIT_NUM_PROCESSES`` and ``TPUKIT_PROCESS_ID`` are used
        if set, as ``python -m tpukit launch -n 2 script.py`` sets them.
      initialization_timeout: seconds to wait for the coordinator.

    Returns:
      A ``DeviceTable`` (HTML table in notebooks, text in terminals).

    Example::

        tpukit.connect("cpu", cpu_devices=8)   # first cell, before any JAX work
    """
    if platform not in _PLATFORMS:
        raise ArgumentError(
            f"platform must be one of {', '.join(map(repr, _PLATFORMS))}, not {platform!r}."
        )
    env = detect_environment()
    if cpu_devices is not None:
        _simulate_cpu_devices(cpu_devices)
    if coordinator is None and num_processes is None and process_id is None:
        coordinator, num_processes, process_id = _distributed_from_environment()
    if coordinator is not None or num_processes is not None or process_id is not None:
        _join_distributed(coordinator, num_processes, process_id, initialization_timeout)
    found = _devices_for(platform, env)
    if platform != "auto":
        jax.config.update("jax_default_device", found[0])
    return DeviceTable(found, env)


def _distributed_from_environment() -> tuple[str | None, int | None, int | None]:
    """The run ``python -m tpukit launch`` describes in ``TPUKIT_*`` variables, if any."""
    address = os.environ.get("TPUKIT_COORDINATOR")
    if not address:
        return None, None, None
    try:
        return (
            address,
            int(os.environ["TPUKIT_NUM_PROCESSES"]),
            int(os.environ["TPUKIT_PROCESS_ID"]),
        )
    except (KeyError, ValueError):
        raise DeviceSetupError(
            f"TPUKIT_COORDINATOR={address!r} is set, so TPUKIT_NUM_PROCESSES and "
            "TPUKIT_PROCESS_ID must be whole numbers too; got "
            f"{os.environ.get('TPUKIT_NUM_PROCESSES')!r} and "
            f"{os.environ.get('TPUKIT_PROCESS_ID')!r}. Start the script with "
            "python -m tpukit launch, or unset TPUKIT_COORDINATOR."
        ) from None


def _devices_for(platform: str, env: Environment) -> list[Any]:
    if platform == "auto":
        return jax.devices()
    try:
        return jax.devices(platform)
    except RuntimeError:
        available = sorted({d.platform for d in jax.devices()})
        raise DeviceNotFoundError(missing_platform_advice(platform, available, env)) from None


def backends_started() -> bool:
    """True once JAX has created its backends (after which device settings are frozen)."""
    from jax._src import xla_bridge

    started = getattr(xla_bridge, "backends_are_initialized", None)
    if started is not None:
        return bool(started())
    return bool(getattr(xla_bridge, "_backends", {}))


def _simulate_cpu_devices(count: int) -> None:
    count = as_count(count, "cpu_devices")
    if backends_started():
        have = len(jax.devices("cpu"))
        if have == count:
            return
        raise DeviceSetupError(
            f"JAX has already started with {have} CPU device{'s' if have != 1 else ''}, so "
            f"cpu_devices={count} cannot take effect. Restart the kernel (Colab: Runtime > "
            f"Restart session) and run tpukit.connect(cpu_devices={count}) before any other "
            "JAX work, or set XLA_FLAGS=--xla_force_host_platform_device_count="
            f"{count} before starting Python."
        )
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except (AttributeError, KeyError):  # older JAX: only the XLA flag exists
        flags = os.environ.get("XLA_FLAGS", "")
        flags = " ".join(
            f for f in flags.split() if "xla_force_host_platform_device_count" not in f
        )
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={count}".strip()


def _wait_for_coordinator(address: str, timeout: float) -> None:
    import socket
    import time

    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ArgumentError(
            f"coordinator must be HOST:PORT, e.g. '10.0.0.2:1234', not {address!r}."
        )
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0):
                return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise DeviceSetupError(
                    f"The coordinator {address} did not answer within {timeout:g} s ({exc}). "
                    "Start process 0 first (it runs the coordinator), check the address and "
                    "port, or raise initialization_timeout."
                ) from None
            time.sleep(0.5)


def _join_distributed(
    coordinator: str | None, num_processes: int | None, process_id: int | None, timeout: int
) -> None:
    from jax._src import distributed

    if distributed.global_state.client is not None:
        return  # already joined: connect() is safe to re-run in a notebook
    if backends_started():
        raise DeviceSetupError(
            "jax.distributed must be initialised before JAX starts, and JAX has already "
            "started in this process. Restart the kernel and call tpukit.connect(coordinator=...) "
            "first."
        )
    kwargs: dict[str, Any] = {"initialization_timeout": timeout}
    if coordinator not in (None, "auto"):
        kwargs["coordinator_address"] = coordinator
        if process_id not in (None, 0):
            # JAX's client aborts the whole process when the coordinator never answers,
            # which would kill the user's kernel: check that it is reachable first.
            _wait_for_coordinator(coordinator, timeout)
    if num_processes is not None:
        kwargs["num_processes"] = num_processes
    if process_id is not None:
        kwargs["process_id"] = process_id
    try:
        jax.distributed.initialize(**kwargs)
    except Exception as exc:
        raise DeviceSetupError(
            f"Could not join the distributed run (coordinator={coordinator!r}, "
            f"num_processes={num_processes}, process_id={process_id}): {exc}. Check that "
            "process 0 is running and its address and port are reachable from here."
        ) from None
