"""``find_nan``: run a function once, operation by operation, and say where its first NaN
or infinity was made.

The function becomes a jaxpr (``jax.make_jaxpr``, under ``module_scopes`` so that each
operation carries its NNX layer's path); ``_nan_program.Level`` compiles it once as an
instrumented program, its calls (``jit``, ``custom_jvp``, ``custom_vjp``, ``remat``)
entered, that says for every value whether it holds a NaN or an infinity. A ``scan``
or ``while`` whose result is not finite runs its body compiled, step by step, and the
first step whose result is not finite is searched the same way; a ``cond``'s branch
taken is searched the same way.

Each non-finite value is traced back to where it was made (its *origin*): an
operation whose inputs held no such value, an argument that already held one (the
data), or a constant of the program. A NaN made from infinities (``inf - inf``) is
traced on to the operation that made the infinity (``exp`` overflowing in bf16),
unless that infinity was a constant: a ``-inf`` mask is meant, so the operation that
turned it into NaN (the ``sub`` of a softmax over a row that is all mask) is the
origin. Only values that reach a non-finite result count: a ``-inf`` mask consumed by
a softmax or a max, which never shows in the result, is not reported. The first
origin in execution order wins.

Unlike ``jax_debug_nans`` it needs no flag and no restart, does not stop at meant
infinities, and reads the part of a training step from the operations' name stacks:
``transpose(...)`` is the backward pass, an operation in an optax frame the optimizer
update, an operation in an NNX layer the forward pass, the rest after the model's
layers the loss.
"""

from __future__ import annotations

import inspect
import linecache
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax._src import core as jax_core

from tpukit._errors import ArgumentError, user_facing
from tpukit.compilation._module_scopes import module_scopes
from tpukit.compilation._nan_arguments import _arguments
from tpukit.compilation._nan_names import (
    PLUMBING,
    in_optax,
    layer_of,
    library_function,
    stack_of,
    stack_text,
    user_frame,
)
from tpukit.compilation._nan_origin import NanOrigin, ValueRange
from tpukit.compilation._nan_program import (
    Key,
    Level,
    inner_jaxpr,
    is_literal,
    state,
)
from tpukit.display import describe_location


@dataclass
class _Site:
    """Where a non-finite value was made: an equation, an argument or a constant.

    An equation's site holds its level and key; its inputs' and outputs' values are
    read only for the site that is reported (:meth:`values`)."""

    order: int
    kind: str  # "operation" | "input" | "constant"
    step: int = 0  # the equations gone through before it
    primitive: str = ""
    name_stack: str = ""
    tracebacks: tuple[Any, ...] = ()  # innermost first: the equation's, then its callers'
    level: Level | None = None
    key: Key = ()
    outputs: Sequence[Any] = ()
    argument: str | None = None
    rows: tuple[int, ...] = ()

    def values(self) -> tuple[list, list]:
        """``(inputs, outputs)``: the equation's values, or the argument's or constant's."""
        if self.level is None:
            return [], list(self.outputs)
        return self.level.values(self.key)


@dataclass(frozen=True)
class _Taint:
    """Why a value is not finite: the site that made it, what it holds, where NaN came."""

    site: _Site
    nan: bool
    inf: bool
    nan_site: _Site | None = None


@dataclass
class _Context:
    """The equation a jaxpr runs inside: its name stack and tracebacks."""

    name_stack: Any = None
    tracebacks: tuple[Any, ...] = ()


