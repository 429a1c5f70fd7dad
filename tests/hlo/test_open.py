"""`tpukit.hlo.open`: any XLA program, from text, a file or a dump folder, read without JAX.

The fixtures under tests/data/hlo/ are small modules written here in the style of four
producers: JAX (op_name paths, source lines), TensorFlow ('%' names, '{...}'
constants), XLA:GPU (cuBLAS/cuDNN calls inside one command-buffer call) and an SPMD
step (async all-gather and all-reduce pairs). Every expected figure is derived by hand.
"""

import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

import tpukit  # noqa: E402
from tests._support.data import HLO_DATA as DATA
from tests._support.graph_page import LABEL_PX, node, open_graph
from tests._support.notebook_page import ORIGIN
from tpukit import hlo  # noqa: E402
from tpukit.compilation import plot_fusions, plot_ops, plot_roofline
from tpukit.graph._first_view import first_view  # noqa: E402
from tpukit.graph._graph_data import INSTRUCTION, SCOPE  # noqa: E402

DUMP = DATA / "dump"
JAX, TF, GPU, SPMD = (
    DATA / "jax_mlp.hlo",
    DATA / "tf_conv_block.hlo",
    DATA / "gpu_command_buffer.hlo",
    DATA / "spmd_async_collectives.hlo",
)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_fixtures_stay_small():
    files = [p for p in DATA.rglob("*") if p.is_file() and p.name in _OWN]
    assert len(files) == len(_OWN) and all(p.stat().st_size < 8 * 1024 for p in files)


_OWN = {
    "jax_mlp.hlo",
    "tf_conv_block.hlo",
    "gpu_command_buffer.hlo",
    "spmd_async_collectives.hlo",
    "module_0003.jit_predict.before_optimizations.txt",
    "module_0003.jit_predict.cpu_after_optimizations.txt",
    "module_0003.jit_predict.cpu_after_optimizations-buffer-assignment.txt",
    "module_0007.jit_train_step.sm_9.0_gpu_after_optimizations.txt",
}


def test_text_file_and_folder_open_the_same_program():
    text = JAX.read_text()
    from_text = hlo.open(text)
    from_file = hlo.open(JAX)
    from_str_path = hlo.open(str(JAX))
    from_folder = hlo.open(DUMP, module="jit_predict", stage="lowered")
    for program in (from_text, from_file, from_str_path, from_folder):
        assert isinstance(program, hlo.HloProgram)
        assert program.name == "jit_predict"
        assert program.stages == ("lowered",)
        assert program.op_counts() == from_text.op_counts()
    assert from_text.source is None and from_file.source == str(JAX)
    assert from_text.hlo_text() == text
    # 2 * 8 * 32 * 16 (x @ w1) + 2 * 8 * 4 * 32 (h @ w2)
    assert from_folder.cost.flops == 8192 + 2048
    assert "open" in dir(hlo) and "HloProgram" in hlo.__all__


def test_a_folder_holds_both_stages_and_picks_modules_by_name_or_number():
    program = hlo.open(DUMP, module="jit_predict")
    assert program.stages == ("lowered", "optimized") and program.stage == "optimized"
    assert program.source == str(DUMP)
    assert hlo.open(DUMP, module=3).op_counts() == program.op_counts()
    assert hlo.open(str(DUMP), module="module_0003.jit_predict").stages == program.stages
    assert program.op_counts("lowered")["fusion"] == 0
    assert program.op_counts("optimized", open_fusions=False)["fusion"] == 1
    assert [f.name for f in program.fusions()] == ["loop_fusion"]
    assert program.fusions("lowered") == []
    # The dump names the platform after the number: sm_9.0_gpu_after_optimizations.
    gpu = hlo.open(DUMP, module="jit_train_step")
    assert gpu.stages == ("optimized",) and gpu.cost.flops == hlo.open(GPU).cost.flops


def test_an_unclear_folder_lists_what_is_there():
    with pytest.raises(tpukit.ArgumentError, match="holds 2 modules") as info:
        hlo.open(DUMP)
    message = str(info.value)
    assert "module_0003.jit_predict (lowered, optimized)" in message
    assert "module_0007.jit_train_step (optimized)" in message and "module=" in message
    with pytest.raises(
        tpukit.ArgumentError, match="no module .* is called 'jit_loss'.*jit_predict"
    ):
        hlo.open(DUMP, module="jit_loss")
    with pytest.raises(tpukit.ArgumentError, match="has no lowered HLO.*stage='optimized'"):
        hlo.open(DUMP, module="jit_train_step", stage="lowered")
    with pytest.raises(tpukit.ArgumentError, match="holds no XLA dump"):
        hlo.open(DATA)  # HLO files, but no module_*.txt dump
    with pytest.raises(ValueError, match="stage must be 'lowered' or 'optimized'"):
        hlo.open(DUMP, module=3, stage="after")
    # A file of one module: module= may name it (a file may hold several), nothing else.
    assert hlo.open(JAX, module="jit_predict").name == "jit_predict"
    with pytest.raises(tpukit.ArgumentError, match="module= picks one of several modules"):
        hlo.open(JAX, module="jit_loss")


