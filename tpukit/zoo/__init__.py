"""tpukit.zoo: well-known models as Flax NNX modules, correct and documented.

Imports: ``tpukit.display``, ``tpukit._errors``, ``tpukit._counts``, ``tpukit._compat``.

It imports only Flax, JAX and ``tpukit._compat``: models know nothing of training
or compiling (``tests/test_architecture.py`` checks this).

``create(name, **config)`` builds a model, ``list_models()`` shows the catalogue
(name, parameters, FLOPs per example, input shape, reference), and
``load_torch_state_dict`` brings in torchvision VGG or ResNet weights.

    >>> import jax.numpy as jnp
    >>> from tpukit import zoo
    >>> zoo.list_models()["vgg19"].parameters       # the catalogue; a table in notebooks
    143667240
    >>> zoo.list_models()["vgg19"].flops_per_example  # 2 per multiply-accumulate
    39264124928
    >>> model = zoo.create("lenet5", dtype="bfloat16")
    >>> model.eval()
    >>> model(jnp.ones((8, *model.input_shape))).shape
    (8, 10)

Conventions: images are NHWC, parameters float32 with a float32 or bfloat16
compute ``dtype``, batch norm and dropout follow NNX's ``model.train()`` /
``model.eval()``, and the same ``seed`` gives the same weights.
"""

from tpukit._errors import StateDictError, old_names
from tpukit.zoo._base import ZooModel
from tpukit.zoo._convnets import AllConvCIFAR10, LeNet5
from tpukit.zoo._mlp import MLP
from tpukit.zoo._registry import ModelInfo, ModelTable, count_params, create, list_models, names
from tpukit.zoo._resnet import ResNet
from tpukit.zoo._torch_weights import load_torch_state_dict
from tpukit.zoo._transformer import GPT
from tpukit.zoo._vgg import VGG

# ``zoo.list()`` was the catalogue's other name (it hid the builtin ``list`` here)
__getattr__ = old_names(__name__, {"list": "tpukit.zoo.list_models"})

__all__ = [
    "GPT",
    "MLP",
    "VGG",
    "AllConvCIFAR10",
    "LeNet5",
    "ModelInfo",
    "ModelTable",
    "ResNet",
    "StateDictError",
    "ZooModel",
    "count_params",
    "create",
    "list_models",
    "load_torch_state_dict",
    "names",
]
