"""fit's options are declared once (``_options``), and every entry point reads them there.

``fit``, ``Trainer``, ``Trainer.compile_step`` and ``evaluate`` keep explicit keyword
lists for ``help()`` and editors; these tests hold them to the one declaration, so
that an option added, renamed or given another default in one place fails here.
"""

import dataclasses
import gc
import inspect
import weakref

import numpy as np
import optax
import pytest
from flax import nnx

import tpukit
from tpukit._errors import TrainingInputError
from tpukit.train import Trainer, evaluate, fit
from tpukit.train._mesh import resolve_plan
from tpukit.train._options import (
    COMPILE_STEP_DEFAULTS,
    EVALUATE_OPTIONS,
    FIT_OPTIONS,
    RunOptions,
    TrainerOptions,
)

rng = np.random.default_rng(0)
X = rng.normal(size=(64, 8)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int32)


def declared(*classes) -> dict[str, tuple]:
    """``{name: (default, annotation)}`` of the declared options of ``classes``."""
    return {
        f.name: (f.default, f.type) for cls in classes for f in dataclasses.fields(cls) if f.init
    }


def keywords(fn) -> dict[str, tuple]:
    """``{name: (default, annotation)}`` of ``fn``'s keyword-only parameters."""
    return {
        p.name: (dataclasses.MISSING if p.default is p.empty else p.default, p.annotation)
        for p in inspect.signature(fn).parameters.values()
        if p.kind is p.KEYWORD_ONLY
    }


def test_each_option_is_declared_once():
    trainer, run = set(TrainerOptions.names()), set(RunOptions.names())
    assert not trainer & run
    assert trainer | run == set(FIT_OPTIONS)
    assert len(FIT_OPTIONS) == len(set(FIT_OPTIONS))


def test_fit_takes_exactly_the_declared_options_with_their_defaults():
    assert keywords(fit) == declared(TrainerOptions, RunOptions)
    assert tuple(keywords(fit)) == FIT_OPTIONS  # the order help(fit) shows
    assert list(inspect.signature(fit).parameters)[:3] == ["model", "optimizer", "train_data"]


def test_trainer_takes_exactly_the_trainer_options():
    assert keywords(Trainer.__init__) == declared(TrainerOptions)
    assert tuple(keywords(Trainer.__init__)) == TrainerOptions.names()


def test_evaluate_takes_its_share_of_the_options_with_the_same_defaults():
    every = declared(TrainerOptions, RunOptions)
    assert keywords(evaluate) == {name: every[name] for name in EVALUATE_OPTIONS}


def test_help_shows_every_option_from_its_declaration():
    for fn, names in ((fit, FIT_OPTIONS), (Trainer, TrainerOptions.names())):
        doc = inspect.getdoc(fn)
        assert "{options}" not in doc
        for f in dataclasses.fields(TrainerOptions) + dataclasses.fields(RunOptions):
            if f.name in names:
                first_words = " ".join(f.metadata["doc"].split()[:6])
                assert f"{f.name}: {first_words}" in " ".join(doc.split()), f.name


def test_trainer_fit_and_compile_step_check_options_against_the_declaration():
    trainer = Trainer(nnx.Linear(8, 2, rngs=nnx.Rngs(0)), optax.sgd(0.1))
    with pytest.raises(tpukit.TpukitError, match=r"fit\(\) got unknown option 'epoch'.*epochs"):
        trainer.fit((X, Y), epoch=1, batch_size=16)
    with pytest.raises(TypeError, match=r"compile_step\(\) got unknown option 'mesh'"):
        trainer.compile_step((X, Y), batch_size=16, mesh="data=8")  # a Trainer option
    with pytest.raises(ValueError, match="epochs must be a positive whole number"):
        trainer.compile_step((X, Y), batch_size=16, epochs=0)
    assert COMPILE_STEP_DEFAULTS == {"epochs": 1}
    step = trainer.compile_step((X, Y), batch_size=16)  # epochs may be left out
    assert step.name == "fit_step"


def test_the_layout_is_one_value_read_by_one_function():
    plan = resolve_plan(mesh="data=4,model=2", shard={"kernel": "None,model"})
    spelled = {"mesh": "data=4,model=2", "shard": {"kernel": "None,model"}}
    assert TrainerOptions(**spelled).plan == plan
    assert Trainer(nnx.Linear(8, 2, rngs=nnx.Rngs(0)), optax.sgd(0.1), **spelled).plan == plan
    assert TrainerOptions(sharding=plan).plan is plan
    assert TrainerOptions().plan == resolve_plan("data")
    with pytest.raises(ValueError, match="either sharding= or mesh="):
        evaluate(nnx.Linear(8, 2, rngs=nnx.Rngs(0)), (X, Y), sharding="fsdp", mesh="data=8")


def test_fits_evaluation_of_eval_data_is_evaluate():
    model = nnx.Linear(8, 2, rngs=nnx.Rngs(0))
    history = fit(
        model,
        optax.adam(1e-2),
        (X, Y),
        epochs=2,
        batch_size=16,
        eval_data=(X, Y),
        eval_batch_size=16,
        verbose=False,
    )
    figures = evaluate(model, (X, Y), batch_size=16)
    last = history.epochs[-1]
    assert (last["val_loss"], last["val_accuracy"]) == (figures["loss"], figures["accuracy"])


def test_a_second_trainer_on_one_model_continues_where_the_first_stopped():
    model = nnx.Linear(8, 2, rngs=nnx.Rngs(0))
    Trainer(model, optax.sgd(0.1)).fit((X, Y), epochs=1, batch_size=16, verbose=False)
    second = Trainer(model, optax.sgd(0.1))
    assert (second.state.epochs_done, second.state.steps_done) == (1, 4)
    second.fit((X, Y), epochs=1, batch_size=16, verbose=False)
    assert (second.state.epochs_done, second.state.steps_done) == (2, 8)


def test_options_are_picked_again_only_when_a_value_changed():
    model = nnx.Linear(8, 2, rngs=nnx.Rngs(0))
    metrics = ["accuracy"]
    first = Trainer(model, optax.sgd(0.1), metrics=metrics, sharding="data")
    again = Trainer(model, optax.sgd(0.1), metrics=["accuracy"], sharding="data")
    assert again.options is first.options  # checked, and the layout resolved, once
    metrics.append("top5_accuracy")  # the same list, changed in place: other options
    changed = Trainer(model, optax.sgd(0.1), metrics=metrics, sharding="data")
    assert changed.options is not first.options
    assert changed.options.metrics == ["accuracy", "top5_accuracy"]
    assert Trainer(model, optax.sgd(0.1), sharding="fsdp").options.plan.kind == "fsdp"
    with pytest.raises(TrainingInputError):  # a value refused is refused every time
        RunOptions.pick({"epochs": 0})
    with pytest.raises(TrainingInputError):
        RunOptions.pick({"epochs": 0})


def test_options_holding_data_are_not_kept_after_the_pick():
    """The pick memo lives on the class: kept, it would hold a user's ``eval_data`` alive
    after the model and the user let it go."""
    x = np.zeros((16, 3), np.float32)
    gone = weakref.ref(x)
    RunOptions.pick({"epochs": 1, "eval_data": (x, np.zeros(16, np.int32))})
    del x
    gc.collect()
    assert gone() is None
    plain = RunOptions.pick({"epochs": 2})
    assert RunOptions.pick({"epochs": 2}) is plain  # plain settings still picked once
