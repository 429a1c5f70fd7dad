"""fit(..., sharding=...): the same training over 8 simulated devices, laid out three ways."""

import jax
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

import tpukit
from tests._support.numerics import approx_across_processors, assert_close_across_processors
from tpukit.train import FSDP, DataParallel, MeshRules, Trainer, evaluate, fit
from tpukit.train._mesh import resolve_plan


class MLP(nnx.Module):
    def __init__(self, rngs, din=32, hidden=64, classes=16):
        self.l1 = nnx.Linear(din, hidden, rngs=rngs)  # kernel 32x64: 2048 elements
        self.l2 = nnx.Linear(hidden, classes, rngs=rngs)  # kernel 64x16: 1024 elements

    def __call__(self, x):
        return self.l2(jax.nn.relu(self.l1(x)))


def task(n=512, din=32, classes=16):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, din)).astype(np.float32)
    return x, (x @ rng.normal(size=(din, classes))).argmax(-1).astype(np.int32)


X, Y = task()


def params_of(model):
    return jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(model, nnx.Param)))


def train(sharding, epochs=2, **kw):
    model = MLP(nnx.Rngs(0))
    history = fit(
        model,
        optax.adam(1e-2),
        (X, Y),
        epochs=epochs,
        batch_size=64,
        sharding=sharding,
        verbose=False,
        **kw,
    )
    return model, history


@pytest.fixture(scope="module")
def one_device():
    model, history = train(DataParallel(devices=jax.devices()[:1]))
    return params_of(model), history


assert_close = assert_close_across_processors


@pytest.mark.parametrize("sharding", ["data", "fsdp"])
def test_eight_devices_give_the_one_device_parameters(one_device, sharding):
    model, history = train(sharding)
    assert_close(params_of(model), one_device[0])
    assert_close_across_processors(history["loss"], one_device[1]["loss"])
    assert history.sharding.devices == 8 and history.sharding.per_device_batch == 8


def test_data_parallel_replicates_and_fsdp_splits_the_parameters():
    model, history = train("data", epochs=1)
    assert model.l1.kernel[...].sharding.is_fully_replicated
    assert history.sharding.param_bytes_per_device == history.sharding.param_bytes

    model, history = train("fsdp", epochs=1)
    kernel = model.l1.kernel[...]
    assert kernel.sharding.spec == P(None, "data")  # 64 is the largest dim divisible by 8
    assert {s.data.shape for s in kernel.addressable_shards} == {(32, 8)}
    assert len(kernel.addressable_shards) == 8
    assert model.l2.kernel[...].sharding.spec == P("data")
    assert model.l1.bias[...].sharding.is_fully_replicated  # 64 < 1024 elements
    s = history.sharding
    assert (s.sharded_params, s.param_arrays) == (2, 4)
    assert s.param_bytes_per_device < s.param_bytes / 4
    assert s.optimizer_bytes_per_device < s.optimizer_bytes / 4  # Adam's moments follow


def test_fsdp_rule_largest_divisible_dimension_and_threshold():
    plan = FSDP()
    assert plan.spec_for("w", (784, 128)) == P("data")
    assert plan.spec_for("w", (3, 4096)) == P(None, "data")
    assert plan.spec_for("w", (1001, 7, 3)) == P()  # nothing divisible by 8
    assert plan.spec_for("w", (1000, 1000)) == P("data")  # ties: the first
    assert plan.spec_for("b", (512,)) == P()  # under min_size=1024
    assert FSDP(min_size=0).spec_for("b", (512,)) == P("data")
    assert FSDP(devices=jax.devices()[:1]).spec_for("w", (784, 128)) == P()


def test_the_choice_is_printed_once_and_kept_in_the_history(capsys):
    _, history = train("fsdp", epochs=1, eval_data=(X[:100], Y[:100]))
    model = MLP(nnx.Rngs(0))
    fit(model, optax.sgd(0.1), (X, Y), epochs=1, batch_size=64, sharding="fsdp")
    err_out = capsys.readouterr()
    lines = [ln for ln in err_out.out.splitlines() if ln.startswith("tpukit.fit:")]
    assert len(lines) == 1, err_out.out
    assert "sharding 'fsdp': mesh data=8 (8 devices)" in lines[0]
    assert "batch 64 = 8 per device" in lines[0]
    # the line goes on over two indented lines, each short enough for a notebook at 1024 px
    # (JupyterLab breaks a long printed line mid-number); its parameter count is on the next
    printed = err_out.out.splitlines()
    start = printed.index(lines[0])
    block = printed[start : start + 3]
    assert block[1].startswith("  parameters ") and block[2].startswith("  optimizer state ")
    assert "2 of 4 arrays split" in block[1] and all(len(line) <= 100 for line in block), block
    assert history.sharding.to_dict()["mesh"] == {"data": 8}


