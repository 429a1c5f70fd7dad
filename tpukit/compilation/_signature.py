"""What a compiled function was compiled for: its parameters' shapes, dtypes and static values.

A compile only sees abstract arrays, so a ``Signature`` records, for each
argument, either the tree of ``ShapeDtypeStruct`` it was traced with or the
static Python value it was specialised on. The same object checks later calls
and explains a mismatch in the user's own terms.

Which arguments are traced and which are static:

* an array (JAX, NumPy, a ``ShapeDtypeStruct`` or a shape literal such as
  ``f32[128,784]``), or any pytree whose leaves are arrays (a dict of weights,
  an NNX module), is traced: only its shapes and dtypes matter;
* any other hashable value (a Python number, a string, a tuple of ints, a
  function) is static: the compile is specialised on it, as ``jax.jit``'s
  ``static_argnums`` would be.

A string that reads like a shape (``'f32[3]'``) is held static only where the
function declares the parameter as text (``tag: str`` or ``tag="..."``); anywhere
else it is more likely a shape written as a string, and is refused with both fixes.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from tpukit._errors import ArgumentError, SignatureMismatchError
from tpukit.compilation._shapes import SHAPE_LITERAL, check_extent, format_shape

ArgumentKind = Literal["array", "static"]


def is_array_like(x: Any) -> bool:
    """True for values the compiler sees as arrays: JAX/NumPy arrays and abstract shapes."""
    return isinstance(x, (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct)) or (
        hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, type)
    )


def _is_python_number(x: Any) -> bool:
    return isinstance(x, (bool, int, float, complex))


def abstractify(x: Any) -> jax.ShapeDtypeStruct:
    """The abstract value of one traced leaf; committed JAX arrays keep their sharding.

    Host data takes the dtype JAX will give it on the device: with 64-bit types off
    (JAX's default), NumPy ``float64``/``int64`` data is compiled as ``f32``/``s32``,
    as ``tpukit.put`` and ``jax.device_put`` would store it.
    """
    if _is_python_number(x):
        return jax.ShapeDtypeStruct((), jnp.result_type(x), weak_type=True)
    check_extent(tuple(x.shape), x.dtype, f"An array of shape {tuple(x.shape)}")
    if isinstance(x, jax.ShapeDtypeStruct):
        return x
    if isinstance(x, jax.Array) and getattr(x, "committed", False):
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
    return jax.ShapeDtypeStruct(tuple(x.shape), device_dtype(x.dtype))


def device_dtype(dtype: Any) -> Any:
    """The dtype an array of ``dtype`` has once on the device (64-bit types need ``jax_enable_x64``)."""
    try:
        return jax.dtypes.canonicalize_dtype(dtype)
    except (TypeError, ValueError):  # JAX's extended dtypes (PRNG keys) are already canonical
        return dtype


@dataclass(frozen=True)
class Parameter:
    """One argument of a compiled call.

    ``value`` is the pytree of ``ShapeDtypeStruct`` for an ``"array"`` argument and
    the Python value itself for a ``"static"`` one.
    """

    name: str
    kind: ArgumentKind
    value: Any
    keyword: bool = False

    def describe(self) -> str:
        if self.kind == "static":
            return f"{self.name}={_short_repr(self.value)}"
        return f"{self.name}: {describe_tree(self.value)}"


def describe_tree(tree: Any, limit: int = 6) -> str:
    """A compact description of a pytree of arrays: ``f32[128,784]`` or ``{w: f32[784,128], ...}``."""
    leaves_with_paths = jax.tree_util.tree_leaves_with_path(tree)
    if len(leaves_with_paths) == 1 and not leaves_with_paths[0][0]:
        return _describe_leaf(leaves_with_paths[0][1])
    if not leaves_with_paths:
        return "(no arrays)"
    shown = [
        f"{_path_text(path)}: {_describe_leaf(leaf)}" for path, leaf in leaves_with_paths[:limit]
    ]
    more = len(leaves_with_paths) - limit
    if more > 0:
        shown.append(f"... {more} more")
    return "{" + ", ".join(shown) + "}"


def _path_text(path: tuple) -> str:
    text = jax.tree_util.keystr(path, simple=True, separator="/")
    return text.removesuffix("/value")  # NNX variables hold their array in .value


def _describe_leaf(leaf: Any) -> str:
    if _is_python_number(leaf):
        return f"{type(leaf).__name__} scalar"
    return format_shape(leaf)


def _short_repr(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def declared_parameters(function: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    """The function's parameters by name (empty when its signature cannot be read)."""
    try:
        return dict(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return {}


def declares_text(parameter: inspect.Parameter | None) -> bool:
    """True when a parameter says it takes text: a ``str`` annotation or a string default.

    >>> def sk(x, tag: str, mode="train", other=None): ...
    >>> [declares_text(p) for p in inspect.signature(sk).parameters.values()]
    [False, True, True, False]
    """
    if parameter is None:
        return False
    if isinstance(parameter.default, str):
        return True
    annotation = parameter.annotation
    if isinstance(annotation, str):  # from __future__ import annotations: "str", "str | None"
        parts = {part.strip() for part in annotation.split("|")}
        return "str" in parts or annotation.replace(" ", "") == "Optional[str]"
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):  # str | None
        return str in typing.get_args(annotation)
    return annotation is str


def classify(name: str, value: Any, declared: inspect.Parameter | None = None) -> ArgumentKind:
    """Decide whether an argument is traced (``"array"``) or held static, or say why neither works.

    ``declared`` is the function's own parameter the value is bound to, if known: a
    string that reads like a shape is static only where it declares text.

    >>> classify("n", 3), classify("x", np.ones(3))
    ('static', 'array')
    """
    leaves = jax.tree_util.tree_leaves(value)
    array_leaves = [leaf for leaf in leaves if is_array_like(leaf)]
    if array_leaves:
        odd = [leaf for leaf in leaves if not (is_array_like(leaf) or _is_python_number(leaf))]
        if odd:
            raise ArgumentError(
                f"Argument {name!r} mixes arrays with a {type(odd[0]).__name__} "
                f"({_short_repr(odd[0])}), which cannot be traced. Pass the arrays and the "
                "other values as separate arguments; non-array values are then held static."
            )
        return "array"
    if (
        isinstance(value, str)
        and SHAPE_LITERAL.fullmatch(value.strip())
        and not declares_text(declared)
    ):
        raise ArgumentError(
            f"Argument {name!r} is the string {value!r}, which reads like a shape, and the "
            f"function does not declare {name} as text. For an abstract array write "
            f"{value.strip()} without quotes in a %tpu_compile line, or tpukit.shape({value!r}) "
            f"in Python; to pass the text as a static value, annotate {name}: str or give "
            "it a text default."
        )
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [getattr(value, f.name, None) for f in dataclasses.fields(value)]
        if any(is_array_like(leaf) for f in fields for leaf in jax.tree_util.tree_leaves(f)):
            raise ArgumentError(
                f"Argument {name!r} is a {type(value).__name__} dataclass holding arrays, but "
                "JAX does not look inside it. Register it as a pytree "
                "(decorate the class with @jax.tree_util.register_dataclass or "
                "@flax.struct.dataclass), or pass its arrays as arguments."
            )
    try:
        hash(value)
    except TypeError:
        if not leaves:
            return "array"  # an empty container: a pytree with no arrays
        raise ArgumentError(
            f"Argument {name!r} is a {type(value).__name__} without arrays, so it is held "
            "static, but static arguments must be hashable and it is not. Pass a tuple "
            "instead of a list, a frozen dataclass instead of a dict, or array values."
        ) from None
    return "static"


def bind_arguments(
    function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Parameter, ...]:
    """Name every argument of a call and decide whether it is traced or static."""
    names = positional_names(function, args, kwargs)
    declared = declared_parameters(function)
    positional = [_parameter(name, value, declared.get(name)) for name, value in zip(names, args)]
    keywords = [
        _parameter(name, value, declared.get(name), keyword=True) for name, value in kwargs.items()
    ]
    return tuple(positional + keywords)


def _parameter(
    name: str, value: Any, declared: inspect.Parameter | None, keyword: bool = False
) -> Parameter:
    kind = classify(name, value, declared)
    if kind == "array":
        value = jax.tree_util.tree_map(abstractify, value)
    return Parameter(name, kind, value, keyword)


def positional_names(
    function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[str]:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return [f"arg{i}" for i in range(len(args))]
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        name = getattr(function, "__name__", "the function")
        raise ArgumentError(f"{name}() cannot take this call: {exc}.") from None
    names: list[str] = []
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            names.append(parameter.name)
        elif parameter.kind == parameter.VAR_POSITIONAL:
            names.extend(f"{parameter.name}[{i}]" for i in range(len(args) - len(names)))
    return names[: len(args)]


class Signature:
    """The parameters a function was compiled for, and the abstract output.

    ``str(signature)`` reads like a typed call: ``f(x: f32[128,784], n=3) -> f32[128,10]``.
    """

    def __init__(self, name: str, parameters: tuple[Parameter, ...], output: Any = None):
        self.name = name
        self.parameters = parameters
        self.output = output

    @property
    def arrays(self) -> tuple[Parameter, ...]:
        return tuple(p for p in self.parameters if p.kind == "array")

    @property
    def static(self) -> tuple[Parameter, ...]:
        return tuple(p for p in self.parameters if p.kind == "static")

    def __str__(self) -> str:
        inputs = ", ".join(p.describe() for p in self.parameters)
        text = f"{self.name}({inputs})"
        if self.output is not None:
            text += f" -> {describe_tree(self.output)}"
        return text

    def __repr__(self) -> str:
        return f"Signature({self})"

    def argument_paths(self) -> dict[str, str]:
        """``{"traced_args[0]": "x"}``: ``tpukit.compile`` passes the traced arguments to
        XLA as ``(traced_args, traced_kwargs)``, so JAX names the program's parameters
        ``traced_args[0]['w']``; the graph and the memory view name them as the user did
        (``x['w']``) with these prefixes."""
        traced = [p.name for p in self.parameters if not p.keyword and p.kind == "array"]
        paths = {f"traced_args[{i}]": name for i, name in enumerate(traced)}
        paths.update(
            {
                f"traced_kwargs['{p.name}']": p.name
                for p in self.parameters
                if p.keyword and p.kind == "array"
            }
        )
        return paths

    def split(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple, dict]:
        """Return the traced arguments of a call as ``(positional, keyword)``.

        Static arguments are left out: they are already part of the compiled program.
        """
        positional = [p for p in self.parameters if not p.keyword]
        return (
            tuple(args[i] for i, p in enumerate(positional) if p.kind == "array"),
            {p.name: kwargs[p.name] for p in self.parameters if p.keyword and p.kind == "array"},
        )

    def check_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple, dict]:
        """Check a call against the signature and return its traced arguments.

        Raises ``SignatureMismatchError`` naming each argument whose shape, dtype,
        structure or static value differs, and how to recompile.
        """
        __tracebackhide__ = True  # noqa: F841 - IPython and pytest hide this frame
        positional = [p for p in self.parameters if not p.keyword]
        keywords = {p.name: p for p in self.parameters if p.keyword}
        problems: list[str] = []
        if len(args) != len(positional):
            problems.append(f"expected {len(positional)} positional arguments, got {len(args)}")
        if set(kwargs) != set(keywords):
            problems.append(
                f"expected keyword arguments {sorted(keywords) or 'none'}, got {sorted(kwargs) or 'none'}"
            )
        if not problems:
            pairs = list(zip(positional, args)) + [(keywords[k], v) for k, v in kwargs.items()]
            for parameter, value in pairs:
                problem = _mismatch(parameter, value)
                if problem:
                    problems.append(problem)
        if problems:
            raise SignatureMismatchError(
                f"This compiled {self.name} was compiled for {self}; the call does not match: "
                + "; ".join(problems)
                + f". Compile again for these arguments: tpukit.compile({self.name}, ...) "
                f"or %tpu_compile {self.name}(...)."
            )
        return self.split(args, kwargs)


def _mismatch(parameter: Parameter, value: Any) -> str | None:
    if parameter.kind == "static":
        try:
            same = bool(value == parameter.value)
        except Exception:
            same = False
        if not same:
            return (
                f"{parameter.name} was compiled as the static value "
                f"{_short_repr(parameter.value)} but is {_short_repr(value)}"
            )
        return None
    expected_def = jax.tree_util.tree_structure(parameter.value)
    received_def = jax.tree_util.tree_structure(value)
    if expected_def != received_def:
        return (
            f"{parameter.name} should have the structure {describe_tree(parameter.value)} "
            f"but is {describe_tree(value) if _all_arrays(value) else type(value).__name__}"
        )
    for expected, received in zip(
        jax.tree_util.tree_leaves(parameter.value), jax.tree_util.tree_leaves(value)
    ):
        if getattr(expected, "weak_type", False) and _is_python_number(received):
            continue
        if not is_array_like(received):
            return f"{parameter.name} should be an array {format_shape(expected)} but is a {type(received).__name__}"
        if tuple(received.shape) != tuple(expected.shape) or device_dtype(
            received.dtype
        ) != device_dtype(expected.dtype):
            return (
                f"{parameter.name} should be {describe_tree(parameter.value)} "
                f"but is {describe_tree(value)}"
            )
    return None


def _all_arrays(tree: Any) -> bool:
    return all(is_array_like(x) or _is_python_number(x) for x in jax.tree_util.tree_leaves(tree))
