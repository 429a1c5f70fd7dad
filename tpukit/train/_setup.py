"""Setting a run up: the one path from a call's arguments to a checked, ready run.

``fit``, ``Trainer.compile_step`` and evaluation all start here, so they check the
same things in the same order and agree on what the run is:

- :func:`prepare` turns the model, optimizer, :class:`TrainerOptions` and
  :class:`RunOptions` and ``train_data`` into a :class:`Prepared` run: the data
  source, the objective checked on one abstract batch, the :class:`RunSpec` (what
  stays fixed while the run goes), the state to start from (the optimizer state the
  model's :class:`TrainingState` kept, or a fresh one) and the :class:`Position`.
  ``fit`` runs it; ``compile_step`` compiles its first call (:meth:`Prepared.first_call`).
- :func:`evaluation` sets up an :class:`Evaluator` of in-memory data: the
  ``eval_data`` of a run and :func:`tpukit.evaluate` are the same code.
- :func:`executions` lists a run's compiled calls and their data, for the loop and for
  ``compile_step``.

Nothing is placed or compiled before every check has passed, except the data itself.

Example::

    >>> import numpy as np, optax
    >>> from flax import nnx
    >>> model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    >>> x, y = np.zeros((40, 3), np.float32), np.zeros(40, np.int32)
    >>> run = prepare(model, optax.sgd(0.1), TrainerOptions(), (x, y),
    ...               RunOptions(epochs=1, batch_size=8, steps_per_execution=2, verbose=False))
    >>> run.spec.steps_per_epoch, run.spec.steps_per_call
    (5, 2)
    >>> step, state, data = run.first_call()
    >>> step.name, sorted(data)
    ('fit_step', ['arrays', 'indices', 'start'])
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
import optax
from flax import nnx

from tpukit.compilation import NanOrigin, search
from tpukit.runtime import settled

from . import _steps
from ._again import LastSetUp, run_settings, trainer_settings
from ._data import (
    ResidentData,
    check_batch_size,
    data_source,
    epoch_indices,
    epoch_key,
    in_memory,
    kept_copy,
)
from ._exceptions import TrainingInputError
from ._flat import FlatState
from ._kept import KeptForModel
from ._kept_split import KeptSplit
from ._layout import place
from ._memo import graph_key
from ._mesh import Plan
from ._objective import Objective, checked_objective
from ._options import RunOptions, TrainerOptions
from ._program import OptimizerProgram, ProgramFingerprint
from ._state import Position, TrainingState
from ._validate import check_params


@dataclass(frozen=True, eq=False)  # holds arrays: compared by identity
class RunSpec:
    """Everything one ``fit`` call keeps fixed while it runs."""

    options: RunOptions
    plan: Plan
    graphdef: Any
    objective: Objective
    program: OptimizerProgram
    source: Any
    batch_size: int
    steps_per_epoch: int | None
    steps_per_call: int
    guard: bool
    fingerprint: ProgramFingerprint | None = None
    #: Whether a stop replays the bad step to find its first NaN (``find_nan_origin``).
    find_nan_origin: bool = True
    #: What calls on this set-up work out once (:meth:`once`), shared by the calls that
    #: repeat it (``_again``): the compiled steps, the sharding summary, ...
    memo: dict = field(default_factory=dict, repr=False)

    def once(self, name: Any, compute: Callable[[], Any]) -> Any:
        """``compute()``, worked out once for this set-up and the calls repeating it."""
        try:
            return self.memo[name]
        except KeyError:
            value = self.memo[name] = compute()
            return value

    @property
    def guard_mode(self) -> str:
        """How fit's calls check for non-finite values (see ``_steps._make_step``)."""
        return "call" if self.guard else "off"

    def with_options(self, options: RunOptions) -> RunSpec:
        """This set-up with another call's options (a call repeating it: ``_again``);
        the memo is shared. (``dataclasses.replace`` checks every field again, and
        ``copy.copy`` goes through ``__reduce_ex__``: 5 µs in a loop, 35 in situ.)"""
        spec = object.__new__(type(self))
        spec.__dict__.update(self.__dict__)
        object.__setattr__(spec, "options", options)
        return spec

    def settings(self) -> dict[str, Any]:
        """The settings a resumed run must share with the run that wrote the checkpoint."""
        return {
            "batch_size": self.batch_size,
            "n_examples": getattr(self.source, "n", None),
            "seed": self.options.seed,
            "shuffle": self.options.shuffle,
        }


