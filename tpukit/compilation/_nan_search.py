"""``find_nan``: run a function once, operation by operation, and say where its first NaN
or infinity was made.

The function becomes a jaxpr (``jax.make_jaxpr``, under ``module_scopes`` so that each
operation carries its NNX layer's path), then an interpreter evaluates it equation by
equation on the device, as ``jax.core.eval_jaxpr`` does, and checks every result.
Calls (``jit``, ``custom_jvp``, ``custom_vjp``, ``remat``) run whole, compiled; only
one whose result is not finite is entered and evaluated equation by equation. A
``scan`` or ``while`` runs its body compiled, step by step, and enters the first step
whose result is not finite; a ``cond`` enters the branch taken.

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

import functools
import inspect
import linecache
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax._src import core as jax_core
from jax._src import source_info_util

from tpukit._errors import ArgumentError, user_facing
from tpukit.compilation._module_scopes import module_scopes, path_text
from tpukit.compilation._nan_origin import NanOrigin, ValueRange
from tpukit.display import describe_location
from tpukit.hlo import is_user_file

#: Call-like primitives whose inner jaxpr takes the same inputs and gives the same outputs.
_CALLS = frozenset(
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
#: Operations that move or compare values; the gradient of a line is named by another.
_PLUMBING = frozenset(
    {
        "broadcast_in_dim",
        "reshape",
        "convert_element_type",
        "squeeze",
        "expand_dims",
        "transpose",
        "select_n",
        "eq",
        "ne",
        "gt",
        "lt",
        "ge",
        "le",
        "stop_gradient",
        "copy",
        "copy_p",
        "slice",
        "dynamic_slice",
        "concatenate",
        "iota",
        "pjit",
        "jit",
        "mul",
        "neg",
        "reduce_sum",
        "add",
        "add_any",
    }
)
_SCOPE = re.compile(r"^(?P<path>.+) \((?P<cls>[A-Za-z_]\w*)\)$")
_TRANSFORM = re.compile(r"^(?:jvp|transpose|vmap|remat|checkpoint|pmap)\((?P<inner>.*)\)$")


@dataclass
class _Site:
    """Where a non-finite value was made: an equation, an argument or a constant."""

    order: int
    kind: str  # "operation" | "input" | "constant"
    step: int = 0  # the equations evaluated before it
    primitive: str = ""
    name_stack: str = ""
    tracebacks: tuple[Any, ...] = ()  # innermost first: the equation's, then its callers'
    inputs: Sequence[Any] = ()
    outputs: Sequence[Any] = ()
    argument: str | None = None
    rows: tuple[int, ...] = ()


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
    """One run of the interpreter: sites in execution order, and what the forward pass
    computed at each source line (to name what a backward operation is the gradient of)."""

    order: int = 0
    steps: int = 0  # equations evaluated so far
    forward: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    first_layer_order: int | None = None
    differentiated: bool = False  # whether any operation ran under jvp or transpose

    def site(self, kind: str, **details: Any) -> _Site:
        self.order += 1
        return _Site(self.order, kind, self.steps, **details)

    # ------------------------------------------------------------------ evaluation
    def run(
        self,
        jaxpr: Any,
        consts: Sequence[Any],
        args: Sequence[Any],
        taints: Sequence[_Taint | None],
        context: _Context,
    ) -> tuple[list[Any], list[_Taint | None]]:
        """Evaluate ``jaxpr`` on ``args`` (with their taints); its outputs and theirs."""
        env: dict[Any, Any] = {}
        marks: dict[Any, _Taint | None] = {}
        for var, value in zip(jaxpr.constvars, consts, strict=True):
            env[var] = value
            marks[var] = self._constant(value, context)
        for var, value, taint in zip(jaxpr.invars, args, taints, strict=True):
            env[var] = value
            marks[var] = taint
        for eqn in jaxpr.eqns:
            values = [self._read(env, v) for v in eqn.invars]
            in_taints = [
                self._literal(v, eqn, context) if _is_literal(v) else marks.get(v)
                for v in eqn.invars
            ]
            outs, out_taints = self._equation(eqn, values, in_taints, context)
            for var, value, taint in zip(eqn.outvars, outs, out_taints, strict=True):
                env[var] = value
                marks[var] = taint
        outs = [self._read(env, v) for v in jaxpr.outvars]
        out_taints = [
            self._constant(v.val, context) if _is_literal(v) else marks.get(v)
            for v in jaxpr.outvars
        ]
        return outs, out_taints

    @staticmethod
    def _read(env: dict, var: Any) -> Any:
        return var.val if _is_literal(var) else env[var]

    def _equation(
        self, eqn: Any, values: list, in_taints: list, context: _Context
    ) -> tuple[list, list]:
        inner = _Context(_stack_of(context, eqn), (eqn.source_info.traceback, *context.tracebacks))
        self.steps += 1
        self._note_forward(eqn, inner)
        outs = _apply(eqn, values)
        states = [_state(o) for o in outs]
        if not any(nan or inf for nan, inf in states):
            return outs, [None] * len(outs)
        name = eqn.primitive.name
        found: list[_Taint | None] | None = None
        if name in _CALLS:
            found = self._enter_call(eqn, values, in_taints, inner)
        elif name == "cond":
            found = self._enter_cond(eqn, values, in_taints, inner)
        elif name == "scan":
            found = self._enter_scan(eqn, values, in_taints, inner)
        elif name == "while":
            found = self._enter_while(eqn, values, in_taints, inner)
        taints = []
        for i, (nan, inf) in enumerate(states):
            inside = found[i] if found is not None and i < len(found) else None
            if not (nan or inf):
                taints.append(None)
            elif inside is not None:
                taints.append(_Taint(inside.site, nan, inf, inside.nan_site))
            else:
                taints.append(self._combine(eqn, inner, values, outs, in_taints, nan, inf))
        return outs, taints

    def _combine(
        self,
        eqn: Any,
        inner: _Context,
        values: list,
        outs: list,
        in_taints: list,
        nan: bool,
        inf: bool,
    ) -> _Taint:
        """The taint of a non-finite result of ``eqn`` from those of its inputs."""

        def here() -> _Site:
            return self.site(
                "operation",
                primitive=eqn.primitive.name,
                name_stack=_stack_text(inner.name_stack),
                tracebacks=inner.tracebacks,
                inputs=values,
                outputs=outs,
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
        nan, inf = _state(value)
        if not (nan or inf):
            return None
        site = self.site("constant", tracebacks=context.tracebacks, outputs=[value])
        return _Taint(site, nan, inf)

    def _literal(self, var: Any, eqn: Any, context: _Context) -> _Taint | None:
        return self._constant(
            var.val, _Context(None, (eqn.source_info.traceback, *context.tracebacks))
        )

    # ----------------------------------------------------------- entering programs
    def _enter_call(self, eqn: Any, values: list, in_taints: list, inner: _Context) -> list | None:
        found = _inner_jaxpr(eqn)
        if found is None:
            return None
        jaxpr, consts = found
        _, taints = self.run(jaxpr, consts, values, in_taints, inner)
        return taints

    def _enter_cond(self, eqn: Any, values: list, in_taints: list, inner: _Context) -> list | None:
        branches = eqn.params.get("branches")
        if not branches:
            return None
        index = int(np.clip(np.asarray(values[0]), 0, len(branches) - 1))
        branch = branches[index]
        _, taints = self.run(branch.jaxpr, branch.consts, values[1:], in_taints[1:], inner)
        return taints

    def _enter_scan(self, eqn: Any, values: list, in_taints: list, inner: _Context) -> list | None:
        p = eqn.params
        body, n_consts, n_carry, length = p["jaxpr"], p["num_consts"], p["num_carry"], p["length"]
        consts, carry = values[:n_consts], values[n_consts : n_consts + n_carry]
        xs = values[n_consts + n_carry :]
        run_body = jax.jit(jax_core.jaxpr_as_fun(body))
        steps = range(length - 1, -1, -1) if p.get("reverse") else range(length)
        carry_taints = in_taints[n_consts : n_consts + n_carry]
        for i in steps:
            x_i = [x[i] for x in xs]
            outs = run_body(*consts, *carry, *x_i)
            if any(nan or inf for nan, inf in map(_state, outs)):
                taints = [
                    *in_taints[:n_consts],
                    *carry_taints,
                    *in_taints[n_consts + n_carry :],
                ]
                _, found = self.run(body.jaxpr, body.consts, [*consts, *carry, *x_i], taints, inner)
                return found
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
            if any(nan or inf for nan, inf in map(_state, outs)):
                taints = [*in_taints[n_cond : n_cond + n_body], *carry_taints]
                _, found = self.run(body.jaxpr, body.consts, [*body_consts, *carry], taints, inner)
                return found
            carry = list(outs)
            carry_taints = [None] * len(carry)
        return None

    # ------------------------------------------------------------------ naming
    def _note_forward(self, eqn: Any, context: _Context) -> None:
        """Remember the forward operations of each user line, and where layers begin."""
        stack = _stack_text(context.name_stack)
        if "jvp(" in stack:
            self.differentiated = True
        if "transpose(" in stack:
            return
        if self.first_layer_order is None and _layer(stack)[0] is not None:
            self.first_layer_order = self.steps
        if eqn.primitive.name not in _PLUMBING and eqn.primitive.name not in _CALLS:
            self.forward.append((eqn.primitive.name, context.tracebacks))

    def _forward_at(self, frame: Any) -> str | None:
        """The first forward operation of the user's line ``frame`` (what a backward
        operation at that line is the gradient of)."""
        for primitive, tracebacks in self.forward:
            other = _user_frame(tracebacks)
            if other is not None and (other.file_name, other.start_line) == (
                frame.file_name,
                frame.start_line,
            ):
                return primitive
        return None

    def describe(self, taint: _Taint) -> NanOrigin:
        """The record of a taint's site, in the user's words."""
        site = taint.site
        made = _made(site.outputs)
        if site.kind == "input":
            return NanOrigin(kind="data", made=made, argument=site.argument, rows=site.rows)
        frame = _user_frame(site.tracebacks)
        source = code = ""
        if frame is not None:
            source = describe_location(frame.file_name, frame.start_line)
            code = linecache.getline(frame.file_name, frame.start_line).strip()
        layer, layer_class = _layer(site.name_stack)
        part = self._part(site, layer)
        gradient_of = None
        if part == "backward" and frame is not None:
            gradient_of = self._forward_at(frame)
        nan_at = ""
        if taint.nan_site is not None and taint.nan_site is not site:
            later = taint.nan_site
            nan_at = later.primitive + (
                f" in {_library_function(later.tracebacks)}"
                if _library_function(later.tracebacks)
                else ""
            )
            later_frame = _user_frame(later.tracebacks)
            if later_frame is not None:
                nan_at += f" ({describe_location(later_frame.file_name, later_frame.start_line)})"
        return NanOrigin(
            kind=site.kind,
            made=made,
            operation=site.primitive,
            function=_library_function(site.tracebacks),
            source=source,
            code=code,
            layer=layer,
            layer_class=layer_class,
            part=part,
            gradient_of=gradient_of,
            inputs=tuple(
                ValueRange.of(f"input {i}", v) for i, v in enumerate(site.inputs) if _is_array(v)
            ),
            output=ValueRange.of("output", site.outputs[0]) if site.outputs else None,
            nan_at=nan_at,
            name_stack=site.name_stack,
        )

    def _part(self, site: _Site, layer: str | None) -> str | None:
        if site.kind != "operation":
            return None
        if "transpose(" in site.name_stack:
            return "backward"
        if _in_optax(site.tracebacks):
            return "optimizer update"
        if layer is not None:
            return "forward"
        if self.first_layer_order is not None and site.step > self.first_layer_order:
            return "loss"
        return "forward" if self.differentiated or self.first_layer_order else None


# ---------------------------------------------------------------------- helpers
def _is_literal(var: Any) -> bool:
    return isinstance(var, jax_core.Literal)


def _is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _first(taints: list[_Taint]) -> _Taint:
    """The taint made first, a computed one before a constant."""
    return min(taints, key=lambda t: (t.site.kind == "constant", t.site.order))


def _apply(eqn: Any, values: list) -> list:
    """Run one equation eagerly, as ``jax.core.eval_jaxpr`` does (JAX 0.7 and later)."""
    got = eqn.primitive.get_bind_params(eqn.params)
    subfuns, params = got if isinstance(got, tuple) else ((), got)
    with eqn.ctx.manager:
        out = eqn.primitive.bind(*subfuns, *values, **params)
    return list(out) if eqn.primitive.multiple_results else [out]


_device_flags = jax.jit(lambda x: jnp.stack([jnp.any(jnp.isnan(x)), jnp.any(jnp.isinf(x))]))


def _state(value: Any) -> tuple[bool, bool]:
    """``(has NaN, has an infinity)`` of an array or number; integers are always finite."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        value = np.asarray(value)
        dtype = value.dtype
    if not jnp.issubdtype(dtype, jnp.inexact) or getattr(value, "size", 1) == 0:
        return False, False
    if isinstance(value, jax.Array) and any(d.platform != "cpu" for d in value.devices()):
        nan, inf = np.asarray(_device_flags(value))
        return bool(nan), bool(inf)
    array = np.asarray(value)
    if array.dtype.kind not in "fc":
        array = array.astype(np.float32)
    return bool(np.isnan(array).any()), bool(np.isinf(array).any())


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


