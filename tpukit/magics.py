"""IPython magics: ``%%tpu_compile``, ``%tpu_compile``, ``%tpu_devices``, ``%tpu_timeit``,
``%tpu_profile``, ``%tpu_graph``, ``%tpu_memory``, ``%tpu_compiles``, ``%tpu_nan``; and
the line a cell prints when it compiled again something compiled before (``CellNotices``).

Magics only read their line, call the Python API (``tpukit.compile``,
``tpukit.devices``, ``Compiled.timeit``, ``Compiled.profile``, ``Compiled.graph``,
``tpukit.find_nan``) and show the result. They import it from the packages' faces
(``tpukit.compilation``, ``tpukit.runtime``), never from ``tpukit`` itself, whose
``load_ipython_extension`` imports this module.
Mistakes in the line become ``UsageError`` (one red line, no traceback); an error
raised by the cell's own code is shown by IPython as usual.

Load with ``%load_ext tpukit``; ``%tpu_compile?`` shows the help.
"""

from __future__ import annotations

import functools
import getopt
import io
import keyword
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display
from IPython.utils.process import arg_split

from tpukit._errors import TpukitError
from tpukit.compilation import (
    CallSpec,
    Compiled,
    compile,
    compiles,
    find_nan,
    parse_call_line,
)
from tpukit.runtime import devices

_MISSING = object()

_CALL_HELP = (
    "The call to compile, as you would write it: f(data), model_fwd(params, x), or with "
    "abstract shapes in HLO notation, f(f32[128,784]) or g(bf16[8,224,224,3], s32[8]). "
    "Keyword and static (non-array) arguments are allowed."
)


@dataclass(frozen=True)
class Option:
    """One ``-option`` of a magic, written once: it makes the ``%magic?`` help (through
    IPython's ``magic_arguments``) and the getopt spelling that splits a line into its
    options and the call (through IPython's ``parse_options``, as ``%timeit`` does)."""

    flags: tuple[str, ...]
    help: str
    takes_value: bool = True
    settings: tuple[tuple[str, Any], ...] = ()

    def decorate(self, function: Callable) -> Callable:
        extra = dict(self.settings)
        if not self.takes_value:
            extra["action"] = "store_true"
        return argument(*self.flags, help=self.help, **extra)(function)


def with_options(*options: Option) -> Callable[[Callable], Callable]:
    """``magic_arguments`` for ``options`` and a trailing CALL, kept on the function."""

    def decorate(function: Callable) -> Callable:
        function = argument("call", nargs="*", help=_CALL_HELP)(function)
        for option in reversed(options):
            function = option.decorate(function)
        function = magic_arguments()(function)
        function.tpukit_options = options
        return function

    return decorate


def _option_error(options: tuple[Option, ...], exc: getopt.GetoptError) -> str:
    """getopt's complaint, said the way tpukit says things."""
    known = ", ".join(sorted(f for o in options for f in o.flags if f.startswith("--")))
    flag = ("-" if len(exc.opt) == 1 else "--") + exc.opt
    if "requires argument" in exc.msg:
        return f"Option {flag} needs a value."
    return f"Unknown option {flag!r}. Options: {known}."


def split_options(magic: Callable, line: str) -> tuple[Any, str]:
    """Split ``line`` into the magic's leading ``-options`` (parsed) and the call text.

    Options are split as IPython's ``parse_options`` (and so ``%timeit``) splits them:
    ``arg_split(line, posix=False, strict=False)``, then ``getopt``, which stops at the
    first word that is not an option. The call is then cut from the original line, not
    rejoined from words (IPython 7 rejoins them, so ``f(s='a  b')`` lost a space), and
    option values are read by the magic's own argparse parser, so types, choices and
    defaults are those ``%magic?`` shows.
    """
    options: tuple[Option, ...] = magic.tpukit_options
    short = "".join(
        f[1] + (":" if o.takes_value else "") for o in options for f in o.flags if len(f) == 2
    )
    long = [
        f[2:] + ("=" if o.takes_value else "") for o in options for f in o.flags if f[:2] == "--"
    ]
    words = arg_split(line, posix=False, strict=False)
    try:
        _, rest = getopt.getopt(words, short, long)
    except getopt.GetoptError as exc:
        raise UsageError(_option_error(options, exc)) from None
    option_words = words[: len(words) - len(rest)]
    lexer = shlex.shlex(io.StringIO(line), posix=False)
    lexer.whitespace_split = True
    for _ in option_words:
        lexer.get_token()
    call = line[lexer.instream.tell() :].strip() if option_words else line.strip()
    return parse_argstring(magic, " ".join(option_words)), call