class Evaluator:
    """Loss and metrics on in-memory data (eval mode, every example), in one compiled call."""

    def __init__(
        self,
        program: Callable[[int], Callable],
        batch_size: int,
        source: ResidentData,
        prefix: str = "val_",
        replay: Callable[[int], Callable] | None = None,
        name: str = "data",
    ):
        self.program = program  # batch size -> the jitted evaluation at that size
        self.batch_size = batch_size
        self.fn = program(batch_size)
        self.source = source
        self.prefix = prefix
        self._replay = replay  # batch size -> the same evaluation, unjitted, layers named
        self.name = name

    def __call__(
        self, params: Any, rest: Any, started: dict[str, jax.Array] | None = None
    ) -> dict[str, float]:
        """The figures on ``(params, rest)``, from the evaluation ``started`` on them
        when there is one (:meth:`start`)."""
        return self.read(self.start(params, rest) if started is None else started)

    def start(self, params: Any, rest: Any) -> dict[str, jax.Array]:
        """Dispatch the evaluation; its figures stay on the device until :meth:`read`
        (on several simulated CPU devices it is waited for: ``tpukit.runtime.settled``)."""
        return settled(self.fn(params, rest, self.source.arrays))

    def read(self, values: dict[str, jax.Array]) -> dict[str, float]:
        return {f"{self.prefix}{n}": float(v) for n, v in jax.device_get(values).items()}

    def origin(self, params: Any, rest: Any) -> NanOrigin | None:
        """Where this evaluation of ``(params, rest)`` made its first NaN or infinity: it
        runs once more, operation by operation (``tpukit.find_nan``'s search), on the
        same data; NaN in the data is reported as its rows. ``None`` when that run found
        no non-finite value or could not run (the figures are reported regardless)."""
        if self._replay is None:
            return None
        try:
            return search(
                self._replay(self.batch_size),
                (params, rest, self.source.arrays),
                {},
                names=("params", "model state", self.name),
            )
        except Exception:  # noqa: BLE001 - a failed diagnosis must not hide the figures
            return None


@dataclass(frozen=True, eq=False)  # holds arrays: compared by identity
class Prepared:
    """A run set up and checked: what it is (``spec``), the state it starts from
    (``(params, rest, opt_state)`` as a ``FlatState``, placed or not), where it starts,
    and its evaluation of ``eval_data``."""

    spec: RunSpec
    state: FlatState
    position: Position
    evaluator: Evaluator | None
    #: Whether the state is already placed (the state the last call wrote: ``_again``).
    placed: bool = False
    #: The checks of a repeated set-up left for while its first call runs (``_again``):
    #: ``True`` when the model and optimizer are those of the set-up; ``None``: none left.
    unverified: Callable[[], bool] | None = None

    def placed_state(self) -> FlatState:
        """The state placed on the devices as the layout says."""
        if self.placed:
            return self.state
        return FlatState.of(*self.spec.plan.put_state(*self.state.tree()))

    def first_call(self) -> tuple[_steps.Step, FlatState, dict]:
        """``(step, placed state, data)``: the first compiled call the run makes."""
        state = self.placed_state()
        _, step, data = next(executions(self.spec, self.position))
        return step, state, data


