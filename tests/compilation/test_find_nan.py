"""Where the first NaN came from: ``tpukit.find_nan``, ``%tpu_nan`` and ``fit``'s replay.

Each case is a small model that goes wrong in one known way; the record must name the
operation, the layer, the source line (marked ``# <- case``) and the part of the step.
"""

import re
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import tpukit
from tpukit._compat import module_list

SOURCE = Path(__file__).read_text().splitlines()


def line_of(marker: str) -> str:
    """``test_find_nan.py:N`` for the line that ends with ``# <- marker``."""
    (number,) = [i + 1 for i, text in enumerate(SOURCE) if text.endswith(f"# <- {marker}")]
    return f"{Path(__file__).name}:{number}"


class Norm(nnx.Module):
    """A hand-written normalization: a constant row has zero spread."""

    def __call__(self, x):
        mean = x.mean(-1, keepdims=True)
        std = jnp.sqrt(((x - mean) ** 2).mean(-1, keepdims=True))
        return (x - mean) / std  # <- div


class BadScale(nnx.Module):
    """A variance computed backwards: mean(x)**2 - mean(x**2) is never positive."""

    def __call__(self, x):
        var = x.mean(-1, keepdims=True) ** 2 - (x**2).mean(-1, keepdims=True)
        return x * jnp.sqrt(var)  # <- sqrt


class Attention(nnx.Module):
    def __init__(self, rngs):
        self.query = nnx.Linear(4, 4, rngs=rngs)

    def __call__(self, x, mask):
        scores = self.query(x) @ x.T
        scores = jnp.where(mask, scores, -jnp.inf)
        return jax.nn.softmax(scores, axis=-1) @ x  # <- softmax


class Net(nnx.Module):
    def __init__(self, first, rngs):
        self.first = first
        self.layers = module_list([nnx.Linear(4, 4, rngs=rngs), nnx.Linear(4, 3, rngs=rngs)])
        self.unused = nnx.Param(jnp.zeros(3))  # never in the loss: its gradient is zero

    def __call__(self, x):
        return self.layers[1](jax.nn.relu(self.layers[0](self.first(x))))


class Identity(nnx.Module):
    def __call__(self, x):
        return x


class Masked(nnx.Module):
    def __init__(self, rngs):
        self.attn = Attention(rngs)
        self.head = nnx.Linear(4, 3, rngs=rngs)

    def __call__(self, x, mask):
        return self.head(self.attn(x, mask))


X = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
Y = np.array([0, 1, 2, 0, 1, 2])
CAUSAL = np.tril(np.ones((6, 6), bool))


def cross_entropy(model, x, y):
    return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()


def grad_of(loss):
    def step(model, *batch):
        return nnx.value_and_grad(loss)(model, *batch)

    return step


def log_loss(outputs, labels):
    return -jnp.log(jax.nn.relu(outputs)).mean()  # <- log


def custom_loss(model, x, y):
    return log_loss(model(x), y)


def masked_loss(model, x, mask, y):
    return optax.softmax_cross_entropy_with_integer_labels(model(x, mask), y).mean()


def test_log_of_zero_in_a_custom_loss():
    origin = tpukit.find_nan(grad_of(custom_loss), Net(Identity(), nnx.Rngs(0)), X, Y)
    assert (origin.kind, origin.operation, origin.made) == ("operation", "log", "-inf")
    assert (origin.part, origin.layer) == ("loss", None)
    assert origin.source == line_of("log")
    assert origin.inputs[0].zeros > 0 and origin.inputs[0].negatives == 0
    assert "log made -inf from finite inputs in the loss" in origin.summary()


def test_division_by_zero_in_a_normalization_layer():
    x = X.copy()
    x[2] = 1.0  # a constant row: its spread is zero
    origin = tpukit.find_nan(grad_of(cross_entropy), Net(Norm(), nnx.Rngs(0)), x, Y)
    assert (origin.operation, origin.made, origin.part) == ("div", "NaN", "forward")
    assert (origin.layer, origin.layer_class) == ("first", "Norm")
    assert origin.source == line_of("div")
    assert origin.inputs[1].zeros == 1  # the spread of row 2


