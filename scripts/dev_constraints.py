"""The development tools at exact versions: ``constraints/dev.txt``, and how to refresh it.

tpukit's runtime dependencies keep their ranges (the two test lanes test both ends of
them), but the tools that run the tests (pytest, ruff, Playwright, JupyterLab, nbclient
and what they bring in) are pinned, so that a release of one of them cannot turn CI red
with no change here. ``make test`` and ``make test-oldest`` install with
``-c constraints/dev.txt``.

The file pins every package installed in the newest lane's environment except tpukit
itself and what its runtime dependencies need (their closure, markers evaluated): those
float in the newest lane and are pinned to the lower bounds in the oldest one
(``scripts/oldest_constraints.py``).

    .venv/bin/python scripts/dev_constraints.py            # print the pins of this venv
    .venv/bin/python scripts/dev_constraints.py --write    # refresh constraints/dev.txt
    .venv/bin/python scripts/dev_constraints.py --check    # every pin installed as pinned

To move to newer tools: ``rm -rf .venv && make .venv/.installed FRESH_DEV=1`` installs the
newest releases without the constraints, then ``--write`` records them; run both lanes
before committing the new file.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
CONSTRAINTS = ROOT / "constraints" / "dev.txt"
#: Installed by the lanes themselves or by CI before the tools, never pinned here.
NOT_PINNED = {"pip", "tpukit", "torch"}


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed() -> dict[str, importlib.metadata.Distribution]:
    return {normal(d.metadata["Name"]): d for d in importlib.metadata.distributions()}


def runtime_closure(installed: dict[str, importlib.metadata.Distribution]) -> set[str]:
    """tpukit's runtime dependencies and everything they require here, by normal name."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    pending = [Requirement(r) for r in project["dependencies"]]
    environment = default_environment()
    seen: set[str] = set()
    while pending:
        requirement = pending.pop()
        name = normal(requirement.name)
        if name in seen or name not in installed:
            continue
        seen.add(name)
        for text in installed[name].requires or ():
            needed = Requirement(text)
            if needed.marker is None or needed.marker.evaluate({**environment, "extra": ""}):
                pending.append(needed)
    return seen


def dev_pins() -> dict[str, str]:
    """``{name: version}`` of every installed package outside the runtime closure."""
    installed = _installed()
    runtime = runtime_closure(installed)
    return {
        name: dist.version
        for name, dist in sorted(installed.items())
        if name not in runtime and name not in NOT_PINNED
    }


def read_pins(path: Path = CONSTRAINTS) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[normal(name)] = version
    return pins


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help=f"write {CONSTRAINTS.name}")
    action.add_argument("--check", action="store_true", help="verify the installed pins")
    args = parser.parse_args(argv)
    if args.check:
        installed = _installed()
        problems = [
            f"{name}: installed {installed[name].version if name in installed else 'nothing'},"
            f" pinned {version}"
            for name, version in read_pins().items()
            if name not in installed or installed[name].version != version
        ]
        if problems:
            print(f"error: {sys.prefix} does not have the pinned dev tools:", file=sys.stderr)
            print("\n".join(f"  {p}" for p in problems), file=sys.stderr)
            return 1
        return 0
    lines = [f"{name}=={version}" for name, version in dev_pins().items()]
    if not args.write:
        print("\n".join(lines))
        return 0
    CONSTRAINTS.parent.mkdir(exist_ok=True)
    header = (
        "# The development tools at exact versions (scripts/dev_constraints.py writes this\n"
        "# file; see its docstring to refresh it). Runtime dependencies are not here.\n"
    )
    CONSTRAINTS.write_text(header + "\n".join(lines) + "\n")
    print(f"wrote {len(lines)} pins to {CONSTRAINTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
