"""A fresh ``optax.adam(1e-3)`` on each ``fit`` call is known without tracing it again,
and an optimizer whose code could read a changed global is traced every time."""

import jax.numpy as jnp
import optax

from tpukit.train import _program
from tpukit.train._optax_key import optax_closure_key
from tpukit.train._program import OptimizerProgram

PARAMS = {"w": jnp.zeros((5, 3)), "b": jnp.zeros(3)}


def traces_made(monkeypatch):
    calls = []
    real = _program._trace_update

    def counting(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(_program, "_trace_update", counting)
    return calls


def test_the_same_optax_settings_made_again_are_not_traced_again(monkeypatch):
    calls = traces_made(monkeypatch)
    first = OptimizerProgram(optax.chain(optax.clip(1.0), optax.adamw(3e-3)), PARAMS)
    again = OptimizerProgram(optax.chain(optax.clip(1.0), optax.adamw(3e-3)), PARAMS)
    assert first == again and len(calls) <= 1  # one trace, or none if an earlier test made it
    other = OptimizerProgram(optax.chain(optax.clip(1.0), optax.adamw(3e-4)), PARAMS)
    assert other != first and "0.0003" in other.constants


def test_keys_tell_apart_every_setting():
    def key(optimizer):
        return optax_closure_key(optimizer.update)

    assert key(optax.adam(1e-3)) == key(optax.adam(1e-3))
    assert key(optax.adam(1e-3)) != key(optax.adam(1e-3, b2=0.99))
    assert key(optax.adam(1e-3)) != key(optax.adamw(1e-3))
    assert key(optax.sgd(0.1)) != key(optax.sgd(-0.1))
    assert key(optax.sgd(0.0)) != key(optax.sgd(-0.0))


LEARNING_RATE = 0.1


def user_optimizer():
    """A new optimizer object over the same code, which reads a notebook global."""

    def update(updates, state, params=None):
        return {k: -LEARNING_RATE * g for k, g in updates.items()}, state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


def test_an_optimizer_written_outside_optax_is_traced_on_every_new_object(monkeypatch):
    global LEARNING_RATE
    calls = traces_made(monkeypatch)
    optimizer = user_optimizer()
    assert optax_closure_key(optimizer.update) is None
    before = OptimizerProgram(optimizer, PARAMS)
    LEARNING_RATE = 0.5  # read at trace time: a key from the code alone would miss it
    try:
        changed = OptimizerProgram(user_optimizer(), PARAMS)
    finally:
        LEARNING_RATE = 0.1
    assert len(calls) == 2 and before != changed and "0.5" in changed.constants
