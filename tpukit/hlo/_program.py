"""Any XLA program as an object: `open` reads HLO from anywhere, `HloProgram` answers about it.

One program type answers every question about HLO (how many ops of each kind, which
fusions, how many FLOPs and bytes, what the graph looks like, what XLA's passes
changed), wherever the HLO came from. A ``tpukit.Compiled`` has one (``.program``),
made from what JAX lowered and XLA optimized, with XLA's cost analysis in its `Cost`.
A dump from a TPU job, a PyTorch/XLA GPU step or a TensorFlow benchmark gets one from
`open`, which takes HLO text, an HLO file or a ``--xla_dump_to`` folder, without JAX.
``tpukit.diff``, the plots and the graph take either.

    >>> program = open('''
    ... HloModule f, is_scheduled=true
    ... ENTRY main {
    ...   x = f32[8,16]{1,0} parameter(0)
    ...   w = f32[16,4]{1,0} parameter(1)
    ...   ROOT d = f32[8,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    ... }
    ... ''')
    >>> program.name, program.stages
    ('f', ('optimized',))
    >>> program.cost.flops  # 2 * 8 * 4 * 16
    1024.0
    >>> program.cost.bytes_accessed  # reads 512 + 256 bytes, writes 128
    896.0
"""

from __future__ import annotations

import functools
import os
import pathlib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tpukit._errors import ArgumentError, HloTextError, WrongTypeError, user_facing
from tpukit.display import BORDER_COLOR, Line, Report, fact_table, format_bytes, format_flops
from tpukit.graph import ARGUMENT_NAMES, HloGraph
from tpukit.graph import graph as graph_of_text
from tpukit.hlo.analysis import (
    Collective,
    Fusion,
    collectives_of,
    executed,
    fusions_of,
    op_counts,
    repeated_loops,
    trip_count,
)
from tpukit.hlo.text import (
    PATH_MAX,
    STAGES,
    HloModule,
    parse_dump_name,
    parse_hlo,
    pick_module,
    progress,
    read_hlo_source,
    split_modules,
)
from tpukit.memory import (
    LiveRanges,
    MemoryView,
    dump_memory_files,
    estimate_live_ranges,
    parse_bytes,
    read_live_ranges,
)

_TOP_FUSIONS = 5


@dataclass(frozen=True)
class Cost:
    """FLOPs and bytes of one run of a program: tpukit's count, and XLA's where it gave one.

    tpukit counts from the HLO's shapes *as executed* (every call site, loop bodies
    times their trip count; the rules are in `tpukit.hlo.analysis._executed`). XLA's own
    ``cost_analysis`` is best effort: on GPU it leaves out convolutions that become
    cuDNN calls (VGG19 on 100 images: about 6.8e9 FLOPs where the network needs about
    3.9e12), so ``flops`` is the larger of the two counts.

    Attributes:
      flops: the best estimate: the larger of ``counted_flops`` and ``backend_flops``
        (``all_flops`` in place of ``backend_flops`` where ``repeated_loops``).
      counted_flops: **dot/conv FLOPs**, 2 x multiply-adds of every dot, convolution
        and cuBLAS/cuDNN call, counted by tpukit.
      bytes_accessed: bytes read and written, as executed: XLA's figure for a compiled
        program without repeating loops, else tpukit's count of what each instruction
        outside fusion bodies reads and writes (the two agree on XLA:CPU without loops).
      all_flops: **all FLOPs**, the dot/conv ones plus one per element of elementwise
        arithmetic and reductions (a matvec XLA rewrote into multiply + reduce).
      unknown_loops: the ``while`` loops whose trip count could not be read (counted
        once: the figures are then a lower bound).
      repeated_loops: the ``while`` loops whose body runs more than once (or an unknown
        number of times). XLA's ``cost_analysis`` counts each loop body once, so for a
        program with such loops ``flops`` and ``bytes_accessed`` take tpukit's counts
        (as executed) in place of XLA's: one rule, every figure is one run as executed.
      backend_flops: XLA's ``cost_analysis`` figure; None for HLO read from text.
      backend_bytes: XLA's ``bytes accessed`` (each loop body once); None from text.
      transcendentals: exp, log, tanh... as counted by XLA; None for HLO from text.
    """

    flops: float
    counted_flops: int
    bytes_accessed: float
    all_flops: int = 0
    unknown_loops: tuple[str, ...] = ()
    backend_flops: float | None = None
    transcendentals: float | None = None
    repeated_loops: tuple[str, ...] = ()
    backend_bytes: float | None = None

    @property
    def flops_source(self) -> str:
        """Which figure ``flops`` is: ``"tpukit"`` (its dot/conv count, or its all-FLOPs
        count where loops repeat) or ``"xla"``."""
        if (
            self.backend_flops is None
            or self.repeated_loops
            or self.counted_flops > self.backend_flops
        ):
            return "tpukit"
        return "xla"

    @property
    def arithmetic_intensity(self) -> float | None:
        """FLOPs per byte accessed: high means compute-bound, low means memory-bound."""
        return self.flops / self.bytes_accessed if self.bytes_accessed else None


