"""Bring an environment up to tpukit's requirements without losing the accelerator.

The one place where ``install/install_tpukit.ipynb`` and ``install/install.sh`` decide
what to install. Both first install tpukit itself with ``pip install --no-deps``, then
run this file as a plain script (it needs only the standard library and ``packaging``,
so it runs before tpukit's dependencies can be imported)::

    python path/to/site-packages/tpukit/_install.py [--pip-option=--no-index] [--report FILE]

1. **JAX and the accelerator.** A JAX that already uses the machine's TPU or GPU is
   kept (reinstalling JAX on Colab is the usual way to lose the accelerator); a missing
   JAX, or one that does not see the hardware, gets the matching build (``jax[tpu]``,
   ``jax[cuda12]``...).
2. **The requirements,** read from the installed tpukit's metadata
   (``importlib.metadata.requires("tpukit")``, i.e. pyproject.toml's dependencies),
   compared with what is installed: each is *kept*, or *installed* / *upgraded* when
   missing or too old, with every kept requirement and the JAX build pinned, so pip
   changes nothing else. A JAX too old for tpukit that does see a TPU or GPU is not
   replaced here: the message gives the command and says to restart.
3. **The check:** ``python -m tpukit doctor`` in a fresh process (a zoo model, a short
   ``fit``, a checkpoint, a compile and its graph); "tpukit works" only if all pass.

Exit status 0 when tpukit works, 1 otherwise (after an ``error:`` and a ``next:`` line).
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__:
    from tpukit._errors import TpukitError
else:  # run as a script, before tpukit's requirements exist: the standard-library-only file beside it
    from _errors import TpukitError  # type: ignore[no-redef]

# Distributions that make up a JAX build; pinned whenever other packages are installed.
_JAX_BUILD = re.compile(r"^(jax|jaxlib|libtpu(-nightly)?|jax-cuda\d+-(plugin|pjrt)|jax-rocm.*)$")


class InstallError(TpukitError, RuntimeError):
    """A step failed; ``next_step`` says what the user should do."""

    def __init__(self, message: str, next_step: str):
        super().__init__(message)
        self.next_step = next_step


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# --- the machine --------------------------------------------------------------------------


def detect_hardware() -> str:
    """``"tpu"``, ``"gpu"`` (NVIDIA) or ``"cpu"``, from ``/sys`` and ``/dev`` (JAX untouched)."""
    for vendor in glob.glob("/sys/bus/pci/devices/*/vendor"):
        try:
            if Path(vendor).read_text().strip() == "0x1ae0":  # Google: a TPU
                return "tpu"
        except OSError:
            continue
    if glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"):
        return "tpu"
    if Path("/dev/nvidia0").exists():
        return "gpu"
    return "cpu"


def wanted_platform(hardware: str) -> str:
    """The platform JAX should use: the hardware, unless ``JAX_PLATFORMS`` names another."""
    chosen = os.environ.get("JAX_PLATFORMS", "").split(",")[0].strip().lower()
    return {"cuda": "gpu", "": hardware}.get(chosen, chosen)


def jax_extra(hardware: str) -> str:
    """The pip extra of the JAX build for ``hardware``: ``[tpu]``, ``[cuda12]``/``[cuda13]``, or none."""
    if hardware == "tpu":
        return "[tpu]"
    if hardware != "gpu":
        return ""
    try:
        smi = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "[cuda12]"
    match = re.search(r"CUDA Version: (\d+)", smi)
    return "[cuda13]" if match and int(match[1]) >= 13 else "[cuda12]"


def jax_backend(python: str = sys.executable) -> str | None:
    """The platform the installed JAX uses, asked in a separate process (None: no working JAX)."""
    probe = subprocess.run(
        [python, "-c", "import jax; print(jax.default_backend())"],
        capture_output=True,
        text=True,
    )
    return probe.stdout.strip().splitlines()[-1] if probe.returncode == 0 and probe.stdout else None


# --- the requirements ---------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One requirement of tpukit and what happens to it.

    ``action`` is ``kept`` (installed and new enough), ``install`` (missing), ``upgrade``
    (too old) or ``blocked`` (too old, but replacing it could lose the accelerator:
    ``advice`` says what to run instead).
    """

    name: str
    requirement: str
    installed: str | None
    action: str
    advice: str = ""