def test_a_stage_the_program_lacks_is_a_clear_error():
    program = hlo.open(GPU)
    assert program.stages == ("optimized",)  # is_scheduled=true
    with pytest.raises(tpukit.ArgumentError, match="holds only the optimized HLO.*before_opt"):
        program.hlo_module("lowered")
    with pytest.raises(ValueError, match="stage must be"):
        program.op_counts("compiled")
    assert hlo.open(JAX).stages == ("lowered",)  # no schedule, no fusion
    assert hlo.open(JAX, stage="optimized").stages == ("optimized",)  # the user says so


def test_graph_refuses_a_folder_and_points_at_open():
    with pytest.raises(tpukit.ArgumentError, match=r"is a folder.*tpukit\.hlo\.open\(folder"):
        hlo.graph(DUMP)
    program = hlo.open(DUMP, module="jit_predict")
    assert hlo.graph(program).stage == "optimized" and hlo.graph(program).title == "jit_predict"
    assert hlo.graph(program, stage="lowered").num_instructions == 11


def test_jax_style_module_keeps_its_scopes_and_sources():
    program = hlo.open(JAX)
    graph = program.graph()
    labels = {graph._data.label[i] for i, k in enumerate(graph._data.kind) if k == SCOPE}
    assert {"dense_1", "dense_2"} <= labels
    dot = program.hlo_module().instruction("dot.5")
    assert dot.source_location.endswith("model.py:12")


def test_tf_style_module_reads_percent_names_and_elided_constants():
    program = hlo.open(TF)
    module = program.hlo_module()
    assert module.instruction("constant.5").opcode == "constant"  # constant({...})
    assert program.op_counts(open_fusions=False)["convolution"] == 1
    # convolution: 2 * (batch 4 x 8 out) * 3 in features * taps on real input per side: 8 x 3
    # less SAME's 2 (with the padding's, 2 * 2048 * 3 * 9 until session 51), as XLA counts
    assert program.cost.flops == 2 * (4 * 8) * 3 * (8 * 3 - 2) ** 2
    assert [f.kind for f in program.fusions()] == ["kLoop"]


def test_gpu_style_module_counts_library_calls_without_their_workspace():
    program = hlo.open(GPU)
    # cuBLAS 2*64*128*256 + cuBLAS 2*64*10*128 + cuDNN 2*(8*4)*3*(16*3-2)**2, its SAME 3x3
    # window's taps on real input (442,368 with the padding's, until session 51)
    assert program.cost.flops == 4194304 + 163840 + 2 * (8 * 4) * 3 * (16 * 3 - 2) ** 2
    module = program.hlo_module()
    gemm = module.instruction("cublas-gemm.2")
    # reads f32[64,128] + f32[128,10], writes f32[64,10]; the s8[1048576] workspace is scratch
    assert hlo.instruction_bytes(gemm, module) == 4 * (64 * 128 + 128 * 10 + 64 * 10)
    assert program.op_counts()["custom-call"] == 3


def test_spmd_style_module_counts_each_async_collective_once():
    program = hlo.open(SPMD)
    found = {c.opcode: (c.count, c.bytes) for c in program.collectives()}
    # all-gather: bf16[4096,512] gathered; all-reduce: f32[512,512]
    assert found == {"all-gather": (1, 4096 * 512 * 2), "all-reduce": (1, 512 * 512 * 4)}
    assert program.cost.flops == 2 * 256 * 512 * 1024
    assert "collectives     all-gather x1 (4.0 MiB), all-reduce x1 (1.0 MiB)" in repr(program)


def test_cost_of_a_program_is_derived_from_its_shapes():
    program = hlo.open(DUMP, module="jit_predict")
    # dot.5: reads 8*16 + 16*32 floats, writes 8*32; loop_fusion: reads 8*32 + 32, writes
    # 8*32; dot.11: reads 8*32 + 32*4, writes 8*4. Parameters move nothing.
    expected = 4 * ((128 + 512 + 256) + (256 + 32 + 256) + (256 + 128 + 32))
    assert program.cost.bytes_accessed == expected == 7424
    assert program.cost.arithmetic_intensity == pytest.approx(10240 / 7424)
    assert program.cost.backend_flops is None and not hasattr(program, "memory")


