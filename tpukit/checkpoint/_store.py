"""Checkpoints of a training run, written with orbax's ``CheckpointManager``.

A checkpoint holds everything needed to continue a run exactly: parameters,
the rest of the model state (batch statistics, the dropout RNG of ``nnx.Rngs``),
the optimizer state, and a JSON record of the position (epoch and step), the
shuffle seed, the batch size and the history so far. Orbax writes each step to a
temporary folder and renames it when complete, so a run killed mid-write leaves
the previous checkpoint intact.

Before anything is restored, the stored names, shapes and dtypes are compared
with the model and optimizer at hand, so a checkpoint from a different model
fails with the names that differ; the caller checks the rest of the record (the
run's settings and program fingerprint). A restore is verified (``_integrity``):
the files against the digests written after the save, the arrays against their
recorded checksums, and every value finite. A damaged newest step is reported with
the step a restore would fall back to; with ``fall_back`` it is set aside and the
newest good step restored. No step holding NaN or infinity is ever written.

Example::

    >>> ckpt = RunCheckpoints("run1", every=None)
    >>> names, leaves, _ = flatten({"params": {"w": np.ones((2, 3), np.float32)}})
    >>> ckpt.save(390, names, leaves, {"epoch": 1}), ckpt.save(780, names, leaves, {})
    (True, True)
    >>> ckpt.steps()
    [390, 780]
    >>> ckpt.close()
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils

from tpukit._counts import as_count
from tpukit._errors import CheckpointError, TrainingInputError
from tpukit._pytree import is_key as _is_key
from tpukit._pytree import leaf_paths

from ._folder import check_writable, os_reason, refuse
from ._integrity import array_summary, check_file_digests, write_file_digests

FORMAT = "tpukit.fit/1"
STOPPED = "tpukit_stopped.json"
_TMP_MARK = ".orbax-checkpoint-tmp"


@contextlib.contextmanager
def quiet_orbax() -> Iterator[None]:
    """Hide orbax's warnings about tpukit's own calls (``WARNING:absl: ... read only``).

    Orbax logs through absl's ``logging`` logger whatever a manager is asked, e.g.
    four warnings each time tpukit opens a checkpoint read-only to restore it. Those
    are about how tpukit uses orbax, not news for the user, so the ``absl`` logger
    shows only errors while tpukit's orbax calls run, and is restored after.
    """
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(max(level, logging.ERROR))
    try:
        yield
    finally:
        logger.setLevel(level)


def flatten(tree: dict[str, Any]) -> tuple[list[str], list[Any], Any]:
    """``(names, leaves, treedef)`` with readable names like ``params/l1/kernel``."""
    items = leaf_paths(tree)
    return [n for n, _ in items], [leaf for _, leaf in items], jax.tree.structure(tree)


def describe(leaves: list[Any]) -> tuple[list[list[int]], list[str]]:
    """Shapes and dtype names, as stored in the checkpoint record."""
    shapes = [list(np.shape(x)) for x in leaves]
    dtypes = [f"key<{jax.random.key_impl(x)}>" if _is_key(x) else str(x.dtype) for x in leaves]
    return shapes, dtypes


class RunCheckpoints:
    """The checkpoints in ``directory``: saving every ``every`` executions, and restoring.

    Args:
        directory: where orbax keeps one folder per saved step (the global step).
        every: save after every ``every`` executions; ``None`` means after each epoch.
        keep: how many of this run's newest checkpoints to keep.
    """

    def __init__(self, directory: str | os.PathLike, every: int | None, keep: int = 3):
        self.directory = Path(directory).expanduser().absolute()
        if every is not None:
            every = as_count(every, "checkpoint_every (or None)", error=TrainingInputError)
        self.every = every
        self.keep = as_count(keep, "keep", error=TrainingInputError)
        self._manager: ocp.CheckpointManager | None = None
        self.set_aside: list[str] = []
        # Before any step trains, not after the first epoch: written to, not only looked at.
        check_writable(self.directory, keep_created=jax.process_count() > 1)

    def _reader(self) -> ocp.CheckpointManager:
        opts = ocp.CheckpointManagerOptions(
            read_only=True, enable_async_checkpointing=False, create=False
        )
        return ocp.CheckpointManager(self.directory, options=opts, item_names=("state", "meta"))

    def steps(self) -> list[int]:
        """Finished checkpoint steps, oldest first (empty when the folder does not exist)."""
        if not self.directory.is_dir():
            return []
        try:
            with quiet_orbax():
                return sorted(self._reader().all_steps())
        except OSError as error:
            raise refuse(self.directory, f"cannot be listed ({os_reason(error)})") from None

    def unfinished(self) -> list[str]:
        """Names of temporary folders left by a save that never completed."""
        if not self.directory.is_dir():
            return []
        try:
            return sorted(p.name for p in self.directory.iterdir() if _TMP_MARK in p.name)
        except OSError as error:
            raise refuse(self.directory, f"cannot be listed ({os_reason(error)})") from None

    def check_new_run(self) -> None:
        """Refuse to start a fresh run on top of existing checkpoints (they would be mixed)."""
        steps = self.steps()
        if steps:
            raise CheckpointError(
                f"checkpoint_dir {self.directory} already holds checkpoints of a run (steps "
                f"{steps}). Pass resume=True to continue that run, or choose an empty "
                "directory; tpukit does not overwrite existing checkpoints."
            )

    def load(
        self,
        names: list[str],
        leaves: list[Any],
        shardings: list[Any],
        check: Callable[[dict], None] | None = None,
        fall_back: bool = False,
    ) -> tuple[list, dict]:
        """Restore the newest checkpoint that verifies into leaves like ``leaves``.

        Returns ``(leaves, record)``. A checkpoint verifies when its files match the
        digests written after the save, it reads back, its arrays match their recorded
        checksums and are finite. ``check(record)`` may refuse a record (a different
        run) before any array is read. A damaged newest step is an error naming the
        step to fall back to, unless ``fall_back``: then the damaged steps are set
        aside (renamed ``<step>.damaged``; listed in :attr:`set_aside`) and the older
        one is restored.
        """
        steps = self.steps()
        if not steps:
            self._nothing_to_resume()
        damaged: list[tuple[int, str]] = []
        with quiet_orbax():
            reader = self._reader()
        try:
            for step in reversed(steps):
                reason, restored = self._restore_step(reader, step, names, leaves, shardings, check)
                if reason is not None:
                    damaged.append((step, reason))
                    continue
                if damaged and not fall_back:
                    self._refuse_damaged(damaged[0], step)
                self._set_aside([s for s, _ in damaged])
                return restored
        finally:
            with quiet_orbax():
                reader.close()
        listed = "; ".join(f"step {s}: {r}" for s, r in damaged)
        raise CheckpointError(
            f"No checkpoint in {self.directory} verifies ({listed}). Start a new run with "
            "resume=False in another checkpoint_dir."
        )

    def _nothing_to_resume(self) -> None:
        tmp = self.unfinished()
        if tmp:
            raise CheckpointError(
                f"resume=True, but {self.directory} holds only unfinished checkpoint "
                f"writes ({', '.join(tmp)}): the run was stopped before its first checkpoint "
                "completed. Pass resume=False to start from the beginning."
            )
        where = "does not exist" if not self.directory.exists() else "holds no checkpoints"
        raise CheckpointError(
            f"resume=True, but checkpoint_dir {self.directory} {where}. Pass resume=False "
            "to start a new run there, or point checkpoint_dir at the run to continue."
        )

    def _restore_step(
        self,
        reader: ocp.CheckpointManager,
        step: int,
        names: list[str],
        leaves: list[Any],
        shardings: list[Any],
        check: Callable[[dict], None] | None,
    ) -> tuple[str | None, Any]:
        """``(None, (leaves, record))``, or ``(why step is damaged, None)``."""
        problem = check_file_digests(self.directory / str(step))
        if problem:
            return problem, None
        try:
            with quiet_orbax():
                record = reader.restore(
                    step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())
                ).meta
        except Exception as e:  # noqa: BLE001 - orbax raises many kinds; all mean "unreadable"
            return f"its run record ('meta') could not be read ({_reason(e)})", None
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            raise CheckpointError(
                f"Checkpoint step {step} in {self.directory} was not written by tpukit.fit "
                f"(expected format {FORMAT!r}). Point checkpoint_dir at a tpukit run."
            )
        self._compare(record, names, leaves)
        stopped = self.directory / str(step) / STOPPED
        record["stopped_here"] = stopped.is_file()
        if check is not None:
            check(record)
        targets = []
        for leaf, sharding in zip(leaves, shardings, strict=True):
            if _is_key(leaf):
                data = jax.random.key_data(leaf)
                targets.append(jax.ShapeDtypeStruct(data.shape, data.dtype, sharding=sharding))
            else:
                targets.append(jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding))
        try:
            with quiet_orbax(), _abandoned_reads_quiet():
                restored = reader.restore(
                    step, args=ocp.args.Composite(state=ocp.args.StandardRestore(targets))
                ).state
        except Exception as e:  # noqa: BLE001
            return f"its arrays ('state') could not be read ({_reason(e)})", None
        checksums, finite = array_summary(restored)
        recorded = record.get("checksums")
        for name, ok, got, want in zip(
            names, finite, checksums, recorded or [None] * len(names), strict=True
        ):
            if want is not None and got != want:
                return f"{name} does not match the checksum recorded when it was saved", None
            if not ok:
                return f"{name} holds NaN or infinite values", None
        out = [
            jax.random.wrap_key_data(r, impl=jax.random.key_impl(leaf)) if _is_key(leaf) else r
            for r, leaf in zip(restored, leaves, strict=True)
        ]
        return None, (out, record)

    def _refuse_damaged(self, newest: tuple[int, str], good: int) -> None:
        step, reason = newest
        raise CheckpointError(
            f"Checkpoint step {step} in {self.directory} is incomplete or damaged: {reason}. "
            f"The newest checkpoint that verifies is step {good}: pass "
            'resume="latest_good" to continue from it (the damaged steps are then kept aside '
            f"as <step>.damaged), or remove the folder {self.directory / str(step)}."
        )

    def _set_aside(self, steps: list[int]) -> None:
        """Rename damaged steps out of orbax's sight, so new saves can take their numbers."""
        self.set_aside = []
        if not steps:
            return
        for step in steps:
            target = self.directory / f"{step}.damaged"
            n = 1
            while target.exists():
                n += 1
                target = self.directory / f"{step}.damaged-{n}"
            if jax.process_index() == 0:
                try:
                    (self.directory / str(step)).rename(target)
                except OSError as error:
                    raise CheckpointError(
                        f"Checkpoint step {step} in {self.directory} is damaged, and setting it "
                        f"aside as {target.name} failed ({os_reason(error)}). Remove the folder "
                        f"{self.directory / str(step)} yourself, then resume again."
                    ) from None
            self.set_aside.append(target.name)
        if jax.process_count() > 1:  # every process sees the same steps before saving again
            multihost_utils.sync_global_devices("tpukit: damaged checkpoints set aside")

    def _compare(self, record: dict, names: list[str], leaves: list[Any]) -> None:
        stored = record.get("names", [])
        if stored != names:

            def model_first(items: list[str]) -> list[str]:
                return sorted(items, key=lambda n: n.startswith("optimizer/"))

            missing = model_first([n for n in names if n not in stored])
            extra = model_first([n for n in stored if n not in names])
            part = (
                "optimizer state"
                if all(n.startswith("optimizer/") for n in missing + extra)
                else "model"
            )
            raise CheckpointError(
                f"The checkpoint in {self.directory} is from a different {part}: "
                f"{len(missing)} entries of this {part} are not in the checkpoint "
                f"({_few(missing)}) and {len(extra)} checkpoint entries are not in this {part} "
                f"({_few(extra)}). Build the same model and optimizer as the run that wrote it, "
                "or start a new run with resume=False in another directory."
            )
        shapes, dtypes = describe(leaves)
        diffs = [
            f"{n}: checkpoint {tuple(s0)} {d0} vs this run {tuple(s1)} {d1}"
            for n, s0, d0, s1, d1 in zip(
                names, record["shapes"], record["dtypes"], shapes, dtypes, strict=True
            )
            if list(s0) != list(s1) or d0 != d1
        ]
        if diffs:
            raise CheckpointError(
                f"The checkpoint in {self.directory} is from a different model: "
                f"{len(diffs)} arrays differ ({'; '.join(diffs[:4])}{' ...' if len(diffs) > 4 else ''}). "
                "Build the model with the same sizes and dtypes as the run that wrote it."
            )

    def save(self, step: int, names: list[str], leaves: list[Any], record: dict) -> bool:
        """Write ``leaves`` and ``record`` as checkpoint ``step``; ``False`` if not finite.

        A step that exists is not written again. Arrays holding NaN or infinity are
        never written (only ``stop_on_nan=False`` lets them reach here), so orbax's
        rotation of old steps can never drop the last good one for a bad one.
        """
        try:
            with quiet_orbax():
                return self._save(step, names, leaves, record)
        except Exception as error:  # orbax wraps the OS's refusal in its own errors
            cause = _os_error_in(error)
            if cause is None:
                raise
            raise CheckpointError(
                f"Writing checkpoint step {step} to {self.directory} failed "
                f"({os_reason(cause)}). Make it writable with free space, or pass another "
                "checkpoint_dir; then continue with resume=True."
            ) from None

    def _save(self, step: int, names: list[str], leaves: list[Any], record: dict) -> bool:
        if self._manager is None:
            opts = ocp.CheckpointManagerOptions(
                max_to_keep=self.keep, create=True, enable_async_checkpointing=False
            )
            self._manager = ocp.CheckpointManager(
                self.directory, options=opts, item_names=("state", "meta")
            )
        if step in self._manager.all_steps():
            return True
        arrays = [jax.random.key_data(x) if _is_key(x) else x for x in leaves]
        checksums, finite = array_summary(arrays)
        if not all(finite):
            return False
        shapes, dtypes = describe(leaves)
        record = {
            **record,
            "format": FORMAT,
            "names": names,
            "shapes": shapes,
            "dtypes": dtypes,
            "checksums": checksums,
        }
        self._manager.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(arrays), meta=ocp.args.JsonSave(record)
            ),
        )
        self._manager.wait_until_finished()
        if jax.process_index() == 0:
            write_file_digests(self.directory / str(step))
        return True

    def mark_stopped(self, step: int, message: str) -> None:
        """Note in checkpoint ``step`` that training stopped right after it (a NaN stop).

        A resume from that step may then change the optimizer, which is the usual fix.
        """
        folder = self.directory / str(step)
        if jax.process_index() == 0 and folder.is_dir():
            with contextlib.suppress(OSError):  # a note for a later resume, not the run's result
                (folder / STOPPED).write_text(json.dumps({"message": message}))

    def close(self) -> None:
        if self._manager is not None:
            with quiet_orbax():
                self._manager.close()
            self._manager = None


