"""The tolerances for comparing one float32 computation done two ways, in one place.

A compiled program and the same function run eagerly, one device and eight, two
processes and one, a whole epoch in one call and in several: the arithmetic is the
same, but XLA fuses, vectorises and orders reductions differently on each, and its
CPU code differs between processors (vector width, FMA). float32 results then agree
to a few parts in 10^5, not bit for bit: ``rtol=1e-5`` failed by 1.3e-5 on another
machine of the same kind. A real mistake is off by far more than these tolerances.

    >>> assert_close_across_processors(compiled(x), f(x))
    >>> assert loss == approx_across_processors(expected_loss)
"""

from typing import Any

import jax
import numpy as np
import pytest

#: Relative and absolute tolerance for float32 results computed two equivalent ways.
RTOL = 1e-4
ATOL = 2e-5


def assert_close_across_processors(actual: Any, expected: Any, err_msg: str = "") -> None:
    """``np.testing.assert_allclose`` leaf by leaf over two pytrees (or two arrays)."""

    def check(a: Any, e: Any) -> None:
        np.testing.assert_allclose(
            np.asarray(a), np.asarray(e), rtol=RTOL, atol=ATOL, err_msg=err_msg
        )

    jax.tree.map(check, actual, expected)


def approx_across_processors(expected: Any) -> Any:
    """``pytest.approx(expected)`` with the same tolerances, for scalars and lists."""
    return pytest.approx(expected, rel=RTOL, abs=ATOL)
