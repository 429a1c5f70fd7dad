"""Training loops that run on the device: ``fit``, ``evaluate``, ``History``.

Imports: ``tpukit.compilation``, ``tpukit.measure``, ``tpukit.runtime``, ``tpukit.hlo``, ``tpukit.display``, ``tpukit.checkpoint``, ``tpukit._errors``, ``tpukit._counts``, ``tpukit._pytree``, ``tpukit._compat``, ``tpukit._interrupts``.

It may import ``tpukit.compilation``, ``runtime``, ``hlo`` and ``display``, never the
zoo (any NNX model trains); ``tests/test_architecture.py`` checks this.

The data lives on the device, many optax steps run inside one compiled call, and
the host only hears about progress once per call.

Example::

    >>> import optax, tpukit
    >>> from flax import nnx
    >>> model = nnx.Linear(8, 4, rngs=nnx.Rngs(0))
    >>> x = np.random.default_rng(0).normal(size=(64, 8)).astype(np.float32)
    >>> y = (x[:, 0] > 0).astype(np.int32)
    >>> history = tpukit.fit(model, optax.adam(1e-2), (x, y), epochs=3, batch_size=16,
    ...                      verbose=False)
    >>> len(history.epochs), sorted(tpukit.evaluate(model, (x, y), batch_size=32))
    (3, ['accuracy', 'loss'])

The same call scales out: ``sharding="data"`` (the default) splits each batch
over every device of every process, ``sharding="fsdp"`` splits the parameters
too, and ``mesh="data=4,model=2", shard={r"l1/kernel": "None,model"}`` takes
your own mesh and partition specs in the words of ``tpukit.compile(..., mesh=,
shard=)`` (``sharding=MeshRules(mesh, rules)`` is the same plan); with
``jax.distributed`` joined (``tpukit.connect``), every process runs the same
``fit``. ``Trainer(...).compile_step(data, ...)`` gives the ``tpukit.Compiled``
of the call ``fit`` runs, to graph, profile or read.

Modules: ``_fit`` (``fit`` and ``Trainer``), ``_options`` (fit's options, declared
once: ``TrainerOptions`` and ``RunOptions``), ``_setup`` (the one set-up path: a
checked ``RunSpec`` and start state for ``fit`` and ``compile_step``, and evaluation's
set-up for ``evaluate`` and ``eval_data``), ``_run`` (the loop and its collaborators),
``_state`` (what carries over between calls, kept beside the model, and the run's
``Position``), ``_evaluate``, ``_program`` (optimizer programs and the fingerprint
checkpoints record), ``_steps`` (the compiled functions), ``_memory_fit`` (whether
fit's program fits the device, and what would), ``_guard`` (the NaN stop), ``_data``
(device-resident and streamed data, and the placed copy a later call on the same arrays
reuses, checked against in-place changes), ``_mesh`` (every sharding decision: the plans,
and ``resolve_plan``, the one reader of ``sharding``/``mesh``/``shard``), ``_layout``
(multi-process placement, the sharding summary), ``_losses``,
``_validate``, ``_memo`` (set-up a second call skips), ``_kept`` (what a later call on the same model
reuses, kept beside it: placed data, the next shuffle, the split, the set-up),
``_history``, ``_progress`` and ``_exceptions``. The checkpoints themselves (orbax,
checksums, file digests) are their own room, ``tpukit.checkpoint``.
"""

from ._evaluate import evaluate
from ._exceptions import CheckpointError, NonFiniteLossError
from ._fit import Trainer, fit
from ._guard import NonFiniteLossWarning
from ._history import History
from ._layout import ShardingSummary
from ._losses import accuracy, cross_entropy, top_k_accuracy
from ._mesh import FSDP, DataParallel, MeshRules
from ._state import TrainingState

__all__ = [
    "CheckpointError",
    "DataParallel",
    "FSDP",
    "History",
    "MeshRules",
    "NonFiniteLossError",
    "NonFiniteLossWarning",
    "ShardingSummary",
    "Trainer",
    "TrainingState",
    "accuracy",
    "cross_entropy",
    "evaluate",
    "fit",
    "top_k_accuracy",
]
