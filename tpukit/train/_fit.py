"""``fit``: train an NNX model with an optax optimizer, many steps per compiled call.

The host's job shrinks to starting executions and reading a handful of numbers
back. Each execution is one :func:`jax.jit` call that runs ``steps_per_execution``
optimizer steps in a :func:`jax.lax.scan` on device-resident (or streamed) data,
accumulating loss and metrics on the device; the host fetches them once per
execution to advance the progress bar and the :class:`History`.

:class:`Trainer` keeps what every call shares (``_options.TrainerOptions``: loss,
metrics, the NaN stop, the layout). Each call's options become one
``_options.RunOptions``; ``_setup.prepare`` checks the data, model and loss and
builds the run; ``fit`` restores a checkpoint when asked and hands a complete
``_run.Run`` the placed state, and ``compile_step`` compiles the run's first call.
The model is updated in place, NNX style, and keeps what carries over to the next
call in its ``TrainingState`` (``_state``): the epoch and step counts, and the
optimizer state.

Example::

    >>> import optax
    >>> from flax import nnx
    >>> model = nnx.Linear(8, 4, rngs=nnx.Rngs(0))
    >>> x = np.random.default_rng(0).normal(size=(64, 8)).astype(np.float32)
    >>> y = (x[:, 0] > 0).astype(np.int32)
    >>> history = fit(model, optax.adam(1e-2), (x, y), epochs=2, batch_size=16,
    ...               eval_data=(x, y), verbose=False)
    >>> len(history.epochs), sorted(history.epochs[-1])[-2:]
    (2, ['val_accuracy', 'val_loss'])
    >>> TrainingState.of(model).epochs_done   # a second fit continues from here
    2
"""

from __future__ import annotations

import functools
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import jax
import optax
from flax import nnx
from jax.sharding import Mesh, PartitionSpec

import tpukit.checkpoint as _checkpoint
from tpukit._errors import user_facing
from tpukit.compilation import Compiled, Signature, bind_arguments, compile_lowering

from ._again import StaleSetUp
from ._collaborators import Collaborators
from ._data import StaleData
from ._flat import FlatState
from ._guard import NonFiniteLossError
from ._history import History
from ._kept import KeptForModel
from ._losses import Metric
from ._memory_fit import check_fits, explained_out_of_memory, fit_fixes
from ._mesh import Plan
from ._options import (
    COMPILE_STEP_DEFAULTS,
    FIT_OPTIONS,
    RunOptions,
    TrainerOptions,
    with_options_doc,
)
from ._program import ProgramFingerprint
from ._run import Run
from ._setup import RunSpec, prepare
from ._state import Position, TrainingState
from ._validate import check_module, check_optimizer

__all__ = ["NonFiniteLossError", "Trainer", "fit"]


