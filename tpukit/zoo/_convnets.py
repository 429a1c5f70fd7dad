"""Two small convolutional networks: LeNet-5 and the all-convolutional CIFAR-10 net.

>>> import jax.numpy as jnp
>>> from tpukit import zoo
>>> lenet = zoo.create("lenet5")
>>> lenet(jnp.ones((2, 28, 28, 1))).shape
(2, 10)
>>> allconv = zoo.create("allconv_cifar10")
>>> allconv(jnp.ones((2, 32, 32, 3))).shape
(2, 10)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from tpukit._compat import module_list
from tpukit._errors import ArgumentError
from tpukit.zoo import _flops
from tpukit.zoo._base import ZooModel, as_activation
from tpukit.zoo._init import DENSE


def _pad(p: int) -> tuple[tuple[int, int], ...]:
    # A tuple, not a list: NNX keeps it as a static attribute, which must be hashable.
    return ((p, p), (p, p))


class LeNet5(ZooModel):
    """LeNet-5 (LeCun et al. 1998) for 28x28 MNIST digits, NHWC.

    Two 5x5 convolutions (6 and 16 channels) with 2x2 pooling, then dense
    layers 400-120-84-10. The first convolution pads by 2, so 28x28 inputs see
    the 32x32 field of the original; the parameter count is the classic 61,706.

    Args:
      num_classes: size of the output layer (10).
      activation: ``"relu"`` (default, the modern choice) or ``"tanh"`` (1998).
      pooling: ``"max"`` (default) or ``"avg"`` (closer to 1998's subsampling).
    """

    reference = "LeCun et al. 1998, Gradient-based learning applied to document recognition"

    def __init__(
        self,
        *,
        num_classes: int = 10,
        activation: str = "relu",
        pooling: str = "max",
        dtype=jnp.float32,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        if pooling not in ("max", "avg"):
            raise ArgumentError(f"pooling must be 'max' or 'avg'; got {pooling!r}.")
        self.activation, self.pooling = activation, pooling
        self._act = as_activation(activation)
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs, **DENSE)
        self.conv1 = nnx.Conv(1, 6, (5, 5), padding=_pad(2), **kw)
        self.conv2 = nnx.Conv(6, 16, (5, 5), padding="VALID", **kw)
        self.fc1 = nnx.Linear(16 * 5 * 5, 120, **kw)
        self.fc2 = nnx.Linear(120, 84, **kw)
        self.fc3 = nnx.Linear(84, num_classes, **kw)
        self.input_shape = (28, 28, 1)
        f1, h, w = _flops.conv2d(28, 28, 1, 6, kernel=5, padding=2)
        f2, _, _ = _flops.conv2d(h // 2, w // 2, 6, 16, kernel=5)
        dense = _flops.dense(400, 120) + _flops.dense(120, 84) + _flops.dense(84, num_classes)
        self.flops_per_example = f1 + f2 + dense

    def _pool(self, x: jax.Array) -> jax.Array:
        pool = nnx.max_pool if self.pooling == "max" else nnx.avg_pool
        return pool(x, (2, 2), strides=(2, 2))

    def __call__(self, x: jax.Array) -> jax.Array:
        x = self._pool(self._act(self.conv1(x)))
        x = self._pool(self._act(self.conv2(x)))
        x = x.reshape(x.shape[0], -1)
        x = self._act(self.fc1(x))
        x = self._act(self.fc2(x))
        return self.fc3(x)


# (out_channels, kernel, stride, padding) of All-CNN-C, Springenberg et al. 2015, table 2.
_ALLCONV_LAYERS = (
    (96, 3, 1, 1),
    (96, 3, 1, 1),
    (96, 3, 2, 1),
    (192, 3, 1, 1),
    (192, 3, 1, 1),
    (192, 3, 2, 1),
    (192, 3, 1, 0),
    (192, 1, 1, 0),
)


class AllConvCIFAR10(ZooModel):
    """The all-convolutional network (All-CNN-C) for 32x32 CIFAR-10 images, NHWC.

    Only convolutions and ReLU, as in the JAX paper's GPU experiment: strided
    3x3 convolutions take the place of pooling, a 1x1 convolution maps to the
    classes, and a global average over the 6x6 map gives the logits.
    1,369,738 parameters.
    """

    reference = (
        "Springenberg et al. 2015, Striving for simplicity (All-CNN-C); "
        "used in Frostig et al. 2018, Compiling ML programs via high-level tracing (JAX)"
    )

    def __init__(
        self,
        *,
        num_classes: int = 10,
        dtype=jnp.float32,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs, **DENSE)
        convs, flops, size, cin = [], 0, 32, 3
        for cout, k, s, p in _ALLCONV_LAYERS:
            convs.append(nnx.Conv(cin, cout, (k, k), strides=(s, s), padding=_pad(p), **kw))
            f, size, _ = _flops.conv2d(size, size, cin, cout, kernel=k, stride=s, padding=p)
            flops, cin = flops + f, cout
        convs.append(nnx.Conv(cin, num_classes, (1, 1), padding="VALID", **kw))
        flops += _flops.conv2d(size, size, cin, num_classes, kernel=1)[0]
        self.convs = module_list(convs)
        self.input_shape = (32, 32, 3)
        self.flops_per_example = flops

    def __call__(self, x: jax.Array) -> jax.Array:
        for conv in self.convs[:-1]:
            x = jax.nn.relu(conv(x))
        return self.convs[-1](x).mean(axis=(1, 2))
