"""Static pictures of a compilation: op counts, fusions and the roofline, with matplotlib.

Each function takes a ``tpukit.Compiled`` or a ``tpukit.hlo.HloProgram`` (HLO read from
a file or a dump folder with ``tpukit.hlo.open``) and returns a ``matplotlib.figure.Figure``
(saved with ``fig.savefig("ops.png")``). In a notebook it shows once, whether it is
the cell's value, assigned, or the line ends with ``;`` (see ``tpukit.display._figures``).
Pass ``ax=`` to draw into an axes of your own figure instead. Bars are coloured by op
category in the HLO graph's hues, darker (``tpukit.graph._graph_schema``, their one home).

    >>> def f(x, w):
    ...     return jnp.tanh(x @ w)
    >>> c = tpukit.compile(f, tpukit.shape("f32[128,784]"), tpukit.shape("f32[784,10]"))
    >>> fig = plot_ops(c)        # instructions per opcode, lowered vs optimized
    >>> fig = plot_fusions(c)    # FLOPs and bytes of the largest fusions
    >>> fig = plot_roofline(c, timing=c.timeit(repeat=2))  # where it sits under the roofs
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpukit._counts import is_integer
from tpukit._errors import ArgumentError, WrongTypeError, user_facing
from tpukit.display import format_bytes, format_flops, new_figure
from tpukit.hlo import FUSION_COLOURED_BY, Fusion, HloProgram, as_program, op_category
from tpukit.hlo import PLOT_COLOURS as CATEGORY_COLORS
from tpukit.measure import DevicePeak, peak_for

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tpukit.measure import TimingResult


def program_of(obj: Any, function: str) -> HloProgram:
    """The program ``obj`` is or has, or a ``TypeError`` that says how to get one.

    A ``tpukit.hlo.HloProgram`` is one; a ``tpukit.Compiled`` has one (``.program``);
    a parsed ``HloModule`` is opened as one.
    """
    program = as_program(obj)
    if program is not None:
        return program
    raise WrongTypeError(
        f"{function} expects a tpukit.Compiled, got {type(obj).__name__}; a "
        f"tpukit.hlo.HloProgram does as well. Compile first: c = tpukit.compile(f, "
        f"tpukit.shape('f32[128,784]')), or open HLO from elsewhere: "
        f"c = tpukit.hlo.open('dump_folder_or_file'); then {function}(c)."
    )


def new_axes(ax: Axes | None, width: float, height: float) -> tuple[Figure, Axes]:
    """``ax`` and its figure, or a new one-axes figure (shown once in a notebook)."""
    if ax is not None:
        return ax.figure, ax
    return new_figure(figsize=(width, height), layout="constrained")


@user_facing
def plot_ops(program: HloProgram | Any, *, top: int = 20, ax: Axes | None = None) -> Figure:
    """Instructions per opcode before and after XLA's passes, as horizontal grouped bars.

    The XLA.jl paper's instruction-count table as a picture: for the ``top``
    opcodes (most optimized instructions first, fusions opened so the ops inside
    count), a hatched bar for the lowered HLO and a solid one for the optimized
    HLO, coloured by op category. The title gives the totals.

        >>> fig = plot_ops(c, top=10)
        >>> list(fig.axes[0].containers[1].datavalues) == sorted(
        ...     fig.axes[0].containers[1].datavalues, reverse=True)  # optimized, most first
        True
    """
    program = program_of(program, "plot_ops")
    top = check_top(top)
    stages = program.stages
    counts_by_stage = {stage: program.op_counts(stage) for stage in stages}
    lowered = counts_by_stage.get("lowered", {})
    optimized = counts_by_stage.get("optimized", {})
    opcodes = sorted(
        set(lowered) | set(optimized),
        key=lambda op: (-optimized.get(op, 0), -lowered.get(op, 0), op),
    )
    shown = opcodes[:top]
    fig, ax = new_axes(ax, 8.0, 1.2 + 0.32 * max(len(shown), 1))
    colors = [CATEGORY_COLORS.get(op_category(op), CATEGORY_COLORS["other"]) for op in shown]
    positions = list(range(len(shown)))
    height = 0.4 if len(stages) == 2 else 0.7
    styles = {"lowered": {"alpha": 0.45, "hatch": "//"}, "optimized": {}}
    for index, stage in enumerate(stages):
        offset = (index - (len(stages) - 1) / 2) * height
        counts, style = counts_by_stage[stage], styles[stage]
        bars = ax.barh(
            [p + offset for p in positions],
            [counts.get(op, 0) for op in shown],
            height=height,
            color=colors,
            edgecolor="#333333",
            linewidth=0.5,
            label=stage,
            **style,
        )
        ax.bar_label(bars, padding=2, fontsize=8)
    ax.set_yticks(positions, shown)
    ax.invert_yaxis()
    ax.set_xlabel("instructions (fusions opened)")
    more = f"; top {len(shown)} of {len(opcodes)} opcodes" if len(opcodes) > len(shown) else ""
    totals = " -> ".join(f"{stage} {sum(counts_by_stage[stage].values())}" for stage in stages)
    ax.set_title(f"{program.name}: HLO instructions per opcode\n{totals}{more}")
    ax.legend(handles=_ops_legend(shown, stages), fontsize=8, loc="lower right")
    ax.margins(x=0.12)
    return fig


def _ops_legend(opcodes: list[str], stages: tuple[str, ...]) -> list[Any]:
    from matplotlib.patches import Patch

    hatches = {"lowered": "//", "optimized": None}
    handles = [
        Patch(facecolor="white", edgecolor="#333333", hatch=hatches[stage], label=stage)
        for stage in stages
    ]
    categories = dict.fromkeys(op_category(op) for op in opcodes)
    for category in categories:
        color = CATEGORY_COLORS.get(category, CATEGORY_COLORS["other"])
        handles.append(Patch(facecolor=color, label=category.replace("_", " ")))
    return handles


@user_facing
def plot_fusions(program: HloProgram | Any, *, top: int = 20, ax: Axes | None = None) -> Figure:
    """FLOPs and bytes of the largest fusions of the optimized program, in two panels.

    Fusions come largest FLOPs first, then largest bytes (the traffic at the
    fusion's boundary, what fusing saved). Each row is labelled with the fusion's
    name, kind (kLoop, kInput, kOutput, kCustom) and main ops, and coloured by
    the most telling category of what it fuses (matmul before reduction before
    elementwise). With ``ax``, the FLOPs panel is ``ax`` and the bytes panel is
    added to its right.

        >>> fig = plot_fusions(c, top=5)
        >>> len(fig.axes)  # FLOPs and bytes, side by side
        2
    """
    program = program_of(program, "plot_fusions")
    top = check_top(top)
    fusions = program.fusions()
    shown = sorted(fusions, key=lambda f: (-f.flops, -f.bytes, f.name))[:top]
    flops_ax, bytes_ax = _two_panels(ax, 11.0, 1.4 + 0.32 * max(len(shown), 1))
    fig = flops_ax.figure
    more = f" (largest {len(shown)} of {len(fusions)})" if len(fusions) > len(shown) else ""
    noun = "fusion" if len(fusions) == 1 else "fusions"
    stage = program.stage
    fig.suptitle(f"{program.name}: {len(fusions)} {noun} in the {stage} HLO{more}")
    if not shown:
        for panel in (flops_ax, bytes_ax):
            panel.set_axis_off()
        flops_ax.text(0.5, 0.5, "XLA made no fusions", ha="center", va="center")
        return fig
    from matplotlib.ticker import MaxNLocator

    positions = list(range(len(shown)))
    colors = [CATEGORY_COLORS[_fusion_category(f)] for f in shown]
    for panel, values, formatter, label in (
        (flops_ax, [f.flops for f in shown], format_flops, "FLOPs (dot/conv, counted)"),
        (bytes_ax, [f.bytes for f in shown], format_bytes, "bytes at the fusion boundary"),
    ):
        bars = panel.barh(positions, values, color=colors, edgecolor="#333333", linewidth=0.5)
        panel.bar_label(
            bars, labels=[formatter(v) if v else "0" for v in values], padding=2, fontsize=8
        )
        panel.set_xlabel(label)
        panel.xaxis.set_major_locator(MaxNLocator(nbins=3))
        panel.xaxis.set_major_formatter(_tick_formatter(formatter))
        panel.margins(x=0.2)
    flops_ax.set_yticks(positions, [fusion_label(f) for f in shown], fontsize=8)
    bytes_ax.tick_params(axis="y", labelleft=False)
    flops_ax.invert_yaxis()
    return fig


def fusion_label(fusion: Fusion, most: int = 3) -> str:
    """``'name (kind): dot, convert x4'``: a fusion's name, kind and main ops (matmuls first)."""
    ops = sorted(
        ((op, n) for op, n in fusion.ops.items() if op_category(op) != "parameter/constant"),
        key=lambda kv: (op_category(kv[0]) != "matmul", -kv[1], kv[0]),
    )
    text = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in ops[:most])
    if len(ops) > most:
        text += f", +{len(ops) - most}"
    return f"{fusion.name} ({fusion.kind}): {text or '-'}"


