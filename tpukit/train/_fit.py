"""``fit``: train an NNX model with an optax optimizer, many steps per compiled call.

The host's job shrinks to starting executions and reading a handful of numbers
back. Each execution is one :func:`jax.jit` call that runs ``steps_per_execution``
optimizer steps in a :func:`jax.lax.scan` on device-resident (or streamed) data,
accumulating loss and metrics on the device; the host fetches them once per
execution to advance the progress bar and the :class:`History`.

The model is updated in place, NNX style. ``fit`` also remembers the optimizer
state for each ``(model, optimizer)`` pair, so calling it again with the same
optimizer object continues training (Adam's moments, the epoch count used for
shuffling) exactly as one longer call would.

Example::

    >>> import optax
    >>> history = fit(model, optax.adam(1e-3), (x_train, y_train), epochs=3,
    ...               batch_size=128, eval_data=(x_test, y_test))   # doctest: +SKIP
    >>> history.plot()                                              # doctest: +SKIP
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
import optax
from flax import nnx

from tpukit._errors import TpukitError
from tpukit.compilation._peaks import peak_for

from . import _checkpoint, _steps
from ._data import (
    ResidentData,
    StreamedData,
    check_batch_size,
    epoch_indices,
    epoch_key,
    is_array_dataset,
)
from ._history import History
from ._losses import Metric, Objective
from ._mesh import Plan, resolve_plan
from ._progress import EpochBar, Speed, compile_count
from ._validate import check_model, check_objective, check_optimizer, objective_for


class NonFiniteLossError(TpukitError, FloatingPointError):
    """Training stopped because a step's loss or gradients were NaN or infinite.

    The model holds the parameters from just before that step, and so does the
    newest checkpoint when ``checkpoint_dir`` was given. ``epoch`` and ``step``
    (1-based, within the run) say where it happened, ``execution`` which compiled
    call (1-based, counted over the run) ran that step; ``quantity`` names the first
    bad quantity (``"loss"`` or ``"gradient of layers/0/kernel"``) and
    ``quantities`` all of them; ``history`` holds the figures up to there.
    """

    def __init__(
        self,
        message: str,
        epoch: int,
        step: int,
        history: History,
        execution: int | None = None,
        quantities: Sequence[str] = (),
    ):
        super().__init__(message)
        self.epoch = epoch
        self.step = step
        self.history = history
        self.execution = execution
        self.quantities = tuple(quantities)
        self.quantity = self.quantities[0] if self.quantities else None


@dataclass
class _Session:
    optimizer: optax.GradientTransformation
    opt_state: Any
    epochs_done: int


_sessions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _same_structure(a: Any, b: Any) -> bool:
    try:
        return jax.tree.structure(a) == jax.tree.structure(b) and all(
            np.shape(x) == np.shape(y)
            for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
        )
    except Exception:  # noqa: BLE001 - any mismatch means "start the optimizer afresh"
        return False


def _live(tree: Any) -> bool:
    return not any(getattr(x, "is_deleted", lambda: False)() for x in jax.tree.leaves(tree))


class Trainer:
    """The machinery behind :func:`fit`, for one model, optimizer, loss and metrics.

    ``Trainer(model, optax.adam(1e-3)).fit(data, epochs=1, batch_size=128)`` is the
    same as ``fit(model, optax.adam(1e-3), data, epochs=1, batch_size=128)``.
    """

    def __init__(
        self,
        model: nnx.Module,
        optimizer: optax.GradientTransformation,
        *,
        loss: Callable | None = None,
        metrics: Sequence[Metric] | None = None,
        sharding: str | Plan = "data",
        stop_on_nan: bool = True,
    ):
        check_model(model)
        check_optimizer(optimizer)
        self.model = model
        self.optimizer = optimizer
        self.loss = loss
        self.metrics = metrics
        self.plan = resolve_plan(sharding)
        self.stop_on_nan = bool(stop_on_nan)

    # ----------------------------------------------------------------- set-up
    def _data(self, data: Any, batch_size: int | None, epochs: int, name: str):
        if is_array_dataset(data):
            if batch_size is None:
                raise ValueError(
                    f"batch_size is required when {name} is arrays; e.g. batch_size=128."
                )
            source = ResidentData(data, self.plan, name)
            check_batch_size(batch_size, source.n, self.plan, name)
            return source, int(batch_size)
        source = StreamedData(data, self.plan, batch_size, name, epochs)
        return source, source.batch_size

    def fit(
        self,
        train_data: Any,
        *,
        epochs: int,
        batch_size: int | None = None,
        eval_data: Any = None,
        eval_batch_size: int | None = None,
        steps_per_execution: int | str = "epoch",
        shuffle: bool = True,
        seed: int = 0,
        checkpoint_dir: str | os.PathLike | None = None,
        checkpoint_every: int | None = None,
        resume: bool = False,
        callbacks: Sequence[Callable[[dict], Any]] = (),
        verbose: bool = True,
    ) -> History:
        """Train; see :func:`fit` for the arguments."""
        if not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 1:
            raise ValueError(f"epochs must be a positive int; got {epochs!r}.")
        if resume and checkpoint_dir is None:
            raise ValueError(
                "resume=True needs checkpoint_dir=... (the folder of the run to continue)."
            )
        source, batch_size = self._data(train_data, batch_size, epochs, "train_data")
        objective = objective_for(source, self.loss, self.metrics)
        graphdef, params, rest = _steps.split_model(self.model)
        check_objective(objective, graphdef, params, rest, source, batch_size, "train_data")

        evaluator = None
        if eval_data is not None:
            if not is_array_dataset(eval_data):
                raise TypeError(
                    "eval_data must be in-memory arrays: an (inputs, labels) tuple "
                    f"or a dict of arrays; got {type(eval_data).__name__}."
                )
            eval_source = ResidentData(eval_data, self.plan, "eval_data")
            if eval_source.kind != source.kind:
                raise ValueError(
                    f"eval_data is {eval_source.kind} data but train_data is "
                    f"{source.kind} data; give both in the same form."
                )
            eb = eval_batch_size or batch_size
            eb = min(check_batch_size(eb, None, self.plan, "eval_data"), eval_source.n)
            check_objective(objective, graphdef, params, rest, eval_source, eb, "eval_data")
            evaluator = (
                _steps.evaluation(graphdef, objective, self.plan, eb, eval_source.n),
                eval_source,
            )

        if isinstance(source, ResidentData):
            steps_per_epoch = source.n // batch_size
        else:
            steps_per_epoch = len(source.data) if hasattr(source.data, "__len__") else None
        k = _steps_per_execution(steps_per_execution, steps_per_epoch)

        session = _sessions.get(self.model)
        if (
            session is not None
            and session.optimizer is self.optimizer
            and _same_structure(session.opt_state, jax.eval_shape(self.optimizer.init, params))
        ):
            opt_state, epoch_base = session.opt_state, session.epochs_done
        else:
            opt_state, epoch_base = self.optimizer.init(params), 0

        run = _Run(
            self,
            objective,
            graphdef,
            source,
            batch_size,
            steps_per_epoch,
            k,
            epochs,
            shuffle,
            seed,
            evaluator,
            callbacks,
            verbose,
        )
        ckpt = None
        if checkpoint_dir is not None:
            ckpt = _checkpoint.RunCheckpoints(checkpoint_dir, checkpoint_every)
            if resume:
                params, rest, opt_state, epoch_base = run.restore(ckpt, params, rest, opt_state)
            else:
                ckpt.check_new_run()
        run.epoch_base = epoch_base
        run.ckpt = ckpt
        run.finite_names = _steps.finite_names(params, opt_state)
        run.history.sharding = self.plan.summary(params, opt_state, batch_size)
        if verbose and jax.process_index() == 0:
            print(f"tpukit.fit: {run.history.sharding}", flush=True)
        params, rest, opt_state = self.plan.put_state(params, rest, opt_state)
        return run.loop(params, rest, opt_state)


def _steps_per_execution(value: int | str, steps_per_epoch: int | None) -> int | None:
    if value == "epoch":
        if steps_per_epoch is None:
            raise ValueError(
                "steps_per_execution='epoch' needs to know the epoch length, but train_data is an "
                "iterable without len(). Pass steps_per_execution=<int>, e.g. 100."
            )
        return steps_per_epoch
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"steps_per_execution must be 'epoch' or a positive int; got {value!r}.")
    return int(value) if steps_per_epoch is None else min(int(value), steps_per_epoch)


class _Run:
    """The state of one ``fit`` call while it runs (position, history, checkpoints)."""

    def __init__(
        self,
        trainer: Trainer,
        objective: Objective,
        graphdef: Any,
        source: Any,
        batch_size: int,
        steps_per_epoch: int | None,
        k: int,
        epochs: int,
        shuffle: bool,
        seed: int,
        evaluator: Any,
        callbacks: Sequence[Callable],
        verbose: bool,
    ):
        self.t = trainer
        self.objective = objective
        self.graphdef = graphdef
        self.source = source
        self.batch_size = batch_size
        self.steps_per_epoch = steps_per_epoch
        self.k = k
        self.epochs = epochs
        self.shuffle = shuffle
        self.seed = int(seed)
        self.evaluator = evaluator
        self.callbacks = list(callbacks)
        self.verbose = verbose
        self.history = History()
        self.epoch = 0  # 0-based epoch within the run
        self.step = 0  # steps done in the current epoch
        self.global_step = 0  # steps done in the run
        self.executions = 0
        self.epoch_sums: dict[str, float] = {}
        self.epoch_base = 0
        self.ckpt: _checkpoint.RunCheckpoints | None = None
        self.finite_names: tuple[str, ...] = ("loss",)

    # ---------------------------------------------------------- checkpoints
    def _record(self) -> dict:
        n = getattr(self.source, "n", None)
        return {
            "epoch": self.epoch,
            "step": self.step,
            "global_step": self.global_step,
            "executions": self.executions,
            "epoch_base": self.epoch_base,
            "seed": self.seed,
            "batch_size": self.batch_size,
            "n_examples": n,
            "shuffle": self.shuffle,
            "epoch_sums": self.epoch_sums,
            "history": self.history.to_dict(),
        }

    def restore(self, ckpt: _checkpoint.RunCheckpoints, params, rest, opt_state):
        tree = {"params": params, "state": rest, "optimizer": opt_state}
        names, leaves, treedef = _checkpoint.flatten(tree)
        p_sh, r_sh, o_sh = self.t.plan.state_shardings(params, rest, opt_state)
        shardings = jax.tree.leaves({"params": p_sh, "state": r_sh, "optimizer": o_sh})
        restored, rec = ckpt.load(names, leaves, shardings)
        expect = {
            "batch_size": self.batch_size,
            "n_examples": getattr(self.source, "n", None),
            "seed": self.seed,
            "shuffle": self.shuffle,
        }
        diffs = [
            f"{key}={rec.get(key)!r} (this call: {value!r})"
            for key, value in expect.items()
            if rec.get(key) != value
        ]
        if diffs:
            raise _checkpoint.CheckpointError(
                f"The checkpoint in {ckpt.directory} belongs to a run with different settings: "
                f"{', '.join(diffs)}. Resume with the same train_data, batch_size, seed and "
                "shuffle as the run that wrote it."
            )
        self.epoch, self.step = rec["epoch"], rec["step"]
        self.global_step, self.executions = rec["global_step"], rec["executions"]
        self.epoch_sums = dict(rec.get("epoch_sums") or {})
        self.history = History.from_dict(rec.get("history") or {})
        tree = jax.tree.unflatten(treedef, restored)
        return tree["params"], tree["state"], tree["optimizer"], rec["epoch_base"]

    def _save(self, params, rest, opt_state) -> None:
        tree = {"params": params, "state": rest, "optimizer": opt_state}
        names, leaves, _ = _checkpoint.flatten(tree)
        self.ckpt.save(self.global_step, names, leaves, self._record())

    # ----------------------------------------------------------------- loop
    def _executions(self):
        """Yield ``(steps, run_fn, data_args)`` for the rest of the current epoch."""
        t = self.t
        if isinstance(self.source, ResidentData):
            key = epoch_key(self.seed, self.epoch_base + self.epoch)
            indices = t.plan.put_replicated(
                epoch_indices(
                    key, self.source.n, self.steps_per_epoch, self.batch_size, self.shuffle
                )
            )
            start = self.step
            while start < self.steps_per_epoch:
                k = min(self.k, self.steps_per_epoch - start)
                fn = _steps.resident_execution(
                    self.graphdef, self.objective, t.optimizer, t.plan, k, t.stop_on_nan
                )
                yield k, fn, (self.source.arrays, indices, np.int32(start))
                start += k
        else:
            fn = _steps.streamed_execution(
                self.graphdef, self.objective, t.optimizer, t.plan, t.stop_on_nan
            )
            for chunk, k in self.source.chunks(self.k, skip=self.step):
                yield k, fn, (chunk,)

    def _write_back(self, params, rest, opt_state) -> None:
        if _live((params, rest)):
            nnx.update(self.t.model, params, rest)
        if _live(opt_state):
            _sessions[self.t.model] = _Session(
                self.t.optimizer, opt_state, self.epoch_base + self.epoch
            )

    def loop(self, params, rest, opt_state) -> History:
        names = ("loss", *self.objective.metric_names)
        show = self.verbose and jax.process_index() == 0
        speed = Speed(
            self.batch_size,
            peak_for(jax.devices()[0].device_kind) if show else None,
            jax.device_count(),
        )
        try:
            while self.epoch < self.epochs:
                bar = EpochBar(
                    self.epoch + 1,
                    self.epochs,
                    self.steps_per_epoch,
                    show,
                    initial=self.step,
                    speed=speed,
                )
                t_epoch = time.perf_counter()
                pending = next(executions := self._executions(), None)
                while pending is not None:
                    k, fn, args = pending
                    speed.count_flops(fn, (params, rest, opt_state, *args))
                    compiled = compile_count(fn)
                    t0 = time.perf_counter()
                    params, rest, opt_state, stats = fn(params, rest, opt_state, *args)
                    pending = next(executions, None)
                    stats = jax.device_get(stats)
                    seconds = time.perf_counter() - t0
                    rate = k / max(seconds, 1e-9)
                    done = int(stats["steps"])
                    self.step += done
                    self.global_step += done
                    self.executions += 1
                    for n in names:
                        self.epoch_sums[n] = self.epoch_sums.get(n, 0.0) + float(stats[n])
                    self.epoch_sums["steps"] = self.epoch_sums.get("steps", 0) + done
                    figures = {n: float(stats[n]) / max(done, 1) for n in names}
                    record = {
                        "epoch": self.epoch + 1,
                        "step": self.step,
                        "global_step": self.global_step,
                        **figures,
                        "steps_per_s": rate,
                    }
                    self.history.add_execution(record)
                    if int(stats["bad_step"]) >= 0:
                        self._stop_on_nan(bar, stats["finite"], (params, rest, opt_state))
                    running = {
                        n: self.epoch_sums[n] / max(self.epoch_sums["steps"], 1) for n in names
                    }
                    bar.advance(k, running, seconds, compiled=compile_count(fn) != compiled)
                    if self.callbacks:
                        self._write_back(params, rest, opt_state)
                        for cb in self.callbacks:
                            cb(dict(record))
                    if self.ckpt and self.ckpt.every and self.executions % self.ckpt.every == 0:
                        self._save(params, rest, opt_state)
                epoch_figures = {
                    n: self.epoch_sums.get(n, 0.0) / max(self.epoch_sums.get("steps", 0), 1)
                    for n in names
                }
                if self.evaluator is not None:
                    fn, eval_source = self.evaluator
                    val = jax.device_get(fn(params, rest, eval_source.arrays))
                    epoch_figures.update({f"val_{n}": float(v) for n, v in val.items()})
                self.history.add_epoch(
                    {
                        "epoch": self.epoch + 1,
                        **epoch_figures,
                        "steps": self.step,
                        "seconds": time.perf_counter() - t_epoch,
                    }
                )
                bar.close(epoch_figures)
                self.epoch += 1
                self.step = 0
                self.epoch_sums = {}
                if self.ckpt and (self.ckpt.every is None or self.epoch == self.epochs):
                    self._save(params, rest, opt_state)
            if self.ckpt:
                self._save(params, rest, opt_state)
        finally:
            self._write_back(params, rest, opt_state)
            if self.ckpt:
                self.ckpt.close()
        return self.history

    def _stop_on_nan(self, bar: EpochBar, finite: Any, state: tuple) -> None:
        """Raise :class:`NonFiniteLossError`; checkpoint the last good state first."""
        bar.close()
        if self.ckpt:
            self._save(*state)  # the last good step, unless it is saved already
        bad = [n for n, ok in zip(self.finite_names, np.asarray(finite), strict=True) if not ok]
        what = _describe_non_finite(bad)
        step = self.step + 1
        where = f"epoch {self.epoch + 1} of {self.epochs}, step {step}"
        if self.steps_per_epoch:
            where += f" of {self.steps_per_epoch}"
        message = (
            f"Training stopped: {what} became NaN or infinite at {where} (global step "
            f"{self.global_step + 1}, execution {self.executions}). The step was not "
            "applied: the model and the optimizer state keep their values from before it"
            + (", and so does the newest checkpoint" if self.ckpt else "")
            + ". Try a smaller learning rate, gradient clipping "
            "(optax.clip_by_global_norm), or check the data for NaNs."
        )
        self.history.stopped = message
        raise NonFiniteLossError(
            message, self.epoch + 1, step, self.history, self.executions, bad or ["loss"]
        )


def _describe_non_finite(bad: list[str]) -> str:
    """The first quantity that went bad, in words: the loss, gradients, update or state."""
    if not bad or bad[0] == "loss":
        return "the loss"
    kind = next(
        k for k in ("gradient of ", "new value of ", "optimizer state ") if bad[0].startswith(k)
    )
    paths = [n.removeprefix(kind) for n in bad if n.startswith(kind)]
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    plural = "s" if len(paths) > 1 else ""
    if kind == "gradient of ":
        return f"the gradient{plural} of {shown} (the loss was finite)"
    if kind == "new value of ":
        return f"the update of {shown} (loss and gradients were finite; check the optimizer)"
    return f"the optimizer state {shown} (loss and gradients were finite)"


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
    resume: bool = False,
    callbacks: Sequence[Callable[[dict], Any]] = (),
    stop_on_nan: bool = True,
    sharding: str | Plan = "data",
    verbose: bool = True,
) -> History:
    """Train ``model`` in place with ``optimizer``, running many steps per compiled call.

    Args:
        model: an ``nnx.Module``; updated in place. BatchNorm runs in train mode and
            Dropout draws from the model's ``nnx.Rngs`` streams, whose state is carried
            through the compiled loop and saved in checkpoints.
        optimizer: an ``optax.GradientTransformation``, e.g. ``optax.adam(1e-3)``. Pass the
            same object again to continue with its state.
        train_data: an ``(inputs, labels)`` tuple of arrays (NumPy or JAX), a dict of
            arrays, or an iterable of such batches (streamed to the device in chunks).
            Arrays are put on the devices once, split over all of them, and each step
            gathers its batch there in a fresh order every epoch (only the indices
            come from the host); the last ``len % batch_size`` examples of each
            shuffled epoch are dropped.
        epochs: how many epochs to train. With ``resume=True``, the run's total: the
            run continues from its checkpoint up to this epoch.
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
            executions (default: each epoch) and at the end.
        resume: continue the run whose newest checkpoint is in ``checkpoint_dir``.
        callbacks: functions called with each execution's figures; raising stops.
        stop_on_nan: stop with :class:`NonFiniteLossError` at the first non-finite
            loss or gradient, keeping the last good parameters.
        sharding: how to spread the work over every device of every process
            (``jax.devices()``): ``"data"`` (each batch split over the devices,
            parameters and optimizer state replicated), ``"fsdp"`` (batch split, and
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
    trainer = Trainer(
        model, optimizer, loss=loss, metrics=metrics, sharding=sharding, stop_on_nan=stop_on_nan
    )
    return trainer.fit(
        train_data,
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
