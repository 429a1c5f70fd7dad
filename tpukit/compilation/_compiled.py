"""Compile a function for the current device from example or abstract arguments.

``tpukit.compile`` is the Python side of ``%%tpu_compile``: like XLA.jl's
``@tpu_compile f(data)``, only the arguments' shapes and dtypes are used, and
the result is a callable object that also tells what XLA made of the function.

>>> import jax.numpy as jnp, tpukit
>>> def f(x, w):
...     return jnp.tanh(x @ w)
>>> c = tpukit.compile(f, tpukit.shape("f32[128,784]"), tpukit.shape("f32[784,10]"))
>>> c.signature.output.shape
(128, 10)
>>> c.op_counts()["dot"]
1
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

import jax
from flax import nnx
from jax.sharding import Mesh, PartitionSpec

from tpukit._compat import attribute_library_frames_to_callers
from tpukit._counts import as_count
from tpukit._errors import ArgumentError, CompileError, DeviceMemoryError, user_facing
from tpukit.compilation import _plots
from tpukit.compilation._analysis import Memory, memory_of, xla_cost_analysis
from tpukit.compilation._compile_cache import cache_hit_count
from tpukit.compilation._compile_phases import CompilePhases, compile_phases
from tpukit.compilation._ledger import CompileRecord, record_count, records_since
from tpukit.compilation._memory import configured_capacity, memory_view_of
from tpukit.compilation._out_of_memory import (
    compile_fixes,
    explain,
    is_measuring,
    needed_bytes,
)
from tpukit.compilation._placement import mesh_of, onto_device, place_arguments, place_like
from tpukit.compilation._sample_data import concrete_arguments
from tpukit.compilation._signature import Signature, bind_arguments
from tpukit.compilation._staged import module_call, output_info, staged_function
from tpukit.compilation._summary import CompileFacts, summary
from tpukit.compilation._user_errors import describe_compile_error
from tpukit.display import Report, describe_location
from tpukit.hlo import (
    Collective,
    Cost,
    Fusion,
    HloGraph,
    HloModule,
    HloProgram,
    name_locations_with,
)
from tpukit.measure import Profile, TimingResult, peak_for, profile_call, time_call
from tpukit.runtime import available_bytes, one_at_a_time, settled

attribute_library_frames_to_callers()
name_locations_with(describe_location)  # HLO names notebook cells as their user sees them

Stage = Literal["lowered", "optimized"]


class Calling(NamedTuple):
    """How a `Compiled` calls an executable lowered on another form of its function's
    arguments (fit's step takes its state as flat leaves): ``arguments(args, kwargs)``
    gives the executable's arguments, ``results`` maps its output back, and
    ``shardings`` maps its input shardings to ``(positional, keywords)``.
    ``argument_names`` gives the executable's arguments their paths in the function's
    trees (``{"leaves[0]": "state[0]['layers'][0]['kernel'].value"}``), by which the
    memory view and the graph tell a layer's weight and its role."""

    arguments: Callable[[tuple, dict], tuple]
    results: Callable[[Any], Any]
    shardings: Callable[[tuple], tuple[tuple, dict]]
    argument_names: Mapping[str, str] = MappingProxyType({})


#: The executable takes the function's arguments as they are.
AS_GIVEN = Calling(lambda args, kwargs: (args, kwargs), lambda out: out, tuple)


@user_facing
def compile(  # noqa: A001
    function: Callable[..., Any],
    *args: Any,
    mesh: str | Mesh | None = None,
    shard: Mapping[str, str | PartitionSpec] | None = None,
    batch_argument: str | None = None,
    **kwargs: Any,
) -> Compiled:
    r"""Compile ``function`` for the arguments' shapes and dtypes on JAX's default device.

    Arguments may be real arrays (on the host or a device), ``jax.ShapeDtypeStruct``,
    shapes from ``tpukit.shape("f32[128,784]")``, or pytrees of these (a dict of
    weights, an NNX module). Any other hashable value (a number, a string, a tuple)
    is static: the program is specialised on it.

    An NNX module may itself be the function (``tpukit.compile(model, x)``): its
    weights are then traced as the call's first argument, ``self``, never baked into
    the program, so the compiled object always runs on the module's current weights.

    ``mesh`` partitions the program over a device mesh (``"data=4,model=2"``, ``-1`` for
    the remaining devices, or a ``jax.sharding.Mesh``) and ``shard`` says how each named
    argument is split over it, one entry per dimension (``{"x": "data", "w": "None,model"}``
    or ``PartitionSpec``\ s); arguments it does not name are replicated. The summary then
    shows the layout and the collectives XLA inserted.

    ``batch_argument`` names the argument whose first dimension is the batch, for the
    advice on what fits when the program is over the device's memory; left out, it is
    the leading dimension the array arguments share (the first argument's when several
    could be). (The function's own arguments cannot be called ``mesh``, ``shard`` or
    ``batch_argument``.)

    Returns a ``Compiled`` object: call it on device data, read its ``cost``,
    ``memory``, ``op_counts()`` and ``hlo_text()``, or show it in a notebook.
    Raises ``CompileError`` pointing at the line of the user's function that failed.

    Example::

        >>> w = jnp.ones((4, 2))
        >>> c = tpukit.compile(lambda x, w: x @ w, tpukit.shape("f32[8,4]"), w)
        >>> c.signature.output.shape
        (8, 2)
        >>> s = tpukit.compile(f, jnp.ones((128, 784)), jnp.ones((784, 10)), mesh="data=8",
        ...                    shard={"x": "data"})  # with eight devices here
        >>> s.mesh
        {'data': 8}
    """
    if not callable(function):
        raise ArgumentError(
            f"tpukit.compile takes the function to compile first, then its arguments; got "
            f"{type(function).__name__} {str(function)[:40]!r}. Write tpukit.compile(f, x, ...)."
        )
    original = function
    bound: tuple[Any, ...] = ()
    if isinstance(function, nnx.Module):
        bound = (function,)
        function = module_call(function)
        args = (*bound, *args)
    if shard and mesh is None:
        raise ArgumentError(
            'shard= needs mesh=, e.g. tpukit.compile(f, x, mesh="data=8", shard={"x": "data"}).'
        )
    if mesh is not None:
        args, kwargs = place_arguments(function, args, kwargs, mesh, shard or {})
    name = getattr(function, "__name__", None) or type(function).__name__
    parameters = bind_arguments(function, args, kwargs)
    if batch_argument is not None and batch_argument not in {p.name for p in parameters}:
        raise ArgumentError(
            f"batch_argument={batch_argument!r} names no argument of {name}; its arguments "
            f"are {', '.join(p.name for p in parameters)}. Name the one whose first "
            "dimension is the batch."
        )
    signature = Signature(name, parameters)
    traced_args, traced_kwargs = signature.split(
        tuple(p.value for p in parameters if not p.keyword),
        {p.name: p.value for p in parameters if p.keyword},
    )
    staged = staged_function(function, name, parameters)
    return compile_lowering(
        lambda: jax.jit(staged).lower(traced_args, traced_kwargs),
        original,
        signature,
        bound_arguments=bound,
        fixes=compile_fixes(compile, batch_argument),
    )


def compile_lowering(
    lower: Callable[[], Any],
    function: Callable[..., Any],
    signature: Signature,
    *,
    bound_arguments: tuple = (),
    example_arguments: tuple[tuple, dict] | None = None,
    fixes: Callable[..., list] | None = None,
    calling: Calling = AS_GIVEN,
) -> Compiled:
    """Lower with ``lower()``, compile, and wrap the result as a `Compiled` of ``function``
    (its executable called as ``calling`` says).

    The one place that times the two stages, notices a persistent-cache hit, fills in
    the signature's output and turns a failure into a `CompileError` at the user's line;
    ``tpukit.compile`` and ``Trainer.compile_step`` (fit's own jitted step) both use it.
    ``fixes(compiled, available, view)`` measures what would make the program fit when it
    does not (see ``_out_of_memory.explain``).
    """
    hits_before = cache_hit_count()
    ledger_mark = record_count()
    start = time.perf_counter()
    try:
        lowered = lower()
    except Exception as exc:
        raise CompileError(describe_compile_error(exc, str(signature))) from exc
    lowered_at = time.perf_counter()
    try:
        executable = lowered.compile()
    except Exception as exc:
        if "RESOURCE_EXHAUSTED" in str(exc):  # XLA could not place the program at all
            raise DeviceMemoryError(
                f"XLA could not fit {signature} in device memory while compiling it. Use "
                "smaller shapes (a smaller batch) or more devices with mesh=."
            ) from None
        raise CompileError(describe_compile_error(exc, str(signature))) from exc
    done = time.perf_counter()
    signature.output = output_info(lowered, executable)
    compiled = Compiled(
        function=function,
        bound_arguments=bound_arguments,
        signature=signature,
        lowered=lowered,
        executable=executable,
        lower_seconds=lowered_at - start,
        xla_seconds=done - lowered_at,
        from_cache=cache_hit_count() > hits_before,
        example_arguments=example_arguments,
        fixes=fixes,
        calling=calling,
    )
    ours = [r for r in records_since(ledger_mark) if r.kind == "jit"]
    compiled.compile_record = ours[-1] if ours else None
    compiled._check_configured_capacity()  # memory hook: a set capacity refuses at compile
    return compiled


class Compiled:
    """A function compiled by XLA for fixed argument shapes, ready to run on the device.

    Call it like the original function (same positional and keyword arguments,
    static values included); a call whose shapes or dtypes differ from the
    compiled signature raises ``SignatureMismatchError`` saying which argument
    differs and how to recompile. The object also speaks JAX's staging vocabulary:
    ``lowered`` is the ``jax.stages.Lowered``, ``jax_compiled`` the
    ``jax.stages.Compiled``, and ``stage="lowered"|"optimized"`` selects the HLO
    before or after XLA's optimisation passes.

    It *has* a program, ``program`` (a ``tpukit.hlo.HloProgram`` of both stages, with
    XLA's cost analysis in its ``cost``), beside the executable and what compiling told
    (``compile_seconds``, ``memory``, the devices and shardings). ``hlo_text``,
    ``op_counts``, ``cost``, ``fusions``, ``collectives`` and ``graph`` read the program;
    ``timeit`` and ``profile`` hand the executable to ``tpukit.measure``.
    """

    def __init__(
        self,
        *,
        function: Callable[..., Any],
        signature: Signature,
        bound_arguments: tuple[Any, ...] = (),
        lowered: Any,
        executable: Any,
        lower_seconds: float,
        xla_seconds: float,
        from_cache: bool,
        example_arguments: tuple[tuple, dict] | None = None,
        fixes: Callable[..., list] | None = None,
        calling: Calling = AS_GIVEN,
    ):
        self.function = function
        self.calling = calling
        # What an out-of-memory explanation measures as "what would fit" (None: nothing).
        self.fixes = fixes
        self.bound_arguments = bound_arguments
        # What `timeit()` and `profile()` run on when given nothing, where random data
        # would not do (fit's step: Adam's second moments must not be negative).
        self.example_arguments = example_arguments
        self.signature = signature
        self.lowered = lowered
        self.jax_compiled = executable
        self.lower_seconds = lower_seconds
        self.xla_seconds = xla_seconds
        self.from_cache = from_cache
        # the compile ledger's record of this compile: JAX's own trace/lower/XLA seconds
        self.compile_record: CompileRecord | None = None
        self._phases: CompilePhases | None = None
        #: The last ``timeit()`` (or ``%tpu_timeit``) of this program; ``plot_roofline``
        #: places the program at its achieved FLOP/s. ``None`` until timed.
        self.timing: TimingResult | None = None

    @property
    def name(self) -> str:
        return self.signature.name

    @property
    def compile_seconds(self) -> float:
        """Wall time of tracing, lowering and XLA compilation together."""
        return self.lower_seconds + self.xla_seconds

    @property
    def devices(self) -> list[Any]:
        """The devices the program runs on."""
        shardings = jax.tree_util.tree_leaves(
            getattr(self.jax_compiled, "output_shardings", None)
        ) or jax.tree_util.tree_leaves(getattr(self.jax_compiled, "input_shardings", None))
        found = {d for s in shardings for d in getattr(s, "device_set", ())}
        return sorted(found, key=lambda d: d.id) or [jax.devices()[0]]

    @property
    def device_kind(self) -> str:
        return self.devices[0].device_kind

    @property
    def input_shardings(self) -> dict[str, Any]:
        """The sharding of each traced argument by name (a pytree of them for pytree arguments)."""
        positional, keywords = self.calling.shardings(self.jax_compiled.input_shardings[0])
        names = [p.name for p in self.signature.arrays if not p.keyword]
        return {**dict(zip(names, positional)), **keywords}

    @property
    def output_shardings(self) -> Any:
        """The sharding of the output (a pytree of them for pytree outputs)."""
        return self.jax_compiled.output_shardings

    @property
    def mesh(self) -> dict[str, int] | None:
        """Axis sizes of the device mesh the program is partitioned over, e.g. ``{"data": 8}``."""
        return mesh_of((self.jax_compiled.input_shardings, self.output_shardings))

    @functools.cached_property
    def program(self) -> HloProgram:
        """The program itself, both stages: what JAX lowered and what XLA optimized.

        Everything said about the HLO (op counts, cost, fusions, collectives, the graph)
        is the program's; the methods of the same names here read it.
        """
        lowered, executable = self.lowered, self.jax_compiled
        return HloProgram(
            {
                "lowered": lambda: lowered.as_text(dialect="hlo", debug_info=True),
                "optimized": executable.as_text,
            },
            name=self.name,
            device_kind=self.device_kind,
            xla_cost=lambda: xla_cost_analysis(executable),
            argument_names=self.argument_paths(),
        )

    def argument_paths(self) -> dict[str, str]:
        """``{path JAX gave an argument of the program: the name to show}``: the
        signature's (``traced_args[0]`` is ``x``) and the executable's own form of the
        arguments (`Calling.argument_names`), for the graph and the memory view."""
        return {**self.signature.argument_paths(), **self.calling.argument_names}

    def collectives(self) -> list[Collective]:
        """The cross-device collectives XLA put in the optimized program (count and bytes each)."""
        return self.program.collectives("optimized")

    @user_facing
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # noqa: F841 - IPython and pytest hide this frame
        traced = self._traced_arguments((*self.bound_arguments, *args), kwargs)
        with self._device_memory_errors():  # memory hook: an out-of-memory explained
            self._check_configured_capacity()
            return self.calling.results(settled(self.jax_compiled(*traced), self.devices))

    def _traced_arguments(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        __tracebackhide__ = True  # noqa: F841 - IPython and pytest hide this frame
        traced = self.calling.arguments(*self.signature.check_call(args, kwargs))
        if len(self.devices) > 1:
            traced = place_like(traced, self.jax_compiled.input_shardings[0])
        else:
            traced = onto_device(traced, self.devices[0])
        return traced

    def hlo_text(self, stage: Stage = "optimized") -> str:
        """The HLO text of the ``"lowered"`` program (as JAX emitted it, with source
        metadata) or the ``"optimized"`` one (after XLA's passes: fusions, layouts)."""
        return self.program.hlo_text(stage)

    def hlo_module(self, stage: Stage = "optimized") -> HloModule:
        """The HLO of one stage parsed into tpukit's graph model (see ``tpukit.hlo``)."""
        return self.program.hlo_module(stage)

    def op_counts(self, stage: Stage = "optimized", *, open_fusions: bool = True) -> Counter:
        """How many HLO instructions of each opcode the program has.

        Fusions are counted and, with ``open_fusions``, opened: the ops inside each
        fusion count too, like the instruction-count table of the XLA.jl paper.
        """
        return self.program.op_counts(stage, open_fusions=open_fusions)

    @property
    def cost(self) -> Cost:
        """FLOPs, transcendentals and bytes of one call (see ``tpukit.Cost``)."""
        return self.program.cost

    @functools.cached_property
    def memory(self) -> Memory | None:
        """Argument, output, temporary and code bytes on the device, or None if unknown."""
        return memory_of(self.jax_compiled)

    def memory_view(self, *, capacity: int | str | None = None):
        """What fills the device: the peak, the buffers live then, live bytes over the schedule.

        From XLA's own buffer assignment and live ranges (the lowering is compiled once more
        with XLA's dump options); an estimate from the schedule, said so, where XLA gives
        none. ``capacity`` (bytes or ``"16GiB"``) overrides the device's memory for the
        comparison. Returns a ``MemoryView`` (a chart and tables in a notebook).

            >>> view = c.memory_view()
            >>> view.peak_bytes == c.memory.total_bytes
            True
        """
        return memory_view_of(self, capacity=capacity)

    def fusions(self) -> list[Fusion]:
        """The fusions of the optimized program, largest FLOPs first."""
        return self.program.fusions("optimized")

    def graph(self, stage: Stage = "optimized") -> HloGraph:
        """An interactive graph of the program's HLO, shown inline in notebooks."""
        return self.program.graph(stage)

    def plot_ops(self, *, top: int = 20, ax: Any = None):
        """Per-opcode instruction counts, lowered vs optimized, as a matplotlib figure."""
        return _plots.plot_ops(self.program, top=top, ax=ax)

    def plot_fusions(self, *, top: int = 20, ax: Any = None):
        """FLOPs and bytes of the largest fusions, as a matplotlib figure."""
        return _plots.plot_fusions(self.program, top=top, ax=ax)

    def plot_roofline(
        self, *, peak: Any = None, timing: TimingResult | None = None, ax: Any = None
    ):
        """The program on the device's roofline, placed at its measured FLOP/s by ``timing``
        or else by this program's last ``timeit()`` (``%tpu_timeit``), if any."""
        timing = self.timing if timing is None else timing
        return _plots.plot_roofline(self.program, peak=peak, timing=timing, ax=ax)

    @user_facing
    def compile_phases(self) -> CompilePhases:
        """Where this compile's time went: tracing and lowering (JAX's figures, from the
        compile ledger) and XLA's phases and slowest HLO passes, read from XLA's own
        annotations while it compiles the same program once more under the profiler
        (measured once, then kept)."""
        if self._phases is not None:
            return self._phases
        record = self.compile_record
        self._phases = compile_phases(
            self.lowered,
            self.name,
            trace_seconds=record.trace_seconds - record.inner_seconds
            if record is not None and record.trace_seconds is not None
            else None,
            lower_seconds=record.lower_seconds if record is not None else None,
            module=self.program.hlo_module("lowered"),
        )
        return self._phases

    def timeit(
        self, *args: Any, number: int | None = None, repeat: int = 7, **kwargs: Any
    ) -> TimingResult:
        """Time calls on these arguments (device arrays for a fair figure).

        Shapes given abstractly (``ShapeDtypeStruct``) are filled with random data
        on the device first. Returns median and best seconds per call and, from
        ``cost.flops``, the achieved FLOP/s and the share of the device's peak.
        A program that donates its inputs (``fit``'s step from ``Trainer.compile_step``)
        runs on fresh copies of them each time, their copying timed with it; the
        arguments passed stay usable.
        """

        repeat = as_count(repeat, "repeat")
        number = None if number is None else as_count(number, "number")
        serial = one_at_a_time(self.devices)
        with self._device_memory_errors():
            call = self._ready_call(args, kwargs)
            times, number = time_call(call, number=number, repeat=repeat, one_at_a_time=serial)
        self.timing = TimingResult(
            name=self.name,
            times=times,
            number=number,
            flops=self.cost.flops or None,
            device_kind=self.device_kind,
            peak=peak_for(self.device_kind),
            one_at_a_time=serial,
        )
        return self.timing

    @user_facing
    def profile(
        self,
        *args: Any,
        repeat: int = 5,
        trace_dir: str | os.PathLike | None = None,
        **kwargs: Any,
    ) -> Profile:
        """Measure the device time of every HLO instruction on these arguments.

        Runs the program ``repeat`` times under ``jax.profiler`` and reads the trace
        back (no TensorBoard, no server). Arguments are as for ``timeit``: abstract
        shapes are filled with random device data. Returns a ``Profile``: tables of
        the longest instructions and groups (layers) with FLOPs, bytes, achieved
        rates and the roofline where the device's peak is known, ``table()`` as plain
        records, and ``graph()`` coloured by time. ``trace_dir`` keeps the trace
        (open it in XProf); by default it goes to a temporary folder.
        """
        with self._device_memory_errors():
            call = self._ready_call(args, kwargs)
            return profile_call(
                call,
                self.hlo_module("optimized"),
                name=self.name,
                device_kind=self.device_kind,
                repeat=repeat,
                trace_dir=trace_dir,
            )

    def _ready_call(self, args: tuple, kwargs: dict) -> Callable[[], Any]:
        """One run of the executable on these arguments, abstract shapes filled with data."""
        self._check_fits_in_memory()
        if not args and not kwargs and self.example_arguments is not None:
            args, kwargs = self.example_arguments
        if self.bound_arguments:
            if not args and not kwargs:  # the module's own weights, random data for the rest
                parameters = self.signature.parameters
                args = tuple(p.value for p in parameters if not p.keyword)[1:]
                kwargs = {p.name: p.value for p in parameters if p.keyword}
            args = (*self.bound_arguments, *args)
        args, kwargs = concrete_arguments(self.signature, args, kwargs)
        traced_args, traced_kwargs = self._traced_arguments(args, kwargs)
        executable = self.jax_compiled
        donated = set(getattr(executable, "donate_argnums", ()) or ())
        if not donated:
            return lambda: executable(traced_args, traced_kwargs)
        # A program that donates its inputs (fit's step) consumes them: each run gets fresh
        # copies, so the next run has inputs and the caller's arrays are never deleted.
        leaves, tree = jax.tree.flatten((traced_args, traced_kwargs))

        def run_on_copies() -> Any:
            fresh = [leaf.copy() if k in donated else leaf for k, leaf in enumerate(leaves)]
            return executable(*tree.unflatten(fresh))

        return run_on_copies

    @contextlib.contextmanager
    def _device_memory_errors(self) -> Iterator[None]:
        """Turn the device's out-of-memory error into a ``DeviceMemoryError`` that says what to do."""
        try:
            yield
        except jax.errors.JaxRuntimeError as exc:
            if "RESOURCE_EXHAUSTED" not in str(exc):
                raise
            free = available_bytes(self.devices[0])
            raise DeviceMemoryError(
                f"{self.name} ran out of device memory on {self.device_kind} while running. "
                "Free device arrays you no longer need (del them), or:\n"
                + explain(self, free, "free now", fixes=self.fixes)
            ) from None

    def _check_fits_in_memory(self) -> None:
        """Refuse to run a program that cannot fit, before it allocates anything."""
        configured = configured_capacity()
        free, origin = configured or (available_bytes(self.devices[0]), "free now")
        needed = needed_bytes(self.jax_compiled)
        if needed is None or free is None or needed <= free:
            return
        raise DeviceMemoryError(explain(self, free, origin, fixes=self.fixes))

    def _check_configured_capacity(self) -> None:
        """Refuse a program over the capacity of `tpukit.set_device_memory` / TPUKIT_DEVICE_MEMORY."""
        configured = None if is_measuring() else configured_capacity()
        memory = self.memory if configured else None
        if configured and memory is not None and memory.total_bytes > configured[0]:
            raise DeviceMemoryError(explain(self, *configured, fixes=self.fixes))

    def _summary(self) -> Report:
        return summary(
            self.program,
            CompileFacts(
                signature=str(self.signature),
                devices=tuple(self.devices),
                lower_seconds=self.lower_seconds,
                xla_seconds=self.xla_seconds,
                from_cache=self.from_cache,
                memory=self.memory,
                placement=self._placement() if len(self.devices) > 1 else None,
            ),
        )

    def _placement(self) -> tuple[dict[str, int] | None, dict[str, Any], Any]:
        return self.mesh, self.input_shardings, self.output_shardings

    def __repr__(self) -> str:
        return self._summary().text()

    def _repr_html_(self) -> str:
        return self._summary().html()