@with_options_doc(*TrainerOptions.names())
class Trainer:
    """Train one model with one optimizer, loss and metrics; :func:`fit` is built on it.

    ``Trainer(model, optax.adam(1e-3)).fit(data, epochs=1, batch_size=128)`` is the
    same as ``fit(model, optax.adam(1e-3), data, epochs=1, batch_size=128)``, and
    :meth:`fit` takes the same options as :func:`fit`. What carries over from one
    call to the next belongs to the model (:attr:`state`, a
    :class:`~tpukit.train.TrainingState` that tpukit keeps beside the model, not in it),
    so a second ``Trainer`` or ``fit`` call on the same model continues where the first
    one stopped.
    :meth:`compile_step` gives the compiled call ``fit`` runs, to graph, profile
    or read.

    Args:
        model: an ``nnx.Module``; updated in place by :meth:`fit`.
        optimizer: an ``optax.GradientTransformation``, e.g. ``optax.adam(1e-3)``.
        {options}

    Example::

        >>> trainer = Trainer(nnx.Linear(8, 4, rngs=nnx.Rngs(2)), optax.adam(1e-3))
        >>> trainer.options.plan.kind, trainer.state.epochs_done
        ('data', 0)
    """

    def __init__(
        self,
        model: nnx.Module,
        optimizer: optax.GradientTransformation,
        *,
        loss: Callable | None = None,
        metrics: Sequence[Metric] | None = None,
        mesh: Mesh | str | None = None,
        shard: Mapping[str, PartitionSpec | str] | None = None,
        sharding: str | Plan | None = None,
        stop_on_nan: bool = True,
        find_nan_origin: bool = True,
    ):
        given = locals()
        check_module(model)  # its parameters: when a call splits it (_setup.prepare)
        check_optimizer(optimizer)
        self.model = model
        self.optimizer = optimizer
        #: The options every call of this trainer shares (``_options.TrainerOptions``).
        self.options: TrainerOptions = TrainerOptions.pick(given)

    @property
    def plan(self) -> Plan:
        """The layout: where the batches, parameters and optimizer state live."""
        return self.options.plan

    @property
    def state(self) -> TrainingState:
        """The model's training so far: epochs and steps done, and the optimizer state kept."""
        return TrainingState.of(self.model)

    @user_facing
    def fit(self, train_data: Any, **options: Any) -> History:
        """Train on ``train_data``; the options (``epochs=``, ...) are those of :func:`fit`."""
        return self._train(train_data, RunOptions.of(options))

    @user_facing
    def compile_step(self, train_data: Any, **options: Any) -> Compiled:
        """The compiled call that ``fit(train_data, **options)`` would run first.

        It is ``fit``'s own program, not a copy: the run is set up by the same code
        (``_setup.prepare``), and its first call is lowered on the same placed state and
        data, ``steps_per_execution`` optimizer steps in one ``scan`` (the state is not
        donated: a stopped call keeps its input). The options are those of :func:`fit`
        (``batch_size=``, ``steps_per_execution=``, ...; ``epochs`` may be left out).
        Nothing is trained and the model is not changed; a streamed ``train_data`` gives
        up its first chunk of batches.

        Returns a :class:`tpukit.Compiled` named ``fit_step``: ``graph()``,
        ``op_counts()``, ``collectives()``, ``cost``, ``memory``, ``hlo_text()``.
        Calling it (``step(params, rest, opt_state, arrays=, indices=, start=)``;
        ``chunk=`` for streamed data) returns ``(params, rest, opt_state, stats)``;
        ``timeit()`` and ``profile()`` run it on that state, as many times as asked.

        Example::

            >>> step = trainer.compile_step((x, y), batch_size=16, steps_per_execution=2)
            >>> step.name, step.op_counts()["while"] >= 1
            ('fit_step', True)
        """
        run = RunOptions.of({**COMPILE_STEP_DEFAULTS, **options}, call="compile_step()")
        prepared = prepare(self.model, self.optimizer, self.options, train_data, run)
        step, state, data = prepared.first_call()
        tree = state.tree()
        # Every part of the state is traced, also one without arrays (optax.sgd's empty
        # state, which a call's signature would hold static and leave out of the call).
        signature = Signature(
            step.name,
            tuple(replace(p, kind="array") for p in bind_arguments(step.function, tree, data)),
        )
        # Lowering reads shapes and shardings; nothing is donated until the program runs.
        # timeit() and profile() with no arguments run on this state and data, as fit would:
        # random numbers would make Adam's second moments negative and every step non-finite.
        # fit's program takes the state as leaves: the call maps the trees onto them.
        return compile_lowering(
            lambda: step.lower(state, data),
            step.function,
            signature,
            example_arguments=(tree, dict(data)),
            fixes=fit_fixes(prepared.spec, tree[0], tree[1]),
            calling=step.calling(state),
        )

    def _train(self, train_data: Any, options: RunOptions) -> History:
        """Train on ``train_data`` as ``options`` say; in-memory arrays given to an earlier
        call on this model are not placed again (``_data.KeptData``), unless they changed in place:
        then the call starts over on a fresh copy, nothing of it applied."""
        started = time.perf_counter()
        kept = TrainingState.of(self.model).kept
        try:
            try:
                return self._train_on(train_data, options, started, kept)
            except StaleSetUp:  # nothing applied or said (verbose=False): set up afresh
                kept.last = None
                return self._train_on(train_data, options, started, kept)
            except KeyboardInterrupt as stop:  # one that stopped a stale call: as above
                _forget_stale(kept, stop.__context__)
                raise
        except StaleData as stale:  # the sharding line was said: the same layout, not again
            kept.forget(stale.names)
            if options.verbose and jax.process_index() == 0:
                print(
                    f"tpukit.fit: {' and '.join(stale.names)} changed in place since the last "
                    "call: placing it again and starting this call over",
                    flush=True,
                )
            return self._train_on(train_data, options, started, kept, said_sharding=True)

    def _train_on(
        self,
        train_data: Any,
        options: RunOptions,
        started: float,
        kept: KeptForModel,
        said_sharding: bool = False,
    ) -> History:
        store = None
        if options.checkpoint_dir is not None:  # a folder that cannot hold them fails first
            store = _checkpoint.RunCheckpoints(options.checkpoint_dir, options.checkpoint_every)
            if not options.resume:
                store.check_new_run()
        # Without a progress line, a repeated set-up's checks of the model and optimizer
        # are made while its first call runs (``_again``); with one, before anything shows.
        defer = not options.verbose
        prepared = prepare(
            self.model, self.optimizer, self.options, train_data, options, kept, defer
        )
        spec, position, history = prepared.spec, prepared.position, History()
        # The state stays flat (``_flat``): its trees are built only where they are read.
        start, on_devices = prepared.state, prepared.placed
        if store is not None and options.resume:
            params, rest, opt_state, position, history = self._restore(store, spec, *start.tree())
            start, on_devices = FlatState.of(params, rest, opt_state), False
        else:  # a stopped epoch that this call cannot finish: its steps stay, said once
            note = TrainingState.of(self.model).unfinished_epoch_note(spec.settings())
            if note is not None:
                warnings.warn(note, stacklevel=4)
        # Before any step: a program over the device's memory is refused, explained (once
        # for the set-up: calls that repeat it, ``_again``, run the same program).
        spec.once("fits", lambda: check_fits(spec, *start.tree(), position))
        history.sharding = spec.once(
            "sharding", lambda: self.plan.summary(start.params, start.opt_state, spec.batch_size)
        )
        show = options.verbose and jax.process_index() == 0
        if show and not said_sharding:
            print(f"tpukit.fit: {history.sharding}", flush=True)
        run = Run(
            spec,
            self.model,
            position,
            history,
            # made once the first call is dispatched: the device does not wait on them
            functools.partial(Collaborators.of, spec, start, show, store),
            prepared.evaluator,
            started=started,
            kept=kept,
            unverified=prepared.unverified,
            show=show,
        )
        if not on_devices:  # (placed already when the last call wrote it)
            start = FlatState.of(*self.plan.put_state(*start.tree()))
        with explained_out_of_memory(spec, start, position):
            return run.train(start)

    def _restore(
        self, store: _checkpoint.RunCheckpoints, spec: RunSpec, params, rest, opt_state
    ) -> tuple:
        """``(params, rest, opt_state, position, history)`` from the newest good checkpoint."""
        names, leaves, treedef = _checkpoint.flatten(
            {"params": params, "state": rest, "optimizer": opt_state}
        )
        p_sh, r_sh, o_sh = self.plan.state_shardings(params, rest, opt_state)
        shardings = jax.tree.leaves({"params": p_sh, "state": r_sh, "optimizer": o_sh})
        restored, record = store.load(
            names,
            leaves,
            shardings,
            check=lambda record: _check_same_run(store, spec, record),
            fall_back=spec.options.resume == "latest_good",
        )
        if store.set_aside and spec.options.verbose and jax.process_index() == 0:
            print(
                f"tpukit.fit: set aside damaged checkpoint steps ({', '.join(store.set_aside)}); "
                f"resuming from step {record['global_step']}",
                flush=True,
            )
        tree = jax.tree.unflatten(treedef, restored)
        history = History.from_dict(record.get("history") or {})
        return (
            tree["params"],
            tree["state"],
            tree["optimizer"],
            Position.from_record(record),
            history,
        )