def program_cost(module: HloModule, xla: Mapping[str, float] | None = None) -> Cost:
    """The `Cost` of ``module`` from its shapes, with XLA's ``cost_analysis`` figures if given."""
    run = executed(module)
    xla = xla or {}
    backend_flops = _non_negative(xla.get("flops"))
    xla_bytes = _non_negative(xla.get("bytes accessed"))
    repeats = repeated_loops(module)
    other_flops, nbytes = backend_flops or 0.0, xla_bytes
    if repeats and backend_flops is not None:  # XLA counts each loop body once, so
        other_flops = float(run.all_flops)  # its figures are not one run as executed
    if repeats or nbytes is None:
        nbytes = float(run.bytes)
    return Cost(
        flops=float(max(run.dot_flops, other_flops)),
        counted_flops=run.dot_flops,
        bytes_accessed=nbytes,
        all_flops=run.all_flops,
        unknown_loops=run.unknown_loops,
        backend_flops=backend_flops,
        transcendentals=_non_negative(xla.get("transcendentals")),
        repeated_loops=repeats,
        backend_bytes=xla_bytes,
    )


def _non_negative(value: object) -> float | None:
    if value is None:
        return None
    number = float(value)  # type: ignore[arg-type]
    return number if number >= 0 else None


def check_stage(stage: str) -> str:
    """``stage`` when it is ``"lowered"`` or ``"optimized"``; else an error saying which exist."""
    if stage not in STAGES:
        raise ArgumentError(
            f"stage must be 'lowered' or 'optimized', got {stage!r}: 'lowered' is the HLO "
            "before XLA's passes (as JAX emitted it, or a dump's before_optimizations file), "
            "'optimized' after them."
        )
    return stage


