"""Does ``fit``'s program fit the device's memory, and if not, what would: measured.

Before its first step, ``fit`` compiles its first call on abstract shapes (nothing is
placed, nothing runs) and compares what it needs at once (``memory_analysis()``:
arguments + outputs - aliases + temporaries + code) with the device's memory: a
capacity set with ``tpukit.set_device_memory`` / ``TPUKIT_DEVICE_MEMORY``, else the
device's own ``bytes_limit``. A CPU without a configured capacity is not checked
(nothing to compare with, and no compile spent).

When it does not fit, the ``DeviceMemoryError`` says so before any epoch starts, with
the buffers at the peak and a table of changes, each compiled and measured here:

- the largest ``batch_size`` that fits (``_out_of_memory.search_batch``);
- bf16 parameters (and so bf16 optimizer moments);
- ``nnx.remat`` on the fewest repeated layers (the blocks held in lists, the earliest
  first) that fit, found as the batch is: the backward pass recomputes their
  activations instead of keeping them. On a CPU this is measured with XLA's
  ``cse_barrier_expander`` pass off (`KEEP_REMAT`): XLA's CPU compiler otherwise
  removes remat's optimization barriers before scheduling and its CSE merges the
  recomputation back into the forward pass, so ``nnx.remat`` saves nothing there
  (ResNet-18's step at batch 32: 199 MiB of temporaries without remat, 214 MiB with
  it, 88 MiB with it and the pass off). GPU and TPU compilers remove the barriers
  only after scheduling, so remat holds there as measured;
- fewer steps per execution (one), which shrinks a streamed chunk;
- the data left on the host: ``train_data`` as an iterable of batches, streamed a
  few steps at a time, instead of the whole dataset on the device.

The jitted call is the one ``fit`` then runs, on the same shapes and shardings, so the
check's compile is the first call's: JAX's cache serves it.

    >>> _label(("layers", 0))
    'layers[0]'
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from tpukit._errors import DeviceMemoryError
from tpukit.compilation import (
    Compiled,
    Fix,
    Signature,
    bind_arguments,
    compile_lowering,
    device_capacity,
    explain,
    measuring,
    needed_bytes,
    search_batch,
)
from tpukit.display import format_bytes, format_count
from tpukit.runtime import available_bytes

from . import _steps
from ._data import ResidentData
from ._setup import shuffle_block

if TYPE_CHECKING:
    from ._setup import RunSpec
    from ._state import Position

_HOST_STEPS = 8  # steps per streamed chunk when the data is left on the host
#: Compiler options that keep ``nnx.remat``'s recomputation on a CPU (see the docstring),
#: and the same as the flag a user sets for a whole process.
KEEP_REMAT = {"xla_disable_hlo_passes": "cse_barrier_expander"}
KEEP_REMAT_FLAG = "XLA_FLAGS=--xla_disable_hlo_passes=cse_barrier_expander"


def check_fits(spec: RunSpec, params: Any, rest: Any, opt_state: Any, position: Position) -> None:
    """Raise ``DeviceMemoryError`` before the first step when fit's call cannot fit.

    Silent when it fits, and when the capacity is unknown (a CPU without one set).
    """
    capacity, origin = device_capacity(spec.plan.mesh.devices.flat[0])
    if capacity is None:
        return
    # compile_lowering refuses a program over a configured capacity itself, explained.
    compiled = first_call(spec, params, rest, opt_state, position)
    needed = needed_bytes(compiled.jax_compiled)
    if needed is not None and needed > capacity:
        raise DeviceMemoryError(explain(compiled, capacity, origin, fixes=compiled.fixes))


@contextlib.contextmanager
def explained_out_of_memory(spec: RunSpec, state: Any, position: Position) -> Iterator[None]:
    """Turn a device's out-of-memory inside the run (from ``state``, a ``_flat.FlatState``) (``RESOURCE_EXHAUSTED``: the device
    held less than the check assumed, or no capacity was known) into the explained
    ``DeviceMemoryError``. The run has written back the last call it applied whole."""
    try:
        yield
    except jax.errors.JaxRuntimeError as exc:
        if "RESOURCE_EXHAUSTED" not in str(exc):
            raise
        device = spec.plan.mesh.devices.flat[0]
        capacity, origin = device_capacity(device)
        if capacity is None:
            capacity, origin = available_bytes(device), "free now"
        try:
            compiled = first_call(spec, *state.tree(), position)
        except Exception:  # the explanation must never hide the error it explains
            raise exc from None
        raise DeviceMemoryError(
            f"fit ran out of device memory on {device.device_kind} ({str(exc).splitlines()[0]}). "
            "The model keeps the state of the last call applied whole.\n"
            + explain(compiled, capacity, origin, fixes=compiled.fixes)
        ) from None


def first_call(
    spec: RunSpec, params: Any, rest: Any, opt_state: Any, position: Position
) -> Compiled:
    """fit's first call compiled on abstract state and data, as a ``tpukit.Compiled``."""
    step, state, data = _call(spec, params, rest, opt_state, start=position.step)
    signature = Signature(step.name, bind_arguments(step.function, state, data))
    return compile_lowering(
        lambda: step.lower(state, data),
        step.function,
        signature,
        fixes=fit_fixes(spec, params, rest),
        calling=step.calling(state),
    )


