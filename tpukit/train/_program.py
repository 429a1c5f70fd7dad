"""The training program as data: when two ``fit`` calls run the same step, what checkpoints record.

Python objects are a poor identity for a training program: each ``optax.adam(1e-3)``
is a new object, and two models of the same class differ in nothing a step
computes. So programs are compared by what they compute:

- :class:`OptimizerProgram` keys an optax optimizer by the jaxpr of its ``update``
  on the model's parameter shapes, constants included (learning rate, betas,
  ``eps``, weight decay). A new ``optax.adam(1e-3)`` on each call has the same key,
  so the compiled step is reused and the optimizer state carries over;
  ``optax.adam(1e-2)`` or ``optax.adamw(1e-3)`` has another.
- :class:`ProgramFingerprint` is what a checkpoint records of the run that wrote
  it: the model's modules and their settings (activation functions included), a
  digest of what the model and loss compute on one batch, the optimizer's key and
  constants, and the loss. Resuming with a different program is refused with the
  differences in words (see :meth:`ProgramFingerprint.differences`).

Example::

    >>> import optax, jax.numpy as jnp
    >>> params = {"w": jnp.zeros(3)}
    >>> a, b = (OptimizerProgram(optax.adam(1e-3), params) for _ in range(2))
    >>> a == b, a == OptimizerProgram(optax.adam(1e-2), params)
    (True, False)
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import flax
import jax
import numpy as np
import optax
from flax import nnx

from ._exceptions import TrainingInputError
from ._memo import abstract_key, remembered
from ._objective import Objective
from ._optax_key import optax_closure_key

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _sub_jaxprs(value: Any) -> list[Any]:
    items = value if isinstance(value, (tuple, list)) else [value]
    found = []
    for item in items:
        inner = getattr(item, "jaxpr", item)  # a ClosedJaxpr holds a Jaxpr
        if hasattr(inner, "eqns"):
            found.append(inner)
    return found


def _constants(jaxpr: Any, out: list[str]) -> None:
    """The scalar float constants of a jaxpr and its sub-jaxprs, as float32 text, each
    as often as it is used (Adam's ``1 - b2`` is ``0.001`` like a learning rate of 1e-3)."""
    for eqn in jaxpr.eqns:
        for var in eqn.invars:
            value = getattr(var, "val", None) if type(var).__name__ == "Literal" else None
            if value is not None and np.ndim(value) == 0:
                number = np.asarray(value)
                if np.issubdtype(number.dtype, np.floating):
                    out.append(f"{abs(float(np.float32(number))):.6g}")
        for param in eqn.params.values():
            for sub in _sub_jaxprs(param):
                _constants(sub, out)


def traced(fn: Any, *args: Any) -> tuple[str, tuple[str, ...], int]:
    """``(digest, constants, size)`` of ``fn``'s jaxpr on ``args`` (arrays or shapes)."""
    closed = jax.make_jaxpr(fn)(*args)
    digest = hashlib.sha256(_ADDRESS.sub("", str(closed)).encode())
    for const in closed.consts:
        host = np.asarray(const)
        digest.update(f"{host.dtype}{host.shape}".encode() + host.tobytes())
    constants: list[str] = []
    _constants(closed.jaxpr, constants)
    return digest.hexdigest()[:32], tuple(sorted(constants, key=float)), len(closed.jaxpr.eqns)


def _abstract(tree: Any) -> Any:
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype), tree)


def _traced_update(optimizer: optax.GradientTransformation, params: Any) -> tuple:
    """:func:`traced` of ``optimizer.update`` on the shapes of ``params``, once per
    optimizer and shapes: a second ``fit`` with the same optimizer, or with optax's
    same optimizer made again (``optax.adam(1e-3)`` in the call), skips the trace (tens
    of milliseconds). Other optimizers are kept by object (:mod:`._optax_key`)."""
    init, update = optax_closure_key(optimizer.init), optax_closure_key(optimizer.update)
    if init is None or update is None:
        init, update = optimizer.init, optimizer.update
    key = (init, update, *abstract_key(params))  # the shapes' key, without making them
    return remembered(
        _TRACED, key, lambda: _trace_update(optimizer.init, optimizer.update, _abstract(params))
    )