def _inner_jaxpr(eqn: Any) -> tuple[Any, list] | None:
    """The jaxpr a call-like equation runs, with its constants, if it maps inputs to inputs."""
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        inner = eqn.params.get(key)
        if inner is None:
            continue
        jaxpr, consts = (inner.jaxpr, inner.consts) if hasattr(inner, "consts") else (inner, [])
        if not hasattr(jaxpr, "eqns"):
            continue
        same_in = [getattr(v.aval, "shape", None) for v in jaxpr.invars] == [
            getattr(v.aval, "shape", None) for v in eqn.invars
        ]
        if same_in and len(jaxpr.outvars) == len(eqn.outvars):
            return jaxpr, list(consts)
    return None


def _stack_of(context: _Context, eqn: Any) -> Any:
    own = eqn.source_info.name_stack
    if context.name_stack is None:
        return own
    try:
        return context.name_stack + own
    except TypeError:
        return own


def _stack_text(stack: Any) -> str:
    return "" if stack is None else str(stack)


def _layer(stack: str) -> tuple[str | None, str | None]:
    """The innermost NNX layer of a name stack: ``('layers[2]', 'Linear')``."""
    found: tuple[str | None, str | None] = (None, None)
    for part in stack.split("/"):
        while (m := _TRANSFORM.match(part)) is not None:
            part = m.group("inner")
        m = _SCOPE.match(part)
        if m is not None:
            found = (m.group("path").replace("|", "/"), m.group("cls"))
    return found


