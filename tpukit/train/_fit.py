"""``fit``: train an NNX model with an optax optimizer, many steps per compiled call.

The host's job shrinks to starting executions and reading a handful of numbers
back. Each execution is one :func:`jax.jit` call that runs ``steps_per_execution``
optimizer steps in a :func:`jax.lax.scan` on device-resident (or streamed) data,
accumulating loss and metrics on the device; the host fetches them once per
execution to advance the progress bar and the :class:`History`.

:class:`Trainer` sets a call up: it checks the options (``_options.RunOptions``),
the data, model and loss, builds one frozen ``RunSpec``, restores a checkpoint
when asked, and hands a complete ``_run.Run`` the placed state. The model is
updated in place, NNX style, and keeps what carries over to the next call in its
``TrainingState`` (``_state``): the epoch and step counts, and the optimizer state.

Example::

    >>> import optax
    >>> history = fit(model, optax.adam(1e-3), (x_train, y_train), epochs=3,
    ...               batch_size=128, eval_data=(x_test, y_test))   # doctest: +SKIP
    >>> history.plot()                                              # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import optax
from flax import nnx
from jax.sharding import Mesh, PartitionSpec

from tpukit._errors import user_facing
from tpukit.compilation import Compiled
from tpukit.measure import peak_for

from . import _checkpoint, _steps
from ._compile_step import compile_step
from ._data import ResidentData, StreamedData, check_batch_size, is_array_dataset
from ._exceptions import TrainingInputError, TrainingTypeError
from ._guard import NonFiniteGuard, NonFiniteLossError
from ._history import History
from ._losses import Metric, Objective
from ._memory_fit import check_fits, explained_out_of_memory
from ._mesh import Plan, resolve_plan
from ._options import RunOptions
from ._program import OptimizerProgram, ProgramFingerprint
from ._progress import Speed
from ._run import Checkpointing, Evaluator, Position, Progress, Run, RunSpec
from ._state import TrainingState
from ._validate import check_model, check_objective, check_optimizer, objective_for

__all__ = ["NonFiniteLossError", "Trainer", "fit"]


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
    ):
        check_model(model)
        check_optimizer(optimizer)
        self.model = model
        self.optimizer = optimizer
        self.loss = loss
        self.metrics = metrics
        self.plan = resolve_plan(sharding, mesh=mesh, shard=shard)
        self.stop_on_nan = bool(stop_on_nan)

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

        It is ``fit``'s own program, not a copy: the same jitted function, on the
        same placed state and data, ``steps_per_execution`` optimizer steps in one
        ``scan`` (the state is not donated: a stopped call keeps its input). The
        options are those of :func:`fit` (``batch_size=``, ``steps_per_execution=``,
        ...; ``epochs`` may be left out). Nothing is trained and the model is not
        changed; a streamed ``train_data`` gives up its first chunk of batches.

        Returns a :class:`tpukit.Compiled` named ``fit_step``: ``graph()``,
        ``op_counts()``, ``collectives()``, ``cost``, ``memory``, ``hlo_text()``.
        Calling it (``step(params, rest, opt_state, arrays=, indices=, start=)``;
        ``chunk=`` for streamed data) returns ``(params, rest, opt_state, stats)``;
        ``timeit()`` and ``profile()`` run it on that state, as many times as asked.

        Example::

            >>> trainer = Trainer(model, optax.adam(1e-3), mesh="data=8")  # doctest: +SKIP
            >>> step = trainer.compile_step((x, y), batch_size=128,
            ...                             steps_per_execution=10)      # doctest: +SKIP
            >>> step.collectives(), step.graph()                          # doctest: +SKIP
        """
        return compile_step(self, train_data, RunOptions.of({"epochs": 1, **options}))

    def _train(self, train_data: Any, options: RunOptions) -> History:
        """Train on ``train_data`` as ``options`` say."""
        store = None
        if options.checkpoint_dir is not None:  # a folder that cannot hold them fails first
            store = _checkpoint.RunCheckpoints(options.checkpoint_dir, options.checkpoint_every)
            if not options.resume:
                store.check_new_run()
        spec, params, rest, evaluator = self._spec(train_data, options)
        kept = self.state.optimizer_state(spec.program.key)
        opt_state = spec.program.init(params) if kept is None else kept
        position = Position.continuing(self.state, spec.settings())
        history = History()
        if store is not None and options.resume:
            params, rest, opt_state, position, history = self._restore(
                store, spec, params, rest, opt_state
            )
        # Before any step: a program over the device's memory is refused, explained.
        check_fits(spec, params, rest, opt_state, position)
        history.sharding = self.plan.summary(params, opt_state, spec.batch_size)
        show = options.verbose and jax.process_index() == 0
        if show:
            print(f"tpukit.fit: {history.sharding}", flush=True)
        speed = Speed(
            spec.batch_size,
            peak_for(jax.devices()[0].device_kind) if show else None,
            jax.device_count(),
        )
        run = Run(
            spec,
            self.model,
            position,
            history,
            Progress(show, speed),
            NonFiniteGuard(params, opt_state),
            Checkpointing(store, spec) if store is not None else None,
            evaluator,
        )
        with explained_out_of_memory(spec, params, rest, opt_state, position):
            return run.train(self.plan.put_state(params, rest, opt_state))

    # ----------------------------------------------------------------- set-up
    def _spec(self, train_data: Any, options: RunOptions) -> tuple:
        """``(RunSpec, params, rest, evaluator)``, every input checked before any step runs."""
        source, batch_size = self._data(train_data, options, "train_data")
        objective = objective_for(source, self.loss, self.metrics)
        graphdef, params, rest = _steps.split_model(self.model)
        check_objective(objective, graphdef, params, rest, source, batch_size, "train_data")
        evaluator = self._evaluator(options, source, objective, graphdef, params, rest, batch_size)
        if isinstance(source, ResidentData):
            steps_per_epoch = source.n // batch_size
        else:
            steps_per_epoch = len(source.data) if hasattr(source.data, "__len__") else None
        program = OptimizerProgram(self.optimizer, params)
        fingerprint = None
        if options.checkpoint_dir is not None:
            fingerprint = ProgramFingerprint.build(
                self.model, graphdef, params, rest, objective, program, source.sample(batch_size)
            )
        spec = RunSpec(
            options=options,
            plan=self.plan,
            graphdef=graphdef,
            objective=objective,
            program=program,
            source=source,
            batch_size=batch_size,
            steps_per_epoch=steps_per_epoch,
            steps_per_call=_steps_per_call(options.steps_per_execution, steps_per_epoch),
            guard=self.stop_on_nan,
            fingerprint=fingerprint,
        )
        return spec, params, rest, evaluator

    def _data(self, data: Any, options: RunOptions, name: str) -> tuple[Any, int]:
        if is_array_dataset(data):
            if options.batch_size is None:
                raise TrainingInputError(
                    f"batch_size is required when {name} is arrays; e.g. batch_size=128."
                )
            source = ResidentData(data, self.plan, name)
            check_batch_size(options.batch_size, source.n, self.plan, name)
            return source, int(options.batch_size)
        source = StreamedData(data, self.plan, options.batch_size, name, options.epochs)
        return source, source.batch_size

    def _evaluator(
        self,
        options: RunOptions,
        source: Any,
        objective: Objective,
        graphdef: Any,
        params: Any,
        rest: Any,
        batch_size: int,
    ) -> Evaluator | None:
        if options.eval_data is None:
            return None
        if not is_array_dataset(options.eval_data):
            raise TrainingTypeError(
                "eval_data must be in-memory arrays: an (inputs, labels) tuple "
                f"or a dict of arrays; got {type(options.eval_data).__name__}."
            )
        eval_source = ResidentData(options.eval_data, self.plan, "eval_data")
        if eval_source.kind != source.kind:
            raise TrainingInputError(
                f"eval_data is {eval_source.kind} data but train_data is "
                f"{source.kind} data; give both in the same form."
            )
        eb = options.eval_batch_size or batch_size
        eb = min(check_batch_size(eb, None, self.plan, "eval_data"), eval_source.n)
        check_objective(objective, graphdef, params, rest, eval_source, eb, "eval_data")
        fn = _steps.evaluation(graphdef, objective, self.plan, eb, eval_source.n)
        return Evaluator(fn, eval_source)

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