class HloProgram:
    """An XLA program: its HLO stages and what they say (ops, cost, fusions, graph, memory).

    Make one with `open` from text, a file or a dump folder; a ``tpukit.Compiled`` has
    one too (``compiled.program``), made from what JAX lowered and XLA optimized. It
    holds one or both stages of the program, ``"lowered"`` (before XLA's passes; a
    dump's ``before_optimizations`` file) and ``"optimized"`` (after them); every method
    takes ``stage=`` and defaults to the most optimized stage it has. ``tpukit.diff`` and
    ``plot_ops``/``plot_fusions``/``plot_roofline`` take it.

    Attributes:
      name: the module's name (``jit_train_step``).
      stages: the stages it holds, in order.
      stage: the stage methods use by default (``"optimized"`` when it has it).
      source: the file or folder it was read from, or None.
      device_kind: the device it was compiled for; None for HLO from text, which does
        not say (``plot_roofline`` then needs ``peak=``).
    """

    def __init__(
        self,
        texts: Mapping[str, str | Callable[[], str]],
        *,
        name: str | None = None,
        source: str | None = None,
        device_kind: str | None = None,
        xla_cost: Callable[[], Mapping[str, float]] | None = None,
        argument_names: Mapping[str, str] | None = None,
    ):
        """``texts`` maps each stage to its HLO text, or to a function that returns it
        when first asked (a compiled program's lowered text costs a second print);
        ``xla_cost`` returns XLA's ``cost_analysis`` figures for `cost`;
        ``argument_names`` maps the start of JAX's path of an argument to the name the
        user gave it (``{"traced_args[0]": "x"}``, a ``tpukit.compile``'s): the graph
        labels the program's parameters with them (``x``, ``x['w']``)."""
        unknown = set(texts) - set(STAGES)
        if not texts or unknown:
            raise ArgumentError(
                f"HloProgram takes HLO text per stage, 'lowered' and/or 'optimized'; got "
                f"{sorted(texts) or 'none'}."
            )
        self._texts = dict(texts)
        self._files: dict[str, str] = {}  # the file each stage was read from
        self._modules: dict[str, HloModule] = {}
        self._xla_cost = xla_cost
        self._argument_names = dict(argument_names or {})
        self.stages = tuple(s for s in STAGES if s in texts)
        self.stage = self.stages[-1]
        self.source = source
        self.device_kind = device_kind
        self.name = name or ""  # read by hlo_module() to name the text in its errors
        if not self.name:  # parsed once, here: a cut or incomplete text is refused at open
            self.name = self.hlo_module().name
        self.live_ranges: LiveRanges | None = None  # XLA's, when a dump folder has them

    def _check_stage(self, stage: str | None) -> str:
        stage = check_stage(self.stage if stage is None else stage)
        if stage not in self._texts:
            raise ArgumentError(
                f"{self.name} holds only the {' and '.join(self.stages)} HLO, not the {stage} "
                f"one. Open the dump folder (tpukit.hlo.open(folder, module={self.name!r})) "
                f"or the module's {'before' if stage == 'lowered' else 'after'}"
                "_optimizations.txt file for it."
            )
        return stage

    def _text(self, stage: str) -> str:
        text = self._texts[stage]
        if callable(text):
            text = self._texts[stage] = text()
        return text

    def hlo_text(self, stage: str | None = None) -> str:
        """The HLO text of ``stage`` (default: `stage`)."""
        text = self._text(self._check_stage(stage))
        if not text:
            raise ArgumentError(
                f"{self.name} was opened from a parsed HloModule, whose text is not kept; "
                "open the HLO text or file instead to read it back."
            )
        return text

    def hlo_module(self, stage: str | None = None) -> HloModule:
        """The HLO of ``stage`` parsed into tpukit's graph model (see ``tpukit.hlo``)."""
        stage = self._check_stage(stage)
        if stage not in self._modules:
            where = self._files.get(stage) or self.source
            module = parse_text(self._text(stage), where, self.name or None)
            if self._argument_names:  # read by the graph's tree (`GraphTree`)
                module._analysis[ARGUMENT_NAMES] = self._argument_names
            self._modules[stage] = module
        return self._modules[stage]

    def op_counts(self, stage: str | None = None, *, open_fusions: bool = True) -> Counter:
        """How many instructions of each opcode run (fusions opened: the ops inside count)."""
        return op_counts(self.hlo_module(stage), open_fusions=open_fusions)

    @functools.cached_property
    def cost(self) -> Cost:
        """FLOPs and bytes of one run of the default stage (see `Cost`): counted from the
        HLO, with XLA's own figures for a compiled program."""
        return program_cost(self.hlo_module(), self._xla_cost() if self._xla_cost else None)

    def fusions(self, stage: str | None = None) -> list[Fusion]:
        """The fusions XLA made, largest FLOPs first (none before XLA's passes)."""
        return fusions_of(self.hlo_module(stage))

    def collectives(self, stage: str | None = None) -> list[Collective]:
        """The cross-device collectives: count and bytes of each kind, async pairs once."""
        return collectives_of(self.hlo_module(stage))

    def graph(
        self, stage: str | None = None, *, times: Mapping[str, float] | None = None
    ) -> HloGraph:
        """An interactive graph of ``stage``, shown inline in notebooks (``tpukit.hlo.graph``)."""
        return graph(self, stage=stage, times=times)

    def memory_view(self, *, capacity: int | str | None = None) -> MemoryView:
        """The program's memory: peak, buffers at the peak, live bytes along the schedule.

        From XLA's buffer assignment and live ranges when the program was opened from a
        dump folder that has them (``*-buffer-assignment.txt``, ``*-live-range.txt``);
        otherwise estimated from the optimized schedule, and labelled an estimate.
        ``capacity`` (bytes or ``"16GiB"``) is the device memory to compare the peak with.
        """
        size = None if capacity is None else parse_bytes(capacity)
        ranges = self.live_ranges or estimate_live_ranges(self.hlo_module("optimized"))
        return MemoryView(self.hlo_module("optimized"), ranges, name=self.name, capacity=size)

    def _facts(self) -> list[tuple[str, str]]:
        module = self.hlo_module()
        cost = self.cost
        opened, closed = self.op_counts(), self.op_counts(open_fusions=False)
        intensity = cost.arithmetic_intensity
        facts = [
            ("stages", ", ".join(self.stages) + f" (shown: {self.stage})"),
            (
                "instructions",
                f"{sum(opened.values()):,} (fusions opened), {sum(closed.values()):,} outside "
                f"fusions, in {len(module.reachable()):,} computations (as written: each "
                "computation once)",
            ),
            (
                "dot/conv FLOPs",
                f"{format_flops(cost.flops)} per run (dots, convolutions, library calls)",
            ),
            ("all FLOPs", f"{format_flops(cost.all_flops)} per run (with elementwise, reduce)"),
            (
                "bytes",
                f"{format_bytes(cost.bytes_accessed)} read and written per run (estimated)"
                + (f", {intensity:.3g} FLOP/byte" if intensity else ""),
            ),
        ]
        loops = _loops_fact(module, cost.unknown_loops)
        if loops:
            facts.append(("loops", loops))
        fusions = self.fusions()
        top = ", ".join(
            f"{f.name} ({format_flops(f.flops) if f.flops else format_bytes(f.bytes)})"
            for f in fusions[:_TOP_FUSIONS]
        )
        facts.append(("fusions", f"{len(fusions):,}" + (f"; largest: {top}" if top else "")))
        collectives = self.collectives()
        if collectives:
            facts.append(
                (
                    "collectives",
                    ", ".join(
                        f"{c.opcode} x{c.count} ({format_bytes(c.bytes)})" for c in collectives
                    ),
                )
            )
        return facts

    def _headline(self) -> str:
        where = f" from {self.source}" if self.source else ""
        return f"HloProgram {self.name!r}{where}"

    def _report(self) -> Report:
        note = Line(".graph() draws it; tpukit.diff(a, b) compares two programs.", "note")
        return Report(_KIND, self._headline(), [fact_table(self._facts()), note], _RULES)

    def __repr__(self) -> str:
        return self._report().text()

    def _repr_html_(self) -> str:
        return self._report().html()