@dataclass
class _Search:
    """One search: sites in execution order, and what the forward pass computed at each
    source line (to name what a backward operation is the gradient of)."""

    order: int = 0
    steps: int = 0  # equations gone through so far
    forward: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    first_layer_step: int | None = None
    differentiated: bool = False  # whether any operation ran under jvp or transpose

    def site(self, kind: str, **details: Any) -> _Site:
        self.order += 1
        return _Site(self.order, kind, self.steps, **details)

    # ------------------------------------------------------------------ the search
    def level(
        self, level: Level, taints: Sequence[_Taint | None], context: _Context
    ) -> list[_Taint | None]:
        """The taints of ``level``'s outputs, from its flags and its inputs' taints."""
        return self._jaxpr(level, level.jaxpr, level.consts, taints, context, ())

    def _jaxpr(
        self,
        level: Level,
        jaxpr: Any,
        consts: Sequence[Any],
        taints: Sequence[_Taint | None],
        context: _Context,
        prefix: Key,
    ) -> list[_Taint | None]:
        marks: dict[Any, _Taint | None] = {}
        for var, value in zip(jaxpr.constvars, consts, strict=True):
            marks[var] = self._constant(value, context)
        marks.update(zip(jaxpr.invars, taints, strict=True))
        flags = level.flags
        for i, eqn in enumerate(jaxpr.eqns):
            key = (*prefix, i)
            inner = _Context(
                stack_of(context.name_stack, eqn),
                (eqn.source_info.traceback, *context.tracebacks),
            )
            self.steps += 1
            self._note_forward(eqn, inner)
            in_taints = [
                self._literal(v, inner) if is_literal(v) else marks.get(v) for v in eqn.invars
            ]
            call = inner_jaxpr(eqn)
            if call is not None:
                found = self._jaxpr(level, call[0], call[1], in_taints, inner, key)
                marks.update(zip(eqn.outvars, found, strict=True))
                continue
            states = [flags.get((key, j), (False, False)) for j in range(len(eqn.outvars))]
            if not any(nan or inf for nan, inf in states):
                continue
            entered = self._enter(level, key, eqn, in_taints, inner)
            for j, (var, (nan, inf)) in enumerate(zip(eqn.outvars, states, strict=True)):
                inside = entered[j] if entered is not None and j < len(entered) else None
                if not (nan or inf):
                    marks[var] = None
                elif inside is not None:
                    marks[var] = _Taint(inside.site, nan, inf, inside.nan_site)
                else:
                    marks[var] = self._combine(level, key, eqn, inner, in_taints, nan, inf)
        return [
            self._constant(v.val, context) if is_literal(v) else marks.get(v) for v in jaxpr.outvars
        ]

    def _combine(
        self,
        level: Level,
        key: Key,
        eqn: Any,
        inner: _Context,
        in_taints: list,
        nan: bool,
        inf: bool,
    ) -> _Taint:
        """The taint of a non-finite result of ``eqn`` from those of its inputs."""

        def here() -> _Site:
            return self.site(
                "operation",
                primitive=eqn.primitive.name,
                name_stack=stack_text(inner.name_stack),
                tracebacks=inner.tracebacks,
                level=level,
                key=key,
            )

        bad = [t for t in in_taints if t is not None]
        if nan:
            nan_in = [t for t in bad if t.nan]
            if nan_in:
                base = _first(nan_in)
                return _Taint(base.site, True, inf, base.nan_site)
            inf_in = [t for t in bad if t.inf]
            if inf_in:
                base = _first(inf_in)
                if base.site.kind == "constant":  # a meant -inf became NaN here
                    return _Taint(here(), True, inf)
                return _Taint(base.site, True, inf, base.nan_site or here())
            return _Taint(here(), True, inf)
        if bad:
            base = _first(bad)
            return _Taint(base.site, base.nan, True, base.nan_site)
        return _Taint(here(), False, True)

    def _constant(self, value: Any, context: _Context) -> _Taint | None:
        nan, inf = state(value)
        if not (nan or inf):
            return None
        site = self.site("constant", tracebacks=context.tracebacks, outputs=[value])
        return _Taint(site, nan, inf)

    def _literal(self, var: Any, context: _Context) -> _Taint | None:
        return self._constant(var.val, context)

    # ---------------------------------------------------- loops and conditionals
    def _enter(
        self, level: Level, key: Key, eqn: Any, in_taints: list, inner: _Context
    ) -> list | None:
        """The taints of a loop's or conditional's outputs, found inside it."""
        name = eqn.primitive.name
        if name not in ("cond", "scan", "while"):
            return None
        values, _ = level.values(key)
        if name == "cond":
            return self._enter_cond(eqn, values, in_taints, inner)
        if name == "scan":
            return self._enter_scan(eqn, values, in_taints, inner)
        return self._enter_while(eqn, values, in_taints, inner)

    def _body(
        self, closed: Any, values: list, taints: list, inner: _Context
    ) -> list[_Taint | None]:
        return self.level(Level(closed.jaxpr, closed.consts, values), taints, inner)

    def _enter_cond(self, eqn: Any, values: list, in_taints: list, inner: _Context) -> list | None:
        branches = eqn.params.get("branches")
        if not branches:
            return None
        index = int(np.clip(np.asarray(values[0]), 0, len(branches) - 1))
        return self._body(branches[index], values[1:], in_taints[1:], inner)

    def _enter_scan(self, eqn: Any, values: list, in_taints: list, inner: _Context) -> list | None:
        p = eqn.params
        body, n_consts, n_carry, length = p["jaxpr"], p["num_consts"], p["num_carry"], p["length"]
        consts, carry = values[:n_consts], values[n_consts : n_consts + n_carry]
        xs = values[n_consts + n_carry :]
        run_body = jax.jit(jax_core.jaxpr_as_fun(body))
        carry_taints = in_taints[n_consts : n_consts + n_carry]
        for i in range(length - 1, -1, -1) if p.get("reverse") else range(length):
            x_i = [x[i] for x in xs]
            outs = run_body(*consts, *carry, *x_i)
            if any(nan or inf for nan, inf in map(state, outs)):
                taints = [*in_taints[:n_consts], *carry_taints, *in_taints[n_consts + n_carry :]]
                return self._body(body, [*consts, *carry, *x_i], taints, inner)
            carry = list(outs[:n_carry])
            carry_taints = [None] * n_carry
        return None

    def _enter_while(self, eqn: Any, values: list, in_taints: list, inner: _Context) -> list | None:
        p = eqn.params
        cond, body = p["cond_jaxpr"], p["body_jaxpr"]
        n_cond, n_body = p["cond_nconsts"], p["body_nconsts"]
        cond_consts = values[:n_cond]
        body_consts = values[n_cond : n_cond + n_body]
        carry = values[n_cond + n_body :]
        carry_taints = in_taints[n_cond + n_body :]
        run_cond = jax.jit(jax_core.jaxpr_as_fun(cond))
        run_body = jax.jit(jax_core.jaxpr_as_fun(body))
        while bool(np.asarray(run_cond(*cond_consts, *carry)[0])):
            outs = run_body(*body_consts, *carry)
            if any(nan or inf for nan, inf in map(state, outs)):
                taints = [*in_taints[n_cond : n_cond + n_body], *carry_taints]
                return self._body(body, [*body_consts, *carry], taints, inner)
            carry = list(outs)
            carry_taints = [None] * len(carry)
        return None

    # ------------------------------------------------------------------ naming
    def _note_forward(self, eqn: Any, context: _Context) -> None:
        """Remember the forward operations of each user line, and where layers begin."""
        stack = stack_text(context.name_stack)
        if "jvp(" in stack:
            self.differentiated = True
        if "transpose(" in stack:
            return
        if self.first_layer_step is None and layer_of(stack)[0] is not None:
            self.first_layer_step = self.steps
        if eqn.primitive.name not in PLUMBING and inner_jaxpr(eqn) is None:
            self.forward.append((eqn.primitive.name, context.tracebacks))

    def _forward_at(self, frame: Any) -> str | None:
        """The first forward operation of the user's line ``frame`` (what a backward
        operation at that line is the gradient of)."""
        for primitive, tracebacks in self.forward:
            other = user_frame(tracebacks)
            if other is not None and (other.file_name, other.start_line) == (
                frame.file_name,
                frame.start_line,
            ):
                return primitive
        return None

    def describe(self, taint: _Taint) -> NanOrigin:
        """The record of a taint's site, in the user's words."""
        site = taint.site
        inputs, outputs = site.values()
        made = _made(outputs)
        if site.kind == "input":
            return NanOrigin(kind="data", made=made, argument=site.argument, rows=site.rows)
        frame = user_frame(site.tracebacks)
        source = code = ""
        if frame is not None:
            source = describe_location(frame.file_name, frame.start_line)
            code = linecache.getline(frame.file_name, frame.start_line).strip()
        layer, layer_class = layer_of(site.name_stack)
        part = self._part(site, layer)
        gradient_of = None
        if part == "backward" and frame is not None:
            gradient_of = self._forward_at(frame)
        nan_at = ""
        if taint.nan_site is not None and taint.nan_site is not site:
            later = taint.nan_site
            called = library_function(later.tracebacks)
            nan_at = later.primitive + (f" in {called}" if called else "")
            later_frame = user_frame(later.tracebacks)
            if later_frame is not None:
                nan_at += f" ({describe_location(later_frame.file_name, later_frame.start_line)})"
        return NanOrigin(
            kind=site.kind,
            made=made,
            operation=site.primitive,
            function=library_function(site.tracebacks),
            source=source,
            code=code,
            layer=layer,
            layer_class=layer_class,
            part=part,
            gradient_of=gradient_of,
            inputs=tuple(
                ValueRange.of(f"input {i}", v) for i, v in enumerate(inputs) if _numeric(v)
            ),
            output=ValueRange.of("output", outputs[0])
            if outputs and _numeric(outputs[0])
            else None,
            nan_at=nan_at,
            name_stack=site.name_stack,
        )

    def _part(self, site: _Site, layer: str | None) -> str | None:
        if site.kind != "operation":
            return None
        if "transpose(" in site.name_stack:
            return "backward"
        if in_optax(site.tracebacks):
            return "optimizer update"
        if layer is not None:
            return "forward"
        if self.first_layer_step is not None and site.step > self.first_layer_step:
            return "loss"
        return "forward" if self.differentiated or self.first_layer_step else None


