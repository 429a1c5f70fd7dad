"""The model's split as the last ``fit`` call wrote it, reused while nothing changed it.

Each ``fit`` call starts with ``nnx.split(model)`` and ends with ``nnx.update(model,
...)``: two walks of the whole graph (about a millisecond for a small MLP, more than a
call of a few steps costs the scan). Between two calls of a notebook the model is
usually untouched, so :class:`KeptSplit` keeps, beside the model (in its
``TrainingState.kept``), what the last call wrote: the graph definition, the
``(params, rest)`` states, every Variable and every object the graph is made of.

A later call reuses them only when a cheap walk (:func:`walk`: attributes by identity,
no states built) finds the same objects in the same places and every Variable holding
the very array the last call wrote: a reassigned attribute, a replaced or added layer,
a value set by hand (``model.linear.kernel.value = ...``, ``nnx.update``), changed
Variable metadata or ``model.eval()`` all fail it, and the call splits the model as
before. Writing back, the new arrays go straight into those Variables (the states keep
their structure through a compiled call); anything else is ``nnx.update``.

Example::

    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    >>> kept = KeptSplit()
    >>> params = kept.split(model)[1]
    >>> kept.split(model)[1] is params            # untouched: the same states
    True
    >>> model.bias = nnx.Param(jnp.ones(3))       # a layer's Variable replaced
    >>> kept.split(model)[1] is params, float(kept.split(model)[1]["bias"][0])
    (False, 1.0)
"""

from __future__ import annotations

import operator
import types
from typing import Any

import jax
from flax import nnx

from ._flat import FlatState
from ._steps import split_model

#: What the walk does with a value, by its type (flax's checks are slow ``isinstance``
#: calls through metaclasses, so each type is looked at once): record it by identity
#: (``_STATIC``), or walk it as a Variable, a dict, a list or tuple, or a graph node.
_STATIC, _VARIABLE, _MAPPING, _SEQUENCE, _NODE = range(5)
_KINDS: dict[type, int] = {
    t: _STATIC for t in (int, float, bool, str, bytes, type(None), type, types.FunctionType)
}


def _kind(value: Any) -> int:
    kind = _KINDS.get(type(value))
    if kind is None:
        kind = _KINDS[type(value)] = _kind_of(value)
    return kind


def _kind_of(value: Any) -> int:
    if isinstance(value, nnx.Variable):
        return _VARIABLE
    if type(value) is dict:
        return _MAPPING
    if type(value) in (list, tuple):
        return _SEQUENCE
    return _NODE if nnx.graph.is_graph_node(value) else _STATIC


def _raw(variable: nnx.Variable) -> Any:
    get = getattr(variable, "get_raw_value", None)  # flax >= 0.12; before, an attribute
    return get() if get is not None else variable.raw_value


class Walk:
    """The model's graph as objects: ``objects`` (compared by identity: nodes, attribute
    values, Variables, their arrays and metadata values), ``names`` (compared by
    ``==``: attribute names, container sizes, metadata keys), the ``variables`` in walk
    order and where each one's array sits in ``objects`` (``raw_at``)."""

    __slots__ = ("objects", "names", "variables", "raw_at")

    def __init__(self) -> None:
        self.objects: list[Any] = []
        self.names: list[Any] = []
        self.variables: list[nnx.Variable] = []
        self.raw_at: list[int] = []

    def same_as(self, other: Walk) -> bool:
        return (
            self.names == other.names
            and len(self.objects) == len(other.objects)
            and all(map(operator.is_, self.objects, other.objects))
        )


def walk(model: Any) -> Walk | None:
    """:class:`Walk` of ``model``'s graph; ``None`` for a node this walk cannot read (no
    ``__dict__``, Variable metadata not a dict): such a model is split every call."""
    out = Walk()
    objects, names = out.objects, out.names
    kinds = _KINDS
    seen: set[int] = set()
    objects.append(model)
    stack = [(model, _kind(model))]
    pop, push = stack.pop, stack.append
    while stack:
        node, kind = pop()
        if id(node) in seen:  # a node met before (shared): its place is recorded
            continue
        seen.add(id(node))
        if kind == _VARIABLE:
            metadata = getattr(node, "_var_metadata", None)
            if not isinstance(metadata, dict):
                return None
            out.variables.append(node)
            out.raw_at.append(len(objects))
            objects.append(_raw(node))
            objects.extend(metadata.values())
            names.extend(metadata)
            continue
        if kind == _SEQUENCE:
            values = node
            names.append(len(node))
        else:
            attributes = node if kind == _MAPPING else getattr(node, "__dict__", None)
            if attributes is None:
                return None
            values = attributes.values()
            names.append(len(attributes))
            names.extend(attributes)
        objects.extend(values)
        for value in values:
            inner = kinds.get(type(value))
            if inner is None:
                inner = _kind(value)
            if inner != _STATIC:
                push((value, inner))
    return out


