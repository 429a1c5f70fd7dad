"""Where each op of one side of a diff comes from in the user's source: one table per side.

`_diff_parts` and `_diff_fused` tell which lowered op an optimized op stands for by
``op_name`` and source place, and `places_agree` first asks whether the optimized
places say anything of the lowered ones. Each reads places many times (every lowered
op for the evidence, every op a candidate, every instruction of every fusion), so a
`Places` table computes each place once per side and is passed down: a stack frame's
place once per frame id, an op's (its own, else its nearest call's) once per node.

A place is the whole call stack of the instruction's stack frame, each frame as
``(file, function, line, end_line, column, end_column)`` (`HloModule.frame_places`: two
modules number their frames apart), else its source file and line, else ``()``.

    >>> from tpukit.graph._diff_groups import ProgramGroups
    >>> from tpukit.hlo import graph
    >>> lowered = jax.jit(lambda x: jnp.abs(x) * 2).lower(jnp.ones(8))
    >>> a = ProgramGroups(graph(lowered.as_text(dialect="hlo", debug_info=True)))
    >>> b = ProgramGroups(graph(lowered.compile().as_text()))
    >>> places_agree(Places(a), Places(b))  # one compile: its two stages share places
    True
    >>> Places(a, read=False).of(a.ops[0])  # a table told not to read places says none
    ()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tpukit.graph._diff_groups import ProgramGroups
    from tpukit.hlo.text import HloInstruction


class Places:
    """One side's source places, each computed once (module docstring).

    ``of(node)`` is where an op comes from: its own place, else its nearest call's
    (JAX names an op inside a called computation by the call's frame); ``own(instr)``
    an instruction's by its own metadata; ``every()`` the set of every instruction's
    own place. ``read=False``: places are not to be compared (`places_agree` said the
    optimized ones are stale), so every place is ``()``.
    """

    def __init__(self, side: ProgramGroups, *, read: bool = True) -> None:
        self.side = side
        self.read = read
        self._frames: dict[int | tuple[str, int], tuple] = {}  # frame id, (file, line)
        self._nodes: dict[int, tuple] = {}

    def own(self, instr: HloInstruction) -> tuple:
        """Where ``instr`` comes from by its own metadata, or ``()`` (also when this
        table does not read places).

        A frame that starts at column 0 is kept without its end column: JAX's HLO text
        of a lowered module writes ``end_column=0`` for it where XLA's compiled module
        keeps the real one (a bare ``main()`` at a script's top, a pytest-xdist worker's
        ``<string>`` frame), and a whole stack compared with it would differ from every
        optimized one.
        """
        if not self.read:
            return ()
        meta = instr.metadata
        frames = self.side.data.module.frame_places
        if meta.stack_frame_id and meta.stack_frame_id in frames:
            found = self._frames.get(meta.stack_frame_id)
            if found is None:
                found = self._frames[meta.stack_frame_id] = tuple(
                    (*frame[:5], "") if len(frame) == 6 and frame[4] == "0" else frame
                    for frame in frames[meta.stack_frame_id]
                )
            return found
        if meta.source_file:
            key = (meta.source_file, meta.source_line)
            found = self._frames.get(key)
            if found is None:
                found = self._frames[key] = ((meta.source_file, "", str(meta.source_line)),)
            return found
        return ()

    def of(self, node: int) -> tuple:
        """Where the op ``node`` comes from: its own place, else its nearest call's;
        ``()`` when nothing says or this table does not read places."""
        if not self.read:
            return ()
        found = self._nodes.get(node)
        if found is None:
            found = self._nodes[node] = self._find(node)
        return found

    def _find(self, node: int) -> tuple:
        data = self.side.data
        while node > 0:
            instr = data.instr[node]
            found = self.own(instr) if instr is not None else ()
            if found:
                return found
            node = data.parent[node]
            while node > 0 and (data.instr[node] is None or data.instr[node].opcode != "call"):
                node = data.parent[node]
        return ()

    def every(self) -> set[tuple]:
        """The own place of every instruction of the module that has one."""
        return {self.own(instr) for instr in self.side.data.module.instructions()} - {()}


def places_agree(a: Places, b: Places) -> bool:
    """Whether the source places of ``b`` say anything of ``a``'s: some instruction of
    each comes from one place, or one side says none.

    JAX's persistent compilation cache keys a program without its source places, so a
    program compiled again from another line (an edited cell, another caller) is served
    the executable of the first compile, whose metadata names the first compile's
    places: then no optimized place is a lowered one, and places must not decide which
    op is which (`_diff_parts.find_parts`, `_diff_fused.find_fused` then go by
    ``op_name`` alone)."""
    found = a.every(), b.every()
    return not found[0] or not found[1] or bool(found[0] & found[1])