class _AbandonedReads(logging.Filter):
    """Drops asyncio's "... exception was never retrieved" for orbax's abandoned reads."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (
            "never retrieved" in message and ("orbax" in message or "tensorstore" in message)
        )


_ABANDONED_READS = _AbandonedReads()


def _drops_abandoned(unraisable: Any) -> bool:
    code = getattr(unraisable.object, "cr_code", None)
    abandoned = "orbax" in str(getattr(code, "co_filename", ""))
    late = isinstance(unraisable.exc_value, RuntimeError) and (
        str(unraisable.exc_value) == "Event loop is closed"
    )
    return abandoned or late


@contextlib.contextmanager
def _abandoned_reads_quiet() -> Iterator[None]:
    """Around an orbax read: silence the reports of the reads a failure abandons.

    When one array of a restore cannot be read, orbax leaves its other reads
    behind: coroutines and tasks that fail again when garbage-collected, and
    TensorStore callbacks into the event loop orbax has closed, during the restore
    and until exit. Each prints "Exception ignored in ...", "Task (or Future)
    exception was never retrieved" with a TensorStore spec dump, or "RuntimeError:
    Event loop is closed". The restore's own error says it once, so filters on
    ``sys.unraisablehook`` and the ``asyncio`` logger drop those reports (and only
    those) while the read runs, and for the rest of the process once one failed.
    """
    previous = sys.unraisablehook
    if getattr(previous, "drops_orbax_reads", False):
        yield
        return

    def hook(unraisable: Any) -> None:
        if not _drops_abandoned(unraisable):
            previous(unraisable)

    hook.drops_orbax_reads = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook
    asyncio_log = logging.getLogger("asyncio")
    asyncio_log.addFilter(_ABANDONED_READS)
    yield  # on failure the filters stay: the abandoned reads report later
    asyncio_log.removeFilter(_ABANDONED_READS)
    if sys.unraisablehook is hook:
        sys.unraisablehook = previous


def _reason(error: BaseException) -> str:
    """An orbax or TensorStore error in one short line: its innermost cause, no spec dump.

    TensorStore nests causes as ``outer: inner: root``; a long one keeps its start
    (what was read) and its end (what went wrong).
    """
    while (error.__cause__ or error.__context__) is not None:
        error = error.__cause__ or error.__context__
    text = str(error).split("See full TensorStore details")[0]
    text = text.splitlines()[0] if text else ""
    text = re.sub(r"<bound method [^>]*>?|\s*\[tensorstore_spec.*", "", text).strip()
    if len(text) > 240:
        text = f"{text[:100]} ... {text[-130:]}"
    return f"{type(error).__name__}: {text}"


def _os_error_in(error: BaseException) -> OSError | None:
    """The OS error at the root of an orbax error, if there is one."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, OSError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def _few(items: list[str], k: int = 3) -> str:
    if not items:
        return "none"
    return ", ".join(items[:k]) + (f", ... {len(items) - k} more" if len(items) > k else "")