def as_program(obj: object) -> HloProgram | None:
    """``obj`` if it is an `HloProgram`, the program it has (a ``tpukit.Compiled``'s
    ``.program``), an `HloModule` opened as one; None for anything else."""
    if isinstance(obj, HloProgram):
        return obj
    if isinstance(obj, HloModule):
        return open(obj)
    program = getattr(obj, "program", None)
    return program if isinstance(program, HloProgram) else None


@user_facing
def graph(
    hlo: str | os.PathLike | HloModule | HloProgram,
    *,
    title: str | None = None,
    stage: str | None = None,
    times: Mapping[str, float] | None = None,
    memory: Mapping[str, int] | None = None,
) -> HloGraph:
    """An interactive graph of a program: an `HloProgram` (or a ``tpukit.Compiled``'s), HLO
    text, an HLO file's path or a parsed `HloModule`. The arguments and the graph are
    `tpukit.graph._graph_view.graph`'s; a program's stage defaults to its `HloProgram.stage`
    and its title to its name.

        >>> view = graph(program)  # the program opened above
        >>> view.stage
        'optimized'
    """
    program = None if isinstance(hlo, (str, os.PathLike, HloModule)) else as_program(hlo)
    if program is None:
        return graph_of_text(hlo, title=title, stage=stage, times=times, memory=memory)
    stage = program._check_stage(stage)
    title = title if title is not None else program.name
    with progress(f"opening the graph of {title or 'the program'}"):
        module = program.hlo_module(stage)
        if not module.computations:
            raise ArgumentError(
                "This HLO module has no computation to draw; pass the module's full text."
            )
        return HloGraph(module, title=title, stage=stage, times=times, memory=memory)


