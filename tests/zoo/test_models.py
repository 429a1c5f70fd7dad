"""tpukit.zoo: parameter counts, FLOPs against the compiler, torch weights, modes, dtypes, seeds."""

from __future__ import annotations

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import tpukit
from tests._support.numerics import assert_close_across_processors
from tpukit import zoo
from tpukit._compat import iter_modules
from tpukit.zoo import _init

# ---------------------------------------------------------------- helpers


def _forward(model: nnx.Module):
    """A pure jitted forward pass of the parameters; other state (statistics, RNG) is closed over."""
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    return jax.jit(lambda params, x: nnx.merge(graphdef, params, rest)(x)), params


_DEF = re.compile(r"%([\w.\-]+) = \w+\[([\d,]*)\]")
_OP = re.compile(r"= \w+\[([\d,]*)\]\S* (convolution|dot)\(%([\w.\-]+), %([\w.\-]+)\)(.*)")


def _hlo_matmul_flops(hlo_text: str) -> int:
    """Dot and convolution FLOPs (2 per multiply-add) counted from optimized HLO shapes."""
    shapes = {
        name: tuple(int(d) for d in dims.split(",") if d) for name, dims in _DEF.findall(hlo_text)
    }
    total = 0
    for out, op, lhs, rhs, attrs in _OP.findall(hlo_text):
        out_size = math.prod(int(d) for d in out.split(",") if d)
        if op == "convolution":
            kernel_labels = re.search(r"dim_labels=\w+_(\w+)->", attrs).group(1)
            kernel = shapes[rhs]
            total += 2 * out_size * math.prod(kernel) // kernel[kernel_labels.index("o")]
        else:
            dims = re.search(r"lhs_contracting_dims=\{([\d,]*)\}", attrs).group(1)
            total += 2 * out_size * math.prod(shapes[lhs][int(d)] for d in dims.split(",") if d)
    return total


def _compiled_flops(model: nnx.Module, x: jax.Array) -> tuple[int, int]:
    """Matmul and convolution FLOPs of the compiled forward pass: every kernel tap of its HLO
    (the analytic convention, torchvision's), and tpukit's count (as XLA's, without padding's)."""
    fwd, state = _forward(model)
    compiled = tpukit.compile(fwd, state, x)
    return _hlo_matmul_flops(compiled.hlo_text()), int(compiled.cost.counted_flops)


_call = nnx.jit(lambda model, x: model(x))  # keeps NNX's state updates (statistics, RNG counts)


def _example(model: zoo.ZooModel, batch: int = 2, seed: int = 0) -> jax.Array:
    if isinstance(model, zoo.GPT):
        return jax.random.randint(jax.random.key(seed), (batch, *model.input_shape), 0, 50)
    return jax.random.normal(jax.random.key(seed), (batch, *model.input_shape))


# ---------------------------------------------------------------- parameter counts

PUBLISHED_PARAMS = {
    # torchvision.models (vgg*, vgg*_bn, resnet*)
    ("vgg11", False): 132_863_336,
    ("vgg13", False): 133_047_848,
    ("vgg16", False): 138_357_544,
    ("vgg19", False): 143_667_240,
    ("vgg11", True): 132_868_840,
    ("vgg16", True): 138_365_992,
    ("vgg19", True): 143_678_248,
    ("resnet18", None): 11_689_512,
    ("resnet34", None): 21_797_672,
    ("resnet50", None): 25_557_032,
    ("resnet101", None): 44_549_160,
    # GPT-2 small (Radford et al. 2019), MNIST MLP, LeNet-5, All-CNN-C
    ("gpt_small", None): 124_439_808,
    ("mlp", None): 109_386,
    ("lenet5", None): 61_706,
    ("allconv_cifar10", None): 1_369_738,
}


@pytest.mark.parametrize(("name", "batch_norm"), list(PUBLISHED_PARAMS))
def test_parameter_counts_equal_the_published_ones(name, batch_norm):
    config = {} if batch_norm is None else {"batch_norm": batch_norm}
    model = nnx.eval_shape(lambda: zoo.create(name, **config))
    assert zoo.count_params(model) == PUBLISHED_PARAMS[name, batch_norm]