@functools.lru_cache(maxsize=4096)
def _frames(traceback: Any) -> tuple[Any, ...]:
    """All frames of a JAX traceback, innermost first."""
    if traceback is None:
        return ()
    code, lasti = traceback.raw_frames()
    return tuple(source_info_util.raw_frame_to_frame(code[i], lasti[i]) for i in range(len(code)))


_STDLIB = os.path.dirname(os.__file__)


def _is_users(frame: Any) -> bool:
    return is_user_file(frame.file_name) and not frame.file_name.startswith(_STDLIB + os.sep)


def _user_frame(tracebacks: Sequence[Any]) -> Any:
    """The innermost frame the user wrote, from the equation's own traceback outwards."""
    for traceback in tracebacks:
        for frame in _frames(traceback):
            if _is_users(frame):
                return frame
    return None


#: Frames of a library's machinery (wrappers, tracing), never the function a user called.
_MACHINERY = re.compile(
    r"[/\\](interpreters[/\\].*|traceback_util|pjit|api|api_util|core|linear_util|dispatch|"
    r"custom_derivatives|ad_checkpoint|source_info_util|profiler|util|array_methods|"
    r"contextlib|functools|_module_scopes|transforms|graph|bridge|object|module|"
    r"pytreelib)\.py$"
)


