"""tpukit.compile and the Compiled object, through the Python API."""

import inspect
import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpukit
from tests._support.numerics import assert_close_across_processors
from tpukit import ArgumentError, CompileError, SignatureMismatchError
from tpukit.hlo import instruction_flops


def mlp(params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def mlp_params(widths=(784, 128, 64, 10), seed=0):
    rng = np.random.default_rng(seed)
    return [
        (rng.normal(0, 0.05, (m, n)).astype(np.float32), np.zeros(n, np.float32))
        for m, n in zip(widths[:-1], widths[1:])
    ]


@pytest.fixture(scope="module")
def mlp_compiled():
    return tpukit.compile(mlp, mlp_params(), tpukit.shape("f32[128,784]"))


def test_compile_from_shapes_gives_signature_and_output(mlp_compiled):
    sig = mlp_compiled.signature
    assert [p.name for p in sig.parameters] == ["params", "x"]
    assert all(p.kind == "array" for p in sig.parameters)
    assert sig.output.shape == (128, 10) and sig.output.dtype == jnp.float32
    assert "x: f32[128,784]" in str(sig) and str(sig).endswith("-> f32[128,10]")
    assert mlp_compiled.compile_seconds > 0


def test_compiled_runs_on_device_data_and_matches_jax(mlp_compiled):
    params = tpukit.put(mlp_params())
    x = tpukit.put(np.random.default_rng(1).random((128, 784), dtype=np.float32))
    out = mlp_compiled(params, x)
    assert isinstance(out, jax.Array)
    assert_close_across_processors(tpukit.fetch(out), mlp(params, x))


def test_mlp_flops_are_counted_from_the_dots(mlp_compiled):
    expected = 2 * 128 * (784 * 128 + 128 * 64 + 64 * 10)
    cost = mlp_compiled.cost
    assert cost.counted_flops == expected
    assert cost.flops >= expected
    assert cost.backend_flops is not None and cost.bytes_accessed > 0
    memory = mlp_compiled.memory
    assert memory.argument_bytes == 4 * (784 * 128 + 128 + 128 * 64 + 64 + 64 * 10 + 10 + 128 * 784)
    assert memory.output_bytes == 4 * 128 * 10


def test_op_counts_open_fusions_and_compare_stages(mlp_compiled):
    lowered = mlp_compiled.op_counts("lowered")
    optimized = mlp_compiled.op_counts("optimized")
    closed = mlp_compiled.op_counts("optimized", open_fusions=False)
    assert lowered["dot"] == 3 and optimized["dot"] == 3
    assert lowered["fusion"] == 0 and optimized["fusion"] >= 1
    # opened, the ops inside fusions count too: every dot is either left alone or fused
    fused_dots = sum(f.ops.get("dot", 0) for f in mlp_compiled.fusions())
    assert closed["dot"] + fused_dots == 3
    assert sum(optimized.values()) > sum(closed.values())
    assert "HloModule" in mlp_compiled.hlo_text("lowered")
    assert "fusion" in mlp_compiled.hlo_text("optimized")
    with pytest.raises(ValueError, match="'lowered' or 'optimized'"):
        mlp_compiled.hlo_text("final")


def test_fusions_list_ops_inside_and_source_lines(mlp_compiled):
    fusions = mlp_compiled.fusions()
    assert fusions, "XLA fuses the MLP's bias adds and ReLUs"
    # every dot's FLOPs are counted once: in its fusion, or on its own where XLA left it
    # outside (XLA's CPU backend fuses dots from JAX 0.8 on, not in JAX 0.7)
    module = mlp_compiled.hlo_module("optimized")
    unfused = sum(
        instruction_flops(i, module) for i in module.entry.instructions if i.opcode == "dot"
    )
    assert sum(f.flops for f in fusions) + unfused == mlp_compiled.cost.counted_flops
    lines = {f.source_location for f in fusions}
    line_of_dot = inspect.getsourcelines(mlp)[1] + 2
    assert f"test_compile.py:{line_of_dot}" in lines


def test_summary_text_and_html_show_the_facts(mlp_compiled):
    text = repr(mlp_compiled)
    assert text.startswith("Compiled mlp for ")
    for fact in ("FLOPs", "bytes accessed", "memory", "op counts", "dot", "fusion"):
        assert fact in text
    page = mlp_compiled._repr_html_()
    assert "<table" in page and "tpukit-summary" in page
    assert "mlp(params" in page


def test_wrong_call_names_expected_and_received_and_how_to_recompile(mlp_compiled):
    params = mlp_params()
    with pytest.raises(SignatureMismatchError) as info:
        mlp_compiled(params, np.zeros((64, 784), np.float32))
    message = str(info.value)
    assert "f32[128,784]" in message and "f32[64,784]" in message
    assert "tpukit.compile(mlp" in message
    with pytest.raises(SignatureMismatchError, match="bf16"):
        mlp_compiled(params, np.zeros((128, 784), jnp.bfloat16))
    with pytest.raises(SignatureMismatchError, match="positional"):
        mlp_compiled(params)


def test_static_and_keyword_arguments():
    def scaled(x, *, times, activation="relu"):
        y = x * times
        return jax.nn.relu(y) if activation == "relu" else jnp.tanh(y)

    c = tpukit.compile(scaled, tpukit.shape("f32[8]"), times=3, activation="tanh")
    kinds = {p.name: p.kind for p in c.signature.parameters}
    assert kinds == {"x": "array", "times": "static", "activation": "static"}
    assert c.op_counts("lowered")["tanh"] == 1
    x = jnp.arange(8, dtype=jnp.float32) - 4
    assert_close_across_processors(c(x, times=3, activation="tanh"), jnp.tanh(3 * x))
    with pytest.raises(SignatureMismatchError, match="static value 3"):
        c(x, times=4, activation="tanh")


def test_pytrees_and_nnx_modules_are_traced():
    from flax import nnx

    model = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
    c = tpukit.compile(lambda m, x: m(x), model, tpukit.shape("f32[3,4]"))
    x = jnp.ones((3, 4))
    assert_close_across_processors(c(model, x), model(x))


def test_arguments_that_can_be_neither_traced_nor_static():
    def f(x, options):
        return x

    with pytest.raises(ArgumentError, match="hashable"):
        tpukit.compile(f, tpukit.shape("f32[2]"), ["a", "b"])
    with pytest.raises(ArgumentError, match="mixes arrays"):
        tpukit.compile(f, tpukit.shape("f32[2]"), {"w": np.zeros(2), "name": "x"})
    with pytest.raises(ArgumentError, match="cannot take this call"):
        tpukit.compile(f, tpukit.shape("f32[2]"))
    with pytest.raises(ArgumentError, match="unexpected keyword"):
        tpukit.compile(f, tpukit.shape("f32[2]"), 1, bogus=2)


def broken(x, w):
    y = jnp.tanh(x)
    return y @ w  # the user's mistake: 784 vs 100


def test_compile_error_points_at_the_users_line_not_jax_internals():
    with pytest.raises(CompileError) as info:
        tpukit.compile(broken, tpukit.shape("f32[8,784]"), tpukit.shape("f32[100,10]"))
    message = str(info.value)
    line = inspect.getsourcelines(broken)[1] + 2
    assert f"line {line}, in broken: return y @ w" in message
    assert "f32[8,784]" in message and "f32[100,10]" in message
    assert "jax/_src" not in message
    assert len(message.splitlines()) <= 12
    assert info.value.__cause__ is not None  # the full JAX error is kept


def test_timeit_reports_median_min_and_flops(mlp_compiled):
    result = mlp_compiled.timeit(number=3, repeat=3)
    assert len(result.times) == 3 and result.number == 3
    assert 0 < result.best <= result.median
    assert result.flops == mlp_compiled.cost.flops
    assert result.flops_per_second > 0
    assert result.mfu is None  # a CPU has no published peak
    assert "median" in repr(result) and "no MFU" in repr(result)


def test_peaks_are_known_for_accelerators_only():
    assert tpukit.peak_for("NVIDIA H100 80GB HBM3").bf16_tflops == 990
    assert tpukit.peak_for("TPU v5 lite").bf16_tflops == 197
    assert tpukit.peak_for("TPU v5").bf16_tflops == 459
    assert tpukit.peak_for("Tesla T4").name.startswith("T4")
    assert tpukit.peak_for("cpu") is None


def test_vgg_sized_convolution_flops_are_counted():
    def conv(x, k):
        return jax.lax.conv_general_dilated(
            x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )

    c = tpukit.compile(conv, tpukit.shape("f32[2,56,56,64]"), tpukit.shape("f32[3,3,64,128]"))
    # 2 x (batch 2 x 128 out) x 64 in x taps on real input per side: 56 x 3 less SAME's 2
    # (the padding's counted too until session 51: 56 x 56 x 9), as XLA's cost analysis
    expected = 2 * (2 * 128) * 64 * (56 * 3 - 2) ** 2
    assert c.cost.counted_flops == expected
    assert c.cost.flops == expected


def test_persistent_cache_serves_the_second_compile(tmp_path):
    script = textwrap.dedent(
        f"""
        import json, jax, jax.numpy as jnp, tpukit
        folder = tpukit.enable_compile_cache({str(tmp_path)!r})
        f = lambda x: jnp.sin(x) @ x.T
        first = tpukit.compile(f, tpukit.shape("f32[64,64]"))
        jax.clear_caches()
        second = tpukit.compile(f, tpukit.shape("f32[64,64]"))
        print(json.dumps([first.from_cache, second.from_cache, "cache" in repr(second)]))
        """
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [False, True, True]
    assert any(tmp_path.iterdir())


def apply_linear(model, x):
    return model(x)  # the dot is made inside Flax, called from here


def test_source_lines_point_at_user_code_not_library_internals():
    from flax import nnx

    model = nnx.Linear(16, 4, rngs=nnx.Rngs(0))
    c = tpukit.compile(apply_linear, model, tpukit.shape("f32[8,16]"))
    dots = [i for i in c.hlo_module("optimized").instructions() if i.opcode == "dot"]
    line = inspect.getsourcelines(apply_linear)[1] + 1
    assert dots and all(d.source_location == f"test_compile.py:{line}" for d in dots)
    if "stack_frame_id" in c.hlo_text("optimized"):  # JAX 0.8+: the full stack is kept
        assert any("flax" in frame.file for frame in dots[0].metadata.stack)


def test_an_nnx_module_compiled_as_the_callee_runs_on_its_current_weights():
    from flax import nnx

    lin = nnx.Linear(3, 4, rngs=nnx.Rngs(0))
    compiled = tpukit.compile(lin, tpukit.shape("f32[5,3]"))
    assert "self: {bias: f32[4], kernel: f32[3,4]}" in str(compiled.signature)
    assert compiled.memory.argument_bytes >= (3 * 4 + 4 + 5 * 3) * 4  # weights are arguments
    x = jnp.ones((5, 3))
    assert np.abs(np.asarray(compiled(x))).max() > 0
    lin.kernel[...] = jnp.zeros((3, 4))
    lin.bias[...] = jnp.full((4,), 2.0)
    np.testing.assert_array_equal(np.asarray(compiled(x)), np.full((5, 4), 2.0, np.float32))
    assert compiled.timeit(number=1, repeat=1).median > 0


def test_64_bit_host_data_compiles_as_the_device_will_hold_it():
    data = np.arange(6, dtype=np.float64).reshape(2, 3)
    compiled = tpukit.compile(lambda a: a * 2, data)
    assert "a: f32[2,3]" in str(compiled.signature)  # x64 is off: f64 data lives as f32
    np.testing.assert_array_equal(np.asarray(compiled(tpukit.put(data))), data * 2)
    np.testing.assert_array_equal(np.asarray(compiled(data)), data * 2)


def test_a_sharded_compile_has_a_python_spelling_with_the_magics_vocabulary():
    def mm(x, w):
        return x @ w

    c = tpukit.compile(
        mm,
        tpukit.shape("f32[16,8]"),
        tpukit.shape("f32[8,4]"),
        mesh="data=4,model=2",
        shard={"x": "data", "w": "None,model"},
    )
    assert c.mesh == {"data": 4, "model": 2}
    assert "data" in str(c.input_shardings) and "model" in str(c.input_shardings)
    with pytest.raises(ArgumentError, match="shard= needs mesh="):
        tpukit.compile(mm, tpukit.shape("f32[16,8]"), tpukit.shape("f32[8,4]"), shard={"x": "data"})
    with pytest.raises(ArgumentError, match="not an argument of this call"):
        tpukit.compile(
            mm,
            tpukit.shape("f32[16,8]"),
            tpukit.shape("f32[8,4]"),
            mesh="data=2",
            shard={"y": "data"},
        )


def test_a_module_holding_rng_keys_runs_from_shapes_alone():
    # The zoo's GPT keeps dropout keys in an nnx.Rngs: timing and profiling a call given
    # only shapes must fill those keys too, not fail on the key dtype.
    from flax import nnx

    model = tpukit.zoo.create(
        "gpt_small", vocab_size=64, depth=1, width=32, num_heads=2, context_length=8
    )
    assert any(
        jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)
        for leaf in jax.tree.leaves(nnx.state(model))
        if hasattr(leaf, "dtype")
    ), "the test needs a model that holds PRNG keys"
    compiled = tpukit.compile(lambda model, tokens: model(tokens), model, tpukit.shape("s32[2,8]"))
    assert compiled.timeit(repeat=1).median > 0  # no arguments: the signature's own shapes
