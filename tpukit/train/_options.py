"""fit's options, declared once: :class:`TrainerOptions` and :class:`RunOptions`.

Every option of :func:`tpukit.fit` is declared here, once, as a field of one of two
frozen dataclasses, with its default, its check and its documentation:

- :class:`TrainerOptions`: how every call trains the model and where it runs (the
  loss, the metrics, the NaN stop and the layout). :class:`~tpukit.train.Trainer`
  keeps one; :func:`tpukit.evaluate` takes its loss, metrics and layout.
- :class:`RunOptions`: what one call does (epochs, batches, evaluation,
  checkpoints, ...). ``Trainer.fit`` and ``Trainer.compile_step`` take these.

``fit``, ``Trainer`` and ``evaluate`` keep explicit keyword lists, for ``help()`` and
completion in editors; they hand their ``locals()`` to :meth:`TrainerOptions.pick` /
:meth:`RunOptions.pick`, and ``tests/test_train_options.py`` checks that their
keywords and defaults are exactly the declared ones. Their docstrings' option
entries are written from the field docs here (:func:`options_doc`).

The layout is one value: ``sharding=`` or ``mesh=``/``shard=`` become one
:class:`~tpukit.train._mesh.Plan`, ``TrainerOptions.plan``, by
:func:`~tpukit.train._mesh.resolve_plan`, the one function that reads them.

Example::

    >>> RunOptions(epochs=3, batch_size=128).steps_per_execution
    'epoch'
    >>> RunOptions(epochs=0)
    Traceback (most recent call last):
    ...
    tpukit._errors.TrainingInputError: epochs must be a positive whole number; got 0.
    >>> TrainerOptions(mesh="data=8").plan.kind
    'rules'
"""

from __future__ import annotations

import dataclasses
import os
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from tpukit._counts import as_count, is_integer

from ._again import same_items, snapshot
from ._exceptions import TrainingInputError, TrainingTypeError
from ._losses import Metric
from ._mesh import Plan, resolve_plan

RESUME_CHOICES = (False, True, "latest_good", "force")


def option(default: Any = dataclasses.MISSING, *, doc: str) -> Any:
    """A declared option: its default and the words ``help(fit)`` shows for it."""
    return field(default=default, metadata={"doc": doc})


def _holds_data(value: Any) -> bool:
    """Whether an option's value holds arrays (NumPy or JAX), in a tuple, list or dict."""
    if isinstance(value, (tuple, list)):
        return any(map(_holds_data, value))
    if isinstance(value, dict):
        return any(map(_holds_data, value.values()))
    return isinstance(value, (np.ndarray, jax.Array))


