"""Every example in tpukit's docstrings runs, as written, and shows what it says.

Each module's examples run in one namespace, in source order (the module's own
docstring first), so a function's example may use what the module's example built,
as a reader going down the file would. The namespace starts with the imports that
examples take for granted (`NAMESPACE`), ``dump``, a real XLA dump folder, and
``trace``, a real TPU trace file; the
examples run in a fresh folder, so files they write go nowhere. An example marked
``+SKIP`` runs nothing and proves nothing: none may be, outside `SKIPS_LEFT`.
"""

import doctest
import importlib
import io
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpukit
from tests._support.data import DATA

PACKAGE = Path(tpukit.__file__).parent
DUMP = DATA / "hlo" / "dump"  # an XLA dump folder (--xla_dump_to)
TRACE = DATA / "tpu_v6e_jit_f.xplane.pb"  # a TPU v6e's jax.profiler trace file
NAMESPACE = {"tpukit": tpukit, "jax": jax, "jnp": jnp, "np": np}
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

#: Modules whose examples are left as they are, and why (the graph's and the diff view's,
#: left while issue 22 rebuilt them, run since issue 41).
LEFT: dict[str, str] = {}
#: Packages whose modules may still mark examples +SKIP (besides those in `LEFT`), and why.
SKIPS_LEFT: dict[str, str] = {}


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(
        ".__init__"
    )


WITH_EXAMPLES = sorted(
    module_name(p)
    for p in PACKAGE.rglob("*.py")
    if re.search(r"^\s*>>> ", p.read_text(encoding="utf-8"), re.M)
)


def run_examples(name: str) -> tuple[int, int, str]:
    """(examples tried, failed, the report of the failures) for one module."""
    module = importlib.import_module(name)
    namespace = {**NAMESPACE, **vars(module), "dump": str(DUMP), "trace": str(TRACE)}
    tests = doctest.DocTestFinder().find(module, name, globs=namespace)
    source = Path(module.__file__).read_text(encoding="utf-8")
    tests.sort(key=lambda t: (t.name != name, source.find(t.docstring or ""), t.name))
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report = io.StringIO()
    for test in tests:
        test.globs = namespace  # one namespace for the whole module
        runner.run(test, out=report.write, clear_globs=False)
    return runner.tries, runner.failures, report.getvalue()


def test_every_module_with_examples_is_checked():
    assert len(WITH_EXAMPLES) > 60
    assert set(LEFT) <= set(WITH_EXAMPLES)


def may_skip(name: str) -> bool:
    return name in LEFT or any(name == m or name.startswith(m + ".") for m in SKIPS_LEFT)


@pytest.mark.parametrize("name", [m for m in WITH_EXAMPLES if m not in LEFT])
def test_the_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tried, failed, report = run_examples(name)
    assert failed == 0, report
    assert tried > 0 or may_skip(name), f"{name}: every example is skipped"


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_no_example_is_skipped(name):
    if may_skip(name):
        return
    path = Path(importlib.import_module(name).__file__)
    skipped = [
        line.strip() for line in path.read_text(encoding="utf-8").splitlines() if "+SKIP" in line
    ]
    assert skipped == [], f"{name}: make these examples run: {skipped}"
