"""Read a call line such as ``f(data)`` or ``g(bf16[8,224,224,3], s32[8], train=False)``.

``%tpu_compile`` names the call to compile the way a user would write it in a
cell. Arguments are Python expressions evaluated in the notebook's namespace,
except shape literals in HLO notation, which stand for abstract arrays: only
their shape and dtype reach the compiler. A dimension may be a Python expression
(``f32[batch,784]``).

>>> spec = parse_call_line("f(f32[2,3], n=4)", {"f": lambda x, n: x})
>>> spec.args, spec.kwargs
((ShapeDtypeStruct(shape=(2, 3), dtype=float32),), {'n': 4})
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tpukit._errors import CallLineError, ShapeSpecError
from tpukit.compilation._shapes import SHAPE_LITERAL, VALID_SHAPE_FORMS, shape

#: Magic options written after the call, as in ``f(x) -o y`` or ``f(x) --quiet``.
_TRAILING_OPTIONS = re.compile(r"(?<=\))\s+(--?[A-Za-z][\w-]*)(\s.*)?$")

_EXPECTED = (
    "Expected one call such as f(data), model_fwd(params, x) or f(f32[128,784]); "
    "arguments are names from the notebook, Python values, or shapes in HLO notation."
)


@dataclass(frozen=True)
class CallSpec:
    """A call read from a line: the function, its arguments, and the line itself."""

    function: Callable[..., Any]
    function_name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    text: str = ""


def parse_call_line(text: str, namespace: Mapping[str, Any]) -> CallSpec:
    """Evaluate a call line in ``namespace`` without calling the function.

    What ``%tpu_compile`` does with its line, for tools of your own: names are looked
    up in ``namespace``, HLO shape literals become abstract arrays, and the result can
    be handed to ``tpukit.compile(spec.function, *spec.args, **spec.kwargs)``.
    Raises ``CallLineError`` with a short message for a line that is not one call,
    a name that is not defined, a bad shape literal or a callee that is not callable.

    Example::

        >>> spec = parse_call_line("f(f32[8,4], scale=2)", {"f": lambda x, scale: x * scale})
        >>> spec.function_name, spec.args[0].shape, spec.kwargs
        ('f', (8, 4), {'scale': 2})
    """
    line = text.strip()
    if not line:
        raise CallLineError(f"No call given. {_EXPECTED}")
    globals_ns = namespace if isinstance(namespace, dict) else dict(namespace)
    source, shapes = _replace_shape_literals(line, globals_ns)
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        _refuse_trailing_options(line)
        raise CallLineError(f"Cannot read {line!r} as a call ({exc.msg}). {_EXPECTED}") from None
    call = tree.body
    if not isinstance(call, ast.Call):
        _refuse_trailing_options(line)
        raise CallLineError(f"{line!r} is not a function call. {_EXPECTED}")

    def evaluate(node: ast.expr) -> Any:
        return _evaluate(node, globals_ns, shapes, line)

    function = evaluate(call.func)
    function_name = ast.unparse(call.func)
    if not callable(function):
        raise CallLineError(
            f"{function_name!r} is a {type(function).__name__}, not a function. {_EXPECTED}"
        )
    args: list[Any] = []
    for node in call.args:
        if isinstance(node, ast.Starred):
            args.extend(_unpack_positional(evaluate(node.value), node.value, line))
        else:
            args.append(evaluate(node))
    kwargs: dict[str, Any] = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            kwargs.update(_unpack_keywords(evaluate(keyword.value), keyword.value, line))
        else:
            kwargs[keyword.arg] = evaluate(keyword.value)
    return CallSpec(function, function_name, tuple(args), kwargs, line)


def _refuse_trailing_options(line: str) -> None:
    trailing = _TRAILING_OPTIONS.search(line)
    if trailing:
        call_text, options = line[: trailing.start()].strip(), trailing.group(0).strip()
        raise CallLineError(
            f"Options go before the call: write {options} {call_text} "
            f"instead of {call_text} {options}."
        )


def _unpack_positional(value: Any, node: ast.expr, line: str) -> list[Any]:
    try:
        return list(value)
    except TypeError:
        raise CallLineError(
            f"*{ast.unparse(node)} in {line!r} unpacks {_short(value)} ({type(value).__name__}), "
            "which is not a sequence; * takes a tuple or list of arguments, e.g. f(*batch)."
        ) from None


def _unpack_keywords(value: Any, node: ast.expr, line: str) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise CallLineError(
            f"**{ast.unparse(node)} in {line!r} unpacks {_short(value)} ({type(value).__name__}); "
            "** takes a dict whose keys are argument names, e.g. f(**options)."
        )
    return dict(value)


def _short(value: Any, limit: int = 30) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _evaluate(node: ast.expr, globals_ns: dict, shapes: dict[str, Any], line: str) -> Any:
    code = compile(ast.Expression(body=node), "<tpu_compile call>", "eval")
    try:
        return eval(code, globals_ns, dict(shapes))  # noqa: S307 - the user's own notebook code
    except NameError as exc:
        name = getattr(exc, "name", None) or str(exc)
        if re.search(rf"(?<![\w.]){re.escape(name)}\[", line):
            raise CallLineError(
                f"{name!r} is neither a name in the notebook nor a dtype. {VALID_SHAPE_FORMS}"
            ) from None
        raise CallLineError(
            f"{name!r} is not defined in the notebook. Define it in an earlier cell, "
            "or give an abstract shape such as f32[128,784] instead of data."
        ) from None
    except Exception as exc:  # the user's expression failed; say which one
        raise CallLineError(
            f"Evaluating {ast.unparse(node)!r} in {line!r} failed: {type(exc).__name__}: {exc}"
        ) from None


def _string_spans(source: str) -> list[tuple[int, int]]:
    """Character spans of string literals, so shapes inside strings stay text."""
    spans = []
    line_starts = [0]
    for line in source.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.STRING:
                start = line_starts[token.start[0] - 1] + token.start[1]
                end = line_starts[token.end[0] - 1] + token.end[1]
                spans.append((start, end))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # the ast parse that follows reports the syntax error properly
    return spans


def _replace_shape_literals(source: str, namespace: dict) -> tuple[str, dict[str, Any]]:
    strings = _string_spans(source)
    shapes: dict[str, Any] = {}
    pieces: list[str] = []
    position = 0
    for match in SHAPE_LITERAL.finditer(source):
        if any(start <= match.start() < end for start, end in strings):
            continue
        placeholder = f"__tpukit_shape_{len(shapes)}__"
        literal = match.group(0)
        try:
            shapes[placeholder] = shape(
                literal, lambda dim, literal=literal: _evaluate_dim(dim, namespace, literal)
            )
        except ShapeSpecError as exc:
            raise CallLineError(str(exc)) from None
        pieces.append(source[position : match.start()])
        pieces.append(placeholder)
        position = match.end()
    pieces.append(source[position:])
    return "".join(pieces), shapes


def _evaluate_dim(dim: str, namespace: dict, shape_text: str) -> Any:
    try:
        return eval(dim, namespace, {})  # noqa: S307 - the user's own notebook code
    except Exception as exc:
        raise ShapeSpecError(
            f"Dimension {dim!r} in shape {shape_text!r} could not be evaluated "
            f"({type(exc).__name__}: {exc}). Use whole numbers, e.g. f32[128,784]."
        ) from None
