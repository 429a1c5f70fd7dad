"""The MNIST tutorial's training step, read from the tutorial itself
(notebooks/01_mnist_mlp.ipynb), for tests and benchmarks that compile, graph or profile
what a user writes: value_and_grad of the softmax cross-entropy, then an optax update of
the NNX model's parameters. Reading the notebook keeps one copy of the step: a change to
the tutorial is what these tests then compile."""

import json
from pathlib import Path

import optax
from flax import nnx

TUTORIAL = Path(__file__).resolve().parents[2] / "notebooks" / "01_mnist_mlp.ipynb"


def tutorial_cell(defining: str = "def train_step") -> str:
    """The source of the tutorial's code cell that contains ``defining``."""
    for cell in json.loads(TUTORIAL.read_text())["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and defining in source:
            return source
    raise LookupError(f"no code cell of {TUTORIAL.name} contains {defining!r}")


def tutorial_train_step(model, optimizer=None):
    """``(train_step, opt_state)`` for ``model``, with the tutorial's optimizer (Adam 1e-3)
    or ``optimizer`` in its place: the step reads the name ``optimizer`` when it runs."""
    namespace = {"optax": optax, "nnx": nnx, "model": model}
    exec(tutorial_cell(), namespace)
    if optimizer is not None:
        namespace["optimizer"] = optimizer
        namespace["opt_state"] = optimizer.init(nnx.state(model, nnx.Param))
    return namespace["train_step"], namespace["opt_state"]
