"""Find the HLO text a user points at: a string, a file, or a folder of XLA dumps.

``XLA_FLAGS=--xla_dump_to=DIR`` writes one file per module and stage, named
``module_0001.jit_f.before_optimizations.txt`` (the HLO as the framework lowered it)
and ``module_0001.jit_f.<platform>_after_optimizations.txt`` (after XLA's passes; the
platform part is ``cpu``, ``tpu``, ``sm_9.0_gpu``..., or absent), beside buffer
assignments, memory reports and LLVM IR. `read_hlo_source` reads a string or one file;
`dump_modules` lists a folder's modules and `pick_module` chooses one, with an error
that lists what is there when the choice is not clear.

    >>> parse_dump_name("module_0042.jit_step.sm_9.0_gpu_after_optimizations.txt")
    ('0042', 'jit_step', 'optimized')
    >>> parse_dump_name("module_0042.jit_step.before_optimizations.txt")
    ('0042', 'jit_step', 'lowered')
    >>> parse_dump_name("module_3879.SyncTensorsGraph.2199.sm_8.0_gpu_after_optimizations.txt")
    ('3879', 'SyncTensorsGraph.2199', 'optimized')
    >>> parse_dump_name("module_0042.jit_step.after_optimizations-buffer-assignment.txt")
"""

from __future__ import annotations

import os
import pathlib
import re
from dataclasses import dataclass, field

from tpukit._errors import ArgumentError, HloFileError, MissingHloFileError

#: The stages a program may have: as the framework lowered it, and after XLA's passes.
STAGES = ("lowered", "optimized")
# The module name may hold dots (``SyncTensorsGraph.2199``, ``cluster_3_.5``): it runs up
# to the stage suffix, whose platform part (``cpu``, ``tpu``, ``sm_8.0_gpu``) holds a dot
# only inside a GPU's compute capability.
_DUMP_NAME = re.compile(
    r"^module_(\d+)\.(.+)\.(?:(?:sm_\d+\.\d+_)?[A-Za-z][\w-]*?_)?(before|after)"
    r"_optimizations\.txt$"
)
_MLIR = re.compile(r"^\s*(module\b|func\.func\b|#loc)|\b(stablehlo|mhlo)\.\w", re.MULTILINE)
_DUMP_FLAG = "XLA_FLAGS=--xla_dump_to=DIR"


def read_bytes(path: pathlib.Path) -> bytes:
    """The file's bytes; an OS error becomes one `HloFileError` line naming the file."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise HloFileError(
            f"Cannot read the HLO file {str(path)!r}: {exc.strerror or exc}. Check that it "
            "exists and is readable (permissions, a mounted drive), or pass its text."
        ) from None


def list_folder(folder: pathlib.Path) -> list[pathlib.Path]:
    """The folder's entries, sorted; an OS error becomes one `HloFileError` line."""
    try:
        return sorted(folder.iterdir())
    except OSError as exc:
        raise HloFileError(
            f"Cannot list the dump folder {str(folder)!r}: {exc.strerror or exc}. Check its "
            "permissions, or pass one of its HLO text files."
        ) from None


@dataclass
class DumpModule:
    """One module of a dump folder: its number, its name and a file per stage."""

    number: str
    name: str
    files: dict[str, pathlib.Path] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``module_0042.jit_step``, as the dump's file names start."""
        return f"module_{self.number}.{self.name}"

    def describe(self) -> str:
        stages = ", ".join(s for s in STAGES if s in self.files)
        return f"{self.label} ({stages})"


def parse_dump_name(file_name: str) -> tuple[str, str, str] | None:
    """``(number, module name, stage)`` of an XLA dump's HLO file name, or None."""
    match = _DUMP_NAME.match(file_name)
    if match is None:
        return None
    number, name, when = match.groups()
    return number, name, "lowered" if when == "before" else "optimized"


def dump_modules(folder: pathlib.Path) -> list[DumpModule]:
    """The HLO modules in a ``--xla_dump_to`` folder, by module number."""
    found: dict[tuple[str, str], DumpModule] = {}
    for path in list_folder(folder):
        parsed = parse_dump_name(path.name)
        if parsed is None or not path.is_file():
            continue
        number, name, stage = parsed
        found.setdefault((number, name), DumpModule(number, name)).files.setdefault(stage, path)
    return sorted(found.values(), key=lambda m: (m.number, m.name))


