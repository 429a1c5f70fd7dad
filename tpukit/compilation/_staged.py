"""What ``tpukit.compile`` hands ``jax.jit``: a function of the traced arguments only.

One job: the staged function (static arguments closed over, the user's layers naming
their ops through `module_scopes`), an NNX module's call as a function of its weights,
and the shapes of what the program returns.

    >>> class Double:
    ...     def __call__(self, x): return 2 * x
    >>> module_call(Double()).__name__
    'Double'

Imports: ``_module_scopes``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import jax
from flax import nnx

from tpukit.compilation._module_scopes import module_scopes


def module_call(module: nnx.Module) -> Callable[..., Any]:
    """A function of ``(self, *args)`` that calls ``module``'s class on traced weights."""

    def call(self: nnx.Module, *args: Any, **kwargs: Any) -> Any:
        return self(*args, **kwargs)

    call.__name__ = call.__qualname__ = type(module).__name__
    try:
        method = inspect.signature(module.__call__)
        self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
        call.__signature__ = method.replace(
            parameters=[self_parameter, *method.parameters.values()]
        )
    except (TypeError, ValueError):
        pass  # no introspectable signature: arguments are named arg0, arg1, ...
    return call


def staged_function(function: Callable[..., Any], name: str, parameters) -> Callable[..., Any]:
    """A function of the traced arguments only, with the static ones closed over."""
    positional = [p for p in parameters if not p.keyword]
    static_kwargs = {p.name: p.value for p in parameters if p.keyword and p.kind == "static"}

    def staged(traced_args: tuple, traced_kwargs: dict) -> Any:
        traced = iter(traced_args)
        call_args = [next(traced) if p.kind == "array" else p.value for p in positional]
        named = {p.name: value for p, value in zip(positional, call_args)}
        with module_scopes(**named, **static_kwargs, **traced_kwargs):  # layers name their ops
            return function(*call_args, **static_kwargs, **traced_kwargs)

    staged.__name__ = name
    staged.__qualname__ = getattr(function, "__qualname__", name)
    staged.__wrapped__ = function  # the compile ledger names the user's function
    staged.__signature__ = inspect.signature(lambda traced_args, traced_kwargs: None)
    return staged


def output_info(lowered: Any, executable: Any) -> Any:
    info = getattr(lowered, "out_info", None)
    if info is None:
        info = getattr(executable, "out_info", None)
    if info is None:
        return None
    return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), info)
