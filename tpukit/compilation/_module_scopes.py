"""The model's structure in the program: each NNX module call traced under a name scope.

Flax NNX puts no module path into the ops it traces, so XLA's HLO says
``jit(step)/jvp()/dot_general`` where the user thinks ``layers[0]``. Inside
`module_scopes`, every call of an NNX module runs under ``jax.named_scope`` of its
path and class (``layers[0] (Linear)``, ``layer2[1].conv1 (Conv)``; a model passed
as an argument is ``model (MLP)`` after the argument's name). JAX writes the scope
into every op's ``op_name`` metadata and XLA keeps it through optimisation, so the
graph (``tpukit.hlo``) groups the program by layer, forward and backward alike
(``transpose(jvp(model (MLP)))/layers[0] (Linear)/dot_general``).

It works by wrapping ``__call__`` of the module classes found in the given trees for
the duration of the block, and finds each module's path when it is first called:

* modules passed in (the arguments of the traced function) have their paths from
  their argument's name;
* a module met for the first time (the copy ``nnx.merge`` makes inside
  ``nnx.grad``) is named after the one registered module of its class, and its
  submodules after it; with no unique match, after its class;
* a call inside a call nests its scope; ``super().__call__`` adds none.

    >>> from flax import nnx
    >>> from tpukit import zoo
    >>> model = zoo.create("mlp")
    >>> graphdef, state = nnx.split(model)
    >>> def forward(state, x):
    ...     return nnx.merge(graphdef, state)(x)
    >>> with module_scopes(model=model):
    ...     lowered = jax.jit(forward).lower(state, jnp.ones((2, 784)))
    >>> 'op_name="jit(forward)/model (MLP)/layers[0] (Linear)/dot_general"' in lowered.as_text(
    ...     dialect="hlo", debug_info=True)
    True

``tpukit.compile`` traces every function this way; a training loop calls
``with module_scopes(model):`` inside the step function it traces.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jax
from flax import nnx

from tpukit._compat import iter_modules

_lock = threading.Lock()
_local = threading.local()  # .stack: the registries of the blocks open in this thread
_patched: dict[type, tuple[Any, int]] = {}  # class -> (its own __call__ or None, users)


@contextlib.contextmanager
def module_scopes(*trees: Any, **named_trees: Any) -> Iterator[None]:
    """Trace every call of the NNX modules in ``trees`` under a name scope of its path.

    Args:
      *trees: modules, or pytrees holding modules; each root module is called
        ``model`` (``model (MLP)``) and its submodules by their paths
        (``layers[0] (Linear)``).
      **named_trees: the same, each root named after its keyword (``self`` reads
        ``model``): the arguments of a traced function by parameter name.

    Other values (arrays, optimizer state, numbers) are ignored, so the arguments of
    a function may be passed as they are. Classes are restored when the block ends,
    also on an error; blocks may nest.

    Example::

        >>> def step(state, x):
        ...     model = nnx.merge(graphdef, state)
        ...     with module_scopes(model):
        ...         return model(x)
        >>> "layers[1] (Linear)" in jax.jit(step).lower(state, jnp.ones((2, 784))).as_text(
        ...     dialect="hlo", debug_info=True)
        True
    """
    registry = _Registry()
    roots = [("model", tree) for tree in trees] + list(named_trees.items())
    classes: set[type] = set()
    for name, tree in roots:
        for root_name, module in _modules_in(name, tree):
            registry.register(module, "model" if root_name == "self" else root_name, ())
            classes.update(type(m) for _, m in iter_modules(module))
    classes = {cls for cls in classes if _own_call(cls) is not None}
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    _patch(classes)
    stack.append(registry)
    try:
        yield
    finally:
        stack.pop()
        _unpatch(classes)


class _Registry:
    """Paths of the modules seen in one block: by object id, and by class for copies."""

    def __init__(self) -> None:
        self.paths: dict[int, tuple[str, tuple[Any, ...]]] = {}
        self.by_class: dict[type, set[tuple[str, tuple[Any, ...]]]] = {}
        self.alive: list[Any] = []  # ids stay unique while the block holds the objects
        self.running: list[Any] = []

    def register(self, module: Any, root: str, prefix: tuple[Any, ...]) -> None:
        for path, sub in iter_modules(module):
            if id(sub) in self.paths:
                continue
            entry = (root, prefix + tuple(path))
            self.paths[id(sub)] = entry
            self.alive.append(sub)
            self.by_class.setdefault(type(sub), set()).add(entry)

    def scope(self, module: Any) -> str:
        entry = self.paths.get(id(module))
        if entry is None:  # a copy made while tracing: named after its original if unique
            seen = self.by_class.get(type(module), set())
            root, prefix = next(iter(seen)) if len(seen) == 1 else ("", ())
            self.register(module, root, prefix)
            entry = self.paths[id(module)]
        root, path = entry
        name = type(module).__name__
        where = path_text(path) or root
        return f"{where} ({name})".replace("/", "|") if where else name


def path_text(path: tuple[Any, ...]) -> str:
    """A module path as Python would write it: ``('layer2', 1, 'conv1')`` -> ``layer2[1].conv1``."""
    text = ""
    for key in path:
        key = getattr(key, "key", getattr(key, "idx", key))  # jax key-path entries
        if isinstance(key, int):
            text += f"[{key}]"
        elif isinstance(key, str) and key.isidentifier():
            text += f".{key}" if text else key
        else:
            text += f"[{key!r}]"
    return text


def _modules_in(name: str, tree: Any) -> Iterator[tuple[str, Any]]:
    """``(root name, module)`` for each outermost NNX module in a pytree."""
    if isinstance(tree, nnx.Module):
        yield name, tree
        return
    try:
        leaves = jax.tree_util.tree_flatten_with_path(
            tree, is_leaf=lambda x: isinstance(x, nnx.Module)
        )[0]
    except Exception:  # not a pytree JAX can walk: nothing to name
        return
    for key_path, leaf in leaves:
        if isinstance(leaf, nnx.Module):
            yield name + jax.tree_util.keystr(key_path), leaf


def _own_call(cls: type) -> Callable[..., Any] | None:
    """The ``__call__`` instances of ``cls`` run, or None if they cannot be called."""
    for klass in cls.__mro__:
        if "__call__" in klass.__dict__:
            return klass.__dict__["__call__"]
    return None


def _patch(classes: set[type]) -> None:
    with _lock:
        for cls in classes:
            if cls in _patched:
                own, users = _patched[cls]
                _patched[cls] = (own, users + 1)
                continue
            _patched[cls] = (cls.__dict__.get("__call__"), 1)
            cls.__call__ = _scoped(_own_call(cls))


def _unpatch(classes: set[type]) -> None:
    with _lock:
        for cls in classes:
            own, users = _patched[cls]
            if users > 1:
                _patched[cls] = (own, users - 1)
                continue
            del _patched[cls]
            if own is None:
                del cls.__call__
            else:
                cls.__call__ = own


def _scoped(call: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(call)
    def scoped_call(self, *args, **kwargs):
        stack = getattr(_local, "stack", None)
        if not stack:  # another thread, or outside any block
            return call(self, *args, **kwargs)
        registry = stack[-1]
        if registry.running and registry.running[-1] is self:  # super().__call__, or a subclass
            return call(self, *args, **kwargs)
        with jax.named_scope(registry.scope(self)):
            registry.running.append(self)
            try:
                return call(self, *args, **kwargs)
            finally:
                registry.running.pop()

    return scoped_call
