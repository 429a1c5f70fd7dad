"""A two-layer MLP and its data, for the tests that run one training program over the 8
simulated devices with a layer split across them (``LAYOUT``): ``train/test_compile_step.py``
and the child process of ``runtime/test_one_in_flight.py``.

    trainer = Trainer(MLP(nnx.Rngs(0)), optax.adam(1e-2), **LAYOUT)
    step = trainer.compile_step((X, Y), batch_size=64)
"""

import jax
import numpy as np
from flax import nnx


class MLP(nnx.Module):
    """32 inputs, 64 hidden units (ReLU), 16 classes."""

    def __init__(self, rngs):
        self.l1 = nnx.Linear(32, 64, rngs=rngs)
        self.l2 = nnx.Linear(64, 16, rngs=rngs)

    def __call__(self, x):
        return self.l2(jax.nn.relu(self.l1(x)))


rng = np.random.default_rng(0)
X = rng.normal(size=(512, 32)).astype(np.float32)
Y = rng.integers(0, 16, 512).astype(np.int32)
#: Four-way data parallel, the first layer's kernel split over the two-way model axis.
LAYOUT = {"mesh": "data=4,model=2", "shard": {r"l1/kernel": "None,model"}}