def test_list_shows_every_model_with_its_numbers():
    table = zoo.list_models()
    assert [row.name for row in table] == zoo.names()
    assert table["vgg19"].parameters == 143_667_240
    assert table["resnet50"].input_shape == (224, 224, 3)
    text = repr(table)
    assert "vgg19" in text and "143,667,240" in text and "FLOPs/example" in text
    html = table._repr_html_()
    assert html.startswith("<table>") and html.count("<tr>") == len(zoo.names()) + 1


# ---------------------------------------------------------------- FLOPs

# torchvision's published "GFLOPS" are multiply-accumulates (1 MAC = 2 FLOPs).
TORCHVISION_GMACS = {
    "vgg11": 7.61,
    "vgg13": 11.31,
    "vgg16": 15.47,
    "vgg19": 19.63,
    "resnet18": 1.81,
    "resnet34": 3.66,
    "resnet50": 4.09,
    "resnet101": 7.80,
}


@pytest.mark.parametrize("name", list(TORCHVISION_GMACS))
def test_analytic_flops_agree_with_torchvision(name):
    flops = zoo.list_models()[name].flops_per_example
    assert flops / 2e9 == pytest.approx(TORCHVISION_GMACS[name], abs=0.006)


@pytest.mark.parametrize(
    ("name", "config"),
    [
        ("mlp", {}),
        ("lenet5", {}),
        ("allconv_cifar10", {}),
        # maps of at least 4x4: on smaller ones XLA drops kernel taps that only see padding
        ("vgg11", {"small_input": True, "batch_norm": True, "image_size": 64}),
        ("vgg13", {"image_size": 64}),
        ("resnet18", {"image_size": 128}),
        ("resnet50", {"small_input": True}),
        (
            "gpt_small",
            {"vocab_size": 96, "depth": 2, "width": 64, "num_heads": 4, "context_length": 16},
        ),
    ],
)
def test_analytic_flops_match_the_compiled_hlo(name, config):
    model = zoo.create(name, **config)
    model.eval()
    every_tap, counted = _compiled_flops(model, _example(model, batch=1))
    assert every_tap == pytest.approx(model.flops_per_example, rel=1e-3)
    assert counted <= every_tap  # less by the taps on padding; equal without convolutions
    assert (counted == every_tap) == (name in ("mlp", "gpt_small"))


def test_vgg19_flops_match_the_compiler_at_224():
    model = nnx.eval_shape(lambda: zoo.create("vgg19", dtype="bfloat16"))
    model.eval()
    x = jax.ShapeDtypeStruct((1, 224, 224, 3), jnp.float32)
    fwd, state = _forward(model)
    compiled = fwd.lower(state, x).compile()
    assert _hlo_matmul_flops(compiled.as_text()) == pytest.approx(model.flops_per_example, rel=1e-3)
    # XLA's own cost model skips the taps that fall on padding, so it reads a little lower.
    backend = compiled.cost_analysis()["flops"]
    assert 0.95 * model.flops_per_example < backend < 1.01 * model.flops_per_example


# ---------------------------------------------------------------- the program XLA sees


def test_bf16_vgg_is_a_plain_nhwc_conv_stack():
    model = zoo.create("vgg11", small_input=True, dtype="bfloat16")
    model.eval()
    fwd, state = _forward(model)
    text = fwd.lower(state, jnp.ones((2, 32, 32, 3))).as_text()
    convs = re.findall(r"stablehlo.convolution.*", text)
    assert len(convs) == 8
    assert all("[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]" in c for c in convs)
    assert all("bf16" in c and "f32" not in c for c in convs)
    assert "stablehlo.transpose" not in text
    n_params = len(jax.tree.leaves(state))
    # each float32 parameter is cast to bfloat16 once, plus the input once
    assert text.count("stablehlo.convert") <= n_params + 2


