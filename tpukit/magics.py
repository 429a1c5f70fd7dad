"""IPython magics: ``%%tpu_compile``, ``%tpu_compile``, ``%tpu_devices``, ``%tpu_timeit``, ``%tpu_graph``.

Magics only read their line, call the Python API (``tpukit.compile``,
``tpukit.devices``, ``Compiled.timeit``, ``Compiled.graph``) and show the result.
Mistakes in the line become ``UsageError`` (one red line, no traceback); an error
raised by the cell's own code is shown by IPython as usual.

Load with ``%load_ext tpukit``; ``%tpu_compile?`` shows the help.
"""

from __future__ import annotations

import keyword
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from tpukit._call_line import CallSpec, parse_call_line
from tpukit._compiled import Compiled, compile
from tpukit._devices import devices
from tpukit._errors import TpukitError
from tpukit._placement import parse_mesh, parse_partition_spec, place_arguments

_MISSING = object()

_CALL_HELP = (
    "The call to compile, as you would write it: f(data), model_fwd(params, x), or with "
    "abstract shapes in HLO notation, f(f32[128,784]) or g(bf16[8,224,224,3], s32[8]). "
    "Keyword and static (non-array) arguments are allowed."
)


def split_options(magic: Any, line: str) -> tuple[Any, str]:
    """Split ``line`` into the magic's leading ``-options`` (parsed) and the call text.

    The call itself is left untouched: quotes, spaces and brackets inside it are
    Python, not shell words.
    """
    parser = magic.parser
    takes_value = {
        option: action.nargs != 0 for action in parser._actions for option in action.option_strings
    }
    options: list[str] = []
    rest = line.strip()
    while rest.startswith("-"):
        token, _, after = rest.partition(" ")
        name = token.split("=", 1)[0]
        if name not in takes_value:
            known = ", ".join(sorted(o for o in takes_value if o.startswith("--")))
            raise UsageError(f"Unknown option {name!r}. Options: {known}.")
        options.append(token)
        if takes_value[name] and "=" not in token:
            value, _, after = after.strip().partition(" ")
            if not value:
                raise UsageError(f"Option {name} needs a value.")
            options.append(value)
        rest = after.strip()
    return parse_argstring(magic, " ".join(options)), rest