# ----------------------------------------------------------------------------- one call


def _abstract(tree: Any, shardings: Any = None) -> Any:
    if shardings is None:
        return jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=_sharding(x)), tree
        )
    return jax.tree.map(
        lambda x, s: jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=s), tree, shardings
    )


def _sharding(x: Any) -> Any:
    return getattr(x, "sharding", None) if isinstance(x, jax.Array) else None


def _call(
    spec: RunSpec,
    params: Any,
    rest: Any,
    opt_state: Any,
    *,
    start: int = 0,
    streamed: bool = False,
) -> tuple[_steps.Step, tuple, dict]:
    """``(step, abstract state, abstract data)`` of the first call of ``spec``'s run."""
    shardings = spec.plan.state_shardings(params, rest, opt_state)
    state = tuple(_abstract(t, s) for t, s in zip((params, rest, opt_state), shardings))
    resident = isinstance(spec.source, ResidentData)
    if resident and not streamed:
        step = _steps.resident_execution(
            spec.graphdef,
            spec.objective,
            spec.program,
            spec.plan,
            min(spec.steps_per_call, spec.steps_per_epoch - start),
            spec.guard_mode,
        )
        rows = shuffle_block(spec) * spec.steps_per_epoch  # a block of epochs, as fit sends
        indices = jax.ShapeDtypeStruct(
            (rows, spec.batch_size), jnp.int32, sharding=spec.plan.replicated()
        )
        data = {
            "arrays": _abstract(spec.source.arrays),
            "indices": indices,
            "start": np.int32(start),
        }
        return step, state, data
    step = _steps.streamed_execution(
        spec.graphdef, spec.objective, spec.program, spec.plan, spec.guard_mode
    )
    batch = spec.source.sample(spec.batch_size)
    sharding = spec.plan.batch_sharding(1)
    chunk = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(
            (spec.steps_per_call, spec.batch_size, *a.shape[1:]), a.dtype, sharding=sharding
        ),
        batch,
    )
    return step, state, {"chunk": chunk}


def _needed(
    spec: RunSpec,
    params: Any,
    rest: Any,
    opt_state: Any = None,
    *,
    streamed: bool = False,
    compiler_options: dict[str, Any] | None = None,
) -> int | None:
    """Bytes fit's first call needs with this spec and state, compiled on shapes."""
    if opt_state is None:
        opt_state = jax.eval_shape(spec.program.init, params)
    step, state, data = _call(spec, params, rest, opt_state, streamed=streamed)
    lowered = step.lower(state, data)
    with measuring():
        if compiler_options:
            return needed_bytes(lowered.compile(compiler_options=compiler_options))
        return needed_bytes(lowered.compile())


# ----------------------------------------------------------------------------- the fixes


