"""The magics, run the way a notebook runs them: through a real IPython InteractiveShell."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import tpukit
from tests._support.numerics import assert_close_across_processors


def run(shell, code):
    result = shell.run_cell(code, store_history=False)
    return result


def usage_error(shell, capsys, code):
    """Run a cell that must fail with a UsageError; return its message."""
    result = run(shell, code)
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    err = capsys.readouterr().err
    assert "Traceback" not in err  # one red line, not a traceback into tpukit
    return str(result.error_in_exec)


MLP_CELL = """%%tpu_compile predict(params, f32[128,784])
def predict(params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b
"""


def test_cell_magic_defines_compiles_stores_and_shows_the_summary(shell, capsys):
    rng = np.random.default_rng(0)
    shell.user_ns["params"] = [
        (rng.normal(0, 0.05, (m, n)).astype(np.float32), np.zeros(n, np.float32))
        for m, n in [(784, 128), (128, 64), (64, 10)]
    ]
    result = run(shell, MLP_CELL)
    assert result.success, result.error_in_exec
    out = capsys.readouterr().out
    compiled = shell.user_ns["predict_compiled"]
    assert isinstance(compiled, tpukit.Compiled)
    assert callable(shell.user_ns["predict"])  # the cell ran in the user namespace
    assert "Compiled predict for" in out and "Stored as predict_compiled." in out
    assert "x: f32[128,784]" in out and "FLOPs" in out
    run(shell, "batch = np.ones((128, 784), np.float32); logits = predict_compiled(params, batch)")
    assert shell.user_ns["logits"].shape == (128, 10)
    assert_close_across_processors(
        shell.user_ns["logits"],
        shell.user_ns["predict"](shell.user_ns["params"], shell.user_ns["batch"]),
    )


def test_line_magic_with_name_quiet_and_data(shell, capsys):
    run(shell, "def double(x, scale=2):\n    return x * scale")
    run(shell, "data = np.arange(6, dtype=np.float32).reshape(2, 3)")
    result = run(shell, "%tpu_compile -o twice --quiet double(data, scale=3)")
    assert result.success, result.error_in_exec
    assert capsys.readouterr().out == ""
    compiled = shell.user_ns["twice"]
    assert compiled.signature.parameters[1].kind == "static"
    assert_close_across_processors(
        compiled(shell.user_ns["data"], scale=3), np.arange(6).reshape(2, 3) * 3
    )


def test_call_line_keeps_dicts_and_strings_intact(shell):
    run(shell, "def pick(tree, key):\n    return tree['a'] * 2")
    result = run(shell, "%tpu_compile --quiet pick({'a': f32[4]}, 'a b {c}')")
    assert result.success, result.error_in_exec
    compiled = shell.user_ns["pick_compiled"]
    assert compiled.signature.parameters[1].value == "a b {c}"


def test_tpu_devices_shows_the_table(shell):
    result = run(shell, "%tpu_devices")
    assert result.success
    table = result.result
    assert isinstance(table, tpukit.DeviceTable) and len(table) == 8


def test_magics_of_words_take_a_trailing_comment_as_python_does(shell, capsys):
    result = run(shell, "%tpu_devices                      # which accelerator is here")
    assert result.success, result.error_in_exec
    assert isinstance(result.result, tpukit.DeviceTable) and len(result.result) == 8
    result = run(shell, "%tpu_compiles --notices on  # 'quoted' too")
    assert result.success, result.error_in_exec
    assert "Notices of compiles again: on." in capsys.readouterr().out
    # a # inside quotes, or inside a word, is not a comment: the word stays an error
    message = usage_error(shell, capsys, "%tpu_devices --platform 'a # b'")
    assert "a # b" in message


def test_tpu_timeit_times_a_compiled_object_and_a_fresh_call(shell, capsys):
    result = run(shell, "%tpu_timeit -n 2 -r 3 predict_compiled(params, batch)")
    assert result.success, result.error_in_exec
    timing = result.result
    assert isinstance(timing, tpukit.TimingResult) and len(timing.times) == 3
    result = run(shell, "%tpu_timeit -n 1 -r 2 double(f32[16, 16])")
    assert result.success, result.error_in_exec
    assert result.result.flops is None or result.result.flops >= 0


def test_help_is_real(shell):
    doc = shell.find_line_magic("tpu_compile").__doc__
    assert "%tpu_compile [-o NAME] [--quiet] [--graph]" in doc
    assert "f32[128,784]" in doc
    assert "--repeat" in shell.find_line_magic("tpu_timeit").__doc__


def test_graph_magic_and_graph_option(shell, capsys):
    result = run(shell, "%tpu_graph double(f32[16, 16])")
    assert result.success, result.error_in_exec
    graph = result.result
    assert type(graph).__name__ == "HloGraph" and graph.stage == "optimized"
    assert "<script" in graph._repr_html_()
    result = run(shell, "%tpu_graph --stage lowered double(f32[16, 16])")
    assert result.result.stage == "lowered"
    result = run(shell, "%%tpu_compile --graph double(f32[4])\ndouble = double")
    assert result.success, result.error_in_exec
    assert "HloGraph" in capsys.readouterr().out  # shown after the summary


def test_sharded_compile_shows_mesh_shardings_and_collectives(shell, capsys):
    run(shell, "w = np.ones((784, 10), np.float32)")
    result = run(
        shell,
        "%%tpu_compile --mesh data=4,model=2 --shard x=data --shard w=None,model predict_sharded(w, f32[1024,784])\n"
        "def predict_sharded(w, x):\n    return jax.nn.softmax(x @ w)",
    )
    assert result.success, result.error_in_exec
    out = capsys.readouterr().out
    assert "mesh               data=4 x model=2 over 8 devices" in out
    assert "w: P(None,model), x: P(data) -> P(data,model)" in out
    assert "all-reduce x2" in out
    compiled = shell.user_ns["predict_sharded_compiled"]
    assert compiled.mesh == {"data": 4, "model": 2}
    assert [c.opcode for c in compiled.collectives()] == ["all-reduce"]
    y = compiled(
        shell.user_ns["w"], np.ones((1024, 784), np.float32)
    )  # host data is placed for the call
    assert len(y.sharding.device_set) == 8
    assert_close_across_processors(np.asarray(y).sum(axis=1), np.ones(1024))
    result = run(
        shell, "%tpu_timeit -n 1 -r 2 predict_sharded_compiled(w, np.ones((1024, 784), np.float32))"
    )
    assert result.success, result.error_in_exec


@pytest.mark.parametrize(
    "cell, expected",
    [
        ("%tpu_compile double(", "Cannot read"),
        ("%tpu_compile", "No call given"),
        ("%tpu_compile nothing_here(data)", "'nothing_here' is not defined"),
        ("%tpu_compile double(missing)", "'missing' is not defined"),
        ("%tpu_compile double(f32[2,x9])", "could not be evaluated"),
        (
            "%tpu_compile double(float32[2])",
            "'float32' is neither a name in the notebook nor a dtype",
        ),
        ("%tpu_compile double(data, nonsense=1)", "unexpected keyword argument 'nonsense'"),
        ("%tpu_compile double(data, scale=[1, 'x'])", "hashable"),
        ("%tpu_compile --colour double(data)", "Unknown option '--colour'"),
        ("%tpu_compile -o 1bad double(data)", "valid Python variable name"),
        ("%tpu_timeit -r 0 double(data)", "at least 1"),
        ("%tpu_compile --shard x=data double(data)", "--shard needs --mesh"),
        ("%tpu_compile --mesh data=16 double(data)", "needs 16 devices but 8 are here"),
        ("%tpu_compile --mesh data double(data)", "AXIS=SIZE"),
        ("%tpu_compile --mesh data=8 --shard x=data double(data)", "cannot be split 8 ways"),
        ("%tpu_compile --mesh data=2 --shard y=data double(data)", "not an argument of this call"),
        ("%tpu_compile --mesh data=2 --shard x=model double(data)", "no axis 'model'"),
    ],
)
def test_bad_input_is_a_usage_error_and_loses_nothing(shell, capsys, cell, expected):
    shell.user_ns["keep_me"] = 42
    message = usage_error(shell, capsys, cell)
    assert expected in message
    assert shell.user_ns["keep_me"] == 42
    assert "data" in shell.user_ns


def test_compile_error_in_the_cell_shows_the_users_line(shell, capsys):
    cell = textwrap.dedent(
        """\
        %%tpu_compile bad(f32[8,784], f32[100,10])
        def bad(x, w):
            y = jnp.tanh(x)
            return y @ w
        """
    )
    result = shell.run_cell(cell, store_history=True)  # as a kernel runs cells
    message = str(result.error_in_exec)
    assert isinstance(result.error_in_exec, UsageError), message
    # the cell as the user counts it: the magic line is line 1
    assert f"at In [{result.execution_count}], line 4, in bad: return y @ w" in message
    assert "dot_general" in message or "contracting" in message or "incompatible" in message.lower()
    assert "Traceback" not in capsys.readouterr().err


def test_a_plain_cell_error_names_the_cell_and_the_line(shell, capsys):
    cell = "\n\ndef bad_plain(x):\n    return x @ jnp.ones((3, 3))\n"
    assert shell.run_cell(cell, store_history=True).success
    result = shell.run_cell("%tpu_compile bad_plain(f32[2,2])", store_history=True)
    defined = result.execution_count - 1
    assert f"at In [{defined}], line 4, in bad_plain:" in str(result.error_in_exec)


def test_hlo_source_locations_name_the_cell_as_the_user_sees_it(shell, capsys):
    cell = textwrap.dedent(
        """\
        %%tpu_compile located(f32[8,16], f32[16,4])
        def located(x, w):
            h = jnp.tanh(x)
            return h @ w
        """
    )
    result = shell.run_cell(cell, store_history=True)
    assert result.success, result.error_in_exec
    compiled = shell.user_ns["located_compiled"]
    sources = {
        i.opcode: i for i in compiled.hlo_module("lowered").instructions() if i.source_location
    }
    count = result.execution_count
    assert sources["tanh"].source_location == f"In [{count}], line 3"
    assert sources["dot"].source_location == f"In [{count}], line 4"
    assert sources["dot"].source_path == sources["dot"].metadata.source_file + ":3"  # as compiled
    capsys.readouterr()


@pytest.mark.parametrize(
    "filename, line, shown",
    [
        ("/home/me/model.py", 12, "model.py:12"),
        ("C:\\work\\model.py", 3, "model.py:3"),
        ("<ipython-input-7-1a2b3c4d5e6f>", 3, "In [7], line 3"),
        ("/tmp/ipykernel_4242/2170432108.py", 5, "notebook cell, line 5"),  # not this session's
        ("", 0, ""),
    ],
)
def test_describe_location_without_a_shell_that_knows_the_file(filename, line, shown):
    from tpukit.display import describe_location

    assert describe_location(filename, line) == shown


def test_exception_in_the_cell_itself_is_shown_and_nothing_compiled(shell, capsys):
    shell.user_ns.pop("boom_compiled", None)
    result = run(
        shell,
        "%%tpu_compile boom(f32[2])\ndef boom(x):\n    return x\nraise KeyError('from the cell')",
    )
    assert isinstance(result.error_in_exec, UsageError)
    assert "nothing was compiled" in str(result.error_in_exec)
    captured = capsys.readouterr()
    assert "from the cell" in captured.out + captured.err  # IPython showed the user's error
    assert "boom_compiled" not in shell.user_ns


def test_wrong_shapes_on_call_are_clear(shell):
    result = run(shell, "predict_compiled(params, np.ones((3, 784), np.float32))")
    error = result.error_in_exec
    assert isinstance(error, tpukit.SignatureMismatchError)
    assert "f32[128,784]" in str(error) and "f32[3,784]" in str(error)
    assert "logits" in shell.user_ns


def test_unload_removes_the_magics():
    ip = InteractiveShell.instance()
    ip.run_cell("%unload_ext tpukit", store_history=False)
    assert ip.find_line_magic("tpu_compile") is None
    ip.run_cell("%load_ext tpukit", store_history=False)
    assert ip.find_cell_magic("tpu_compile") is not None


def test_tpukit_works_where_ipython_is_not_installed():
    # Accelerator images often lack IPython: only tpukit.magics may need it.
    code = textwrap.dedent(
        """
        import sys

        class NoIPython:
            def find_spec(self, name, path=None, target=None):
                if name == "IPython" or name.startswith("IPython."):
                    raise ImportError("IPython is not installed here")

        sys.meta_path.insert(0, NoIPython())
        import tpukit
        from tpukit.display._cells import describe_location
        c = tpukit.compile(lambda x: x * 2, tpukit.shape("f32[4]"))
        repr(c)  # the summary names source locations
        print(c.cost.flops >= 0, describe_location("<ipython-input-7-1a2b3c4d5e6f>", 3))
        print("IPython" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == ["True In [7], line 3", "False"]


def test_options_are_read_as_ipython_reads_them_and_the_call_is_left_verbatim(shell):
    run(shell, "def spaced(x, s='a b'):\n    return x * len(s)")
    result = run(
        shell,
        "%tpu_compile --name=spaced_c --quiet --mesh=data=2 --shard=x=data spaced(jnp.ones(4), s='x  y')",
    )
    assert result.success, result.error_in_exec
    compiled = shell.user_ns["spaced_c"]
    assert compiled.mesh == {"data": 2}
    assert "'x  y'" in str(compiled.signature)  # the static string kept its two spaces
    help_text = shell.find_line_magic("tpu_timeit").__doc__
    assert "-n NUMBER, --number NUMBER" in help_text and "-r REPEAT, --repeat REPEAT" in help_text
