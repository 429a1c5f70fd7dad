"""``python -m tpukit doctor``: check that tpukit works here, the way the tutorial uses it.

Each step runs what ``notebooks/01_mnist_mlp.ipynb`` runs, at a small size: the
requirements (read from tpukit's installed metadata), the devices, a zoo model, a
compile of the model's forward pass checked against plain JAX, a short ``fit`` on the
bundled MNIST sample with a checkpoint, a resume from that checkpoint, and the HLO
graph of a training step. "tpukit works" is printed only when every step passed;
otherwise the failing step, its error and the next thing to do. The installers
(``install/install.sh``, ``install/install_tpukit.ipynb``) end with this check.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

_REPORT = "See the error above; run `python -m tpukit doctor` again after fixing it."


class _StepFailed(Exception):
    """A check found a wrong result (not a crash); the message says what."""


def _requirements(state: dict[str, Any]) -> str:
    import jax

    from tpukit import _install

    required = _install.requirements()
    installed = _install.installed_versions([r.name for r in required])
    hardware = _install.detect_hardware()
    rows = _install.plan(required, installed, hardware, jax.default_backend())
    unmet = [r for r in rows if r.action != "kept"]
    if unmet:
        row = unmet[0]
        state["fix"] = row.advice or (
            f'run: {sys.executable} -m pip install "{row.requirement}" (or the installer: '
            "install/install_tpukit.ipynb, install/install.sh), then restart the kernel"
        )
        raise _StepFailed(f"{row.requirement} is not met: {row.installed or 'not installed'}")
    return ", ".join(f"{r.name} {r.installed}" for r in rows)


def _devices(state: dict[str, Any]) -> str:
    import jax

    devices = jax.devices()
    state["device"] = f"{len(devices)} {devices[0].device_kind} device" + (
        "s" if len(devices) > 1 else ""
    )
    return f"{state['device']} ({jax.default_backend()})"


def _zoo(state: dict[str, Any]) -> str:
    import tpukit

    state["model"] = model = tpukit.zoo.create("mlp", seed=0)
    return f"mlp, {tpukit.zoo.count_params(model):,} parameters"


def _compile(state: dict[str, Any]) -> str:
    import numpy as np

    import tpukit

    model = state["model"]
    x, _ = tpukit.datasets.mnist("test", source="sample")
    batch = tpukit.put(x[:128])

    def predict(model, x):
        return model(x)

    compiled = tpukit.compile(predict, model, tpukit.shape("f32[128,784]"))
    got = np.asarray(tpukit.fetch(compiled(model, batch)))
    expected = np.asarray(model(batch))
    if not np.allclose(got, expected, rtol=2e-2, atol=2e-2):
        raise _StepFailed(
            f"the compiled forward pass differs from plain JAX by up to "
            f"{np.abs(got - expected).max():.3g}"
        )
    return f"predict(model, f32[128,784]) in {compiled.compile_seconds:.1f} s, matches plain JAX"


def _fit(state: dict[str, Any]) -> str:
    import optax

    import tpukit

    x, y = tpukit.datasets.mnist("train", source="sample")
    state["data"] = data = (x[:1024], y[:1024])
    state["checkpoints"] = folder = tempfile.mkdtemp(prefix="tpukit-doctor-")
    history = tpukit.fit(
        state["model"],
        optax.adam(1e-3),
        data,
        epochs=2,
        batch_size=128,
        checkpoint_dir=folder,
        verbose=False,
    )
    losses = history["loss"]
    if history.stopped or not losses[-1] < losses[0]:
        raise _StepFailed(f"training did not learn: losses {losses}, stopped: {history.stopped}")
    steps = sum(e["steps"] for e in history.epochs)
    return (
        f"{steps} Adam steps on the bundled MNIST sample, loss {losses[0]:.2f} -> {losses[-1]:.2f}"
    )


def _checkpoint(state: dict[str, Any]) -> str:
    import jax
    import numpy as np
    import optax
    from flax import nnx

    import tpukit

    restored = tpukit.zoo.create("mlp", seed=1)
    tpukit.fit(
        restored,
        optax.adam(1e-3),
        state["data"],
        epochs=2,
        batch_size=128,
        checkpoint_dir=state["checkpoints"],
        resume=True,
        verbose=False,
    )
    trained = jax.tree.leaves(nnx.state(state["model"], nnx.Param))
    again = jax.tree.leaves(nnx.state(restored, nnx.Param))
    if not all(np.array_equal(a, b) for a, b in zip(trained, again)):
        raise _StepFailed("a model resumed from the checkpoint has different weights")
    return "a new model resumed from the checkpoint has the trained weights"


def _graph(state: dict[str, Any]) -> str:
    import optax
    from flax import nnx

    import tpukit

    model, optimizer = state["model"], optax.adam(1e-3)

    def train_step(model, opt_state, x, y):
        def loss(model):
            return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()

        value, grads = nnx.value_and_grad(loss)(model)
        params = nnx.state(model, nnx.Param)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        nnx.update(model, optax.apply_updates(params, updates))
        return value, model, opt_state

    opt_state = optimizer.init(nnx.state(model, nnx.Param))
    shapes = tpukit.shape("f32[128,784]"), tpukit.shape("s32[128]")
    graph = tpukit.compile(train_step, model, opt_state, *shapes).graph()
    html = graph._repr_html_()
    if graph.num_instructions == 0 or "tpukitGraphView" not in html:
        raise _StepFailed("the HLO graph came out empty")
    return f"train_step: {graph.num_instructions:,} instructions, {len(html) // 1024:,} KiB of HTML"


# (name, check, what to do when it fails)
STEPS: list[tuple[str, Callable[[dict[str, Any]], str], str]] = [
    (
        "requirements",
        _requirements,
        "run install/install_tpukit.ipynb (or install/install.sh) again",
    ),
    (
        "devices",
        _devices,
        "run `python -m tpukit info`; on Colab pick a TPU or GPU runtime and restart",
    ),
    ("zoo", _zoo, _REPORT),
    ("compile", _compile, _REPORT),
    ("fit", _fit, _REPORT),
    ("checkpoint", _checkpoint, "check that the temporary folder is writable; " + _REPORT),
    ("graph", _graph, _REPORT),
]


def doctor(out: Any = None) -> bool:
    """Run every step, print one line each, and say whether tpukit works.

    Returns True when every step passed. Example::

        >>> import tpukit._doctor
        >>> tpukit._doctor.doctor()
        tpukit doctor: tpukit ... from .../tpukit
          requirements  ok  jax ..., flax ...
          ...
        tpukit works: ...
        True
    """
    out = out or sys.stdout
    import tpukit

    where = os.path.dirname(tpukit.__file__)
    print(f"tpukit doctor: tpukit {tpukit.__version__} from {where}", file=out, flush=True)
    state: dict[str, Any] = {}
    for name, check, fix in STEPS:
        start = time.perf_counter()
        try:
            detail = check(state)
        except Exception as exc:  # every failure is reported, none is fatal to the report
            if not isinstance(exc, _StepFailed):
                traceback.print_exc()
            print(f"  {name:<13} FAILED  {type(exc).__name__}: {exc}", file=out)
            print(f"tpukit does not work yet: the {name} check failed.", file=out)
            print(f"next: {state.get('fix', fix)}", file=out, flush=True)
            return False
        seconds = time.perf_counter() - start
        print(f"  {name:<13} ok  {detail} [{seconds:.1f} s]", file=out, flush=True)
    import jax

    print(
        f"tpukit works: a zoo model compiled, trained, checkpointed and drawn on "
        f"{state['device']} (JAX {jax.__version__}, {jax.default_backend()}).",
        file=out,
        flush=True,
    )
    return True