def _forget_stale(kept: KeptForModel, stale: BaseException | None) -> None:
    """What a call found stale (``_run.Run.train`` raises ^C with it as its context):
    the next call neither takes that set-up nor that copy of the data."""
    if isinstance(stale, StaleSetUp):
        kept.last = None
    elif isinstance(stale, StaleData):
        kept.forget(stale.names)


def _check_same_run(store: _checkpoint.RunCheckpoints, spec: RunSpec, record: dict) -> None:
    """Refuse a checkpoint of another run: other settings, or (unless forced) another program."""
    diffs = [
        f"{key}={record.get(key)!r} (this call: {value!r})"
        for key, value in spec.settings().items()
        if record.get(key) != value
    ]
    if diffs:
        raise _checkpoint.CheckpointError(
            f"The checkpoint in {store.directory} belongs to a run with different settings: "
            f"{', '.join(diffs)}. Resume with the same train_data, batch_size, seed and "
            "shuffle as the run that wrote it."
        )
    stored = ProgramFingerprint.from_record(record.get("fingerprint"))
    if spec.options.resume == "force" or stored is None or spec.fingerprint is None:
        return
    # After a NaN stop the fix is usually the optimizer, so it may change there.
    diffs = spec.fingerprint.differences(stored, optimizer=not record.get("stopped_here"))
    if diffs:
        raise _checkpoint.CheckpointError(
            f"The checkpoint in {store.directory} was written by a different training program: "
            f"{'; '.join(diffs)}. Resume with the model, optimizer and loss of the run that "
            'wrote it, or pass resume="force" to continue from its values anyway.'
        )


