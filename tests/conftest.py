"""Test session set-up shared by every test file, and the fixtures several files use.

JAX reads ``XLA_FLAGS`` once, when its CPU backend starts, so the eight simulated
CPU devices that the sharding tests need are requested here, before any test
imports JAX. Tests never touch the network or ``../shared``. Plain helpers (small
models and their programs) are in ``_support/``.
"""

import os
import pathlib
import signal

import pytest

from tests._support.browser import chromium

os.environ.setdefault("JAX_PLATFORMS", "cpu")
flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=8").strip()

# A suite started in the background by a script (`make test &`) inherits SIGINT ignored:
# Python then sets no KeyboardInterrupt handler, in this process or in the children the
# ^C tests start (an ignored signal stays ignored across exec), and those tests see no ^C.
# The suite runs as a user's notebook does, with Python's own handler.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium for the module's tests (Playwright's sync API), launched as
    ``_support.browser.chromium`` says: missing, it fails under CI=true and skips elsewhere."""
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def tutorial_step():
    """The MNIST tutorial's training step (the zoo's MLP, optax Adam, a batch of 128)
    compiled by tpukit, once per module: ``_support.steps.compiled_tutorial_step``."""
    from tests._support.steps import compiled_tutorial_step  # imports JAX: after XLA_FLAGS

    return compiled_tutorial_step()


@pytest.fixture(scope="module")
def shell():
    """IPython's shell as a notebook kernel runs it, with ``%load_ext tpukit`` done and
    ``jax``, ``jnp`` and ``np`` imported; the extension is unloaded after the module."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext tpukit", store_history=False)
    ip.run_cell("import jax, jax.numpy as jnp, numpy as np", store_history=False)
    yield ip
    ip.run_cell("%unload_ext tpukit", store_history=False)


#: The slowest files, slowest first (pytest --durations on the 2-core machine). The suite
#: runs on two workers that each take whole files (``--dist loadfile``) in collection
#: order; alphabetical order left the longest file (zoo/test_models.py) for last, with the other
#: worker idle while it ran. Files not named keep their order after these.
SLOWEST_FIRST = [
    "project/test_notebooks.py",
    "train/test_memory_fit.py",
    "zoo/test_models.py",
    "train/test_fit.py",
    "train/test_reliability.py",
    "project/test_docstring_examples.py",
    "train/test_interrupts.py",
    "runtime/test_launch.py",
    "project/test_readme.py",
    "compilation/test_find_nan.py",
    "memory/test_view.py",
    "project/test_architecture.py",
    "project/test_jupyterlab.py",
    "train/test_checkpoint.py",
    "project/test_cli.py",
    "graph/test_browser.py",
    "compilation/test_model_scopes.py",
    "runtime/test_one_in_flight.py",
    "train/test_scale_out.py",
]


TESTS = pathlib.Path(__file__).parent


def pytest_collection_modifyitems(items):
    missing = [name for name in SLOWEST_FIRST if not (TESTS / name).is_file()]
    if missing:  # a renamed file would silently lose its place
        raise pytest.UsageError(f"conftest.SLOWEST_FIRST names no file: {', '.join(missing)}")
    rank = {name: place for place, name in enumerate(SLOWEST_FIRST)}

    def place(item: pytest.Item) -> int:
        path = item.path.resolve()
        if not path.is_relative_to(TESTS.resolve()):
            return len(rank)
        return rank.get(path.relative_to(TESTS.resolve()).as_posix(), len(rank))

    items.sort(key=place)  # stable within a file