def requirements(distribution: str = "tpukit") -> list[Any]:
    """tpukit's runtime requirements from its installed metadata (extras left out)."""
    from packaging.requirements import Requirement

    try:
        lines = importlib.metadata.requires(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        raise InstallError(
            f"{distribution} is not installed in {sys.prefix}, so its requirements are unknown.",
            f"install it first: {sys.executable} -m pip install --no-deps TPUKIT_SOURCE",
        ) from None
    found = [Requirement(line) for line in lines]
    return [r for r in found if r.marker is None or r.marker.evaluate({"extra": ""})]


def installed_versions(names: list[str]) -> dict[str, str | None]:
    """``{name: installed version or None}``."""
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def plan(
    required: list[Any], installed: dict[str, str | None], hardware: str, backend: str | None
) -> list[Row]:
    """What to do with each requirement, given the installed versions and the accelerator.

    ``backend`` is the platform the installed JAX uses (None: no working JAX). JAX is the
    one package never replaced when it drives a TPU or GPU.
    """
    from packaging.version import InvalidVersion, Version

    rows = []
    for req in required:
        text = f"{req.name}{req.specifier}"
        version = installed.get(req.name)
        if version is None:
            rows.append(Row(req.name, text, None, "install"))
            continue
        try:
            new_enough = req.specifier.contains(Version(version), prereleases=True)
        except InvalidVersion:
            new_enough = False
        if new_enough:
            rows.append(Row(req.name, text, version, "kept"))
        elif _normal(req.name) == "jax" and hardware != "cpu" and backend == hardware:
            command = (
                f'{sys.executable} -m pip install -U "jax{jax_extra(hardware)}{req.specifier}"'
            )
            advice = (
                f"JAX {version} drives this {hardware.upper()} but tpukit needs {text}; "
                "it is not replaced automatically, because a JAX build that does not match "
                f"the runtime loses the {hardware.upper()}. Run: {command}, then restart the "
                "runtime (Colab: Runtime > Restart session) and run this installer again."
            )
            rows.append(Row(req.name, text, version, "blocked", advice))
        else:
            rows.append(Row(req.name, text, version, "upgrade"))
    return rows


def pip_arguments(rows: list[Row], hardware: str) -> list[str]:
    """``pip install`` arguments for the missing and too-old requirements."""
    targets = []
    for row in rows:
        if row.action in ("install", "upgrade"):
            name, spec = row.name, row.requirement[len(row.name) :]
            extra = jax_extra(hardware) if _normal(name) == "jax" else ""
            targets.append(f"{name}{extra}{spec}")
    return targets


def pins(rows: list[Row]) -> list[str]:
    """Constraints that keep everything not being changed: the kept requirements and,
    unless JAX itself is being installed, the installed JAX build (jaxlib, plugins)."""
    changing = {_normal(r.name) for r in rows if r.action in ("install", "upgrade")}
    kept = {_normal(r.name): r.installed for r in rows if r.action != "install"}
    if "jax" not in changing:
        for dist in importlib.metadata.distributions():
            name = _normal(dist.metadata["Name"] or "")
            if _JAX_BUILD.match(name):
                kept.setdefault(name, dist.version)
    return sorted(f"{n}=={v}" for n, v in kept.items() if n not in changing and v)


# --- doing it -----------------------------------------------------------------------------


def _pip(arguments: list[str], pip_options: list[str]) -> None:
    command = [sys.executable, "-m", "pip", "install", "-q", *pip_options, *arguments]
    print("$ pip install", " ".join([*pip_options, *arguments]), flush=True)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        print((done.stdout + done.stderr)[-3000:], file=sys.stderr)
        raise InstallError(
            f"pip could not install {' '.join(arguments)} (exit {done.returncode}; its message "
            "is above)",
            "check the network and pip's message, then run the installer again",
        )


def _ensure_packaging(pip_options: list[str]) -> None:
    """``packaging`` compares the versions; it is one of tpukit's requirements."""
    try:
        import packaging.requirements  # noqa: F401
    except ImportError:
        lines = importlib.metadata.requires("tpukit") or []
        wanted = next((x for x in lines if _normal(x).startswith("packaging")), "packaging")
        print(f"packaging is missing; it is needed to compare versions: installing {wanted}")
        _pip([wanted.split(";")[0]], pip_options)


def ensure_jax(hardware: str, pip_options: list[str]) -> str:
    """Keep a JAX that uses the accelerator; otherwise install the matching build.

    Returns the platform JAX uses afterwards.
    """
    wanted = wanted_platform(hardware)
    backend = jax_backend()
    if backend == wanted:
        print(f"Keeping the installed JAX: it already uses the {wanted.upper()}.")
        return backend
    extra = jax_extra(hardware) if wanted == hardware else ""
    floor = next((str(r.specifier) for r in requirements() if _normal(r.name) == "jax"), "")
    what = "no working JAX is installed" if backend is None else f"JAX uses {backend.upper()}"
    print(f"The hardware is {hardware.upper()} but {what}: installing jax{extra}{floor}.")
    _pip(["-U", f"jax{extra}{floor}"], pip_options)
    backend = jax_backend()
    if backend != wanted:
        raise InstallError(
            f"JAX still uses {backend or 'nothing'!r}, not the {wanted.upper()}",
            "restart the runtime (Colab: Runtime > Restart session) and run the installer "
            "again; if it persists, start a fresh runtime (Colab: Runtime > Disconnect and "
            f'delete runtime), or check the driver and run: pip install -U "jax{extra}"',
        )
    return backend


def print_table(rows: list[Row]) -> None:
    width = max(len(r.requirement) for r in rows) + 2
    print(f"{'requirement':<{width}}{'installed':<12}action")
    for row in rows:
        print(f"{row.requirement:<{width}}{row.installed or '-':<12}{row.action}")


def ensure_requirements(hardware: str, backend: str | None, pip_options: list[str]) -> list[str]:
    """Install the missing and too-old requirements, pinning the rest; returns what changed."""
    required = requirements()
    before = installed_versions([r.name for r in required])
    rows = plan(required, before, hardware, backend)
    print("tpukit's requirements (from its installed metadata):")
    print_table(rows)
    blocked = [r for r in rows if r.action == "blocked"]
    if blocked:
        raise InstallError(f"{blocked[0].name} is too old", blocked[0].advice)
    targets = pip_arguments(rows, hardware)
    if not targets:
        print("All of tpukit's requirements are met: nothing was installed.")
        return []
    with tempfile.TemporaryDirectory() as folder:
        constraints = Path(folder, "keep.txt")
        constraints.write_text("\n".join(pins(rows)) + "\n")
        _pip([*targets, "-c", str(constraints)], pip_options)
    importlib.invalidate_caches()
    after = installed_versions([r.name for r in required])
    rows = plan(required, after, hardware, jax_backend())
    unmet = [r for r in rows if r.action != "kept"]
    if unmet:
        print_table(rows)
        raise InstallError(
            f"after pip, {unmet[0].requirement} is still not met ({unmet[0].installed or 'missing'})",
            unmet[0].advice or f'run: {sys.executable} -m pip install "{unmet[0].requirement}"',
        )
    changed = [n for n in before if before[n] != after[n]]
    print("Installed: " + ", ".join(f"{n} {before[n] or '(new)'} -> {after[n]}" for n in changed))
    return changed


def import_names(distributions: list[str]) -> list[str]:
    """The top-level module names the given distributions provide."""
    wanted = {_normal(d) for d in distributions}
    return sorted(
        module
        for module, dists in importlib.metadata.packages_distributions().items()
        if wanted & {_normal(d) for d in dists}
    )


def run(pip_options: list[str], report: Path | None = None) -> int:
    """The three steps; prints each and returns the exit status."""
    result: dict[str, Any] = {"works": False, "changed": [], "changed_modules": []}
    try:
        _ensure_packaging(pip_options)
        hardware = detect_hardware()
        result["hardware"] = hardware
        print(f"Accelerator hardware: {hardware.upper()}")
        if hardware == "cpu" and os.environ.get("COLAB_RELEASE_TAG"):
            print(
                "This Colab runtime has no accelerator. For one: Runtime > Change runtime "
                "type > TPU v5e-1 (or a GPU), then run the installer again. Continuing on CPU."
            )
        backend = ensure_jax(hardware, pip_options)
        result["changed"] = ensure_requirements(hardware, backend, pip_options)
        result["changed_modules"] = import_names(result["changed"])
        # Away from any checkout in the working folder: the installed copy is checked.
        doctor = subprocess.run(
            [sys.executable, "-m", "tpukit", "doctor"], cwd=tempfile.gettempdir()
        )
        if doctor.returncode != 0:
            raise InstallError(
                "the installed tpukit failed its check (see above)",
                "read the message above; the check runs again with: "
                f"{sys.executable} -m tpukit doctor",
            )
        result["works"] = True
        return 0
    except InstallError as exc:
        print(f"error: {exc}", file=sys.stderr)
        print(f"next:  {exc.next_step}", file=sys.stderr)
        return 1
    finally:
        if report is not None:
            report.write_text(json.dumps(result))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pip-option",
        action="append",
        default=[],
        help="an option for every pip call, e.g. --pip-option=--no-index",
    )
    parser.add_argument("--report", type=Path, help="write a JSON summary of what changed here")
    args = parser.parse_args(argv)
    return run(args.pip_option, args.report)


if __name__ == "__main__":
    # Run as a script, Python put this file's folder (tpukit/) first on sys.path, where
    # tpukit's own modules would shadow top-level ones: drop it.
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent]
    sys.exit(main())
