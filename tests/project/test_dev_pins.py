"""The test tools are pinned (constraints/dev.txt) and the runtime dependencies are not.

A release of pytest, ruff, Playwright or JupyterLab must not turn CI red with no change
here, so both lanes install the tools at the versions ``scripts/dev_constraints.py``
recorded; the runtime dependencies keep their ranges, whose two ends the lanes test.
"""

import importlib.util
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "dev_constraints", ROOT / "scripts" / "dev_constraints.py"
)
dev_constraints = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dev_constraints)

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def names(requirements: list[str]) -> set[str]:
    return {
        dev_constraints.normal(re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0]) for r in requirements
    }


def test_every_dev_tool_is_pinned_to_one_version():
    pins = dev_constraints.read_pins()
    assert names(PROJECT["optional-dependencies"]["dev"]) <= set(pins)
    assert all(re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", v) for v in pins.values()), pins


def test_no_runtime_dependency_is_pinned():
    assert not names(PROJECT["dependencies"]) & set(dev_constraints.read_pins())


def test_both_lanes_install_with_the_pins_and_check_them():
    makefile = (ROOT / "Makefile").read_text()
    installs = [line for line in makefile.splitlines() if "pip install -q -c" in line]
    assert len(installs) == 2 and all("$(DEV_PINS)" in line for line in installs), installs
    assert makefile.count("dev_constraints.py --check") == 2