def fit_fixes(spec: RunSpec, params: Any, rest: Any):
    """``fixes(compiled, available, view)`` for ``explain``: fit's changes, measured."""

    def fixes(compiled: Compiled, available: int, view: Any) -> list[Fix]:
        needed = needed_bytes(compiled.jax_compiled) or 0
        found = [_batch_fix(spec, params, rest, needed, available)]
        found.append(_bf16_fix(spec, params, rest, available))
        found.append(_remat_fix(spec, params, rest, needed, available))
        if spec.steps_per_call > 1:
            fewer = dataclasses.replace(spec, steps_per_call=1)
            found.append(Fix("steps_per_execution=1", _needed(fewer, params, rest), available))
        if isinstance(spec.source, ResidentData):
            steps = min(spec.steps_per_call, _HOST_STEPS)
            host = dataclasses.replace(spec, steps_per_call=steps)
            found.append(
                Fix(
                    f"data left on the host, steps_per_execution={steps}",
                    _needed(host, params, rest, streamed=True),
                    available,
                    "train_data as an iterable of (x, y) batches, streamed in chunks",
                )
            )
        return [f for f in found if f is not None]

    return fixes


def _with_batch(spec: RunSpec, batch_size: int) -> RunSpec:
    if not isinstance(spec.source, ResidentData):
        return dataclasses.replace(spec, batch_size=batch_size)
    per_epoch = spec.source.n // batch_size
    steps = spec.options.steps_per_execution
    per_call = per_epoch if steps == "epoch" else min(int(steps), per_epoch)
    return dataclasses.replace(
        spec, batch_size=batch_size, steps_per_epoch=per_epoch, steps_per_call=per_call
    )


def _batch_fix(spec: RunSpec, params: Any, rest: Any, needed: int, available: int) -> Fix | None:
    shards = spec.plan.batch_shards
    found = search_batch(
        lambda size: _needed(_with_batch(spec, size), params, rest),
        spec.batch_size,
        needed,
        available,
        multiple=shards,
    )
    if found is None:
        return None
    fix = found.fix(available)
    if found.fitted:
        split = f", a multiple of the {shards} devices the batch is split over" * (shards > 1)
        fix = dataclasses.replace(
            fix,
            summary=f"The largest batch that fits is {found.fitted} of {spec.batch_size}{split}."
            if found.exact
            else f"A batch of {found.fitted} of {spec.batch_size} fits{split}.",
        )
    return fix


def _bf16_fix(spec: RunSpec, params: Any, rest: Any, available: int) -> Fix | None:
    def cast(x: Any) -> Any:
        dtype = jnp.bfloat16 if x.dtype == jnp.float32 else x.dtype
        return jax.ShapeDtypeStruct(np.shape(x), dtype)

    if not any(x.dtype == jnp.float32 for x in jax.tree.leaves(params)):
        return None
    return Fix(
        "bf16 parameters",
        _needed(spec, jax.tree.map(cast, params), rest),
        available,
        "and so bf16 optimizer moments",
    )


def _remat_fix(spec: RunSpec, params: Any, rest: Any, needed: int, available: int) -> Fix | None:
    """``nnx.remat`` on the fewest repeated layers that fit, the earliest first, measured.

    A block keeps its activations from its forward pass until the backward pass reaches
    it: the earliest keep theirs longest, and the last hands its own straight to the
    backward pass, which would recompute them at once. So the blocks are tried in the
    model's order (the 6 blocks of 4 tanh layers, 512 wide, 1024 examples a device: the
    step 212.0 MiB; blocks[0] alone 206.0, blocks[5] alone 212.0; blocks[0] to [3]
    188.0, five or all six 184.5). Which ones hold bytes at the
    peak is no guide: on a CPU the peak is often in the optimizer update, after the
    activations are freed, and a backward buffer can be named after a block (JAX 0.7:
    the gradients' tuple, 25.6 MiB, as blocks[0]'s).

    What the step needs shrinks as more blocks are rematted, so the search for the
    largest batch finds the fewest: its "batch" is the number of blocks left as they
    are (``needed`` with all of them: the program as it is). When no fewer than all fit,
    all are measured: the most remat can do, fitting or over.
    """
    order = _blocks(nnx.merge(spec.graphdef, params, rest))
    if not order:
        return None
    on_cpu = spec.plan.mesh.devices.flat[0].platform == "cpu"
    count = len(order)
    found = search_batch(
        lambda plain: _remat_needed(spec, params, rest, order[: len(order) - plain], on_cpu),
        count,
        needed,
        available,
    )
    if found is not None and found.fitted:
        count -= found.fitted
        figure = found.needed
    else:  # none fewer than all fit, or one block: all of them
        figure = _remat_needed(spec, params, rest, order, on_cpu)
    fewer = ""
    if found is not None and count > 1 and figure is not None and figure <= available:
        fewer = (
            f"; on {format_count(count - 1, 'layer')}: {format_bytes(found.over_needed)}, over"
            if found.exact and found.over_needed is not None
            else "; fewer were not all tried"
        )
    chosen = order[:count]
    shown = ", ".join(chosen[:4]) + (f" and {len(chosen) - 4} more" if len(chosen) > 4 else "")
    shown += fewer
    summary = ""
    if on_cpu:
        shown += "; with XLA's cse_barrier_expander off"
        summary = (
            "On a CPU nnx.remat saves memory only with XLA's cse_barrier_expander pass off "
            f"({KEEP_REMAT_FLAG} before JAX starts): XLA's CPU compiler otherwise removes "
            "remat's barriers and merges the recomputation back. GPU and TPU compilers keep it."
        )
    return Fix(
        f"nnx.remat on {format_count(count, 'layer')}", figure, available, shown, summary=summary
    )