_TRACED: dict[tuple, tuple] = {}


def _trace_update(init: Any, update: Any, shapes: Any) -> tuple:
    return traced(update, shapes, jax.eval_shape(init, shapes), shapes)


class OptimizerProgram:
    """An optax optimizer, compared by the program its ``update`` traces to.

    ``init`` and ``update`` are the optimizer's own. ``key`` is a digest of the
    jaxpr of ``update(grads, state, params)`` on ``params``' shapes and dtypes;
    ``constants`` are its float constants (``0.001``, ``0.9``, ...), for messages.
    """

    def __init__(self, optimizer: optax.GradientTransformation, params: Any):
        self.optimizer = optimizer
        try:
            self.key, self.constants, self.size = _traced_update(optimizer, params)
        except Exception as e:
            raise TrainingInputError(
                f"The optimizer failed on the model's parameters: optimizer.init(params) and "
                f"optimizer.update(grads, state, params) should work on them "
                f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}). Pass an "
                "optax.GradientTransformation such as optax.adam(1e-3)."
            ) from e

    def init(self, params: Any) -> Any:
        return self.optimizer.init(params)

    def update(self, grads: Any, state: Any, params: Any = None) -> Any:
        return self.optimizer.update(grads, state, params)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OptimizerProgram) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"OptimizerProgram(key={self.key[:12]}, constants={list(self.constants)})"


# --------------------------------------------------------------- fingerprints
def _name(value: Any) -> str:
    """A class's or function's qualified name, without its module: a class defined in a
    script is ``__main__.MLP`` there and ``train.MLP`` when imported, the same program."""
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    return str(name or type(value).__name__)


