"""The instrumented program behind ``find_nan``: a jaxpr run once, compiled, with a flag
for every value it makes.

:class:`Level` takes a jaxpr and concrete arguments and compiles one program that
evaluates the jaxpr equation by equation, as ``jax.core.eval_jaxpr`` does under
``jax.jit``, entering calls (``jit``, ``custom_jvp``, ``custom_vjp``, ``remat``) so
their equations are checked too, and returns, for each inexact result, whether it holds
a NaN and whether it holds an infinity. Loops and conditionals (``scan``, ``while``,
``cond``) run whole; the search enters them with their inputs' values. Values (an
operation's inputs, for their ranges) come from a second program that returns just
those, which XLA cuts down to the equations they need. One compile per program, where
running equation by equation eagerly would compile every distinct operation.

Equations are named by their *key*: the tuple of their indices from the outer jaxpr
inwards through the calls entered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import core as jax_core

#: Call-like primitives whose inner jaxpr takes the same inputs and gives the same outputs.
CALLS = frozenset(
    {
        "pjit",
        "jit",
        "closed_call",
        "core_call",
        "custom_jvp_call",
        "custom_vjp_call",
        "custom_vjp_call_jaxpr",
        "remat",
        "checkpoint",
        "remat2",
    }
)

Key = tuple[int, ...]


def is_literal(var: Any) -> bool:
    return isinstance(var, jax_core.Literal)


def inner_jaxpr(eqn: Any) -> tuple[Any, list] | None:
    """The jaxpr a call-like equation runs and its constants, if it maps inputs to inputs."""
    if eqn.primitive.name not in CALLS:
        return None
    for name in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        inner = eqn.params.get(name)
        if inner is None:
            continue
        jaxpr, consts = (inner.jaxpr, inner.consts) if hasattr(inner, "consts") else (inner, [])
        if not hasattr(jaxpr, "eqns"):
            continue
        shapes = [getattr(v.aval, "shape", None) for v in jaxpr.invars]
        if shapes == [getattr(v.aval, "shape", None) for v in eqn.invars] and len(
            jaxpr.outvars
        ) == len(eqn.outvars):
            return jaxpr, list(consts)
    return None


def apply(eqn: Any, values: Sequence[Any]) -> list:
    """Run one equation, as ``jax.core.eval_jaxpr`` does (JAX 0.7 and later)."""
    got = eqn.primitive.get_bind_params(eqn.params)
    subfuns, params = got if isinstance(got, tuple) else ((), got)
    with eqn.ctx.manager:
        out = eqn.primitive.bind(*subfuns, *values, **params)
    return list(out) if eqn.primitive.multiple_results else [out]


def inexact(value: Any) -> bool:
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        dtype = np.asarray(value).dtype
    return bool(jnp.issubdtype(dtype, jnp.inexact))


def state(value: Any) -> tuple[bool, bool]:
    """``(has NaN, has an infinity)`` of a concrete array or number."""
    if not inexact(value) or getattr(value, "size", 1) == 0:
        return False, False
    array = np.asarray(value)
    if array.dtype.kind not in "fc":
        array = array.astype(np.float32)
    return bool(np.isnan(array).any()), bool(np.isinf(array).any())


def _walk(
    jaxpr: Any,
    consts: Sequence[Any],
    args: Sequence[Any],
    prefix: Key,
    visit: Callable[[Key, Any, list, list], None],
    eager: bool = False,
) -> list:
    """Evaluate ``jaxpr``, entering calls; ``visit(key, eqn, ins, outs)`` sees every
    equation. While tracing (``eager=False``) every call is entered; run eagerly, a call
    runs whole, compiled, and is entered only when a result is not finite."""
    env: dict[Any, Any] = dict(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))

    def read(var: Any) -> Any:
        return var.val if is_literal(var) else env[var]

    for i, eqn in enumerate(jaxpr.eqns):
        key = (*prefix, i)
        ins = [read(v) for v in eqn.invars]
        inner = inner_jaxpr(eqn)
        outs = None
        if inner is not None and eager:
            outs = apply(eqn, ins)
            if not any(any(state(o)) for o in outs):
                inner = None
        if inner is not None:
            outs = _walk(inner[0], inner[1], ins, key, visit, eager)
        elif outs is None:
            outs = apply(eqn, ins)
        visit(key, eqn, ins, outs)
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(v) for v in jaxpr.outvars]


def _nonfinite_check(value: Any) -> jax.Array:
    """One reduction a value, read by :func:`_nonfinite_flags`: the integer maximum of codes,
    2 for a NaN, 1 for an infinity, 0 else.

    A floating ``max(|x|)`` is cheaper (about 10% of CPU time in ResNet-18's and
    GPT-small's searches) but loses NaN: XLA:CPU's cross-device max over 8 devices drops
    a NaN one of them holds, and from JAX 0.10 its vectorized max on one device drops it
    too (``max(|x|)`` of an f32[4,1024] with one NaN row is 1.0; of an f32[4,128], NaN), so
    the search named the sum after a division as the NaN's origin."""
    code = jnp.where(jnp.isnan(value), 2, jnp.where(jnp.isinf(value), 1, 0))
    return jnp.max(code.astype(jnp.int8)).astype(jnp.float32)


def _nonfinite_flags(check: float) -> tuple[bool, bool]:
    """``(nan, inf)`` from a value's :func:`_nonfinite_check`."""
    return bool(check == 2), bool(check == 1)


class Level:
    """One jaxpr with concrete arguments: the flags of its values, and values on request.

    ``flags[(key, j)]`` is ``(nan, inf)`` for output ``j`` of the equation ``key``
    (inexact outputs only; a missing entry is finite). ``mode`` says how it runs:

    * ``"flags"`` (the default): compiled once with one reduction per value, so that
      only flags leave the device; the values of the operation reported come from a
      second program that XLA cuts down to what they need (``benchmarks/nan_replay.py``:
      ResNet-18's step in about 2x the time of compiling and running it once, on a CPU);
    * ``"values"``: compiled once, returning every value, checked on the host (quicker
      for a tiny program on a CPU, slower for a large one: every value materialized);
    * ``"eager"``: the equations one by one, as JAX runs operations outside ``jit``
      (each distinct operation compiles once per process: slower the first time,
      quicker for a program whose operations ran before).
    """

    def __init__(
        self, jaxpr: Any, consts: Sequence[Any], args: Sequence[Any], mode: str | None = None
    ):
        self.jaxpr = jaxpr
        self.consts = list(consts)
        self.args = list(args)
        self.mode = mode or "flags"
        self._flags: dict[tuple[Key, int], tuple[bool, bool]] | None = None
        self._kept: dict[Key, tuple[list, list]] = {}

    @property
    def flags(self) -> dict[tuple[Key, int], tuple[bool, bool]]:
        if self._flags is None:
            run = {"values": self._run_values, "eager": self._run_eager, "flags": self._run_flags}
            self._flags = run[self.mode]()
        return self._flags

    def _run_eager(self) -> dict[tuple[Key, int], tuple[bool, bool]]:
        flags: dict[tuple[Key, int], tuple[bool, bool]] = {}

        def visit(key: Key, eqn: Any, ins: list, outs: list) -> None:
            if inner_jaxpr(eqn) is None:
                self._flag(flags, key, ins, outs)

        _walk(self.jaxpr, self.consts, self.args, (), visit, eager=True)
        return flags

    def _run_values(self) -> dict[tuple[Key, int], tuple[bool, bool]]:
        """The whole level compiled once, returning every value (checked here, on the
        host: on a CPU the values are already there), where eager runs compile each
        distinct operation."""
        keys: list[Key] = []

        def program(consts: list, args: list) -> Any:
            keys.clear()
            found: list[tuple[list, list]] = []

            def visit(key: Key, eqn: Any, ins: list, outs: list) -> None:
                if inner_jaxpr(eqn) is None:
                    keys.append(key)
                    found.append((ins, outs))

            _walk(self.jaxpr, consts, args, (), visit)
            return found

        flags: dict[tuple[Key, int], tuple[bool, bool]] = {}
        for key, (ins, outs) in zip(keys, jax.jit(program)(self.consts, self.args), strict=True):
            self._flag(flags, key, ins, outs)
        return flags

    def _flag(
        self, flags: dict[tuple[Key, int], tuple[bool, bool]], key: Key, ins: list, outs: list
    ) -> None:
        """Note which outputs of the operation at ``key`` hold a NaN or an infinity in
        ``flags``, and keep its values when one does."""
        bad = False
        for j, out in enumerate(outs):
            nan, inf = state(out)
            if nan or inf:
                flags[(key, j)] = (nan, inf)
                bad = True
        if bad:
            self._kept[key] = (list(ins), list(outs))

    def _run_flags(self) -> dict[tuple[Key, int], tuple[bool, bool]]:
        keys: list[tuple[Key, int]] = []

        def program(consts: list, args: list) -> Any:
            keys.clear()
            checks: list[Any] = []

            def visit(key: Key, eqn: Any, ins: list, outs: list) -> None:
                if inner_jaxpr(eqn) is not None:
                    return  # its equations were checked one by one
                for j, out in enumerate(outs):
                    if inexact(out) and getattr(out, "size", 1):
                        keys.append((key, j))
                        checks.append(_nonfinite_check(out))

            _walk(self.jaxpr, consts, args, (), visit)
            return jnp.stack(checks) if checks else jnp.zeros((0,), jnp.float32)

        found = np.asarray(jax.jit(program)(self.consts, self.args))
        flags = {k: _nonfinite_flags(f) for k, f in zip(keys, found, strict=True)}
        return {k: f for k, f in flags.items() if any(f)}

    def values(self, key: Key) -> tuple[list, list]:
        """The inputs and outputs of the equation ``key``: kept by the first run, or
        from a second, smaller program."""
        self.flags  # noqa: B018 - "values" and "eager" runs keep those of non-finite results
        if key in self._kept:
            return self._kept[key]

        class _Found(Exception):
            pass

        def program(consts: list, args: list) -> Any:
            def visit(at: Key, eqn: Any, ins: list, outs: list) -> None:
                if at == key:
                    raise _Found(ins, outs)

            try:
                _walk(self.jaxpr, consts, args, (), visit)
            except _Found as found:
                return found.args
            raise KeyError(key)

        ins, outs = jax.jit(program)(self.consts, self.args)
        return list(ins), list(outs)
