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


#: The tutorial's batch as ``tpukit.shape`` reads it: 128 flattened MNIST images and labels.
TUTORIAL_BATCH = ("f32[128,784]", "s32[128]")


def compiled_tutorial_step(model=None):
    """The tutorial's step compiled by tpukit for `TUTORIAL_BATCH`: on the zoo's MLP (seed 0)
    as the tutorial makes it, or on ``model``; a ``tpukit.Compiled``. The ``tutorial_step``
    fixture of ``conftest.py`` holds one per test module::

        step = compiled_tutorial_step()
        step.graph("optimized")
    """
    import tpukit  # after conftest has set XLA_FLAGS (tpukit imports JAX)

    if model is None:
        model = tpukit.zoo.create("mlp", seed=0)
    train_step, opt_state = tutorial_train_step(model)
    batch = [tpukit.shape(text) for text in TUTORIAL_BATCH]
    return tpukit.compile(train_step, model, opt_state, *batch)