def prepare(
    model: nnx.Module,
    optimizer: optax.GradientTransformation,
    options: TrainerOptions,
    train_data: Any,
    run: RunOptions,
    kept: KeptForModel | None = None,
    defer: bool = False,
) -> Prepared:
    """Set a ``fit`` call up, every input checked before any step runs. In-memory data
    that ``kept`` holds a placed copy of (the same arrays) is not placed again, and a
    call that repeats the last one on the model takes its set-up (``_again``); ``defer``:
    the walk of its model and the comparison of its optimizer are left to the run, for
    while its first call runs (``Prepared.unverified``)."""
    if kept is not None and run.checkpoint_dir is None:
        again = _repeated(kept, model, optimizer, options, train_data, run, defer)
        if again is not None:
            return again
    plan = options.plan
    source, batch_size = data_source(
        train_data, plan, run.batch_size, run.epochs, "train_data", kept
    )
    batch = source.sample(batch_size)
    if kept is None:
        graphdef, params, rest = _steps.split_model(model)
    else:  # the states the last call wrote, when nothing changed the model since
        graphdef, params, rest = KeptSplit.beside(kept).split(model)
    check_params(model, params)
    objective = checked_objective(
        source,
        batch,
        graphdef,
        params,
        rest,
        "train_data",
        loss=options.loss,
        metrics=options.metrics,
    )
    evaluator = None
    if run.eval_data is not None:
        evaluator = evaluation(
            plan,
            run.eval_data,
            run.eval_batch_size or batch_size,
            graphdef,
            params,
            rest,
            objective=objective,
            name="eval_data",
            train_kind=source.kind,
            kept=kept,
        )
    if isinstance(source, ResidentData):
        steps_per_epoch = source.n // batch_size
    else:
        steps_per_epoch = len(source.data) if hasattr(source.data, "__len__") else None
    program = OptimizerProgram(optimizer, params)
    fingerprint = None
    if run.checkpoint_dir is not None:
        fingerprint = ProgramFingerprint.build(
            model, graphdef, params, rest, objective, program, batch
        )
    spec = RunSpec(
        options=run,
        plan=plan,
        graphdef=graphdef,
        objective=objective,
        program=program,
        source=source,
        batch_size=batch_size,
        steps_per_epoch=steps_per_epoch,
        steps_per_call=steps_per_call(run.steps_per_execution, steps_per_epoch),
        guard=options.stop_on_nan,
        fingerprint=fingerprint,
        find_nan_origin=options.find_nan_origin,
    )
    if kept is not None:
        kept.last = None
        if run.checkpoint_dir is None:
            trainer, settings = trainer_settings(options), run_settings(run)
            kept.last = LastSetUp(spec, evaluator, trainer, settings, optimizer)
    return _started(spec, model, (params, rest), evaluator)


def _repeated(
    kept: KeptForModel,
    model: nnx.Module,
    optimizer: optax.GradientTransformation,
    options: TrainerOptions,
    train_data: Any,
    run: RunOptions,
    defer: bool = False,
) -> Prepared | None:
    """The last call's set-up for a call that repeats it (``_again``), else ``None``
    (and nothing placed or counted). ``defer``: the model's walk and the optimizer's
    comparison are not made here but returned, to be made while the first call runs."""
    last: LastSetUp | None = kept.last
    if last is None or not last.same_settings(trainer_settings(options), run_settings(run)):
        return None
    spec = last.spec
    train = kept_copy(train_data, spec.plan, "train_data", kept)
    if train is None or train.source is not spec.source:
        return None
    copies = [train]
    if run.eval_data is not None:
        copy = kept_copy(run.eval_data, spec.plan, "eval_data", kept)
        if copy is None or copy.source is not last.evaluator.source:
            return None
        copies.append(copy)
    split = KeptSplit.beside(kept)
    found = split.kept
    if found is None or found[0] is not spec.graphdef:
        return None
    if not defer and not (split.unchanged(model) and last.same_optimizer(optimizer)):
        return None
    for copy in copies:
        copy.reuse()  # its contents are checked while the first call runs
    if not defer:
        return _started(spec.with_options(run), model, found[1], last.evaluator, last)
    state, key = TrainingState.of(model), spec.program.key

    def verify(kept_optimizer: bool) -> bool:
        """The checks left out above: the model as the kept split left it, the same
        optimizer, and the optimizer state taken from the model's training state
        (``kept_optimizer``) still whole (no array deleted); a fresh one needs none."""
        return (
            split.unchanged(model)
            and last.same_optimizer(optimizer)
            and (not kept_optimizer or state.optimizer_whole(key))
        )

    return _started(spec.with_options(run), model, found[1], last.evaluator, last, verify)