def _remat_needed(
    spec: RunSpec, params: Any, rest: Any, blocks: list[str], on_cpu: bool
) -> int | None:
    """Bytes fit's first call needs with ``blocks`` run under ``nnx.remat`` (`_remat_class`
    on a merged copy of the model), compiled with `KEEP_REMAT` on a CPU."""
    model = nnx.merge(spec.graphdef, params, rest)
    chosen = set(blocks)
    for path, node in nnx.iter_graph(model):
        if isinstance(node, nnx.Module) and _label(path) in chosen:
            node.__class__ = _remat_class(type(node))
    graphdef, new_params, new_rest = _steps.split_model(model)
    remat = dataclasses.replace(spec, graphdef=graphdef)
    return _needed(remat, new_params, new_rest, compiler_options=KEEP_REMAT if on_cpu else None)


def _blocks(model: nnx.Module) -> list[str]:
    """The repeated layers: modules held in a list (``layers[0]``), outermost only, in
    the model's order (``layers[2]`` before ``layers[10]``)."""
    paths = [
        tuple(path)
        for path, node in nnx.iter_graph(model)
        if isinstance(node, nnx.Module) and path and isinstance(path[-1], int)
    ]
    outer = [p for p in paths if not any(q != p and p[: len(q)] == q for q in paths)]
    return [_label(p) for p in sorted(outer, key=_path_order)]


def _path_order(path: tuple) -> list[tuple[int, int | str]]:
    """A module path's sort key: its indices as numbers (``layers[2]`` before ``layers[10]``)."""
    return [(0, k) if isinstance(k, int) else (1, str(k)) for k in path]


def _label(path: tuple) -> str:
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else str(key))
    return text


@functools.cache
def _remat_class(cls: type) -> type:
    """``cls`` whose call runs under ``nnx.remat``: its activations are recomputed in
    the backward pass instead of kept."""
    call = cls.__call__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return nnx.remat(lambda module, *a: call(module, *a, **kwargs))(self, *args)

    return type(cls.__name__, (cls,), {"__call__": __call__, "__module__": cls.__module__})


# ----------------------------------------------------------------------------- evaluate


def evaluate_within_memory(
    evaluation: Callable[[int], Any],
    batch_size: int,
    plan: Any,
    params: Any,
    rest: Any,
    arrays: Any,
) -> Any:
    """``evaluation(batch_size)(params, rest, arrays)``: evaluate's one compiled call,
    with an out-of-memory explained as fit's is.

    ``evaluation(size)`` is evaluate's jitted program at batch ``size``. With a known
    capacity (one set, or the device's ``bytes_limit``) the program is compiled first
    and checked, and that executable runs; a ``RESOURCE_EXHAUSTED`` while running is
    explained too. The explanation lists the buffers at the peak and what would fit:
    the largest ``batch_size`` and bf16 parameters, each compiled on shapes. The model
    and the data are only read.
    """
    device = plan.mesh.devices.flat[0]
    capacity, origin = device_capacity(device)
    arguments = (params, rest, arrays)
    if capacity is not None:
        compiled = _evaluation_compiled(evaluation, batch_size, plan, arguments)
        needed = needed_bytes(compiled.jax_compiled)
        if needed is not None and needed > capacity:
            raise DeviceMemoryError(explain(compiled, capacity, origin, fixes=compiled.fixes))
        run = compiled.jax_compiled
    else:
        run = evaluation(batch_size)
    try:
        return run(*arguments)
    except jax.errors.JaxRuntimeError as exc:
        if "RESOURCE_EXHAUSTED" not in str(exc):
            raise
        if capacity is None:
            capacity, origin = available_bytes(device), "free now"
        try:
            compiled = _evaluation_compiled(evaluation, batch_size, plan, arguments)
        except Exception:  # the explanation must never hide the error it explains
            raise exc from None
        raise DeviceMemoryError(
            f"evaluate ran out of device memory on {device.device_kind} "
            f"({str(exc).splitlines()[0]}). The model is unchanged.\n"
            + explain(compiled, capacity, origin, fixes=compiled.fixes)
        ) from None


