"""The compile ledger, used the way a notebook uses it: cells run by a real InteractiveShell
compile, compile again for a reason, and the ledger, the cell's line and the guard say why."""

import jax
import pytest
from IPython.core.error import UsageError

import tpukit

_reported: list[tuple[str, str, float]] = []  # (event, fun_name, seconds) from jax.monitoring


def _listen(event, seconds, **kwargs):
    if event.startswith("/jax/core/compile/"):
        _reported.append((event, kwargs.get("fun_name", ""), seconds))


jax.monitoring.register_event_duration_secs_listener(_listen)


def run(shell, code):
    result = shell.run_cell(code, store_history=True)
    assert result.success, result.error_in_exec
    return result


def recompiles(mark, function):
    return [r for r in tpukit.compiles(function, since=mark) if r.recompile]


@pytest.fixture
def mark():
    return tpukit.compiles().end


DEFINE_SCALE = """
@jax.jit
def scale(x, y):
    return x * y
"""


def test_new_shape_is_named_with_the_advice_and_the_cell_prints_one_line(shell, mark, capsys):
    run(shell, DEFINE_SCALE)
    run(shell, "a = jnp.ones(2, jnp.float32); b = jnp.ones(3, jnp.float32)")
    run(shell, "scale(a, 2.0)")
    assert "tpukit:" not in capsys.readouterr().out  # a first compile says nothing
    run(shell, "scale(b, 2.0)")
    out = capsys.readouterr().out
    (again,) = recompiles(mark, "scale")
    assert [c.kind for c in again.changes] == ["shape"]
    assert again.reason == "x: shape f32[2] -> f32[3]"
    assert "pad to a few sizes" in again.advice
    assert again.signature == "x: f32[3], y: f32[] weak"
    assert again.call_site.startswith("In [") and again.cell is not None
    lines = [line for line in out.splitlines() if line.startswith("tpukit:")]
    assert len(lines) == 1, out
    assert "scale compiled again" in lines[0] and "x: shape f32[2] -> f32[3]" in lines[0]
    run(shell, "scale(b, 3.0)")  # a new value of a traced scalar compiles nothing
    assert "compiled again" not in capsys.readouterr().out


def test_dtype_weak_type_static_and_pytree_changes(shell, mark):
    run(shell, "@jax.jit\ndef times(x, y):\n    return x * y\n")
    run(shell, "a = jnp.ones(2, jnp.float32)")
    run(shell, "times(a, 2.0)")
    run(shell, "times(a.astype(jnp.int32), 2.0)")
    run(shell, "times(a, jnp.float32(2.0))")
    reasons = [r.reason for r in recompiles(mark, "times")]
    assert reasons == [
        "x: dtype f32 -> s32",
        "y: weakly typed (a Python number) -> an array (f32)",
    ]
    run(
        shell,
        "from functools import partial\n"
        "@partial(jax.jit, static_argnames='n')\n"
        "def power(x, n):\n    return x ** n\n"
        "power(a, n=2); power(a, n=3)",
    )
    (static,) = recompiles(mark, "power")
    assert static.reason == "n: static value 2 -> 3" and static.changes[0].kind == "static"
    run(
        shell,
        "@jax.jit\ndef total(tree):\n    return sum(jax.tree_util.tree_leaves(tree))\n"
        "total({'w': a}); total({'w': a, 'b': a})",
    )
    (tree,) = recompiles(mark, "total")
    assert tree.changes[0].kind == "structure"
    assert tree.reason == "tree: pytree structure changed (added tree['b'])"


def test_a_re_run_cell_makes_a_new_function_object(shell, mark, capsys):
    run(shell, DEFINE_SCALE)
    first = shell.execution_count - 1
    run(shell, "scale(jnp.ones(4), 2.0)")
    run(shell, DEFINE_SCALE)  # the same cell again
    run(shell, "scale(jnp.ones(4), 2.0)")
    out = capsys.readouterr().out
    again = recompiles(mark, "scale")[-1]
    assert [c.kind for c in again.changes] == ["function"]
    assert f"(before: In [{first}], line 2)" in again.reason
    assert "scale was defined again" in again.reason
    assert "define the function and its jit in a cell you run once" in again.advice
    assert "scale was defined again" in out