def test_bf16_compute_keeps_float32_parameters_and_tracks_float32():
    x = jax.random.normal(jax.random.key(1), (4, 32, 32, 3))
    outputs = {}
    for dtype in ("float32", "bfloat16"):
        model = zoo.create("resnet18", small_input=True, num_classes=10, dtype=dtype, seed=3)
        model.eval()
        leaves = jax.tree.leaves(nnx.state(model, nnx.Param))
        assert {p.dtype for p in leaves} == {jnp.dtype(jnp.float32)}
        fwd, params = _forward(model)
        outputs[dtype] = fwd(params, x)
    assert outputs["bfloat16"].dtype == jnp.bfloat16
    assert outputs["float32"].dtype == jnp.float32
    ref = np.asarray(outputs["float32"])
    got = np.asarray(outputs["bfloat16"], np.float32)
    assert np.abs(got - ref).max() < 0.05 * np.abs(ref).max() + 0.05


# ---------------------------------------------------------------- modes and seeds


def test_batch_norm_uses_batch_statistics_in_train_mode_and_running_ones_in_eval():
    model = zoo.create("resnet18", small_input=True, num_classes=10)
    x = jax.random.normal(jax.random.key(0), (4, 32, 32, 3))
    before = np.asarray(model.bn1.mean[...])
    _call(model, x)  # a new model trains
    assert not np.allclose(model.bn1.mean[...], before)
    model.eval()
    stats = np.asarray(model.bn1.mean[...])
    alone, together = _call(model, x[:1]), _call(model, x)
    assert_close_across_processors(alone[0], together[0])
    np.testing.assert_array_equal(model.bn1.mean[...], stats)
    model.train()
    assert not np.allclose(_call(model, x[:1])[0], _call(model, x)[0], atol=1e-3)


def test_dropout_is_random_in_train_mode_and_off_in_eval():
    model = zoo.create("vgg11", small_input=True, num_classes=10)
    x = jax.random.normal(jax.random.key(0), (2, 32, 32, 3))
    assert not np.allclose(_call(model, x), _call(model, x))
    model.eval()
    np.testing.assert_array_equal(_call(model, x), _call(model, x))


def test_same_seed_same_weights_other_seed_other_weights():
    def params(seed):
        model = zoo.create("lenet5", seed=seed)
        return jax.tree.leaves(nnx.state(model, nnx.Param))

    for a, b in zip(params(7), params(7)):
        np.testing.assert_array_equal(a, b)
    assert not all(np.array_equal(a, b) for a, b in zip(params(7), params(8)))


def test_building_a_model_compiles_no_random_program(caplog):
    """Weights are drawn on the host: no threefry program compiled per parameter shape
    (ResNet-50's 57 of them took 25 s of XLA:CPU). Widths no other test uses, so no
    program compiled earlier in this process could hide one."""
    with jax.log_compiles(True), caplog.at_level("DEBUG"):
        zoo.create("mlp", widths=(13, 17, 5), seed=3)
        zoo.create("gpt_small", vocab_size=11, depth=1, width=6, num_heads=2, context_length=3)
    compiled = [r.getMessage() for r in caplog.records if "compilation of" in r.getMessage()]
    assert not [m for m in compiled if re.search(r"normal|uniform|threefry_random", m)], compiled


@pytest.mark.parametrize(
    ("host", "reference"),
    [
        (_init.lecun_normal(), jax.nn.initializers.lecun_normal()),
        (
            _init.variance_scaling(2.0, "fan_out", "normal"),
            jax.nn.initializers.variance_scaling(2.0, "fan_out", "normal"),
        ),
        (_init.normal(0.02), jax.nn.initializers.normal(0.02)),
    ],
    ids=["lecun_normal", "kaiming_fan_out", "normal"],
)
def test_host_initializers_draw_jaxs_distributions(host, reference):
    shape, key = (3, 3, 64, 128), jax.random.key(0)
    drawn, jaxs = np.asarray(host(key, shape)), np.asarray(reference(key, shape))
    assert drawn.shape == shape and drawn.dtype == np.float32
    assert abs(drawn.mean()) < 0.02 * jaxs.std()
    assert drawn.std() == pytest.approx(jaxs.std(), rel=0.02)
    assert np.abs(drawn).max() == pytest.approx(np.abs(jaxs).max(), rel=0.25)  # truncated or not
    traced = jax.jit(host, static_argnums=1)(key, shape)  # a traced key: JAX's own draw
    np.testing.assert_allclose(traced, jaxs, rtol=1e-5, atol=1e-7)  # jitted: an ulp apart
    assert host(key, shape, jnp.bfloat16).dtype == jnp.bfloat16


