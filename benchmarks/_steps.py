"""The MNIST tutorial's ``train_step`` (notebooks/01_mnist_mlp.ipynb), shared by the
benchmarks that compile, graph or profile what a user writes. Benchmarks run as scripts
(``python benchmarks/x.py``), so this folder is on their import path."""

import optax
from flax import nnx


def tutorial_train_step(optimizer: optax.GradientTransformation):
    """One step of ``optimizer`` on a batch: value_and_grad of the softmax cross-entropy,
    then the update of the NNX model's parameters; returns ``(loss, model, opt_state)``."""

    def train_step(model, opt_state, x, y):
        def loss(model):
            return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()

        value, grads = nnx.value_and_grad(loss)(model)
        params = nnx.state(model, nnx.Param)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        nnx.update(model, optax.apply_updates(params, updates))
        return value, model, opt_state

    return train_step
