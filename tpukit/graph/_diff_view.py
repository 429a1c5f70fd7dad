"""Two HLO programs side by side: their graphs, matched group by group, and what changed.

`diff_graph` draws the graphs of two modules (before and after a code change, f32 and
bf16, with and without a layer) next to each other and says, for every group of the
graph, what it costs in each program. Groups are matched by where they sit in the
user's terms, the same tree the single graph shows (`_user_scopes`): a training step's
sections, layers such as ``layers[0] (Linear)``, ``jax.named_scope``\\ s, loops and
calls, then the consecutive parts of big groups are looked through. A group only in
``b`` is *added*, only in ``a`` *removed*.

Fusions cannot be matched by name: XLA numbers them in the order it makes them, so
``ynn_fusion.2`` of one compile is ``ynn_fusion.4`` of the next. So each fusion (and
each other op that does work: a dot, a custom call, a collective) is matched by what it
is: the scope its ``op_name`` names, its kind (``kLoop``, ``kCustom``...), the ops at its
root and the heavy ops inside; among equals the same name, then program order, decides.
Those left over are added in ``b`` or removed from ``a`` and are highlighted in green and
red; a group whose cost or ops changed is amber (the matching: `_diff_match`)::

    view = diff_graph(before.hlo_module("optimized"), after.hlo_module("optimized"),
                      labels=("2 layers", "3 layers"))
    view                          # in a notebook: the table of groups above both graphs
    print(repr(view))             # in a terminal: the table of per-group deltas
    view.rows()[0]["flops_delta"] # the same table as data, for scripts

Nothing here imports JAX: the modules may come from dumps of another machine.
"""

from __future__ import annotations

import functools
import html
import os
import pathlib
from collections.abc import Mapping

from tpukit._errors import ArgumentError, UnknownNameError, user_facing
from tpukit.display import (
    Column,
    Row,
    Table,
    format_bytes,
    format_count,
    format_flops,
    format_seconds,
)
from tpukit.graph._diff_match import (
    ADDED,
    CHANGED,
    INLINED,
    REMOVED,
    SAME,
    GroupDiff,
    match_programs,
)
from tpukit.graph._graph_page import (
    DIFF,
    new_element_id,
    save_page,
    standalone_page,
    viewer_fragment,
)
from tpukit.graph._graph_view import HloGraph, graph
from tpukit.graph._graph_wire import encode_payload
from tpukit.hlo.analysis import fft_flops
from tpukit.hlo.text import HloModule

_TEXT_ROWS = 60  # rows `__repr__` prints before it elides
# The viewer's marks for an op of ``b`` that is a part of an op XLA split, and that op;
# for an op of ``a`` that XLA fused into an op of ``b``.
PART, SPLIT, FUSED = "part", "split", "fused"


