"""The zoo's catalogue: ``create`` builds a model by name, ``list_models`` shows them all.

>>> from tpukit import zoo
>>> model = zoo.create("resnet18", dtype="bfloat16", seed=1)
>>> model.input_shape, zoo.count_params(model)
((224, 224, 3), 11689512)
>>> print(zoo.list_models())                     # a table in a notebook
name              parameters  FLOPs/example  input shape  reference
mlp                  109,386        218.4 k          784  MNIST MLP ...
...
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import jax
from flax import nnx

from tpukit._counts import as_count
from tpukit._errors import ArgumentError, UnknownNameError, WrongTypeError
from tpukit.display import Column, Table
from tpukit.zoo._base import ZooModel, as_dtype
from tpukit.zoo._convnets import AllConvCIFAR10, LeNet5
from tpukit.zoo._mlp import MLP
from tpukit.zoo._resnet import DEPTHS, ResNet
from tpukit.zoo._transformer import GPT
from tpukit.zoo._vgg import CONFIGS, VGG


@dataclass(frozen=True)
class _Entry:
    cls: type
    fixed: dict[str, Any] = field(default_factory=dict)

    def options(self) -> list[str]:
        skip = {"self", "rngs", "dtype", "param_dtype", *self.fixed}
        names = [p for p in inspect.signature(self.cls.__init__).parameters if p not in skip]
        return [*names, "seed", "dtype", "param_dtype"]


_REGISTRY: dict[str, _Entry] = {
    "mlp": _Entry(MLP),
    "lenet5": _Entry(LeNet5),
    "allconv_cifar10": _Entry(AllConvCIFAR10),
    **{name: _Entry(VGG, {"config": cfg}) for name, cfg in CONFIGS.items()},
    **{
        name: _Entry(ResNet, {"block": block, "depths": depths})
        for name, (block, depths) in DEPTHS.items()
    },
    "gpt_small": _Entry(GPT),
}


def names() -> list[str]:
    """The names ``create`` accepts, in catalogue order."""
    return list(_REGISTRY)


def create(
    name: str,
    *,
    seed: int = 0,
    dtype: Any = "float32",
    param_dtype: Any = "float32",
    **config: Any,
) -> ZooModel:
    """Build a zoo model by name, initialised deterministically from ``seed``.

    Args:
      name: one of ``zoo.names()``, e.g. ``"vgg19"``, ``"resnet50"``, ``"gpt_small"``.
      seed: the same seed gives the same initial weights (and dropout stream).
      dtype: compute dtype, ``"float32"`` or ``"bfloat16"``.
      param_dtype: parameter dtype, normally ``"float32"``.
      **config: the model's own options (see its class docstring), e.g.
        ``batch_norm=True`` for VGG or ``depth=6`` for ``gpt_small``.

    Returns:
      A Flax NNX module in train mode; call ``model.eval()`` for inference.

    Example:
      >>> import jax.numpy as jnp
      >>> model = create("vgg16", batch_norm=True, small_input=True, num_classes=10)
      >>> model(jnp.ones((8, *model.input_shape))).shape
      (8, 10)
    """
    if name not in _REGISTRY:
        raise ArgumentError(
            f"zoo has no model named {name!r}. Valid names: {', '.join(_REGISTRY)}."
        )
    entry = _REGISTRY[name]
    options = entry.options()
    unknown = sorted(set(config) - set(options))
    if unknown:
        raise WrongTypeError(
            f"zoo.create({name!r}) got unknown option(s) {', '.join(unknown)}. "
            f"Valid options: {', '.join(options)}."
        )
    kwargs = {
        **entry.fixed,
        **config,
        "dtype": as_dtype(dtype, "dtype"),
        "param_dtype": as_dtype(param_dtype, "param_dtype"),
    }
    try:
        return entry.cls(**kwargs, rngs=nnx.Rngs(as_count(seed, "seed", minimum=0)))
    except ValueError as error:
        raise ArgumentError(f"zoo.create({name!r}): {error}") from None


def count_params(model: nnx.Module) -> int:
    """Number of trainable parameters (``nnx.Param``), batch-norm statistics excluded.

    >>> count_params(create("mlp"))
    109386
    """
    leaves = jax.tree.leaves(nnx.state(model, nnx.Param))
    return sum(math.prod(leaf.shape) for leaf in leaves)


@dataclass(frozen=True)
class ModelInfo:
    """One row of ``zoo.list_models()``: a model's default configuration, summarised."""

    name: str
    parameters: int
    flops_per_example: int
    input_shape: tuple[int, ...]
    reference: str


class ModelTable:
    """The catalogue as a table: HTML in a notebook, aligned text in a terminal.

    Iterate it for ``ModelInfo`` rows, or index it by name:
    ``zoo.list_models()["vgg19"].parameters``.
    """

    def __init__(self, rows: list[ModelInfo]):
        self.rows = rows

    def __iter__(self) -> Iterator[ModelInfo]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, name: str) -> ModelInfo:
        for row in self.rows:
            if row.name == name:
                return row
        raise UnknownNameError(f"no model named {name!r}; valid names: {', '.join(names())}")

    def _table(self) -> Table:
        return Table(
            [
                Column("name"),
                Column("parameters", "right", "{:,}".format),
                Column("FLOPs/example", "right", _gflops),
                Column("input shape", "right", lambda shape: "x".join(map(str, shape))),
                Column("reference"),
            ],
            [
                (r.name, r.parameters, r.flops_per_example, r.input_shape, r.reference)
                for r in self.rows
            ],
        )

    def __repr__(self) -> str:
        return self._table().text()

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return self._table().html()


def _gflops(flops: int) -> str:
    if flops >= 10**9:
        return f"{flops / 1e9:.2f} G"
    if flops >= 10**6:
        return f"{flops / 1e6:.2f} M"
    return f"{flops / 1e3:.1f} k"


@functools.cache
def _info(name: str) -> ModelInfo:
    model = nnx.eval_shape(lambda: create(name))
    return ModelInfo(
        name, count_params(model), model.flops_per_example, model.input_shape, model.reference
    )


def list_models() -> ModelTable:
    """Every zoo model in its default configuration: parameters, FLOPs, input shape, source.

    Shapes come from ``nnx.eval_shape``, so no weights are allocated.

        >>> table = list_models()
        >>> table["resnet50"].parameters
        25557032
    """
    return ModelTable([_info(name) for name in _REGISTRY])
