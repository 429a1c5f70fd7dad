"""A ``fit`` call that repeats the last one on its model: the last call's set-up, taken whole.

A notebook calls ``fit`` again and again with the same model, data, optimizer and
settings (a few more epochs). Everything ``_setup.prepare`` checks and builds depends
only on those: the data's placement and checks, the model's split, the objective's
traces, the optimizer's program, the layout and the compiled steps. So the last
call's set-up (:class:`LastSetUp`, kept beside the model in its
``TrainingState.kept``) is taken again when the call is the same in each of them,
and only what can have changed is looked at:

- the model: the kept split's identity walk (``_kept_split``) finds it as the last
  call left it (the same graph definition);
- the data: the very array objects the copy on the devices came from (``_data.KeptData``);
  their contents are checked as always, while the call's first compiled call runs;
- the optimizer: the same object, or optax's same optimizer made again
  (``optax.adam(1e-3)`` in the call: :mod:`._optax_key`);
- the options that shape the set-up (loss, metrics, layout, NaN stop, batch sizes,
  steps per call, evaluation data): each the same object, or an equal number, string
  or flag (a list compared item by item). ``epochs``, ``seed``, ``shuffle``,
  ``callbacks`` and ``verbose`` are read from each call's own options.

A run that writes checkpoints is always set up afresh (its fingerprint is built from
the model). Whatever differs, the call is set up as before and becomes the last.

A call that shows no progress line (``verbose=False``) dispatches its first compiled
call before the model's walk and the optimizer's comparison, and makes them while the
device runs it (they cost a few hundred µs of a short call's host time otherwise);
should either fail, nothing of the call is applied or written back (:class:`StaleSetUp`)
and the call starts over, set up afresh.

Example::

    >>> last = LastSetUp(spec=None, evaluator=None, trainer=(None, ["accuracy"]),
    ...                  run=(128, None, "epoch"), optimizer=None)
    >>> last.same_settings((None, ["accuracy"]), (128, None, "epoch"))
    True
    >>> last.same_settings((None, ["accuracy"]), (64, None, "epoch"))
    False
"""

from __future__ import annotations

from typing import Any

from ._optax_key import same_optax

#: Values compared by ``==`` (anything else by identity): an equal one is the same setting.
_PLAIN = (int, float, bool, str, bytes, type(None))


def same(a: Any, b: Any) -> bool:
    """Whether two option values are the same setting: the same object, equal plain
    values, or lists, tuples and dicts of such, item by item.

    Example::

        >>> same(["accuracy", 1e-3], ["accuracy", 1e-3]), same([print], [print])
        (True, True)
        >>> same([lambda o, y: o], [lambda o, y: o])   # two functions: two metrics
        False
    """
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, _PLAIN):
        return a == b
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(map(same, a, b))
    if type(a) is dict:
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return False


def same_items(a: dict, b: dict) -> bool:
    """Whether two dicts of option values hold the same settings (:func:`same`, value by
    value; most are the very same objects)."""
    if a.keys() != b.keys():
        return False
    for name, value in a.items():
        other = b[name]
        if value is not other and not same(value, other):
            return False
    return True


def snapshot(value: Any) -> Any:
    """``value`` with its lists, tuples and dicts copied, item by item: what :func:`same`
    compares a later value with. The last call's settings hold the user's own list or
    dict, which may be changed in place (``metrics.append("top5_accuracy")``) before the
    next call passes that same object: compared with itself it would seem unchanged.

    Example::

        >>> metrics = ["accuracy"]
        >>> kept = snapshot(metrics)
        >>> metrics.append("top5_accuracy")
        >>> same(metrics, metrics), same(snapshot(metrics), kept)
        (True, False)
    """
    kind = type(value)
    if kind is list or kind is tuple:
        return kind(map(snapshot, value))
    if kind is dict:
        return {k: snapshot(v) for k, v in value.items()}
    return value


class StaleSetUp(Exception):
    """Raised inside a run, before anything is applied, when the model or optimizer of a
    call that took the last call's set-up turns out changed (checked while its first
    compiled call ran): the call starts over, set up afresh."""


class LastSetUp:
    """The set-up of the last ``fit`` call on a model (``spec``, a ``_setup.RunSpec``,
    and its ``evaluator``), with the settings it was made from: ``trainer`` and ``run``
    (tuples of option values, :func:`trainer_settings` and :func:`run_settings`) and
    the ``optimizer`` given. ``written`` is the state the call left in the model and its
    ``TrainingState`` (placed as the layout says), which the next call starts from as it
    is when the model and the optimizer state are still both of it."""

    def __init__(
        self, spec: Any, evaluator: Any, trainer: tuple, run: tuple, optimizer: Any
    ) -> None:
        self.spec = spec
        self.evaluator = evaluator
        self.trainer = trainer
        self.run = run
        self.optimizer = optimizer
        self.written: Any = None  # the run's ``_flat.FlatState``, set by its write-back

    def same_settings(self, trainer: tuple, run: tuple) -> bool:
        return same(trainer, self.trainer) and same(run, self.run)

    def same_optimizer(self, optimizer: Any) -> bool:
        """Whether ``optimizer`` is the last call's, or optax's same one made again."""
        last = self.optimizer
        return optimizer is last or (
            same_optax(optimizer.update, last.update) and same_optax(optimizer.init, last.init)
        )


def trainer_settings(options: Any) -> tuple:
    """What a ``TrainerOptions`` set up: every option (the layout included), its lists
    and dicts as they are now (:func:`snapshot`)."""
    return (
        options.loss,
        snapshot(options.metrics),
        options.mesh,
        snapshot(options.shard),
        options.sharding,
        options.stop_on_nan,
        options.find_nan_origin,
    )


def run_settings(options: Any) -> tuple:
    """What a ``RunOptions`` set up: the batch sizes, the steps per call, and whether
    there is evaluation data (whose arrays ``_data`` knows again) or a checkpoint
    folder (never repeated)."""
    return (
        options.batch_size,
        options.eval_batch_size,
        options.steps_per_execution,
        options.eval_data is None,
        options.checkpoint_dir is None,
    )