def pick_module(folder: pathlib.Path, module: str | int | None) -> DumpModule:
    """The dump module ``module`` names: its name (``"jit_step"``), number or file prefix.

    With ``module=None`` the folder must hold one module. A name several modules share
    (a function compiled twice) or that none has raises an error listing them all.
    """
    modules = dump_modules(folder)
    if not modules:
        listed = _text_files(folder)
        raise ArgumentError(
            f"{str(folder)!r} holds no XLA dump of HLO (files named module_*.*_optimizations"
            f".txt; .txt files here: {listed}). Run with {_DUMP_FLAG}, or pass one HLO "
            "text file."
        )
    if module is None:
        chosen = modules
    else:
        key = str(module)
        number = int(key) if key.isdigit() else None
        chosen = [m for m in modules if key in (m.name, m.label) or int(m.number) == number]
        if not chosen:
            chosen = [m for m in modules if key in m.name]
    if len(chosen) == 1:
        return chosen[0]
    listed = "; ".join(m.describe() for m in modules[:12])
    more = f"; and {len(modules) - 12} more" if len(modules) > 12 else ""
    if module is None:
        what = f"{str(folder)!r} holds {len(modules)} modules"
    elif not chosen:
        what = f"no module of {str(folder)!r} is called {module!r}"
    else:
        what = f"{len(chosen)} modules of {str(folder)!r} match {module!r}"
    raise ArgumentError(
        f"{what}: {listed}{more}. Pick one with module=, by name or number, e.g. "
        f"tpukit.hlo.open({str(folder)!r}, module={modules[-1].label!r})."
    )


def read_hlo_source(source: str | os.PathLike, what: str = "graph()") -> tuple[str, str | None]:
    """``(HLO text, the file's path or None)`` for HLO text or the path of an HLO file.

    A folder, an HloProto ``.pb``, a file with no module in it and StableHLO/MLIR
    text are refused with what to pass instead; ``what`` names the caller in them.
    """
    path = None
    if isinstance(source, os.PathLike) or looks_like_a_path(source):
        path = pathlib.Path(source)
        if path.is_dir():
            listed = _text_files(path)
            raise ArgumentError(
                f"{str(path)!r} is a folder; {what} draws one module. Pass one of its HLO "
                f"text files (.txt files here: {listed}), or open the folder with "
                "tpukit.hlo.open(folder, module=..., stage=...)."
            )
        if not path.is_file():
            raise MissingHloFileError(
                f"No HLO file at {str(path)!r}. {what} takes HLO text, the path of an HLO "
                f"text file (run with {_DUMP_FLAG} and pass one of DIR's .txt files), or "
                "an HloModule."
            )
        data = read_bytes(path)
        source = _decoded(data, path)
        if "HloModule" not in source and "ENTRY" not in source and not _MLIR.search(source):
            raise ArgumentError(
                f"{path.name!r} holds no HLO module (XLA writes buffer assignments and "
                "reports beside each module). Pass the module itself: the file ending in "
                "after_optimizations.txt, or before_optimizations.txt for the lowered HLO."
            )
    if "HloModule" not in source and _MLIR.search(source):
        raise ArgumentError(
            "This is StableHLO/MLIR text (it has 'module', 'func.func' or stablehlo ops), "
            "which tpukit does not read: it draws XLA's HLO text. From JAX pass "
            "lowered.as_text(dialect='hlo', debug_info=True) or compiled.as_text(); from a "
            f"dump, run with {_DUMP_FLAG} and pass a module_*.txt file of DIR."
        )
    return source, (str(path) if path is not None else None)


def _decoded(data: bytes, path: pathlib.Path) -> str:
    """The file's text. HLO text with a stray byte that is not UTF-8 (in a comment, an
    op_name from a user's file) is read with that byte replaced; a binary file is refused
    with what to open instead (a profiler trace: ``Profile.from_trace``)."""
    if path.name.endswith(".xplane.pb"):
        raise ArgumentError(
            f"{str(path)!r} is a profiler trace (an XSpace), not HLO. Open it with "
            f"tpukit.Profile.from_trace({str(path)!r}): it reads the times and the "
            "optimized HLO the trace carries (.module holds it)."
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    head = data[:4096].lstrip()
    if head.startswith(b"HloModule") or (b"ENTRY" in data and data.count(b"\0") == 0):
        return data.decode("utf-8", errors="replace")
    raise ArgumentError(
        f"{str(path)!r} is not text (an HloProto .pb?). Pass the text dump: XLA writes it "
        "beside the .pb as a .txt file (--xla_dump_hlo_as_text); or, with JAX, "
        "jax._src.lib.xla_client.XlaComputation(module_proto_bytes).as_hlo_text()."
    )


#: The longest path Linux takes (PATH_MAX); longer text is HLO, never a file's name.
PATH_MAX = 4096


def looks_like_a_path(text: str) -> bool:
    """One line, without the braces and '=' of HLO: a file name, not HLO text. HLO text
    runs to megabytes: it is not stripped (a copy) when too long to be a name."""
    if len(text) > PATH_MAX:
        return False
    line = text.strip()
    return bool(line) and "\n" not in line and "{" not in line and " = " not in line


def _text_files(folder: pathlib.Path) -> str:
    """The first few ``.txt`` files in ``folder``, for an error that says what is there."""
    names = sorted(p.name for p in folder.glob("*.txt"))
    return ", ".join(names[:6]) + (", ..." if len(names) > 6 else "") or "none"
