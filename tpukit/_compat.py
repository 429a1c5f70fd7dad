"""Differences between the library versions tpukit supports, in one place.

tpukit runs unchanged from the oldest versions in ``pyproject.toml``'s lower bounds
(Colab's preinstalled stack: JAX 0.7, Flax 0.11, IPython 7) to the newest releases.
Where those versions disagree, the rest of tpukit calls a function here instead of
testing versions or attributes itself. Each entry says which versions it bridges, so
it can go when the lower bound passes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from flax import nnx

_HAS_NNX_LIST = hasattr(nnx, "List")


def module_list(modules: Iterable[Any]) -> Any:
    """A list of submodules held as a module attribute.

    Flax 0.12 requires ``nnx.List`` for a list that holds modules or variables (a plain
    list there is static data and raises); Flax 0.11 has no ``nnx.List`` and traverses a
    plain list as a graph node. Both index, slice and iterate alike, and both give the
    state paths ``(name, index, ...)``.

    Example::

        >>> layers = module_list([nnx.Linear(2, 2, rngs=nnx.Rngs(0))])
        >>> len(layers)
        1
    """
    return nnx.List(modules) if _HAS_NNX_LIST else list(modules)


def iter_modules(module: nnx.Module) -> Iterator[tuple[tuple[Any, ...], nnx.Module]]:
    """``(path, submodule)`` for ``module`` and every module inside it, parents first.

    Flax 0.12 has the function ``nnx.iter_modules`` and deprecates the method; Flax 0.11
    has only the method ``Module.iter_modules``.
    """
    if hasattr(nnx, "iter_modules"):
        return nnx.iter_modules(module)
    return module.iter_modules()


def attribute_library_frames_to_callers() -> None:
    """Make HLO source lines name the user's code, not a library's, on JAX 0.7.

    JAX 0.7 writes only one frame into each HLO instruction's metadata: the innermost
    one outside JAX, which for a Flax layer, an optax update or a zoo model is a line
    inside Flax, optax or tpukit. Registering those folders as JAX-internal paths moves
    that frame out to the user's caller. From JAX 0.8 the whole stack is written as
    tables (tpukit picks the user's frame itself) and the registration would hide those
    frames from that stack, so it is left out there.
    """
    import os

    import flax
    import jax
    import optax

    if tuple(int(p) for p in jax.__version__.split(".")[:2]) >= (0, 8):
        return
    from jax._src import source_info_util

    tpukit_folder = os.path.dirname(os.path.abspath(__file__))
    for folder in (os.path.dirname(flax.__file__), os.path.dirname(optax.__file__), tpukit_folder):
        source_info_util.register_exclusion(folder)