def _started(
    spec: RunSpec,
    model: nnx.Module,
    kept: Any,
    evaluator: Evaluator | None,
    last: LastSetUp | None = None,
    verify: Callable[[bool], bool] | None = None,
) -> Prepared:
    """The :class:`Prepared` run of ``spec`` from where the model's training got to: the
    model's states ``kept`` (``(params, rest)``, or the ``FlatState`` a call wrote), the
    optimizer state the model kept for this program (else a fresh one), and its position.
    The state is the one ``last`` wrote, placed already and never made a tree again,
    when model and optimizer state are both of it. ``verify(kept_optimizer)``: the
    repeated set-up's checks left for the run (``_repeated``), which check too that the
    kept optimizer state lost no array (else it is checked here)."""
    state, key = TrainingState.of(model), spec.program.key
    position = Position.continuing(state, spec.settings())
    written = last.written if last is not None else None
    if (
        written is not None
        and kept is written
        and state.holds_optimizer_of(written)
        and state.optimizer_key == key
        and (verify is not None or state.optimizer_whole(key))
    ):
        unverified = None if verify is None else functools.partial(verify, True)
        return Prepared(spec, written, position, evaluator, True, unverified)
    params, rest = kept if type(kept) is tuple else (kept.params, kept.rest)
    opt_state = state.optimizer_state(key)
    unverified = None if verify is None else functools.partial(verify, opt_state is not None)
    if opt_state is None:
        opt_state = spec.program.init(params)
    start = FlatState.of(params, rest, opt_state)
    return Prepared(spec, start, position, evaluator, False, unverified)


def evaluation(
    plan: Plan,
    data: Any,
    batch_size: int | None,
    graphdef: Any,
    params: Any,
    rest: Any,
    *,
    objective: Objective | None = None,
    loss: Callable | None = None,
    metrics: Any = None,
    name: str,
    train_kind: str | None = None,
    prefix: str = "val_",
    kept: KeptForModel | None = None,
) -> Evaluator:
    """The :class:`Evaluator` of in-memory ``data``, checked on one abstract batch.

    ``objective`` is the run's (``eval_data``, whose form must then be the training
    data's, ``train_kind``), or is made from ``loss`` and ``metrics`` (``evaluate``).
    ``batch_size`` ``None`` means 1024, rounded to the batch split; it is capped at
    the data's size. ``kept``: as for :func:`prepare`.
    """
    source = in_memory(data, name, plan, kept)
    if train_kind is not None and source.kind != train_kind:
        raise TrainingInputError(
            f"{name} is {source.kind} data but train_data is {train_kind} data; give both "
            "in the same form."
        )
    if batch_size is None:
        batch_size = max(plan.batch_shards, 1024 - 1024 % plan.batch_shards)
    batch_size = min(check_batch_size(batch_size, None, plan, name), source.n)
    batch = source.sample(batch_size)
    objective = checked_objective(
        source, batch, graphdef, params, rest, name, objective=objective, loss=loss, metrics=metrics
    )

    def program(size: int) -> Callable:
        return _steps.evaluation(graphdef, objective, plan, size, source.n)

    def replay(size: int) -> Callable:
        return _steps.evaluation_replay(graphdef, objective, plan, size, source.n)

    return Evaluator(program, batch_size, source, prefix, replay=replay, name=name)


def steps_per_call(value: int | str, steps_per_epoch: int | None) -> int:
    """Optimizer steps per compiled call, from ``steps_per_execution``."""
    if value == "epoch":
        if steps_per_epoch is None:
            raise TrainingInputError(
                "steps_per_execution='epoch' needs to know the epoch length, but train_data is an "
                "iterable without len(). Pass steps_per_execution=<int>, e.g. 100."
            )
        return steps_per_epoch
    return int(value) if steps_per_epoch is None else min(int(value), steps_per_epoch)


#: Epochs of shuffled indices sent to the devices in one transfer (a *block*): at most
#: this many bytes of them (one epoch when an epoch's indices are larger) ...
SHUFFLE_BLOCK_BYTES = 2**20
#: ... and at most this many epochs: a call whose block is not on the devices (the first,
#: or one with another seed) shuffles them all before its first step.
SHUFFLE_BLOCK_EPOCHS = 8


