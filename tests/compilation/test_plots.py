"""Pictures and diffs of compilations: op counts, fusions, roofline, f32 vs bf16."""

import re

import matplotlib

matplotlib.use("Agg")

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import pytest

import tpukit
from tpukit.compilation import DiffRow, diff
from tpukit.compilation._plots import (
    CATEGORY_COLORS,
    fusion_label,
    plot_fusions,
    plot_ops,
    plot_roofline,
)
from tpukit.display import format_bytes
from tpukit.hlo import Fusion
from tpukit.measure import TimingResult

TPU = tpukit.peak_for("TPU v5 lite")


def mlp(x, w1, w2):
    return jnp.tanh(jax.nn.relu(x @ w1) @ w2)


def softmax(x):
    return jax.nn.softmax(x, axis=-1)


def conv(x, k):
    y = jax.lax.conv_general_dilated(
        x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    return jax.nn.relu(y)


def _mlp(dtype):
    return tpukit.compile(
        mlp,
        tpukit.shape(f"{dtype}[128,784]"),
        tpukit.shape(f"{dtype}[784,256]"),
        tpukit.shape(f"{dtype}[256,10]"),
    )


@pytest.fixture(scope="module")
def mlp32():
    return _mlp("f32")


@pytest.fixture(scope="module")
def mlp16():
    return _mlp("bf16")


@pytest.fixture(scope="module")
def soft():
    return tpukit.compile(softmax, tpukit.shape("f32[64,1000]"))


@pytest.fixture(scope="module")
def convolution():
    return tpukit.compile(conv, tpukit.shape("f32[8,16,16,3]"), tpukit.shape("f32[3,3,3,8]"))


@pytest.fixture(autouse=True)
def no_open_figures():
    plt.close("all")
    yield
    assert plt.get_fignums() == [], "a plot function left a figure open in pyplot"


def _labels(ax):
    return [t.get_text() for t in ax.get_yticklabels()]


def _line(ax, gid):
    found = [line for line in ax.get_lines() if line.get_gid() == gid]
    return found[0] if found else None


# plot_ops


def test_plot_ops_bars_are_the_op_counts_of_both_stages(mlp16):
    ax = plot_ops(mlp16).axes[0]
    lowered, optimized = ax.containers
    opcodes = _labels(ax)
    assert len(lowered) == len(optimized) == len(opcodes)
    assert set(opcodes) == set(mlp16.op_counts("lowered")) | set(mlp16.op_counts("optimized"))
    assert list(lowered.datavalues) == [mlp16.op_counts("lowered")[op] for op in opcodes]
    assert list(optimized.datavalues) == [mlp16.op_counts("optimized")[op] for op in opcodes]
    assert list(optimized.datavalues) == sorted(optimized.datavalues, reverse=True)
    assert "convert" in opcodes  # opened fusions: the converts inside count


def test_plot_ops_top_keeps_the_largest_and_title_gives_totals(mlp16):
    ax = plot_ops(mlp16, top=3).axes[0]
    counts = mlp16.op_counts("optimized")
    assert _labels(ax) == [op for op, _ in counts.most_common(3)]
    total = len(set(counts) | set(mlp16.op_counts("lowered")))
    title = ax.get_title()
    assert "mlp" in title and f"top 3 of {total} opcodes" in title
    assert (
        f"lowered {sum(mlp16.op_counts('lowered').values())} -> optimized {counts.total()}" in title
    )


def test_plot_ops_colours_bars_by_category(soft):
    ax = plot_ops(soft).axes[0]
    colours = dict(zip(_labels(ax), (bar.get_facecolor() for bar in ax.containers[1])))
    assert colours["exponential"] == matplotlib.colors.to_rgba(CATEGORY_COLORS["elementwise"])
    assert colours["reduce"] == matplotlib.colors.to_rgba(CATEGORY_COLORS["reduction"])
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:2] == ["lowered", "optimized"]
    assert "reduction" in legend and "elementwise" in legend


