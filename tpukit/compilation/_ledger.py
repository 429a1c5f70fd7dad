"""The ledger: every XLA compile in the process since this module loaded, and why each happened.

It loads with ``tpukit.compilation``: at ``%load_ext tpukit`` or the first use of
``tpukit.compile``, ``fit`` or ``compiles`` (``import tpukit`` alone imports no JAX).

JAX reports each compile through ``jax.monitoring``: the seconds of tracing
(``/jax/core/compile/jaxpr_trace_duration``), of lowering to StableHLO
(``jaxpr_to_mlir_module_duration``) and of XLA's compile
(``backend_compile_duration``), and whether the persistent cache served it
(``/jax/compilation_cache/cache_hits``). JAX 0.7.2 and the newest releases send the same
events. The listeners here are registered once per process (JAX cannot remove one) and
do nothing until an event comes, so a cell that compiles nothing pays nothing.

When a compile is reported, the call that caused it is still on the Python stack:
JAX's jit entry (``cache_miss``, or ``jit_lower`` for ``jax.jit(f).lower(...)``) holds
the function and its jit options, the frame the user's code called (JAX's, or
``nnx.jit``'s wrapper) holds the arguments as the user passed them, and the first
frame outside JAX, Flax, tpukit and the standard library is the user's line. A record
keeps what those say, described at once (no argument is kept alive), and, for a function
compiled before, what changed from the nearest earlier compile of it
(``_ledger_arguments.changes``) and what avoids that.

What the events cannot tell, the record says: ``trace_seconds`` is ``None`` when JAX
reused a traced program (a trace-cache hit: only lowering and XLA ran), and
``cache_hit`` is ``None`` when the persistent cache was not consulted. The process-wide
list is the one piece of module state: compiles are a fact of the process (JAX's own
caches are process-wide too), and records are only ever appended.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import re
import sys
import sysconfig
import threading
import time
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax

from tpukit._errors import RecompileError
from tpukit.compilation._ledger_arguments import CallArguments, Change, changes, describe_call
from tpukit.display import cell_line, describe_location

TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
LOWER_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_CACHE_ASKED = "/jax/compilation_cache/compile_requests_use_cache"
_CACHE_HIT = "/jax/compilation_cache/cache_hits"

# JAX settings that change what a trace or a compile makes; a change between two
# compiles of a function is a reason for the second
_SETTINGS = (
    "jax_enable_x64",
    "jax_default_matmul_precision",
    "jax_numpy_rank_promotion",
    "jax_numpy_dtype_promotion",
    "jax_default_prng_impl",
    "jax_threefry_partitionable",
    "jax_softmax_custom_jvp",
    "jax_enable_checks",
    "jax_debug_nans",
    "jax_debug_infs",
    "jax_disable_jit",
    "jax_default_device",
    "jax_dynamic_shapes",
    "jax_use_shardy_partitioner",
)
# JAX's entries into a jit call: the frame holds the function and its jit options
_ENTRIES = {"cache_miss", "jit_lower", "jit_trace", "_infer_params", "_infer_params_internal"}
_EXPLICIT = {"jit_lower", "jit_trace"}  # jax.jit(f).lower(...), .trace(...): compiles asked for
_MODULE_NAME = re.compile(r"^[\w.]+\((.*)\)$")
_LIBRARIES = ("jax", "jaxlib", "flax", "optax", "orbax", "tpukit", "IPython", "numpy")
_TPUKIT_ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")
_NEAREST_OF = 64  # earlier compiles of a function compared with a new one, newest first


@dataclass(frozen=True)
class CompileRecord:
    """One XLA compile: what was compiled, from where, for which arguments, how long it
    took and, for a function compiled before, why it compiled again.

    ``kind`` is ``"jit"`` for a function the user (or a library on the user's behalf:
    ``nnx.jit``, ``fit``) compiled, ``"op"`` for one ``jax.numpy``/``lax`` operation run
    outside any jit or a jit inside JAX itself (``jax.random``'s), which compiles once
    per shape and dtype. ``trace_seconds`` is ``None`` when the trace was reused (only
    lowering and XLA ran); ``lower_seconds`` ``None`` when JAX did not report a lowering
    for this compile; ``cache_hit`` is ``None`` when the persistent cache was not asked.
    ``changes`` are what differs from the nearest earlier compile of the same function
    (empty for a first compile); ``reason`` says it in one sentence. ``redefined``: the
    function was defined again elsewhere (a re-run cell) since its nearest earlier compile.
    ``inner_seconds`` are other compiles that ran while this function was traced (an
    operation run on concrete values by the traced code); JAX counts them in this trace's
    seconds, and they have their own records, so ``seconds`` leaves them out.
    ``explicit``: compiled on request (``jax.jit(f).lower(...).compile()``,
    ``tpukit.compile``, ``%%tpu_compile``), not by calling the function; a cell says
    nothing of those, and ``no_recompile`` lets them be.
    ``internal``: the function is tpukit's own (``fit``'s step, ``evaluate``'s run, the
    checkpoint checksums). tpukit builds a new such function for each new set-up (another
    batch size, mesh or model) and keeps it for the next call, so a compile of a new one is
    a first compile of another program, not a recompile; a cell says nothing of these
    (``fit`` says itself when its step compiled where it should not).
    """

    number: int
    function: str
    module: str
    kind: str
    call_site: str
    filename: str
    line: int
    cell: int | None
    definition: str
    arguments: CallArguments | None
    trace_seconds: float | None
    lower_seconds: float | None
    compile_seconds: float
    cache_hit: bool | None
    recompile: bool
    changes: tuple[Change, ...]
    reason: str
    when: float
    redefined: bool = False
    inner_seconds: float = 0.0
    explicit: bool = False
    internal: bool = False
    settings: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @property
    def seconds(self) -> float:
        """Tracing, lowering and XLA's compile together, less compiles inside the trace."""
        return (
            (self.trace_seconds or 0.0)
            + (self.lower_seconds or 0.0)
            + self.compile_seconds
            - self.inner_seconds
        )

    @property
    def advice(self) -> str:
        """What avoids this compile ('' for a first compile)."""
        seen: list[str] = []
        for change in self.changes:
            if change.advice not in seen:
                seen.append(change.advice)
        return "; ".join(seen)

    @property
    def signature(self) -> str:
        """The arguments in one line, ``x: f32[8,3], n=3`` ('' when they were not seen)."""
        return self.arguments.text() if self.arguments is not None else ""


