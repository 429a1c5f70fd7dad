"""The training state as ``fit``'s calls pass it on: flat leaves, a tree only when asked.

A compiled call takes the state ``(params, rest, opt_state)`` and returns the next
one. Passed as trees, every dispatch flattens the input's NNX ``State`` and optax
nodes and builds the output's again (JAX calls their Python flatten and unflatten
functions, node by node): some 200 µs of a short call's host time on a small MLP,
for trees that the next call flattens again at once. So fit's calls take and return
the leaves (``_steps.Step``), and :class:`FlatState` carries them from call to call,
to the write-back (which sets the model's Variables from the leaves,
``_kept_split``) and on to the next ``fit`` (the model's ``TrainingState`` reads its
optimizer state from it). The trees are built only where a tree is read: an
evaluation, a checkpoint, the NaN guard's diagnosis, ``TrainingState.opt_state``.

Example::

    >>> import jax.numpy as jnp
    >>> state = FlatState.of({"w": jnp.ones(2)}, {}, (jnp.zeros(2),))
    >>> len(state.leaves), state.model_leaves
    (2, 1)
    >>> next_state = state.like(state.leaves)     # a call's result: the same structure
    >>> float(next_state.params["w"][0]), next_state.parts is state.parts
    (1.0, True)
"""

from __future__ import annotations

from typing import Any

import jax


class Parts:
    """Where the state's three parts lie in its leaves: ``model_leaves`` leaves of
    ``(params, rest)`` first (``model_treedef``, the structure the model's Variables
    were matched with), then the optimizer state's. Shared by every state of the same
    structure that a run passes on, so checks against it are by identity."""

    __slots__ = ("treedef", "model_leaves", "model_treedef")

    def __init__(self, treedef: Any) -> None:
        params, rest, opt_state = treedef.children()
        self.treedef = treedef
        self.model_leaves = params.num_leaves + rest.num_leaves
        self.model_treedef = jax.tree_util.treedef_tuple((params, rest))


class FlatState:
    """``(params, rest, opt_state)`` as its ``leaves`` and their :class:`Parts`; the
    tree is unflattened on first read (:meth:`tree`, ``params``, ``rest``,
    ``opt_state``) and kept."""

    __slots__ = ("leaves", "parts", "_tree")

    def __init__(self, leaves: list, parts: Parts, tree: tuple | None = None) -> None:
        self.leaves = leaves
        self.parts = parts
        self._tree = tree

    @classmethod
    def of(cls, params: Any, rest: Any, opt_state: Any) -> FlatState:
        """The state of these trees (flattened now, the trees kept)."""
        tree = (params, rest, opt_state)
        leaves, treedef = jax.tree.flatten(tree)
        return cls(leaves, Parts(treedef), tree)

    def like(self, leaves: list) -> FlatState:
        """The state of ``leaves`` in this state's structure (a call's result)."""
        return FlatState(leaves, self.parts)

    @property
    def treedef(self) -> Any:
        return self.parts.treedef

    @property
    def model_leaves(self) -> int:
        return self.parts.model_leaves

    def tree(self) -> tuple:
        """``(params, rest, opt_state)``, unflattened once."""
        if self._tree is None:
            self._tree = tuple(self.parts.treedef.unflatten(self.leaves))
        return self._tree

    @property
    def params(self) -> Any:
        return self.tree()[0]

    @property
    def rest(self) -> Any:
        return self.tree()[1]

    @property
    def opt_state(self) -> Any:
        return self.tree()[2]

    def optimizer_leaves(self) -> list:
        return self.leaves[self.parts.model_leaves :]