def _loops_fact(module: HloModule, unknown: tuple[str, ...]) -> str:
    """``while.3 x16, while.9 unknown trip count (counted once)``; empty without loops."""
    loops = [
        i
        for c in module.computations.values()
        if c.name in module.reachable()
        for i in c
        if i.opcode == "while"
    ]
    parts = []
    for instr in loops[:_TOP_FUSIONS]:
        trips = trip_count(instr, module)
        parts.append(
            f"{instr.name} unknown trip count (counted once)"
            if trips is None
            else f"{instr.name} x{trips}"
        )
    more = len(loops) - _TOP_FUSIONS
    text = ", ".join(parts) + (f", and {more} more" if more > 0 else "")
    if unknown and more > 0:
        text += f"; {len(unknown)} with unknown trip count"
    return text


_KIND = "tpukit-hlo-program"
_RULES = f"&{{border:1px solid {BORDER_COLOR};border-radius:4px;padding:6px 10px;max-width:980px}}"


@user_facing
def open(  # noqa: A001 - tpukit.hlo.open reads like the builtin, on purpose
    source: str | os.PathLike | HloModule,
    *,
    module: str | int | None = None,
    stage: str | None = None,
) -> HloProgram:
    """Open any XLA program: HLO text, an HLO text file, or a folder of XLA dumps.

    Args:
      source: HLO text (``compiled.as_text()``), the path of an HLO text file, the
        path of a folder written with ``XLA_FLAGS=--xla_dump_to=DIR``, or an
        `HloModule`.
      module: in a dump folder, which module: its name (``"jit_train_step"``,
        dots and all), its number (``42`` for ``module_0042.*``) or the file prefix
        (``"module_0042.jit_train_step"``); both stages of it are read. In text or a
        file holding several ``HloModule``s, its name or position (``0``, ``1``...).
        Needed when there are several; the error lists them.
      stage: ``"lowered"`` (before XLA's passes) or ``"optimized"`` (after). In a
        folder, the default keeps both stages the dump has; for a file, the default
        reads the stage from its dump name, else calls a scheduled module or one with
        fusions optimized, and any other lowered.

    Returns:
      An `HloProgram`: ``op_counts()``, ``cost``, ``fusions()``, ``collectives()``,
      ``graph()``; ``tpukit.diff`` and the plots accept it.

    Example:
        >>> program = tpukit.hlo.open(dump, module="jit_predict")  # a --xla_dump_to folder
        >>> program.stage, program.op_counts()["dot"]
        ('optimized', 2)
        >>> d = tpukit.diff(tpukit.hlo.open(dump, module=3, stage="lowered"),
        ...                 tpukit.hlo.open(dump, module=3, stage="optimized"))
        >>> d.row("fusions").a, d.row("fusions").b
        (0, 1)
    """
    if stage is not None and stage not in STAGES:
        raise ArgumentError(
            f"stage must be 'lowered' or 'optimized' (or None), got {stage!r}: 'lowered' is "
            "the HLO before XLA's passes (before_optimizations.txt), 'optimized' after."
        )
    if isinstance(source, HloModule):
        program = HloProgram({stage or _guess_stage(source): ""}, name=source.name)
        program._modules[program.stage] = source  # parsed already: its text is not kept
        return program
    if not isinstance(source, (str, os.PathLike)):
        raise WrongTypeError(
            f"tpukit.hlo.open takes HLO text, a file's or a dump folder's path, or an "
            f"HloModule; got {type(source).__name__}. Pass e.g. "
            "tpukit.hlo.open('/tmp/dump', module='jit_train_step')."
        )
    path = pathlib.Path(source) if isinstance(source, os.PathLike) else None
    if path is None and _names_a_folder(source):
        path = pathlib.Path(source)
    if path is not None and path.is_dir():
        return _open_dump(path, module, stage)
    text, file = read_hlo_source(source, "tpukit.hlo.open()")
    text = _one_module(text, module, file)
    parsed = parse_text(text, file, None)
    if not parsed.computations:
        raise ArgumentError(
            "This HLO text has no computation; pass a module's full text (HloModule ... "
            "ENTRY ... { ... })."
        )
    named = parse_dump_name(pathlib.Path(file).name) if file else None
    stage = stage or (named[2] if named else _guess_stage(parsed))
    program = HloProgram({stage: text}, name=parsed.name, source=file)
    program._modules[stage] = parsed
    return program