def test_nnx_jit_is_named_by_the_users_function_and_its_module_arguments(shell, mark):
    run(
        shell,
        "from flax import nnx\n"
        "layer = nnx.Linear(2, 3, rngs=nnx.Rngs(0))\n"
        "@nnx.jit\ndef forward(model, x):\n    return model(x)\n",
    )
    run(shell, "forward(layer, jnp.ones((1, 2)))")
    run(shell, "forward(layer, jnp.ones((4, 2)))")
    records = tpukit.compiles("forward", since=mark)
    assert [r.kind for r in records] == ["jit", "jit"]
    assert "model.kernel" in records[0].signature or "model" in records[0].signature
    assert records[1].reason == "x: shape f32[1,2] -> f32[4,2]"


def test_the_ledgers_seconds_are_what_jax_monitoring_reported(shell, mark):
    start = len(_reported)
    run(shell, "@jax.jit\ndef cube(x):\n    return x * x * x\ncube(jnp.ones(5))")
    reported = {
        event.rsplit("/", 1)[1]: s for event, name, s in _reported[start:] if "cube" in name
    }
    (record,) = tpukit.compiles("cube", since=mark)
    assert record.trace_seconds == reported["jaxpr_trace_duration"]
    assert record.lower_seconds == reported["jaxpr_to_mlir_module_duration"]
    assert record.compile_seconds == reported["backend_compile_duration"]
    assert record.seconds == pytest.approx(sum(reported.values()))
    assert record.cache_hit is None  # no persistent cache in this session


def test_no_recompile_raises_on_the_second_shape_naming_the_function(shell, mark):
    run(shell, DEFINE_SCALE)
    result = shell.run_cell(
        "import tpukit\nwith tpukit.no_recompile() as guard:\n"
        "    scale(jnp.ones(6), 2.0)\n"  # a first compile is allowed
        "    scale(jnp.ones(7), 2.0)\n",
        store_history=True,
    )
    error = result.error_in_exec
    assert isinstance(error, tpukit.RecompileError) and isinstance(error, tpukit.TpukitError)
    assert "scale compiled again inside tpukit.no_recompile()" in str(error)
    assert "x: shape f32[6] -> f32[7]" in str(error) and "pad to a few sizes" in str(error)
    guard = shell.user_ns["guard"]
    assert [r.function for r in guard.compiles if r.kind == "jit"] == ["scale", "scale"]
    run(shell, "scale(jnp.ones(7), 2.0)")  # outside the block the same call compiles


def test_the_magic_filters_and_shows_html_and_text(shell, mark, capsys):
    run(shell, DEFINE_SCALE)
    run(shell, "scale(jnp.ones(8), 2.0); scale(jnp.ones(9), 2.0)")
    result = run(shell, "%tpu_compiles scale --recompiles --no-ops")
    shown = result.result
    assert isinstance(shown, tpukit.Compiles) and len(shown) >= 1
    assert all(r.recompile and r.function == "scale" for r in shown)
    text, html = repr(shown), shown._repr_html_()
    assert "by call site" in text and "x: shape f32[8] -> f32[9]" in text
    assert "<table" in html and "x: shape f32[8] -&gt; f32[9]" in html
    sites = shown.by_call_site()
    assert sites[0].function == "scale" and sites[0].recompiles == sites[0].compiles
    for bad in ("%tpu_compiles --cell x", "%tpu_compiles --notices maybe", "%tpu_compiles a b"):
        result = shell.run_cell(bad, store_history=False)
        assert isinstance(result.error_in_exec, UsageError), bad