def test_plot_ops_draws_into_a_given_axes(mlp32):
    fig, (left, right) = plt.subplots(1, 2)
    try:
        assert plot_ops(mlp32, ax=right) is fig
        assert len(right.containers) == 2 and not left.containers
    finally:
        plt.close(fig)


# plot_fusions


def test_plot_fusions_panels_are_flops_and_bytes_of_each_fusion(mlp16):
    fig = plot_fusions(mlp16)
    flops_ax, bytes_ax = fig.axes
    fusions = mlp16.fusions()
    assert [bar.get_width() for bar in flops_ax.patches] == [f.flops for f in fusions]
    assert [bar.get_width() for bar in bytes_ax.patches] == [f.bytes for f in fusions]
    labels = _labels(flops_ax)
    assert labels == [fusion_label(f) for f in fusions]
    assert labels[0].startswith(f"{fusions[0].name} ({fusions[0].kind}): ")
    assert f"{len(fusions)} fusions" in fig.get_suptitle()


def test_plot_fusions_top_keeps_the_largest(mlp16):
    fusions = mlp16.fusions()
    top = len(fusions) - 1  # XLA versions fuse differently; there are always several
    fig = plot_fusions(mlp16, top=top)
    assert [bar.get_width() for bar in fig.axes[0].patches] == [f.flops for f in fusions[:top]]
    assert f"largest {top} of {len(fusions)}" in fig.get_suptitle()


def test_conv_plots_colour_the_convolution_as_matmul(convolution):
    ax = plot_ops(convolution).axes[0]
    colours = dict(zip(_labels(ax), (bar.get_facecolor() for bar in ax.containers[1])))
    assert colours["convolution"] == matplotlib.colors.to_rgba(CATEGORY_COLORS["matmul"])
    (fusion,) = convolution.fusions()  # on CPU only the relu is fused
    fig = plot_fusions(convolution)
    assert "1 fusion in" in fig.get_suptitle()
    assert [bar.get_width() for bar in fig.axes[1].patches] == [fusion.bytes]
    assert _labels(fig.axes[0]) == [f"{fusion.name} (kLoop): broadcast, maximum"]


def test_plot_fusions_without_fusions_says_so():
    identity = tpukit.compile(lambda x: x, tpukit.shape("f32[4]"))
    assert identity.fusions() == []
    fig = plot_fusions(identity)
    assert "XLA made no fusions" in [t.get_text() for t in fig.axes[0].texts]


def test_fusion_label_names_kind_and_main_ops_matmul_first():
    fusion = Fusion(
        "f.1", "kOutput", {"convert": 4, "dot": 1, "constant": 2, "tanh": 1, "add": 1}, 0, 0, ""
    )
    assert fusion_label(fusion) == "f.1 (kOutput): dot, convert x4, add, +1"
    assert fusion_label(Fusion("g", "kLoop", {"constant": 1}, 0, 0, "")) == "g (kLoop): -"


# plot_roofline


def test_roofline_roofs_are_the_given_peak(mlp32):
    ax = plot_roofline(mlp32, peak=TPU).axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    (x0, x1), (y0, y1) = _line(ax, "memory-roof").get_data()
    assert y0 / x0 == pytest.approx(TPU.bytes_per_second)
    assert y1 / x1 == pytest.approx(TPU.bytes_per_second)
    assert y1 == pytest.approx(TPU.flops_per_second)
    (r0, _), (c0, c1) = _line(ax, "compute-roof").get_data()
    assert c0 == c1 == pytest.approx(TPU.flops_per_second)
    assert r0 == pytest.approx(TPU.flops_per_second / TPU.bytes_per_second) == x1
    assert "TPU v5e" in ax.get_title()


def test_roofline_without_timing_marks_the_attainable_flops(mlp32):
    ax = plot_roofline(mlp32, peak=TPU).axes[0]
    intensity = mlp32.cost.flops / mlp32.cost.bytes_accessed
    (x0, x1), (_, top) = _line(ax, "attainable").get_data()
    assert x0 == x1 == pytest.approx(intensity)
    assert top == pytest.approx(min(TPU.flops_per_second, TPU.bytes_per_second * intensity))
    assert "memory-bound" in _line(ax, "attainable").get_label()


