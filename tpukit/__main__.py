"""Command line: ``python -m tpukit info``, ``compile``, ``demo``, ``launch`` and ``doctor``.

``info`` prints the device table; ``compile MODULE:FUNCTION SHAPE...`` prints the
summary of a compile from a terminal, e.g.::

    python -m tpukit compile mymodel.py:forward "f32[128,784]" "f32[784,10]"
    python -m tpukit compile mypackage.layers:dense "bf16[8,512]" --kw "train=False"

Arguments are shapes in HLO notation or Python literals (held static).
``launch -n 2 --devices-per-process 4 train.py`` runs a script as two local
processes of one ``jax.distributed`` run. ``doctor`` checks that tpukit works here as
the tutorial uses it (requirements, a zoo model, a short ``fit``, a graph).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tpukit._errors import TpukitError


def _load_function(target: str) -> Callable[..., Any]:
    module_name, sep, attribute = target.rpartition(":")
    if not sep or not module_name or not attribute:
        raise TpukitError(
            f"Cannot read {target!r}: write MODULE:FUNCTION, e.g. mymodel.py:forward or "
            "mypackage.layers:dense."
        )
    if module_name.endswith(".py") or "/" in module_name:
        path = Path(module_name)
        if not path.is_file():
            raise TpukitError(
                f"No file {module_name!r}. Give the path of a Python file or a module name."
            )
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.resolve().parent))
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            raise TpukitError(f"Cannot import {module_name!r}: {exc}.") from None
    function = module
    for part in attribute.split("."):
        if not hasattr(function, part):
            raise TpukitError(f"{module_name!r} has no attribute {attribute!r}.")
        function = getattr(function, part)
    return function


def _argument(text: str) -> Any:
    from tpukit.compilation import SHAPE_LITERAL, shape

    if SHAPE_LITERAL.fullmatch(text.strip()):
        return shape(text)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise TpukitError(
            f"Cannot read the argument {text!r}: give a shape such as f32[128,784] or a "
            "Python literal such as 3, 'relu' or (1, 2)."
        ) from None


def _command_info(args: argparse.Namespace) -> int:
    from tpukit.runtime import devices

    print(devices(args.platform))
    return 0


def _command_compile(args: argparse.Namespace) -> int:
    from tpukit.compilation import compile

    function = _load_function(args.target)
    positional = [_argument(a) for a in args.arguments]
    keywords = {}
    for item in args.kw:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise TpukitError(f"Cannot read --kw {item!r}: write NAME=VALUE, e.g. --kw x=f32[8,4].")
        keywords[key] = _argument(value)
    compiled = compile(function, *positional, **keywords)
    print(compiled)
    if args.hlo:
        print(compiled.hlo_text(args.hlo))
    return 0


def _command_demo(args: argparse.Namespace) -> int:
    from tpukit._demo import run_demo

    run_demo()
    return 0


def _command_launch(args: argparse.Namespace) -> int:
    from tpukit.runtime import launch

    return launch(
        args.script,
        args.script_args,
        processes=args.processes,
        devices_per_process=args.devices_per_process,
    )


def _command_doctor(args: argparse.Namespace) -> int:
    from tpukit._doctor import doctor

    return 0 if doctor() else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tpukit", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    info = commands.add_parser("info", help="print the device table")
    info.add_argument("--platform", default="auto", choices=["auto", "tpu", "gpu", "cpu"])
    info.set_defaults(run=_command_info)
    comp = commands.add_parser(
        "compile", help="compile MODULE:FUNCTION for shapes and print the summary"
    )
    comp.add_argument("target", help="MODULE:FUNCTION or path/to/file.py:FUNCTION")
    comp.add_argument(
        "arguments", nargs="*", help='shapes such as "f32[128,784]" or Python literals'
    )
    comp.add_argument("--kw", action="append", default=[], help="a keyword argument NAME=VALUE")
    comp.add_argument(
        "--hlo", choices=["lowered", "optimized"], help="also print this stage's HLO text"
    )
    comp.set_defaults(run=_command_compile)
    demo = commands.add_parser("demo", help="a short end-to-end tour on this machine's device")
    demo.set_defaults(run=_command_demo)
    run = commands.add_parser(
        "launch",
        help="run SCRIPT as N local processes of one jax.distributed run (simulated CPU hosts)",
        description="Start N processes of SCRIPT, each with K simulated CPU devices, joined "
        "through a coordinator on 127.0.0.1; the script's tpukit.connect() joins the run.",
    )
    run.add_argument("-n", "--processes", type=int, required=True, help="how many processes")
    run.add_argument(
        "--devices-per-process", type=int, default=1, help="simulated CPU devices per process"
    )
    run.add_argument("script", help="the Python file each process runs")
    run.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments for the script")
    run.set_defaults(run=_command_launch)
    check = commands.add_parser(
        "doctor",
        help="check that tpukit works here: requirements, a zoo model, fit, checkpoint, graph",
    )
    check.set_defaults(run=_command_doctor)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except TpukitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
