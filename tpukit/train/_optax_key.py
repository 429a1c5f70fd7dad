"""A key for an optax optimizer built again with the same settings, without tracing it.

``fit(model, optax.adam(1e-3), ...)`` in a notebook cell makes a new optimizer on every
call: new ``init`` and ``update`` closures over the same code and the same numbers.
:class:`~tpukit.train._program.OptimizerProgram` identifies an optimizer by the program its
``update`` traces to, and that trace costs tens of milliseconds a call. Two optax
closures with the same code whose captured values are equal (numbers, strings, other
optax closures, nested the same way) trace to the same program, so the trace can be
kept under :func:`optax_closure_key`.

Only optax's own functions get a key, with plain values captured: a function written
elsewhere can read a global that changed since (a learning rate in a notebook
variable), and an array or an object captured could be changed in place, so those give
``None`` and are traced every time, as before.

Example::

    >>> import optax
    >>> a, b = optax.adam(1e-3), optax.adam(1e-3)
    >>> optax_closure_key(a.update) == optax_closure_key(b.update)
    True
    >>> optax_closure_key(a.update) == optax_closure_key(optax.adam(1e-2).update)
    False
    >>> optax_closure_key(lambda updates, state, params=None: (updates, state)) is None
    True
"""

from __future__ import annotations

import functools
import types
from typing import Any

_DEPTH = 16  # optax chains nest a few levels; deeper is not an optimizer we know


def optax_closure_key(fn: Any) -> tuple | None:
    """A hashable key equal for optax closures that compute the same thing; ``None`` when
    ``fn`` (or anything it captured) is not optax's code over plain values."""
    return _key(fn, _DEPTH)


def _key(value: Any, depth: int) -> Any:
    if depth == 0:
        return None
    if value is None or isinstance(value, (bool, int, str, bytes)):
        return (type(value).__name__, value)
    if isinstance(value, float):
        return ("float", value.hex())  # 0.0 and -0.0 apart, nan equal to nan
    if isinstance(value, (tuple, list)):
        parts = tuple(_key(v, depth - 1) for v in value)
        return None if None in parts else (type(value).__name__, parts)
    if isinstance(value, dict):
        items = tuple((_key(k, depth - 1), _key(v, depth - 1)) for k, v in value.items())
        if any(k is None or v is None for k, v in items):
            return None
        return ("dict", tuple(sorted(items, key=repr)))
    if isinstance(value, functools.partial):
        parts = (_key(value.func, depth - 1), _key(value.args, depth - 1))
        keywords = _key(value.keywords, depth - 1)
        return None if None in parts or keywords is None else ("partial", parts, keywords)
    if isinstance(value, types.FunctionType):
        return _function_key(value, depth)
    return None


def _function_key(fn: types.FunctionType, depth: int) -> tuple | None:
    if not (fn.__module__ or "").startswith("optax."):
        return None
    captured = tuple(_key(cell.cell_contents, depth - 1) for cell in fn.__closure__ or ())
    defaults = _key(fn.__defaults__, depth - 1)
    keyword_defaults = _key(fn.__kwdefaults__, depth - 1)
    if None in captured or defaults is None or keyword_defaults is None:
        return None
    return ("function", fn.__code__, captured, defaults, keyword_defaults)


def same_optax(a: Any, b: Any) -> bool:
    """Whether ``optax_closure_key(a) == optax_closure_key(b)`` with both keys found,
    told by walking the two side by side: no key is built, and the walk stops at the
    first difference (a repeated ``fit`` compares its optimizer with the last call's).

    Example::

        >>> import optax
        >>> same_optax(optax.adam(1e-3).update, optax.adam(1e-3).update)
        True
        >>> same_optax(optax.adam(1e-3).update, optax.adam(1e-2).update)
        False
    """
    return _same(a, b, _DEPTH)


def _same(a: Any, b: Any, depth: int) -> bool:
    if a is None:  # most of what optax closures hold: no defaults, no keyword defaults
        return b is None and depth > 0
    kind = type(a)
    if depth == 0 or kind is not type(b):
        return False
    if kind is types.FunctionType:
        # the same code object, unless the function was made again (``!=`` on code
        # objects compares their bytecode and constants: some 1.5 µs each)
        code = a.__code__
        if code is not b.__code__ and code != b.__code__:
            return False
        if not (a.__module__ or "").startswith("optax."):
            return False
        cells_a, cells_b = a.__closure__ or (), b.__closure__ or ()
        if len(cells_a) != len(cells_b):
            return False
        depth -= 1
        for x, y in zip(cells_a, cells_b):
            if not _same(x.cell_contents, y.cell_contents, depth):
                return False
        return _same(a.__defaults__, b.__defaults__, depth) and _same(
            a.__kwdefaults__, b.__kwdefaults__, depth
        )
    if a is None or kind in _PLAIN:
        return a == b
    if isinstance(a, float):
        return a.hex() == b.hex()  # 0.0 and -0.0 apart, nan equal to nan
    if isinstance(a, (tuple, list)):  # named tuples too (GradientTransformation)
        if len(a) != len(b):
            return False
        for x, y in zip(a, b):
            if not _same(x, y, depth - 1):
                return False
        return True
    if kind is dict:
        return a.keys() == b.keys() and all(
            _same(k, k, depth - 1) and _same(v, b[k], depth - 1) for k, v in a.items()
        )
    if kind is functools.partial:
        return (
            _same(a.func, b.func, depth - 1)
            and _same(a.args, b.args, depth - 1)
            and _same(a.keywords, b.keywords, depth - 1)
        )
    return False


_PLAIN = (bool, int, str, bytes)
