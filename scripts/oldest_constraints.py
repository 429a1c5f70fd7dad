"""The oldest supported stack, derived from pyproject.toml's lower bounds.

Every runtime dependency in ``[project] dependencies`` is written ``name>=X``; X is the
oldest version tpukit supports. This script turns that one list into pip constraints
(``name==X``) for the oldest test lane, so there is no second list to keep in step:

    python scripts/oldest_constraints.py > constraints.txt     # the pins
    pip install -c constraints.txt -e '.[dev]'                  # the oldest lane
    .venv-oldest/bin/python scripts/oldest_constraints.py --check

``--check`` runs in the lane's interpreter and fails unless every pinned package is
installed at exactly its pinned version (pip may not have silently upgraded one).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
_LOWER_BOUND = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*>=\s*([0-9][0-9A-Za-z.]*)\s*$")


def oldest_pins(pyproject: Path = PYPROJECT) -> dict[str, str]:
    """``{name: oldest version}`` from each ``name>=X`` runtime dependency."""
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    pins = {}
    for requirement in dependencies:
        match = _LOWER_BOUND.match(requirement)
        if not match:
            raise SystemExit(
                f"error: {pyproject.name}: dependency {requirement!r} is not of the form "
                "'name>=X'. Each runtime dependency names its oldest supported version "
                "as a lower bound (the oldest test lane pins exactly that); rewrite it so."
            )
        pins[match[1]] = match[2]
    return pins


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def check_installed(pins: dict[str, str]) -> list[str]:
    """One line per pinned package whose installed version is not the pin (empty: all good)."""
    problems = []
    for name, version in pins.items():
        try:
            installed = importlib.metadata.version(_normal(name))
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{name}: not installed, expected {version}")
            continue
        if installed != version:
            problems.append(f"{name}: installed {installed}, expected {version}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="verify this interpreter has exactly the oldest versions installed",
    )
    args = parser.parse_args(argv)
    pins = oldest_pins()
    if not args.check:
        print("\n".join(f"{name}=={version}" for name, version in pins.items()))
        return 0
    problems = check_installed(pins)
    if problems:
        print(f"error: {sys.prefix} is not the oldest supported stack:", file=sys.stderr)
        for line in problems:
            print(f"  {line}", file=sys.stderr)
        print("next:  rm -rf .venv-oldest && make test-oldest", file=sys.stderr)
        return 1
    print(f"oldest stack in {sys.prefix}: " + ", ".join(f"{n} {v}" for n, v in pins.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