def _describe(value: Any) -> str | None:
    """A setting in words that are the same in every process; ``None`` for model state."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, (nnx.Variable, nnx.Module, jax.Array, np.ndarray)):
        return None
    if isinstance(value, np.dtype):
        return str(value)
    if isinstance(value, (tuple, list)):
        parts = [_describe(v) for v in value]
        if any(p is None for p in parts):
            return None  # a container of submodules or arrays: structure, seen elsewhere
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    if isinstance(value, dict):
        return (
            None
            if value and any(_describe(v) is None for v in value.values())
            else repr({str(k): _describe(v) for k, v in value.items()})
        )
    if callable(value) or isinstance(value, type):
        return _name(value)
    return type(value).__qualname__


def describe_model(model: nnx.Module) -> dict[str, dict[str, str]]:
    """``{path: {"class": ..., setting: value}}`` for every module of ``model``."""
    out: dict[str, dict[str, str]] = {}
    for path, node in nnx.iter_graph(model):
        if not isinstance(node, nnx.Module):
            continue
        settings = {"class": _name(type(node))}
        for key, value in sorted(vars(node).items()):
            if key.startswith(("_pytree__", "_object__")):
                continue
            text = _describe(value)
            if text is not None:
                settings[key] = text
        out["/".join(str(p) for p in path)] = settings
    return out


def _loss_name(objective: Objective) -> str:
    loss = "softmax cross-entropy" if objective.default_loss else _name(objective.loss)
    metrics = ", ".join(objective.metric_names) or "none"
    return f"{loss}; metrics: {metrics}"


@dataclass(frozen=True)
class ProgramFingerprint:
    """What a training program is, as a checkpoint records it.

    Attributes:
        model: :func:`describe_model` of the model.
        code: digest of what the model (train mode) and the loss compute on one batch.
        optimizer: the :class:`OptimizerProgram` key; ``optimizer_constants`` and
            ``optimizer_size`` (its number of operations) say how it differs.
        loss: the loss and metric names.
        versions: the JAX and Flax versions, which the digests depend on.
    """

    model: dict[str, dict[str, str]]
    code: str
    optimizer: str
    optimizer_constants: tuple[str, ...]
    optimizer_size: int
    loss: str
    versions: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        model: nnx.Module,
        graphdef: Any,
        params: Any,
        rest: Any,
        objective: Objective,
        program: OptimizerProgram,
        batch: Any,
    ) -> ProgramFingerprint:
        """The fingerprint of training ``model`` with ``objective`` and ``program`` on ``batch``."""

        def forward(p: Any, r: Any, b: Any) -> Any:
            merged = nnx.merge(graphdef, p, r, copy=True)
            merged.train()
            return objective(merged, b)

        code, _, _ = traced(forward, _abstract(params), _abstract(rest), batch)
        return cls(
            model=describe_model(model),
            code=code,
            optimizer=program.key,
            optimizer_constants=program.constants,
            optimizer_size=program.size,
            loss=_loss_name(objective),
            versions={"jax": jax.__version__, "flax": flax.__version__},
        )

    def to_record(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_record(cls, record: Any) -> ProgramFingerprint | None:
        """The fingerprint stored in a checkpoint record (``None`` when it has none)."""
        if not isinstance(record, dict):
            return None
        try:
            return cls(
                model={str(k): dict(v) for k, v in record["model"].items()},
                code=str(record["code"]),
                optimizer=str(record["optimizer"]),
                optimizer_constants=tuple(record["optimizer_constants"]),
                optimizer_size=int(record["optimizer_size"]),
                loss=str(record["loss"]),
                versions=dict(record.get("versions") or {}),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    def differences(self, stored: ProgramFingerprint, optimizer: bool = True) -> list[str]:
        """How this program differs from ``stored`` (the checkpoint's), in words.

        With other JAX or Flax versions the digests cannot be compared, so only the
        settings both versions have, the optimizer's constants and the loss are.
        ``optimizer=False`` leaves the optimizer out.
        """
        same_versions = stored.versions == self.versions
        found = _model_differences(stored.model, self.model, same_versions)
        if stored.loss != self.loss:
            found.append(f"loss: {stored.loss} in the checkpoint, {self.loss} in this call")
        if optimizer and (
            stored.optimizer_constants != self.optimizer_constants
            or (same_versions and stored.optimizer != self.optimizer)
        ):
            found.append(_optimizer_difference(stored, self))
        if not found and same_versions and stored.code != self.code:
            found.append(
                "what the model and loss compute differs, though their settings match "
                "(an edited __call__ or loss function?)"
            )
        return found


def _model_differences(
    stored: dict[str, dict[str, str]], current: dict[str, dict[str, str]], strict: bool
) -> list[str]:
    found = []
    for path in sorted(set(stored) | set(current), key=lambda p: (p != "", p.count("/"), p)):
        where = path or (stored.get(path) or current.get(path) or {}).get("class", "the model")
        if path not in current or path not in stored:
            if strict:
                side = "the checkpoint" if path in stored else "this call"
                cls = (stored.get(path) or current.get(path) or {}).get("class", "?")
                found.append(f"{where} ({cls}) only in {side}")
            continue
        old, new = stored[path], current[path]
        keys = sorted(set(old) | set(new), key=lambda k: (k != "class", k.startswith("_"), k))
        shown = 0
        for key in keys:
            if old.get(key) == new.get(key) or (not strict and (key not in old or key not in new)):
                continue
            if key.startswith("_") and shown:
                continue  # a private attribute that follows a public one (_act after activation)
            shown += 1
            label = where if key == "class" else f"{where}.{key}"
            found.append(
                f"{label}: {old.get(key, 'absent')} in the checkpoint, "
                f"{new.get(key, 'absent')} in this call"
            )
            if key == "class":
                break
    return found[:4] + ([f"and {len(found) - 4} more model differences"] if len(found) > 4 else [])


def _optimizer_difference(stored: ProgramFingerprint, current: ProgramFingerprint) -> str:
    old, new = Counter(stored.optimizer_constants), Counter(current.optimizer_constants)
    parts = []
    for values, side in ((old - new, "the checkpoint's"), (new - old, "this call's")):
        if values:
            parts.append(f"constant {', '.join(sorted(values, key=float))} only in {side}")
    if stored.optimizer_size != current.optimizer_size:
        parts.append(
            f"{current.optimizer_size} operations in this call's, "
            f"{stored.optimizer_size} in the checkpoint's"
        )
    return "optimizer: its update differs" + (f" ({'; '.join(parts)})" if parts else "")