# ---------------------------------------------------------------------- helpers
def _is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _numeric(value: Any) -> bool:
    dtype = getattr(value, "dtype", None)
    return dtype is not None and bool(
        jnp.issubdtype(dtype, jnp.number) or jnp.issubdtype(dtype, jnp.bool_)
    )


def _first(taints: list[_Taint]) -> _Taint:
    """The taint made first, a computed one before a constant."""
    return min(taints, key=lambda t: (t.site.kind == "constant", t.site.order))


def _made(outputs: Sequence[Any]) -> str:
    """What a site's results held: ``'NaN'``, ``'inf'``, ``'-inf'``, ``'-inf and NaN'``..."""
    nan = pos = neg = False
    for value in outputs:
        if not (_is_array(value) or np.isscalar(value)):
            continue
        array = np.asarray(value)
        if array.dtype.kind not in "fc":
            if not jnp.issubdtype(array.dtype, jnp.inexact):
                continue
            array = array.astype(np.float32)
        if array.dtype.kind == "c":
            nan, pos = nan or bool(np.isnan(array).any()), pos or bool(np.isinf(array).any())
            continue
        nan = nan or bool(np.isnan(array).any())
        pos, neg = pos or bool(np.isposinf(array).any()), neg or bool(np.isneginf(array).any())
    infinities = " and ".join(n for n, there in (("inf", pos), ("-inf", neg)) if there)
    return " and ".join(x for x in (infinities, "NaN" if nan else "") if x) or "NaN"


