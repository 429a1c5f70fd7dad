"""Where a compiled program's arrays live: meshes, partition specs and their descriptions.

A compile for several devices is described by its mesh (``data=8``), the
partition spec of each argument and output, and the collectives XLA inserted.
The magics' ``--mesh data=4,model=2`` and ``--shard x=data`` options are read
here too.

>>> from jax.sharding import PartitionSpec
>>> parse_partition_spec("data,None") == PartitionSpec("data", None)
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from tpukit._errors import ArgumentError
from tpukit.compilation._signature import (
    classify,
    declared_parameters,
    is_array_like,
    positional_names,
)


def parse_mesh(text: str, devices: list[Any] | None = None) -> Mesh:
    """``"data=8"`` or ``"data=4,model=2"`` -> a ``Mesh`` over the first devices.

    ``-1`` for one axis takes whatever the others leave: ``"data=-1"`` is all devices.
    """
    devices = list(jax.devices() if devices is None else devices)
    names, sizes = [], []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, size = part.partition("=")
        if not sep or not name.strip().isidentifier() or not size.strip().lstrip("-").isdigit():
            raise ArgumentError(
                f"Cannot read the mesh {text!r}: write AXIS=SIZE pairs, e.g. data=8 or data=4,model=2."
            )
        if name.strip() in names:
            raise ArgumentError(
                f"The mesh {text!r} names the axis {name.strip()!r} twice; give each axis one "
                "size, e.g. data=8 or data=4,model=2."
            )
        names.append(name.strip())
        sizes.append(int(size))
    if not names:
        raise ArgumentError("The mesh is empty: write AXIS=SIZE pairs, e.g. data=8.")
    if sizes.count(-1) > 1:
        raise ArgumentError(f"Only one axis of {text!r} may have size -1.")
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
        sizes[sizes.index(-1)] = len(devices) // max(known, 1)
    total = math.prod(sizes)
    if total < 1 or total > len(devices) or min(sizes) < 1:
        raise ArgumentError(
            f"The mesh {text!r} needs {total} devices but {len(devices)} are here. Pick sizes "
            f"whose product is at most {len(devices)}."
        )
    return Mesh(np.array(devices[:total]).reshape(sizes), tuple(names))


def parse_partition_spec(text: str) -> PartitionSpec:
    """``"data"`` -> ``P('data')``; ``"None,model"`` -> ``P(None, 'model')``; ``"data+model"`` splits one dim over two axes."""
    parts: list[Any] = []
    used: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if part in ("None", ""):
            parts.append(None)
            continue
        axes = [p.strip() for p in part.split("+")]
        if not all(a.isidentifier() for a in axes):
            raise ArgumentError(
                f"Cannot read the partition spec {text!r}: write one mesh axis (or None) per "
                "dimension, e.g. data or None,model; data+model splits one dimension over two axes."
            )
        repeated = [a for a in axes if a in used or axes.count(a) > 1]
        if repeated:
            raise ArgumentError(
                f"The partition spec {text!r} uses the mesh axis {repeated[0]!r} twice; an axis "
                "can split only one dimension of an array."
            )
        used.extend(axes)
        parts.append(tuple(axes) if len(axes) > 1 else axes[0])
    return PartitionSpec(*parts)


def shard_abstract(value: Any, mesh: Mesh, spec: PartitionSpec, name: str) -> Any:
    """Every array leaf of ``value`` as a ``ShapeDtypeStruct`` placed with ``NamedSharding(mesh, spec)``."""

    def place(leaf: Any) -> Any:
        if not is_array_like(leaf):
            return leaf
        if len(spec) > len(leaf.shape):
            raise ArgumentError(
                f"shard {name}={_spec_text(spec)} has {len(spec)} dimensions but {name} has an "
                f"array of rank {len(leaf.shape)}; give at most one entry per dimension."
            )
        for dim, axes in zip(leaf.shape, spec):
            axes = () if axes is None else (axes,) if isinstance(axes, str) else axes
            unknown = [a for a in axes if a not in mesh.shape]
            if unknown:
                raise ArgumentError(
                    f"shard {name}: the mesh has no axis {unknown[0]!r}; its axes are {list(mesh.shape)}."
                )
            ways = int(np.prod([mesh.shape[a] for a in axes])) if axes else 1
            if dim % ways:
                raise ArgumentError(
                    f"shard {name}={_spec_text(spec)}: a dimension of size {dim} cannot be split "
                    f"{ways} ways. Use a size divisible by {ways} or a smaller mesh axis."
                )
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=NamedSharding(mesh, spec))

    return jax.tree_util.tree_map(place, value)


def _spec_text(spec: PartitionSpec) -> str:
    def axis(a: Any) -> str:
        if a is None:
            return "None"
        return "+".join(a) if isinstance(a, tuple) else str(a)

    return ",".join(axis(a) for a in spec) if len(spec) else "replicated"


def describe_sharding(sharding: Any) -> str:
    """``P(data,None)``, ``replicated`` or the sharding's own repr for other kinds."""
    if isinstance(sharding, NamedSharding):
        spec = tuple(sharding.spec)
        while spec and spec[-1] is None:
            spec = spec[:-1]
        return f"P({_spec_text(PartitionSpec(*spec))})" if spec else "replicated"
    if getattr(sharding, "is_fully_replicated", False):
        return "replicated"
    return type(sharding).__name__