def _names_a_folder(source: str) -> bool:
    """Whether ``source`` is a folder's path. HLO text runs to megabytes and to lines:
    it is neither stripped (a copy) nor asked of the file system (too long a name)."""
    return len(source) <= PATH_MAX and "\n" not in source.strip() and os.path.isdir(source)


def _open_dump(folder: pathlib.Path, module: str | int | None, stage: str | None) -> HloProgram:
    found = pick_module(folder, module)
    stages = [stage] if stage is not None else [s for s in STAGES if s in found.files]
    missing = [s for s in stages if s not in found.files]
    if missing:
        raise ArgumentError(
            f"{found.label} in {str(folder)!r} has no {missing[0]} HLO (it has "
            f"{', '.join(found.files)}). Pass stage={next(iter(found.files))!r}, or dump "
            "both stages (XLA writes before_optimizations and after_optimizations files)."
        )
    texts = {s: read_hlo_source(found.files[s], "tpukit.hlo.open()")[0] for s in stages}
    program = HloProgram(texts, name=found.name, source=str(folder))
    program._files = {s: str(found.files[s]) for s in stages}
    for each in stages:  # a cut or incomplete file is refused now, naming the file
        program.hlo_module(each)
    memory = dump_memory_files(folder, found.label)  # memory hook: XLA's live ranges
    if memory is not None and "optimized" in texts:
        program.live_ranges = read_live_ranges(*memory)
    return program


def _one_module(text: str, module: str | int | None, file: str | None) -> str:
    """The text of the one module ``module`` picks in text that may hold several."""
    if module is None and text.count("HloModule") <= 1:  # one module (20x quicker than
        return text  # the line-anchored search that splits a 50 MB text)
    where = repr(file) if file else "This HLO text"
    modules = split_modules(text)
    if len(modules) == 1:
        if module is None or str(module) in (modules[0][0], "0"):
            return text
        raise ArgumentError(
            f"module= picks one of several modules; {where} holds one "
            f"({modules[0][0] or 'unnamed'!r}). Leave module= out, or pass a dump folder."
        )
    names = [name for name, _ in modules]
    listed = ", ".join(f"{k}: {name!r}" for k, name in enumerate(names[:12]))
    listed += f", and {len(names) - 12} more" if len(names) > 12 else ""
    if module is not None:
        key = str(module)
        chosen = [t for name, t in modules if name == key]
        if key.isdigit() and int(key) < len(modules):
            chosen = [modules[int(key)][1]]
        if len(chosen) == 1:
            return chosen[0]
    raise ArgumentError(
        f"{where} holds {len(modules)} HLO modules ({listed})"
        + (
            f", and module={module!r} picks {'none' if module is not None else 'one'}"
            if module is not None
            else ""
        )
        + f". Pick one with module=, by name or position, e.g. tpukit.hlo.open(..., "
        f"module={names[-1]!r})."
    )


def parse_text(text: str, where: str | None, name: str | None) -> HloModule:
    """Parse one module's text; an error names the file, a slow parse says so."""
    what = f"parsing {where or name or 'HLO text'} ({len(text) / 1e6:.0f} MB of HLO)"
    try:
        with progress(what):
            return parse_hlo(text)
    except HloTextError as exc:
        if not where:
            raise
        raise HloTextError(f"{where}: {exc}") from None


def _guess_stage(module: HloModule) -> str:
    """``"optimized"`` for a scheduled module or one with fusions, else ``"lowered"``."""
    if module.attributes.get("is_scheduled") == "true":
        return "optimized"
    return "optimized" if any(i.opcode == "fusion" for i in module.instructions()) else "lowered"
