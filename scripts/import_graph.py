"""Draw tpukit's import graph from the source: the package map, its arrows and its cycles.

Every import statement is counted: module level, under ``if TYPE_CHECKING:`` and inside
functions, absolute and relative. An import names the module it reaches: ``from
tpukit.hlo import graph`` reaches ``tpukit.hlo`` (the package's face, its ``__init__``),
``from tpukit.hlo.analysis._cost import op_counts`` reaches ``tpukit.hlo.analysis._cost`` and ``from
tpukit.compilation import _plots`` reaches ``tpukit.compilation._plots``. The parent
packages Python runs on the way are not counted: they are the same for every import.

Run it from the repository root::

    python scripts/import_graph.py            # the package map, cycles, private imports
    python scripts/import_graph.py --modules  # also every module-level arrow

``tests/project/test_architecture.py`` loads this file and checks its answers: no cycle between
modules, no package reaching into another's private modules, no arrow up the layers.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tpukit"

# The layers, lowest first: a module may import only its own layer and those before it.
# Packages on one line stand beside each other and never import each other.
LAYERS = (
    ("_errors", "_compat", "_interrupts"),
    ("_counts",),
    ("display",),
    ("hlo.text",),  # the HLO layer's rooms, each a package with its face
    ("hlo.analysis",),
    ("graph",),
    ("memory",),
    ("hlo",),  # the HLO layer's face and its program, above its rooms
    ("runtime",),
    ("measure",),
    ("compilation",),
    ("train", "datasets", "zoo"),
    ("tpukit",),  # tpukit/__init__.py: the public API
    ("magics", "_install", "_demo"),  # the tools, each above what it runs
    ("_doctor",),
    ("__main__",),
)
# Arrows up the layers that are allowed: `%load_ext tpukit` calls tpukit.magics.
HOOKS = {("tpukit", "magics")}


@dataclass(frozen=True)
class Arrow:
    """One import: from module ``source`` to module ``target``."""

    source: str
    target: str
    line: int
    where: str  # "top", "typing" (under TYPE_CHECKING) or "function"


@dataclass
class Graph:
    modules: list[str]
    arrows: list[Arrow] = field(default_factory=list)

    def package_of(self, module: str) -> str:
        return package_of(module)

    def module_edges(self) -> dict[str, set[str]]:
        """Module -> the modules it imports, the `%load_ext` hook left out."""
        edges: dict[str, set[str]] = {m: set() for m in self.modules}
        for a in self.arrows:
            if (package_of(a.source), package_of(a.target)) not in HOOKS:
                edges[a.source].add(a.target)
        return edges

    def package_arrows(self) -> Counter[tuple[str, str]]:
        return Counter(
            (package_of(a.source), package_of(a.target))
            for a in self.arrows
            if package_of(a.source) != package_of(a.target)
        )

    def module_cycles(self) -> list[list[str]]:
        return strongly_connected(self.module_edges())

    def package_cycles(self) -> list[list[str]]:
        edges: dict[str, set[str]] = {}
        for (a, b), _ in self.package_arrows().items():
            if (a, b) in HOOKS:
                continue
            edges.setdefault(a, set()).add(b)
            edges.setdefault(b, set())
        return strongly_connected(edges)

    def private_imports(self) -> list[Arrow]:
        """Arrows into another package's private modules (the face skipped)."""
        return [
            a
            for a in self.arrows
            if package_of(a.target) in PACKAGES
            and package_of(a.target) != package_of(a.source)
            and a.target != f"tpukit.{package_of(a.target)}"
        ]

    def upward(self) -> list[Arrow]:
        """Arrows from a lower layer to a higher one (or between packages side by side)."""
        rank = {name: k for k, names in enumerate(LAYERS) for name in names}
        found = []
        for a in self.arrows:
            source, target = package_of(a.source), package_of(a.target)
            if source == target or (source, target) in HOOKS:
                continue
            if rank.get(target, 99) >= rank.get(source, 99):
                found.append(a)
        return found


# Every package, a folder with a face, by its dotted path under tpukit: "hlo", "hlo.text".
PACKAGES = {
    ".".join(p.parent.relative_to(PACKAGE).parts)
    for p in PACKAGE.rglob("__init__.py")
    if p.parent != PACKAGE
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts).removesuffix(".__init__")


