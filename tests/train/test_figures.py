"""A fit call's figures come back in one packed array, bit for bit (``_figures``)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from tpukit.train import Trainer, fit
from tpukit.train._figures import Figures, pack

RNG = np.random.default_rng(3)
X = RNG.normal(size=(96, 6)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int32)

EXACT = {
    "loss": jnp.float32(np.nan),
    "accuracy": jnp.float32(1e-45),  # a denormal: bitcast, not converted
    "negative_zero": jnp.float32(-0.0),
    "infinite": jnp.float32(-np.inf),
    "steps": jnp.int32(2**31 - 1),
    "bad_step": jnp.int32(-1),
    "lowest": jnp.int32(-(2**31)),
    "end_finite": jnp.bool_(False),
    "finite": jnp.array([True, False, True]),
    "apart": jnp.int8(-5),  # not 32 bits: left as it came
}


def same(a, b) -> bool:
    """``a`` holds exactly ``b``: the same bits once in ``b``'s dtype (a scalar read back
    is a Python number: a float32 converts to a double exactly, and back)."""
    b = np.asarray(b)
    if isinstance(a, (bool, int, float)) and b.shape == ():
        scalar_type = {np.bool_: bool, np.int32: int, np.float32: float}[b.dtype.type]
        return type(a) is scalar_type and np.asarray(a, b.dtype).tobytes() == b.tobytes()
    a = np.asarray(a)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_every_figure_comes_back_bit_for_bit_in_order():
    packed, apart, layout = pack(EXACT)
    assert packed.dtype == jnp.int32 and packed.shape == (11,) and list(apart) == ["apart"]
    host = Figures(packed, apart, layout).on_host()
    assert isinstance(host["finite"], np.ndarray) and isinstance(host["apart"], np.ndarray)
    assert list(host) == sorted(EXACT)  # as jax.jit returns a dict
    assert all(same(host[n], EXACT[n]) for n in EXACT), host
    device = Figures(packed, apart, layout).on_device()
    assert list(device) == sorted(EXACT)
    assert all(isinstance(v, jax.Array) and same(device[n], EXACT[n]) for n, v in device.items())


def test_the_figures_of_a_packed_program_come_back_bit_for_bit():
    layouts = []

    def packed_in_a_program(stats):  # the figures are arguments: moved, not folded
        packed, apart, layout = pack(stats)
        layouts.append(layout)
        return packed, apart

    host = Figures(*jax.jit(packed_in_a_program)(EXACT), *layouts).on_host()
    assert all(same(host[n], EXACT[n]) for n in EXACT), host


def test_a_fit_call_hands_back_one_array_of_figures(monkeypatch):
    from tpukit.train import _steps

    seen = []
    call = _steps.Step.__call__

    def recording(self, state, data):
        out = call(self, state, data)
        seen.append(out[1])
        return out

    monkeypatch.setattr(_steps.Step, "__call__", recording)
    model = nnx.Linear(6, 3, rngs=nnx.Rngs(5))
    history = fit(model, optax.adam(1e-2), (X, Y), epochs=2, batch_size=16, verbose=False)
    assert len(seen) == 2
    for figures, record in zip(seen, history.executions, strict=True):
        assert isinstance(figures, Figures) and figures.apart == {}
        (packed,) = jax.tree.leaves((figures.packed, figures.apart))
        assert packed.dtype == jnp.int32
        host = figures.on_host()
        assert list(host) == ["accuracy", "bad_step", "end_finite", "loss", "steps"]
        assert host["steps"] == 6 and host["bad_step"] == -1 and host["end_finite"] is True
        assert host["loss"] / 6 == record["loss"]


def test_the_compiled_step_still_gives_its_stats_as_a_dict():
    model = nnx.Linear(6, 5, rngs=nnx.Rngs(6))
    step = Trainer(model, optax.sgd(1e-2)).compile_step((X, Y), batch_size=24)
    state, data = step.example_arguments  # fit's placed state and data
    *_, stats = step(*state, **data)
    assert list(stats) == ["accuracy", "bad_step", "end_finite", "loss", "steps"]
    assert all(isinstance(v, jax.Array) and v.shape == () for v in stats.values())
    assert stats["steps"].dtype == jnp.int32 and int(stats["steps"]) == 4
    assert int(stats["bad_step"]) == -1 and bool(stats["end_finite"])
    assert np.isfinite(float(stats["loss"]))