def _library_function(tracebacks: Sequence[Any]) -> str:
    """The library function the user's line called (``softmax``, ``Linear.__call__``,
    ``scale_by_adam.update_fn``), or ``''`` when the operation is the line's own."""
    for traceback in tracebacks:
        frames = _frames(traceback)
        for i, frame in enumerate(frames):
            if not _is_users(frame):
                continue
            inside = frames[:i]
            optax_frames = [f for f in inside if f.file_name.startswith(_OPTAX)]
            for called in optax_frames:  # innermost first: the transformation's update
                if ".<locals>." in called.function_name:
                    return called.function_name.replace(".<locals>", "")
            for called in reversed(inside):  # outermost first: the function the user called
                if not _MACHINERY.search(called.file_name):
                    return called.function_name.replace(".<locals>", "")
            return ""
    return ""


_OPTAX = os.path.dirname(optax.__file__) + os.sep


def _in_optax(tracebacks: Sequence[Any]) -> bool:
    return any(f.file_name.startswith(_OPTAX) for tb in tracebacks[:1] for f in _frames(tb))


# ---------------------------------------------------------------------- the call
@dataclass
class _Arguments:
    """A call's arguments as the leaves a jaxpr takes: arrays, and NNX modules split."""

    dynamic: list[Any]
    names: list[str]
    rebuild: Callable[[Sequence[Any]], tuple[tuple, dict]]
    modules: dict[str, Any]


