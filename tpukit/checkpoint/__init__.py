"""Checkpoints of a training run that survive a disconnect, a ^C or a ``kill -9``.

Imports: ``tpukit._errors``, ``tpukit._counts``, ``tpukit._pytree`` (and orbax).

``fit(..., checkpoint_dir=...)`` writes one here every ``checkpoint_every`` steps
(and at each epoch's end) and continues from the newest good one when called again.
This room holds the store itself: orbax's ``CheckpointManager`` under one rule (a
step is written whole or not at all, never one holding NaN or infinity), the
integrity checks run before a restore, and the probe that finds an unwritable folder
before any step trains. What a checkpoint *means* for a run (its settings, its
program's fingerprint) is training's business, in ``tpukit.train``.

Example::

    >>> import numpy as np
    >>> store = RunCheckpoints("run1", every=None)
    >>> names, leaves, _ = flatten({"params": {"w": np.ones((2, 3), np.float32)}})
    >>> store.save(10, names, leaves, {"epoch": 1}), store.steps()
    (True, [10])
    >>> store.close()

Modules: ``_store`` (``RunCheckpoints``: save, restore, fall back past a damaged step),
``_integrity`` (array checksums and file digests), ``_folder`` (can the folder be written).
"""

from tpukit._errors import CheckpointError

from ._folder import check_writable
from ._store import RunCheckpoints, flatten

__all__ = ["CheckpointError", "RunCheckpoints", "check_writable", "flatten"]