# ---------------------------------------------------------------- the small models


def test_mlp_returns_logits_and_probabilities():
    model = zoo.create("mlp")
    x = jnp.ones((3, 28, 28, 1))
    assert model(x).shape == (3, 10)
    assert_close_across_processors(model.probabilities(x).sum(-1), np.ones(3))
    custom = zoo.create("mlp", widths=(16, 8, 4), activation="tanh")
    assert custom(jnp.ones((2, 16))).shape == (2, 4)


def test_gpt_attention_is_causal():
    model = zoo.create("gpt_small", vocab_size=50, depth=2, width=32, num_heads=4, context_length=8)
    model.eval()
    tokens = jnp.arange(8)[None] % 50
    changed = tokens.at[0, 5].set(49)
    a, b = _call(model, tokens), _call(model, changed)
    assert a.shape == (1, 8, 50)
    assert_close_across_processors(a[0, :5], b[0, :5])
    assert not np.allclose(a[0, 5:], b[0, 5:])


@pytest.mark.parametrize("name", ["lenet5", "allconv_cifar10"])
def test_small_convnets_run(name):
    model = zoo.create(name)
    assert model(_example(model)).shape == (2, 10)


# ---------------------------------------------------------------- create's errors


def test_unknown_model_lists_the_valid_names():
    with pytest.raises(ValueError, match="no model named 'vgg20'.*vgg19.*resnet50"):
        zoo.create("vgg20")


def test_unknown_option_lists_the_valid_options():
    with pytest.raises(TypeError, match="unknown option.*batchnorm.*batch_norm"):
        zoo.create("vgg16", batchnorm=True)


def test_bad_option_values_explain_themselves():
    with pytest.raises(ValueError, match="dtype must be float32 or bfloat16; got 'float16'"):
        zoo.create("mlp", dtype="float16")
    with pytest.raises(ValueError, match="gpt_small.*multiple of num_heads"):
        zoo.create("gpt_small", width=100, num_heads=12)
    with pytest.raises(ValueError, match="activation must be one of"):
        zoo.create("mlp", activation="swish!")


# ---------------------------------------------------------------- torch weights


def _torch():
    return pytest.importorskip("torch", reason="install torch==2.13.0 to check against PyTorch")


def _torch_vgg(config, batch_norm, num_classes, small_input, head_width):
    """torchvision.models.VGG, rebuilt with plain torch.nn and torchvision's names."""
    nn = _torch().nn
    layers, cin = [], 3
    for item in config:
        if item == "M":
            layers.append(nn.MaxPool2d(2, 2))
            continue
        layers.append(nn.Conv2d(cin, item, 3, padding=1))
        if batch_norm:
            layers.append(nn.BatchNorm2d(item))
        layers.append(nn.ReLU(inplace=True))
        cin = item
    model = nn.Module()
    model.features = nn.Sequential(*layers)
    size, hidden = (1 if small_input else 7), head_width
    model.avgpool = nn.AdaptiveAvgPool2d((size, size))
    model.classifier = nn.Sequential(
        nn.Linear(cin * size * size, hidden),
        nn.ReLU(True),
        nn.Dropout(),
        nn.Linear(hidden, hidden),
        nn.ReLU(True),
        nn.Dropout(),
        nn.Linear(hidden, num_classes),
    )

    def forward(x):
        return model.classifier(model.avgpool(model.features(x)).flatten(1))

    model.forward = forward
    return model