def test_the_sharding_line_counts_one_device_and_one_array_in_the_singular():
    """It read "(1 devices)" and "0 of 1 arrays split" on a one-device machine."""
    params = {"w": np.zeros((4, 3), np.float32)}
    line = str(DataParallel(devices=jax.devices()[:1]).summary(params, (), 8))
    assert "mesh data=1 (1 device);" in line and "(0 of 1 array split)" in line, line


def test_mesh_rules_split_parameters_as_asked(one_device):
    mesh = jax.make_mesh((4, 2), ("data", "model"))
    rules = [(r"l1/kernel", P(None, "model")), (r"l2/kernel$", P("model", None))]
    model, history = train(MeshRules(mesh, rules, batch_axes=("data",)))
    assert model.l1.kernel[...].sharding.spec == P(None, "model")
    assert model.l2.kernel[...].sharding.spec == P("model")
    assert model.l2.bias[...].sharding.is_fully_replicated
    assert history.sharding.per_device_batch == 16  # split 4 ways, not 8
    assert history.sharding.mesh == {"data": 4, "model": 2}
    assert_close(params_of(model), one_device[0])
    fsdp_eval = evaluate(model, (X, Y), batch_size=64, sharding="fsdp")
    assert fsdp_eval["loss"] == approx_across_processors(
        evaluate(model, (X, Y), batch_size=64)["loss"]
    )


def test_fit_takes_the_mesh_and_shard_spelling_of_compile(one_device):
    shard = {r"l1/kernel": "None,model", r"l2/kernel$": P("model", None)}  # text or specs
    model, history = train(None, mesh="data=4,model=2", shard=shard)
    assert model.l1.kernel[...].sharding.spec == P(None, "model")
    assert model.l2.kernel[...].sharding.spec == P("model")
    assert model.l2.bias[...].sharding.is_fully_replicated
    assert history.sharding.strategy == "rules" and history.sharding.mesh == {"data": 4, "model": 2}
    assert history.sharding.per_device_batch == 16  # split along "data" (4 ways)
    assert_close(params_of(model), one_device[0])
    assert evaluate(model, (X, Y), batch_size=64, mesh="data=8")["loss"] == (
        approx_across_processors(evaluate(model, (X, Y), batch_size=64)["loss"])
    )
    # The old spelling builds the same plan.
    mesh = jax.make_mesh((4, 2), ("data", "model"))
    rules = [(r"l1/kernel", P(None, "model")), (r"l2/kernel$", P("model", None))]
    old = MeshRules(mesh, rules, batch_axes=("data",))
    new = resolve_plan(mesh="data=4,model=2", shard=shard)
    assert (new.rules, new.batch_axes, dict(new.mesh.shape)) == (
        old.rules,
        old.batch_axes,
        dict(old.mesh.shape),
    )


def test_compile_and_fit_read_one_mesh_vocabulary_the_same_way():
    mesh, spec = "data=4,model=2", "None,model"
    x, w = np.zeros((64, 32), np.float32), np.zeros((32, 64), np.float32)
    c = tpukit.compile(lambda x, w: x @ w, x, w, mesh=mesh, shard={"x": "data", "w": spec})
    trainer = Trainer(MLP(nnx.Rngs(0)), optax.adam(1e-2), mesh=mesh, shard={"l1/kernel": spec})
    step = trainer.compile_step((X, Y), batch_size=64)
    (kernel,) = jax.tree.leaves(step.input_shardings["params"]["l1"]["kernel"])
    w_sharding = c.input_shardings["w"]
    assert kernel.spec == w_sharding.spec == P(None, "model")
    assert kernel.mesh.devices.tolist() == w_sharding.mesh.devices.tolist()  # same devices, order
    assert step.mesh == c.mesh == {"data": 4, "model": 2}
    assert resolve_plan(mesh="model=2,data=4").batch_axes == ("data",)  # "data" wherever it is
    assert resolve_plan(mesh="x=8").batch_axes == ("x",)  # else the first axis


