"""What ``find_nan`` hands the jaxpr: a call's arguments as named leaves, and back.

One job: flatten ``function(*args, **kwargs)``'s arguments into the arrays a jaxpr takes
(an NNX module split into its state's arrays), name each leaf as the user wrote it
(``x``, ``model.layers[0].kernel``, ``args[2]``) and rebuild the call from new leaves.

    >>> def f(x, scale=1.0): ...
    >>> a = _arguments(f, (np.zeros(2),), {"scale": np.ones(())})
    >>> a.names
    ['x', 'scale']

Imports: ``_module_scopes`` (a layer's path as text).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from flax import nnx

from tpukit.compilation._module_scopes import path_text


@dataclass
class _Arguments:
    """A call's arguments as the leaves a jaxpr takes: arrays, and NNX modules split."""

    dynamic: list[Any]
    names: list[str]
    rebuild: Callable[[Sequence[Any]], tuple[tuple, dict]]
    modules: dict[str, Any]


def _arguments(function: Callable, args: tuple, kwargs: dict) -> _Arguments:
    named = _argument_names(function, len(args))
    tree = (args, kwargs)
    flat, treedef = jax.tree_util.tree_flatten_with_path(
        tree, is_leaf=lambda x: isinstance(x, nnx.Module)
    )
    dynamic: list[Any] = []
    names: list[str] = []
    plan: list[tuple[str, Any]] = []
    modules: dict[str, Any] = {}
    for path, leaf in flat:
        name = _leaf_name(path, named)
        if isinstance(leaf, nnx.Module):
            graphdef, state = nnx.split(leaf)
            leaves, state_def = jax.tree_util.tree_flatten_with_path(state)
            start = len(dynamic)
            for state_path, value in leaves:
                dynamic.append(value)
                keys = tuple(getattr(k, "name", k) for k in state_path)
                keys = keys[:-1] if keys and keys[-1] == "value" else keys  # a Variable's
                names.append(f"{name}.{path_text(keys)}".replace("..", "."))
            plan.append(("module", (graphdef, state_def, start, len(leaves))))
            modules[name.split(".")[0].split("[")[0]] = leaf
        elif isinstance(leaf, (jax.Array, np.ndarray, np.generic)):
            plan.append(("array", len(dynamic)))
            dynamic.append(leaf)
            names.append(name)
        else:
            plan.append(("static", leaf))

    def rebuild(values: Sequence[Any]) -> tuple[tuple, dict]:
        leaves = []
        for kind, item in plan:
            if kind == "array":
                leaves.append(values[item])
            elif kind == "static":
                leaves.append(item)
            else:
                graphdef, state_def, start, count = item
                state = jax.tree_util.tree_unflatten(state_def, values[start : start + count])
                leaves.append(nnx.merge(graphdef, state))
        return jax.tree_util.tree_unflatten(treedef, leaves)

    return _Arguments(dynamic, names, rebuild, modules)


def _argument_names(function: Callable, count: int) -> list[str]:
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    names = []
    for i in range(count):
        if i < len(parameters) and parameters[i].kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            names.append(parameters[i].name)
        else:
            names.append(f"args[{i}]")
    return names


def _leaf_name(path: tuple, named: list[str]) -> str:
    first, *rest = path
    index = getattr(first, "idx", getattr(first, "key", first))
    if index == 0:  # the positional arguments
        position, *rest = rest
        i = getattr(position, "idx", position)
        root = named[i] if isinstance(i, int) and i < len(named) else f"args[{i}]"
    else:
        key, *rest = rest
        root = str(getattr(key, "key", key))
    return root + jax.tree_util.keystr(tuple(rest))
