"""python -m tpukit launch: one script as two processes of a jax.distributed run.

Each process gets 4 simulated CPU devices and gloo collectives, so the pair has
the same 8 devices as the single-process reference that the tests compare with.
"""

import os
import re
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from tests._support.numerics import assert_close_across_processors
from tpukit.__main__ import main
from tpukit.runtime import free_port, process_environment

SCRIPT = textwrap.dedent(
    '''
    """Train one MLP per strategy; process 0 writes every result to OUT.npz."""
    import sys

    import numpy as np
    import tpukit

    tpukit.connect()  # joins the run that `launch` describes in TPUKIT_* variables

    import jax
    import optax
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.l1 = nnx.Linear(16, 128, rngs=rngs)
            self.l2 = nnx.Linear(128, 4, rngs=rngs)

        def __call__(self, x):
            return self.l2(jax.nn.relu(self.l1(x)))

    mode, out, ckpt = sys.argv[1:4]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 16)).astype(np.float32)
    y = (x @ rng.normal(size=(16, 4))).argmax(-1).astype(np.int32)
    results = {}

    def keep(name, model):
        params = tpukit.fetch(nnx.to_pure_dict(nnx.state(model, nnx.Param)))
        for path, v in jax.tree_util.tree_leaves_with_path(params):
            results[name + jax.tree_util.keystr(path)] = np.asarray(v)

    for sharding in ("data", "fsdp"):
        model, opt = MLP(nnx.Rngs(0)), optax.adam(1e-2)
        writes = mode == "pair" and sharding == "fsdp"
        tpukit.fit(model, opt, (x, y), epochs=2, batch_size=64, sharding=sharding,
                   checkpoint_dir=ckpt if writes else None, eval_data=(x[:100], y[:100]))
        keep(sharding, model)
        if mode == "single" and sharding == "fsdp":
            tpukit.fit(model, opt, (x, y), epochs=1, batch_size=64, sharding="fsdp")
            keep("three_epochs", model)
            resumed = MLP(nnx.Rngs(1))
            tpukit.fit(resumed, optax.adam(1e-2), (x, y), epochs=3, batch_size=64,
                       sharding="fsdp", checkpoint_dir=ckpt, resume=True,
                       eval_data=(x[:100], y[:100]))
            keep("resumed", resumed)
    if jax.process_index() == 0:
        np.savez(out, **results)
    print("done on", jax.process_index(), "of", jax.process_count(), "with", jax.device_count())
    '''
)

CRASH = textwrap.dedent(
    """
    import sys
    import time

    import tpukit

    tpukit.connect()

    import jax
    from jax.experimental import multihost_utils

    if jax.process_index() == 1:
        print(f"crashing at {time.time():.3f}", file=sys.stderr, flush=True)
        raise RuntimeError("boom from process 1")
    multihost_utils.sync_global_devices("waits for process 1 forever")
    """
)


def clean_env(devices=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TPUKIT_")}
    env["JAX_PLATFORMS"] = "cpu"
    if devices:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    return env


def run(args, env, timeout=240):
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    return proc, time.monotonic() - t0


def launch(*args, timeout=240):
    return run(["-m", "tpukit", "launch", *args], clean_env(), timeout)


def test_two_processes_train_like_one_with_eight_devices_and_resume_in_one(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    ckpt = tmp_path / "ckpt"
    pair, _ = launch("-n", "2", "--devices-per-process", "4", str(script), "pair",
                     str(tmp_path / "pair.npz"), str(ckpt))  # fmt: skip
    assert pair.returncode == 0, pair.stdout + pair.stderr
    out = pair.stdout
    assert "[p0] done on 0 of 2 with 8" in out and "[p1] done on 1 of 2 with 8" in out
    assert "[p0] tpukit.fit: sharding 'fsdp': mesh data=8 (8 devices in 2 processes)" in out
    assert "[p1] tpukit.fit" not in out and "[p1] epoch" not in out  # only process 0 reports
    assert "[Gloo]" not in out

    single, _ = run([str(script), "single", str(tmp_path / "single.npz"), str(ckpt)],
                    clean_env(devices=8))  # fmt: skip
    assert single.returncode == 0, single.stdout + single.stderr
    two, one = np.load(tmp_path / "pair.npz"), np.load(tmp_path / "single.npz")
    for strategy in ("data", "fsdp"):
        names = [k for k in two if k.startswith(strategy + "[")]
        assert len(names) == 4
        for k in names:
            assert_close_across_processors(two[k], one[k], err_msg=k)
    # The pair's checkpoint (epoch 2) resumed in one process equals three epochs straight.
    for k in one:
        if k.startswith("resumed"):
            twin = "three_epochs" + k.removeprefix("resumed")
            assert_close_across_processors(one[k], one[twin], err_msg=k)


def test_a_crashing_process_stops_the_other_and_reports_its_error(tmp_path):
    script = tmp_path / "crash.py"
    script.write_text(CRASH)
    proc, _ = launch("-n", "2", "--devices-per-process", "2", str(script), timeout=120)
    ended = time.time()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[p1] RuntimeError: boom from process 1" in proc.stdout
    assert "process 1 of 2 failed (exit code 1); stopped the other 1 process" in proc.stderr
    assert "RuntimeError: boom from process 1" in proc.stderr  # repeated in the report
    # From the crash to the launcher's exit, so that a slow start (two interpreters
    # importing JAX on a busy machine) does not count: JAX's own shutdown barrier
    # alone would take 30 s.
    crashed = float(re.search(r"crashing at ([0-9.]+)", proc.stdout + proc.stderr)[1])
    assert ended - crashed < 25


def test_an_unreachable_coordinator_fails_within_the_timeout():
    env = clean_env()
    env.update(
        TPUKIT_COORDINATOR=f"127.0.0.1:{free_port()}",
        TPUKIT_NUM_PROCESSES="2",
        TPUKIT_PROCESS_ID="1",
    )
    proc, seconds = run(["-c", "import tpukit; tpukit.connect(initialization_timeout=2)"], env)
    assert proc.returncode != 0
    assert "did not answer within 2 s" in proc.stderr and "Start process 0 first" in proc.stderr
    assert seconds < 30


def test_bad_launch_arguments_say_what_to_give(tmp_path, capsys):
    assert main(["launch", "-n", "2", str(tmp_path / "missing.py")]) == 2
    assert "No script" in capsys.readouterr().err
    script = tmp_path / "ok.py"
    script.write_text("print('hi')\n")
    assert main(["launch", "-n", "0", str(script)]) == 2
    assert "processes must be a positive whole number; got 0" in capsys.readouterr().err


def test_each_process_gets_its_place_in_the_run():
    env = process_environment({"XLA_FLAGS": "--xla_dump_to=/tmp/x"}, "127.0.0.1:9", 3, 2, 4)
    assert env["TPUKIT_COORDINATOR"] == "127.0.0.1:9"
    assert (env["TPUKIT_NUM_PROCESSES"], env["TPUKIT_PROCESS_ID"]) == ("3", "2")
    assert env["XLA_FLAGS"].split() == [
        "--xla_dump_to=/tmp/x",
        "--xla_force_host_platform_device_count=4",
    ]
    assert env["JAX_CPU_COLLECTIVES_IMPLEMENTATION"] == "gloo"


@pytest.mark.parametrize("args", [["--help"]])
def test_launch_is_a_subcommand(args, capsys):
    with pytest.raises(SystemExit):
        main(["launch", *args])
    assert "--devices-per-process" in capsys.readouterr().out