@pytest.mark.parametrize("width", [128, 1024])
def test_a_nan_row_is_seen_at_any_width(width):
    # Notebook 02's normalization: from JAX 0.10, XLA:CPU's max over an f32[4,1024] drops
    # the NaN row that it keeps at f32[4,128], so a check by max(|x|) missed the division
    # and named the sum after it.
    def normalize(x):
        mean = x.mean(axis=-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / jnp.sqrt(variance)

    rows = np.random.default_rng(0).normal(size=(4, width)).astype(np.float32)
    rows[2] = 1.0
    origin = tpukit.find_nan(lambda x: normalize(x).sum(), rows)
    assert (origin.operation, origin.made) == ("div", "NaN")


def test_sqrt_of_a_negative_variance():
    origin = tpukit.find_nan(grad_of(cross_entropy), Net(BadScale(), nnx.Rngs(0)), X, Y)
    assert (origin.operation, origin.layer_class, origin.part) == ("sqrt", "BadScale", "forward")
    assert origin.source == line_of("sqrt")
    assert origin.inputs[0].negatives == 6 and origin.inputs[0].max < 0


def bf16_softmax_loss(outputs, labels):
    """A softmax written by hand in bf16, on logits large enough to overflow its exp."""
    e = jnp.exp((outputs * 1000).astype(jnp.bfloat16))  # <- exp
    p = e / e.sum(-1, keepdims=True)
    return -jnp.log(jnp.take_along_axis(p, labels[:, None], -1).astype(jnp.float32)).mean()


def test_exp_overflowing_in_bf16_logits_is_named_before_the_nan_it_makes():
    def soft_loss(model, x, y):
        return bf16_softmax_loss(model(x), y)

    origin = tpukit.find_nan(grad_of(soft_loss), Net(Identity(), nnx.Rngs(0)), X, Y)
    assert (origin.operation, origin.made, origin.part) == ("exp", "inf", "loss")
    assert origin.source == line_of("exp")
    assert origin.inputs[0].dtype == "bf16" and origin.inputs[0].nans == 0
    assert origin.nan_at.startswith("div")  # e / e.sum(): inf / inf


def test_adam_with_eps_zero_is_the_optimizer_update():
    graphdef, params = nnx.split(Net(Identity(), nnx.Rngs(0)))
    adam = optax.adam(1e-3, eps=0.0)

    def train_step(params, opt_state, x, y):
        def loss(p):
            return cross_entropy(nnx.merge(graphdef, p), x, y)

        grads = jax.grad(loss)(params)
        updates, opt_state = adam.update(grads, opt_state, params)  # <- adam
        return optax.apply_updates(params, updates), opt_state

    origin = tpukit.find_nan(train_step, params, adam.init(params), X, Y)
    assert (origin.operation, origin.made, origin.part) == ("div", "NaN", "optimizer update")
    assert origin.source == line_of("adam") and "scale_by_adam" in origin.function
    assert all(r.zeros == r.size for r in origin.inputs)  # 0 / (sqrt(0) + 0)


def test_an_attention_row_masked_whole_is_the_softmax_in_the_attention_layer():
    mask = CAUSAL.copy()
    mask[2] = False
    origin = tpukit.find_nan(grad_of(masked_loss), Masked(nnx.Rngs(0)), X, mask, Y)
    assert (origin.operation, origin.function, origin.part) == ("sub", "softmax", "forward")
    assert (origin.layer, origin.layer_class) == ("attn", "Attention")
    assert origin.source == line_of("softmax")
    assert "NaN" in origin.made and origin.inputs[0].infinities > 0


def test_a_meant_minus_inf_mask_is_not_reported():
    assert tpukit.find_nan(grad_of(masked_loss), Masked(nnx.Rngs(0)), X, CAUSAL, Y) is None


def test_nan_in_one_example_is_reported_as_the_data():
    x = X.copy()
    x[3, 1] = np.nan

    def step(model, x, y):
        return nnx.value_and_grad(cross_entropy)(model, x, y)

    origin = tpukit.find_nan(step, Net(Identity(), nnx.Rngs(0)), x, Y)
    assert (origin.kind, origin.argument, origin.rows) == ("data", "x", (3,))
    assert origin.summary() == "the data: x already held NaN (row 3)"


def test_the_record_shows_as_text_and_html_and_the_model_is_unchanged():
    model = Net(Identity(), nnx.Rngs(0))
    before = jax.tree.map(np.array, nnx.state(model))
    origin = tpukit.find_nan(grad_of(custom_loss), model, X, Y)
    text, page = repr(origin), origin._repr_html_()
    assert text.splitlines()[0] == "First non-finite value: log"
    assert origin.summary() in text and line_of("log") in text
    assert '<div class="' in page and "log made -inf" in page and "<table>" in page
    after = jax.tree.map(np.array, nnx.state(model))
    assert jax.tree.all(jax.tree.map(np.array_equal, before, after))


def test_a_nan_made_on_one_device_of_a_split_array_is_found():
    devices = jax.devices()
    if len(devices) < 2:
        pytest.skip("needs several devices (the tests' conftest simulates 8 CPUs)")
    x = np.full((8 * len(devices), 4), 2.0, np.float32)
    x[0, 0] = -1.0  # on the first device only
    mesh = jax.sharding.Mesh(np.array(devices), ("data",))
    split = jax.device_put(x, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data")))

    def f(x):
        return jnp.sqrt(x - 1.0).sum()  # <- split

    origin = tpukit.find_nan(f, split)
    assert (origin.operation, origin.made, origin.source) == ("sqrt", "NaN", line_of("split"))


def test_a_function_that_is_not_callable_is_refused():
    with pytest.raises(tpukit.ArgumentError, match="not its result"):
        tpukit.find_nan(jnp.ones(3))


def test_tpu_nan_magic_shows_and_stores_the_record(shell, capsys):
    shell.user_ns.update(custom_loss=custom_loss, model=Net(Identity(), nnx.Rngs(0)), x=X, y=Y)
    result = shell.run_cell("%tpu_nan custom_loss(model, x, y)", store_history=False)
    assert result.success, result.error_in_exec
    assert shell.user_ns["custom_loss_nan"].operation == "log"
    assert "Stored as custom_loss_nan." in capsys.readouterr().out
    result = shell.run_cell("%tpu_nan custom_loss(model, f32[6,4], y)", store_history=False)
    assert "abstract shape" in str(result.error_in_exec)


# ------------------------------------------------------------------ through fit
def fit_error(model, optimizer, data, **options):
    with pytest.raises(tpukit.NonFiniteLossError) as caught:
        tpukit.fit(model, optimizer, data, epochs=1, batch_size=8, verbose=False, **options)
    return caught.value


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    return rng.normal(size=(32, 4)).astype(np.float32), rng.integers(0, 3, 32)


def masked_batch_loss(model, batch):
    return masked_loss(model, batch["x"], batch["mask"], batch["labels"])


def attention_data(x, y, whole_row: int | None) -> dict:
    """Each example's mask over the 8 rows of its batch: causal (every row keeps key 0,
    whatever the shuffle), and row ``whole_row`` of the dataset masked whole."""
    mask = np.tril(np.ones((8, 8), bool))[np.arange(len(x)) % 8]
    if whole_row is not None:
        mask[whole_row] = False
    return {"x": x, "mask": mask, "labels": y}


def constant_row(x, y):
    x = x.copy()
    x[2] = 1.0  # its spread is zero
    return x, y


# name: (model, optimizer, data from the fixture's, loss, what the origin must say)
FIT_CASES = {
    "division by zero in a normalization layer": (
        lambda: Net(Norm(), nnx.Rngs(0)),
        lambda: optax.sgd(0.1),
        constant_row,
        None,
        dict(operation="div", made="NaN", part="forward", layer="first", layer_class="Norm"),
        "div",
    ),
    "sqrt of a negative variance": (
        lambda: Net(BadScale(), nnx.Rngs(0)),
        lambda: optax.sgd(0.1),
        lambda x, y: (x, y),
        None,
        dict(operation="sqrt", made="NaN", part="forward", layer="first", layer_class="BadScale"),
        "sqrt",
    ),
    "exp overflowing in bf16 logits": (
        lambda: Net(Identity(), nnx.Rngs(0)),
        lambda: optax.sgd(0.1),
        lambda x, y: (x, y),
        bf16_softmax_loss,
        dict(operation="exp", made="inf", part="loss", layer=None),
        "exp",
    ),
    "adam with eps=0": (
        lambda: Net(Identity(), nnx.Rngs(0)),
        lambda: optax.adam(1e-3, eps=0.0),
        lambda x, y: (x, y),
        None,
        dict(operation="div", made="NaN", part="optimizer update"),
        None,  # optax's line, not the test's: see the assertion on ``function``
    ),
    "an attention row masked whole": (
        lambda: Masked(nnx.Rngs(0)),
        lambda: optax.sgd(0.1),
        lambda x, y: attention_data(x, y, whole_row=5),
        masked_batch_loss,
        dict(operation="sub", function="softmax", part="forward", layer="attn"),
        "softmax",
    ),
}


@pytest.mark.parametrize("case", FIT_CASES)
def test_fit_names_the_first_bad_operation_and_keeps_the_state(case, data):
    model_of, optimizer_of, data_of, loss, expected, marker = FIT_CASES[case]
    model = model_of()
    before = jax.tree.map(np.array, nnx.state(model))
    # unshuffled, the bad example is in the first batch: the model must keep its values
    error = fit_error(model, optimizer_of(), data_of(*data), loss=loss, shuffle=False)
    origin = error.origin
    assert error.step == 1 and origin is not None, str(error)
    assert {k: getattr(origin, k) for k in expected} == expected
    if marker is not None:
        assert origin.source == line_of(marker)
    else:
        assert "scale_by_adam" in origin.function
    assert f"The first non-finite value: {origin.summary()}." in str(error)
    after = jax.tree.map(np.array, nnx.state(model))  # neither the step nor its replay
    assert jax.tree.all(jax.tree.map(np.array_equal, before, after))


def test_fit_trains_through_a_meant_minus_inf_mask(data):
    model = Masked(nnx.Rngs(0))
    history = tpukit.fit(
        model,
        optax.sgd(0.1),
        attention_data(*data, whole_row=None),
        epochs=2,
        batch_size=8,
        loss=masked_batch_loss,
        verbose=False,
    )
    assert len(history["loss"]) == 2 and np.all(np.isfinite(history["loss"]))
    assert history.stopped is None


def test_fit_names_the_log_of_zero_in_a_custom_loss_and_keeps_the_state(data):
    model = Net(Identity(), nnx.Rngs(0))
    before = jax.tree.map(np.array, nnx.state(model))
    error = fit_error(model, optax.sgd(0.1), data, loss=log_loss)
    origin = error.origin
    assert (origin.operation, origin.part, origin.source) == ("log", "loss", line_of("log"))
    assert "The first non-finite value: log made -inf" in str(error)
    after = jax.tree.map(np.array, nnx.state(model))  # step 1 went bad: nothing applied
    assert jax.tree.all(jax.tree.map(np.array_equal, before, after))


def test_fit_reports_nan_in_the_data_as_the_dataset_example(data):
    x, y = data
    x = x.copy()
    x[13, 2] = np.nan
    error = fit_error(Net(Identity(), nnx.Rngs(0)), optax.sgd(0.1), (x, y))
    assert (error.origin.kind, error.origin.argument) == ("data", "train_data[0]")
    assert error.origin.rows == (13,)  # the dataset's row, whatever the shuffled batch
    assert re.search(r"train_data\[0\] already held NaN \(row 13\)", str(error))


# ------------------------------------------------------------------ through evaluate
def evaluate_warning(model, data, **options):
    with pytest.warns(tpukit.NonFiniteLossWarning) as caught:
        figures = tpukit.evaluate(model, data, batch_size=24, **options)
    (warning,) = [w.message for w in caught if isinstance(w.message, tpukit.NonFiniteLossWarning)]
    assert not np.isfinite(figures["loss"]) and warning.figures == figures
    return warning


def test_evaluate_names_the_first_bad_operation_in_a_warning(data):
    model = Net(Norm(), nnx.Rngs(0))
    before = jax.tree.map(np.array, nnx.state(model))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a finite evaluation says nothing
        assert np.isfinite(tpukit.evaluate(model, data, batch_size=24)["loss"])
    warning = evaluate_warning(model, constant_row(*data))
    origin = warning.origin
    assert (origin.operation, origin.made, origin.part) == ("div", "NaN", "forward")
    assert (origin.layer, origin.layer_class, origin.source) == ("first", "Norm", line_of("div"))
    assert f"the first non-finite value: {origin.summary()}" in str(warning)
    after = jax.tree.map(np.array, nnx.state(model))
    assert jax.tree.all(jax.tree.map(np.array_equal, before, after))


def test_evaluate_reports_nan_in_the_data_as_its_rows(data):
    x, y = data
    x = x.copy()
    x[30, 0] = np.nan  # in the last, smaller batch (rows 24 to 31)
    origin = evaluate_warning(Net(Identity(), nnx.Rngs(0)), (x, y)).origin
    assert (origin.kind, origin.argument, origin.rows) == ("data", "data[0]", (30,))
