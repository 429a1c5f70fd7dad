"""Where arrays live during training: the one module that decides shardings.

Every placement decision of :func:`tpukit.fit` and :func:`tpukit.evaluate` is
made here, by a *plan*. A plan is a :class:`~jax.sharding.Mesh` over the devices
of every process (``jax.devices()``), the mesh axes the batch is split along, and
a :class:`~jax.sharding.PartitionSpec` for each array of the model and optimizer
state. The compiled step only states the shardings it wants; GSPMD (XLA's
partitioner) inserts the collectives.

Three plans, chosen with ``fit(..., sharding=...)``:

- ``"data"`` / :class:`DataParallel`: a 1-D mesh ``("data",)`` over all devices;
  batches split along it, parameters and optimizer state replicated.
- ``"fsdp"`` / :class:`FSDP`: the same mesh and batch split, and every parameter
  and optimizer array of at least ``min_size`` elements (default 1024, i.e. 4 KiB
  of float32) sharded along ``"data"`` on its largest dimension divisible by the
  device count; smaller or indivisible arrays are replicated.
- ``mesh=`` and ``shard=`` (:class:`MeshRules`): your own mesh and a partition
  spec per array, in the vocabulary of ``tpukit.compile(f, x, mesh=, shard=)``
  and ``%%tpu_compile --mesh --shard``: ``mesh="data=4,model=2"`` (or a
  :class:`~jax.sharding.Mesh`) and ``shard={r"l1/kernel": "None,model"}`` (or
  ``PartitionSpec`` objects), where ``compile`` names arguments and ``fit`` names model
  arrays by a regex on their paths. Both are read by ``tpukit.compilation._placement``.

Example::

    >>> from jax.sharding import PartitionSpec as P
    >>> plan = resolve_plan("fsdp")                  # on 8 devices
    >>> plan.spec_for("l1/kernel", (784, 128)) == P("data")     # 784 = 98 * 8
    True
    >>> plan.spec_for("l1/bias", (128,)) == P()      # too small: replicated
    True
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from tpukit._pytree import is_key, leaf_paths
from tpukit.compilation import parse_mesh, parse_partition_spec

from ._exceptions import TrainingInputError, TrainingTypeError
from ._layout import ShardingSummary, place
from ._memo import abstract_key, remembered

#: Each plan's state shardings and sharding summary, by the state's structure, shapes
#: and dtypes (and the batch size).
_STATE_SHARDINGS: dict[tuple, tuple] = {}
_SUMMARIES: dict[tuple, ShardingSummary] = {}


class Plan:
    """What every plan shares: the mesh, the batch axes, and placing pytrees on them.

    Subclasses say how a model array is split (:meth:`spec_for`). Optimizer
    arrays that mirror a parameter (Adam's ``mu`` and ``nu``, momentum) take that
    parameter's sharding; other optimizer arrays use :meth:`optimizer_spec_for`.
    """

    kind = "plan"
    mesh: Mesh
    batch_axes: tuple[str, ...]

    @property
    def n_devices(self) -> int:
        """How many devices the mesh holds (over every process)."""
        return self.mesh.size

    @property
    def batch_shards(self) -> int:
        """Into how many pieces each batch is split (the product of the batch axes)."""
        return math.prod(self.mesh.shape[a] for a in self.batch_axes)

    def describe_batch_split(self) -> str:
        """Words for error messages: what the batch is split over."""
        if self.batch_shards == self.n_devices:
            return f"the {self.n_devices} devices"
        return f"the {self.batch_shards} shards of mesh axes {self.batch_axes}"

    # ------------------------------------------------------------ shardings
    def replicated(self) -> NamedSharding:
        """A full copy on every device (scalars, small arrays)."""
        return NamedSharding(self.mesh, PartitionSpec())

    def batch_sharding(self, leading_axes: int = 0) -> NamedSharding:
        """Split the batch axis, which comes after ``leading_axes`` unsplit axes."""
        axes = self.batch_axes[0] if len(self.batch_axes) == 1 else self.batch_axes
        return NamedSharding(self.mesh, PartitionSpec(*([None] * leading_axes), axes))

    def spec_for(self, path: str, shape: tuple[int, ...]) -> PartitionSpec:
        """The split of one model array, named by its '/'-joined path."""
        return PartitionSpec()

    def optimizer_spec_for(self, path: str, shape: tuple[int, ...]) -> PartitionSpec:
        """The split of an optimizer array that mirrors no parameter (e.g. Adam's count)."""
        return PartitionSpec()

    def check_paths(self, paths: list[str]) -> None:
        """Raise when the plan refers to arrays the model does not have (see MeshRules)."""

    def _specs(self, tree: Any) -> list[PartitionSpec]:
        return [
            PartitionSpec() if is_key(x) else self.spec_for(p, tuple(np.shape(x)))
            for p, x in leaf_paths(tree)
        ]

    def state_shardings(self, params: Any, rest: Any, opt_state: Any = None) -> tuple:
        """Shardings for ``(params, rest, opt_state)``, each a pytree like its input;
        worked out once per plan and state structure (a later ``fit`` reuses them)."""
        key = (self, abstract_key((params, rest, opt_state)))
        return remembered(
            _STATE_SHARDINGS, key, lambda: self._state_shardings(params, rest, opt_state)
        )

    def _state_shardings(self, params: Any, rest: Any, opt_state: Any) -> tuple:
        p_items, r_items = leaf_paths(params), leaf_paths(rest)
        self.check_paths([p for p, _ in p_items + r_items])
        p_specs, r_specs = self._specs(params), self._specs(rest)
        by_path = {p: (tuple(np.shape(x)), s) for (p, x), s in zip(p_items, p_specs, strict=True)}
        o_specs = []
        for path, x in leaf_paths(opt_state):
            shape = tuple(np.shape(x))
            o_specs.append(
                _mirrored(path, shape, by_path)
                or (PartitionSpec() if is_key(x) else self.optimizer_spec_for(path, shape))
            )

        def as_tree(tree: Any, specs: list[PartitionSpec]) -> Any:
            treedef = jax.tree.structure(tree)
            return jax.tree.unflatten(treedef, [NamedSharding(self.mesh, s) for s in specs])

        return as_tree(params, p_specs), as_tree(rest, r_specs), as_tree(opt_state, o_specs)

    # ------------------------------------------------------------ placing
    def put_state(self, params: Any, rest: Any, opt_state: Any = None) -> tuple:
        """Place ``(params, rest, opt_state)`` on the mesh; returns the placed triple."""
        shardings = self.state_shardings(params, rest, opt_state)
        trees = (params, rest, opt_state)
        return tuple(_placed(t, s) for t, s in zip(trees, shardings, strict=True))

    def constrain_state(self, state: tuple) -> tuple:
        """Inside a compiled function: ask for ``(params, rest, opt_state)`` as planned."""
        return jax.lax.with_sharding_constraint(state, self.state_shardings(*state))

    def put_replicated(self, tree: Any) -> Any:
        """Place a pytree with a full copy on every device.

        Host (NumPy) arrays for this process's devices go through a jitted copy
        (:func:`_replicating_copy`): the call's own C++ path sends them, about 25 µs
        for an epoch's shuffled indices where ``jax.device_put`` spends some 200 µs of
        host time in Python; ``fit`` sends such indices every epoch.
        """
        sharding = self.replicated()
        if sharding.is_fully_addressable:
            copy = _replicating_copy(sharding)
            return jax.tree.map(
                lambda a: copy(a) if isinstance(a, np.ndarray) else place(a, sharding), tree
            )
        return jax.tree.map(lambda a: place(a, sharding), tree)

    def constrain_batch(self, arrays: Any, leading_axes: int = 0) -> Any:
        """Inside a compiled function: ask for the batch axis to be split."""
        sharding = self.batch_sharding(leading_axes)
        return jax.tree.map(lambda a: jax.lax.with_sharding_constraint(a, sharding), arrays)

    def summary(self, params: Any, opt_state: Any, batch_size: int) -> ShardingSummary:
        """What this plan does to a model and batch: mesh, per-device batch and bytes."""

        def build() -> ShardingSummary:
            p_sh, _, o_sh = self.state_shardings(params, {}, opt_state)
            return ShardingSummary.build(self, params, p_sh, opt_state, o_sh, batch_size)

        key = (self, abstract_key((params, opt_state)), batch_size)
        return remembered(_SUMMARIES, key, build)

    # ------------------------------------------------------------ identity
    def _key(self) -> tuple:
        return (self.kind, self.mesh, self.batch_axes)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(self._key())


def _placed(tree: Any, shardings: Any) -> Any:
    """``tree`` with each leaf on its sharding (:func:`place`); the tree itself when every
    leaf already is (a later ``fit``'s state: an NNX state rebuilt costs more than this)."""
    leaves = jax.tree.leaves(tree)
    wanted = jax.tree.leaves(shardings)
    if len(leaves) == len(wanted) and all(
        isinstance(x, jax.Array) and x.committed and x.sharding == s for x, s in zip(leaves, wanted)
    ):
        return tree
    return jax.tree.map(place, tree, shardings)


@functools.lru_cache(maxsize=16)
def _replicating_copy(sharding: NamedSharding) -> Any:
    """A jitted identity whose result is on ``sharding`` (compiled once per shape)."""

    def put_indices(x: Any) -> Any:
        return x

    return jax.jit(put_indices, out_shardings=sharding)


def _mirrored(path: str, shape: tuple, by_path: dict) -> PartitionSpec | None:
    """The spec of the parameter an optimizer array copies (its path ends with it)."""
    parts = path.split("/")
    for k in range(len(parts)):
        found = by_path.get("/".join(parts[k:]))
        if found is not None and found[0] == shape:
            return found[1]
    return None


def _devices(devices: Sequence[jax.Device] | None) -> np.ndarray:
    found = list(jax.devices() if devices is None else devices)
    if not found:
        raise TrainingInputError("devices is empty; pass at least one device, or None for all.")
    return np.array(found)


class DataParallel(Plan):
    """Split the batch over ``devices`` (default: every device of every process); replicate the rest.

    Args:
        devices: the devices to use; ``None`` means ``jax.devices()``.
        axis: the name of the mesh axis the batch is split along.

    Example::

        >>> DataParallel(devices=jax.devices()[:1])   # a one-device reference run
        DataParallel(devices=1, axis='data')
    """

    kind = "data"

    def __init__(self, devices: Sequence[jax.Device] | None = None, axis: str = "data"):
        self.axis = axis
        self.batch_axes = (axis,)
        self.mesh = Mesh(_devices(devices), (axis,))

    def __repr__(self) -> str:
        return f"DataParallel(devices={self.n_devices}, axis={self.axis!r})"


class FSDP(Plan):
    """Fully sharded data parallel: split the batch *and* the parameters over the devices.

    Each parameter and optimizer array with at least ``min_size`` elements is split
    along ``axis`` on its largest dimension divisible by the device count (the
    first such dimension on ties); smaller arrays, and arrays with no divisible
    dimension, are replicated. Each device then holds about ``1/n`` of the model
    and optimizer state; GSPMD all-gathers the parameters for the forward and
    backward pass and reduce-scatters the gradients.

    Args:
        devices: the devices to use; ``None`` means ``jax.devices()``.
        axis: the mesh axis name (batch and parameters are split along it).
        min_size: arrays with fewer elements are replicated; default 1024
            (4 KiB of float32), which keeps biases and norms whole.

    Example::

        >>> FSDP(min_size=0).spec_for("head/kernel", (10, 64)) == P(None, "data")  # 8 devices
        True
    """

    kind = "fsdp"

    def __init__(
        self,
        devices: Sequence[jax.Device] | None = None,
        axis: str = "data",
        min_size: int = 1024,
    ):
        self.axis = axis
        self.batch_axes = (axis,)
        self.min_size = int(min_size)
        self.mesh = Mesh(_devices(devices), (axis,))

    def spec_for(self, path: str, shape: tuple[int, ...]) -> PartitionSpec:
        n = self.n_devices
        if n == 1 or math.prod(shape) < self.min_size:
            return PartitionSpec()
        for dim in sorted(range(len(shape)), key=lambda d: (-shape[d], d)):
            if shape[dim] % n == 0:
                return PartitionSpec(*([None] * dim), self.axis)
        return PartitionSpec()

    optimizer_spec_for = spec_for

    def _key(self) -> tuple:
        return (*super()._key(), self.min_size)

    def __repr__(self) -> str:
        return f"FSDP(devices={self.n_devices}, axis={self.axis!r}, min_size={self.min_size})"


class MeshRules(Plan):
    """Your own mesh, and a PartitionSpec for each model array chosen by a regex.

    ``fit(..., mesh=, shard=)`` builds one: ``mesh`` and the specs may be written
    as in ``tpukit.compile`` (``"data=4,model=2"``, ``"None,model"``), and the rules
    as a dict ``{pattern: spec}``.

    Each rule is ``(pattern, spec)``: ``pattern`` is searched (:func:`re.search`) in
    the '/'-joined path of each parameter and model-state array, e.g.
    ``layers/0/kernel`` or ``l1/bias``; the first rule that matches gives the
    array's ``PartitionSpec``; arrays no rule matches are replicated. Optimizer
    arrays that mirror a parameter (Adam's moments) follow that parameter.
    Batches are split along ``batch_axes`` (default: the mesh's ``"data"`` axis, or
    its first axis when it has none). The mesh's axes are used in Auto
    mode (GSPMD chooses the collectives). A rule that matches no array, a mesh
    axis that does not exist, or a split that does not divide an array's
    dimension is an error that says which.

    Args:
        mesh: a :class:`jax.sharding.Mesh`, e.g. ``jax.make_mesh((4, 2), ("data", "model"))``,
            or its text, ``"data=4,model=2"`` (``-1`` for the devices the others leave).
        rules: ``[(regex, PartitionSpec), ...]`` or ``{regex: spec}``; a spec may be
            text, ``"None,model"`` (one mesh axis or ``None`` per dimension).
        batch_axes: the mesh axes the batch is split along.

    Example::

        >>> mesh = jax.make_mesh((4, 2), ("data", "model"))
        >>> plan = MeshRules(mesh, [(r"l1/kernel", P(None, "model"))])
        >>> plan.spec_for("l1/kernel", (784, 128)) == P(None, "model")
        True
        >>> MeshRules("data=4,model=2", {r"l1/kernel": "None,model"}).rules == plan.rules
        True
    """

    kind = "rules"

    def __init__(
        self,
        mesh: Mesh | str,
        rules: Sequence[tuple[str, PartitionSpec | str]] | Mapping[str, PartitionSpec | str] = (),
        batch_axes: Sequence[str] | str | None = None,
    ):
        if isinstance(mesh, str):
            mesh = parse_mesh(mesh)
        if not isinstance(mesh, Mesh):
            raise TrainingTypeError(
                f"MeshRules needs a jax.sharding.Mesh or its text; got {type(mesh).__name__}. "
                "Write mesh='data=4,model=2' or jax.make_mesh((4, 2), ('data', 'model'))."
            )
        # GSPMD places the collectives: the plan states shardings with constraints,
        # which needs Auto axes (jax.make_mesh gives Explicit ones by default).
        self.mesh = Mesh(
            mesh.devices, mesh.axis_names, axis_types=(AxisType.Auto,) * len(mesh.axis_names)
        )
        names = tuple(mesh.axis_names)
        if batch_axes is None:
            batch_axes = ("data",) if "data" in names else names[:1]
        if isinstance(batch_axes, str):
            batch_axes = (batch_axes,)
        self.batch_axes = tuple(batch_axes)
        unknown = [a for a in self.batch_axes if a not in names]
        if unknown or not self.batch_axes:
            raise TrainingInputError(
                f"batch_axes={self.batch_axes} names no axis or axes the mesh lacks "
                f"({unknown}); the mesh has axes {names}. Pass e.g. batch_axes=({names[0]!r},)."
            )
        self.rules: tuple[tuple[str, PartitionSpec], ...] = ()
        compiled = []
        if isinstance(rules, Mapping):
            rules = list(rules.items())
        for item in rules:
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise TrainingTypeError(
                    f"Each rule is a (regex, PartitionSpec) pair; got {item!r}. Write e.g. "
                    "(r'layers/0/kernel', P(None, 'model'))."
                )
            pattern, spec = item
            if isinstance(spec, str):
                spec = parse_partition_spec(spec)
            if not isinstance(spec, PartitionSpec):
                raise TrainingTypeError(
                    f"The rule for {pattern!r} gives {spec!r}; expected a "
                    "jax.sharding.PartitionSpec such as P(None, 'model')."
                )
            for axis in _spec_axes(spec):
                if axis not in names:
                    raise TrainingInputError(
                        f"The rule {pattern!r} -> {spec} uses mesh axis {axis!r}, but the mesh "
                        f"has axes {names}. Use one of those names."
                    )
            try:
                compiled.append((re.compile(pattern), spec))
            except re.error as e:
                raise TrainingInputError(
                    f"The rule pattern {pattern!r} is not a valid regex: {e}."
                ) from None
            self.rules += ((pattern, spec),)
        self._compiled = compiled

    def _rule_for(self, path: str) -> tuple[str, PartitionSpec] | None:
        for (regex, spec), (pattern, _) in zip(self._compiled, self.rules, strict=True):
            if regex.search(path):
                return pattern, spec
        return None

    def spec_for(self, path: str, shape: tuple[int, ...]) -> PartitionSpec:
        found = self._rule_for(path)
        if found is None:
            return PartitionSpec()
        pattern, spec = found
        if len(spec) > len(shape):
            raise TrainingInputError(
                f"The rule {pattern!r} -> {spec} splits {len(spec)} dimensions, but {path} has "
                f"shape {shape}. Give at most {len(shape)} entries, or narrow the pattern."
            )
        for dim, entry in enumerate(spec):
            size = math.prod(self.mesh.shape[a] for a in _spec_axes(PartitionSpec(entry)))
            if shape[dim] % size:
                raise TrainingInputError(
                    f"The rule {pattern!r} -> {spec} splits dimension {dim} of {path} (shape "
                    f"{shape}) into {size} pieces, which does not divide {shape[dim]}. Pick a "
                    "mesh axis whose size divides it, or leave that dimension None."
                )
        return spec

    def check_paths(self, paths: list[str]) -> None:
        for (regex, _), (pattern, spec) in zip(self._compiled, self.rules, strict=True):
            if not any(regex.search(p) for p in paths):
                shown = ", ".join(paths[:8]) + (
                    f", ... ({len(paths)} in all)" if len(paths) > 8 else ""
                )
                raise TrainingInputError(
                    f"The MeshRules rule {pattern!r} -> {spec} matches no array of the model. "
                    f"The model's paths are: {shown}. Fix the pattern (a regex searched in "
                    "these '/'-joined paths) or remove the rule."
                )

    def _key(self) -> tuple:
        return (*super()._key(), self.rules)

    def __repr__(self) -> str:
        shape = dict(self.mesh.shape)
        return f"MeshRules(mesh={shape}, rules={len(self.rules)}, batch_axes={self.batch_axes})"


def _spec_axes(spec: PartitionSpec) -> list[str]:
    axes = []
    for entry in spec:
        if entry is None:
            continue
        axes += list(entry) if isinstance(entry, (tuple, list)) else [entry]
    return axes


STRATEGIES = {"data": DataParallel, "fsdp": FSDP}


def resolve_plan(
    sharding: str | Plan | None = None,
    *,
    mesh: Mesh | str | None = None,
    shard: Mapping[str, PartitionSpec | str] | None = None,
) -> Plan:
    """Turn ``fit``'s ``sharding=`` or ``mesh=``/``shard=`` arguments into a placement plan.

    ``mesh``/``shard`` are the spelling of ``tpukit.compile``: ``mesh="data=4,model=2"``
    and ``shard={regex: "None,model"}`` give :class:`MeshRules`; ``sharding`` names a
    strategy (``"data"``, the default, or ``"fsdp"``) or is a plan object.

    Example::

        >>> resolve_plan("data").kind
        'data'
        >>> resolve_plan(mesh="data=8").batch_axes
        ('data',)
    """
    if shard is not None and mesh is None:
        raise TrainingInputError(
            'shard= needs mesh=, e.g. fit(..., mesh="data=4,model=2", '
            'shard={r"l1/kernel": "None,model"}).'
        )
    if mesh is not None:
        if sharding is not None:
            raise TrainingInputError(
                f"Give either sharding= or mesh=/shard=, not both; got sharding={sharding!r} "
                f"and mesh={mesh!r}. mesh= and shard= are the spelling of tpukit.compile; "
                "sharding='data' or 'fsdp' names a ready-made plan."
            )
        return MeshRules(mesh, shard or {})
    if sharding is None:
        sharding = "data"
    if isinstance(sharding, Plan):
        return sharding
    if isinstance(sharding, str) and sharding in STRATEGIES:
        return STRATEGIES[sharding]()
    hint = ""
    if isinstance(sharding, Mesh):
        hint = (
            " For your own mesh, pass it as mesh= with partition specs as shard=: "
            "fit(..., mesh=mesh, shard={r'kernel': 'None,model'}), or "
            "sharding=tpukit.train.MeshRules(mesh, rules=[(r'kernel', P(None, 'model'))])."
        )
    raise TrainingInputError(
        f"sharding={sharding!r} is not a strategy tpukit knows. Expected 'data' (batch split "
        "over all devices, parameters replicated), 'fsdp' (batch and parameters split), or a "
        "DataParallel, FSDP or MeshRules object; for your own mesh, mesh='data=4,model=2' "
        f"and shard={{regex: 'None,model'}}.{hint}"
    )