def test_roofline_with_timing_places_the_achieved_point(mlp32):
    timing = TimingResult("mlp", [2e-3], 1, mlp32.cost.flops, "cpu", None)
    ax = plot_roofline(mlp32, peak=TPU, timing=timing).axes[0]
    (x,), (y,) = _line(ax, "achieved").get_data()
    assert x == pytest.approx(mlp32.cost.arithmetic_intensity)
    assert y == pytest.approx(mlp32.cost.flops / 2e-3)
    assert _line(ax, "attainable") is None
    share = 100 * y / TPU.flops_per_second
    assert f"{share:.2g}% of peak" in _line(ax, "achieved").get_label()


def test_roofline_on_cpu_invents_no_peak(mlp32):
    assert tpukit.peak_for(mlp32.device_kind) is None
    ax = plot_roofline(mlp32).axes[0]
    assert "no published peak for cpu" in ax.get_title()
    assert _line(ax, "memory-roof") is None and _line(ax, "compute-roof") is None
    (x0, _), _ = _line(ax, "intensity").get_data()
    assert x0 == pytest.approx(mlp32.cost.arithmetic_intensity)

    timing = TimingResult("mlp", [1e-3], 1, mlp32.cost.flops, "cpu", None)
    ax = plot_roofline(mlp32, timing=timing).axes[0]
    assert [line.get_gid() for line in ax.get_lines()] == ["achieved"]


def test_roofline_of_a_timed_program_places_it_where_it_was_timed():
    c = tpukit.compile(lambda x, w: x @ w, tpukit.shape("f32[32,64]"), tpukit.shape("f32[64,16]"))
    untimed = c.plot_roofline().axes[0]
    assert c.timing is None and _line(untimed, "achieved") is None
    assert "not timed" in untimed.get_title() and "%tpu_timeit" in untimed.get_title()
    timing = c.timeit(tpukit.shape("f32[32,64]"), tpukit.shape("f32[64,16]"), number=2, repeat=2)
    assert c.timing is timing
    for fig in (c.plot_roofline(), plot_roofline(c)):  # the method, and the function
        (x,), (y,) = _line(fig.axes[0], "achieved").get_data()
        assert y == pytest.approx(timing.flops_per_second)
        assert "not timed" not in fig.axes[0].get_title()


# bad input


def test_plots_and_diff_reject_bad_input(mlp32):
    with pytest.raises(TypeError, match=r"expects a tpukit\.Compiled, got str.*tpukit\.compile"):
        plot_ops("mlp")
    with pytest.raises(TypeError, match="plot_fusions expects"):
        plot_fusions(jnp.ones(3))
    with pytest.raises(TypeError, match="DevicePeak"):
        plot_roofline(mlp32, peak=197e12)
    with pytest.raises(TypeError, match="timeit"):
        plot_roofline(mlp32, timing=0.1)
    with pytest.raises(ValueError, match="top must be a positive int"):
        plot_ops(mlp32, top=0)
    with pytest.raises(TypeError, match="diff expects a tpukit.Compiled, got function"):
        diff(mlp32, mlp)
    with pytest.raises(ValueError, match="stage must be 'lowered' or 'optimized', got 'hlo'"):
        diff(mlp32, mlp32, stage="hlo")
    with pytest.raises(ValueError, match="labels must be two strings"):
        diff(mlp32, mlp32, labels="ab")


# diff