def test_summary_names_the_module_and_its_figures():
    program = hlo.open(DUMP, module="jit_predict")
    text = repr(program)
    assert text.startswith(f"HloProgram 'jit_predict' from {DUMP}")
    assert "14 (fusions opened), 7 outside fusions" in text
    assert "10.2 kFLOP" in text and "7.2 KiB" in text and "largest: loop_fusion" in text
    page = program._repr_html_()
    assert "jit_predict" in page and "10.2 kFLOP" in page and "<table>" in page


def test_diff_of_the_two_stages_of_one_dump():
    before = hlo.open(DUMP, module="jit_predict", stage="lowered")
    after = hlo.open(DUMP, module="jit_predict", stage="optimized")
    d = tpukit.diff(before, after)
    assert d.labels == ("lowered", "optimized") and d.stage == "lowered vs optimized"
    assert repr(d).startswith("HLO diff: lowered (jit_predict) vs optimized (jit_predict): ")
    assert (d.row("fusions").a, d.row("fusions").b) == (0, 1)
    outside = d.row("instructions outside fusions")
    assert (outside.a, outside.b) == (11, 7)  # bias add, broadcasts and relu fused into one
    assert not d.row("FLOPs").changed  # fusing moves no matmul
    assert (
        d.row("arguments").a == d.row("arguments").b == "f32[8,16], f32[16,32], f32[32], f32[32,4]"
    )
    assert d.row("compile time").a is None
    both = hlo.open(DUMP, module="jit_predict")
    assert tpukit.diff(both, both, stage="lowered").row("fusions").b == 0
    with pytest.raises(tpukit.ArgumentError, match="holds only the lowered HLO"):
        tpukit.diff(before, after, stage="optimized")


def test_diff_compares_a_compiled_with_its_own_text():
    c = tpukit.compile(lambda x, w: jnp.tanh(x @ w), jnp.ones((8, 16)), jnp.ones((16, 4)))
    d = tpukit.diff(c, hlo.open(c.hlo_text()), labels=("compiled", "opened"))
    ops = [r for r in d.rows if r.section.startswith("ops")]
    assert ops and not any(r.changed for r in ops)
    assert d.row("FLOPs counted (dot/conv)").a == d.row("FLOPs counted (dot/conv)").b == 1024


def test_plots_accept_a_program_and_a_parsed_module():
    program = hlo.open(DUMP, module="jit_predict")
    fig = plot_ops(program)
    lowered, optimized = fig.axes[0].containers
    assert max(lowered.datavalues) == 4 and max(optimized.datavalues) == 6  # parameters
    single = plot_ops(hlo.open(GPU))
    assert len(single.axes[0].containers) == 1
    assert "optimized 42" in single.axes[0].get_title()
    assert len(plot_ops(hlo.open(GPU).hlo_module()).axes[0].containers) == 1
    fusions = plot_fusions(program)
    assert [t.get_text() for t in fusions.axes[0].get_yticklabels()][0].startswith("loop_fusion")
    roofline = plot_roofline(program)
    assert "pass peak=" in roofline.axes[0].get_title()
    peaked = plot_roofline(program, peak=tpukit.peak_for("TPU v5 lite"))
    assert "TPU v5" in peaked.axes[0].get_title()
    with pytest.raises(TypeError, match=r"tpukit\.hlo\.open"):
        plot_ops("not a program")


def _shown(graph):
    data = graph._data
    opened = set(first_view(data))
    nodes, _ = data.visible(opened)
    return data, opened, nodes


def test_first_view_enters_the_command_buffer_and_keeps_parameters_closed():
    data, opened, nodes = _shown(hlo.open(GPU).graph())
    call = next(i for i, instr in enumerate(data.instr) if instr and instr.name == "call")
    assert call in opened  # the lone call is entered: its body shows
    shown = {data.label[n] for n in nodes}
    assert {"cublas-gemm.1", "loop_bias_relu_fusion", "cudnn-conv.1"} <= shown
    params = [
        n for n in nodes if data.kind[n] == INSTRUCTION and data.instr[n].opcode == "parameter"
    ]
    assert params == []  # 8 parameters outside and 8 inside, each set in a closed group
    inputs = [n for n in nodes if data.label[n] == "inputs"]
    assert len(inputs) == 2 and not opened & set(inputs)


