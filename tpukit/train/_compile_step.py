"""``Trainer.compile_step``: the compiled call ``fit`` runs, as a ``tpukit.Compiled``.

``fit`` runs many optimizer steps per compiled call (``_steps.Step``). To look at
that program, graph it, count its collectives or read its memory, users need the
very executable ``fit`` dispatches, not a look-alike: a step compiled without
buffer donation, for instance, gets other copies and another memory plan. So this
module sets the call up exactly as :meth:`Trainer.fit` would (the same ``RunSpec``,
the same placed state, the first call's data), lowers ``fit``'s own jitted function
on it, and wraps the result in :class:`tpukit.Compiled`, which speaks JAX's
staging vocabulary (``lowered``, ``jax_compiled``, ``hlo_text("lowered" |
"optimized")``).

Example::

    >>> step = Trainer(model, optax.adam(1e-3)).compile_step(
    ...     (x, y), batch_size=128, steps_per_execution=100)   # doctest: +SKIP
    >>> step.op_counts()["all-reduce"], step.graph()           # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpukit.compilation import Compiled, Signature, bind_arguments, compile_lowering

from ._memory_fit import fit_fixes
from ._options import RunOptions
from ._run import Position, executions

if TYPE_CHECKING:
    from ._fit import Trainer


def compile_step(trainer: Trainer, train_data: Any, options: RunOptions) -> Compiled:
    """The first compiled call ``trainer.fit(train_data, **options)`` would make."""
    spec, params, rest, _ = trainer._spec(train_data, options)
    kept = trainer.state.optimizer_state(spec.program.key)
    opt_state = spec.program.init(params) if kept is None else kept
    position = Position.continuing(trainer.state, spec.settings())
    _, step, data = next(executions(spec, position))
    state = trainer.plan.put_state(params, rest, opt_state)
    signature = Signature(step.name, bind_arguments(step.function, state, data))
    # Lowering reads shapes and shardings; nothing is donated until the program runs.
    # timeit() and profile() with no arguments run on this state and data, as fit would:
    # random numbers would make Adam's second moments negative and every step non-finite.
    return compile_lowering(
        lambda: step.lower(state, data),
        step.function,
        signature,
        example_arguments=(tuple(state), dict(data)),
        fixes=fit_fixes(spec, params, rest),
    )