def test_diff_f32_vs_bf16(mlp32, mlp16):
    d = diff(mlp32, mlp16, labels=("f32", "bf16"))
    assert d.row("argument bytes").ratio == 0.5
    assert d.row("output bytes").a == 128 * 10 * 4 and d.row("output bytes").b == 128 * 10 * 2
    dot = d.row("dot")
    assert (dot.a, dot.b, dot.changed) == (2, 2, False)
    closed = {r.metric for r in d.rows if r.section == "ops, fusions closed"}
    assert "fusion" in closed
    assert closed == set(mlp32.op_counts(open_fusions=False)) | set(
        mlp16.op_counts(open_fusions=False)
    )
    flops = d.row("FLOPs counted (dot/conv)")
    assert flops.a == flops.b == 2 * 128 * 784 * 256 + 2 * 128 * 256 * 10
    assert (d.row("convert").a, d.row("convert").b) == (0, mlp16.op_counts()["convert"])
    assert d.row("bytes accessed").a == mlp32.cost.bytes_accessed
    assert d.row("fusions").b == mlp16.op_counts(open_fusions=False)["fusion"]
    assert "bf16[128,784]" in d.row("arguments").b and d.row("output").a == "f32[128,10]"
    assert all(r.changed for r in d.changed)
    assert {r.metric for r in d.rows if r.changed} == {r.metric for r in d.changed}
    assert "dot" not in {r.metric for r in d.changed}


def test_diff_of_a_compilation_with_itself_changes_nothing(mlp32):
    d = diff(mlp32, mlp32)
    assert d.changed == []
    assert d.labels == ("a", "b")
    assert "the programs match" in repr(d)


def test_diff_lowered_stage_and_default_labels(mlp32, soft):
    d = diff(mlp32, soft, stage="lowered")
    assert d.labels == ("mlp", "softmax")
    assert d.row("fusions").a == d.row("fusions").b == 0
    assert d.row("dot").a == 2 and d.row("dot").b == 0
    assert "lowered HLO" in repr(d)


def test_diff_row_arithmetic_and_time_tolerance():
    row = DiffRow("memory", "argument bytes", 2048, 1024, "bytes")
    assert (row.delta, row.ratio, row.changed) == (-1024, 0.5, True)
    assert row.cells() == ("2.0 KiB", "1.0 KiB", "-1.0 KiB", "x0.5")
    assert DiffRow("ops", "convert", 0, 3, "count").cells() == ("0", "3", "+3", "new")
    assert not DiffRow("compile", "compile time", 1.0, 1.2, "seconds").changed
    assert DiffRow("compile", "compile time", 1.0, 2.0, "seconds").changed
    assert DiffRow("memory", "argument bytes", None, None, "bytes").cells()[0] == "-"


def test_diff_repr_and_html(mlp32, mlp16):
    d = diff(mlp32, mlp16, labels=("f32", "bf16"))
    text = repr(d)
    assert text.startswith(f"HLO diff: f32 (mlp) vs bf16 (mlp), optimized HLO: {len(d.changed)} of")
    argument_line = next(line for line in text.splitlines() if "argument bytes" in line)
    saved = format_bytes(mlp32.memory.argument_bytes - mlp16.memory.argument_bytes)
    assert argument_line.split()[-3:] == [*f"-{saved}".split(), "x0.5"]
    assert "  dot " not in text  # unchanged rows stay out of the text
    page = d._repr_html_()
    assert page.count('class="changed"') == len(d.changed)
    assert '<th class="num">bf16/f32</th>' in page and "x0.5" in page
    assert page.count("<tr") == len(d.rows) + len({r.section for r in d.rows}) + 1


def test_diff_plot_shows_ratios_and_op_counts_that_differ(mlp32, mlp16):
    d = diff(mlp32, mlp16, labels=("f32", "bf16"))
    fig = d.plot()
    ratios_ax, ops_ax = fig.axes
    metrics = _labels(ratios_ax)
    assert "argument bytes" in metrics and "dot" not in metrics
    assert ratios_ax.get_xscale() == "log"
    for bar, metric in zip(ratios_ax.patches, metrics):
        assert bar.get_x() + bar.get_width() == pytest.approx(d.row(metric).ratio)
    opcodes = _labels(ops_ax)
    assert "convert" in opcodes and "dot" not in opcodes
    f32_bars, bf16_bars = ops_ax.containers
    assert list(f32_bars.datavalues) == [d.row(op).a for op in opcodes]
    assert list(bf16_bars.datavalues) == [d.row(op).b for op in opcodes]


# shown once in a notebook, whatever the line ends with


