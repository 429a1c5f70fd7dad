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