def _steps_per_call(value: int | str, steps_per_epoch: int | None) -> int:
    if value == "epoch":
        if steps_per_epoch is None:
            raise TrainingInputError(
                "steps_per_execution='epoch' needs to know the epoch length, but train_data is an "
                "iterable without len(). Pass steps_per_execution=<int>, e.g. 100."
            )
        return steps_per_epoch
    return int(value) if steps_per_epoch is None else min(int(value), steps_per_epoch)


@user_facing
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
    when model, loss and optimizer program are the same.

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
            shuffled epoch are dropped.
        epochs: how many epochs to train. With ``resume``, the run's total: the run
            continues from its checkpoint up to this epoch.
        batch_size: examples per step (global, over all devices); a multiple of the
            device count. Optional for iterables (taken from the first batch).
        loss: ``loss(outputs, labels)`` for pair data (default: softmax cross-entropy
            with integer labels), ``loss(model, batch)`` returning a scalar or
            ``(scalar, outputs)`` for dict data.
        metrics: names (``"accuracy"``, ``"top5_accuracy"``) or ``fn(outputs, labels)``
            returning a batch mean. Default: accuracy when the labels are integers.
        eval_data: arrays evaluated (eval mode, every example) after each epoch;
            figures appear in the history with a ``val_`` prefix.
        steps_per_execution: optimizer steps per compiled call: ``"epoch"`` or an int.
            The host hears about progress once per call.
        shuffle, seed: shuffle each epoch from ``(seed, epoch)``: a different order every
            epoch, the same for the same seed (the epoch counts over the model's training,
            so a second ``fit`` call continues the sequence).
        checkpoint_dir: save checkpoints there (orbax) every ``checkpoint_every``
            executions (default: each epoch) and at the end. Each records checksums of
            its arrays and a fingerprint of the training program (model, loss,
            optimizer). The folder is checked before the first step.
        resume: ``True`` continues the run whose newest checkpoint is in
            ``checkpoint_dir``, after checking that the checkpoint is intact (files,
            checksums, finite values) and was written by the same program and settings;
            a damaged newest step is reported with the step to fall back to.
            ``"latest_good"`` falls back to the newest intact step (setting the damaged
            ones aside as ``<step>.damaged``); ``"force"`` resumes though the program
            differs. After a NaN stop, ``True`` accepts a changed optimizer.
        callbacks: functions called with each execution's figures; raising stops.
        stop_on_nan: stop with :class:`NonFiniteLossError` at the first step whose loss,
            gradients, new parameters or new optimizer state are not finite; that step
            is not applied, so the model, optimizer state and checkpoints keep the last
            finite values.
        mesh, shard: your own layout, in the words of ``tpukit.compile(f, x, mesh=,
            shard=)``: ``mesh="data=4,model=2"`` (or a ``jax.sharding.Mesh``) and
            ``shard={r"l1/kernel": "None,model"}``, a partition spec (text or
            ``PartitionSpec``) for the model arrays whose '/'-joined path the regex
            finds (the first match wins; the rest, and optimizer arrays that mirror
            them, follow or are replicated). Batches are split along the mesh's
            ``"data"`` axis (its first axis if it has none). Same as
            ``sharding=MeshRules(mesh, shard)``.
        sharding: a ready-made layout over every device of every process
            (``jax.devices()``), instead of ``mesh``: ``"data"`` (the default; each
            batch split over the devices, parameters and optimizer state replicated), ``"fsdp"`` (batch split, and
            every parameter and optimizer array of at least 1024 elements split on
            its largest dimension divisible by the device count), or a plan object:
            :class:`DataParallel`, :class:`FSDP`, or :class:`MeshRules` (your own
            ``Mesh`` and ``(regex, PartitionSpec)`` rules). The choice is printed
            when ``fit`` starts and kept in ``History.sharding``. With several
            processes (``tpukit.connect`` joined a ``jax.distributed`` run), every
            process calls ``fit`` with the same arguments and data; only process 0
            prints.
        verbose: print the sharding line and show one line per epoch, updated in place
            (a widget, an HTML line in notebooks, text in terminals): running loss and
            metrics, steps/s and examples/s, and MFU where the device's peak is known.

    Returns:
        A :class:`History` of per-execution and per-epoch figures.

    Example::

        >>> model = MLP(nnx.Rngs(0))                                     # doctest: +SKIP
        >>> history = fit(model, optax.adam(1e-3), (x, y), epochs=3, batch_size=128)  # doctest: +SKIP
        >>> evaluate(model, (x_test, y_test), batch_size=1000)           # doctest: +SKIP
        {'loss': 0.08, 'accuracy': 0.975}
    """
    options = RunOptions(
        epochs=epochs,
        batch_size=batch_size,
        eval_data=eval_data,
        eval_batch_size=eval_batch_size,
        steps_per_execution=steps_per_execution,
        shuffle=shuffle,
        seed=seed,
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every,
        resume=resume,
        callbacks=callbacks,
        verbose=verbose,
    )
    trainer = Trainer(
        model,
        optimizer,
        loss=loss,
        metrics=metrics,
        mesh=mesh,
        shard=shard,
        sharding=sharding,
        stop_on_nan=stop_on_nan,
    )
    return trainer._train(train_data, options)
