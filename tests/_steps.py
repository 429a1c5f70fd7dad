"""The MNIST tutorial's training step (notebooks/01_mnist_mlp.ipynb), for tests that
compile, graph or profile what a user writes: value_and_grad of the softmax
cross-entropy, then an optax update of the NNX model's parameters."""

import optax
from flax import nnx


def tutorial_train_step(model, optimizer=None):
    """``(train_step, opt_state)`` for ``model`` with ``optimizer`` (Adam 1e-3 by default)."""
    optimizer = optimizer or optax.adam(1e-3)

    def train_step(model, opt_state, x, y):
        def loss(model):
            return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()

        value, grads = nnx.value_and_grad(loss)(model)
        params = nnx.state(model, nnx.Param)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        nnx.update(model, optax.apply_updates(params, updates))
        return value, model, opt_state

    return train_step, optimizer.init(nnx.state(model, nnx.Param))
