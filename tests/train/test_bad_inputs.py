"""Options taken at their meaning or refused in one line before anything runs: flags
given as strings, seeds and callbacks of the wrong kind, a batch size of 0, HLO of two
entries or an unknown element type, sizes written with quotes or spaces."""

import warnings

import numpy as np
import optax
import pytest
from flax import nnx

import tpukit
from tests._support.data import HLO_DATA
from tpukit._errors import HloTextError
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
    with pytest.raises(TrainingInputError, match="find_nan_origin must be True or False; got"):
        TrainerOptions(find_nan_origin="off")
    assert TrainerOptions(find_nan_origin=0).find_nan_origin is False
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


# -- shapes, HLO text and sizes -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "narrowed"), [("f64[4]", "f32"), ("c128[2]", "c64"), ("s64[]", "s32")]
)
def test_a_64_bit_shape_with_x64_off_says_it_is_compiled_in_32_bits(text, narrowed):
    from tpukit.compilation._shapes import PrecisionWarning

    with pytest.warns(
        PrecisionWarning, match=rf"compiled in 32 bits \(\w+ -> {narrowed}\).*jax_enable_x64"
    ):
        tpukit.shape(text)


TWO_ENTRIES = """HloModule m
ENTRY %a (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%x)
}
ENTRY %b (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%x)
}
"""


def test_hlo_text_with_two_entry_computations_is_refused():
    with pytest.raises(HloTextError, match="two ENTRY computations, 'a' and 'b'"):
        tpukit.hlo.parse_hlo(TWO_ENTRIES)


def test_an_unknown_element_type_is_not_silently_zero_bytes():
    from tpukit.hlo.text._model import HloShape

    assert HloShape("f6e3m2fn", (16,)).nbytes == 12  # a type newer than the table: 6 bits
    with pytest.raises(HloTextError, match="Unknown HLO element type 'zz'"):
        _ = HloShape("zz", (4,)).nbytes


def test_memory_view_of_an_hlo_program_takes_a_size_with_a_unit_and_quotes():
    from tpukit.hlo import parse_bytes

    program = tpukit.hlo.open(HLO_DATA / "jax_mlp.hlo", stage="optimized")
    assert program.memory_view(capacity="16GiB").capacity == 16 * 2**30
    assert parse_bytes("'16 GiB'") == parse_bytes('"16GiB"') == 16 * 2**30


class Sized:
    """An iterable whose len() says 0 and whose every pass is counted."""

    def __init__(self, length):
        self.length, self.passes = length, 0

    def __len__(self):
        return self.length

    def __iter__(self):
        self.passes += 1
        return iter([(np.ones((8, 4), np.float32), np.zeros(8, np.int32))] * 2)


def test_streamed_data_whose_len_is_zero_is_refused_and_each_pass_is_used():
    from tpukit.train._data import StreamedData
    from tpukit.train._mesh import resolve_plan

    plan = resolve_plan(None, mesh=None, shard=None)
    with pytest.raises(TrainingInputError, match=r"len\(\) of it is 0"):
        StreamedData(Sized(0), plan, None, "train_data", 1)
    data = Sized(2)
    source = StreamedData(data, plan, None, "train_data", 1)
    assert data.passes == 1 and len(list(source.chunks(2))) == 1 and data.passes == 1


def test_a_batch_of_another_width_in_a_stream_is_one_line():
    from tpukit.train._data import StreamedData
    from tpukit.train._mesh import resolve_plan

    y = np.zeros(8, np.int32)
    batches = [(np.ones((8, 4), np.float32), y), (np.ones((8, 5), np.float32), y)]
    source = StreamedData(batches, resolve_plan(None, mesh=None, shard=None), None, "data", 1)
    with pytest.raises(TrainingInputError, match=r"shapes \[\[8, 5\], \[8\]\], but its first"):
        list(source.chunks(1))


def _stopped_two_steps_into_an_epoch(x, y):
    """A model whose fit was stopped by ^C (from a callback) after 2 of 8 steps."""
    model = nnx.Linear(4, 2, rngs=nnx.Rngs(0))

    def stop(record):
        if record["step"] >= 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tpukit.fit(
            model, optax.sgd(0.1), (x, y), epochs=1, batch_size=8, steps_per_execution=2,
            callbacks=[stop], verbose=False,
        )  # fmt: skip
    return model


def test_a_fit_that_cannot_finish_a_stopped_epoch_says_its_steps_stay():
    from tpukit.train import TrainingState

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(64, 4)).astype(np.float32), np.zeros(64, np.int32)
    kw = dict(epochs=1, steps_per_execution=2, verbose=False)
    # The same settings finish the stopped epoch: 6 steps more, and not a word.
    model = _stopped_two_steps_into_an_epoch(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tpukit.fit(model, optax.sgd(0.1), (x, y), batch_size=8, **kw)
    assert TrainingState.of(model).steps_done == 8
    # Another batch size starts a new epoch; the 2 steps stay in the model: said so.
    model = _stopped_two_steps_into_an_epoch(x, y)
    with pytest.warns(UserWarning, match=r"stopped 2 steps into epoch 1; .*batch_size 8 -> 16"):
        tpukit.fit(model, optax.sgd(0.1), (x, y), batch_size=16, **kw)
    assert TrainingState.of(model).steps_done == 2 + 4
    # Streamed data cannot continue an epoch of arrays either.
    model = _stopped_two_steps_into_an_epoch(x, y)
    stream = [(x[i : i + 8], y[i : i + 8]) for i in range(0, 64, 8)]
    with pytest.warns(UserWarning, match=r"examples 64 -> streamed\), so those 2 steps stay"):
        tpukit.fit(model, optax.sgd(0.1), stream, batch_size=8, **kw)
    assert TrainingState.of(model).in_epoch is None


def test_tpu_memory_of_a_lambda_is_stored_by_the_name_it_was_called_with(shell, capsys):
    shell.run_cell("lam = lambda x: x * 2")
    view = shell.run_line_magic("tpu_memory", "--capacity '16 GiB' lam(f32[8])")
    assert view.capacity == 16 * 2**30  # the quotes around the size are the shell's, not it
    assert (
        shell.user_ns["lam_memory"] is view and "Stored as lam_memory." in capsys.readouterr().out
    )