class KeptSplit:
    """``(graphdef, params, rest)`` of the model as the last call left it, with the
    :class:`Walk` that proves the model still is that (see the module's docstring).
    The states are kept as they were written: trees, or the ``FlatState`` of a call
    (whose trees are built only when read, :attr:`params` and :attr:`rest`)."""

    def __init__(self) -> None:
        self.graphdef: Any = None
        self.state: Any = None  # (params, rest), or the FlatState written
        self._walk: Walk | None = None
        self._leaf_of: list[int] = []  # each walked Variable's index in the states' leaves
        self._treedef: Any = None  # of ``(params, rest)``
        self._parts: Any = None  # the last FlatState's ``Parts`` found of ``_treedef``

    @classmethod
    def beside(cls, kept: Any) -> KeptSplit:
        """The one in ``kept`` (a model's ``_kept.KeptForModel``), made on first use."""
        if kept.split is None:
            kept.split = cls()
        return kept.split

    @property
    def params(self) -> Any:
        return self.state[0] if type(self.state) is tuple else self.state.params

    @property
    def rest(self) -> Any:
        return self.state[1] if type(self.state) is tuple else self.state.rest

    @property
    def kept(self) -> tuple[Any, Any] | None:
        """``(graphdef, state)`` as the last call left the model, unchecked (see
        :meth:`unchanged`; ``state`` as :attr:`state`), or ``None`` when nothing is kept."""
        return None if self._walk is None else (self.graphdef, self.state)

    def unchanged(self, model: Any) -> bool:
        """Whether ``model`` is as the kept states left it (the cheap walk finds it so)."""
        if self._walk is None:
            return False
        now = walk(model)
        return now is not None and now.same_as(self._walk)

    def split(self, model: Any) -> tuple[Any, Any, Any]:
        """``split_model(model)``: the kept states when the model is as they left it."""
        if self.unchanged(model):
            return self.graphdef, self.params, self.rest
        graphdef, params, rest = split_model(model)
        self._record(model, graphdef, params, rest)
        return graphdef, params, rest

    def write_back(
        self, model: Any, graphdef: Any, state: FlatState, *, checked: bool = False
    ) -> None:
        """``nnx.update(model, params, rest)`` (``state``'s, states of ``graphdef``'s
        model); straight from ``state``'s leaves into the Variables when the model is as
        the kept states left it and the new states have their structure. ``checked``:
        nothing but ``fit`` touched the model since its :meth:`split` this call (no
        callback ran), so it is not walked again."""
        if self._walk is not None and (checked or self._walk.same_as(walk(model) or Walk())):
            parts = state.parts
            if parts is self._parts or parts.model_treedef == self._treedef:
                self._parts = parts
                leaves, objects = state.leaves, self._walk.objects
                for n, (variable, at, i) in enumerate(
                    zip(self._walk.variables, self._walk.raw_at, self._leaf_of, strict=True)
                ):
                    _set_raw(variable, leaves[i], checked=n > 0)
                    objects[at] = leaves[i]
                self.state = state
                return
        nnx.update(model, state.params, state.rest)
        self._record(model, graphdef, state.params, state.rest)

    def _record(self, model: Any, graphdef: Any, params: Any, rest: Any) -> None:
        """Keep ``(graphdef, params, rest)`` when every leaf of the states is the array of
        exactly one Variable of ``model`` (else keep nothing: the next call splits)."""
        self._walk = None
        found = walk(model)
        if found is None:
            return
        leaves, tree = jax.tree.flatten((params, rest))
        index = {id(x): i for i, x in enumerate(leaves)}
        leaf_of = [index.get(id(found.objects[at]), -1) for at in found.raw_at]
        if len(index) != len(leaf_of) or sorted(leaf_of) != list(range(len(index))):
            return
        self.graphdef, self.state = graphdef, (params, rest)
        self._walk, self._leaf_of, self._treedef, self._parts = found, leaf_of, tree, None


def _set_raw(variable: nnx.Variable, value: Any, checked: bool = False) -> None:
    """``variable``'s array set to ``value``; ``checked``: flax's check that the Variable
    may be updated here (not from inside another trace) passed for the write-back's
    first Variable, and holds for its others (fit runs outside any trace).

    A checked Variable's array is set as ``set_raw_value(value, _unsafe_bypass_check=True)``
    would set it, without the check that flax's ``__setattr__`` makes again (some 3 µs a
    Variable in a loop, 10 in situ); flax's own jit sets ``_raw_value`` this way."""
    setter = getattr(variable, "set_raw_value", None)  # flax >= 0.12
    if setter is None:
        object.__setattr__(variable, "raw_value", value)
    elif checked and _BYPASS:
        object.__setattr__(variable, "_raw_value", value)
    else:
        setter(value)


def _can_bypass() -> bool:
    """Whether flax's ``Variable.set_raw_value`` can skip its trace check, and does no
    more than set ``_raw_value`` (flax >= 0.12.x): then :func:`_set_raw` sets it itself."""
    code = getattr(getattr(nnx.Variable, "set_raw_value", None), "__code__", None)
    return (
        code is not None
        and "_unsafe_bypass_check" in code.co_varnames
        and set(code.co_names) == {"_check_can_update", "_raw_value"}
    )


_BYPASS = _can_bypass()