def without_comment(line: str) -> str:
    """``line`` up to a ``#`` that starts a comment (outside quotes, at the start or
    after a space), as Python reads the rest of a line: ``%tpu_devices  # which device``."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line


def parse_words(magic: Callable, line: str) -> Any:
    """``parse_argstring`` for a magic that takes only words, with a trailing comment allowed."""
    return parse_argstring(magic, without_comment(line))


def usage_errors(method: Callable) -> Callable:
    """Show a ``TpukitError`` from the public API as IPython shows a misused magic: one
    red line, no traceback (an error from the user's own code is left as it is)."""

    @functools.wraps(method)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except TpukitError as exc:
            raise UsageError(str(exc)) from None

    return run


_NAME = Option(
    ("-o", "--name"), "Variable to store the compiled object in (default: <function>_compiled)."
)
_QUIET = Option(
    ("--quiet",), "Store the compiled object without showing its summary.", takes_value=False
)
_GRAPH = Option(
    ("--graph",), "Also show the interactive graph of the optimized HLO.", takes_value=False
)
_TIMING = Option(
    ("--timing",),
    "Also show where the compile's time went: tracing, lowering, XLA's phases and passes.",
    takes_value=False,
)
_MESH = Option(
    ("--mesh",),
    "Partition over a device mesh, e.g. data=8 or data=4,model=2 (-1: the remaining devices).",
)
_SHARD = Option(
    ("--shard",),
    "NAME=SPEC: how argument NAME is split over the mesh, one entry per dimension, e.g. "
    "x=data or w=None,model (repeatable; unnamed arguments are replicated).",
    settings=(("action", "append"), ("default", [])),
)
_NUMBER = Option(
    ("-n", "--number"),
    "Calls per timing run (default: chosen so a run lasts 0.2 s).",
    settings=(("type", int), ("default", None)),
)
_REPEAT = Option(
    ("-r", "--repeat"), "Timing runs (default 7).", settings=(("type", int), ("default", 7))
)
_PROFILE_NAME = Option(
    ("-o", "--name"), "Variable to store the profile in (default: <function>_profile)."
)
_PROFILE_REPEAT = Option(
    ("-r", "--repeat"), "Profiled runs (default 5).", settings=(("type", int), ("default", 5))
)
_NO_GRAPH = Option(
    ("--no-graph",), "Show the tables only, not the graph coloured by time.", takes_value=False
)
_STAGE = Option(
    ("--stage",),
    "Which HLO to draw.",
    settings=(("default", "optimized"), ("choices", ["optimized", "lowered"])),
)
_CAPACITY = Option(
    ("--capacity",),
    "Compare the peak with this much device memory, e.g. 16GiB (default: the device's).",
)
_PLATFORM = Option(
    ("--platform",),
    "Which platform to list.",
    settings=(("default", "auto"), ("choices", ["auto", "tpu", "gpu", "cpu"])),
)


_NOTICES_ENV = "TPUKIT_COMPILE_NOTICES"


class CellNotices:
    """After each cell, one line per function the cell compiled again, with the reason.

    Registered on IPython's ``pre_run_cell`` and ``post_run_cell`` events by
    ``%load_ext tpukit``; ``%tpu_compiles --notices off`` (or ``TPUKIT_COMPILE_NOTICES=0``
    before loading) turns it off. A cell that compiles nothing costs a slice of the
    ledger that is empty.
    """

    def __init__(self) -> None:
        self.enabled = os.environ.get(_NOTICES_ENV, "1").strip().lower() not in (
            "0",
            "off",
            "false",
        )
        self.mark = compiles(since=1 << 62).end

    def pre_run_cell(self, *_: Any) -> None:
        self.mark = compiles(since=self.mark).end

    def post_run_cell(self, *_: Any) -> None:
        found = compiles(since=self.mark)
        self.mark = found.end
        if self.enabled and found:
            for line in found.notices():
                print(line)


_CELL_NOTICES: dict[int, CellNotices] = {}  # per shell: the hooks registered on it
_NAN_NAME = Option(("-o", "--name"), "Variable to store the record in (default: <function>_nan).")


def _shard_specs(items: list[str]) -> dict[str, str]:
    specs = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep:
            raise UsageError(f"Cannot read --shard {item!r}: write NAME=SPEC, e.g. x=data.")
        specs[name] = text
    return specs


@magics_class
class TpuMagics(Magics):
    """The tpukit magics, registered by ``%load_ext tpukit``."""

    def _call(self, text: str) -> CallSpec:
        if not text:
            raise UsageError(f"No call given. {_CALL_HELP}")
        return parse_call_line(text, self.shell.user_ns)

    def _compile(self, spec: CallSpec, mesh: str | None = None, shard: list[str] = ()) -> Compiled:
        function = spec.function
        if isinstance(function, Compiled):
            function = function.function
        if shard and not mesh:
            raise UsageError("--shard needs --mesh, e.g. --mesh data=8 --shard x=data.")
        return compile(function, *spec.args, mesh=mesh, shard=_shard_specs(shard), **spec.kwargs)

    @with_options(_NAME, _QUIET, _GRAPH, _TIMING, _MESH, _SHARD)
    @no_var_expand
    @line_cell_magic
    @usage_errors
    def tpu_compile(self, line: str, cell: str | None = None) -> Compiled | None:
        """Compile a call for the current device, like XLA.jl's ``@tpu_compile f(data)``.

        As a cell magic, the cell is run first (it defines or changes functions),
        then CALL is compiled; only the arguments' shapes and dtypes are used. The
        compiled object is stored in the notebook and its summary shown: compile
        time, signature, FLOPs, bytes, memory, HLO op counts and fusions. Call it
        on device data like the function itself. The same from Python:
        ``tpukit.compile(f, *args, mesh=..., shard=...)``.

        Examples::

            %%tpu_compile predict(params, f32[128,784])
            def predict(params, x):
                return jax.nn.relu(x @ params["w"] + params["b"])

            %tpu_compile -o fwd predict(params, batch)
            fwd(params, batch)

            %tpu_compile --mesh data=8 --shard x=data predict(params, f32[1024,784])
            %tpu_compile --timing predict(params, f32[128,784])   # where compile time goes
        """
        args, call_text = split_options(self.tpu_compile, line)
        if cell is not None and cell.strip():
            result = self.shell.run_cell(cell, store_history=False)
            if not result.success:
                raise UsageError("The cell raised an error (shown above), so nothing was compiled.")
        spec = self._call(call_text)
        compiled = self._compile(spec, args.mesh, args.shard)
        name = (
            args.name
            or spec.function_name.replace(".", "_").replace("[", "_").strip("_]") + "_compiled"
        )
        if not name.isidentifier() or keyword.iskeyword(name):
            raise UsageError(
                f"Cannot store the compiled object as {name!r}: pass -o NAME with a valid "
                "Python variable name (not a keyword such as class or def)."
            )
        previous = self.shell.user_ns.get(name, _MISSING)
        self.shell.user_ns[name] = compiled
        replaced = previous is not _MISSING and not isinstance(previous, Compiled)
        if not args.quiet:
            display(compiled)
            if args.graph:
                display(compiled.graph())
        if args.timing:
            display(compiled.compile_phases())
        if replaced:
            print(
                f"Stored as {name}, replacing the {type(previous).__name__} that {name} held "
                "(pass -o NAME to choose another name)."
            )
        elif not args.quiet:
            print(f"Stored as {name}.")
        return None

    @magic_arguments()
    @_PLATFORM.decorate
    @line_magic
    @usage_errors
    def tpu_devices(self, line: str) -> Any:
        """Show the devices JAX computes on: id, platform, kind, process, coordinates, memory."""
        return devices(parse_words(self.tpu_devices, line).platform)

    @with_options(_NUMBER, _REPEAT)
    @no_var_expand
    @line_magic
    @usage_errors
    def tpu_timeit(self, line: str) -> Any:
        """Time a compiled call on the device: median and min per call, FLOP/s and MFU.

        CALL is compiled first unless it names a compiled object. Abstract shapes
        are filled with random device data; host arrays are put on the device once,
        so the timing is of the computation, not of transfers.

        Examples::

            %tpu_timeit f(f32[1024,1024])
            %tpu_timeit -n 100 f_compiled(x)
        """
        args, call_text = split_options(self.tpu_timeit, line)
        if (args.number is not None and args.number < 1) or args.repeat < 1:
            raise UsageError("-n and -r must be at least 1.")
        spec = self._call(call_text)
        compiled = spec.function if isinstance(spec.function, Compiled) else self._compile(spec)
        return compiled.timeit(*spec.args, number=args.number, repeat=args.repeat, **spec.kwargs)

    @with_options(_PROFILE_NAME, _PROFILE_REPEAT, _NO_GRAPH)
    @no_var_expand
    @line_magic
    @usage_errors
    def tpu_profile(self, line: str) -> None:
        """Measure the device time of every HLO instruction of a call, from a profiler trace.

        CALL is compiled first unless it names a compiled object, then run -r times
        under jax.profiler (abstract shapes are filled with random device data). Shows
        the longest instructions and groups (layers) with FLOPs, bytes, achieved rates
        and the roofline where the device's peak is known, then the HLO graph coloured
        by time, and stores the profile (``.table()`` for records, ``.graph()``). The
        same from Python: ``compiled.profile(*args, repeat=5)``.

        Examples::

            %tpu_profile train_step(model, opt_state, f32[128,784], s32[128])
            %tpu_profile -r 20 -o p --no-graph predict_compiled(model, batch)
        """
        args, call_text = split_options(self.tpu_profile, line)
        if args.repeat < 1:
            raise UsageError(f"-r must be at least 1, got {args.repeat}.")
        spec = self._call(call_text)
        compiled = spec.function if isinstance(spec.function, Compiled) else self._compile(spec)
        profile = compiled.profile(*spec.args, repeat=args.repeat, **spec.kwargs)
        name = args.name or f"{compiled.name}_profile"
        if not name.isidentifier() or keyword.iskeyword(name):
            raise UsageError(
                f"Cannot store the profile as {name!r}: pass -o NAME with a valid Python "
                "variable name."
            )
        self.shell.user_ns[name] = profile
        display(profile)
        if not args.no_graph:
            display(profile.graph())
        print(f"Stored as {name}.")

    @with_options(_STAGE)
    @no_var_expand
    @line_magic
    @usage_errors
    def tpu_graph(self, line: str) -> Any:
        """Show the interactive graph of a call's HLO: fusions, name scopes, source lines, cost.

        Example::

            %tpu_graph train_step(state, batch)
        """
        args, call_text = split_options(self.tpu_graph, line)
        spec = self._call(call_text)
        compiled = spec.function if isinstance(spec.function, Compiled) else self._compile(spec)
        return compiled.graph(args.stage)

    @with_options(_CAPACITY)
    @no_var_expand
    @line_magic
    @usage_errors
    def tpu_memory(self, line: str) -> Any:
        """Show what fills the device for a call: peak, buffers at the peak, live bytes.

        CALL is compiled first unless it names a compiled object; the view is stored as
        ``<function>_memory`` (``.graph()`` colours the program by memory). The same from
        Python: ``compiled.memory_view()``.

        Examples::

            %tpu_memory train_step(model, opt_state, f32[128,784], s32[128])
            %tpu_memory --capacity 16GiB predict_compiled(model, batch)
        """
        args, call_text = split_options(self.tpu_memory, line)
        spec = self._call(call_text)
        compiled = spec.function if isinstance(spec.function, Compiled) else self._compile(spec)
        view = compiled.memory_view(capacity=args.capacity)
        base = compiled.name
        if not base.isidentifier():  # a lambda: the name it was called by (lam(...))
            base = spec.function_name.replace(".", "_").replace("[", "_").strip("_]")
        name = f"{base}_memory"
        if name.isidentifier() and not keyword.iskeyword(name):
            self.shell.user_ns[name] = view
            print(f"Stored as {name}.")
        return view

    @magic_arguments()
    @argument("function", nargs="?", help="Only this function's compiles (its name).")
    @argument("--cell", type=int, help="Only compiles called from this cell (In [N]).")
    @argument("--recompiles", action="store_true", help="Only functions compiled again.")
    @argument("--no-ops", action="store_true", help="Leave out eager jax.numpy/lax operations.")
    @argument(
        "--notices",
        choices=["on", "off"],
        help="Turn on or off the line a cell prints when it compiled something again.",
    )
    @line_magic
    @usage_errors
    def tpu_compiles(self, line: str) -> Any:
        """Every XLA compile since ``%load_ext tpukit``: where, for which arguments, how
        long, and why a function compiled again (and what avoids it).

        The same from Python: ``tpukit.compiles(function, cell=N, recompiles=True)``.

        Examples::

            %tpu_compiles
            %tpu_compiles train_step --recompiles
            %tpu_compiles --notices off
        """
        args = parse_words(self.tpu_compiles, line)
        if args.notices is not None:
            notices = _CELL_NOTICES.get(id(self.shell))
            if notices is None:
                raise UsageError("Cell notices are not registered: run %load_ext tpukit first.")
            notices.enabled = args.notices == "on"
            print(f"Notices of compiles again: {args.notices}.")
            return None
        return compiles(
            args.function,
            cell=args.cell,
            recompiles=True if args.recompiles else None,
            ops=not args.no_ops,
        )

    @with_options(_NAN_NAME)
    @no_var_expand
    @line_magic
    @usage_errors
    def tpu_nan(self, line: str) -> Any:
        """Run a call once, operation by operation, and show where its first NaN or
        infinity was made: the operation, the line, the NNX layer, the part of the
        step (forward, loss, backward, optimizer update) and its inputs' ranges.

        CALL is run with the notebook's values (shapes in HLO notation are refused:
        a NaN needs the data). Nothing is changed; the record is stored as
        ``<function>_nan`` (``None`` when every value is finite). The same from Python:
        ``tpukit.find_nan(f, *args)``.

        Examples::

            %tpu_nan train_step(model, optimizer, x, y)
            %tpu_nan -o origin loss_fn(model, batch)
        """
        args, call_text = split_options(self.tpu_nan, line)
        spec = self._call(call_text)
        abstract = [a for a in (*spec.args, *spec.kwargs.values()) if _is_abstract(a)]
        if abstract:
            raise UsageError(
                f"%tpu_nan runs the call on data, and {spec.text or call_text!r} has "
                f"{len(abstract)} abstract shape{'s' if len(abstract) > 1 else ''} (such as "
                "f32[8,4]): pass the arrays that made the NaN, e.g. f(x) with x from the "
                "notebook."
            )
        function = spec.function
        if isinstance(function, Compiled):
            function = function.function
        origin = find_nan(function, *spec.args, **spec.kwargs)
        name = args.name or spec.function_name.replace(".", "_").strip("_]") + "_nan"
        if not name.isidentifier() or keyword.iskeyword(name):
            raise UsageError(
                f"Cannot store the record as {name!r}: pass -o NAME with a valid Python "
                "variable name."
            )
        self.shell.user_ns[name] = origin
        if origin is None:
            print(f"Every value of {spec.function_name}(...) is finite. Stored None as {name}.")
            return None
        display(origin)
        print(f"Stored as {name}.")
        return None


def _is_abstract(value: Any) -> bool:
    return isinstance(value, jax.ShapeDtypeStruct)


_MAGIC_NAMES = {
    "line": (
        "tpu_compile",
        "tpu_devices",
        "tpu_timeit",
        "tpu_profile",
        "tpu_graph",
        "tpu_memory",
        "tpu_compiles",
        "tpu_nan",
    ),
    "cell": ("tpu_compile",),
}


def load_ipython_extension(ipython: Any) -> None:
    """Register the tpukit magics, and the line after a cell that compiled again, with an
    IPython shell."""
    ipython.register_magics(TpuMagics)
    if id(ipython) not in _CELL_NOTICES:
        notices = _CELL_NOTICES[id(ipython)] = CellNotices()
        ipython.events.register("pre_run_cell", notices.pre_run_cell)
        ipython.events.register("post_run_cell", notices.post_run_cell)


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the tpukit magics from an IPython shell."""
    notices = _CELL_NOTICES.pop(id(ipython), None)
    if notices is not None:
        ipython.events.unregister("pre_run_cell", notices.pre_run_cell)
        ipython.events.unregister("post_run_cell", notices.post_run_cell)
    registry = ipython.magics_manager.magics
    for kind, names in _MAGIC_NAMES.items():
        for name in names:
            registry[kind].pop(name, None)
