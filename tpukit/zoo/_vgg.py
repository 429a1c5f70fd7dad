"""VGG-11/13/16/19 (Simonyan & Zisserman 2014), with or without batch norm.

The layers and parameter counts are torchvision's (VGG-16: 138,357,544,
VGG-19: 143,667,240), but images are NHWC and kernels HWIO, so XLA sees the
same convolutions as a hand-written ``lax.conv_general_dilated`` stack.

    >>> import jax.numpy as jnp
    >>> from tpukit import zoo
    >>> vgg = zoo.create("vgg19", dtype="bfloat16")          # 224x224 ImageNet head
    >>> cifar = zoo.create("vgg16", small_input=True, num_classes=10, batch_norm=True)
    >>> cifar(jnp.ones((2, 32, 32, 3))).shape
    (2, 10)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from tpukit._compat import module_list
from tpukit._errors import ArgumentError
from tpukit.zoo import _flops, _init
from tpukit.zoo._base import ZooModel

POOL = "M"
CONFIGS: dict[str, tuple] = {
    "vgg11": (64, POOL, 128, POOL, 256, 256, POOL, 512, 512, POOL, 512, 512, POOL),
    "vgg13": (64, 64, POOL, 128, 128, POOL, 256, 256, POOL, 512, 512, POOL, 512, 512, POOL),
    "vgg16": (64, 64, POOL, 128, 128, POOL, 256, 256, 256, POOL)
    + (512, 512, 512, POOL, 512, 512, 512, POOL),
    "vgg19": (64, 64, POOL, 128, 128, POOL, 256, 256, 256, 256, POOL)
    + (512, 512, 512, 512, POOL, 512, 512, 512, 512, POOL),
}

_conv_init = _init.variance_scaling(2.0, "fan_out", "normal")
_dense_init = _init.normal(0.01)


def adaptive_avg_pool(x: jax.Array, size: int) -> jax.Array:
    """PyTorch's ``AdaptiveAvgPool2d((size, size))`` on an NHWC array.

    A no-op when the map already has that size (VGG at 224x224), so the
    compiled program then has no pooling at all.
    """
    h, w = x.shape[1], x.shape[2]
    if (h, w) == (size, size):
        return x
    if h % size == 0 and w % size == 0:
        return x.reshape(x.shape[0], size, h // size, size, w // size, x.shape[3]).mean((2, 4))

    def bins(n: int) -> list[tuple[int, int]]:
        return [((i * n) // size, -((-(i + 1) * n) // size)) for i in range(size)]

    rows = [
        jnp.stack([x[:, r0:r1, c0:c1].mean(axis=(1, 2)) for c0, c1 in bins(w)], axis=1)
        for r0, r1 in bins(h)
    ]
    return jnp.stack(rows, axis=1)


class VGG(ZooModel):
    """A VGG network: 3x3 convolutions, 2x2 max pooling, three dense layers.

    Args:
      config: the convolution widths with ``"M"`` for each max pool
        (``CONFIGS["vgg19"]``); ``zoo.create("vgg19")`` fills it in.
      num_classes: outputs of the last layer (1000).
      batch_norm: a BatchNorm after every convolution (torchvision's ``vgg19_bn``).
      small_input: 32x32 inputs (CIFAR) and a 512-512-512 head instead of the
        7x7x512-4096-4096 ImageNet head.
      image_size: the side of the square input; 224, or 32 with ``small_input``.
        Other sizes work with the ImageNet head through adaptive average pooling.
      head_width: width of the two hidden dense layers (4096, or 512 with ``small_input``).
      dropout: dropout rate in the head (0.5); active in train mode only.
      dtype: compute dtype (float32 or bfloat16); ``param_dtype`` stays float32.

    Call ``model.eval()`` for inference (running batch-norm statistics, no
    dropout) and ``model.train()`` to train; a new model is in train mode.
    """

    reference = (
        "Simonyan & Zisserman 2014, Very deep convolutional networks (torchvision.models.vgg)"
    )

    def __init__(
        self,
        config: tuple = CONFIGS["vgg16"],
        *,
        num_classes: int = 1000,
        batch_norm: bool = False,
        small_input: bool = False,
        image_size: int | None = None,
        head_width: int | None = None,
        dropout: float = 0.5,
        dtype=jnp.float32,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        image_size = int(image_size or (32 if small_input else 224))
        if image_size < 32:
            raise ArgumentError(
                f"VGG halves the image five times, so image_size must be at least 32; "
                f"got {image_size}."
            )
        self.config, self.batch_norm, self.small_input = tuple(config), batch_norm, small_input
        kw = dict(dtype=dtype, param_dtype=param_dtype)
        convs, norms, flops, size, cin = [], [], 0, image_size, 3
        for item in self.config:
            if item == POOL:
                size //= 2
                continue
            convs.append(
                nnx.Conv(
                    cin,
                    item,
                    (3, 3),
                    padding=((1, 1), (1, 1)),
                    kernel_init=_conv_init,
                    bias_init=_init.zeros,
                    rngs=rngs,
                    **kw,
                )
            )
            if batch_norm:
                norms.append(
                    nnx.BatchNorm(item, momentum=0.9, epsilon=1e-5, rngs=rngs, **_init.NORM, **kw)
                )
            flops += _flops.conv2d(size, size, cin, item, kernel=3, padding=1)[0]
            cin = item
        self.convs, self.norms = module_list(convs), module_list(norms)
        self.feature_size = 1 if small_input else 7
        hidden = int(head_width or (512 if small_input else 4096))
        flat = cin * self.feature_size**2
        dense = dict(kernel_init=_dense_init, bias_init=_init.zeros, rngs=rngs, **kw)
        self.fc1 = nnx.Linear(flat, hidden, **dense)
        self.fc2 = nnx.Linear(hidden, hidden, **dense)
        self.fc3 = nnx.Linear(hidden, num_classes, **dense)
        self.dropout = nnx.Dropout(dropout, rngs=rngs)
        flops += _flops.dense(flat, hidden) + _flops.dense(hidden, hidden)
        flops += _flops.dense(hidden, num_classes)
        self.input_shape = (image_size, image_size, 3)
        self.flops_per_example = flops

    def features(self, x: jax.Array) -> jax.Array:
        """The convolutional trunk: NHWC images to an NHWC feature map."""
        layer = 0
        for item in self.config:
            if item == POOL:
                x = nnx.max_pool(x, (2, 2), strides=(2, 2))
                continue
            x = self.convs[layer](x)
            if self.batch_norm:
                x = self.norms[layer](x)
            x = jax.nn.relu(x)
            layer += 1
        return x

    def __call__(self, x: jax.Array) -> jax.Array:
        x = adaptive_avg_pool(self.features(x), self.feature_size)
        x = x.reshape(x.shape[0], -1)
        x = self.dropout(jax.nn.relu(self.fc1(x)))
        x = self.dropout(jax.nn.relu(self.fc2(x)))
        return self.fc3(x)
