"""A real JupyterLab 4 server for browser tests, started and stopped by the test.

`lab_server` starts ``jupyter lab`` from the test's own Python on 127.0.0.1 and a
free port, with token authentication and throw-away config, data, runtime,
settings and workspace folders, so nothing from the user's Jupyter set-up leaks in
and nothing is left behind. Its one kernel, ``tpukit-test``, runs ``sys.executable``
(the kernel uses the test's venv) with ``JAX_PLATFORMS=cpu``, ``TPUKIT_MNIST=sample``
and no ``XLA_FLAGS`` (the tests' eight simulated devices are not a notebook's).
The server, and every kernel it started, is stopped when the ``with`` block ends,
however it ends.

    >>> with lab_server(root) as lab:                                  # doctest: +SKIP
    ...     page.goto(lab.url("lab/tree/check.ipynb"))
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

KERNEL_NAME = "tpukit-test"
#: The settings of a fresh JupyterLab that would put pop-ups over the notebook.
_QUIET_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {
        "autoStartDefaultKernel": True,  # no "Select Kernel" dialog
    },
}


@dataclass(frozen=True)
class LabServer:
    """A running JupyterLab: where it listens, its token, and the folder it serves."""

    port: int
    token: str
    root: Path
    log: Path

    @property
    def data_dir(self) -> Path:
        """The server's ``JUPYTER_DATA_DIR``: where it reads notebook signatures (trust)."""
        return self.log.parent / "data"

    def url(self, path: str = "lab") -> str:
        """The address of ``path`` on this server, token included."""
        separator = "&" if "?" in path else "?"
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}{separator}token={self.token}"


def missing() -> str | None:
    """Why JupyterLab cannot be started from this Python, or ``None`` when it can."""
    for module in ("jupyterlab", "jupyter_server", "ipykernel"):
        try:
            __import__(module)
        except ImportError:
            return (
                f"{module} is not installed in {sys.executable} "
                f"(install it with: {sys.executable} -m pip install jupyterlab ipykernel)"
            )
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _write_kernelspec(data_dir: Path) -> None:
    folder = data_dir / "kernels" / KERNEL_NAME
    folder.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python (tpukit test)",
        "language": "python",
        "metadata": {"debugger": False},
    }
    (folder / "kernel.json").write_text(json.dumps(spec, indent=1))


def _write_settings(settings_dir: Path) -> None:
    for name, values in _QUIET_SETTINGS.items():
        path = settings_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


def _environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "XLA_FLAGS"))}
    env.update(
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        IPYTHONDIR=str(home / "ipython"),
        MPLCONFIGDIR=str(home / "matplotlib"),
        JAX_PLATFORMS="cpu",
        TPUKIT_MNIST="sample",
        PYTHONUNBUFFERED="1",
    )
    return env


def _die_with_parent() -> None:
    """In the server's process, before it starts: on Linux, end it if the test process dies.

    A test run killed from outside (a CI timeout) runs no ``finally``; the kernels follow
    the server, as ipykernel ends when its parent does.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _wait_until_answering(lab: LabServer, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"JupyterLab exited with status {process.returncode} before answering; "
                f"its log ({lab.log}):\n{lab.log.read_text()[-3000:]}"
            )
        try:
            with urllib.request.urlopen(lab.url("api/status"), timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)
    raise RuntimeError(
        f"JupyterLab did not answer on port {lab.port} within {timeout:.0f}s; "
        f"its log ({lab.log}):\n{lab.log.read_text()[-3000:]}"
    )


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM the server (it shuts its kernels down), then SIGKILL its process group."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=15)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # its own group: kernels left behind, if any
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


@contextlib.contextmanager
def lab_server(root: Path, timeout: float = 90.0) -> Iterator[LabServer]:
    """Run JupyterLab serving ``root`` for the ``with`` block; stop it and clean up after."""
    home = Path(tempfile.mkdtemp(prefix="tpukit-lab-"))
    process = None
    try:
        for folder in ("config", "data", "runtime", "settings", "workspaces", "ipython"):
            (home / folder).mkdir()
        _write_kernelspec(home / "data")
        _write_settings(home / "settings")
        lab = LabServer(free_port(), secrets.token_hex(16), Path(root), home / "lab.log")
        command = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={lab.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={lab.token}",
            f"--ServerApp.root_dir={root}",
            f"--MappingKernelManager.default_kernel_name={KERNEL_NAME}",
            "--KernelSpecManager.ensure_native_kernel=False",
            "--LabApp.news_url=",
            "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: run commands
            "--ServerApp.terminals_enabled=False",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-root")  # containers and CI runners often run as root
        with lab.log.open("w") as log:
            process = subprocess.Popen(
                command,
                cwd=root,
                env=_environment(home),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        _wait_until_answering(lab, process, timeout)
        yield lab
    finally:
        if process is not None:
            _stop(process)
        shutil.rmtree(home, ignore_errors=True)
