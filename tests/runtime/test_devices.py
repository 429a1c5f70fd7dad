"""Device helpers: connect, the device table, put/fetch, and advice when a platform is missing.

conftest.py gives JAX 8 simulated CPU devices for the whole session.
"""

import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import tpukit
from tpukit import DeviceNotFoundError, DeviceSetupError
from tpukit.runtime import Environment, missing_platform_advice


def test_device_table_lists_the_eight_simulated_devices():
    table = tpukit.connect()
    assert len(table) == 8 and table.platform == "cpu"
    text = repr(table)
    assert text.splitlines()[0].startswith("8 CPU devices")
    assert len(text.splitlines()) == 3 + 8  # headline, header, rule, one row per device
    page = table._repr_html_()
    assert page.count("<tr>") == 1 + 8
    assert table[0] is jax.devices()[0]


def test_put_and_fetch_a_pytree_with_a_sharding():
    mesh = Mesh(np.array(jax.devices()), ("data",))
    tree = {"x": np.arange(64, dtype=np.float32).reshape(16, 4), "step": np.int32(3)}
    placed = tpukit.put(
        tree,
        {
            "x": NamedSharding(mesh, PartitionSpec("data")),
            "step": NamedSharding(mesh, PartitionSpec()),
        },
    )
    assert len(placed["x"].sharding.device_set) == 8
    assert placed["x"].addressable_shards[0].data.shape == (2, 4)
    back = tpukit.fetch(placed)
    assert isinstance(back["x"], np.ndarray)
    np.testing.assert_array_equal(back["x"], tree["x"])
    assert back["step"] == 3


def test_put_on_a_named_device_and_bad_names():
    x = tpukit.put(np.ones(3), "cpu:5")
    assert x.devices() == {jax.devices()[5]}
    with pytest.raises(DeviceNotFoundError, match="devices 0 to 7"):
        tpukit.put(np.ones(3), "cpu:9")
    with pytest.raises(ValueError, match="'gpu', 'tpu:0' or 'cpu:3'"):
        tpukit.put(np.ones(3), "cuda")


def test_asking_for_a_missing_platform_says_what_to_do():
    with pytest.raises(DeviceNotFoundError) as info:
        tpukit.connect("tpu")
    message = str(info.value)
    assert "No TPU" in message and "it sees: cpu" in message
    assert 'pip install -U "jax[tpu]"' in message or "Colab" in message
    with pytest.raises(ValueError, match="platform must be one of"):
        tpukit.connect("cuda")


def test_advice_for_colab_runtimes():
    colab = Environment(
        colab=True, colab_legacy_tpu_address=None, tpu_hardware=False, nvidia_hardware=False
    )
    legacy = Environment(
        colab=True,
        colab_legacy_tpu_address="10.0.0.2:8470",
        tpu_hardware=False,
        nvidia_hardware=False,
    )
    broken_gpu = Environment(
        colab=True, colab_legacy_tpu_address=None, tpu_hardware=False, nvidia_hardware=True
    )
    local_gpu = Environment(
        colab=False, colab_legacy_tpu_address=None, tpu_hardware=False, nvidia_hardware=True
    )
    assert "Change runtime type > TPU v5e-1" in missing_platform_advice("tpu", ["cpu"], colab)
    assert "legacy remote TPU at 10.0.0.2:8470" in missing_platform_advice("tpu", ["cpu"], legacy)
    assert "mismatched jax" in missing_platform_advice("gpu", ["cpu"], broken_gpu)
    assert "jax[cuda13]" in missing_platform_advice("gpu", ["cpu"], local_gpu)


def test_colab_is_recognised_from_its_environment(monkeypatch):
    from tpukit.runtime import detect_environment

    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab-20261101")
    monkeypatch.setenv("COLAB_TPU_ADDR", "10.1.2.3:8470")
    env = detect_environment()
    assert env.colab and env.colab_legacy_tpu_address == "10.1.2.3:8470"
    with pytest.raises(DeviceNotFoundError, match="legacy remote TPU"):
        tpukit.connect("tpu")


def test_simulated_devices_cannot_change_once_jax_started():
    jax.devices()
    assert tpukit.connect(cpu_devices=8).platform == "cpu"  # already so: fine
    with pytest.raises(DeviceSetupError) as info:
        tpukit.connect(cpu_devices=4)
    message = str(info.value)
    assert "already started with 8 CPU devices" in message and "Restart" in message
    with pytest.raises(ValueError, match="positive whole number"):
        tpukit.connect(cpu_devices=0)


def test_simulated_devices_in_a_fresh_process():
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    code = "import tpukit; t = tpukit.connect('cpu', cpu_devices=4); print(len(t))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "4"


def test_unreachable_coordinator_fails_within_the_timeout():
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    code = (
        "import tpukit\n"
        "try:\n"
        "    tpukit.connect(coordinator='127.0.0.1:9', num_processes=2, process_id=1, initialization_timeout=5)\n"
        "except tpukit.DeviceSetupError as e:\n"
        "    print('ERROR', e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=90
    )
    assert "ERROR The coordinator 127.0.0.1:9 did not answer within 5 s" in out.stdout, out.stderr[
        -2000:
    ]
    assert out.returncode == 0  # the process (a user's kernel) survives