class HloDiffView:
    """Two programs' graphs side by side, matched group by group (see `diff_graph`).

    ``groups`` lists a `GroupDiff` per group of either program, depth first;
    ``ops_added`` and ``ops_removed`` name the working ops only ``b`` or only ``a`` has;
    ``matched_ops`` maps each op of ``a`` to its match in ``b``; ``part_ops`` maps each op
    of ``b`` that is a part of an op XLA expanded into several (an ``fft`` into DFT
    matmuls: `_diff_parts`) to that op of ``a`` (to several when its ``op_name``, source
    and data flow name several: it is a part of one of them); ``fused_ops`` maps each op
    of ``a`` that XLA fused into an op of ``b`` (`_diff_fused`: an ``abs`` into
    ``fusion.3``) to that op (to several: into one of them, or copied into each). A call
    XLA inlined is a group of status ``"inlined"``, not removed. ``places_unread`` is true
    when none of ``b``'s source places is one of ``a``'s (a compile served from JAX's
    persistent cache), or when ``from_cache`` says ``b`` came from that cache (then its
    places may be stale even where some agree): parts and fused ops were then found
    without places, as a note under the table says. In a notebook the view
    shows the table of groups above the two graphs; ``print(repr(view))`` prints the
    table, ``rows()`` gives it as data, ``save(path)`` writes a standalone page.
    """

    def __init__(
        self, a: HloGraph, b: HloGraph, *, labels: tuple[str, str], from_cache: bool = False
    ) -> None:
        self.a, self.b = a, b
        self.labels = labels
        self.from_cache = from_cache
        match = match_programs(a, b, from_cache=from_cache)
        self._sides = side_a, side_b = match.sides
        self.groups: list[GroupDiff] = match.groups
        self._pairs, self._removed, self._added = match.pairs, match.removed, match.added
        self.matched_ops = {
            side_a.data.instr[x].name: side_b.data.instr[y].name for x, y in match.pairs.items()
        }
        self._parts = match.parts
        self.part_ops = {
            side_b.data.instr[y].name: [side_a.data.instr[x].name for x in wholes]
            for y, wholes in match.parts.items()
        }
        self._fused, self._copied = match.fused, match.copied
        self.fused_ops = {
            side_a.data.instr[x].name: [side_b.data.instr[y].name for y in holders]
            for x, holders in match.fused.items()
        }
        self.ops_removed = [side_a.data.instr[x].name for x in match.removed]
        self.ops_added = [side_b.data.instr[y].name for y in match.added]
        self.places_unread = match.places_unread

    @property
    def timed(self) -> bool:
        """Whether both programs carry measured times (then deltas of time are shown)."""
        return bool(self.a.times) and bool(self.b.times)

    def group(self, name: str) -> GroupDiff:
        """The group called ``name`` (``"forward › layers[0] (Linear)"``, ``"whole program"``)."""
        for group in self.groups:
            if group.name == name:
                return group
        known = ", ".join(g.name for g in self.groups[:12])
        raise UnknownNameError(
            f"no group {name!r}; groups are {known}{', ...' if len(self.groups) > 12 else ''}."
        )

    def rows(self) -> list[dict]:
        """The per-group table as plain records, for scripts (one dict per `GroupDiff`).

        Keys: ``group``, ``path``, ``status``, then ``flops_a``, ``flops_b``,
        ``flops_delta`` and the same for ``bytes``, ``instructions`` and ``time``, and
        ``ops_added``, ``ops_removed``.
        """
        records = []
        for g in self.groups:
            record: dict = {"group": g.name, "path": g.path, "status": g.status}
            for metric in ("flops", "bytes", "instructions", "time"):
                a, b = getattr(g, metric)
                record[f"{metric}_a"], record[f"{metric}_b"] = a, b
                record[f"{metric}_delta"] = g.delta(metric)
            record["ops_added"], record["ops_removed"] = g.ops_added, g.ops_removed
            records.append(record)
        return records

    def _counts(self) -> dict[str, int]:
        counts = dict.fromkeys((ADDED, REMOVED, INLINED, CHANGED, SAME), 0)
        for g in self.groups:
            counts[g.status] += 1
        return counts

    def _summary(self) -> str:
        c = self._counts()
        return (
            f"{len(self.groups)} groups: {c[ADDED]} added, {c[REMOVED]} removed, "
            + (f"{format_count(c[INLINED], 'call')} XLA inlined, " if c[INLINED] else "")
            + f"{c[CHANGED]} changed, {c[SAME]} the same; ops: {len(self.ops_added)} added, "
            f"{len(self.ops_removed)} removed, {len(self.matched_ops)} matched"
            + (
                f", {format_count(len(self.part_ops), 'part')} of an op XLA split"
                if self.part_ops
                else ""
            )
            + (f", {len(self.fused_ops)} fused by XLA into another" if self.fused_ops else "")
        )

    def _title(self) -> str:
        return f"HLO diff: {self.labels[0]} vs {self.labels[1]}"

    def _cells(self, g: GroupDiff) -> list[str]:
        """The table's cells for one group, after its name."""
        cells = [
            _figure(g.flops[0], format_flops),
            _figure(g.flops[1], format_flops),
            _signed(g.delta("flops"), format_flops),
            _signed(g.delta("bytes"), format_bytes),
            f"{_figure(g.instructions[0], str)} → {_figure(g.instructions[1], str)}",
            f"+{g.ops_added} −{g.ops_removed}" if g.ops_added or g.ops_removed else "",
        ]
        if self.timed:
            cells.append(_signed(g.delta("time"), format_seconds))
        return cells

    def _table(self) -> Table:
        """The groups' table, for the text and the notebook alike: a row per group, indented
        by depth, marked by status; in HTML each row carries what ``diff_view.js`` links."""
        a, b = self.labels
        header = [f"FLOPs {a}", f"FLOPs {b}", "Δ FLOPs", "Δ bytes", "instructions", "ops ±"]
        header += ["Δ time"] if self.timed else []
        group = Column("group", format=_group_text, markup=_group_markup, html_class="tkd-group")
        rows = [
            Row(
                (g, *self._cells(g)),
                mark=f"tkd-{g.status}",
                attributes=(
                    ("data-row", str(index)),
                    ("data-status", g.status),
                    ("data-name", g.name),
                    ("tabindex", "0"),
                ),
            )
            for index, g in enumerate(self.groups)
        ]
        columns = [group, *(Column(name, align="right") for name in header)]
        return Table(
            columns, rows, text_limit=_TEXT_ROWS, more="rows() has all", html_class="tkd-table"
        )

    def __repr__(self) -> str:
        notes = "".join(f"\n  {note}" for note in self._notes())
        return "\n".join(
            (
                f"{self._title()}: {self._summary()}",
                self._table().text("  "),
                "  (+ only in b, - only in a, ~ changed, » a call XLA inlined)" + notes,
            )
        )

    def _notes(self) -> list[str]:
        """The notes under the table: why FLOPs differ (`_fft_note`), and when the
        optimized program's source places were not read (`ProgramMatch.places_unread`)."""
        notes = [self._fft_note] if self._fft_note else []
        a, b = self.labels
        if self.places_unread and self.from_cache:
            notes.append(
                f"{b} came from JAX's persistent compile cache, whose programs keep the "
                "source places of the compile that stored them, so its places may be stale "
                "and were not read: ops fused by XLA and parts of split ops were found by "
                "op_name and data flow alone."
            )
        elif self.places_unread:
            notes.append(
                f"No source place of {b} is one of {a}'s (a program served from JAX's "
                "persistent compile cache keeps the places of the compile that stored it), "
                "so ops fused by XLA and parts of split ops were found by op_name and data "
                "flow alone."
            )
        return notes

    # -- HTML ------------------------------------------------------------------

    def _marks(self) -> dict:
        """What the viewer paints and links: per side, node -> status and node -> its match."""
        status: list[dict[str, str]] = [{}, {}]
        link: list[dict[str, int]] = [{}, {}]
        rows, notes = [], []
        for g in self.groups:
            na, nb = g.nodes
            rows.append([-1 if na is None else na, -1 if nb is None else nb])
            notes.append(self._note(g))
            if g.status != SAME:
                for side, node in ((0, na), (1, nb)):
                    if node is not None:
                        status[side][str(node)] = g.status
            if na is not None and nb is not None:
                link[0][str(na)], link[1][str(nb)] = nb, na
        for x, y in self._pairs.items():
            link[0][str(x)], link[1][str(y)] = y, x
        parts: list[dict[str, list[int]]] = [{}, {}]
        for y, wholes in self._parts.items():
            parts[1][str(y)] = list(wholes)
            status[1][str(y)] = PART
            link[1].setdefault(str(y), wholes[0])
            for x in wholes:
                parts[0].setdefault(str(x), []).append(y)
                status[0][str(x)] = SPLIT  # an op or call XLA split: matched, in parts
                link[0].setdefault(str(x), y)
        fused: list[dict[str, list[int]]] = [{}, {}]
        for x, holders in self._fused.items():
            fused[0][str(x)] = list(holders)
            status[0][str(x)] = FUSED
            link[0].setdefault(str(x), holders[0])
            for y in holders:
                fused[1].setdefault(str(y), []).append(x)
        inlined: dict[str, list[int]] = {}  # a call XLA inlined -> the ops made of it
        for index, g in enumerate(self.groups):
            held = parts[0].get(str(g.nodes[0]))
            if g.status == INLINED:
                inlined[str(g.nodes[0])] = held or self._made_of(g.nodes[0])
                notes[index] = "XLA inlined this call: " + (
                    f"{format_count(len(held), 'op')} of {self.labels[1]} came of it"
                    if held
                    else f"its ops are in {self.labels[1]}"
                )
        for node in self._removed:
            status[0][str(node)] = REMOVED
        for node in self._added:
            status[1][str(node)] = ADDED
        return {
            "labels": list(self.labels),
            "status": status,
            "link": link,
            "parts": parts,
            "fused": fused,
            "inlined": inlined,
            "copied": sorted(self._copied),
            "rows": rows,
            "names": [g.name for g in self.groups],
            "notes": notes,
        }

    def _made_of(self, call: int) -> list[int]:
        """The ops of ``b`` that a call's ops were paired with or fused into, in order."""
        parent = self._sides[0].data.parent
        found: set[int] = set()
        for x, ys in [*((x, (y,)) for x, y in self._pairs.items()), *self._fused.items()]:
            node = x
            while node >= 0 and node != call:
                node = parent[node]
            if node == call:
                found.update(ys)
        return sorted(found)

    def _note(self, g: GroupDiff) -> str:
        a, b = self.labels
        if g.status == ADDED:
            return f"only in {b}: {_figure(g.flops[1], format_flops)}, {g.instructions[1]} instructions"
        if g.status in (REMOVED, INLINED):
            return f"only in {a}: {_figure(g.flops[0], format_flops)}, {g.instructions[0]} instructions"
        parts = [
            f"FLOPs {_signed(g.delta('flops'), format_flops) or 'same'}",
            f"bytes {_signed(g.delta('bytes'), format_bytes) or 'same'}",
        ]
        if g.ops_added or g.ops_removed:
            parts.append(f"ops +{g.ops_added} −{g.ops_removed}")
        if self.timed and g.delta("time") is not None:
            parts.append(f"time {_signed(g.delta('time'), format_seconds) or 'same'}")
        note = f"{b} vs {a}: " + ", ".join(parts)
        return note + (f"; {self._fft_note}" if not g.path and self._fft_note else "")

    @functools.cached_property
    def _fft_note(self) -> str:
        """Why the FLOPs of two programs differ where one holds ``fft`` ops: FLOPs count
        dots and convolutions, an ``fft`` is neither, and XLA:TPU makes it into DFT
        matmuls, which are (a lowered program of three FFTs reads 0 FLOPs, its optimized
        one hundreds of thousands); empty when neither holds one."""
        found, without = [], []
        for side, label in zip(self._sides, self.labels, strict=True):
            module = side.data.module
            ffts = [i for i in module.instructions() if i.opcode == "fft"]
            if ffts:
                flops = format_flops(sum(fft_flops(i, module) for i in ffts))
                found.append(
                    f"{label}'s {len(ffts)} fft op{'s' if len(ffts) > 1 else ''} "
                    f"({flops} as XLA counts them) are not in its FLOPs"
                )
            else:
                without.append(label)
        if found and without:
            found.append(
                f"{without[0]} has none: XLA made them into other ops (DFT matmuls on TPU), counted"
            )
        return "FLOPs count dots and convolutions: " + "; ".join(found) if found else ""

    def _repr_html_(self) -> str:
        """One self-contained fragment: the table, both graphs, their viewer, no request."""
        element_id = new_element_id("tkd")
        payloads = [encode_payload(side.payload) for side in self._sides]
        a, b = (html.escape(label) for label in self.labels)
        fallback = html.escape(
            "The two graphs draw with JavaScript: run the cell in a trusted notebook, or "
            "open a file written by HloDiffView.save()."
        )
        panes = "".join(
            f'<div class="tkd-pane"><div class="tkd-pane-label tkd-pane-{side}">'
            f"{html.escape(label)}</div>"
            f'<div id="{element_id}-{side}" class="tkg-root tkd-side" data-side="{index}"></div></div>'
            for index, (side, label) in enumerate((("a", self.labels[0]), ("b", self.labels[1])))
        )
        body = (
            f'<div class="tkd-head"><div class="tkd-title"><b>{html.escape(self._title())}</b>'
            f" · {html.escape(self._summary())}</div>"
            '<div class="tkd-key"><span><i class="tkd-key-added"></i>added in '
            f'{b}</span><span><i class="tkd-key-removed"></i>removed from {a}</span>'
            '<span><i class="tkd-key-changed"></i>changed</span>'
            '<span><i class="tkd-key-part"></i>part of an op XLA split</span>'
            '<span><i class="tkd-key-fused"></i>fused by XLA into an op of '
            f"{b}</span>"
            '<span class="tkd-hint">click a group here or in a graph to see its match</span></div>'
            f'<div class="tkd-table-wrap">{self._table().html()}</div>'
            + "".join(f'<div class="tkd-note">{html.escape(note)}</div>' for note in self._notes())
            + "</div>"
            f'<div class="tkd-fallback">{fallback}</div>'
            f'<div class="tkd-sides">{panes}</div>'
        )
        return viewer_fragment(DIFF, element_id, "tkd-root", body, [payloads, self._marks()])

    def to_html(self) -> str:
        """A standalone HTML page (with a policy that forbids every network request)."""
        return standalone_page(self._title(), self._repr_html_())

    def save(self, path: str | pathlib.Path) -> pathlib.Path:
        """Write the view as a standalone HTML page that opens offline in any browser."""
        return save_page(path, self._title(), self._repr_html_())


