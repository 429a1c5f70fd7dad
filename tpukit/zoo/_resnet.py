"""ResNet-18/34/50/101 (He et al. 2015) as torchvision builds them, NHWC.

Basic blocks for 18 and 34 layers, bottleneck blocks (stride on the 3x3
convolution, "ResNet v1.5") for 50 and 101, batch norm after every
convolution. Attribute names follow torchvision's (``layer3[1].conv2``,
``downsample[0]``), so a torchvision state dict maps name for name.

    >>> import jax.numpy as jnp
    >>> from tpukit import zoo
    >>> model = zoo.create("resnet50", dtype="bfloat16")
    >>> model.eval()                      # running statistics, for inference
    >>> model(jnp.ones((1, 224, 224, 3))).shape
    (1, 1000)
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from tpukit._compat import module_list
from tpukit._errors import ArgumentError
from tpukit.zoo import _flops, _init
from tpukit.zoo._base import ZooModel

DEPTHS: dict[str, tuple[str, tuple[int, int, int, int]]] = {
    "resnet18": ("basic", (2, 2, 2, 2)),
    "resnet34": ("basic", (3, 4, 6, 3)),
    "resnet50": ("bottleneck", (3, 4, 6, 3)),
    "resnet101": ("bottleneck", (3, 4, 23, 3)),
}

_conv_init = _init.variance_scaling(2.0, "fan_out", "normal")


class _Layers:
    """Builds convolutions and batch norms with shared settings, adding up FLOPs."""

    def __init__(self, dtype, param_dtype, rngs: nnx.Rngs):
        self.kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.flops = 0

    def conv(self, cin: int, cout: int, k: int, stride: int, size: int) -> tuple[nnx.Conv, int]:
        pad = (k - 1) // 2
        flops, out, _ = _flops.conv2d(size, size, cin, cout, kernel=k, stride=stride, padding=pad)
        self.flops += flops
        layer = nnx.Conv(
            cin,
            cout,
            (k, k),
            strides=(stride, stride),
            padding=((pad, pad), (pad, pad)),
            use_bias=False,
            kernel_init=_conv_init,
            **self.kw,
        )
        return layer, out

    def norm(self, channels: int) -> nnx.BatchNorm:
        return nnx.BatchNorm(channels, momentum=0.9, epsilon=1e-5, **_init.NORM, **self.kw)


class BasicBlock(nnx.Module):
    """Two 3x3 convolutions with a shortcut (ResNet-18 and -34)."""

    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int, size: int, layers: _Layers):
        self.conv1, out = layers.conv(cin, planes, 3, stride, size)
        self.bn1 = layers.norm(planes)
        self.conv2, _ = layers.conv(planes, planes, 3, 1, out)
        self.bn2 = layers.norm(planes)
        self.downsample = _downsample(cin, planes, stride, size, layers)
        self.out_size = out

    def __call__(self, x: jax.Array) -> jax.Array:
        y = jax.nn.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return jax.nn.relu(y + _shortcut(self.downsample, x))


class Bottleneck(nnx.Module):
    """1x1 reduce, 3x3 (strided), 1x1 expand by 4, with a shortcut (ResNet-50, -101)."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int, size: int, layers: _Layers):
        self.conv1, _ = layers.conv(cin, planes, 1, 1, size)
        self.bn1 = layers.norm(planes)
        self.conv2, out = layers.conv(planes, planes, 3, stride, size)
        self.bn2 = layers.norm(planes)
        self.conv3, _ = layers.conv(planes, planes * 4, 1, 1, out)
        self.bn3 = layers.norm(planes * 4)
        self.downsample = _downsample(cin, planes * 4, stride, size, layers)
        self.out_size = out

    def __call__(self, x: jax.Array) -> jax.Array:
        y = jax.nn.relu(self.bn1(self.conv1(x)))
        y = jax.nn.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return jax.nn.relu(y + _shortcut(self.downsample, x))


def _downsample(
    cin: int, cout: int, stride: int, size: int, layers: _Layers
) -> Sequence[nnx.Module] | None:
    if stride == 1 and cin == cout:
        return None
    conv, _ = layers.conv(cin, cout, 1, stride, size)
    return module_list([conv, layers.norm(cout)])


def _shortcut(downsample: Sequence[nnx.Module] | None, x: jax.Array) -> jax.Array:
    if downsample is None:
        return x
    return downsample[1](downsample[0](x))


class ResNet(ZooModel):
    """A residual network: stem, four stages of blocks, global average pool, dense.

    Args:
      block: ``"basic"`` or ``"bottleneck"``.
      depths: blocks per stage, e.g. ``(3, 4, 6, 3)`` for ResNet-50.
      num_classes: outputs of the last layer (1000).
      small_input: a 3x3 stride-1 stem without max pooling, for 32x32 images
        (the CIFAR variant); otherwise the 7x7 stride-2 stem and 3x3 max pool.
      image_size: side of the square input (224, or 32 with ``small_input``).
      dtype: compute dtype (float32 or bfloat16); ``param_dtype`` stays float32.

    Batch norm follows NNX: a new model trains (batch statistics, running
    averages updated with PyTorch's momentum 0.1); ``model.eval()`` switches
    to the running averages.
    """

    reference = "He et al. 2015, Deep residual learning (torchvision.models.resnet)"

    def __init__(
        self,
        block: str = "bottleneck",
        depths: tuple[int, ...] = (3, 4, 6, 3),
        *,
        num_classes: int = 1000,
        small_input: bool = False,
        image_size: int | None = None,
        dtype=jnp.float32,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        blocks = {"basic": BasicBlock, "bottleneck": Bottleneck}
        if block not in blocks:
            raise ArgumentError(f"block must be 'basic' or 'bottleneck'; got {block!r}.")
        if len(depths) != 4:
            raise ArgumentError(f"depths must give four stages, e.g. (3, 4, 6, 3); got {depths}.")
        image_size = int(image_size or (32 if small_input else 224))
        self.block, self.depths, self.small_input = block, tuple(depths), small_input
        layers = _Layers(dtype, param_dtype, rngs)
        if small_input:
            self.conv1, size = layers.conv(3, 64, 3, 1, image_size)
        else:
            self.conv1, size = layers.conv(3, 64, 7, 2, image_size)
            size = _flops.conv_output_size(size, kernel=3, stride=2, padding=1)
        self.bn1 = layers.norm(64)
        cls, cin = blocks[block], 64
        for stage, (planes, depth) in enumerate(zip((64, 128, 256, 512), depths)):
            stage_blocks = []
            for i in range(depth):
                stride = 2 if stage > 0 and i == 0 else 1
                stage_blocks.append(cls(cin, planes, stride, size, layers))
                size, cin = stage_blocks[-1].out_size, planes * cls.expansion
            setattr(self, f"layer{stage + 1}", module_list(stage_blocks))
        self.fc = nnx.Linear(
            cin, num_classes, dtype=dtype, param_dtype=param_dtype, rngs=rngs, **_init.DENSE
        )
        self.input_shape = (image_size, image_size, 3)
        self.flops_per_example = layers.flops + _flops.dense(cin, num_classes)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = jax.nn.relu(self.bn1(self.conv1(x)))
        if not self.small_input:
            x = nnx.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
        for stage in (self.layer1, self.layer2, self.layer3, self.layer4):
            for block in stage:
                x = block(x)
        return self.fc(x.mean(axis=(1, 2)))