def _arguments(function: Callable, args: tuple, kwargs: dict) -> _Arguments:
    named = _argument_names(function, len(args))
    tree = (args, kwargs)
    flat, treedef = jax.tree_util.tree_flatten_with_path(
        tree, is_leaf=lambda x: isinstance(x, nnx.Module)
    )
    dynamic: list[Any] = []
    names: list[str] = []
    plan: list[tuple[str, Any]] = []
    modules: dict[str, Any] = {}
    for path, leaf in flat:
        name = _leaf_name(path, named)
        if isinstance(leaf, nnx.Module):
            graphdef, state = nnx.split(leaf)
            leaves, state_def = jax.tree_util.tree_flatten_with_path(state)
            start = len(dynamic)
            for state_path, value in leaves:
                dynamic.append(value)
                names.append(f"{name}.{path_text(tuple(state_path))}".replace("..", "."))
            plan.append(("module", (graphdef, state_def, start, len(leaves))))
            modules[name.split(".")[0].split("[")[0]] = leaf
        elif isinstance(leaf, (jax.Array, np.ndarray, np.generic)):
            plan.append(("array", len(dynamic)))
            dynamic.append(leaf)
            names.append(name)
        else:
            plan.append(("static", leaf))

    def rebuild(values: Sequence[Any]) -> tuple[tuple, dict]:
        leaves = []
        for kind, item in plan:
            if kind == "array":
                leaves.append(values[item])
            elif kind == "static":
                leaves.append(item)
            else:
                graphdef, state_def, start, count = item
                state = jax.tree_util.tree_unflatten(state_def, values[start : start + count])
                leaves.append(nnx.merge(graphdef, state))
        return jax.tree_util.tree_unflatten(treedef, leaves)

    return _Arguments(dynamic, names, rebuild, modules)


def _argument_names(function: Callable, count: int) -> list[str]:
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    names = []
    for i in range(count):
        if i < len(parameters) and parameters[i].kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            names.append(parameters[i].name)
        else:
            names.append(f"args[{i}]")
    return names


def _leaf_name(path: tuple, named: list[str]) -> str:
    first, *rest = path
    index = getattr(first, "idx", getattr(first, "key", first))
    if index == 0:  # the positional arguments
        position, *rest = rest
        i = getattr(position, "idx", position)
        root = named[i] if isinstance(i, int) and i < len(named) else f"args[{i}]"
    else:
        key, *rest = rest
        root = str(getattr(key, "key", key))
    return root + jax.tree_util.keystr(tuple(rest))


def search(
    function: Callable,
    args: tuple,
    kwargs: dict,
    *,
    names: Sequence[str] | None = None,
    example_rows: dict[str, np.ndarray] | None = None,
) -> NanOrigin | None:
    """:func:`find_nan`'s work, for tpukit's own callers (``fit``'s replay).

    ``names`` replaces the arguments' names (``("params", ..., "train_data")``);
    ``example_rows`` maps an argument's name to the dataset rows of its first axis,
    so that NaN in a batch is reported as the examples of the dataset."""
    if names is not None:
        function = _renamed(function, list(names))
    call = _arguments(function, args, kwargs)

    def flat(*values: Any) -> Any:
        a, k = call.rebuild(values)
        return function(*a, **k)

    with module_scopes(**call.modules):
        closed = jax.make_jaxpr(flat)(*call.dynamic)
    searcher = _Search()
    taints = []
    for name, value in zip(call.names, call.dynamic, strict=True):
        nan, inf = _state(value)
        if not (nan or inf):
            taints.append(None)
            continue
        rows = _bad_rows(value)
        root = re.split(r"[.\[]", name, maxsplit=1)[0]
        if example_rows and root in example_rows and rows:
            rows = tuple(int(example_rows[root][r]) for r in rows)
        site = searcher.site("input", argument=name, rows=rows, outputs=[value])
        taints.append(_Taint(site, nan, inf))
    _, out_taints = searcher.run(closed.jaxpr, closed.consts, call.dynamic, taints, _Context())
    found = [t for t in out_taints if t is not None]
    if not found:
        return None
    return searcher.describe(_first(found))


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
    the function is traced once into a jaxpr and evaluated equation by equation, with
    ``jit``-ed parts run whole unless their result is not finite. NNX modules among
    the arguments are used as they are and not changed. It costs a few times one
    un-jitted call of the function; nothing is paid by the function's other calls.

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
