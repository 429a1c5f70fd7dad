"""Source places in the diff of lowered against optimized: read when they can be, left
unread (and said so) when the optimized program's places are not the lowered one's.

The diff finds the ops XLA fused (`tpukit.graph._diff_fused`) and split
(`tpukit.graph._diff_parts`) by ``op_name`` and source place. Two things make the places
of one program's two stages differ: JAX's HLO text of a lowered module drops the end
column of a frame that starts at column 0, and JAX's persistent compile cache serves a
program compiled again from another line with the first compile's executable, whose
metadata keeps the first compile's places.
"""

import jax
import jax.numpy as jnp
import pytest
from jax.experimental.compilation_cache import compilation_cache

import tpukit
from tpukit.graph._diff_view import diff_graph

# jax.config values that tpukit.enable_compile_cache sets, put back after each test.
_CACHE_CONFIG = (
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_persistent_cache_min_entry_size_bytes",
)


def _stages(lowered) -> tuple[str, str]:
    """The lowered text (with op_names and places, as a dump has them) and the optimized."""
    return lowered.as_text(dialect="hlo", debug_info=True), lowered.compile().as_text()


def test_a_frame_at_column_zero_does_not_make_every_place_differ():
    # a bare call at column 0 of the outermost frame (a script's ``main()``, the
    # ``<string>`` frame of a pytest-xdist worker): the lowered text says end_column=0
    namespace = {"jax": jax, "jnp": jnp}
    source = (
        "def make():\n"
        "    global lowered\n"
        "    lowered = jax.jit(lambda x: jnp.abs(x) * 3 + 2).lower(jnp.ones(5))\n"
        "make()\n"
    )
    exec(compile(source, "<string>", "exec"), namespace)
    view = diff_graph(*_stages(namespace["lowered"]), labels=("lowered", "optimized"))
    assert view.ops_removed == []
    assert sorted(view.fused_ops) == ["abs.1", "broadcast.2", "broadcast.3", "mul.1"]
    assert not view.places_unread
    assert "persistent compile cache" not in repr(view)


def test_a_compile_served_from_the_persistent_cache_is_matched_without_its_stale_places(
    tmp_path,
):
    before = {name: jax.config.values[name] for name in _CACHE_CONFIG}
    tpukit.enable_compile_cache(tmp_path)
    try:
        jax.jit(lambda x: jnp.abs(x) * 4 - 1).lower(jnp.ones(6)).compile()  # stored
        again = jax.jit(lambda x: jnp.abs(x) * 4 - 1).lower(jnp.ones(6))  # another line
        lowered, optimized = _stages(again)  # served the first compile's executable
    finally:
        for name, value in before.items():
            jax.config.update(name, value)
        compilation_cache.reset_cache()
    stored = set(tmp_path.iterdir())
    assert stored  # the cache held the first compile
    jax.jit(lambda x: jnp.abs(x) * 4 - 1).lower(jnp.ones(7)).compile()
    assert set(tmp_path.iterdir()) == stored  # and is off again: nothing more stored
    view = diff_graph(lowered, optimized, labels=("lowered", "optimized"))
    assert view.ops_removed == []
    assert view.places_unread
    note = "No source place of optimized is one of lowered"
    assert note in repr(view)
    assert note in view._repr_html_()
    assert "found by op_name and data flow alone" in repr(view)


# One program, compiled twice from one line; between the two, the helper's lines moved.
_HELPER_BELOW = "def f(x):\n    return g(x) - 1\ndef g(x):\n    return jnp.abs(x) * 4\n"
_HELPER_MOVED = (
    "def f(x):\n    return g(x) - 1\ndef g(x):\n    # one line down\n    return jnp.abs(x) * 4\n"
)


def _compile_cell(source: str) -> tpukit.Compiled:
    """``f`` of ``source`` (a notebook cell run again), compiled by tpukit for f32[9]."""
    namespace = {"jnp": jnp}
    exec(compile(source, "<cell>", "exec"), namespace)
    return tpukit.compile(namespace["f"], tpukit.shape("f32[9]"))


def test_a_compile_the_ledger_saw_come_from_the_cache_is_matched_without_its_places(tmp_path):
    # the second compile is served the first's executable: its ``abs`` and ``mul`` keep
    # g's old lines, while f's ``sub`` keeps its place, so some places still agree and
    # the places alone would leave mul.1 and its constant's broadcast removed
    before = {name: jax.config.values[name] for name in _CACHE_CONFIG}
    tpukit.enable_compile_cache(tmp_path)
    try:
        first, again = (_compile_cell(source) for source in (_HELPER_BELOW, _HELPER_MOVED))
    finally:
        for name, value in before.items():
            jax.config.update(name, value)
        compilation_cache.reset_cache()
    assert not first.from_cache and again.from_cache
    d = tpukit.diff(again, again, stage=("lowered", "optimized"))
    assert d.labels == ("lowered", "optimized") and d.stage == "lowered vs optimized"
    view = d.graph()
    assert view.ops_removed == []
    assert {"mul.1", "broadcast.3"} <= set(view.fused_ops)
    assert view.places_unread and view.from_cache
    note = "persistent compile cache, whose programs keep the source places"  # after "JAX's"
    assert f"optimized came from JAX's {note}" in repr(view) and note in view._repr_html_()
    # the first compile stored it and read its own places: nothing to say
    own = tpukit.diff(first, first, stage=("lowered", "optimized")).graph()
    assert not own.places_unread and "persistent compile cache" not in repr(own)
    with pytest.raises(tpukit.ArgumentError, match="a pair of them"):
        tpukit.diff(first, first, stage=("lowered",))