def shuffle_block(spec: RunSpec) -> int:
    """How many epochs' indices one block holds: a short epoch's shuffle and transfer
    cost a host more than its steps' dispatch (some 500 µs in situ per 8-step epoch),
    so several epochs are shuffled and sent at once and each call starts from its
    epoch's place in the block; a large epoch's indices go alone, as one block."""
    per_epoch = spec.steps_per_epoch * spec.batch_size * 4
    return max(1, min(SHUFFLE_BLOCK_EPOCHS, SHUFFLE_BLOCK_BYTES // max(per_epoch, 1)))


def block_of(spec: RunSpec, epoch: int) -> tuple[int, int]:
    """``(block, row)``: the block holding epoch ``epoch`` (counted over the model's
    training) and the row of the block where that epoch's first step's indices are."""
    per = shuffle_block(spec)
    return epoch // per, (epoch % per) * spec.steps_per_epoch


def block_indices_on_device(spec: RunSpec, block: int) -> jax.Array:
    """The shuffled example indices of block ``block``'s epochs (:func:`shuffle_block`),
    ``[epochs * steps, batch]``, put on every device. Each epoch's rows are the order
    :func:`~._data.epoch_indices` gives that epoch alone, from ``(seed, epoch)``."""
    options, per = spec.options, shuffle_block(spec)
    epochs = [
        epoch_indices(
            epoch_key(options.seed, epoch),
            spec.source.n,
            spec.steps_per_epoch,
            spec.batch_size,
            options.shuffle,
        )
        for epoch in range(block * per, (block + 1) * per)
    ]
    return spec.plan.put_replicated(epochs[0] if per == 1 else np.concatenate(epochs))


def shuffle_identity(spec: RunSpec, block: int) -> tuple:
    """What block ``block``'s indices (:func:`block_indices_on_device`) depend on: the
    data's size, the batch, the seed, the shuffle, the layout and the block."""
    options = spec.options
    return (
        spec.source.n,
        spec.steps_per_epoch,
        spec.batch_size,
        options.seed,
        options.shuffle,
        spec.plan,
        int(block),
    )


_STEPS: dict[tuple, _steps.Step] = {}


def _resident_step(spec: RunSpec, steps: int) -> _steps.Step:
    """``_steps.resident_execution`` for ``spec``'s calls of ``steps`` steps, looked up by
    the graph definition's :class:`~._memo.GraphKey` first (hashed once per object, where
    the builder's cache would walk the whole graph definition on every lookup)."""
    step = spec.memo.get(("step", steps))
    if step is not None:  # a call repeating the set-up (_again): no key to build
        return step
    key = (graph_key(spec.graphdef), spec.objective, spec.program, spec.plan, steps)
    key += (spec.guard_mode,)
    step = _STEPS.get(key)
    if step is None:
        step = _steps.resident_execution(
            spec.graphdef, spec.objective, spec.program, spec.plan, steps, spec.guard_mode
        )
        if len(_STEPS) >= 32:
            _STEPS.pop(next(iter(_STEPS)))
        _STEPS[key] = step
    spec.memo[("step", steps)] = step
    return step


def _placed_start(spec: RunSpec, start: int) -> jax.Array:
    """A call's first row in its block of indices, on the devices once per set-up: sent
    with each call as a NumPy scalar it was one more transfer on the call's critical path."""
    return place(np.int32(start), spec.plan.replicated())


def executions(
    spec: RunSpec, pos: Position, indices: jax.Array | None = None
) -> Iterator[tuple[int, _steps.Step, dict]]:
    """``(steps, step, data)`` for the rest of ``pos``'s epoch: each compiled call ``fit``
    makes, and the data it passes (``Trainer.compile_step`` takes the first).
    ``indices`` are the epoch's block (:func:`block_indices_on_device`), when they were
    already put on the devices."""
    if isinstance(spec.source, ResidentData):
        block, row = block_of(spec, pos.epoch_base + pos.epoch)
        if indices is None:
            indices = block_indices_on_device(spec, block)
        start = pos.step
        while start < spec.steps_per_epoch:
            steps = min(spec.steps_per_call, spec.steps_per_epoch - start)
            fn = _resident_step(spec, steps)
            at = row + start
            at = spec.once(("start", at), lambda at=at: _placed_start(spec, at))
            yield steps, fn, {"arrays": spec.source.arrays, "indices": indices, "start": at}
            start += steps
    else:
        fn = _steps.streamed_execution(
            spec.graphdef, spec.objective, spec.program, spec.plan, spec.guard_mode
        )
        for chunk, steps in spec.source.chunks(spec.steps_per_call, skip=pos.step):
            yield steps, fn, {"chunk": chunk}