def _command_buffer_module(params: int, gemms: int, converts: int) -> str:
    """A GPU-style step: ENTRY passes ``params`` arrays to one call of a command buffer
    (``gemms`` cuBLAS calls, each followed by a fusion) and converts its result
    ``converts`` times outside it."""
    lines = ["HloModule big_step, is_scheduled=true", ""]
    lines += ["%fused (a: f32[64,64]) -> f32[64,64] {", "  %a = f32[64,64]{1,0} parameter(0)"]
    lines += ["  ROOT %n = f32[64,64]{1,0} negate(%a)", "}", "", "%command_buffer {"]
    lines += [f"  %q.{i} = f32[64,64]{{1,0}} parameter({i})" for i in range(params)]
    previous = "%q.0"
    for i in range(gemms):
        lines.append(
            f"  %gemm.{i} = (f32[64,64]{{1,0}}, s8[65536]{{0}}) custom-call({previous}, "
            f'%q.{i % params}), custom_call_target="__cublas$gemm", backend_config='
            '{"gemm_backend_config":{"dot_dimension_numbers":{'
            '"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"]}}}'
        )
        lines.append(f"  %g.{i} = f32[64,64]{{1,0}} get-tuple-element(%gemm.{i}), index=0")
        lines.append(f"  %fusion.{i} = f32[64,64]{{1,0}} fusion(%g.{i}), kind=kLoop, calls=%fused")
        previous = f"%fusion.{i}"
    lines += [f"  ROOT %out = f32[64,64]{{1,0}} copy({previous})", "}", "", "ENTRY %main {"]
    lines += [f"  %p.{i} = f32[64,64]{{1,0}} parameter({i})" for i in range(params)]
    operands = ", ".join(f"%p.{i}" for i in range(params))
    lines.append(f"  %call = f32[64,64]{{1,0}} call({operands}), to_apply=%command_buffer")
    lines += [f"  %c.{i} = bf16[64,64]{{1,0}} convert(%call)" for i in range(converts)]
    results = ", ".join(f"%c.{i}" for i in range(converts))
    lines += [f"  ROOT %results = tuple({results})", "}"]
    return "\n".join(lines)


def test_first_view_enters_a_command_buffer_whatever_the_node_budget():
    # ENTRY shows 33 nodes (inputs, the call, 30 converts, outputs); the buffer's 35
    # (its inputs, 11 x gemm, get-tuple-element and fusion, the copy) would pass the
    # 60-node budget, so the call stayed one closed box over all the work.
    # Since issue 38 (session 45) a chain too tall for the frame is drawn as stages of its
    # data flow: the buffer is still entered, its work shown as stages holding the gemms
    # (since session 46 one of them may be drawn open, its own stages showing).
    data, opened, nodes = _shown(hlo.open(_command_buffer_module(35, 11, 30)).graph())
    call = next(i for i, instr in enumerate(data.instr) if instr and instr.name == "call")
    assert call in opened
    assert set(data.children[call]) <= set(nodes) | opened  # every stage of it is drawn

    def within(n: int) -> set[str]:
        return {data.label[n]}.union(*(within(c) for c in data.children[n]))

    shown = set().union(*(within(n) for n in nodes))
    assert {"gemm.0", "fusion.10"} <= shown
    kinds = {data.instr[n].opcode for n in nodes if data.instr[n] is not None}
    assert "parameter" not in kinds
    assert sum(1 for n in nodes if data.label[n] == "inputs") == 2


def _two_scopes(ops: int) -> str:
    """Plumbing first in program order (a chain of reshapes), then work (a chain of dots)."""
    lines = [
        "HloModule two_scopes",
        "",
        "ENTRY main {",
        "  x = f32[16,16]{1,0} parameter(0)",
        "  w = f32[16,16]{1,0} parameter(1)",
    ]
    previous = "x"
    for i in range(ops):
        lines.append(
            f"  r{i} = f32[16,16]{{1,0}} transpose({previous}), dimensions={{1,0}}, "
            f'metadata={{op_name="jit(f)/plumbing/transpose"}}'
        )
        previous = f"r{i}"
    for i in range(ops):
        lines.append(
            f"  d{i} = f32[16,16]{{1,0}} dot({previous}, w), lhs_contracting_dims={{1}}, "
            f'rhs_contracting_dims={{0}}, metadata={{op_name="jit(f)/work/dot_general"}}'
        )
        previous = f"d{i}"
    lines += [f"  ROOT out = (f32[16,16]{{1,0}}, f32[16,16]{{1,0}}) tuple({previous}, r0)", "}"]
    return "\n".join(lines)


def test_first_view_spends_its_budget_on_the_group_that_holds_the_flops():
    # Two chains of 6 ops: the first view's frame holds one open. Plumbing comes first in
    # the program, but the dots are the work, so "work" opens and "plumbing" stays closed.
    data, opened, _ = _shown(hlo.open(_two_scopes(6)).graph())
    groups = {data.label[i]: i for i, kind in enumerate(data.kind) if kind == SCOPE}
    assert groups["work"] in opened and groups["plumbing"] not in opened


def test_the_gpu_modules_first_view_shows_its_fusions_at_a_readable_size(browser):
    page = open_graph(browser, [hlo.open(GPU).graph()], "standalone")
    for name in ("loop_bias_relu_fusion", "input_softmax_fusion", "cudnn-conv.1"):
        assert node(page, name).is_visible()
    assert page.page.evaluate(LABEL_PX) >= 10
    assert page.errors == [] and all(url.startswith(ORIGIN) for url in page.requests)