@dataclass
class _Call:
    """What the stack said about the call being compiled, taken when it was lowered."""

    function: str
    kind: str
    identity: Any  # a weak reference to the user's function, or None
    code: str | None  # what the function's code is (_code_fingerprint), or None
    definition: str
    def_file: str
    arguments: CallArguments | None
    filename: str
    line: int
    explicit: bool = False
    internal: bool = False  # defined inside tpukit (CompileRecord.internal)
    trace_seconds: float | None = None
    lower_seconds: float | None = None
    inner_seconds: float = 0.0


class _Pending(threading.local):
    """Per thread: traces and lowerings waiting for their compile."""

    def __init__(self) -> None:
        self.traces: dict[str, tuple[float, float]] = {}  # name -> (seconds, inner seconds)
        self.finished: list[tuple[float, float]] = []  # (when, seconds) of recent records
        self.lowered: dict[str, _Call] = {}
        self.cache_asked = False
        self.cache_hit = False


_records: list[CompileRecord] = []
_identities: list[Any] = []  # beside each record: a weak reference to its function
_codes: list[str | None] = []  # beside each record: its function's _code_fingerprint
_lock = threading.Lock()
_pending = _Pending()
_guards: list[no_recompile] = []
_listening = False
_library_roots: tuple[tuple[str, ...], ...] = ((), (), ())


def records_since(start: int = 0) -> tuple[CompileRecord, ...]:
    """The records from number ``start`` on (a slice of the ledger; cheap when few)."""
    return tuple(_records[start:])


def record_count() -> int:
    """How many compiles the ledger holds."""
    return len(_records)


def listen() -> None:
    """Register the ledger's listeners with ``jax.monitoring`` (once per process)."""
    global _listening
    with _lock:
        if _listening:
            return
        _listening = True
    jax.monitoring.register_event_duration_secs_listener(_on_duration)
    jax.monitoring.register_event_listener(_on_event)


