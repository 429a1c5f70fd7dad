"""Out-of-memory advice for a compiled call names a batch that then compiles and runs,
whatever the order of the call's arguments; where the batch is ambiguous it says which
argument it shrank and takes ``batch_argument=`` to name another."""

import re

import jax.numpy as jnp
import numpy as np
import pytest

import tpukit
from tpukit._errors import DeviceMemoryError
from tpukit.compilation._out_of_memory import batch_choice

S = tpukit.shape


def mlp(x, w1, w2):
    return jnp.tanh(x @ w1) @ w2


def weights_first(w, x):
    return jnp.tanh(x @ w)


def scaled(x, w, *, y):
    return jnp.tanh(x @ w) * y[:, None]


def two_batches(a, b):
    return a.sum() + b.sum()


@pytest.fixture
def capacity():
    """Set the device's capacity to a share of what a program needs; unset afterwards."""

    def set_share(function, *args, share=0.6, **kwargs):
        needed = tpukit.compile(function, *args, **kwargs).memory.total_bytes
        tpukit.set_device_memory(int(needed * share))
        return int(needed * share)

    yield set_share
    tpukit.set_device_memory(None)


def refused(function, *args, **kwargs) -> str:
    with pytest.raises(DeviceMemoryError) as caught:
        tpukit.compile(function, *args, **kwargs)
    return str(caught.value)


def advised(message: str, of: int) -> int:
    found = re.search(rf"The largest batch that fits is (\d+) of {of} ", message)
    assert found, message
    return int(found.group(1))


def test_the_batch_is_the_data_s_leading_dimension_not_the_last_argument_s(capacity):
    shapes = (S("f32[1024,64]"), S("f32[64,48]"), S("f32[48,8]"))
    capacity(mlp, *shapes)
    message = refused(mlp, *shapes)
    batch = advised(message, 1024)
    assert 0 < batch < 1024 and "x shrunk along its first axis" in message
    # the advised batch compiles within the capacity, and runs
    fits = tpukit.compile(mlp, S(f"f32[{batch},64]"), *shapes[1:])
    out = fits(
        np.ones((batch, 64), np.float32),
        np.ones((64, 48), np.float32),
        np.ones((48, 8), np.float32),
    )
    assert out.shape == (batch, 8)


def test_weights_before_the_data_still_shrink_the_data(capacity):
    shapes = (S("f32[64,64]"), S("f32[1024,64]"))
    capacity(weights_first, *shapes)
    message = refused(weights_first, *shapes)
    assert "No batch down to" not in message
    batch = advised(message, 1024)
    assert "x shrunk along its first axis" in message
    tpukit.compile(weights_first, shapes[0], S(f"f32[{batch},64]"))  # fits: no error


def test_a_keyword_argument_that_shares_the_batch_shrinks_with_it(capacity):
    x, w, y = S("f32[1024,64]"), S("f32[64,32]"), S("f32[1024]")
    capacity(scaled, x, w, y=y)
    message = refused(scaled, x, w, y=y)
    batch = advised(message, 1024)
    assert "x and y shrunk along their first axis" in message
    fits = tpukit.compile(scaled, S(f"f32[{batch},64]"), w, y=S(f"f32[{batch}]"))
    out = fits(
        np.ones((batch, 64), np.float32),
        np.ones((64, 32), np.float32),
        y=np.ones(batch, np.float32),
    )
    assert out.shape == (batch, 32)


def test_an_ambiguous_batch_says_which_it_shrank_and_batch_argument_names_another(capacity):
    a, b = S("f32[2048,16]"), S("f32[512,16]")
    capacity(two_batches, a, b, share=0.5)
    message = refused(two_batches, a, b)
    assert (
        "a shrunk along its first axis; the batch is ambiguous (other leading sizes: b: 512)"
        in message
    )
    assert "batch_argument='b'" in message
    chosen = refused(two_batches, a, b, batch_argument="b")
    assert "of 512" in chosen and "b shrunk along its first axis" in chosen


def test_batch_argument_naming_no_argument_is_one_line():
    with pytest.raises(tpukit.ArgumentError, match="batch_argument='z' names no argument"):
        tpukit.compile(mlp, S("f32[8,4]"), S("f32[4,4]"), S("f32[4,2]"), batch_argument="z")


def test_batch_choice_prefers_a_leading_size_no_argument_has_inside():
    from types import SimpleNamespace as P

    import jax

    def arg(name, *shape):
        return P(name=name, value=jax.ShapeDtypeStruct(shape, jnp.float32))

    assert batch_choice([arg("w1", 784, 512), arg("x", 4096, 784)]).size == 4096
    assert batch_choice([arg("x", 32, 8), arg("w", 8, 8), arg("y", 32)]).names == ("x", "y")
    assert batch_choice([arg("x", 32, 8), arg("w", 8, 8)], named="w").size == 8


def test_evaluate_blames_the_data_it_puts_on_the_devices_when_that_is_what_does_not_fit():
    import jax
    from flax import nnx

    from tpukit.display import format_bytes

    model = nnx.Linear(64, 4, rngs=nnx.Rngs(0))
    x, y = np.ones((4096, 64), np.float32), np.zeros(4096, np.int32)
    share = (x.nbytes + y.nbytes) // jax.device_count()  # the data is split over the devices
    tpukit.set_device_memory(share // 2)  # the weights fit, each device's data does not
    try:
        with pytest.raises(DeviceMemoryError) as caught:
            tpukit.evaluate(model, (x, y), batch_size=16)  # few batches to search
    finally:
        tpukit.set_device_memory(None)
    message = str(caught.value)
    assert "the weights and state alone" not in message
    blame = f"each device's share of the data put on the devices ({format_bytes(share)})"
    assert blame in message and "evaluate it in parts" in message