class _Declared:
    """What both declarations share: picking their options out of a call's keywords."""

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The options declared here, in order (read once per class: every call picks them)."""
        names = cls.__dict__.get("_names")
        if names is None:
            names = tuple(f.name for f in dataclasses.fields(cls) if f.init)
            cls._names = names
        return names

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """``{name: default}``; an option without a default is left out."""
        return {
            f.name: f.default
            for f in dataclasses.fields(cls)
            if f.init and f.default is not dataclasses.MISSING
        }

    @classmethod
    def pick(cls, keywords: Mapping[str, Any]) -> Any:
        """These options out of ``keywords`` (a call's ``locals()``, which hold others too).

        The same values as the last pick (each the same object, or an equal plain value;
        lists and dicts item by item, as ``_again.same`` tells) give the last pick's
        options again: a notebook calls ``fit`` with the same options cell after cell,
        and they are checked and the layout resolved (a ``Mesh`` built) once. A pick
        holding arrays (``eval_data``) is not kept: the class would hold the user's data
        alive after the model and the user let it go.

        Example::

            >>> RunOptions.pick({"epochs": 2, "seed": 1}) is RunOptions.pick({"epochs": 2, "seed": 1})
            True
            >>> RunOptions.pick({"epochs": 2, "seed": 1}) is RunOptions.pick({"epochs": 3, "seed": 1})
            False
        """
        values = {name: keywords[name] for name in cls.names() if name in keywords}
        last = cls.__dict__.get("_last")
        if last is not None and same_items(values, last[0]):
            return last[1]
        options = cls(**values)
        cls._last = None
        if not any(_holds_data(value) for value in values.values()):  # (let the user free it)
            cls._last = ({name: snapshot(value) for name, value in values.items()}, options)
        return options

    @classmethod
    def of(cls, options: Mapping[str, Any], *, call: str = "fit()") -> Any:
        """``cls(**options)``, with unknown names said plainly."""
        known = cls.names()
        unknown = [name for name in options if name not in known]
        if unknown:
            raise TrainingTypeError(
                f"{call} got unknown option{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))}; its options are {', '.join(known)}."
            )
        return cls(**options)


@dataclass(frozen=True, eq=False)  # holds functions and plans: compared by identity
class TrainerOptions(_Declared):
    """How every call trains the model, and where it runs: what a ``Trainer`` keeps."""

    loss: Callable | None = option(
        None,
        doc="``loss(outputs, labels)`` for pair data (default: softmax cross-entropy "
        "with integer labels), ``loss(model, batch)`` returning a scalar or "
        "``(scalar, outputs)`` for dict data.",
    )
    metrics: Sequence[Metric] | None = option(
        None,
        doc='names (``"accuracy"``, ``"top5_accuracy"``) or ``fn(outputs, labels)`` '
        "returning a batch mean. Default: accuracy when the labels are integers.",
    )
    mesh: Mesh | str | None = option(
        None,
        doc="your own layout, in the words of ``tpukit.compile(f, x, mesh=, shard=)``: "
        '``mesh="data=4,model=2"`` (or a ``jax.sharding.Mesh``). Batches are split '
        'along the mesh\'s ``"data"`` axis (its first axis if it has none). With '
        "``shard``, the same as ``sharding=MeshRules(mesh, shard)``.",
    )
    shard: Mapping[str, PartitionSpec | str] | None = option(
        None,
        doc='with ``mesh``: ``{r"l1/kernel": "None,model"}``, a partition spec (text '
        "or ``PartitionSpec``) for the model arrays whose '/'-joined path the regex "
        "finds (the first match wins; the rest, and optimizer arrays that mirror "
        "them, follow or are replicated).",
    )
    sharding: str | Plan | None = option(
        None,
        doc="a ready-made layout over every device of every process, instead of ``mesh``: "
        '``"data"`` (the default; each batch split over the devices, parameters and '
        'optimizer state replicated), ``"fsdp"`` (batch split, and every parameter and '
        "optimizer array of at least 1024 elements split on its largest dimension "
        "divisible by the device count), or a plan object: :class:`DataParallel`, "
        ":class:`FSDP`, or :class:`MeshRules`. The choice is printed when ``fit`` "
        "starts and kept in ``History.sharding``. With several processes "
        "(``tpukit.connect``), every process calls ``fit`` with the same arguments "
        "and data; only process 0 prints.",
    )
    stop_on_nan: bool = option(
        True,
        doc="stop with :class:`NonFiniteLossError` at the first step whose loss, "
        "gradients, new parameters or new optimizer state are not finite; that step "
        "is not applied, so the model, optimizer state and checkpoints keep the last "
        "finite values.",
    )
    find_nan_origin: bool = option(
        True,
        doc="when ``stop_on_nan`` stops a run, run the bad step once more, operation by "
        "operation, to name the operation that made its first NaN or infinity (the "
        "error's ``origin``). Nothing of it runs before a stop; a stop then costs a "
        "few compiles of the step (on a CPU, ResNet-18 about 55 s, GPT-small about "
        "4 min): ``False`` stops at once, without the origin.",
    )
    #: The layout, one value: ``sharding`` or ``mesh``/``shard`` read once.
    plan: Plan = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop_on_nan", flag(self.stop_on_nan, "stop_on_nan"))
        object.__setattr__(self, "find_nan_origin", flag(self.find_nan_origin, "find_nan_origin"))
        object.__setattr__(
            self, "plan", resolve_plan(self.sharding, mesh=self.mesh, shard=self.shard)
        )


@dataclass(frozen=True, eq=False)  # holds arrays: compared by identity
class RunOptions(_Declared):
    """What one ``fit`` call does; checked once, before any data is placed."""

    epochs: int = option(
        doc="how many epochs to train. With ``resume``, the run's total: the run "
        "continues from its checkpoint up to this epoch.",
    )
    batch_size: int | None = option(
        None,
        doc="examples per step (global, over all devices); a multiple of the device "
        "count. Optional for iterables (taken from the first batch).",
    )
    eval_data: Any = option(
        None,
        doc="arrays evaluated (eval mode, every example) after each epoch; figures "
        "appear in the history with a ``val_`` prefix.",
    )
    eval_batch_size: int | None = option(
        None, doc="examples per batch of ``eval_data``; default ``batch_size``."
    )
    steps_per_execution: int | str = option(
        "epoch",
        doc='optimizer steps per compiled call: ``"epoch"`` or an int. The host hears '
        "about progress once per call.",
    )
    shuffle: bool = option(
        True,
        doc="shuffle each epoch from ``(seed, epoch)``: a different order every epoch, "
        "the same for the same seed (the epoch counts over the model's training, so a "
        "second ``fit`` call continues the sequence).",
    )
    seed: int = option(0, doc="the seed of the shuffle.")
    checkpoint_dir: str | os.PathLike | None = option(
        None,
        doc="save checkpoints there (orbax) every ``checkpoint_every`` executions and "
        "at the end. Each records checksums of its arrays and a fingerprint of the "
        "training program (model, loss, optimizer). The folder is checked before the "
        "first step.",
    )
    checkpoint_every: int | None = option(
        None, doc="executions between checkpoints; default: each epoch."
    )
    resume: bool | str = option(
        False,
        doc="``True`` continues the run whose newest checkpoint is in ``checkpoint_dir``, "
        "after checking that the checkpoint is intact (files, checksums, finite values) "
        "and was written by the same program and settings; a damaged newest step is "
        'reported with the step to fall back to. ``"latest_good"`` falls back to the '
        "newest intact step (setting the damaged ones aside as ``<step>.damaged``); "
        '``"force"`` resumes though the program differs. After a NaN stop, ``True`` '
        "accepts a changed optimizer.",
    )
    callbacks: Sequence[Callable[[dict], Any]] = option(
        (), doc="functions called with each execution's figures; raising stops."
    )
    verbose: bool = option(
        True,
        doc="print the sharding line and show one line per epoch, updated in place (a "
        "widget, an HTML line in notebooks, text in terminals): running loss and "
        "metrics, steps/s and examples/s, and MFU where the device's peak is known.",
    )

    def __post_init__(self) -> None:
        epochs = as_count(self.epochs, "epochs", error=TrainingInputError)
        spe = self.steps_per_execution
        if not (isinstance(spe, str) and spe == "epoch"):
            if not is_integer(spe) or spe < 1:
                raise TrainingInputError(
                    f"steps_per_execution must be 'epoch' or a positive int; got {spe!r}."
                )
            object.__setattr__(self, "steps_per_execution", int(spe))
        if self.checkpoint_every is not None:
            every = as_count(self.checkpoint_every, "checkpoint_every", error=TrainingInputError)
            object.__setattr__(self, "checkpoint_every", every)
        if not isinstance(self.resume, bool) and self.resume not in RESUME_CHOICES[2:]:
            raise TrainingInputError(
                f"resume must be False, True, 'latest_good' or 'force'; got {self.resume!r}."
            )
        if self.resume and self.checkpoint_dir is None:
            raise TrainingInputError(
                f"resume={self.resume!r} needs checkpoint_dir=... (the folder of the run to "
                "continue)."
            )
        if self.eval_batch_size is not None:
            size = as_count(self.eval_batch_size, "eval_batch_size", error=TrainingInputError)
            object.__setattr__(self, "eval_batch_size", size)
        if not is_integer(self.seed):
            raise TrainingInputError(
                f"seed must be a whole number (the shuffle's seed); got {self.seed!r} "
                f"({type(self.seed).__name__}). Pass an int such as seed=0."
            )
        object.__setattr__(self, "epochs", epochs)
        object.__setattr__(self, "seed", int(self.seed))
        object.__setattr__(self, "shuffle", flag(self.shuffle, "shuffle"))
        object.__setattr__(self, "verbose", flag(self.verbose, "verbose", allowed=(0, 1, 2)))
        object.__setattr__(self, "callbacks", callback_list(self.callbacks))


def flag(value: Any, name: str, allowed: tuple[int, ...] = (0, 1)) -> bool:
    """A yes/no option as a ``bool``: ``True``/``False`` (NumPy's too) or the integers in
    ``allowed`` (``verbose=0``, as Keras writes it); anything else (``"no"``, ``None``)
    is refused, never read as ``bool("no")``.

        >>> flag(0, "shuffle"), flag(np.True_, "shuffle")
        (False, True)
        >>> flag("no", "shuffle")
        Traceback (most recent call last):
        tpukit._errors.TrainingInputError: shuffle must be True or False; got 'no' (str).
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if is_integer(value) and int(value) in allowed:
        return bool(int(value))
    raise TrainingInputError(
        f"{name} must be True or False; got {value!r} ({type(value).__name__})."
    )


def callback_list(value: Any) -> tuple[Callable, ...]:
    """``callbacks`` as a tuple of functions: ``None`` is none, one function is one; a
    string or anything in the list that is not callable is refused before anything runs."""
    if value is None:
        return ()
    if callable(value):
        return (value,)
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TrainingInputError(
            f"callbacks must be a list of functions, each called with an execution's "
            f"figures; got {value!r} ({type(value).__name__})."
        )
    wrong = [item for item in value if not callable(item)]
    if wrong:
        raise TrainingInputError(
            f"callbacks must be functions, each called with an execution's figures; got "
            f"{wrong[0]!r} ({type(wrong[0]).__name__}) in the list."
        )
    return tuple(value)


#: fit's options, in the order of its signature.
FIT_OPTIONS = (
    "epochs",
    "batch_size",
    "loss",
    "metrics",
    "eval_data",
    "eval_batch_size",
    "steps_per_execution",
    "shuffle",
    "seed",
    "checkpoint_dir",
    "checkpoint_every",
    "resume",
    "callbacks",
    "stop_on_nan",
    "find_nan_origin",
    "mesh",
    "shard",
    "sharding",
    "verbose",
)
#: The options ``evaluate`` shares with ``fit`` (its ``batch_size`` defaults to 1024).
EVALUATE_OPTIONS = ("batch_size", "loss", "metrics", "mesh", "shard", "sharding")
#: What ``Trainer.compile_step`` fills in when not given: it compiles one call.
COMPILE_STEP_DEFAULTS = {"epochs": 1}


def options_doc(*names: str, indent: int = 8) -> str:
    """The ``Args:`` entries of the options ``names``, from their declarations."""
    docs = {
        f.name: f.metadata["doc"]
        for cls in (TrainerOptions, RunOptions)
        for f in dataclasses.fields(cls)
        if f.init
    }
    width = 88 - indent
    lines = []
    for name in names:
        entry = textwrap.wrap(f"{name}: {docs[name]}", width, subsequent_indent="    ")
        lines += [" " * indent + line for line in entry]
    return "\n".join(lines)


def with_options_doc(*names: str) -> Callable[[Callable], Callable]:
    """Fill the ``{options}`` line of a docstring with :func:`options_doc` of ``names``."""

    def document(fn: Callable) -> Callable:
        fn.__doc__ = (fn.__doc__ or "").replace("        {options}", options_doc(*names))
        return fn

    return document
