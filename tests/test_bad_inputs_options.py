"""Options taken at their meaning or refused in one line before anything runs: flags
given as strings, seeds and callbacks of the wrong kind, a batch size of 0, HLO of two
entries or an unknown element type, sizes written with quotes or spaces."""

import numpy as np
import optax
import pytest
from flax import nnx

import tpukit
from tpukit.train._exceptions import TrainingInputError
from tpukit.train._options import RunOptions, TrainerOptions


@pytest.mark.parametrize("name", ["shuffle", "verbose"])
@pytest.mark.parametrize("value", ["no", "False", None, 0.5])
def test_a_run_flag_that_is_not_a_bool_is_refused(name, value):
    with pytest.raises(TrainingInputError, match=rf"^{name} must be True or False; got "):
        RunOptions(epochs=1, **{name: value})


def test_stop_on_nan_as_a_string_is_refused_and_flags_keep_their_meaning():
    with pytest.raises(TrainingInputError, match="stop_on_nan must be True or False; got 'no'"):
        TrainerOptions(stop_on_nan="no")
    assert TrainerOptions(stop_on_nan=np.False_).stop_on_nan is False
    options = RunOptions(epochs=1, shuffle=0, verbose=2)  # as Keras writes them
    assert options.shuffle is False and options.verbose is True


@pytest.mark.parametrize("seed", ["abc", None, 1.5, "3"])
def test_a_seed_that_is_not_a_whole_number_is_one_line(seed):
    with pytest.raises(TrainingInputError, match=r"^seed must be a whole number"):
        RunOptions(epochs=1, seed=seed)


@pytest.mark.parametrize("callbacks", [[42], "abc", 7, [print, "x"]])
def test_callbacks_that_are_not_functions_are_refused(callbacks):
    with pytest.raises(TrainingInputError, match=r"^callbacks must be"):
        RunOptions(epochs=1, callbacks=callbacks)


def test_callbacks_none_is_none_and_one_function_is_one():
    assert RunOptions(epochs=1, callbacks=None).callbacks == ()
    assert RunOptions(epochs=1, callbacks=print).callbacks == (print,)


def test_an_eval_batch_size_of_zero_is_refused_not_the_training_batch():
    with pytest.raises(TrainingInputError, match="eval_batch_size must be a positive whole"):
        RunOptions(epochs=1, eval_batch_size=0)


def test_fit_refuses_a_bad_callback_before_the_first_step():
    model = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
    before = np.asarray(model.kernel[...]).copy()
    x, y = np.ones((16, 4), np.float32), np.zeros(16, np.int32)
    with pytest.raises(TrainingInputError, match="callbacks must be"):
        tpukit.fit(model, optax.sgd(0.1), (x, y), epochs=1, batch_size=8, callbacks=[42])
    assert np.array_equal(before, np.asarray(model.kernel[...]))