def _fusion_category(fusion: Fusion) -> str:
    inside = {op_category(op) for op in fusion.ops}
    return next((c for c in FUSION_COLOURED_BY if c in inside), "other")


def _two_panels(ax: Axes | None, width: float, height: float) -> tuple[Axes, Axes]:
    if ax is None:
        _, (left, right) = new_figure(
            ncols=2, sharey=True, figsize=(width, height), layout="constrained"
        )
        return left, right
    from mpl_toolkits.axes_grid1 import make_axes_locatable

    right = make_axes_locatable(ax).append_axes("right", size="100%", pad=0.2, sharey=ax)
    return ax, right


@user_facing
def plot_roofline(
    program: HloProgram | Any,
    *,
    peak: DevicePeak | None = None,
    timing: TimingResult | None = None,
    ax: Axes | None = None,
) -> Figure:
    """The roofline chart: where the program sits under the device's compute and bandwidth roofs.

    Log-log axes of arithmetic intensity (``cost.flops / cost.bytes_accessed``,
    FLOP per byte) against FLOP/s. The roofs are the memory roof ``bandwidth x
    intensity`` and the flat compute roof (bf16 peak), from ``peak`` or else
    ``tpukit.peak_for(program.device_kind)``; they meet at the ridge point.
    With ``timing`` (from ``compiled.timeit()``; for a ``Compiled``, its last
    ``timeit()`` or ``%tpu_timeit`` when not given) the program is a point at its
    achieved FLOP/s; without, a vertical line at its intensity up to the
    attainable FLOP/s, and the title says it was not timed. A device with no published peak (a CPU) gets no roofs:
    tpukit never guesses one.

        >>> fig = plot_roofline(c, peak=tpukit.peak_for("TPU v5 lite"))
        >>> fig = plot_roofline(c, timing=c.timeit(jnp.ones((128, 784)), jnp.ones((784, 10))))
    """
    from matplotlib.ticker import NullFormatter

    if timing is None:  # a Compiled remembers its last timeit()
        timing = getattr(program, "timing", None)
    program = program_of(program, "plot_roofline")
    if peak is not None and not isinstance(peak, DevicePeak):
        raise WrongTypeError(
            f"peak must be a tpukit.DevicePeak, got {type(peak).__name__}; "
            "use tpukit.peak_for('TPU v5 lite') or DevicePeak(name, bf16_tflops, hbm_gbps)."
        )
    if timing is not None and not hasattr(timing, "flops_per_second"):
        raise WrongTypeError(
            f"timing must be a tpukit.TimingResult, got {type(timing).__name__}; "
            "pass timing=compiled.timeit(...)."
        )
    if peak is None and timing is not None:
        peak = getattr(timing, "peak", None)
    device_kind = program.device_kind
    if peak is None and device_kind:
        peak = peak_for(device_kind)
    intensity = program.cost.arithmetic_intensity
    achieved = timing.flops_per_second if timing is not None else None
    fig, ax = new_axes(ax, 7.5, 5.0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("FLOP/s")
    ax.yaxis.set_major_formatter(_tick_formatter(lambda v: format_flops(v) + "/s"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="major", alpha=0.3)
    notes = []
    ys = [achieved] if achieved else []
    if peak is not None:
        ys += _draw_roofs(ax, peak, intensity)
    else:
        notes.append(
            f"no published peak for {device_kind}: no roofs drawn"
            if device_kind
            else "device unknown (HLO from a file): pass peak= to draw roofs"
        )
    if intensity is None:
        notes.append("XLA reported no bytes accessed: intensity unknown")
    elif achieved:
        share = 100 * achieved / peak.flops_per_second if peak is not None else None
        mfu = f", {share:.2g}% of peak" if share is not None else ""
        ax.plot(
            [intensity],
            [achieved],
            "o",
            color="#cc0000",
            markersize=8,
            label=f"{program.name}: {format_flops(achieved)}/s at {intensity:.3g} FLOP/byte{mfu}",
            gid="achieved",
        )
    elif peak is not None:
        attainable = min(peak.flops_per_second, peak.bytes_per_second * intensity)
        bound = "memory" if attainable < peak.flops_per_second else "compute"
        ax.plot(
            [intensity, intensity],
            [min(ys) / 3, attainable],
            "-",
            color="#cc0000",
            linewidth=2,
            marker="_",
            markersize=12,
            label=f"{program.name}: {intensity:.3g} FLOP/byte, attainable "
            f"{format_flops(attainable)}/s ({bound}-bound)",
            gid="attainable",
        )
    else:
        from matplotlib.ticker import NullLocator

        ax.yaxis.set_major_locator(NullLocator())
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_ylabel("FLOP/s (unknown until timed)")
        ax.set_xlim(intensity / 10, intensity * 10)
        ax.axvline(
            intensity,
            color="#cc0000",
            linewidth=2,
            label=f"{program.name}: {intensity:.3g} FLOP/byte",
            gid="intensity",
        )
        notes.append(
            "not timed: only its FLOP/byte is known; time it (compiled.timeit(...) or "
            "%tpu_timeit) to place it"
        )
    if ys:
        ax.set_ylim(min(ys) / 3, max(ys) * 3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="lower right")
    where = f" on {peak.name}" if peak is not None else ""
    title = f"{program.name}: roofline{where}"
    ax.set_title("\n".join([title, *notes]), fontsize=10)
    return fig


def _draw_roofs(ax: Axes, peak: DevicePeak, intensity: float | None) -> list[float]:
    """The memory and compute roofs around the ridge point; returns their FLOP/s extent."""
    compute, bandwidth = peak.flops_per_second, peak.bytes_per_second
    ridge = compute / bandwidth
    low = min(ridge / 100, intensity / 10) if intensity else ridge / 100
    high = max(ridge * 100, intensity * 10) if intensity else ridge * 100
    ax.plot(
        [low, ridge],
        [bandwidth * low, compute],
        color="#3d85c6",
        linewidth=2,
        label=f"memory roof: {peak.hbm_gbps:g} GB/s",
        gid="memory-roof",
    )
    ax.plot(
        [ridge, high],
        [compute, compute],
        color="#e69138",
        linewidth=2,
        label=f"compute roof: {peak.bf16_tflops:g} TFLOP/s (bf16)",
        gid="compute-roof",
    )
    ax.axvline(ridge, color="#999999", linestyle=":", linewidth=1, gid="ridge")
    ax.annotate(
        f"ridge {ridge:.3g} FLOP/byte",
        (ridge, compute),
        textcoords="offset points",
        xytext=(4, -12),
        fontsize=8,
        color="#666666",
    )
    ax.set_xlim(low, high)
    return [bandwidth * low, compute]


def _tick_formatter(format_value: Any) -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: format_value(value) if value > 0 else "0")


def check_top(top: Any) -> int:
    """``top`` (how many rows a plot shows) as an ``int``; any integer type, at least 1."""
    if not is_integer(top) or top < 1:
        raise ArgumentError(f"top must be a positive int (how many rows to show), got {top!r}.")
    return int(top)
