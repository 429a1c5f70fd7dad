"""Reading call lines and HLO shape literals, as %tpu_compile does."""

import jax.numpy as jnp
import numpy as np
import pytest

import tpukit
from tpukit._errors import CallLineError, ShapeSpecError
from tpukit.compilation import parse_call_line


def f(*args, **kwargs):
    return args, kwargs


@pytest.mark.parametrize(
    "text, shape, dtype",
    [
        ("f32[128,784]", (128, 784), jnp.float32),
        ("bf16[8, 224, 224, 3]", (8, 224, 224, 3), jnp.bfloat16),
        ("s32[]", (), jnp.int32),
        ("pred[4]", (4,), jnp.bool_),
        ("u8[2,3]{1,0}", (2, 3), jnp.uint8),
        ("f8e4m3fn[16]", (16,), jnp.float8_e4m3fn),
    ],
)
def test_shape_literals_read_like_hlo(text, shape, dtype):
    spec = tpukit.shape(text)
    assert spec.shape == shape
    assert spec.dtype == jnp.dtype(dtype)


def test_format_shape_round_trips():
    for text in ["f32[128,784]", "bf16[8,224,224,3]", "s32[]", "pred[1]"]:
        assert tpukit.format_shape(tpukit.shape(text)) == text


@pytest.mark.parametrize("bad", ["float32[3]", "f32(3)", "f32[3,,4]", "f32[-1]", "f32[a]", "q8[2]"])
def test_bad_shape_strings_name_the_valid_forms(bad):
    with pytest.raises(ShapeSpecError) as info:
        tpukit.shape(bad)
    message = str(info.value)
    assert bad.split("[")[0] in message or bad in message
    assert "f32[128,784]" in message  # says what a valid shape looks like


def test_call_line_mixes_data_shapes_keywords_and_statics():
    data = np.zeros((4, 3), np.float32)
    spec = parse_call_line(
        'f(data, bf16[n, 7], "f32[9]", 3, scale=s32[], name="relu")', {"f": f, "data": data, "n": 5}
    )
    assert spec.function is f
    assert spec.function_name == "f"
    first, second, text, three = spec.args
    assert first is data
    assert (second.shape, second.dtype) == ((5, 7), jnp.bfloat16)
    assert text == "f32[9]"  # a shape inside a string stays a string
    assert three == 3
    assert spec.kwargs["scale"].shape == ()
    assert spec.kwargs["name"] == "relu"


def test_call_line_accepts_attribute_callees_and_star_arguments():
    class Model:
        def apply(self, *args):
            return args

    model = Model()
    spec = parse_call_line("model.apply(*xs, **kw)", {"model": model, "xs": (1, 2), "kw": {"a": 1}})
    assert spec.function_name == "model.apply"
    assert spec.args == (1, 2)
    assert spec.kwargs == {"a": 1}


@pytest.mark.parametrize(
    "line, expected",
    [
        ("f(", "Cannot read"),
        ("x + 1", "not a function call"),
        ("", "No call given"),
        ("g(data)", "'g' is not defined"),
        ("f(missing)", "'missing' is not defined"),
        ("f(q32[4])", "neither a name in the notebook nor a dtype"),
        ("f(f32[k])", "could not be evaluated"),
        ("data(1)", "not a function"),
        ("f(1 / 0)", "ZeroDivisionError"),
    ],
)
def test_bad_call_lines_get_a_short_clear_error(line, expected):
    with pytest.raises(CallLineError) as info:
        parse_call_line(line, {"f": f, "data": np.zeros(2)})
    assert expected in str(info.value)