class no_recompile:  # noqa: N801 - used as a context manager, named like contextlib's
    """Inside the block, a function compiled before that compiles again raises
    ``RecompileError`` naming it and why: for tests and long training loops.

    A function's first compile is allowed (also the first of a function defined again,
    by a re-run cell), and so are a compile the persistent cache served and one asked
    for (``jax.jit(f).lower(x).compile()``, ``tpukit.compile``). One ``jax.numpy``
    operation run outside a jit (``kind == "op"``) compiles once per new shape; those
    count only with ``ops=True``. ``.compiles`` holds what compiled inside the block.

        with tpukit.no_recompile():
            for batch in batches:
                state = train_step(state, batch)   # a new batch shape raises here
    """

    def __init__(self, *, ops: bool = False):
        self.ops = ops
        self._start = 0
        self._end: int | None = None

    def __enter__(self) -> no_recompile:
        listen()
        self._start = record_count()
        with _lock:
            _guards.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._end = record_count()
        with _lock:
            if self in _guards:
                _guards.remove(self)

    @property
    def compiles(self) -> tuple[CompileRecord, ...]:
        """The compiles inside the block (so far, while it runs)."""
        return tuple(_records[self._start : self._end])

    def _check(self, record: CompileRecord) -> None:
        if not record.recompile or record.cache_hit or (record.kind == "op" and not self.ops):
            return
        if record.redefined or record.explicit:  # a function defined anew; asked for
            return
        raise RecompileError(
            f"{record.function} compiled again inside tpukit.no_recompile(), called at "
            f"{record.call_site or 'an unknown line'}: {record.reason}"
            + (f". To avoid it: {record.advice}." if record.advice else ".")
        )


def _on_event(event: str, **_: Any) -> None:
    if event == _CACHE_ASKED:
        _pending.cache_asked = True
    elif event == _CACHE_HIT:
        _pending.cache_hit = True


def _on_duration(event: str, seconds: float, **kwargs: Any) -> None:
    if not event.startswith("/jax/core/compile/"):
        return
    try:
        if event == TRACE_EVENT:
            began = time.time() - seconds
            inner = sum(s for when, s in _pending.finished if when >= began)
            _pending.traces[str(kwargs.get("fun_name", ""))] = (seconds, inner)
        elif event == LOWER_EVENT:
            _on_lowered(str(kwargs.get("fun_name", "")), seconds, sys._getframe(1))
        elif event == COMPILE_EVENT:
            _on_compiled(str(kwargs.get("fun_name", "")), seconds, sys._getframe(1))
    except RecompileError:
        raise
    except Exception:  # a JAX whose internals read otherwise: the user's compile goes on
        _pending.lowered.clear()


def _on_lowered(module: str, seconds: float, frame: Any) -> None:
    call = _inspect_call(frame, module)
    traces = _pending.traces
    call.trace_seconds, call.inner_seconds = traces.pop(_inner_name(module), (None, 0.0))
    traces.clear()  # what is left was traced inside this call (JAX 0.7 reports inner jits)
    call.lower_seconds = seconds
    lowered = _pending.lowered
    lowered.pop(module, None)
    lowered[module] = call
    while len(lowered) > 64:  # lowered and never compiled (an estimate, an export)
        lowered.pop(next(iter(lowered)))
    _pending.cache_asked = _pending.cache_hit = False


def _on_compiled(module: str, seconds: float, frame: Any) -> None:
    call = _pending.lowered.pop(module, None) or _inspect_call(frame, module)
    hit = True if _pending.cache_hit else (False if _pending.cache_asked and _cache_on() else None)
    _pending.cache_asked = _pending.cache_hit = False
    settings = _settings()
    with _lock:
        number = len(_records)
        earlier = _nearest(call, settings)
        found = _changes(earlier, call, settings) if earlier is not None else []
        record = CompileRecord(
            number=number,
            function=call.function,
            module=module,
            kind=call.kind,
            call_site=describe_location(call.filename, call.line),
            filename=call.filename,
            line=call.line,
            cell=_cell(call.filename, call.line),
            definition=call.definition,
            arguments=call.arguments,
            trace_seconds=call.trace_seconds,
            lower_seconds=call.lower_seconds,
            compile_seconds=seconds,
            cache_hit=hit,
            recompile=earlier is not None,
            changes=tuple(found),
            reason=_reason(earlier, found) if earlier is not None else "",
            when=time.time(),
            redefined=earlier is not None and earlier.definition != call.definition,
            inner_seconds=call.inner_seconds,
            explicit=call.explicit,
            internal=call.internal,
            settings=settings,
        )
        _records.append(record)
        _identities.append(call.identity)
        _codes.append(call.code)
    finished = _pending.finished
    finished.append((record.when, record.seconds))
    if len(finished) > 256:
        del finished[:128]
    with _lock:
        guards = list(_guards)
    for guard in guards:
        guard._check(record)