def _torch_resnet(block, depths, num_classes):
    """torchvision.models.ResNet (v1.5 bottleneck), rebuilt with plain torch.nn."""
    nn = _torch().nn
    expansion = 1 if block == "basic" else 4

    class Block(nn.Module):
        def __init__(self, cin, planes, stride):
            super().__init__()
            cout = planes * expansion
            if block == "basic":
                self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
                self.bn1 = nn.BatchNorm2d(planes)
                self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
                self.bn2 = nn.BatchNorm2d(planes)
            else:
                self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
                self.bn1 = nn.BatchNorm2d(planes)
                self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
                self.bn2 = nn.BatchNorm2d(planes)
                self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
                self.bn3 = nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(
                    nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
                )

        def forward(self, x):
            y = self.bn1(self.conv1(x)).relu()
            y = self.bn2(self.conv2(y))
            if block == "bottleneck":
                y = self.bn3(self.conv3(y.relu()))
            return (y + (x if self.downsample is None else self.downsample(x))).relu()

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            cin = 64
            for i, (planes, depth) in enumerate(zip((64, 128, 256, 512), depths)):
                blocks = []
                for j in range(depth):
                    blocks.append(Block(cin, planes, 2 if i and not j else 1))
                    cin = planes * expansion
                setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
            self.fc = nn.Linear(cin, num_classes)

        def forward(self, x):
            x = self.maxpool(self.bn1(self.conv1(x)).relu())
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(x.mean((2, 3)))

    return ResNet()


def _randomize_batch_norm_statistics(torch_model):
    torch = _torch()
    gen = torch.Generator().manual_seed(0)
    for module in torch_model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            n = module.num_features
            module.running_mean.copy_(0.1 * torch.randn(n, generator=gen))
            module.running_var.copy_(0.5 + torch.rand(n, generator=gen))
            module.weight.data.copy_(1 + 0.1 * torch.randn(n, generator=gen))
            module.bias.data.copy_(0.1 * torch.randn(n, generator=gen))


def _compare(zoo_model, torch_model, image_size, train):
    torch = _torch()
    torch.manual_seed(0)
    _randomize_batch_norm_statistics(torch_model)
    zoo.load_torch_state_dict(zoo_model, torch_model.state_dict())
    x = np.random.default_rng(0).standard_normal((2, image_size, image_size, 3), np.float32)
    if train:
        torch_model.train()
        for m in torch_model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
        zoo_model.train()
        for _, m in iter_modules(zoo_model):
            if isinstance(m, nnx.Dropout):
                m.deterministic = True
    else:
        torch_model.eval()
        zoo_model.eval()
    with torch.no_grad():
        expected = torch_model.forward(torch.from_numpy(x.transpose(0, 3, 1, 2))).numpy()
    got = np.asarray(_call(zoo_model, jnp.asarray(x)))
    scale = np.abs(expected).max()
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3 * scale)


@pytest.mark.parametrize(
    ("name", "image_size", "train"),
    [("resnet18", 64, False), ("resnet50", 64, False), ("resnet18", 64, True)],
)
def test_resnet_loads_torchvision_weights_and_matches_torch(name, image_size, train):
    _torch()
    block, depths = {"resnet18": ("basic", (2, 2, 2, 2)), "resnet50": ("bottleneck", (3, 4, 6, 3))}[
        name
    ]
    reference = _torch_resnet(block, depths, num_classes=10)
    model = zoo.create(name, num_classes=10, image_size=image_size)
    _compare(model, reference, image_size, train)


@pytest.mark.parametrize(
    ("config", "image_size"),
    [
        # 2x2 map, adaptive pool to 7x7, then the channel-major flatten
        ({"batch_norm": True, "small_input": False, "head_width": 64}, 64),
        ({"batch_norm": False, "small_input": True, "head_width": 512}, 32),
    ],
)
def test_vgg_loads_torchvision_weights_and_matches_torch(config, image_size):
    _torch()
    from tpukit.zoo._vgg import CONFIGS

    reference = _torch_vgg(CONFIGS["vgg11"], num_classes=10, **config)
    model = zoo.create("vgg11", num_classes=10, image_size=image_size, **config)
    _compare(model, reference, image_size, train=False)


