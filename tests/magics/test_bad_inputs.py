"""Bad input a notebook user plausibly types: one clear line, nothing lost, never a dead kernel.

Every case runs in one real ``InteractiveShell`` inside a child process, because
some of these inputs used to abort or crash the whole process (a repeated mesh
axis, a shape whose element count overflows XLA's 64-bit arithmetic): a crash
then fails the case that caused it instead of killing the test run. For each
case the child records the exception, its message, and whether the user's
variables survived; the tests here check those records. The machinery
(``tests/_support/child_shell.py``) serves the other files of bad inputs too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests._support.child_shell import SETUP, assert_one_clear_line, run_in_child_shell

#: (input as a user types it in a cell, words the one-line message must contain)
CASES: list[tuple[str, str]] = [
    # the call line of %tpu_compile
    ("%tpu_compile", "No call given"),
    ("%tpu_compile f", "not a function call"),
    ("%tpu_compile f(", "Cannot read"),
    ("%tpu_compile nothing_here(x)", "not defined"),
    ("%tpu_compile f(undefined_data)", "not defined"),
    ("%tpu_compile x(1)", "not a function"),
    ("%tpu_compile f(q32[3])", "neither a name in the notebook nor a dtype"),
    ("%tpu_compile f(f32[3,])", "Empty dimension"),
    ("%tpu_compile f(f32[-1])", "non-negative"),
    ("%tpu_compile f(f32[1.5])", "non-negative whole numbers"),
    ("%tpu_compile f(f32[n_undefined])", "could not be evaluated"),
    ("%tpu_compile f(f32[2**40,2**40])", "no device holds"),
    ("%tpu_compile f(s8[2**62])", "no device holds"),
    ("%tpu_compile f(*5)", "not a sequence"),
    ("%tpu_compile f(**[1, 2])", "takes a dict"),
    ("%tpu_compile f(**{1: 2})", "takes a dict"),
    ("%tpu_compile f(1, 2)", "cannot take this call"),
    ("%tpu_compile f(y=x)", "cannot take this call"),
    ("%tpu_compile f([1, [2]])", "hashable"),
    ("%tpu_compile f({'a': x, 'b': 'text'})", "mixes arrays"),
    ("%tpu_compile f(Pair(x, x))", "dataclass holding arrays"),
    ("%tpu_compile f('f32[3]')", "tpukit.shape('f32[3]')"),
    ("%tpu_compile f(x, **{'x': 1})", "multiple values"),
    # options
    ("%tpu_compile f(x) -o y", "Options go before the call"),
    ("%tpu_compile f(x) --quiet", "Options go before the call"),
    ("%tpu_compile -o class f(x)", "not a keyword"),
    ("%tpu_compile -o 3x f(x)", "valid Python variable name"),
    ("%tpu_compile --bogus f(x)", "Unknown option"),
    ("%tpu_compile -o", "needs a value"),
    # meshes and partition specs
    ("%tpu_compile --mesh data=2,data=4 mm(f32[8,4], f32[4,2])", "names the axis 'data' twice"),
    ("%tpu_compile --mesh data=0 mm(f32[8,4], f32[4,2])", "Pick sizes"),
    ("%tpu_compile --mesh data=100 mm(f32[8,4], f32[4,2])", "Pick sizes"),
    ("%tpu_compile --mesh data mm(f32[8,4], f32[4,2])", "AXIS=SIZE"),
    ("%tpu_compile --mesh data=-1,model=-1 mm(f32[8,4], f32[4,2])", "Only one axis"),
    ("%tpu_compile --mesh 3d=2 mm(f32[8,4], f32[4,2])", "AXIS=SIZE"),
    ("%tpu_compile --mesh data=99999999999999999999 mm(f32[8,4], f32[4,2])", "Pick sizes"),
    ("%tpu_compile --shard a=data mm(f32[8,4], f32[4,2])", "--shard needs --mesh"),
    ("%tpu_compile --mesh data=8 --shard a=data,data mm(f32[8,4], f32[4,2])", "twice"),
    ("%tpu_compile --mesh data=8 --shard a=data+data mm(f32[8,4], f32[4,2])", "twice"),
    ("%tpu_compile --mesh data=8 --shard a=model mm(f32[8,4], f32[4,2])", "no axis 'model'"),
    ("%tpu_compile --mesh data=8 --shard z=data mm(f32[8,4], f32[4,2])", "not an argument"),
    ("%tpu_compile --mesh data=8 --shard a mm(f32[8,4], f32[4,2])", "NAME=SPEC"),
    ("%tpu_compile --mesh data=8 --shard a=data mm(f32[7,4], f32[4,2])", "cannot be split"),
    ("%tpu_compile --mesh data=8 --shard a=da-ta mm(f32[8,4], f32[4,2])", "partition spec"),
    ("%tpu_compile --mesh data=8 --shard a=data,None,None mm(f32[8,4], f32[4,2])", "rank"),
    # timing, graphs, devices
    ("%tpu_timeit f(f32[2**18,2**18])", "free"),
    ("%tpu_timeit -n 0 f(x)", "at least 1"),
    ("%tpu_timeit -r -1 f(x)", "at least 1"),
    ("%tpu_timeit -n abc f(x)", "invalid int value"),
    ("%tpu_timeit", "No call given"),
    ("%tpu_graph --stage bogus f(x)", "invalid choice"),
    ("%tpu_graph", "No call given"),
    ("%tpu_devices --platform tpu", "TPU"),
    ("%tpu_devices --platform quantum", "invalid choice"),
    # the Python API
    ("tpukit.shape(128)", "written as a string"),
    ("tpukit.shape('f32[')", "Cannot read"),
    ("tpukit.shape('float[3]')", "Unknown dtype"),
    ("tpukit.shape('f32[2**40]')", "not a whole number"),
    ("tpukit.shape('f32[1099511627776,1099511627776]')", "no device holds"),
    ("tpukit.compile(f, 'f32[3]')", "tpukit.shape('f32[3]')"),
    ("tpukit.compile(f, jax.ShapeDtypeStruct((2**40, 2**40), jnp.float32))", "no device holds"),
    ("tpukit.compile(f, Pair(x, x))", "dataclass holding arrays"),
    ("tpukit.compile(42, x)", "takes the function to compile first"),
    ("tpukit.compile(f)", "cannot take this call"),
    ("f_small(np.ones((4, 4), np.float32))", "does not match"),
    ("f_small('text')", "does not match"),
    ("tpukit.put((i for i in range(3)))", "found a generator"),
    ("tpukit.put('hello')", "found a str"),
    ("tpukit.put({'a': object()})", "found a object at ['a']"),
    ("tpukit.put(x, 'gpu')", "GPU"),
    ("tpukit.put(x, 'cpu:99')", "There is no 'cpu:99'"),
    ("tpukit.put(x, 'banana')", "Cannot read the device"),
    ("tpukit.fetch('hello')", "found a str"),
    ("tpukit.fetch(object())", "found a object"),
]


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("bad_inputs")
    return run_in_child_shell(folder, SETUP, [code for code, _ in CASES])


def test_there_are_at_least_sixty_cases():
    assert len(CASES) >= 60
    assert len({code for code, _ in CASES}) == len(CASES)


@pytest.mark.parametrize("code, expected", CASES, ids=[code for code, _ in CASES])
def test_bad_input_gives_one_clear_line_and_keeps_the_session(records, code, expected):
    assert_one_clear_line(records.get(code), expected)


def test_a_replaced_variable_is_named_in_the_output(tmp_path):
    code = textwrap.dedent(
        """
        from IPython.core.interactiveshell import InteractiveShell
        ip = InteractiveShell.instance()
        ip.run_cell("%load_ext tpukit")
        ip.run_cell("import numpy as np\\ndef f(x):\\n    return x + 1\\nx = np.ones(3, np.float32)")
        ip.run_cell("%tpu_compile --quiet -o x f(x)")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        timeout=300,
        cwd=tmp_path,
    ).stdout
    assert "replacing the ndarray that x held" in out