def test_mesh_spelling_mistakes_say_what_to_do():
    model = MLP(nnx.Rngs(0))
    kw = {"epochs": 1, "batch_size": 64, "verbose": False}
    with pytest.raises(ValueError, match=r"shard= needs mesh="):
        fit(model, optax.adam(1e-2), (X, Y), shard={"l1/kernel": "None,model"}, **kw)
    with pytest.raises(ValueError, match=r"either sharding= or mesh="):
        fit(model, optax.adam(1e-2), (X, Y), sharding="fsdp", mesh="data=8", **kw)
    with pytest.raises(tpukit.ArgumentError, match=r"AXIS=SIZE pairs, e\.g\. data=8"):
        fit(model, optax.adam(1e-2), (X, Y), mesh="data:8", **kw)
    with pytest.raises(tpukit.ArgumentError, match=r"needs 16 devices but 8 are here"):
        fit(model, optax.adam(1e-2), (X, Y), mesh="data=8,model=2", **kw)
    with pytest.raises(tpukit.ArgumentError, match=r"uses the mesh axis 'data' twice"):
        fit(model, optax.adam(1e-2), (X, Y), mesh="data=8", shard={"l1": "data,data"}, **kw)
    with pytest.raises(ValueError, match=r"mesh axis 'tensor'.*\('data', 'model'\)"):
        fit(model, optax.adam(1e-2), (X, Y), mesh="data=4,model=2", shard={"l1": "tensor"}, **kw)


def test_a_rule_that_matches_nothing_names_itself_and_the_real_paths():
    mesh = jax.make_mesh((4, 2), ("data", "model"))
    model = MLP(nnx.Rngs(0))
    before = params_of(model)
    plan = MeshRules(mesh, [(r"l1/kernel", P(None, "model")), (r"layers/9/kernel", P("model"))])
    with pytest.raises(ValueError) as e:
        fit(model, optax.adam(1e-2), (X, Y), epochs=1, batch_size=64, sharding=plan)
    text = str(e.value)
    assert "'layers/9/kernel'" in text and "matches no array" in text
    assert "l1/kernel" in text and "l2/bias" in text
    assert_close(params_of(model), before)


def test_bad_rules_and_strategies_say_what_to_do():
    mesh = jax.make_mesh((4, 2), ("data", "model"))
    with pytest.raises(ValueError, match=r"mesh axis 'tensor'.*\('data', 'model'\)"):
        MeshRules(mesh, [(r"kernel", P("tensor"))])
    with pytest.raises(ValueError, match=r"batch_axes.*\('data', 'model'\)"):
        MeshRules(mesh, batch_axes=("batch",))
    with pytest.raises(TypeError, match="PartitionSpec"):
        MeshRules(mesh, [(r"kernel", ("model",))])
    plan = MeshRules(jax.make_mesh((2, 4), ("data", "model")), [(r"l2/bias", P("model"))])
    model = MLP(nnx.Rngs(0), classes=6)
    with pytest.raises(ValueError, match=r"l2/bias \(shape \(6,\)\) into 4 pieces"):
        fit(model, optax.adam(1e-2), (X, Y % 6), epochs=1, batch_size=64, sharding=plan)
    with pytest.raises(ValueError, match=r"'data'.*'fsdp'.*MeshRules"):
        resolve_plan("model")
    with pytest.raises(ValueError, match=r"MeshRules\(mesh"):
        resolve_plan(mesh)


def test_a_batch_the_mesh_cannot_split_says_which_sizes_work():
    model = MLP(nnx.Rngs(0))
    with pytest.raises(
        ValueError, match=r"batch_size=60 .* 8 devices.*multiple of 8, e\.g\. 56 or 64"
    ):
        fit(model, optax.adam(1e-2), (X, Y), epochs=1, batch_size=60, sharding="fsdp")
    plan = MeshRules(jax.make_mesh((4, 2), ("data", "model")), batch_axes=("data",))
    with pytest.raises(ValueError, match=r"batch_size=6 .*mesh axes \('data',\).*multiple of 4"):
        fit(model, optax.adam(1e-2), (X, Y), epochs=1, batch_size=6, sharding=plan)