def test_notices_can_be_turned_off(shell, mark, capsys):
    run(shell, DEFINE_SCALE)
    run(shell, "%tpu_compiles --notices off")
    try:
        run(shell, "scale(jnp.ones(10), 2.0); scale(jnp.ones(11), 2.0)")
        assert "compiled again" not in capsys.readouterr().out
    finally:
        run(shell, "%tpu_compiles --notices on")
    assert recompiles(mark, "scale")


_probe = jax.jit(lambda v: v.sum())


def test_fit_says_when_a_call_inside_its_epochs_compiled(capsys, tmp_path):
    """...and says nothing of tpukit's own compiles: the checkpoint's checksums at the first
    save, evaluate's run at another batch size than fit's evaluation (a cell printed
    "_summaries" and "run compiled again ... a new run function object" before)."""
    import numpy as np
    import optax
    from flax import nnx

    model = nnx.Sequential(
        nnx.Linear(4, 8, rngs=nnx.Rngs(0)), nnx.relu, nnx.Linear(8, 2, rngs=nnx.Rngs(1))
    )
    x = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32)
    start = tpukit.compiles().end
    tpukit.fit(
        model,
        optax.sgd(0.1),
        (x, y),
        epochs=2,
        batch_size=16,
        eval_data=(x, y),
        checkpoint_dir=tmp_path / "run",
    )
    tpukit.evaluate(model, (x, y), batch_size=32)
    out = capsys.readouterr().out
    assert "inside the epochs" not in out, out
    made = tpukit.compiles(since=start)
    assert made.notices() == [], made.notices()  # what the cell prints after it
    runs = [r for r in made if r.function == "run"]  # fit's evaluation, then evaluate's
    assert len(runs) == 2 and all(r.internal and not r.recompile for r in runs)
    # one compile of fit's step
    assert len(tpukit.compiles("fit_step", since=start)) == 1
    # another batch size: another step program, compiled in its first call, as it must;
    # a first compile of a program tpukit built, not a recompile of the first one
    tpukit.fit(model, optax.sgd(0.1), (x, y), epochs=2, batch_size=32)
    out = capsys.readouterr().out
    assert "inside the epochs" not in out, out
    second = tpukit.compiles("fit_step", since=start)
    assert len(second) == 2 and second[-1].internal and not second[-1].recompile

    def compiles_each_epoch(record):  # a new shape each epoch: a compile after the first
        _probe(jnp.ones(record["epoch"]))

    import jax.numpy as jnp

    tpukit.fit(
        model, optax.sgd(0.1), (x, y), epochs=2, batch_size=16, callbacks=[compiles_each_epoch]
    )
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "inside the epochs" in line)
    assert "tpukit.fit: 1 compile inside the epochs after the first call" in line
    assert "v: shape f32[1] -> f32[2]" in line


def test_a_persistent_cache_hit_is_marked_and_is_not_a_recompile_for_the_guard(tmp_path):
    from jax.experimental.compilation_cache import compilation_cache

    names = (
        "jax_compilation_cache_dir",
        "jax_persistent_cache_min_compile_time_secs",
        "jax_persistent_cache_min_entry_size_bytes",
    )
    before = {name: jax.config.values[name] for name in names}
    tpukit.enable_compile_cache(tmp_path)

    def make():
        @jax.jit
        def cached_square(x):
            return x * x

        return cached_square

    try:
        start = tpukit.compiles().end
        x = jax.numpy.ones(3)
        make()(x)  # compiled and written to the cache
        with tpukit.no_recompile():
            make()(x)  # a new function object: traced again, but XLA's work is read back
    finally:
        for name, value in before.items():
            jax.config.update(name, value)
        compilation_cache.reset_cache()
    first, second = tpukit.compiles("cached_square", since=start)
    assert (first.cache_hit, second.cache_hit) == (False, True)
    assert second.recompile and second.changes[0].kind == "function"
    assert "from the persistent cache" in repr(tpukit.compiles("cached_square", since=start))


