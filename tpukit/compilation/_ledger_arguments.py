"""What a compiled call was given, leaf by leaf, and how two calls differ: the ledger's words.

JAX compiles a function again when the key of its caches changes: an array's shape,
dtype or weak type, a sharding, a static argument's value, a pytree's structure, a
setting. ``describe_call`` writes a call's arguments as that key sees them (with the
user's parameter names and tree paths), and ``changes`` names what differs between two
calls, each change with the fix that avoids it.

>>> import numpy as np
>>> a = describe_call(lambda x, n: x, (np.ones((8, 3), np.float32), 2.0), {}, static=())
>>> b = describe_call(lambda x, n: x, (np.ones((16, 3), np.float32), 2.0), {}, static=())
>>> a.text()
'x: f32[8,3], n: f32[] weak'
>>> [c.text for c in changes(a, b)]
['x: shape f32[8,3] -> f32[16,3]']
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import jax

from tpukit.compilation._shapes import hlo_dtype_name
from tpukit.compilation._signature import device_dtype

_ADVICE = {
    "shape": "pad to a few sizes (or drop the last, short batch) so each size compiles once",
    "dtype": "give the dtype where the data is made: jnp.asarray(x, jnp.float32)",
    "weak": (
        "a Python number is weakly typed and an array is not: pass the same kind each "
        "time, e.g. jnp.asarray(v, jnp.float32) always"
    ),
    "static": (
        "each value of a static argument compiles once: pass a value that changes "
        "as an array, or keep the static values few"
    ),
    "structure": (
        "keep the pytree's structure fixed (the same keys, list lengths and None entries)"
    ),
    "sharding": "place the argument the same way each call (jax.device_put(x, sharding))",
    "arguments": "call the function with the same arguments each time",
    "function": (
        "define the function and its jit in a cell you run once (or in a module), and "
        "call it from other cells: each run of the defining cell makes a new function, "
        "which JAX compiles afresh"
    ),
    "config": "set JAX's options once, at the top of the notebook, before the first compile",
}


@dataclass(frozen=True)
class Leaf:
    """One leaf of a call's arguments as the compile key sees it.

    ``path`` is the parameter name and tree path (``params['w']``); ``kind`` is
    ``"array"`` (shape, dtype, weak type and sharding matter) or ``"static"`` (the
    value matters: a static argument, or a non-array leaf JAX hashes).
    """

    path: str
    kind: str
    shape: tuple[int, ...] | None = None
    dtype: str = ""
    weak: bool = False
    sharding: str = ""
    value: str = ""

    @property
    def aval(self) -> str:
        """``f32[8,3]`` for an array, ``static 3`` for a value."""
        if self.kind != "array":
            return f"static {self.value}"
        return f"{self.dtype}[{','.join(map(str, self.shape or ()))}]"

    def text(self) -> str:
        """The leaf as the ledger writes it: ``f32[] weak``, ``f32[8]@P('data')``."""
        extra = " weak" if self.weak else ""
        extra += f"@{self.sharding}" if self.sharding else ""
        return self.aval + extra


@dataclass(frozen=True)
class CallArguments:
    """A call's arguments: the parameters' names, each one's tree structure, the leaves."""

    names: tuple[str, ...]
    structures: tuple[str, ...]
    leaves: tuple[Leaf, ...]

    def text(self, limit: int = 6) -> str:
        """``x: f32[8,3], n=3``, at most ``limit`` leaves, then how many more."""
        parts = [
            f"{leaf.path}={leaf.value}" if leaf.kind == "static" else f"{leaf.path}: {leaf.text()}"
            for leaf in self.leaves[:limit]
        ]
        if len(self.leaves) > limit:
            parts.append(f"... {len(self.leaves) - limit} more")
        return ", ".join(parts) if parts else "()"


@dataclass(frozen=True)
class Change:
    """One difference between two calls: its kind (``shape``, ``dtype``, ``weak``,
    ``static``, ``structure``, ``sharding``, ``arguments``, ``function``, ``config``),
    what changed, in words, and what avoids it."""

    kind: str
    text: str

    @property
    def advice(self) -> str:
        return _ADVICE[self.kind]


def describe_call(
    function: Callable | None,
    args: tuple,
    kwargs: dict,
    static: Iterable[int | str] = (),
) -> CallArguments:
    """The arguments of one call of ``function`` (positions and names in ``static`` are
    static arguments; a Python number elsewhere is traced as a weakly typed scalar)."""
    static = set(static)
    names = _parameter_names(function, len(args))
    renamed = _leaf_names(function)
    named = [(names[i], i, a) for i, a in enumerate(args)] + [
        (k, k, v) for k, v in sorted(kwargs.items())
    ]
    structures, leaves = [], []
    for name, key, value in named:
        if key in static or name in static:
            structures.append("*")
            leaves.append(Leaf(name, "static", value=_short(value)))
            continue
        flat, tree = jax.tree_util.tree_flatten_with_path(value)
        structures.append(str(tree))
        for path, leaf in flat:
            written = name + jax.tree_util.keystr(path)
            leaves.append(_leaf(renamed.get(written, written), leaf))
    return CallArguments(tuple(n for n, _, _ in named), tuple(structures), tuple(leaves))