@magics_class
class TpuMagics(Magics):
    """The tpukit magics, registered by ``%load_ext tpukit``."""

    def _call(self, text: str) -> CallSpec:
        if not text:
            raise UsageError(f"No call given. {_CALL_HELP}")
        try:
            return parse_call_line(text, self.shell.user_ns)
        except TpukitError as exc:
            raise UsageError(str(exc)) from None

    def _compile(self, spec: CallSpec, mesh: str | None = None, shard: list[str] = ()) -> Compiled:
        function = spec.function
        if isinstance(function, Compiled):
            function = function.function
        if shard and not mesh:
            raise UsageError("--shard needs --mesh, e.g. --mesh data=8 --shard x=data.")
        try:
            args, kwargs = spec.args, spec.kwargs
            if mesh:
                specs = {}
                for item in shard:
                    name, sep, text = item.partition("=")
                    if not sep:
                        raise UsageError(
                            f"Cannot read --shard {item!r}: write NAME=SPEC, e.g. x=data."
                        )
                    specs[name] = parse_partition_spec(text)
                args, kwargs = place_arguments(function, args, kwargs, parse_mesh(mesh), specs)
            return compile(function, *args, **kwargs)
        except TpukitError as exc:
            raise UsageError(str(exc)) from None

    @magic_arguments()
    @argument(
        "-o",
        "--name",
        help="Variable to store the compiled object in (default: <function>_compiled).",
    )
    @argument(
        "--quiet",
        action="store_true",
        help="Store the compiled object without showing its summary.",
    )
    @argument(
        "--graph", action="store_true", help="Also show the interactive graph of the optimized HLO."
    )
    @argument(
        "--mesh",
        help="Partition over a device mesh, e.g. data=8 or data=4,model=2 (-1: the remaining devices).",
    )
    @argument(
        "--shard",
        action="append",
        default=[],
        help="NAME=SPEC: how argument NAME is split over the mesh, one entry per dimension, "
        "e.g. x=data or w=None,model (repeatable; unnamed arguments are replicated).",
    )
    @argument("call", nargs="*", help=_CALL_HELP)
    @no_var_expand
    @line_cell_magic
    def tpu_compile(self, line: str, cell: str | None = None) -> Compiled | None:
        """Compile a call for the current device, like XLA.jl's ``@tpu_compile f(data)``.

        As a cell magic, the cell is run first (it defines or changes functions),
        then CALL is compiled; only the arguments' shapes and dtypes are used. The
        compiled object is stored in the notebook and its summary shown: compile
        time, signature, FLOPs, bytes, memory, HLO op counts and fusions. Call it
        on device data like the function itself.

        Examples::

            %%tpu_compile predict(params, f32[128,784])
            def predict(params, x):
                return jax.nn.relu(x @ params["w"] + params["b"])

            %tpu_compile -o fwd predict(params, batch)
            fwd(params, batch)

            %tpu_compile --mesh data=8 --shard x=data predict(params, f32[1024,784])
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
        if replaced:
            print(
                f"Stored as {name}, replacing the {type(previous).__name__} that {name} held "
                "(pass -o NAME to choose another name)."
            )
        elif not args.quiet:
            print(f"Stored as {name}.")
        return None

    @magic_arguments()
    @argument(
        "--platform",
        default="auto",
        choices=["auto", "tpu", "gpu", "cpu"],
        help="Which platform to list.",
    )
    @line_magic
    def tpu_devices(self, line: str) -> Any:
        """Show the devices JAX computes on: id, platform, kind, process, coordinates, memory."""
        args = parse_argstring(self.tpu_devices, line)
        try:
            return devices(args.platform)
        except TpukitError as exc:
            raise UsageError(str(exc)) from None

    @magic_arguments()
    @argument(
        "-n",
        "--number",
        type=int,
        default=None,
        help="Calls per timing run (default: chosen so a run lasts 0.2 s).",
    )
    @argument("-r", "--repeat", type=int, default=7, help="Timing runs (default 7).")
    @argument("call", nargs="*", help=_CALL_HELP + " A compiled object may be called directly.")
    @no_var_expand
    @line_magic
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
        try:
            return compiled.timeit(
                *spec.args, number=args.number, repeat=args.repeat, **spec.kwargs
            )
        except TpukitError as exc:
            raise UsageError(str(exc)) from None

    @magic_arguments()
    @argument(
        "--stage", default="optimized", choices=["optimized", "lowered"], help="Which HLO to draw."
    )
    @argument("call", nargs="*", help=_CALL_HELP + " A compiled object may be named directly.")
    @no_var_expand
    @line_magic
    def tpu_graph(self, line: str) -> Any:
        """Show the interactive graph of a call's HLO: fusions, name scopes, source lines, cost.

        Example::

            %tpu_graph train_step(state, batch)
        """
        args, call_text = split_options(self.tpu_graph, line)
        spec = self._call(call_text)
        compiled = spec.function if isinstance(spec.function, Compiled) else self._compile(spec)
        return compiled.graph(args.stage)


_MAGIC_NAMES = {
    "line": ("tpu_compile", "tpu_devices", "tpu_timeit", "tpu_graph"),
    "cell": ("tpu_compile",),
}


def load_ipython_extension(ipython: Any) -> None:
    """Register the tpukit magics with an IPython shell."""
    ipython.register_magics(TpuMagics)


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the tpukit magics from an IPython shell."""
    registry = ipython.magics_manager.magics
    for kind, names in _MAGIC_NAMES.items():
        for name in names:
            registry[kind].pop(name, None)