def test_a_function_with_a_pure_callback_is_in_the_ledger_with_its_reason(mark):
    import numpy as np

    @jax.jit
    def with_callback(x):
        shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
        return jax.pure_callback(lambda v: np.asarray(v) * 2, shape, x)

    with_callback(jax.numpy.ones(2))
    with_callback(jax.numpy.ones(3))
    first, second = tpukit.compiles("with_callback", since=mark)
    assert not first.recompile and second.reason == "x: shape f32[2] -> f32[3]"


def test_tpu_compile_timing_shows_where_the_compile_time_went(shell, capsys):
    run(
        shell,
        "def smooth(x):\n    for _ in range(3):\n        x = jnp.tanh(x @ x.T)\n    return x.sum()",
    )
    run(shell, "%tpu_compile --quiet --timing smooth(f32[16,8])")
    out = capsys.readouterr().out
    assert "Compile of smooth" in out and "XLA: code generation" in out, out
    compiled = shell.user_ns["smooth_compiled"]
    record = compiled.compile_record
    assert record.function == "smooth" and record.explicit and record.trace_seconds > 0
    phases = compiled.compile_phases()
    assert phases is compiled.compile_phases()  # measured once, by the magic
    xla = sum(seconds for _, seconds in phases.phases)
    assert xla == pytest.approx(phases.xla_seconds)  # XLA's phases add up to its compile
    names = [name for name, _ in phases.phases]
    assert "HLO passes: other" in names and "code generation" in names
    assert phases.passes and all(seconds > 0 for _, seconds, _ in phases.passes)
    assert phases.lower_seconds == record.lower_seconds
    (busiest, instructions), *_ = phases.lines  # the loop's line, three times over
    assert busiest.endswith("line 3") and instructions >= 3 * 2, phases.lines


def test_compiles_inside_a_trace_are_counted_once():
    helper = jax.jit(lambda v: v * 3)

    @jax.jit
    def outer(x):
        with jax.ensure_compile_time_eval():  # runs (so compiles) helper while outer traces
            constant = helper(jax.numpy.arange(3.0)).sum()
        return x + constant

    x = jax.numpy.ones(2)
    start = tpukit.compiles().end
    outer(x)
    records = tpukit.compiles(since=start)
    (record,) = records.filter("outer")
    inside = [r for r in records if r.number < record.number]
    assert any(r.function == "<lambda>" for r in inside)
    assert record.inner_seconds == pytest.approx(sum(r.seconds for r in inside))
    gross = record.trace_seconds + record.lower_seconds + record.compile_seconds
    assert record.seconds == pytest.approx(gross - record.inner_seconds)
    assert records.seconds <= gross + 1e-9  # the helper's compile is not counted twice


def test_fits_step_names_its_arguments_by_their_place_in_the_state():
    """fit's step takes the state as flat leaves; the ledger's row names them as the model
    does (``state[0]['layers'][0]['kernel']``), not ``leaves[1]`` (what the tutorial's
    compiles table printed while the step's Calling named them for the memory view only)."""
    import numpy as np
    import optax
    from flax import nnx

    # shapes no other test trains on: a step JAX compiled before would not compile again
    model = nnx.Sequential(
        nnx.Linear(5, 11, rngs=nnx.Rngs(0)), nnx.relu, nnx.Linear(11, 3, rngs=nnx.Rngs(1))
    )
    x = np.random.default_rng(0).normal(size=(40, 5)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32)
    start = tpukit.compiles().end
    tpukit.fit(model, optax.sgd(0.1), (x, y), epochs=1, batch_size=8)
    (step,) = tpukit.compiles("fit_step", since=start)
    assert "leaves[" not in step.signature, step.signature
    assert "state[0]['layers'][0]['kernel'].value: f32[5,11]" in step.signature, step.signature
