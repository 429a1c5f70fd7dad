"""The package's layers, checked from the source: who may import whom.

    display   <- hlo      <- compilation <- magics, __main__
    _errors, _counts  <- runtime  <- compilation, train
    zoo, datasets stand apart; train never imports the zoo.

`tpukit.hlo` is the pure HLO layer: it imports neither JAX nor a compilation, so anyone
can use it on a text file. Function-level imports of tpukit's own modules exist only
where a heavy part loads on first use (the graph viewer, the magics) or in the
command-line tools, never to get around an import circle.
"""

import ast
import doctest
import importlib
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import tpukit

PACKAGE = Path(tpukit.__file__).parent

# package (or top-level module) -> the tpukit packages and modules it may import
ALLOWED = {
    "display": {"display"},
    "hlo": {"hlo", "display", "_errors"},
    "runtime": {"runtime", "display", "_errors", "_counts", "_compat"},
    "compilation": {"compilation", "runtime", "hlo", "display", "_errors", "_counts", "_compat"},
    "train": {"train", "compilation", "runtime", "hlo", "display", "_errors", "_counts", "_compat"},
    "zoo": {"zoo", "display", "_errors", "_counts", "_compat"},
    "datasets": {"datasets", "display", "_errors"},
    "_errors": set(),
    "_counts": {"_errors"},
    "_compat": set(),
    "_install": {"_errors"},  # runs as a plain script before tpukit's requirements exist
}
FORBIDDEN_LIBRARIES = {
    "hlo": {"jax", "jaxlib", "flax", "IPython"},
    "display": {"jax", "flax"},
    "datasets": {"jax", "flax"},
}
# (module, imported module) pairs that load lazily on purpose
LAZY = {
    ("compilation/_compiled.py", "tpukit.hlo"),  # the graph viewer and its JavaScript
    ("hlo/__init__.py", "tpukit.hlo"),  # the same, for tpukit.hlo.graph
    ("hlo/_graph_view.py", "tpukit.hlo._dot"),  # Graphviz export, rarely used
    ("hlo/_dot.py", "tpukit.hlo._graph_data"),  # typing and the category table
    ("__init__.py", "tpukit.magics"),  # IPython only when the extension loads
    ("train/_history.py", "tpukit.display._figures"),  # matplotlib on the first plot
    ("_install.py", "tpukit._errors"),  # as a plain script it imports the file beside it
}
TOOLS = {"__main__.py", "_doctor.py", "_demo.py"}  # command-line tools import what they run


def layer(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0].removesuffix(".py") if len(relative.parts) > 1 else relative.stem


def imports(path: Path):
    """``(module name, at module level)`` for every import in ``path``."""
    tree = ast.parse(path.read_text())
    top_level = {id(node) for node in tree.body}
    for node in tree.body:  # `if TYPE_CHECKING:` imports are module-level too
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            top_level |= {id(inner) for inner in node.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in top_level
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "tpukit":
                for alias in node.names:
                    yield f"tpukit.{alias.name}", id(node) in top_level
            else:
                yield node.module, id(node) in top_level


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_each_module_imports_only_the_layers_below_it(path):
    own = layer(path)
    allowed = ALLOWED.get(own)
    for name, _ in imports(path):
        root = name.split(".")[0]
        assert root not in FORBIDDEN_LIBRARIES.get(own, ()), f"{path.name} imports {name}"
        if allowed is None or root != "tpukit" or name == "tpukit":
            continue
        target = name.split(".")[1]
        assert target in allowed, f"{own}/{path.name} imports {name}; {own} may use {allowed}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_function_level_import_of_tpukit_dodges_a_circle(path):
    relative = str(path.relative_to(PACKAGE))
    if relative in TOOLS:
        return
    for name, at_top in imports(path):
        if name.startswith("tpukit.") and not at_top:
            assert (relative, name) in LAZY, f"{relative}: function-level import of {name}"


def test_train_never_imports_the_zoo_and_only_magics_import_ipython():
    for path in SOURCES:
        names = {name for name, _ in imports(path)}
        if layer(path) == "train":
            assert not any(n.startswith("tpukit.zoo") for n in names), path
        if layer(path) not in ("magics", "display", "train"):
            # display and train import IPython lazily, to show output when a kernel runs
            assert not any(n.split(".")[0] == "IPython" for n, top in imports(path)), path


def test_every_error_tpukit_raises_on_purpose_is_a_tpukit_error():
    exempt = {"_StepFailed"}  # the doctor's own signal between its steps, never raised to users
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name.endswith(("Error", "Failed")):
                if node.name in exempt:
                    continue
                module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
                cls = getattr(importlib.import_module(module), node.name)
                assert issubclass(cls, tpukit.TpukitError), f"{module}.{node.name}"


@pytest.mark.parametrize(
    "module",
    [
        "tpukit.hlo",
        "tpukit.hlo._sources",
        "tpukit.display._units",
        "tpukit._compat",
        "tpukit.compilation._call_line",
    ],
)
def test_docstring_examples_run(module):
    results = doctest.testmod(
        importlib.import_module(module), optionflags=doctest.ELLIPSIS, raise_on_error=False
    )
    assert results.attempted > 0 and results.failed == 0


def test_magics_use_only_the_public_api():
    for name, _ in imports(PACKAGE / "magics.py"):
        if name.split(".")[0] == "tpukit":
            assert name.removeprefix("tpukit.") in tpukit.__all__, name


def test_every_module_imports_alone_in_a_fresh_interpreter():
    """No import circle: each module, imported first, brings in what it needs."""
    names = [
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        for p in SOURCES
        if p.name != "__main__.py"
    ]

    def alone(name: str) -> tuple[str, int, str]:
        done = subprocess.run(
            [sys.executable, "-c", f"import {name}"], capture_output=True, text=True
        )
        return name, done.returncode, done.stderr[-800:]

    with ThreadPoolExecutor(4) as pool:
        failed = [r for r in pool.map(alone, names) if r[1]]
    assert len(names) > 50 and not failed, failed
