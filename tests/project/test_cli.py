"""The command line: python -m tpukit info / compile / demo."""

import os
import subprocess
import sys
import textwrap

import pytest


def tpukit_cli(*args, cwd=None):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, "-m", "tpukit", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def test_info_prints_the_device_table():
    out = tpukit_cli("info")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "CPU device" in lines[0] and "JAX" in lines[0]
    assert lines[1].split()[:4] == ["id", "platform", "kind", "process"]


@pytest.fixture()
def model_file(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(
        textwrap.dedent(
            """\
            import jax.numpy as jnp

            def dense(x, w, activation="tanh"):
                y = x @ w
                return jnp.tanh(y) if activation == "tanh" else y
            """
        )
    )
    return path


def test_compile_prints_the_summary(model_file):
    out = tpukit_cli(
        "compile", f"{model_file}:dense", "f32[128,784]", "f32[784,10]", "--kw", "activation='none'"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Compiled dense for CPU")
    assert "dense(x: f32[128,784], w: f32[784,10], activation='none') -> f32[128,10]" in out.stdout
    assert f"{2 * 128 * 784 * 10 / 1e6:.3g} MFLOP" in out.stdout


def test_compile_from_an_importable_module_with_hlo(model_file):
    out = tpukit_cli(
        "compile",
        "model:dense",
        "f32[4,8]",
        "f32[8,2]",
        "--hlo",
        "optimized",
        cwd=model_file.parent,
    )
    assert out.returncode == 0, out.stderr
    assert "HloModule jit_dense" in out.stdout


@pytest.mark.parametrize(
    "args, expected",
    [
        (["compile", "nocolon", "f32[2]"], "MODULE:FUNCTION"),
        (["compile", "no/such/file.py:f", "f32[2]"], "No file"),
        (["compile", "json:nothing", "f32[2]"], "has no attribute"),
        (["compile", "{model}:dense", "f33[2]", "f32[2,2]"], "Cannot read the argument"),
        (["compile", "{model}:dense", "f32[2,3]", "f32[4,5]"], "Compiling dense"),
    ],
)
def test_bad_cli_input_is_one_clear_line(model_file, args, expected):
    out = tpukit_cli(*[a.format(model=model_file) for a in args])
    assert out.returncode == 2
    assert expected in out.stderr
    assert "Traceback" not in out.stderr


def test_demo_runs_end_to_end():
    out = tpukit_cli("demo")
    assert out.returncode == 0, out.stderr
    assert "Compiled mlp for" in out.stdout
    assert "The compiled result matches plain JAX." in out.stdout
