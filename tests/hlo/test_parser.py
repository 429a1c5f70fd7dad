"""The HLO model: parse what JAX prints at both stages, count ops, FLOPs and bytes.

Programs are compiled on the 8 simulated CPU devices from conftest.py; the GPU
modules (cuDNN convolutions, cuBLAS gemms) are hand-written fixtures in
tests/data/hlo/, checked against numbers computed by hand.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from tests._support.data import HLO_DATA as DATA
from tpukit._errors import HloTextError
from tpukit.hlo import (
    HloShape,
    dot_conv_flops,
    instruction_bytes,
    instruction_flops,
    op_category,
    op_counts,
    parse_hlo,
    parse_shape,
)

THIS_FILE = Path(__file__).read_text().splitlines()


def line_of(marker: str) -> int:
    """The 1-based line of this file that ends with ``# <marker>``."""
    return next(i for i, line in enumerate(THIS_FILE, 1) if line.endswith(f"# {marker}"))


def mlp(x, w1, w2):
    h = jnp.tanh(x @ w1)  # first dot
    return h @ w2


def mlp_loss(params, x):
    w1, w2 = params
    return jnp.sum(mlp(x, w1, w2) ** 2)


def conv_net(x, k1, k2):
    y = lax.conv_general_dilated(x, k1, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = jax.nn.relu(y)
    y = lax.conv_general_dilated(
        y, k2, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=2
    )
    return jnp.mean(y, axis=(1, 2))


def conv_valid(x, k):
    return lax.conv_general_dilated(
        x, k, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def scan_matvec(c, w):
    return lax.scan(lambda c, _: (jnp.tanh(c @ w), None), c, None, length=5)[0]


def while_count(x):
    return lax.while_loop(lambda c: c[0] < 7, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))[1]


def cond_switch(i, x, w):
    y = lax.cond(i > 0, lambda v: v @ w, lambda v: -v, x)
    return lax.switch(i, [jnp.sin, jnp.cos, jnp.exp], y)


def sort_reduce(x):
    return jnp.sort(x, axis=0), jnp.max(x, axis=1), jnp.argmin(x), jnp.cumsum(x, axis=0)


def remat_mlp(params, x):
    return jnp.sum(jax.checkpoint(lambda p, v: mlp(v, *p))(params, x) ** 2)


def bf16_matmul(a, b):
    return (a @ b).astype(jnp.float32)


def sharded_step(x, w):
    return jnp.sum(jnp.tanh(x @ w))


X, W1, W2 = jnp.ones((32, 64)), jnp.ones((64, 128)), jnp.ones((128, 10))
MLP_FORWARD_FLOPS = 2 * 32 * 64 * 128 + 2 * 32 * 128 * 10
# Gradient wrt both weights: forward, then dW2 = h^T g, dh = g W2^T, dW1 = x^T dh.
MLP_GRAD_FLOPS = MLP_FORWARD_FLOPS + 2 * 128 * 10 * 32 + 2 * 32 * 10 * 128 + 2 * 64 * 128 * 32
CONV_X, CONV_K1, CONV_K2 = (
    jnp.ones((2, 64, 64, 8)),
    jnp.ones((3, 3, 8, 16)),
    jnp.ones((3, 3, 8, 16)),
)
# 2 * (batch x out features) * kernel in features (16 / 2 groups = 8 in the second) * taps on
# real input per side: 64 x 3 less SAME's 2 padding taps, 32 x 3 less 1 at stride 2 (session 51).
CONV_NET_FLOPS = 2 * (2 * 16) * 8 * (64 * 3 - 2) ** 2 + 2 * (2 * 16) * 8 * (32 * 3 - 1) ** 2
CONV_VALID_FLOPS = 2 * (2 * 62 * 62 * 16) * 8 * 9


def _sharded_args():
    mesh = Mesh(np.array(jax.devices()).reshape(8), ("data",))
    x = jax.device_put(jnp.ones((64, 16)), NamedSharding(mesh, PartitionSpec("data", None)))
    return x, jnp.ones((16, 4))


PROGRAMS = {
    "mlp": (mlp, lambda: (X, W1, W2)),
    "mlp_grad": (jax.grad(mlp_loss), lambda: ((W1, W2), X)),
    "conv_net": (conv_net, lambda: (CONV_X, CONV_K1, CONV_K2)),
    "conv_grad": (
        jax.grad(lambda x, k: jnp.sum(conv_valid(x, k)), (0, 1)),
        lambda: (CONV_X, CONV_K1),
    ),
    "scan": (scan_matvec, lambda: (jnp.ones((8, 16)), jnp.ones((16, 16)))),
    "while": (while_count, lambda: (jnp.ones((4,)),)),
    "cond_switch": (cond_switch, lambda: (1, jnp.ones((8, 16)), jnp.ones((16, 16)))),
    "sort_reduce": (sort_reduce, lambda: (jnp.arange(24.0).reshape(6, 4),)),
    "remat_grad": (jax.grad(remat_mlp), lambda: ((W1, W2), X)),
    "bf16": (
        bf16_matmul,
        lambda: (jnp.ones((16, 32), jnp.bfloat16), jnp.ones((32, 8), jnp.bfloat16)),
    ),
    "sharded": (sharded_step, _sharded_args),
}


@pytest.fixture(scope="module")
def compiled_programs():
    """name -> (lowered text with debug info, optimized text, jax Compiled)."""
    out = {}
    for name, (fn, make_args) in PROGRAMS.items():
        lowered = jax.jit(fn).lower(*make_args())
        compiled = lowered.compile()
        out[name] = (lowered.as_text(dialect="hlo", debug_info=True), compiled.as_text(), compiled)
    return out


def texts(compiled_programs):
    for name, (lowered, optimized, _) in compiled_programs.items():
        yield f"{name}/lowered", lowered
        yield f"{name}/optimized", optimized


# An independent reading of the text, by plain regexes, to check the parser against.
_INSTR_LINE = re.compile(r"^\s+(?:ROOT )?%?[\w.\-]+ = ")
_OPCODE = re.compile(r" = .*?([a-z][a-z0-9\-]*)\(")


def regex_blocks(text: str) -> dict[str, list[str]]:
    """Computation name -> its instruction lines, by indentation alone."""
    blocks: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.endswith("{") and not line.startswith(" "):
            current = line.removeprefix("ENTRY ").split()[0].lstrip("%")
            blocks[current] = []
        elif current is not None and _INSTR_LINE.match(line):
            blocks[current].append(line)
    return blocks


def test_every_instruction_line_is_parsed(compiled_programs):
    for label, text in texts(compiled_programs):
        module = parse_hlo(text)
        blocks = regex_blocks(text)
        assert list(module.computations) == list(blocks), label
        for name, lines in blocks.items():
            comp = module.computations[name]
            assert len(comp) == len(lines), (label, name)
            assert [i.text for i in comp] == [line.strip() for line in lines], (label, name)
        assert not any(i.opcode == "unknown" for i in module.instructions()), label
        assert module.name.startswith("jit_"), label
        assert module.entry.is_entry and module.entry.kind == "entry"
        assert "entry_computation_layout" in module.attributes


def test_shapes_and_operands_round_trip(compiled_programs):
    for label, text in texts(compiled_programs):
        module = parse_hlo(text)
        for comp in module.computations.values():
            for instr in comp:
                line = re.sub(r"/\*index=\d+\*/", "", instr.text)
                assert f" = {instr.shape} {instr.opcode}(" in line, (label, instr.text)
                for operand in instr.operands:
                    assert comp.get(operand) is not None, (label, instr.text, operand)
                if "/optimized" in label or instr.opcode in ("parameter", "constant"):
                    continue
                # The lowered stage writes operands as bare names: "dot(x.1, w.1)".
                assert f"{instr.opcode}({', '.join(instr.operands)})" in line, (label, line)
                assert comp.root is not None and comp.root.is_root


def test_called_computations_and_kinds(compiled_programs):
    module = parse_hlo(compiled_programs["while"][0])
    (loop,) = [i for i in module.entry if i.opcode == "while"]
    roles = {ref.role: module.computations[ref.name].kind for ref in loop.called_computations}
    assert roles == {"body": "while_body", "condition": "while_condition"}
    assert module.callers(loop.called_computations[0].name) == [loop]

    module = parse_hlo(compiled_programs["cond_switch"][0])
    branches = [i for i in module.instructions() if i.opcode == "conditional"]
    assert len(branches) == 2 and len(branches[1].called_computations) == 3
    assert {module.computations[r.name].kind for b in branches for r in b.called_computations} == {
        "branch"
    }

    module = parse_hlo(compiled_programs["sort_reduce"][1])
    kinds = Counter(c.kind for c in module.computations.values())
    assert kinds["applied"] >= 2 and kinds["fusion"] >= 1 and kinds["entry"] == 1
    for instr in module.instructions():
        if instr.opcode in ("reduce", "sort"):
            assert all(
                module.computations[r.name].kind == "applied" for r in instr.called_computations
            )
        if instr.opcode == "fusion":
            assert instr.fusion_kind in ("kLoop", "kInput", "kOutput", "kCustom")
            assert [c.kind for c in module.called(instr)] == ["fusion"]


def test_metadata_points_at_this_file(compiled_programs):
    lowered, optimized, _ = compiled_programs["mlp"]
    for text in (lowered, optimized):
        module = parse_hlo(text)
        first_dot = min(
            (i for i in module.instructions() if i.opcode == "dot"),
            key=lambda i: i.metadata.source_line,
        )
        assert first_dot.metadata.source_file == __file__
        assert first_dot.metadata.source_line == line_of("first dot")
        assert first_dot.source_location == f"test_parser.py:{line_of('first dot')}"
        assert first_dot.metadata.op_name.endswith("dot_general")
        assert first_dot.name_scope == first_dot.metadata.op_name.rsplit("/", 1)[0]
        # JAX 0.8+ writes the whole stack as tables (JAX 0.7: only the innermost frame)
        has_tables = "stack_frame_id" in text
        assert bool(module.stack_frames) == has_tables, "the stack-frame tables were not read"


def test_op_counts_match_an_independent_count(compiled_programs):
    for label, text in texts(compiled_programs):
        blocks = regex_blocks(text)
        applied, fused = set(), set()
        for line in (line for lines in blocks.values() for line in lines):
            opcode = _OPCODE.search(line).group(1)
            for role, name in re.findall(r"(to_apply|calls)=%?([\w.\-]+)", line):
                if role == "to_apply" and opcode != "call":
                    applied.add(name)
                if role == "calls" and opcode == "fusion":
                    fused.add(name)

        def count(skip, blocks=blocks):
            return Counter(
                _OPCODE.search(line).group(1)
                for name, lines in blocks.items()
                if name not in skip
                for line in lines
            )

        module = parse_hlo(text)
        assert op_counts(module) == count(applied), label
        assert op_counts(module, open_fusions=False) == count(applied | fused), label


def test_op_counts_of_a_known_program(compiled_programs):
    counts = op_counts(parse_hlo(compiled_programs["mlp"][0]))
    assert counts["dot"] == 2 and counts["tanh"] == 1 and counts["parameter"] == 3


def test_dot_flops_are_2mnk(compiled_programs):
    for name, expected in [("mlp", MLP_FORWARD_FLOPS), ("mlp_grad", MLP_GRAD_FLOPS)]:
        lowered, optimized, _ = compiled_programs[name]
        assert dot_conv_flops(parse_hlo(lowered)) == expected, name
        assert dot_conv_flops(parse_hlo(optimized)) == expected, name
    # Rematerialisation recomputes the forward dots in the backward pass.
    assert (
        dot_conv_flops(parse_hlo(compiled_programs["remat_grad"][0]))
        == MLP_GRAD_FLOPS + 2 * 32 * 64 * 128
    )
    bf16 = parse_hlo(compiled_programs["bf16"][0])
    assert dot_conv_flops(bf16) == 2 * 16 * 8 * 32
    (dot,) = [i for i in bf16.instructions() if i.opcode == "dot"]
    assert dot.shape.dtype == "bf16" and dot.shape.nbytes == 16 * 8 * 2
    assert instruction_bytes(dot, bf16) == (16 * 32 + 32 * 8 + 16 * 8) * 2


def test_batched_dot_flops():
    a, b = jnp.ones((4, 8, 16)), jnp.ones((4, 16, 32))
    text = jax.jit(lambda a, b: jnp.einsum("bij,bjk->bik", a, b)).lower(a, b).as_text(dialect="hlo")
    assert dot_conv_flops(parse_hlo(text)) == 2 * 4 * 8 * 32 * 16


def test_loop_flops_use_the_known_trip_count(compiled_programs):
    lowered, optimized, _ = compiled_programs["scan"]
    step = 2 * 8 * 16 * 16
    # No backend_config before optimisation: the trip count is read from the loop counter.
    assert dot_conv_flops(parse_hlo(lowered)) == 5 * step
    module = parse_hlo(optimized)
    loops = [i for i in module.instructions() if i.opcode == "while"]
    if loops and "known_trip_count" in loops[0].attributes.get("backend_config", ""):
        assert dot_conv_flops(module) == 5 * step
    else:  # the CPU compiler unrolled the loop
        assert dot_conv_flops(module) == 5 * step


def test_conditional_flops_take_the_costliest_branch(compiled_programs):
    module = parse_hlo(compiled_programs["cond_switch"][0])
    assert dot_conv_flops(module) == 2 * 8 * 16 * 16


def test_conv_flops_match_the_formula_and_xla(compiled_programs):
    lowered, optimized, compiled = compiled_programs["conv_net"]
    assert dot_conv_flops(parse_hlo(lowered)) == CONV_NET_FLOPS
    assert dot_conv_flops(parse_hlo(optimized)) == CONV_NET_FLOPS
    # XLA counts the same convolution FLOPs, and the relu's and mean's elementwise ones.
    assert compiled.cost_analysis()["flops"] == pytest.approx(CONV_NET_FLOPS, rel=0.01)

    valid = jax.jit(conv_valid).lower(CONV_X, CONV_K1).compile()
    module = parse_hlo(valid.as_text())
    assert dot_conv_flops(module) == CONV_VALID_FLOPS
    assert dot_conv_flops(module) == pytest.approx(valid.cost_analysis()["flops"], rel=0.01)


def test_conv_gradient_flops(compiled_programs):
    lowered, optimized, compiled = compiled_programs["conv_grad"]
    # The input gradient is a full convolution of the 62x62 output gradient with the
    # flipped kernel (padding 2): 62 x 3 (output, tap) pairs per side on real elements (64 x 3
    # with the padding's, until session 51). The kernel gradient convolves the input with the
    # output gradient as a 62x62 window: 3x3x8x16 outputs of 2 * 62 * 62 multiply-adds.
    input_grad = 2 * (2 * 8) * 16 * (62 * 3) ** 2
    kernel_grad = 2 * (3 * 3 * 8 * 16) * 2 * 62 * 62
    assert kernel_grad == input_grad == CONV_VALID_FLOPS
    for text in (lowered, optimized):
        module = parse_hlo(text)
        convs = [i for i in module.instructions() if i.opcode == "convolution"]
        assert len(convs) == 2  # the forward result is unused by the gradient
        assert [instruction_flops(c, module) for c in convs] == [input_grad, kernel_grad]
        assert dot_conv_flops(module) == input_grad + kernel_grad
    # XLA counts the same (and the cotangent's elementwise FLOPs).
    assert compiled.cost_analysis()["flops"] == pytest.approx(2 * CONV_VALID_FLOPS, rel=0.01)


def test_cudnn_convolutions():
    module = parse_hlo((DATA / "gpu_cudnn_conv.hlo").read_text())
    flops = {i.name: instruction_flops(i, module) for i in module.entry}
    # (output, tap) pairs on real input per side: SAME's edge outputs miss a tap (session 51).
    vgg = 2 * (100 * 64) * 64 * (224 * 3 - 2) ** 2  # 3x3 64->64 on 100 images of 224x224
    block2 = 2 * (100 * 128) * 64 * (112 * 3 - 2) ** 2  # 3x3 64->128 on 112x112
    assert flops["vgg-conv"] == vgg == 367_738_880_000
    assert flops["forward"] == flops["fused-conv"] == block2
    # Backward-input: (output grad, kernel) -> input grad; backward-filter:
    # (input, output grad) -> kernel. Both do the forward convolution's work.
    assert flops["backward-input"] == block2
    assert flops["backward-filter"] == block2
    assert flops["depthwise-conv"] == 2 * (8 * 64) * 1 * (32 * 3 - 2) ** 2
    assert dot_conv_flops(module) == vgg + 4 * block2 + flops["depthwise-conv"]
    conv = module.instruction("vgg-conv")
    assert op_category(conv) == "matmul" and op_category(conv.opcode) == "other"
    assert conv.custom_call_target == "__cudnn$convForward"
    assert conv.source_location == "vgg.py:21"
    assert module.computations["add"].kind == "applied"


def test_vgg19_on_gpu_counts_the_cudnn_work():
    module = parse_hlo((DATA / "gpu_vgg19_forward.hlo").read_text())
    expected, channels, size = 0, 3, 224
    for layer in [64, 64, "M", 128, 128, "M"] + [256] * 4 + ["M"] + ([512] * 4 + ["M"]) * 2:
        if layer == "M":
            size //= 2
        else:
            expected += 2 * (100 * layer) * channels * (size * 3 - 2) ** 2  # SAME 3x3
            channels = layer
    expected += 2 * 100 * (25088 * 4096 + 4096 * 4096 + 4096 * 1000)
    assert dot_conv_flops(module) == expected
    assert expected == pytest.approx(3.79e12, rel=0.01)  # XLA's cost analysis says ~7e9
    assert op_counts(module)["custom-call"] == 19
    assert op_counts(module)["reduce-window"] == 5


def test_cublas_gemms_triton_fusions_loops_and_branches():
    module = parse_hlo((DATA / "gpu_cublas_gemm.hlo").read_text())
    flops = {i.name: instruction_flops(i, module) for i in module.entry}
    assert flops["cublas-gemm.1"] == 2 * 128 * 512 * 784
    assert flops["lt-matmul"] == 2 * 4 * 128 * 256 * 64
    assert flops["gemm_fusion"] == 2 * 256 * 1024 * 512
    assert flops["while"] == 10 * 2 * 32 * 16 * 64  # lhs contracts its dim 0; trip count 10
    assert flops["branch"] == 2 * 128 * 128 * 784  # the costlier branch
    assert dot_conv_flops(module) == sum(flops.values())
    fusion = module.instruction("gemm_fusion")
    assert fusion.fusion_kind == "kCustom" and op_category(fusion) == "fusion"
    assert module.computations["triton_gemm_dot"].kind == "fusion"
    assert module.instruction("dot.7").source_location == "model.py:40"
    counts = op_counts(module)
    assert counts["dot"] == 1 and counts["fusion"] == 1 and counts["custom-call"] == 4
    assert op_counts(module, open_fusions=False)["dot"] == 0


def test_odd_syntax_fixture():
    module = parse_hlo((DATA / "odd_syntax.hlo").read_text())
    assert module.name == "odd_module" and module.attributes["num_partitions"] == "8"
    assert not module.unparsed
    p0 = module.instruction("p0")
    assert p0.shape.layout == "1,0:T(8,128)" and p0.attributes["sharding"].startswith("{devices=")
    assert str(p0.shape) == "f32[8,128]{1,0:T(8,128)}"
    assert module.instruction("copy-done").shape.memory_space == 1
    p1 = module.instruction("%p1")
    assert (
        p1.shape.dims == (16,) and p1.shape.dynamic == (True,) and str(p1.shape) == "s32[<=16]{0}"
    )
    assert (
        module.instruction("tok").shape.dtype == "token"
        and module.instruction("tok").shape.nbytes == 0
    )
    t6 = module.instruction("t6")
    assert t6.operands == ["pair", "p0", "p0", "p0", "p0", "p1"]
    assert t6.shape.elements[0].is_tuple and len(t6.shape.elements) == 6
    assert (
        module.instruction("big").operand_text.split() == "{ { 1, 2 }, { 3, 4 }, { 5, 6 } }".split()
    )
    assert module.instruction("big").metadata.op_name == "jit(f)/big"
    assert module.instruction("c").operand_text == "{ { 1, 2, 3 }, { 4, 5, 6 } }"
    assert module.instruction("sum").operands == ["a", "b"]
    ar = module.instruction("ar-start")
    assert ar.attributes["backend_config"].endswith('"quotes\\" inside"}')
    assert ar.attributes["replica_groups"] == "{{0,1,2,3},{4,5,6,7}}"
    assert [r.role for r in ar.called_computations] == ["to_apply"]
    assert op_category(ar) == "collective" and op_category("all-reduce-done") == "collective"
    assert module.computations["async_computation"].kind == "async"
    assert [r.name for r in module.instruction("cond").called_computations] == [
        "on_true",
        "on_false",
    ]
    assert module.computations["on_true"].kind == "branch"
    cc = module.instruction("cc")
    assert cc.custom_call_target == "MyOddTarget"
    assert cc.attributes["frontend_attributes"] == '{_xla_compute_type="host",name="x{y}"}'
    assert cc.metadata.op_name == 'jit(f)/odd{name}/"q"' and cc.source_location == "x.py:12"
    assert cc.name_scope == "jit(f)/odd{name}"
    assert module.entry.root.name == "out" and module.entry.root.is_root
    assert module.instruction("e").computation == "on_true"
    assert module.computations["main"].parameters[1].name == "p1"


ODD_MODULE = """HloModule odd, weird_attr, =broken, x={unclosed
this line is not HLO
ENTRY main {
  p = f32[4]{0} parameter(0)
  q = f32[4]{0} frobnicate(p, p), shiny, fancy=={x}, =, z={{{
  r = f32[4 badshape sine(p)
  s = opaque[] custom-call(), custom_call_target="x", backend_config="unterminated
  t = f32[4]{0} add(p, q), metadata={op_name="a/b" source_line=notanumber stack_frame_id=99}
  ROOT u = (f32[4]{0}, opaque[]) tuple(t, s)
  garbage with no equals sign (
}
%after_unclosed (a: f32[]) -> f32[] {
  ROOT %a = f32[] parameter(0)
}
"""


def test_odd_lines_degrade_to_raw_strings():
    module = parse_hlo(ODD_MODULE)
    assert module.name == "odd"
    assert "this line is not HLO" in module.unparsed
    main = module.entry
    q = main["q"]
    assert q.opcode == "frobnicate" and q.operands == ["p", "p"]
    assert "shiny" in q.attributes[""]
    assert op_category(q) == "other" and instruction_flops(q, module) == 0
    assert main["r"].shape.dtype == "unknown"
    assert main["s"].shape.dtype == "opaque" and main["s"].shape.nbytes == 0
    assert main["t"].metadata.op_name == "a/b" and main["t"].metadata.source_line == 0
    assert main["t"].source_location == ""
    assert "after_unclosed" in module.computations  # a runaway bracket stops at the next header
    for instr in module.instructions():
        instruction_bytes(instr, module)
    dot_conv_flops(module)
    op_counts(module)
    module.edges("main")


@pytest.mark.parametrize(
    "line",
    [
        "",
        "%",
        "=",
        "x =",
        "ROOT",
        "%a = f32[2]{0} add(%b, %c)))), ,,,, =x",
        "/* comment */ %a = token[] after-all()",
    ],
)
def test_single_odd_lines_never_raise(line):
    module = parse_hlo(f"HloModule m\nENTRY e {{\n  {line}\n}}\n")
    assert "e" in module.computations


@pytest.mark.parametrize(
    "line",
    [
        "x = f32[",
        "%a = (f32[2], (s32[]",
        '%a = f32[2]{0} add(%b, "%c), metadata={op_name="',
        "%a = f32[<=?,??]{0:T(} iota()",
    ],
)
def test_a_line_that_leaves_brackets_open_is_refused_as_cut(line):
    """A line left open swallows the closing brace: the text reads as cut mid-line
    (issue 19), not as a shorter program."""
    with pytest.raises(HloTextError, match="cut mid-line"):
        parse_hlo(f"HloModule m\nENTRY e {{\n  {line}\n}}\n")


def test_not_hlo_raises_a_clear_error():
    with pytest.raises(ValueError, match="does not look like HLO"):
        parse_hlo("hello world")
    stablehlo = jax.jit(jnp.sin).lower(1.0).as_text()
    with pytest.raises(ValueError, match="dialect='hlo'"):
        parse_hlo(stablehlo)
    with pytest.raises(TypeError, match="as a str"):
        parse_hlo(b"HloModule m")


def test_shapes():
    assert parse_shape("f32[128,784]{1,0}").nbytes == 128 * 784 * 4
    assert parse_shape("s4[3]").nbytes == 2 and parse_shape("u4[4]{0}").nbytes == 2
    assert parse_shape("f8e4m3fn[10]").nbytes == 10 and parse_shape("c128[2]").nbytes == 32
    assert parse_shape("c64[]").nbytes == 8 and parse_shape("pred[]").num_elements == 1
    assert parse_shape("bf16[2,3]").nbytes == 12 and parse_shape("f64[?,2]").dims == (-1, 2)
    nested = parse_shape("(f32[2]{0}, (s32[], u8[4]{0}), /*index=2*/token[])")
    assert nested.is_tuple and nested.nbytes == 8 + 4 + 4 and nested.num_elements == 2 + 1 + 4
    assert str(nested) == "(f32[2]{0}, (s32[], u8[4]{0}), token[])"
    assert [s.dtype for s in nested.leaves()] == ["f32", "s32", "u8", "token"]
    assert HloShape("bf16", (8, 128), layout="1,0").nbytes == 2048
    assert parse_shape("not a shape").dtype == "unknown"


def test_edges_carry_operand_bytes(compiled_programs):
    module = parse_hlo(compiled_programs["mlp_grad"][1])
    for comp in module.computations.values():
        edges = comp.edges()
        assert len(edges) == sum(len(i.operands) for i in comp)
        for edge in edges:
            assert edge.nbytes == comp[edge.source].shape.nbytes
            assert edge.source in comp[edge.target].operands
    assert module.edges(module.entry.name) == module.entry.edges()


def test_instruction_bytes(compiled_programs):
    module = parse_hlo(compiled_programs["mlp"][0])
    dot = [i for i in module.instructions() if i.opcode == "dot"][0]
    assert instruction_bytes(dot, module) == (32 * 64 + 64 * 128 + 32 * 128) * 4
    assert all(
        instruction_bytes(i, module) == 0 for i in module.instructions() if i.opcode == "parameter"
    )


def test_sharding_and_collectives(compiled_programs):
    lowered, optimized, _ = compiled_programs["sharded"]
    x = parse_hlo(lowered).entry.parameters[0]
    assert x.attributes["sharding"] == "{devices=[8,1]<=[8]}"
    module = parse_hlo(optimized)
    assert module.entry.parameters[0].shape.dims == (8, 16)  # one device's shard
    collectives = [i for i in module.instructions() if op_category(i) == "collective"]
    assert collectives, "expected an all-reduce of the partial sums"
    assert dot_conv_flops(module) == 2 * 8 * 4 * 16


def test_categories():
    assert op_category("convolution") == "matmul"
    assert op_category("reduce-window") == "reduction"
    assert op_category("dynamic-update-slice") == "data_movement"
    assert op_category("while") == "control_flow"
    assert op_category("collective-permute-start") == "collective"
    assert op_category("parameter") == op_category("constant") == "parameter/constant"
    assert op_category("rng-bit-generator") == "other"


def test_parsing_a_large_module_is_fast(compiled_programs):
    """A ResNet-50 training step is ~10k lines; parse 16k lines (10k+ instructions) well under a second."""
    text = compiled_programs["mlp_grad"][1]
    header, _, rest = text.partition("\n%")
    blocks = re.findall(r"^%?[\w.\-]+ \(.*?^}\n", "%" + rest, flags=re.M | re.S)
    block_lines = sum(len(b.splitlines()) for b in blocks)
    copies = blocks + [  # the originals, which ENTRY calls, and renamed copies
        re.sub(r"^%([\w.\-]+) \(", rf"%\1_{k} (", block, flags=re.M)
        for k in range(math.ceil(16_000 / block_lines))
        for block in blocks
    ]
    big = "\n".join([header, *copies, "ENTRY " + text.rpartition("ENTRY ")[2]])
    assert len(big.splitlines()) > 16_000
    best = math.inf
    for _ in range(2):
        start = time.perf_counter()
        module = parse_hlo(big)
        best = min(best, time.perf_counter() - start)
    assert sum(len(c) for c in module.computations.values()) > 10_000
    assert best < 1.0, f"parsing {len(big.splitlines())} lines took {best:.2f} s"


def test_a_custom_calls_comparator_is_applied_and_its_body_is_a_program():
    """A custom-call's ``called_computations`` are a program (Shardy's shard_map body,
    run once on arrays) or a per-element function (TopK's comparator, on scalars): only
    the first runs as program, for costs and the graph."""
    from tpukit.hlo.analysis._cost import run_computations

    text = """HloModule m
less (a: f32[], b: f32[]) -> pred[] {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}
body (x: f32[8,128]) -> f32[8,128] {
  x = f32[8,128]{1,0} parameter(0)
  ROOT e = f32[8,128]{1,0} exponential(x)
}
ENTRY main {
  p = f32[8,128]{1,0} parameter(0)
  top = (f32[8,2]{1,0}, s32[8,2]{1,0}) custom-call(p), custom_call_target="TopK", called_computations={less}
  ROOT shmap = f32[8,128]{1,0} custom-call(p), custom_call_target="xla.sdy.ManualComputation", called_computations={body}
}"""
    module = parse_hlo(text)
    assert module.computations["less"].kind == "applied"
    assert module.computations["body"].kind == "called"
    top, shmap = (module.entry[name] for name in ("top", "shmap"))
    assert run_computations(top, module) == []
    assert [c.name for c, _ in run_computations(shmap, module)] == ["body"]
