"""Bad inputs to the profile surfaces (``Compiled.profile``, ``%tpu_profile``,
``Profile.from_trace``, ``Profile.table``): each gives one clear ``TpukitError`` line and
leaves the session usable (the JAX profiler stopped, the user's arrays alive).

Cases that could leave a profiler running or need a signal run in a child process.
"""

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import traceback

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from IPython.core.error import UsageError

import tpukit
from tests._support.data import DATA

REAL_TPU = DATA / "tpu_v6e_jit_f.xplane.pb"
ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def small():
    return tpukit.compile(lambda x: jnp.tanh(x @ x.T), tpukit.shape("f32[32,16]"))


def profiler_is_stopped(tmp_path: pathlib.Path) -> bool:
    """Whether a new trace can start (no "Only one profile may be run at a time")."""
    try:
        jax.profiler.start_trace(str(tmp_path / "probe"))
    except RuntimeError:
        return False
    jax.profiler.stop_trace()
    return True


def tpukit_frames(exc: BaseException) -> list[str]:
    """The frames of tpukit's own code in an error's traceback (the wrapper that hides
    itself from IPython and pytest left out)."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        hidden = tb.tb_frame.f_locals.get("__tracebackhide__", False)
        if f"{os.sep}tpukit{os.sep}" in filename and not hidden:
            frames.append(f"{filename}:{tb.tb_lineno}")
        tb = tb.tb_next
    return frames


# -- trace_dir ---------------------------------------------------------------------------


def test_a_trace_dir_that_is_a_file_is_one_line_and_the_profiler_stays_stopped(small, tmp_path):
    target = tmp_path / "trace.txt"
    target.write_text("not a folder")
    with pytest.raises(tpukit.TpukitError, match="is a file") as failure:
        small.profile(repeat=1, trace_dir=target)
    assert str(target) in str(failure.value) and "\n" not in str(failure.value)
    assert profiler_is_stopped(tmp_path)


def test_a_trace_dir_under_a_file_is_one_line(small, tmp_path):
    target = tmp_path / "trace.txt"
    target.write_text("not a folder")
    with pytest.raises(tpukit.TpukitError, match="Cannot keep the trace in"):
        small.profile(repeat=1, trace_dir=target / "inside")
    assert profiler_is_stopped(tmp_path)


def test_a_trace_dir_of_the_wrong_type_is_one_line(small, tmp_path):
    with pytest.raises(tpukit.TpukitError, match="trace_dir must be a folder path, got int"):
        small.profile(repeat=1, trace_dir=3)


def run_child(code: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )


def test_a_trace_dir_that_refuses_writes_even_to_root_leaves_the_profiler_stopped():
    # /proc refuses new files to everyone, root included (chmod would not stop root).
    result = run_child(
        """
        import jax, jax.numpy as jnp, tpukit
        c = tpukit.compile(lambda x: x * 2, tpukit.shape("f32[8]"))
        try:
            c.profile(repeat=1, trace_dir="/proc/self/tpukit-trace")
        except tpukit.TpukitError as exc:
            print("ERROR", type(exc).__name__, str(exc).count("\\n"))
        print("AGAIN", c.profile(repeat=1).runs)
        """
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ERROR ProfileError 0" in result.stdout and "AGAIN 1" in result.stdout


# -- the program fails, or is interrupted --------------------------------------------------


def failing(x):
    def boom(v):
        raise ValueError("the host callback refused this batch")

    return jax.pure_callback(boom, jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def test_a_program_that_fails_at_run_time_under_tpu_profile_is_one_line(tmp_path, shell):
    shell.user_ns["failing"] = failing
    result = shell.run_cell("%tpu_profile -r 2 failing(f32[4])", store_history=False)
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    message = str(result.error_in_exec)
    assert "failed while being profiled" in message
    assert "the host callback refused this batch" in message
    assert profiler_is_stopped(tmp_path)


def test_keyboard_interrupt_during_tpu_profile_and_tpu_timeit_keeps_arrays_and_stops_profiler():
    result = run_child(
        """
        import os, signal, threading, time
        import jax, jax.numpy as jnp
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        shell.run_cell("%load_ext tpukit")
        shell.run_cell("import jax.numpy as jnp\\nx = jnp.ones((64, 64))\\n"
                       "def f(x):\\n    return jnp.tanh(x @ x)")
        def interrupt_until(done):  # ^C each second until the cell has stopped: one that
            while not done.wait(1.0):  # lands while JAX starts up does not let it run on
                os.kill(os.getpid(), signal.SIGINT)
        for line in ("%tpu_profile -r 200000 --no-graph f(x)", "%tpu_timeit -n 200000 f(x)"):
            done = threading.Event()
            interrupter = threading.Thread(target=interrupt_until, args=(done,))
            interrupter.start()
            try:
                result = shell.run_cell(line)
            finally:
                done.set()
                while interrupter.is_alive():
                    try:
                        interrupter.join()
                    except KeyboardInterrupt:  # one sent as the cell stopped
                        pass
            print("INTERRUPTED", type(result.error_in_exec).__name__)
            print("ARRAY", float(shell.user_ns["x"].sum()))
            jax.profiler.start_trace("/tmp/tpukit-interrupt-probe")
            jax.profiler.stop_trace()
            print("PROFILER FREE")
        """,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("INTERRUPTED KeyboardInterrupt") == 2, result.stdout
    assert result.stdout.count("ARRAY 4096.0") == 2 and result.stdout.count("PROFILER FREE") == 2


def test_many_runs_show_a_progress_line(small, capsys):
    small.profile(repeat=1000)
    err = capsys.readouterr().err
    assert "Profiling 1,000 runs of" in err and "all done; reading the trace" in err


def test_the_memory_of_a_profile_is_released_when_it_is_dropped(small):
    import gc
    import weakref

    profile = small.profile(repeat=200)
    assert not any(
        type(ref).__name__ in ("TraceFile", "TraceEvent", "ProfileData")
        for ref in gc.get_referents(*gc.get_referents(profile))
    )
    gone = weakref.ref(profile)
    del profile
    gc.collect()
    assert gone() is None


# -- repeat ------------------------------------------------------------------------------------


def test_a_numpy_integer_repeat_is_accepted(small):
    assert small.profile(repeat=np.int64(3)).runs == 3


def test_a_bool_repeat_is_refused(small):
    with pytest.raises(tpukit.ArgumentError, match="whole number of runs"):
        small.profile(repeat=True)


# -- Profile.from_trace: what it is given ------------------------------------------------------


@pytest.mark.parametrize("given", [None, 3, 2.5])
def test_from_trace_of_something_that_is_not_a_path_is_one_line(given):
    with pytest.raises(tpukit.ArgumentError, match="takes the path of a trace"):
        tpukit.Profile.from_trace(given)


def test_from_trace_of_an_hlo_program_is_one_line(small):
    program = tpukit.hlo.open(small.hlo_text("optimized"))
    with pytest.raises(tpukit.ArgumentError, match="got HloProgram"):
        tpukit.Profile.from_trace(program)


def test_from_trace_with_a_module_of_the_wrong_type_is_one_line():
    with pytest.raises(tpukit.ArgumentError, match="hlo_module must be an HloModule"):
        tpukit.Profile.from_trace(REAL_TPU, 42)


def test_from_trace_of_an_unknown_program_lists_those_there():
    with pytest.raises(tpukit.ArgumentError, match=r"jit_f\(12190760917235803885\)"):
        tpukit.Profile.from_trace(REAL_TPU, program="jit_train_step")


# -- damaged, empty and foreign files -------------------------------------------------------------


def test_a_garbage_trace_file_names_the_file(tmp_path):
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(tpukit.ProfileError) as failure:
        tpukit.Profile.from_trace(path)
    assert str(path) in str(failure.value) and "\n" not in str(failure.value)


def test_a_truncated_trace_file_names_the_file(tmp_path):
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(REAL_TPU.read_bytes()[:5001])
    with pytest.raises(tpukit.ProfileError, match="not a readable XSpace") as failure:
        tpukit.Profile.from_trace(path)
    assert str(path) in str(failure.value)


def test_an_empty_trace_file_names_the_file(tmp_path):
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(b"")
    with pytest.raises(tpukit.ProfileError, match="is empty"):
        tpukit.Profile.from_trace(path)


def test_a_trace_re_saved_as_text_names_the_file(tmp_path):
    # What happened to xprof's tpu_inference_2.xplane.pb: bytes decoded and saved as UTF-8.
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(REAL_TPU.read_bytes().decode("utf-8", "replace").encode("utf-8"))
    with pytest.raises(tpukit.ProfileError) as failure:
        tpukit.Profile.from_trace(path)
    assert str(path) in str(failure.value)


def test_a_text_file_in_a_trace_folder_names_the_file(tmp_path):
    path = tmp_path / "plugins" / "profile" / "run" / "host.xplane.pb"
    path.parent.mkdir(parents=True)
    path.write_text("planes { name: '/device:TPU:0' }\n")
    with pytest.raises(tpukit.ProfileError, match="starts as text") as failure:
        tpukit.Profile.from_trace(tmp_path)
    assert str(path) in str(failure.value)


def test_a_tensorflow_trace_without_xla_says_so(tmp_path):
    from tests.measure.test_profile_traces import xspace_bytes

    path = tmp_path / "worker.xplane.pb"
    path.write_bytes(
        xspace_bytes(
            {
                "/host:CPU": {"lines": {"python3": [("MatMul", 0, 10e3, {})]}},
                "/device:GPU:0": {
                    "lines": {"TensorFlow Ops": [("dense/MatMul:MatMul", 0, 5e3, {})]}
                },
            }
        )
    )
    with pytest.raises(tpukit.ProfileError, match="names no XLA program"):
        tpukit.Profile.from_trace(path)


# -- tpukit's frames hidden ---------------------------------------------------------------------


def test_from_trace_errors_start_at_the_callers_line(tmp_path):
    with pytest.raises(tpukit.TpukitError) as failure:
        tpukit.Profile.from_trace(tmp_path / "missing")
    assert tpukit_frames(failure.value) == [], traceback.format_exception(failure.value)


def test_table_errors_start_at_the_callers_line():
    profile = tpukit.Profile.from_trace(REAL_TPU)
    with pytest.raises(tpukit.TpukitError) as failure:
        profile.table(by="layer")
    assert tpukit_frames(failure.value) == [], traceback.format_exception(failure.value)


def test_a_damaged_file_error_starts_at_the_callers_line(tmp_path):
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(b"\xff" * 64)
    with pytest.raises(tpukit.ProfileError) as failure:
        tpukit.Profile.from_trace(path)
    assert tpukit_frames(failure.value) == []


def test_interrupt_signal_is_not_swallowed_as_a_profile_error(small):
    # ^C is the user's, not the program's failure: it is never turned into a ProfileError.
    calls = {"n": 0}

    def interrupted():
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return jnp.ones(4)

    from tpukit.measure import profile_call

    with pytest.raises(KeyboardInterrupt):
        profile_call(
            interrupted, small.hlo_module("optimized"), name="f", device_kind="cpu", repeat=5
        )
    assert signal.getsignal(signal.SIGINT) is not None