@pytest.fixture()
def inline_shell(monkeypatch, mlp32, mlp16):
    """IPython's shell with matplotlib's inline backend, as in a Jupyter kernel. Every
    output a cell publishes (its displays and its value) is recorded in ``outputs``."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.pylabtools import activate_matplotlib
    from matplotlib.figure import Figure
    from matplotlib_inline.backend_inline import configure_inline_support

    from tpukit.train import History

    shell = InteractiveShell.instance()
    backend = "module://matplotlib_inline.backend_inline"  # what ipykernel sets up
    activate_matplotlib(backend)
    configure_inline_support(shell, backend)
    outputs = []
    monkeypatch.setattr(
        shell.display_pub, "publish", lambda data, metadata=None, **_: outputs.append(data)
    )
    monkeypatch.setattr(
        shell.displayhook, "write_format_data", lambda data, metadata=None: outputs.append(data)
    )
    history = History()
    for epoch, loss in enumerate((1.0, 0.5), start=1):
        history.add_execution({"epoch": epoch, "step": 4, "loss": loss})
        history.add_epoch({"epoch": epoch, "loss": loss, "steps": 4})
    shell.user_ns.update(c=mlp32, d=diff(mlp32, mlp16), history=history)
    # IPython reads a trailing ";" from the input history, so cells here are stored;
    # the history is put back after, for the shell's next users.
    inputs = shell.history_manager
    stored = len(inputs.input_hist_parsed), len(inputs.input_hist_raw), shell.execution_count
    yield shell, outputs
    del inputs.input_hist_parsed[stored[0] :], inputs.input_hist_raw[stored[1] :]
    shell.execution_count = stored[2]
    configure_inline_support(shell, "agg")
    shell.display_formatter.formatters["image/png"].pop(Figure, None)
    plt.switch_backend("Agg")


PLOT_CALLS = [
    "c.plot_ops()",
    "c.plot_fusions()",
    "c.plot_roofline()",
    "c.plot_roofline(peak=tpukit.peak_for('TPU v5 lite'))",
    "d.plot()",
    "history.plot()",
]


@pytest.mark.parametrize(
    "ending", ["{}", "{};", "fig = {}"], ids=["value", "semicolon", "assigned"]
)
@pytest.mark.parametrize("call", PLOT_CALLS)
def test_a_plot_shows_once_in_a_notebook_cell_whatever_the_line_ends_with(
    inline_shell, call, ending
):
    shell, outputs = inline_shell
    shell.user_ns.pop("fig", None)
    result = shell.run_cell(f"import tpukit\n{ending.format(call)}", store_history=True)
    assert result.success, result.error_in_exec
    images = [o for o in outputs if "image/png" in o]
    assert len(images) == 1, f"{ending.format(call)!r} showed {len(images)} images"
    if ending.startswith("fig"):
        assert isinstance(shell.user_ns["fig"], matplotlib.figure.Figure)


def test_a_figure_displayed_by_hand_and_one_drawn_into_user_axes_show_once(inline_shell):
    shell, outputs = inline_shell
    cell = "fig = c.plot_ops()\ndisplay(fig)\nother = plt.figure()\nc.plot_fusions(ax=other.add_subplot());"
    shell.run_cell("import matplotlib.pyplot as plt\n" + cell, store_history=True)
    assert sum("image/png" in o for o in outputs) == 2  # plot_ops once, the user's figure once


def test_plots_of_one_cell_show_in_the_order_called(inline_shell):
    shell, outputs = inline_shell
    shell.run_cell("c.plot_ops(); c.plot_roofline()", store_history=True)
    sizes = [re.search(r"size (\d+x\d+)", o["text/plain"])[1] for o in outputs if "image/png" in o]
    ops = shell.user_ns["c"].plot_ops()
    width, height = (ops.get_size_inches() * ops.dpi).round().astype(int)
    # the roofline (750x500) is the cell's value, shown by IPython, yet it comes second
    assert sizes == [f"{width}x{height}", "750x500"], sizes


def test_a_plot_in_a_script_stays_out_of_pyplot(mlp32):
    fig = mlp32.plot_ops()
    assert isinstance(fig, matplotlib.figure.Figure) and plt.get_fignums() == []
    plt.show()  # nothing of tpukit's to show (Agg), and nothing left behind
