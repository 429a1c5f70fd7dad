"""The package's layers, checked from the source: who may import whom, and only through faces.

    _errors, _compat < _counts < display < hlo.text < hlo.analysis < graph < memory < hlo
        < runtime < measure < compilation < train, datasets, zoo < tpukit (the public API)
        < magics and the tools

`tpukit.hlo` is the pure HLO layer: it imports neither JAX nor a compilation, so anyone
can use it on a text file. Its rooms are packages of their own (the text reader and model
``hlo.text``, the analysis ``hlo.analysis``, the viewer ``graph``, ``memory``), and its face
stands above them. `tpukit.measure` runs what it is handed and never compiles.
Each package's `__init__.py` is its face: the only module other packages import, with
one line saying what it may import. `scripts/import_graph.py` reads every import
(module level, `TYPE_CHECKING` and in functions) and these tests check its answers: no
cycle between modules, no arrow up the layers but the `%load_ext` hook, no package
reaching into another's private modules. Function-level imports of tpukit's own modules
exist only where a heavy part loads on first use or in the command-line tools, never to
get around an import circle.
"""

import ast
import doctest
import importlib
import importlib.util
import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import tpukit
from tests._support.data import HLO_DATA

PACKAGE = Path(tpukit.__file__).parent
_spec = importlib.util.spec_from_file_location(
    "import_graph", PACKAGE.parent / "scripts" / "import_graph.py"
)
import_graph = sys.modules["import_graph"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(import_graph)

# what compilation may import; train may import the same and compilation itself
_BELOW_COMPILATION = {
    "measure",
    "runtime",
    "hlo",  # its face: the rooms below it are the HLO layer's own
    "display",
    "_errors",
    "_counts",
    "_compat",
    "_interrupts",
}
# package (or top-level module) -> the tpukit packages and modules it may import
ALLOWED = {
    "display": {"display"},
    "hlo.text": {"hlo.text", "_errors"},
    "hlo.analysis": {"hlo.analysis", "hlo.text"},
    "graph": {"graph", "hlo.text", "hlo.analysis", "display", "_errors"},
    "memory": {"memory", "graph", "hlo.text", "hlo.analysis", "display", "_errors"},
    "hlo": {"hlo", "hlo.text", "hlo.analysis", "graph", "memory", "display", "_errors"},
    "runtime": {"runtime", "display", "_errors", "_counts"},
    "measure": {"measure", "hlo", "display", "_errors", "_interrupts"},
    "compilation": {"compilation", "memory", *_BELOW_COMPILATION},  # memory: what would fit
    "train": {"train", "compilation", *_BELOW_COMPILATION},
    "zoo": {"zoo", "display", "_errors", "_counts", "_compat"},
    "datasets": {"datasets", "_errors"},
    "_errors": set(),
    "_counts": {"_errors"},
    "_compat": set(),
    "_interrupts": set(),
    "_install": {"_errors"},  # runs as a plain script before tpukit's requirements exist
}
_PURE_HLO = {"jax", "jaxlib", "flax", "IPython"}
FORBIDDEN_LIBRARIES = {
    **dict.fromkeys(("hlo", "hlo.text", "hlo.analysis", "graph", "memory"), _PURE_HLO),
    "measure": {"flax", "IPython"},
    "display": {"jax", "flax"},
    "datasets": {"jax", "flax"},
}
# (module, imported module) pairs that load lazily on purpose
LAZY = {
    ("graph/_graph_view.py", "tpukit.graph._dot"),  # Graphviz export, rarely used
    # the HLO face's program, viewer and memory load on first use (PEP 562)
    ("hlo/__init__.py", "tpukit.hlo._program"),
    ("hlo/__init__.py", "tpukit.graph"),
    ("hlo/__init__.py", "tpukit.memory"),
    ("__init__.py", "tpukit.magics"),  # IPython only when the extension loads
    ("display/__init__.py", "tpukit.display._figures"),  # matplotlib on the first figure
    ("train/_history.py", "tpukit.display"),  # the same, from train's first plot
    ("_install.py", "tpukit._errors"),  # as a plain script it imports the file beside it
}
TOOLS = {"__main__.py", "_doctor.py", "_demo.py"}  # command-line tools import what they run


def layer(path: Path) -> str:
    """The package a file is in (``hlo.text`` for ``hlo/text/_parser.py``), or its module."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return import_graph.package_of(module.removesuffix(".__init__"))


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
        target = import_graph.package_of(name)
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


GRAPH = import_graph.read(PACKAGE)


def test_no_import_cycle_between_modules():
    """Every import counted: module level, TYPE_CHECKING, in functions (the hook aside)."""
    found = {tuple(m.removeprefix("tpukit.") for m in group) for group in GRAPH.module_cycles()}
    assert not found, f"import cycles: {sorted(found)}"
    assert GRAPH.package_cycles() == []


def test_no_import_runs_up_the_layers():
    assert GRAPH.upward() == []


def test_packages_reach_each_other_only_through_their_faces():
    private = [f"{a.source} -> {a.target} (line {a.line})" for a in GRAPH.private_imports()]
    assert not private, "import the package's face instead:\n" + "\n".join(private)


@pytest.mark.parametrize("package", sorted(import_graph.PACKAGES))
def test_each_face_says_in_one_line_what_its_package_may_import(package):
    face = importlib.import_module(f"tpukit.{package}")
    # the paragraph that starts "Imports:" (one line, or a few when the list is long)
    lines = re.findall(r"^Imports:.*(?:\n.+)*", face.__doc__ or "", flags=re.M)
    assert len(lines) == 1, f"tpukit/{package}/__init__.py: one 'Imports:' line in its docstring"
    said = set(re.findall(r"``tpukit\.([\w.]+)``", lines[0]))
    allowed = ALLOWED[package] - {package}
    assert said == allowed, f"{package}: the face says {said}, the rule is {allowed}"


@pytest.mark.parametrize(
    "module",
    [
        "tpukit.hlo",
        "tpukit.hlo.text._sources",
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


def test_magics_import_the_packages_faces_not_the_root():
    """``tpukit.load_ipython_extension`` imports the magics; they never import ``tpukit``."""
    faces = {f"tpukit.{package}" for package in import_graph.PACKAGES} | {"tpukit._errors"}
    for name, _ in imports(PACKAGE / "magics.py"):
        if name.split(".")[0] == "tpukit":
            assert name in faces, f"magics.py imports {name}; import a package's face"


def test_every_public_name_loads_from_its_face_and_old_names_warn():
    for name in tpukit.__all__:
        assert getattr(tpukit, name) is not None, name
    assert set(tpukit.__all__) <= set(dir(tpukit)) and set(tpukit._FACE_OF) <= set(tpukit.__all__)
    with pytest.warns(DeprecationWarning, match=r"tpukit\.parse_shape .* use tpukit\.shape"):
        assert tpukit.parse_shape is tpukit.shape
    with pytest.warns(DeprecationWarning, match=r"tpukit\.hlo\.HloCost .* tpukit\.hlo\.Cost"):
        assert tpukit.hlo.HloCost is tpukit.hlo.Cost
    with pytest.raises(AttributeError, match="has no attribute 'parse_shapes'"):
        tpukit.parse_shapes  # noqa: B018


# Imports each tpukit module named on its command line as the first tpukit module of the
# process: tpukit's modules are dropped from sys.modules before each one. The libraries
# tpukit builds on (JAX, Flax, orbax, matplotlib...) are imported once, up front: a circle
# can only run through tpukit's own modules, and each library's import costs seconds.
# Given ``--hlo-first FILE``, the process first opens that HLO file and draws its graph,
# before any library is loaded, and reports which of them that brought in.
FIRST_IMPORTS = """
import importlib, json, sys, traceback
brought_in = []
if sys.argv[1] == "--hlo-first":
    import tpukit.hlo
    tpukit.hlo.open(open(sys.argv[2]).read()).graph()._repr_html_()
    brought_in = sorted({m.split(".")[0] for m in sys.modules}
                        & {"jax", "flax", "orbax", "matplotlib", "optax", "IPython"})
    del sys.argv[1:3]
for library in ("jax", "flax.nnx", "optax", "orbax.checkpoint", "numpy", "matplotlib.pyplot",
                "IPython", "tqdm", "pooch"):
    importlib.import_module(library)
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "tpukit" or m.startswith("tpukit.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except BaseException:
        failed.append((name, traceback.format_exc()[-800:]))
print(json.dumps({"failed": failed, "brought_in": brought_in}))
"""
HLO_TEXT = HLO_DATA / "jax_mlp.hlo"


@pytest.fixture(scope="module")
def first_imports() -> dict:
    """Every module imported first in one of two fresh interpreters; the first of them
    opens an HLO file before anything else is imported."""
    names = [
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        for p in SOURCES
        if p.name != "__main__.py"
    ]

    def first(arguments: list[str]) -> dict:
        done = subprocess.run(
            [sys.executable, "-c", FIRST_IMPORTS, *arguments], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.splitlines()[-1])

    batches = [["--hlo-first", str(HLO_TEXT), *names[0::2]], names[1::2]]
    with ThreadPoolExecutor(2) as pool:
        hlo_first, other = pool.map(first, batches)
    return {
        "modules": len(names),
        "failed": hlo_first["failed"] + other["failed"],
        "brought_in": hlo_first["brought_in"],
    }


def test_every_module_imports_alone_in_a_fresh_interpreter(first_imports):
    """No import circle: each module, imported first, brings in what it needs (two
    processes share the modules; within each, every module starts without tpukit)."""
    assert first_imports["modules"] > 50 and not first_imports["failed"], first_imports["failed"]


def test_an_hlo_file_opens_and_draws_without_jax_or_ipython(first_imports):
    """``import tpukit.hlo`` loads the root's public API lazily (PEP 562): an HLO dump
    from another machine opens without JAX, Flax, orbax, optax, matplotlib or IPython."""
    assert first_imports["brought_in"] == []