def per_device_bytes(tree: Any) -> int:
    """Bytes of a pytree of arrays (or shapes) one device holds: each leaf's shard where it
    has a sharding, else the whole leaf."""
    total = 0
    for leaf in jax.tree.leaves(tree):
        shape = np.shape(leaf)
        sharding = getattr(leaf, "sharding", None)
        if sharding is not None and hasattr(sharding, "shard_shape"):
            shape = sharding.shard_shape(shape)
        total += int(np.prod(shape)) * np.dtype(leaf.dtype).itemsize
    return total


def data_blame(state: Any, data: Any, available: int) -> str:
    """What does not fit when even the smallest batch is over, where it is the data put on
    the devices (it fits without the data, not with it); empty otherwise."""
    held, share = per_device_bytes(state), per_device_bytes(data)
    if not share or held > available or held + share <= available:
        return ""
    return (
        f"each device's share of the data put on the devices ({format_bytes(share)}) does "
        f"not fit beside the weights and state ({format_bytes(held)})"
    )


def _evaluation_compiled(
    evaluation: Callable[[int], Any], batch_size: int, plan: Any, arguments: tuple
) -> Compiled:
    """evaluate's program at ``batch_size`` as a ``tpukit.Compiled``, named ``evaluate``;
    a configured capacity it exceeds refuses it, explained (``compile_lowering``)."""
    jitted = evaluation(batch_size)
    abstract = tuple(_abstract(a) for a in arguments)
    signature = Signature("evaluate", bind_arguments(jitted, abstract, {}))
    return compile_lowering(
        lambda: jitted.lower(*abstract),
        jitted,
        signature,
        fixes=_evaluation_fixes(evaluation, batch_size, plan, abstract),
    )


def _evaluation_fixes(
    evaluation: Callable[[int], Any], batch_size: int, plan: Any, abstract: tuple
) -> Callable[[Compiled, int, Any], list[Fix]]:
    """evaluate's changes, measured: a smaller ``batch_size``, bf16 parameters."""

    def needed_at(size: int, params: Any = None) -> int | None:
        arguments = (abstract[0] if params is None else params, *abstract[1:])
        with measuring():
            return needed_bytes(evaluation(size).lower(*arguments).compile())

    def fixes(compiled: Compiled, available: int, view: Any) -> list[Fix]:
        found = []
        search = search_batch(
            needed_at,
            batch_size,
            needed_bytes(compiled.jax_compiled) or 0,
            available,
            multiple=plan.batch_shards,
        )
        if search is not None:
            blame = data_blame(abstract[:2], abstract[2], available)
            fix = search.fix(available, blame=blame)
            if search.exact and not search.fitted and blame:
                fix = dataclasses.replace(
                    fix,
                    summary="evaluate puts the whole dataset on the devices: evaluate it in "
                    "parts (slices of the arrays) and average, or split it over more devices "
                    "(mesh=).",
                )
            if search.fitted:
                fix = dataclasses.replace(
                    fix,
                    summary=f"The largest batch that fits is {search.fitted} of {batch_size}."
                    if search.exact
                    else f"A batch of {search.fitted} of {batch_size} fits.",
                )
            found.append(fix)
        params = abstract[0]
        if any(x.dtype == jnp.float32 for x in jax.tree.leaves(params)):
            cast = jax.tree.map(
                lambda x: jax.ShapeDtypeStruct(
                    x.shape,
                    jnp.bfloat16 if x.dtype == jnp.float32 else x.dtype,
                    sharding=x.sharding,
                ),
                params,
            )
            found.append(Fix("bf16 parameters", needed_at(batch_size, cast), available))
        return found

    return fixes
