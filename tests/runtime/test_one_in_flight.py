"""No tpukit path deadlocks XLA:CPU's collectives on simulated devices, on one core.

XLA:CPU runs each simulated device's share of a program on one thread pool; two programs
with collectives in flight at once can split its threads and wait on each other until
XLA aborts the process (``tpukit/runtime/_one_in_flight.py``). On one core it happens
nearly every time a batch of calls is dispatched before the first is awaited, so the
child process below pins itself to CPU 0 and runs every way tpukit dispatches such a
program many times in a row: ``Compiled.timeit`` (``%tpu_timeit``), ``Compiled.profile``
(``%tpu_profile``), calls of a ``Compiled`` that are not awaited, ``fit`` (which queues
its next call on accelerators) with an evaluation each epoch, and ``evaluate``. Without
the waits it aborts (exit 134) after XLA's 40 s rendezvous timeout.
"""

import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import pytest

from tpukit.runtime import devices_of, one_at_a_time, settled

ROOT = pathlib.Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import os
    os.sched_setaffinity(0, {0})  # one core, before JAX starts a thread
    import sys
    import jax, numpy as np, optax
    from flax import nnx
    import tpukit
    from tpukit.train import Trainer

    sys.path.insert(0, sys.argv[1])  # the repository, for the tests' shared model
    from tests._support.two_layer import LAYOUT as layout, MLP, X, Y
    trainer = Trainer(MLP(nnx.Rngs(0)), optax.adam(1e-2), **layout)
    step = trainer.compile_step((X, Y), batch_size=64, steps_per_execution=4)
    for _ in range(2):
        assert step.timeit(number=100, repeat=2).median > 0
    assert step.profile(repeat=3).runs >= 3
    args, kwargs = step.example_arguments
    outputs = [step(*args, **kwargs) for _ in range(100)]  # calls none awaits here
    jax.block_until_ready(outputs)
    history = trainer.fit((X, Y), epochs=4, batch_size=64, steps_per_execution=2,
                          eval_data=(X[:128], Y[:128]), verbose=False)
    assert len(history["val_loss"]) == 4 and np.isfinite(history["loss"][-1])
    assert np.isfinite(tpukit.evaluate(trainer.model, (X, Y), batch_size=64, **layout)["loss"])
    print("all done")
    """
)


def test_programs_over_simulated_devices_run_one_at_a_time_on_one_core():
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0 and "all done" in done.stdout, done.stderr[-3000:]


def test_only_programs_over_several_cpu_devices_are_waited_for():
    cpu = jax.devices("cpu")
    assert one_at_a_time(cpu[:2]) and not one_at_a_time(cpu[:1]) and not one_at_a_time([])

    class Accelerator:  # a TPU or GPU keeps its queue: the next call is dispatched ahead
        platform = "gpu"

    assert not one_at_a_time([Accelerator(), Accelerator()])
    sharded = jax.device_put(jax.numpy.ones(8), jax.sharding.NamedSharding(
        jax.sharding.Mesh(cpu[:2], ("x",)), jax.sharding.PartitionSpec("x")))  # fmt: skip
    assert set(devices_of({"a": sharded})) == set(cpu[:2])
    assert settled({"a": sharded}) is not None and devices_of(3.0) == ()


if __name__ == "__main__":  # pragma: no cover - `python -m tests.runtime.test_one_in_flight`
    pytest.main([__file__, "-q"])