@user_facing
@with_options_doc(*FIT_OPTIONS)
def fit(
    model: nnx.Module,
    optimizer: optax.GradientTransformation,
    train_data: Any,
    *,
    epochs: int,
    batch_size: int | None = None,
    loss: Callable | None = None,
    metrics: Sequence[Metric] | None = None,
    eval_data: Any = None,
    eval_batch_size: int | None = None,
    steps_per_execution: int | str = "epoch",
    shuffle: bool = True,
    seed: int = 0,
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    resume: bool | str = False,
    callbacks: Sequence[Callable[[dict], Any]] = (),
    stop_on_nan: bool = True,
    find_nan_origin: bool = True,
    mesh: Mesh | str | None = None,
    shard: Mapping[str, PartitionSpec | str] | None = None,
    sharding: str | Plan | None = None,
    verbose: bool = True,
) -> History:
    """Train ``model`` in place with ``optimizer``, running many steps per compiled call.

    What carries over between calls: the model's training state
    (``TrainingState.of(model)``, kept beside the model): the epochs and steps done, so a
    second call shuffles with the next epochs' orders and counts steps on, and the optimizer
    state, which the next call continues when its optimizer is the same program (the
    same object, or a new one with the same settings, e.g. ``optax.adam(1e-3)``
    again); another optimizer starts from its ``init``. The compiled step is reused
    when model, loss and optimizer program are the same, and a call that repeats the
    last one on the model (the same model, data arrays, optimizer settings, loss,
    metrics, layout and batch sizes; ``epochs``, ``seed``, ``shuffle``, ``callbacks``
    and ``verbose`` may change) takes its whole set-up: nothing is checked, traced or
    placed again but the data's contents.

    Args:
        model: an ``nnx.Module``; updated in place. BatchNorm runs in train mode and
            Dropout draws from the model's ``nnx.Rngs`` streams, whose state is carried
            through the compiled loop and saved in checkpoints.
        optimizer: an ``optax.GradientTransformation``, e.g. ``optax.adam(1e-3)``.
        train_data: an ``(inputs, labels)`` tuple of arrays (NumPy or JAX), a dict of
            arrays, or an iterable of such batches (streamed to the device in chunks).
            Arrays are put on the devices once, split over all of them, and each step
            gathers its batch there in a fresh order every epoch (only the indices
            come from the host); the last ``len % batch_size`` examples of each
            shuffled epoch are dropped. The placed copy is kept beside the model: a later
            call given the same array objects trains on it without sending them again,
            after checking (while its first compiled call runs) that no array was
            changed in place; one that was is placed again and the call starts over.
            ``TrainingState.of(model).release_data()`` frees the copy.
        {options}

    Returns:
        A :class:`History` of per-execution and per-epoch figures.

    Example::

        >>> model = nnx.Linear(8, 4, rngs=nnx.Rngs(1))
        >>> history = fit(model, optax.adam(1e-2), (x, y), epochs=3, batch_size=16,
        ...               verbose=False)
        >>> [e["epoch"] for e in history.epochs], history.executions[-1]["global_step"]
        ([1, 2, 3], 12)
    """
    given = locals()
    trainer = Trainer(model, optimizer, **{name: given[name] for name in TrainerOptions.names()})
    return trainer._train(train_data, RunOptions.pick(given))