def describe_tree_shardings(shardings: Any) -> str:
    """One phrase for a pytree of shardings: the common one, or the distinct ones with counts."""
    leaves = jax.tree_util.tree_leaves(
        shardings, is_leaf=lambda x: isinstance(x, jax.sharding.Sharding)
    )
    if not leaves:
        return "-"
    counts: dict[str, int] = {}
    for leaf in leaves:
        text = describe_sharding(leaf)
        counts[text] = counts.get(text, 0) + 1
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{text} x{n}" for text, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def mesh_of(shardings: Any) -> dict[str, int] | None:
    """The axis sizes of the first named mesh among ``shardings``, or None."""
    for leaf in jax.tree_util.tree_leaves(
        shardings, is_leaf=lambda x: isinstance(x, jax.sharding.Sharding)
    ):
        if isinstance(leaf, NamedSharding):
            return dict(leaf.mesh.shape)
    return None


def place_arguments(
    function: Any,
    args: tuple,
    kwargs: dict,
    mesh: str | Mesh,
    specs: Mapping[str, str | PartitionSpec],
) -> tuple[tuple, dict]:
    """Give every traced argument of a call a sharding on ``mesh``: its spec from ``specs``
    (by parameter name), replicated when it has none. Static arguments are left alone.

    ``mesh`` and the specs may be written as text (``"data=4,model=2"``, ``"None,model"``),
    the one vocabulary of ``tpukit.compile(..., mesh=, shard=)`` and ``%%tpu_compile
    --mesh --shard``.
    """
    if isinstance(mesh, str):
        mesh = parse_mesh(mesh)
    specs = {
        name: parse_partition_spec(spec) if isinstance(spec, str) else spec
        for name, spec in specs.items()
    }
    names = positional_names(function, args, kwargs)
    unknown = sorted(set(specs) - set(names) - set(kwargs))
    if unknown:
        raise ArgumentError(
            f"shard names {unknown[0]!r}, which is not an argument of this call; "
            f"its arguments are {names + list(kwargs)}."
        )

    declared = declared_parameters(function)

    def place(name: str, value: Any) -> Any:
        if classify(name, value, declared.get(name)) != "array":
            return value
        return shard_abstract(value, mesh, specs.get(name, PartitionSpec()), name)

    return (
        tuple(place(n, v) for n, v in zip(names, args)),
        {n: place(n, v) for n, v in kwargs.items()},
    )


def onto_device(tree: Any, device: Any) -> Any:
    """Copy onto ``device`` the arrays that live elsewhere (a model ``fit`` left replicated
    over 8 devices, called by a program compiled for one): JAX refuses them ("compiled for
    input shardings that disagree"). Arrays already there, and host data, pass as they are."""

    def place(leaf: Any) -> Any:
        if isinstance(leaf, jax.Array) and leaf.sharding.device_set != {device}:
            return jax.device_put(leaf, device)
        return leaf

    return jax.tree_util.tree_map(place, tree)


def place_like(tree: Any, shardings: Any) -> Any:
    """Move the leaves whose placement differs from the compiled one (host data, other layouts)."""

    def place(leaf: Any, sharding: Any) -> Any:
        if isinstance(leaf, jax.Array) and leaf.sharding == sharding:
            return leaf
        return jax.device_put(leaf, sharding)

    return jax.tree_util.tree_map(place, tree, shardings)