# ---------------------------------------------------------------------- the call
def search(
    function: Callable,
    args: tuple,
    kwargs: dict,
    *,
    names: Sequence[str] | None = None,
    example_rows: dict[str, np.ndarray] | None = None,
    mode: str | None = None,
) -> NanOrigin | None:
    """:func:`find_nan`'s work, for tpukit's own callers (``fit``'s replay).

    ``names`` replaces the arguments' names (``("params", ..., "train_data")``);
    ``example_rows`` maps an argument's name to the dataset rows of its first axis,
    so that NaN in a batch is reported as the examples of the dataset. ``mode`` chooses
    how the program runs (``Level``; ``"flags"`` by default)."""
    if names is not None:
        function = _renamed(function, list(names))
    call = _arguments(function, args, kwargs)
    mode = mode or "flags"
    if mode != "flags":  # on one CPU device: a program over split arrays compiles for all
        cpu = jax.devices("cpu")[0]
        call.dynamic = [
            jax.device_put(v, cpu) if isinstance(v, jax.Array) else v for v in call.dynamic
        ]

    def flat(*values: Any) -> list:
        a, k = call.rebuild(values)
        return _array_leaves(function(*a, **k))

    with module_scopes(**call.modules):
        closed = jax.make_jaxpr(flat)(*call.dynamic)
    searcher = _Search()
    taints = []
    for name, value in zip(call.names, call.dynamic, strict=True):
        nan, inf = state(value)
        if not (nan or inf):
            taints.append(None)
            continue
        rows = _bad_rows(value)
        root = re.split(r"[.\[]", name, maxsplit=1)[0]
        if example_rows and root in example_rows and rows:
            rows = tuple(int(example_rows[root][r]) for r in rows)
        site = searcher.site("input", argument=name, rows=rows, outputs=[value])
        taints.append(_Taint(site, nan, inf))
    level = Level(closed.jaxpr, closed.consts, call.dynamic, mode=mode)
    found = [t for t in searcher.level(level, taints, _Context()) if t is not None]
    if not found:
        return None
    return searcher.describe(_first(found))


