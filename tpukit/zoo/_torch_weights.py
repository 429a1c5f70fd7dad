"""Load PyTorch-style weights (torchvision VGG and ResNet names) into zoo models.

A state dict is any mapping from torchvision's tensor names to arrays: NumPy
arrays, JAX arrays, or torch tensors (converted through NumPy, so tpukit does
not import torch). Convolution kernels go from OIHW to HWIO, dense weights are
transposed, and VGG's first dense layer is permuted from PyTorch's
channel-major flatten to the NHWC one.

With torchvision installed (tpukit does not need it)::

    weights = torchvision.models.resnet50(weights="IMAGENET1K_V2").state_dict()
    model = zoo.load_torch_state_dict(zoo.create("resnet50"), weights)
    model.eval()

Images must then be preprocessed as torchvision's were, but laid out NHWC. Names
that do not fit are all listed, and nothing loads:

    >>> from tpukit import zoo
    >>> zoo.load_torch_state_dict(zoo.create("resnet18"), {"fc.bias": np.zeros(1000)})
    Traceback (most recent call last):
    ...
    tpukit._errors.StateDictError: the state dict does not fit this ResNet:
      missing (101): bn1.weight, bn1.bias, bn1.running_mean, bn1.running_var, ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np
from flax import nnx

from tpukit._compat import iter_modules
from tpukit._errors import StateDictError, WrongTypeError
from tpukit.zoo._resnet import ResNet
from tpukit.zoo._vgg import VGG

_Slot = tuple[nnx.Variable, tuple[int, ...], Callable[[np.ndarray], np.ndarray]]


def _conv_slots(prefix: str, conv: nnx.Conv) -> Iterator[tuple[str, _Slot]]:
    kh, kw, cin, cout = conv.kernel.shape
    yield f"{prefix}.weight", (conv.kernel, (cout, cin, kh, kw), lambda w: w.transpose(2, 3, 1, 0))
    if conv.bias is not None:
        yield f"{prefix}.bias", (conv.bias, (cout,), lambda b: b)


def _linear_slots(
    prefix: str, linear: nnx.Linear, chw: tuple[int, int, int] | None = None
) -> Iterator[tuple[str, _Slot]]:
    fan_in, fan_out = linear.kernel.shape

    def to_kernel(weight: np.ndarray) -> np.ndarray:
        if chw is None or chw[1:] == (1, 1):
            return weight.T
        # PyTorch flattened C,H,W; NHWC flattens H,W,C.
        return weight.reshape(fan_out, *chw).transpose(2, 3, 1, 0).reshape(fan_in, fan_out)

    yield f"{prefix}.weight", (linear.kernel, (fan_out, fan_in), to_kernel)
    if linear.bias is not None:
        yield f"{prefix}.bias", (linear.bias, (fan_out,), lambda b: b)


def _norm_slots(prefix: str, norm: nnx.BatchNorm) -> Iterator[tuple[str, _Slot]]:
    n = norm.num_features
    for torch_name, variable in (
        ("weight", norm.scale),
        ("bias", norm.bias),
        ("running_mean", norm.mean),
        ("running_var", norm.var),
    ):
        yield f"{prefix}.{torch_name}", (variable, (n,), lambda v: v)


def _module_slots(prefix: str, module: nnx.Module) -> Iterator[tuple[str, _Slot]]:
    if isinstance(module, nnx.Conv):
        yield from _conv_slots(prefix, module)
    elif isinstance(module, nnx.Linear):
        yield from _linear_slots(prefix, module)
    elif isinstance(module, nnx.BatchNorm):
        yield from _norm_slots(prefix, module)


def _vgg_slots(model: VGG) -> Iterator[tuple[str, _Slot]]:
    index, layer = 0, 0
    for item in model.config:
        if item == "M":
            index += 1
            continue
        yield from _conv_slots(f"features.{index}", model.convs[layer])
        if model.batch_norm:
            yield from _norm_slots(f"features.{index + 1}", model.norms[layer])
        index += 3 if model.batch_norm else 2
        layer += 1
    channels = model.convs[-1].out_features
    chw = (channels, model.feature_size, model.feature_size)
    yield from _linear_slots("classifier.0", model.fc1, chw)
    yield from _linear_slots("classifier.3", model.fc2)
    yield from _linear_slots("classifier.6", model.fc3)


def _resnet_slots(model: ResNet) -> Iterator[tuple[str, _Slot]]:
    for path, module in iter_modules(model):
        yield from _module_slots(".".join(map(str, path)), module)


def _as_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor; NumPy has no bfloat16, so widen it
        value = value.detach().cpu()
        if str(value.dtype) in ("torch.bfloat16", "torch.float16"):
            value = value.float()
        return value.numpy()
    return np.asarray(value)


def _listing(title: str, items: list[str], limit: int = 8) -> str:
    shown = ", ".join(items[:limit])
    more = f" ... and {len(items) - limit} more" if len(items) > limit else ""
    return f"  {title} ({len(items)}): {shown}{more}"


def load_torch_state_dict(model: nnx.Module, state_dict: Mapping[str, Any]) -> nnx.Module:
    """Copy a torchvision-named state dict into a zoo VGG or ResNet, in place.

    Every tensor the model needs must be present with the right shape, and no
    other tensor may be (``num_batches_tracked`` counters are ignored);
    otherwise nothing is copied and a ``StateDictError`` lists the missing,
    extra and mis-shaped names. Values are cast to each parameter's dtype.

    Args:
      model: a model from ``zoo.create("vgg*")`` or ``zoo.create("resnet*")``,
        built with the checkpoint's options (``batch_norm``, ``num_classes``...).
      state_dict: names to arrays or torch tensors, e.g. ``torch_model.state_dict()``.

    Returns:
      The same model, for chaining.

    Example, for torchvision's ``vgg16_bn`` weights ``sd``::

      model = load_torch_state_dict(zoo.create("vgg16", batch_norm=True), sd)
    """
    if isinstance(model, VGG):
        slots = dict(_vgg_slots(model))
    elif isinstance(model, ResNet):
        slots = dict(_resnet_slots(model))
    else:
        raise WrongTypeError(
            "load_torch_state_dict knows torchvision's names for the zoo's VGG and ResNet "
            f"models; got {type(model).__name__}. Create one with zoo.create('vgg16'), "
            "zoo.create('resnet50') and so on."
        )
    given = {k: v for k, v in state_dict.items() if not k.endswith("num_batches_tracked")}
    arrays = {name: _as_numpy(given[name]) for name in slots if name in given}
    missing = [name for name in slots if name not in given]
    extra = [name for name in given if name not in slots]
    wrong = [
        f"{name} expected {slots[name][1]}, got {tuple(a.shape)}"
        for name, a in arrays.items()
        if tuple(a.shape) != slots[name][1]
    ]
    if missing or extra or wrong:
        lines = [f"the state dict does not fit this {type(model).__name__}:"]
        if missing:
            lines.append(_listing("missing", missing))
        if extra:
            lines.append(_listing("unexpected", extra))
        if wrong:
            lines.append(_listing("wrong shape", wrong, limit=4))
        if extra and all(name.startswith("module.") for name in extra):
            lines.append(
                "Every name starts with 'module.' (saved from DataParallel): strip it with "
                "{k.removeprefix('module.'): v for k, v in state_dict.items()}."
            )
        else:
            lines.append(
                "Create the model with the checkpoint's options (batch_norm=True for *_bn "
                "weights, num_classes, small_input) or fix the names; nothing was loaded."
            )
        raise StateDictError("\n".join(lines))
    for name, (variable, _, to_flax) in slots.items():
        variable[...] = jnp.asarray(to_flax(arrays[name]), dtype=variable[...].dtype)
    return model