def _nearest(call: _Call, settings: tuple) -> CompileRecord | None:
    """The earlier compile of the same function that differs least from ``call``. For
    tpukit's own functions only the same function object is the same function: each
    new one is another program tpukit built (see ``CompileRecord.internal``)."""
    best, best_count = None, 0
    checked = 0
    for record in reversed(_records):
        if record.function != call.function or record.kind != call.kind:
            continue
        if call.internal and not _same_object(_identities[record.number], call.identity):
            continue
        code = _codes[record.number]
        if code is not None and call.code is not None and code != call.code:
            continue  # another function of the same name (two lambdas, an edited cell)
        count = len(_changes(record, call, settings))
        if best is None or count < best_count:
            best, best_count = record, count
        checked += 1
        if checked >= _NEAREST_OF or count == 0:
            break
    return best


def _same_object(before: Any, now: Any) -> bool:
    """Whether two weak references (or ``None``) name one living function."""
    if before is None or now is None:
        return False
    function = now()
    return function is not None and before() is function


def _changes(earlier: CompileRecord, call: _Call, settings: tuple) -> list[Change]:
    if call.kind == "op":  # an operation's shape and parameters are not in its arguments
        return []
    found = []
    before = _identities[earlier.number]
    if before is not None and call.identity is not None and before() is not call.identity():
        if earlier.definition != call.definition:
            text = (
                f"{call.function} was defined again, at {call.definition} "
                f"(before: {earlier.definition}), a new function object"
            )
        else:
            text = (
                f"a new {call.function} function object from the same definition "
                f"({call.definition}), e.g. made inside a loop or a function"
            )
        found.append(Change("function", text))
    if earlier.arguments is not None and call.arguments is not None:
        found += changes(earlier.arguments, call.arguments)
    old = dict(earlier.settings)
    for name, value in settings:
        if name in old and old[name] != value:
            found.append(Change("config", f"JAX setting {name}: {old[name]} -> {value}"))
    return found


def _reason(earlier: CompileRecord, found: list[Change]) -> str:
    if earlier.kind == "op":
        return (
            f"{earlier.function} run outside jit on arguments or with parameters it had "
            "not compiled for (each eager operation compiles once per shape, dtype and "
            "parameters)"
        )
    if found:
        return "; ".join(change.text for change in found)
    return (
        f"the same function and arguments as compile #{earlier.number} "
        f"({earlier.call_site or 'unknown line'}): JAX's caches no longer held it "
        "(jax.clear_caches(), a new jax.jit with other options such as donation or "
        "shardings, or a value the function closes over)"
    )


def _inspect_call(frame: Any, module: str) -> _Call:
    """Read the call being compiled from the stack above ``frame``."""
    entry = None  # JAX's innermost jit entry: the function, its options, its arguments
    wrapper = None  # an outer jit of Flax's (nnx.jit) holding the arguments as passed
    user = None
    while frame is not None:
        code = frame.f_code
        filename = code.co_filename
        if not _is_library(filename):
            user = frame
            break
        if code.co_name in _ENTRIES and entry is None:
            entry = frame
        elif entry is not None and filename.startswith(_roots()[1]):
            names = code.co_varnames
            if "args" in names and "self" in names:
                if hasattr(frame.f_locals.get("self"), "static_argnums"):
                    wrapper = frame
        frame = frame.f_back
    function, static = _entry_function(entry)
    target = inspect.unwrap(function) if function is not None else None
    name = getattr(target, "__name__", None) or _inner_name(module)
    def_file, def_line = _definition(target)
    kind = "op" if target is None or def_file.startswith(_roots()[2]) else "jit"
    internal = kind == "jit" and def_file.startswith(_TPUKIT_ROOT)
    holder = wrapper if wrapper is not None else entry
    arguments = None
    if holder is not None:
        local = holder.f_locals
        owner = local.get("self")
        if holder is wrapper:
            static = _static_of(owner)
        args, kwargs = local.get("args"), local.get("kwargs", {})
        if isinstance(args, tuple) and isinstance(kwargs, dict):
            try:
                named_by = target if holder is wrapper else function
                arguments = describe_call(named_by, args, kwargs, static)
            except Exception:  # an argument JAX accepted but tpukit cannot flatten
                arguments = None
    return _Call(
        function=name,
        kind=kind,
        identity=_weak(target) if kind == "jit" else None,
        code=_code_fingerprint(target) if kind == "jit" else None,
        definition=describe_location(def_file, def_line) if def_file else "",
        def_file=def_file,
        arguments=arguments,
        explicit=entry is not None and entry.f_code.co_name in _EXPLICIT,
        internal=internal,
        filename=user.f_code.co_filename if user is not None else "",
        line=user.f_lineno if user is not None else 0,
    )