def _array_leaves(result: Any) -> list:
    """The arrays a function returned: NNX modules as their state, other objects left out
    (a train step may return the model it updated, or a string)."""
    tree = jax.tree.map(
        lambda v: nnx.state(v) if isinstance(v, nnx.Module) else v,
        result,
        is_leaf=lambda v: isinstance(v, nnx.Module),
    )
    kinds = (jax.Array, np.ndarray, np.generic, float, int, complex, bool)
    return [leaf for leaf in jax.tree.leaves(tree) if isinstance(leaf, kinds)]


def _renamed(function: Callable, names: list[str]) -> Callable:
    """``function`` with positional parameters called ``names`` (for the record's words)."""

    def renamed(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    renamed.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n.replace(" ", "_"), inspect.Parameter.POSITIONAL_ONLY) for n in names]
    )
    return renamed


def _bad_rows(value: Any) -> tuple[int, ...]:
    array = np.asarray(value)
    if array.ndim == 0:
        return ()
    if array.dtype.kind not in "fc":
        array = array.astype(np.float32)
    bad = ~np.isfinite(array.reshape(array.shape[0], -1)).all(axis=1)
    return tuple(int(i) for i in np.flatnonzero(bad))


@user_facing
def find_nan(function: Callable, *args: Any, **kwargs: Any) -> NanOrigin | None:
    """Run ``function(*args, **kwargs)`` once, operation by operation, and say where its
    first NaN or infinity was made; ``None`` when every value it returns is finite.

    For a step that went NaN, a loss that came out infinite, a gradient that did: the
    record names the operation whose inputs were finite and whose output was not (a
    ``log`` of zero, a ``div`` by zero, the ``sqrt`` of a negative variance, an ``exp``
    overflowing in bf16), the user's source line, the NNX layer it ran in, the part of
    a training step (forward, loss, backward and the gradient of which operation, the
    optimizer update) and the ranges of its inputs. NaN that came with the data is
    reported as the data: the argument and its rows. Meant infinities (a ``-inf``
    attention mask that a softmax turns into zeros) are not reported: only a value
    that reaches a non-finite result counts.

    It works on every backend with no flag and no restart (unlike ``jax_debug_nans``):
    the function is traced once into a jaxpr, compiled once with a check of every
    value it makes, and each non-finite value is traced back to where it was made.
    NNX modules among the arguments are used as they are and not changed. It costs
    about twice one compiled call of the function, compile included (ResNet-18's
    step); nothing is paid by the function's other calls.

    Args:
        function: a function of arrays and NNX modules, jitted or not (a train step,
            a loss, a model's forward pass).
        *args, **kwargs: its arguments, as they were when it went wrong.

    Returns:
        A :class:`NanOrigin` (``.operation``, ``.source``, ``.layer``, ``.part``,
        ``.inputs``, ``.summary()``), or ``None``.

    Example::

        >>> def loss(p):
        ...     return -jnp.log(p).mean()
        >>> origin = find_nan(loss, jnp.array([0.5, 0.0]))
        >>> origin.operation, origin.made
        ('log', '-inf')
        >>> find_nan(loss, jnp.array([0.5, 0.25])) is None
        True
    """
    if not callable(function):
        raise ArgumentError(
            f"find_nan needs a function to run, got {type(function).__name__}: pass the "
            "function and its arguments, find_nan(f, x, y), not its result f(x, y)."
        )
    return search(function, args, kwargs)
