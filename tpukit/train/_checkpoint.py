"""Checkpoints of a training run, written with orbax's ``CheckpointManager``.

A checkpoint holds everything needed to continue a run exactly: parameters,
the rest of the model state (batch statistics, the dropout RNG of ``nnx.Rngs``),
the optimizer state, and a JSON record of the position (epoch and step), the
shuffle seed, the batch size and the history so far. Orbax writes each step to a
temporary folder and renames it when complete, so a run killed mid-write leaves
the previous checkpoint intact.

Before anything is restored, the stored names, shapes and dtypes are compared
with the model and optimizer at hand, so a checkpoint from a different model
fails with the names that differ.

Example::

    >>> ckpt = RunCheckpoints("/tmp/run1", every=None)   # doctest: +SKIP
    >>> ckpt.steps()                                       # doctest: +SKIP
    [390, 780]
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from tpukit._errors import TpukitError

from ._layout import is_key as _is_key
from ._layout import leaf_paths

FORMAT = "tpukit.fit/1"
_TMP_MARK = ".orbax-checkpoint-tmp"


class CheckpointError(TpukitError, ValueError):
    """A checkpoint is missing, unfinished, or does not match the model being trained."""


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
        if every is not None and (not isinstance(every, int) or every < 1):
            raise ValueError(f"checkpoint_every must be a positive int or None; got {every!r}.")
        self.every = every
        self.keep = keep
        self._manager: ocp.CheckpointManager | None = None
        self._check_writable()

    def _check_writable(self) -> None:
        """Refuse a folder that cannot hold checkpoints before any step trains, not after."""
        folder = self.directory
        existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
        problem = None
        if folder.exists() and not folder.is_dir():
            problem = "is a file, not a folder"
        elif existing is not None and not existing.is_dir():
            problem = f"cannot be created: {existing} is a file"
        elif existing is not None and not os.access(existing, os.W_OK | os.X_OK):
            problem = (
                "is not writable" if existing == folder else f"cannot be created in {existing}"
            )
        if problem:
            raise CheckpointError(
                f"checkpoint_dir {str(folder)!r} {problem}, so checkpoints could not be saved. "
                "Pass a folder you can write to (it is created if missing), or "
                "checkpoint_dir=None to train without checkpoints."
            )

    def _reader(self) -> ocp.CheckpointManager:
        opts = ocp.CheckpointManagerOptions(
            read_only=True, enable_async_checkpointing=False, create=False
        )
        return ocp.CheckpointManager(self.directory, options=opts, item_names=("state", "meta"))

    def steps(self) -> list[int]:
        """Finished checkpoint steps, oldest first (empty when the folder does not exist)."""
        if not self.directory.is_dir():
            return []
        with quiet_orbax():
            return sorted(self._reader().all_steps())

    def unfinished(self) -> list[str]:
        """Names of temporary folders left by a save that never completed."""
        if not self.directory.is_dir():
            return []
        return sorted(p.name for p in self.directory.iterdir() if _TMP_MARK in p.name)

    def check_new_run(self) -> None:
        """Refuse to start a fresh run on top of existing checkpoints (they would be mixed)."""
        steps = self.steps()
        if steps:
            raise CheckpointError(
                f"checkpoint_dir {self.directory} already holds checkpoints of a run (steps "
                f"{steps}). Pass resume=True to continue that run, or choose an empty "
                "directory; tpukit does not overwrite existing checkpoints."
            )

    def load(self, names: list[str], leaves: list[Any], shardings: list[Any]) -> tuple[list, dict]:
        """Restore the newest checkpoint into leaves like ``leaves``; return ``(leaves, record)``."""
        steps = self.steps()
        if not steps:
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
        step = steps[-1]
        with quiet_orbax():
            reader = self._reader()
        try:
            with quiet_orbax():
                record = reader.restore(
                    step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())
                ).meta
        except Exception as e:  # noqa: BLE001 - orbax raises many kinds; all mean "unreadable"
            raise CheckpointError(
                f"Checkpoint step {step} in {self.directory} is incomplete or unreadable: its run "
                f"record ('meta') could not be read ({type(e).__name__}: {e}). Remove the folder "
                f"{self.directory / str(step)} to fall back to an older checkpoint."
            ) from None
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            raise CheckpointError(
                f"Checkpoint step {step} in {self.directory} was not written by tpukit.fit "
                f"(expected format {FORMAT!r}). Point checkpoint_dir at a tpukit run."
            )
        self._compare(record, names, leaves)
        targets = []
        for leaf, sharding in zip(leaves, shardings, strict=True):
            if _is_key(leaf):
                data = jax.random.key_data(leaf)
                targets.append(jax.ShapeDtypeStruct(data.shape, data.dtype, sharding=sharding))
            else:
                targets.append(jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding))
        try:
            with quiet_orbax():
                restored = reader.restore(
                    step, args=ocp.args.Composite(state=ocp.args.StandardRestore(targets))
                ).state
        except Exception as e:  # noqa: BLE001
            raise CheckpointError(
                f"Checkpoint step {step} in {self.directory} is incomplete: its arrays ('state') "
                f"could not be read ({type(e).__name__}: {str(e)[:200]}). Remove the folder "
                f"{self.directory / str(step)} to fall back to an older checkpoint."
            ) from None
        out = [
            jax.random.wrap_key_data(r, impl=jax.random.key_impl(leaf)) if _is_key(leaf) else r
            for r, leaf in zip(restored, leaves, strict=True)
        ]
        return out, record

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

    def save(self, step: int, names: list[str], leaves: list[Any], record: dict) -> None:
        """Write ``leaves`` and ``record`` as checkpoint ``step`` (skipped if it exists)."""
        with quiet_orbax():
            self._save(step, names, leaves, record)

    def _save(self, step: int, names: list[str], leaves: list[Any], record: dict) -> None:
        if self._manager is None:
            opts = ocp.CheckpointManagerOptions(
                max_to_keep=self.keep, create=True, enable_async_checkpointing=False
            )
            self._manager = ocp.CheckpointManager(
                self.directory, options=opts, item_names=("state", "meta")
            )
        if step in self._manager.all_steps():
            return
        shapes, dtypes = describe(leaves)
        record = {**record, "format": FORMAT, "names": names, "shapes": shapes, "dtypes": dtypes}
        arrays = [jax.random.key_data(x) if _is_key(x) else x for x in leaves]
        self._manager.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(arrays), meta=ocp.args.JsonSave(record)
            ),
        )
        self._manager.wait_until_finished()

    def close(self) -> None:
        if self._manager is not None:
            with quiet_orbax():
                self._manager.close()
            self._manager = None


def _few(items: list[str], k: int = 3) -> str:
    if not items:
        return "none"
    return ", ".join(items[:k]) + (f", ... {len(items) - k} more" if len(items) > k else "")
