"""Compare two compilations: what changed in the HLO, the cost and the memory.

Compile the same function twice (f32 and bf16, before and after a code change,
two batch sizes) and ``diff`` says what XLA did differently: op counts with
fusions opened and closed, fusions by kind, FLOPs, bytes accessed, device memory,
compile time and the signatures.

    >>> def mlp(x, w):
    ...     return jax.nn.relu(x @ w)
    >>> a = tpukit.compile(mlp, tpukit.shape("f32[128,784]"), tpukit.shape("f32[784,10]"))
    >>> b = tpukit.compile(mlp, tpukit.shape("bf16[128,784]"), tpukit.shape("bf16[784,10]"))
    >>> d = diff(a, b, labels=("f32", "bf16"))
    >>> d.row("argument bytes").ratio  # bf16 arguments take half the bytes
    0.5
    >>> print(d)   # the rows that differ, as text; a table in notebooks
    HLO diff: f32 (mlp) vs bf16 (mlp), optimized HLO: ... rows differ
    ...
    >>> fig = d.plot()   # ratios b/a of what differs, and the op counts that differ

Either side may also be a ``tpukit.hlo.HloProgram``, HLO read from a file or a dump
folder: ``diff(hlo.open(dump, stage="lowered"), hlo.open(dump, stage="optimized"))``
shows what XLA's passes did to a program compiled anywhere.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tpukit._errors import ArgumentError, UnknownNameError, WrongTypeError, user_facing
from tpukit.compilation._compiled import Compiled
from tpukit.compilation._diff_row import OPS_CLOSED, OPS_OPENED, DiffRow
from tpukit.compilation._plots import check_top, program_of
from tpukit.compilation._signature import describe_tree
from tpukit.display import (
    MUTED_COLOR,
    Column,
    Report,
    Row,
    Section,
    Table,
    format_count,
    new_figure,
)
from tpukit.hlo import (
    HloDiffView,
    HloModule,
    HloProgram,
    check_stage,
    diff_graph,
    executed,
    progress,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from tpukit.measure import Profile


@user_facing
def diff(
    a: Compiled | HloProgram,
    b: Compiled | HloProgram,
    *,
    stage: str | tuple[str, str] | None = None,
    labels: tuple[str, str] | None = None,
) -> HloDiff:
    """Compare two compilations or HLO programs; returns an `HloDiff` (a table in notebooks).

    ``stage`` picks the HLO whose op counts and fusions are compared
    (``"optimized"``, after XLA's passes, or ``"lowered"``, as JAX emitted it); by
    default the optimized one, or the one stage an ``HloProgram`` opened from a single
    file holds; a pair picks one per side (``diff(c, c, stage=("lowered", "optimized"))``:
    what XLA's passes did to one compile). A ``Compiled``'s cost and memory are always
    its optimized program's; an ``HloProgram`` has estimated costs and no memory figures.
    When ``b`` is a ``Compiled`` JAX's persistent compile cache served
    (``b.from_cache``), ``graph()`` does not read its optimized program's source places,
    which may be the storing compile's, and says so. ``labels`` name the
    two sides in tables and plots (default: the names, the stages when the names are
    the same and the stages differ, else ``"a"`` and ``"b"``).

        >>> f = lambda x: jnp.tanh(x).sum()
        >>> x32, x16 = tpukit.shape("f32[64,64]"), tpukit.shape("bf16[64,64]")
        >>> d = diff(tpukit.compile(f, x32), tpukit.compile(f, x16), labels=("f32", "bf16"))
        >>> [r.metric for r in d.changed]
        [..., 'argument bytes', ...]
        >>> before = tpukit.hlo.open(dump, module="jit_predict", stage="lowered")
        >>> after = tpukit.hlo.open(dump, module="jit_predict", stage="optimized")
        >>> diff(before, after).row("fusions").b
        1
    """
    stage_of_a, stage_of_b = _stages(stage)
    side_a, side_b = _side(a, stage_of_a), _side(b, stage_of_b)
    stage_a, stage_b = side_a.stage, side_b.stage
    a, b = side_a.program, side_b.program
    if labels is None:
        if a.name != b.name:
            labels = (a.name, b.name)
        else:
            labels = (stage_a, stage_b) if stage_a != stage_b else ("a", "b")
    elif (
        isinstance(labels, str)
        or len(labels) != 2
        or not all(isinstance(label, str) for label in labels)
    ):
        raise ArgumentError(f"labels must be two strings, like ('f32', 'bf16'), got {labels!r}.")
    with progress(f"comparing {a.name} and {b.name}"):
        rows = _rows(side_a, side_b)
    shown = stage_a if stage_a == stage_b else f"{stage_a} vs {stage_b}"
    return HloDiff(
        rows,
        labels=(labels[0], labels[1]),
        names=(a.name, b.name),
        stage=shown,
        modules=(a.hlo_module(stage_a), b.hlo_module(stage_b)),
        from_cache=side_b.stage == "optimized" and side_b.from_cache,
    )


def _stages(stage: str | tuple[str, str] | None) -> tuple[str | None, str | None]:
    """The stage compared on each side: ``stage`` on both, or one each from a pair."""
    if stage is None or isinstance(stage, str):
        return (check_stage(stage) if stage is not None else None,) * 2
    if isinstance(stage, tuple | list) and len(stage) == 2:
        return check_stage(stage[0]), check_stage(stage[1])
    raise ArgumentError(
        f"stage must be 'lowered', 'optimized' or a pair of them, like ('lowered', "
        f"'optimized'), got {stage!r}."
    )


@dataclass(frozen=True)
class _Side:
    """One side of a diff: its program, the stage compared, and the compile when there is one."""

    program: HloProgram
    stage: str
    compiled: Compiled | None = None

    @property
    def from_cache(self) -> bool:
        """Whether its compile came from JAX's persistent compile cache (the ledger's
        ``Compiled.from_cache``): its optimized program keeps the metadata, source places
        included, of the compile that stored it."""
        return self.compiled is not None and self.compiled.from_cache

    def op_counts(self, opened: bool) -> Counter[str]:
        return self.program.op_counts(self.stage, open_fusions=opened)


def _side(obj: Compiled | HloProgram, stage: str | None) -> _Side:
    """``obj``'s program and the stage compared: ``stage``, else optimized, else its one."""
    compiled = obj if isinstance(obj, Compiled) else None
    program = program_of(obj, "diff")
    if stage is None and len(program.stages) == 1:
        stage = program.stages[0]
    return _Side(program, stage or "optimized", compiled)


def _rows(a: _Side, b: _Side) -> list[DiffRow]:
    rows = []
    stage_a, stage_b = a.stage, b.stage

    def add(section: str, metric: str, unit: str, get: Any) -> None:
        rows.append(DiffRow(section, metric, get(a), get(b), unit))

    shown = stage_a if stage_a == stage_b else f"{stage_a} vs {stage_b}"
    program = f"program ({shown} HLO)"
    add(
        program,
        "instructions (fusions opened)",
        "count",
        lambda s: sum(s.op_counts(True).values()),
    )
    add(
        program,
        "instructions outside fusions",
        "count",
        lambda s: sum(s.op_counts(False).values()),
    )
    kinds_a, kinds_b = _fusion_kinds(a), _fusion_kinds(b)
    rows.append(DiffRow(program, "fusions", sum(kinds_a.values()), sum(kinds_b.values()), "count"))
    for kind in sorted(set(kinds_a) | set(kinds_b)):
        rows.append(DiffRow(program, f"fusions {kind}", kinds_a[kind], kinds_b[kind], "count"))

    add("cost", "FLOPs", "flops", lambda s: s.program.cost.flops)
    add("cost", "FLOPs counted (dot/conv)", "flops", lambda s: s.program.cost.counted_flops)
    add(
        "cost",
        "all FLOPs (dot/conv, elementwise, reduce)",
        "flops",
        lambda s: executed(s.program.hlo_module(s.stage)).all_flops,
    )
    add("cost", "FLOPs (XLA cost analysis)", "flops", lambda s: s.program.cost.backend_flops)
    add("cost", "transcendentals", "count", lambda s: s.program.cost.transcendentals)
    add("cost", "bytes accessed", "bytes", lambda s: s.program.cost.bytes_accessed)
    add(
        "cost",
        "arithmetic intensity",
        "flop/byte",
        lambda s: s.program.cost.arithmetic_intensity,
    )

    for metric, field in (
        ("argument bytes", "argument_bytes"),
        ("output bytes", "output_bytes"),
        ("temporary bytes", "temp_bytes"),
        ("generated code bytes", "generated_code_bytes"),
        ("aliased bytes", "alias_bytes"),
        ("total bytes", "total_bytes"),
    ):
        add(
            "memory",
            metric,
            "bytes",
            lambda s, f=field: getattr(s.compiled.memory, f, None) if s.compiled else None,
        )

    add(
        "compile",
        "compile time",
        "seconds",
        lambda s: s.compiled.compile_seconds if s.compiled else None,
    )

    add("signature", "arguments", "text", _arguments_text)
    add("signature", "output", "text", _output_text)

    for section, opened in ((OPS_OPENED, True), (OPS_CLOSED, False)):
        counts_a, counts_b = a.op_counts(opened), b.op_counts(opened)
        opcodes = sorted(
            set(counts_a) | set(counts_b),
            key=lambda op: (-max(counts_a[op], counts_b[op]), op),
        )
        rows += [DiffRow(section, op, counts_a[op], counts_b[op], "count") for op in opcodes]
    return rows


def _fusion_kinds(side: _Side) -> Counter[str]:
    """Fusion instructions by kind (kLoop, kInput, ...), outside fusion bodies."""
    module = side.program.hlo_module(side.stage)
    return Counter(
        instr.fusion_kind or "unknown"
        for comp in module.computations.values()
        if comp.kind != "fusion"
        for instr in comp.instructions
        if instr.opcode == "fusion"
    )


def _arguments_text(side: _Side) -> str:
    if side.compiled is None:  # HLO from a file: the entry computation's parameter shapes
        return ", ".join(_no_layout(p.shape) for p in side.program.hlo_module().entry.parameters)
    return ", ".join(p.describe() for p in side.compiled.signature.parameters)


def _no_layout(shape: Any) -> str:
    """``f32[8,16]`` for ``f32[8,16]{1,0}``: the layout is XLA's choice, not the signature."""
    return re.sub(r"\{[^{}]*\}", "", str(shape))


def _output_text(side: _Side) -> str:
    if side.compiled is None:
        root = side.program.hlo_module().entry.root
        return "-" if root is None else _no_layout(root.shape)
    output = side.compiled.signature.output
    return "-" if output is None else describe_tree(output)


class HloDiff:
    """What differs between two compilations ``a`` and ``b``, row by row.

    ``rows`` holds every compared figure as a `DiffRow` (section, metric, a, b,
    unit, with ``delta``, ``ratio`` b/a and ``changed``); ``changed`` only those
    that differ. ``row(metric)`` finds one. Shows as a table in notebooks (changed
    rows highlighted) and as the changed rows in terminals; ``plot()`` draws them, and
    ``graph()`` puts the two programs' graphs side by side, matched group by group.
    """

    def __init__(
        self,
        rows: list[DiffRow],
        *,
        labels: tuple[str, str],
        names: tuple[str, str],
        stage: str,
        modules: tuple[HloModule, HloModule] | None = None,
        from_cache: bool = False,
    ):
        self.rows = rows
        self.labels = labels
        self.names = names
        self.stage = stage
        self._modules = modules
        self._from_cache = from_cache  # b is an optimized program the persistent cache served

    @user_facing
    def graph(self, profiles: tuple[Profile | None, Profile | None] = (None, None)) -> HloDiffView:
        """The two graphs side by side: groups (sections, layers, scopes) matched by name,
        added and removed fusions highlighted, per-group deltas of FLOPs, bytes and, when
        both ``profiles`` are given (``compiled.profile(...)`` of each side), measured time.

            >>> two = tpukit.compile(lambda x: jnp.tanh(jnp.tanh(x)), x32)
            >>> three = tpukit.compile(lambda x: jnp.tanh(jnp.tanh(jnp.tanh(x))), x32)
            >>> d = tpukit.diff(two, three, labels=("2", "3"))
            >>> view = d.graph()
            >>> view = d.graph(profiles=(two.profile(x32, repeat=1), three.profile(x32, repeat=1)))
        """
        if self._modules is None:
            raise ArgumentError(
                "This diff was built from rows alone; make it with tpukit.diff(a, b) to graph it."
            )
        times = [
            None if p is None else p.instruction_seconds()
            for p in check_profiles(profiles, self._modules, self.labels)
        ]
        stage = self.stage if " vs " not in self.stage else None
        with progress(f"drawing {self.names[0]} beside {self.names[1]}"):
            return diff_graph(
                *self._modules,
                labels=self.labels,
                times_a=times[0],
                times_b=times[1],
                stage=stage,
                from_cache=self._from_cache,
            )

    @property
    def changed(self) -> list[DiffRow]:
        return [r for r in self.rows if r.changed]

    def row(self, metric: str, section: str | None = None) -> DiffRow:
        """The row for ``metric`` (an opcode's row is in ``section`` `OPS_OPENED` by default)."""
        if section is None and metric not in {r.metric for r in self.rows if not _is_ops(r)}:
            section = OPS_OPENED
        for r in self.rows:
            if r.metric == metric and (section is None or r.section == section):
                return r
        known = ", ".join(dict.fromkeys(r.metric for r in self.rows if not _is_ops(r)))
        raise UnknownNameError(
            f"no row {metric!r}{f' in section {section!r}' if section else ''}; "
            f"rows are {known}, and one per opcode in {OPS_OPENED!r} and {OPS_CLOSED!r}."
        )

    def _title(self) -> str:
        a, b = (
            label if label == name else f"{label} ({name})"
            for label, name in zip(self.labels, self.names)
        )
        if self.stage == " vs ".join(self.labels):  # the labels are the stages already
            return f"HLO diff: {a} vs {b}"
        return f"HLO diff: {a} vs {b}, {self.stage} HLO"

    def _report(self) -> Report:
        """Every row by section, the changed ones marked: the text lists only those."""
        rows: list[Row | Section] = []
        for section, group in itertools.groupby(self.rows, key=lambda r: r.section):
            rows.append(Section(section))
            rows += [
                Row((r.metric, *r.cells()), "changed" if r.changed else "", r.unit == "text")
                for r in group
            ]
        a, b = self.labels
        columns = [Column(""), *(Column(h, "right") for h in (a, b, "delta", f"{b}/{a}"))]
        changed = len(self.changed)
        title = f"{self._title()}: {changed} of {len(self.rows)} rows differ"
        if not changed:
            title += " (the programs match)"
        table = Table(columns, rows, marked_only_in_text=True)
        return Report(_KIND, title, [table], _RULES)

    def __repr__(self) -> str:
        return self._report().text()

    def _repr_html_(self) -> str:
        return self._report().html()

    def plot(self, *, top: int = 20) -> Figure:
        """Two panels: the ratio b/a of every figure that differs (log axis), and
        the op counts (fusions opened) that differ, ``a`` and ``b`` side by side."""
        top = check_top(top)
        metrics = [
            r
            for r in self.changed
            if not _is_ops(r) and r.ratio is not None and r.ratio > 0 and r.unit != "text"
        ][:top]
        ops = [r for r in self.changed if r.section == OPS_OPENED][:top]
        rows = max(len(metrics), len(ops), 1)
        fig, (left, right) = new_figure(
            ncols=2, figsize=(12.0, 1.6 + 0.32 * rows), layout="constrained"
        )
        fig.suptitle(self._title())
        _plot_ratios(left, metrics, self.labels)
        _plot_op_counts(right, ops, self.labels)
        return fig


def check_profiles(
    profiles: Any, modules: tuple[HloModule, HloModule], labels: tuple[str, str]
) -> tuple[Any, Any]:
    """``profiles`` as a pair, each None or a profile of the program drawn on its side.

    A profile holds the optimized `HloModule` it measured; it belongs to a side when
    both modules hold the same instructions (name, opcode and shape of each), so a
    swapped pair or a third program's profile is refused with one line.
    """
    if not isinstance(profiles, (tuple, list)) or len(profiles) != 2:
        got = (
            format_count(len(profiles), "item")
            if isinstance(profiles, (tuple, list))
            else type(profiles).__name__
        )
        raise ArgumentError(
            f"profiles= takes two profiles, ({labels[0]}'s, {labels[1]}'s), either one may "
            f"be None; got {got}. Pass profiles=(a.profile(), b.profile())."
        )
    for side, profile, module in zip(labels, profiles, modules):
        if profile is None:
            continue
        if not callable(getattr(profile, "instruction_seconds", None)) or not isinstance(
            getattr(profile, "module", None), HloModule
        ):
            raise WrongTypeError(
                f"profiles= takes tpukit.Profile objects (compiled.profile(...)) or None; "
                f"{side}'s is a {type(profile).__name__}."
            )
        if _fingerprint(profile.module) != _fingerprint(module):
            swapped = [m for m in modules if _fingerprint(m) == _fingerprint(profile.module)]
            hint = (
                " The two profiles look swapped: give them in the order of diff(a, b)."
                if swapped
                else ""
            )
            raise ArgumentError(
                f"The profile given for {side} measured another program "
                f"({profile.module.name!r}, {_size(profile.module)} instructions), not the one "
                f"drawn on that side ({module.name!r}, {_size(module)} instructions).{hint} "
                "Profile each side's own compiled program."
            )
    return profiles[0], profiles[1]


def _fingerprint(module: HloModule) -> int:
    """A hash of every instruction's name, opcode and shape (cached on the module)."""
    found = module._analysis.get("fingerprint")
    if found is None:
        found = hash(
            frozenset(
                (c.name, i.name, i.opcode, str(i.shape))
                for c in module.computations.values()
                for i in c.instructions
            )
        )
        module._analysis["fingerprint"] = found
    return found


def _size(module: HloModule) -> int:
    return sum(len(c.instructions) for c in module.computations.values())


def _is_ops(row: DiffRow) -> bool:
    return row.section in (OPS_OPENED, OPS_CLOSED)


def _plot_ratios(ax: Any, metrics: list[DiffRow], labels: tuple[str, str]) -> None:
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_title(f"what differs: {labels[1]} / {labels[0]}", fontsize=10)
    if not metrics:
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no figure differs", ha="center", va="center")
        return
    positions = list(range(len(metrics)))
    ratios = [r.ratio for r in metrics]
    ax.barh(
        positions,
        [ratio - 1 for ratio in ratios],
        left=1,
        color=["#e69138" if ratio > 1 else "#3d85c6" for ratio in ratios],
        edgecolor="#333333",
        linewidth=0.5,
    )
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"x{value:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.axvline(1, color="#333333", linewidth=0.8)
    ax.set_yticks(positions, [r.metric for r in metrics], fontsize=8)
    ax.invert_yaxis()
    for y, ratio in zip(positions, ratios):
        ax.annotate(
            f"x{ratio:.3g}",
            (ratio, y),
            textcoords="offset points",
            xytext=(4 if ratio > 1 else -4, 0),
            ha="left" if ratio > 1 else "right",
            va="center",
            fontsize=8,
        )
    low, high = min([*ratios, 1.0]), max([*ratios, 1.0])
    ax.set_xlim(low / 2, high * 2)
    ax.set_xlabel("ratio (log scale)")


def _plot_op_counts(ax: Any, ops: list[DiffRow], labels: tuple[str, str]) -> None:
    ax.set_title("op counts that differ (fusions opened)", fontsize=10)
    if not ops:
        ax.set_axis_off()
        ax.text(0.5, 0.5, "same op counts", ha="center", va="center")
        return
    positions = list(range(len(ops)))
    height = 0.4
    for offset, label, values, color in (
        (-height / 2, labels[0], [r.a for r in ops], "#999999"),
        (height / 2, labels[1], [r.b for r in ops], "#45818e"),
    ):
        bars = ax.barh(
            [p + offset for p in positions],
            values,
            height=height,
            color=color,
            label=label,
            edgecolor="#333333",
            linewidth=0.5,
        )
        ax.bar_label(bars, padding=2, fontsize=8)
    ax.set_yticks(positions, [r.metric for r in ops], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("instructions")
    ax.legend(fontsize=8, loc="lower right")
    ax.margins(x=0.12)


_KIND = "tpukit-diff"
_RULES = (
    "&{max-width:980px}"
    f"& th.section{{padding-top:6px;color:{MUTED_COLOR}}}"
    "& tbody tr.changed td{background:rgba(255,193,7,.25);font-weight:600}"
)