def _resnet18_state_dict():
    """A complete, correctly shaped torchvision-style ResNet-18 state dict, as NumPy."""
    model = nnx.eval_shape(lambda: zoo.create("resnet18"))
    graph_names = {}
    for path, module in iter_modules(model):
        prefix = ".".join(map(str, path))
        if isinstance(module, nnx.Conv):
            kh, kw, cin, cout = module.kernel.shape
            graph_names[f"{prefix}.weight"] = np.zeros((cout, cin, kh, kw), np.float32)
        elif isinstance(module, nnx.Linear):
            fan_in, fan_out = module.kernel.shape
            graph_names[f"{prefix}.weight"] = np.zeros((fan_out, fan_in), np.float32)
            graph_names[f"{prefix}.bias"] = np.zeros((fan_out,), np.float32)
        elif isinstance(module, nnx.BatchNorm):
            for key in ("weight", "bias", "running_mean", "running_var"):
                graph_names[f"{prefix}.{key}"] = np.ones((module.num_features,), np.float32)
            graph_names[f"{prefix}.num_batches_tracked"] = np.array(0)
    return graph_names


def test_a_complete_state_dict_loads_without_torch():
    state_dict = _resnet18_state_dict()
    state_dict["fc.bias"] = np.arange(1000, dtype=np.float32)
    model = zoo.create("resnet18")
    assert zoo.load_torch_state_dict(model, state_dict) is model
    np.testing.assert_array_equal(model.fc.bias[...], np.arange(1000))
    np.testing.assert_array_equal(model.layer4[1].bn2.var[...], 1.0)


def test_missing_extra_and_misshaped_tensors_are_named_and_nothing_loads():
    state_dict = _resnet18_state_dict()
    del state_dict["layer2.0.downsample.1.running_var"]
    state_dict["layer5.0.conv1.weight"] = np.zeros((1,))
    state_dict["fc.weight"] = np.zeros((10, 512), np.float32)
    state_dict["fc.bias"] = np.zeros((10,), np.float32)
    model = zoo.create("resnet18")
    conv1_before = np.asarray(model.conv1.kernel[...])
    with pytest.raises(zoo.StateDictError) as error:
        zoo.load_torch_state_dict(model, state_dict)
    message = str(error.value)
    assert "missing (1): layer2.0.downsample.1.running_var" in message
    assert "unexpected (1): layer5.0.conv1.weight" in message
    assert "fc.weight expected (1000, 512), got (10, 512)" in message
    assert "num_classes" in message
    np.testing.assert_array_equal(model.conv1.kernel[...], conv1_before)


def test_dataparallel_prefix_gets_a_hint():
    state_dict = {f"module.{k}": v for k, v in _resnet18_state_dict().items()}
    with pytest.raises(zoo.StateDictError, match="removeprefix"):
        zoo.load_torch_state_dict(zoo.create("resnet18"), state_dict)


def test_batch_norm_weights_into_a_plain_vgg_are_refused():
    vgg_bn = nnx.eval_shape(lambda: zoo.create("vgg11", batch_norm=True, small_input=True))
    plain = zoo.create("vgg11", small_input=True)
    from tpukit.zoo._torch_weights import _vgg_slots

    state_dict = {name: np.zeros(shape, np.float32) for name, (_, shape, _) in _vgg_slots(vgg_bn)}
    with pytest.raises(zoo.StateDictError, match="batch_norm=True"):
        zoo.load_torch_state_dict(plain, state_dict)


def test_models_without_torchvision_names_are_refused():
    with pytest.raises(TypeError, match="VGG and ResNet.*got MLP"):
        zoo.load_torch_state_dict(zoo.create("mlp"), {})


# ---------------------------------------------------------------- %%tpu_compile on every model

TINY_GPT = {"vocab_size": 64, "depth": 2, "width": 32, "num_heads": 2, "context_length": 16}

# Tiny configurations whose feature maps all stay at least 4x4: on a 2x2 map XLA's CPU
# compiler rewrites each 3x3 convolution to read only the 4 in-bounds taps, so VGG at
# 32x32 counts ~5% fewer FLOPs than the analytic figure. VGG therefore runs at 64x64.
TINY_CONFIGS = {
    "mlp": {},
    "lenet5": {},
    "allconv_cifar10": {},
    **{
        name: {
            "small_input": True,
            "image_size": 64,
            "head_width": 64,
            "num_classes": 10,
            "batch_norm": name in ("vgg11", "vgg16"),
        }
        for name in ("vgg11", "vgg13", "vgg16", "vgg19")
    },
    **{
        name: {"small_input": True, "image_size": 32, "num_classes": 10}
        for name in ("resnet18", "resnet34", "resnet50", "resnet101")
    },
    "gpt_small": TINY_GPT,
}