_MARKS = {ADDED: "+", REMOVED: "-", INLINED: "»", CHANGED: "~", SAME: " "}


def _group_text(g: GroupDiff) -> str:
    """A group's cell as text: its status mark, then its name indented by depth."""
    return f"{_MARKS[g.status]} {'  ' * max(0, len(g.path) - 1)}{_label(g)}"


def _group_markup(g: GroupDiff) -> str:
    """A group's cell in HTML: its name, indented by depth, the full path as its tooltip."""
    indent = 12 * max(0, len(g.path) - 1)
    return (
        f'<span style="padding-left:{indent}px" title="{html.escape(g.name)}">'
        f"{html.escape(_label(g))}</span>"
    )


def _label(g: GroupDiff) -> str:
    return g.path[-1] if g.path else g.name


def _figure(value, formatter) -> str:
    return "-" if value is None else formatter(value)


def _signed(delta, formatter) -> str:
    if not delta:
        return ""
    return ("+" if delta > 0 else "−") + formatter(abs(delta))


@user_facing
def diff_graph(
    a: str | os.PathLike | HloModule,
    b: str | os.PathLike | HloModule,
    *,
    labels: tuple[str, str] = ("a", "b"),
    times_a: Mapping[str, float] | None = None,
    times_b: Mapping[str, float] | None = None,
    stage: str | None = None,
    from_cache: bool = False,
) -> HloDiffView:
    """Compare two HLO programs side by side: both graphs, matched group by group.

    Groups (a training step's sections, layers, name scopes, loops) are matched by
    their place in the user's terms; fusions and other working ops by what they are
    (their scope, kind and root ops), since XLA's numbering changes between compiles.
    Each group gets the deltas ``b - a`` of its FLOPs, bytes, instructions and, when
    both sides were profiled, measured time.

    Args:
      a, b: the two programs: `HloModule`\\ s (``compiled.hlo_module("optimized")``),
        HLO text or the paths of HLO text files.
      labels: what to call the two sides (``("f32", "bf16")``).
      times_a, times_b: measured seconds per run by instruction name
        (``Profile.instruction_seconds()``), or None.
      stage: ``"optimized"`` or ``"lowered"``, shown beside each graph's title.
      from_cache: ``b`` is an optimized program JAX's persistent compile cache served
        (``tpukit.Compiled.from_cache``; ``tpukit.diff`` passes it): its source places
        may be those of the compile that stored it, so they are not read, and a note
        says so.

    Returns:
      An `HloDiffView`: shown by notebooks; ``rows()``, ``repr``, ``save(path)``.

    Example:
        >>> module = f"{dump}/module_0003.jit_predict"  # in an --xla_dump_to folder
        >>> view = diff_graph(f"{module}.before_optimizations.txt",  # what XLA's passes did
        ...                   f"{module}.cpu_after_optimizations.txt", labels=("lowered", "optimized"))
        >>> view.group("dense_1").status, view.group("dense_1").delta("bytes")
        ('changed', -6148)
        >>> view.group("dense_2").status
        'same'
    """
    if (
        isinstance(labels, str)
        or len(labels) != 2
        or not all(isinstance(label, str) for label in labels)
    ):
        raise ArgumentError(
            f"labels must be two strings, like ('before', 'after'), got {labels!r}."
        )
    graphs = [
        graph(hlo, title=label, stage=stage, times=times)
        for hlo, label, times in ((a, labels[0], times_a), (b, labels[1], times_b))
    ]
    return HloDiffView(graphs[0], graphs[1], labels=(labels[0], labels[1]), from_cache=from_cache)
