"""Graphs the browser tests of this folder share (graph/test_browser.py, test_in_notebook.py)."""

import jax
import jax.numpy as jnp
import pytest

from tests._support.fixtures import mlp_hlo
from tests.graph.test_browser import mlp_loss
from tpukit.hlo import graph


@pytest.fixture(scope="module")
def mlp_graph():
    return graph(mlp_hlo(), title="mlp", stage="optimized")


@pytest.fixture(scope="module")
def forward_graph():
    """The MLP's forward pass (its source lines are in graph/test_browser.py): its first
    view shows the scopes open and their fusions."""
    args = (jnp.ones((8, 16)), jnp.ones((16, 32)), jnp.ones((32, 4)))
    text = jax.jit(mlp_loss).lower(*args).compile().as_text()
    return graph(text, title="mlp", stage="optimized")