FORWARD_CELL = """%%tpu_compile --quiet forward(model, {shape})
def forward(model, x):
    return model(x)
"""


def test_every_zoo_model_has_a_tiny_configuration():
    assert sorted(TINY_CONFIGS) == sorted(zoo.names())


@pytest.mark.parametrize("name", zoo.names())
def test_tpu_compile_magic_compiles_every_model_and_counts_its_flops(name, shell, capsys):
    batch = 2
    # Only shapes matter to the compiler, so the model is abstract: no weights are initialised.
    model = nnx.eval_shape(lambda: zoo.create(name, **TINY_CONFIGS[name]))
    model.eval()  # running batch-norm statistics, no dropout
    dtype = "s32" if isinstance(model, zoo.GPT) else "f32"
    shape = f"{dtype}[{','.join(map(str, (batch, *model.input_shape)))}]"
    shell.user_ns["model"] = model
    shell.user_ns.pop("forward_compiled", None)
    try:
        result = shell.run_cell(FORWARD_CELL.format(shape=shape), store_history=False)
        assert result.success, result.error_in_exec
        assert capsys.readouterr().out == ""  # --quiet stores without showing
        compiled = shell.user_ns["forward_compiled"]
    finally:
        for key in ("model", "forward", "forward_compiled"):
            shell.user_ns.pop(key, None)
    assert isinstance(compiled, tpukit.Compiled)
    if isinstance(model, zoo.GPT):
        expected = (batch, TINY_GPT["context_length"], TINY_GPT["vocab_size"])
    else:
        expected = (batch, 10)
    assert compiled.signature.output.shape == expected
    # every kernel tap of the HLO is the analytic count; tpukit's leaves out the padding's
    every_tap = _hlo_matmul_flops(compiled.hlo_text())
    assert every_tap == pytest.approx(model.flops_per_example * batch, rel=0.02)
    assert compiled.cost.counted_flops <= every_tap


# ---------------------------------------------------------------- a few training steps


def _train_losses(model: zoo.ZooModel, x: jax.Array, labels: jax.Array, steps: int, lr: float):
    """Losses of ``steps`` Adam steps on one fixed batch (each measured before its update)."""
    optimizer = nnx.Optimizer(model, optax.adam(lr), wrt=nnx.Param)

    @nnx.jit
    def step(model, optimizer, x, labels):
        def loss_fn(model):
            logits = model(x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    return [float(step(model, optimizer, x, labels)) for _ in range(steps)]


@pytest.mark.parametrize(
    ("name", "config", "lr"),
    [
        pytest.param("mlp", {}, 1e-3, id="mlp"),
        pytest.param("lenet5", {}, 1e-3, id="lenet5"),
        # no normalisation: Adam at 1e-3 overshoots by the fourth step
        pytest.param("allconv_cifar10", {}, 3e-4, id="allconv_cifar10"),
        # the 512-wide head with dropout 0.5: train mode draws fresh masks every step
        pytest.param(
            "vgg11", {"small_input": True, "batch_norm": True, "num_classes": 10}, 1e-3, id="vgg11"
        ),
        pytest.param("resnet18", {"small_input": True, "num_classes": 10}, 1e-3, id="resnet18"),
        pytest.param("gpt_small", TINY_GPT, 3e-3, id="gpt_small"),
    ],
)
def test_a_few_training_steps_lower_the_loss(name, config, lr):
    model = zoo.create(name, **config)  # a new model is in train mode: batch statistics, dropout
    batch = 4
    x = _example(model, batch)
    if isinstance(model, zoo.GPT):
        labels = jnp.roll(x, -1, axis=1)  # next-token targets
    else:
        labels = jnp.arange(batch) % 10
    losses = _train_losses(model, x, labels, steps=5, lr=lr)
    assert all(math.isfinite(loss) for loss in losses), losses
    # by at least 5%: with the learning rate at 0, dropout alone moves VGG's loss by ~0.2%
    assert losses[-1] < 0.95 * losses[0], losses