def package_of(module: str) -> str:
    """The innermost package holding ``module``, or the top-level module it is.

    ``tpukit.hlo.text._parser`` -> ``hlo.text``; ``tpukit.hlo._program`` -> ``hlo``;
    ``tpukit._errors`` -> ``_errors``; ``tpukit`` -> itself.
    """
    parts = module.split(".")
    if len(parts) == 1:
        return parts[0]
    for end in range(len(parts), 1, -1):
        name = ".".join(parts[1:end])
        if name in PACKAGES:
            return name
    return parts[1]


def _resolve(node: ast.ImportFrom, here: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = here.split(".") if is_package else here.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _placement(tree: ast.Module) -> dict[int, str]:
    where: dict[int, str] = {}
    for node in tree.body:
        where[id(node)] = "top"
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in ast.walk(node):
                where[id(inner)] = "typing"
    return where


def read(package: Path = PACKAGE) -> Graph:
    """Every import between tpukit's modules."""
    paths = sorted(package.rglob("*.py"))
    names = {module_name(p) for p in paths}
    graph = Graph(sorted(names))
    for path in paths:
        here = module_name(path)
        tree = ast.parse(path.read_text(), str(path))
        where = _placement(tree)
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(node, here, path.name == "__init__.py")
                for alias in node.names:  # a submodule named in the list is what it reaches
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in names else base)
            reached = set()
            for target in targets:
                while target and target not in names:  # `import tpukit.hlo.analysis._cost as c`
                    target = target.rpartition(".")[0]
                if target and target.split(".")[0] == "tpukit" and target != here:
                    reached.add(target)
            for target in sorted(reached):  # one arrow per statement and module reached
                kind = where.get(id(node), "function")
                graph.arrows.append(Arrow(here, target, node.lineno, kind))
    return graph


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """The cycles: strongly connected groups of more than one node (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
    return sorted(groups)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_imports(tests: Path = ROOT / "tests") -> dict[str, list[str]]:
    """Each test file's imports of private tpukit modules (``tpukit.x._y``)."""
    found: dict[str, list[str]] = {}
    for path in sorted(tests.rglob("*.py")):
        private = set()
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] != "tpukit" or parts[1:2] in (
                    ["_errors"],
                    ["_compat"],
                    ["_counts"],
                    ["_interrupts"],
                ):
                    continue
                first = next((k for k, p in enumerate(parts[1:], 1) if _private(p)), None)
                if first is not None:
                    private.add(".".join(parts[: first + 1]))
        if private:
            found[path.relative_to(tests).as_posix()] = sorted(private)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", action="store_true", help="list every module arrow")
    args = parser.parse_args(argv)
    graph = read()
    arrows = graph.package_arrows()
    kinds = Counter(a.where for a in graph.arrows)
    print(
        f"{len(graph.modules)} modules, {len(graph.arrows)} imports between them "
        f"({kinds['top']} module level, {kinds['typing']} TYPE_CHECKING, "
        f"{kinds['function']} in functions)\n"
    )
    print("Package map (layers lowest first; an arrow's count is its import statements):")
    for names in LAYERS:
        for name in names:
            out = sorted((t, n) for (s, t), n in arrows.items() if s == name)
            listed = ", ".join(f"{t} {n}" for t, n in out) or "-"
            print(f"  {name:<14} -> {listed}")
    cycles = graph.module_cycles()
    print(f"\nModule cycles: {len(cycles)}")
    for group in cycles:
        print("  " + " <-> ".join(m.removeprefix("tpukit.") for m in group))
    package_cycles = graph.package_cycles()
    print(f"Package cycles (the %load_ext hook aside): {len(package_cycles)}")
    for group in package_cycles:
        print("  " + " <-> ".join(group))
    upward = graph.upward()
    print(f"Arrows up the layers (the %load_ext hook aside): {len(upward)}")
    for a in upward:
        print(f"  {a.source} -> {a.target} (line {a.line}, {a.where})")
    private = graph.private_imports()
    by_package = Counter(package_of(a.source) for a in private)
    print(
        f"Imports of another package's private modules: {len(private)} "
        f"({', '.join(f'{p} {n}' for p, n in by_package.most_common()) or 'none'})"
    )
    tests = test_imports()
    print(
        f"Test files importing private modules: {len(tests)} of "
        f"{len(list((ROOT / 'tests').rglob('test_*.py')))}"
    )
    if args.modules:
        print("\nModule arrows:")
        for a in sorted(graph.arrows, key=lambda a: (a.source, a.target)):
            print(f"  {a.source} -> {a.target} ({a.where})")
        print("\nPrivate imports:")
        for a in private:
            print(f"  {a.source} -> {a.target}")
        print("\nTests:")
        for name, modules in tests.items():
            print(f"  {name}: {', '.join(modules)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
