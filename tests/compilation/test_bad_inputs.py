"""Bad and unusual inputs to compiling, timing and plotting, as a notebook user types them.

Run like ``magics/test_bad_inputs.py``, in one real ``InteractiveShell`` of a child process
(its machinery is imported from there), because some of these inputs used to abort
the whole process: a zero-element shape whose other dimensions overflow XLA's 64-bit
size arithmetic. Two kinds of case:

* ``REFUSED``: the input cannot work; it must be refused with one short tpukit
  line that says what to do, the session intact;
* ``ACCEPTED``: the input is valid (a static string that reads like a shape where
  the function declares text, a NumPy integer where a count is asked) and must run.
"""

from __future__ import annotations

import pytest

from tests._support.child_shell import SETUP, assert_one_clear_line, run_in_child_shell

#: (input, words the one-line message must contain)
REFUSED: list[tuple[str, str]] = [
    # Zero-element shapes whose other dimensions overflow: XLA aborted the process.
    ("%tpu_compile f(f32[2**40,2**40,0])", "no elements"),
    ("%tpu_compile f(f32[2**31,2**31,0])", "no elements"),
    ("tpukit.compile(f, jax.ShapeDtypeStruct((2**40, 2**40, 0), jnp.float32))", "no elements"),
    ("tpukit.compile(f, tpukit.shape('f32[1099511627776,1099511627776,0]'))", "no elements"),
    # A shape-like string where the function does not say it takes text: ambiguous,
    # and the advice must fit a %tpu_compile line (no quotes), not only Python.
    ("%tpu_compile untyped(f32[2], tag='f32[2]')", "without quotes in a %tpu_compile line"),
    # Counts that are not whole numbers: raw TypeErrors from inside tpukit before.
    ("f_small.timeit(x, repeat=3.0, number=1)", "repeat must be a positive whole number"),
    ("f_small.timeit(x, repeat='3', number=1)", "Pass the number itself: repeat=3"),
    ("f_small.timeit(x, number=2.5)", "number must be a positive whole number"),
    (
        "tpukit.plot_ops(f_small, top=2.5)",
        "top must be a positive int (how many rows to show)",
    ),
    # A negative count was taken as a slice from the end: a plot missing one row.
    ("tpukit.diff(f_small, f_small).plot(top=-1)", "top must be a positive int"),
]

#: Valid inputs refused today; the cell may end in assertions about the result.
ACCEPTED: list[str] = [
    "%tpu_compile --quiet -o c_text texted(f32[2], tag='f32[2]')\n"
    "assert c_text.signature.static[0].value == 'f32[2]'",
    "%tpu_compile --quiet -o c_typed typed(f32[2], 'f32[2]')\n"
    "assert [p.kind for p in c_typed.signature.parameters] == ['array', 'static']",
    "c_py = tpukit.compile(texted, tpukit.shape('f32[2]'), tag='f32[2]')\n"
    "assert c_py(np.ones(2, np.float32), tag='f32[2]').tolist() == [6.0, 6.0]",
    "tpukit.plot_ops(f_small, top=np.int64(3))",
    "tpukit.plot_fusions(f_small, top=np.int32(2))",
    "tpukit.connect(cpu_devices=np.int64(8))",
    "timing = f_small.timeit(x, repeat=np.int64(2), number=np.uint8(1))\n"
    "assert type(timing.number) is int and len(timing.times) == 2",
]

EXTRA_SETUP = """
def texted(x, tag="none"):
    return x * len(tag)

def typed(x, tag: str):
    return x * len(tag)

def untyped(x, tag):
    return x
"""


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("bad_inputs_compile")
    inputs = [code for code, _ in REFUSED] + ACCEPTED
    return run_in_child_shell(folder, SETUP + EXTRA_SETUP, inputs)


def test_the_cases_are_many_and_distinct():
    inputs = [code for code, _ in REFUSED] + ACCEPTED
    assert len(inputs) >= 12
    assert len(set(inputs)) == len(inputs)


@pytest.mark.parametrize("code, expected", REFUSED, ids=[code for code, _ in REFUSED])
def test_refused_with_one_clear_line(records, code, expected):
    assert_one_clear_line(records.get(code), expected)


@pytest.mark.parametrize("code", ACCEPTED, ids=[code.split("\n")[0] for code in ACCEPTED])
def test_valid_input_runs(records, code):
    record = records.get(code)
    assert record is not None, "not reached: an earlier case killed the process"
    assert "died" not in record, f"the process died (exit {record['died']}):\n{record['stderr']}"
    assert record["error"] is None, f"refused: {record['error']}: {record['message']}"
    assert record["intact"], "the user's variables changed"