def changes(before: CallArguments, after: CallArguments) -> list[Change]:
    """What differs from ``before`` to ``after``, in the order a reader needs it."""
    if before.names != after.names:
        return [
            Change(
                "arguments",
                f"arguments ({', '.join(before.names)}) -> ({', '.join(after.names)})",
            )
        ]
    found: list[Change] = []
    for name, old, new in zip(after.names, before.structures, after.structures):
        if old != new and "*" not in (old, new):
            found.append(Change("structure", f"{name}: pytree structure changed"))
    old_leaves = {leaf.path: leaf for leaf in before.leaves}
    new_leaves = {leaf.path: leaf for leaf in after.leaves}
    if found:
        added = [p for p in new_leaves if p not in old_leaves]
        removed = [p for p in old_leaves if p not in new_leaves]
        detail = _listing("added", added) + _listing("removed", removed)
        if detail:
            found[0] = Change("structure", found[0].text + " (" + "; ".join(detail) + ")")
    for path, new in new_leaves.items():
        old = old_leaves.get(path)
        if old is not None:
            found += _leaf_changes(old, new)
    return found


def _leaf_changes(old: Leaf, new: Leaf) -> list[Change]:
    path = new.path
    if old.kind != new.kind:
        return [Change("static", f"{path}: {old.text()} -> {new.text()}")]
    if new.kind == "static":
        if old.value != new.value:
            return [Change("static", f"{path}: static value {old.value} -> {new.value}")]
        return []
    found = []
    if old.shape != new.shape:
        found.append(Change("shape", f"{path}: shape {old.aval} -> {new.aval}"))
    if old.dtype != new.dtype:
        found.append(Change("dtype", f"{path}: dtype {old.dtype} -> {new.dtype}"))
    if old.weak != new.weak:
        what = {True: "weakly typed (a Python number)", False: "an array"}
        found.append(Change("weak", f"{path}: {what[old.weak]} -> {what[new.weak]} ({new.dtype})"))
    if old.sharding != new.sharding:
        found.append(
            Change(
                "sharding",
                f"{path}: sharding {old.sharding or 'one device'} -> "
                f"{new.sharding or 'one device'}",
            )
        )
    return found


def _listing(word: str, paths: list[str]) -> list[str]:
    if not paths:
        return []
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    return [f"{word} {shown}"]


def _leaf(path: str, x: Any) -> Leaf:
    if isinstance(x, (bool, int, float, complex)):
        dtype = {bool: "pred", int: "s32", float: "f32", complex: "c64"}[type(x)]
        if jax.config.jax_enable_x64 and dtype != "pred":
            dtype = {"s32": "s64", "f32": "f64", "c64": "c128"}[dtype]
        return Leaf(path, "array", (), dtype, weak=dtype != "pred")
    aval = getattr(x, "aval", None)  # a tracer, or a jax.Array
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is None or dtype is None or isinstance(x, type):
        return Leaf(path, "static", value=_short(x))
    weak = bool(getattr(aval, "weak_type", getattr(x, "weak_type", False)))
    return Leaf(
        path, "array", tuple(shape), hlo_dtype_name(device_dtype(dtype)), weak, _sharding(x)
    )


def _sharding(x: Any) -> str:
    """A partition spec for an array split or placed by a mesh; '' for one device."""
    if not isinstance(x, jax.Array) or not getattr(x, "committed", False):
        return ""
    try:
        sharding = x.sharding
    except Exception:  # a deleted or abstract array has none to tell
        return ""
    spec = getattr(sharding, "spec", None)
    if spec is not None:
        return str(tuple(spec)).replace("'", "") if len(sharding.device_set) > 1 else ""
    return "" if len(sharding.device_set) == 1 else type(sharding).__name__


#: A function's attribute mapping its arguments' leaf paths to the names a user knows
#: them by: ``fit``'s step takes its state as flat leaves (``leaves[3]``), which are
#: ``state[0]['layers'][1]['kernel'].value`` in the model.
LEAF_NAMES = "__tpukit_leaf_names__"


def _leaf_names(function: Callable | None) -> dict[str, str]:
    """The names ``function`` (or a function it wraps) gives its leaves (`LEAF_NAMES`)."""
    seen = 0
    while function is not None and seen < 100:
        names = getattr(function, LEAF_NAMES, None)
        if isinstance(names, dict):
            return names
        function, seen = getattr(function, "__wrapped__", None), seen + 1
    return {}


def _parameter_names(function: Callable | None, count: int) -> list[str]:
    names: list[str] = []
    if function is not None:
        try:
            parameters = inspect.signature(function).parameters.values()
        except (TypeError, ValueError):
            parameters = ()
        for p in parameters:
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                names.append(p.name)
            elif p.kind == p.VAR_POSITIONAL:
                names += [f"{p.name}[{i}]" for i in range(count - len(names))]
    names += [f"arg{i}" for i in range(len(names), count)]
    return names[:count]


def _short(value: Any, limit: int = 40) -> str:
    try:
        text = repr(value)
    except Exception:  # a value whose repr fails is still a value
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
