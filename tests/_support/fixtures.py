"""Small programs several test files look at, written once.

Fixtures that need pytest (an IPython ``shell``, a browser) are in ``conftest.py``.
"""

import jax
import jax.numpy as jnp


def mlp_loss(x, w1, w2):
    """A two-layer MLP's loss, each layer under its own name scope."""
    with jax.named_scope("dense_1"):
        h = jax.nn.relu(x @ w1)
    with jax.named_scope("dense_2"):
        return jnp.tanh(h @ w2).sum()


def mlp_hlo() -> str:
    """The optimized HLO text of `mlp_loss`'s gradient (8x16 -> 32 -> 4)."""
    args = (jnp.ones((8, 16)), jnp.ones((16, 32)), jnp.ones((32, 4)))
    return jax.jit(jax.grad(mlp_loss, argnums=(1, 2))).lower(*args).compile().as_text()