def _entry_function(entry: Any) -> tuple[Callable | None, tuple]:
    """The function a jit entry frame compiles, and its static arguments."""
    if entry is None:
        return None, ()
    local = entry.f_locals
    jitted = local.get("jit_func")
    if jitted is not None:  # jit_lower / jit_trace
        return getattr(jitted, "_fun", None), _static_of(getattr(jitted, "_jit_info", None))
    info = local.get("jit_info", local.get("ji"))
    return local.get("fun"), _static_of(info)


def _static_of(info: Any) -> tuple:
    if info is None:
        return ()
    numbers = getattr(info, "static_argnums", None) or ()
    names = getattr(info, "static_argnames", None) or ()
    numbers = (numbers,) if isinstance(numbers, int) else tuple(numbers)
    names = (names,) if isinstance(names, str) else tuple(names)
    return numbers + names


def _definition(function: Any) -> tuple[str, int]:
    code = getattr(function, "__code__", None)
    if code is None:
        code = getattr(vars(type(function)).get("__call__"), "__code__", None)
    return (code.co_filename, code.co_firstlineno) if code is not None else ("", 0)


def _code_fingerprint(function: Any) -> str | None:
    """What a function does, apart from where it is written: its bytecode, names and
    constants (nested functions' too), without file names or line numbers, so that a cell
    run again gives the same fingerprint and another function of the same name another."""
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    if code is None:
        return None

    def parts(c: types.CodeType):
        yield c.co_code
        yield repr((c.co_names, c.co_varnames)).encode()
        for constant in c.co_consts:
            if isinstance(constant, types.CodeType):
                yield from parts(constant)
            else:
                yield repr(constant).encode()

    return hashlib.blake2b(b"\0".join(parts(code)), digest_size=8).hexdigest()


def _weak(function: Any) -> Any:
    if function is None:
        return None
    function = getattr(function, "__func__", function)  # a bound method: its function
    try:
        return weakref.ref(function)
    except TypeError:
        return None


def _inner_name(module: str) -> str:
    match = _MODULE_NAME.match(module)
    return match.group(1) if match else module


def _cell(filename: str, line: int) -> int | None:
    found = cell_line(filename, line) if filename else None
    return found.count if found is not None else None


def _cache_on() -> bool:
    """Whether JAX's persistent compilation cache has a folder and is enabled."""
    values = jax.config.values
    return bool(values.get("jax_compilation_cache_dir")) and bool(
        values.get("jax_enable_compilation_cache", True)
    )


def _settings() -> tuple[tuple[str, str], ...]:
    values = jax.config.values
    return tuple((name, str(values[name])) for name in _SETTINGS if name in values)


def _is_library(filename: str) -> bool:
    """Whether a frame's file is JAX's, Flax's, tpukit's, the standard library's..."""
    return filename.startswith(_roots()[0]) or filename.startswith("<frozen")


def _roots() -> tuple[tuple[str, ...], ...]:
    """The folders of the libraries between the user and XLA, of Flax, and of JAX."""
    global _library_roots
    if not _library_roots[0]:
        roots = {sysconfig.get_paths()["stdlib"], os.path.dirname(os.__file__)}
        for name in _LIBRARIES:
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                spec = None
            for folder in (spec.submodule_search_locations or []) if spec else []:
                roots.add(folder)

        def named(*names: str) -> tuple[str, ...]:
            return tuple(os.path.join(r, "") for r in roots if os.path.basename(r) in names)

        _library_roots = (
            tuple(sorted(os.path.join(r, "") for r in roots)),
            named("flax"),
            named("jax", "jaxlib"),
        )
    return _library_roots


listen()
