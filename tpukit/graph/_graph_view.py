"""See the HLO that XLA made: an interactive, collapsible graph inline in the notebook.

`graph` turns an `HloModule` (or HLO text) into an `HloGraph`, whose
``_repr_html_`` is one self-contained HTML fragment: the graph as compressed
JSON, the viewer's scripts and styles and the bundled layout library (dagre),
with no request to any server and nothing that a sandboxed iframe forbids, so
the same output works in Jupyter, JupyterLab, VS Code, Colab and a saved file,
in the frontend's light or dark theme. The graph is three parts, the page using
the payload and the payload the tree: the tree of groups
(`_graph_data.GraphTree`, built once per module), the payload the viewer reads
(`_graph_payload.graph_payload`; `graph_wire` makes it packed for `_graph_wire`), and the page
(`_graph_page`, which writes the diff view's too). A plain mouse wheel over the
graph scrolls the notebook; Ctrl/Cmd + wheel, a touchpad pinch, or the wheel
after a click inside the graph zooms.

    >>> from tpukit.hlo import graph
    >>> def f(x):
    ...     return jnp.tanh(x @ x.T).sum()
    >>> x = jnp.ones((8, 16))
    >>> g = graph(jax.jit(f).lower(x).compile().as_text(), title="f")
    >>> g                     # in a notebook: the interactive graph; in a terminal, a summary
    HloGraph 'f': module 'jit_f', ... instructions in ... computations ...
    >>> g.save("f.html")      # a standalone page
    PosixPath('f.html')
    >>> g.to_dot()[:12]       # Graphviz DOT
    'digraph "f" '

How the graph is organised: a big training step has thousands of instructions
in its ENTRY computation and no layout library lays that out interactively
(the long forward-to-backward edges make layered layouts slow). So the graph
is a tree of groups: the user's layers and name scopes from the ``op_name``
metadata, a training step split into its sections (inputs, forward, loss,
backward, optimizer update, outputs), then consecutive parts of at most
`MAX_CHILDREN` nodes when a group is too big; every fusion, while, call or
conditional is one node whose called computations open in place. The page
opens with the groups `_first_view` chooses: the work (the most FLOPs) first, while
the whole drawing, as `_graph_frame` estimates it, fits a frame of about 900 by 760
pixels at a readable size (a training step with its forward layers showing when they
fit; a loop on its body); an output at least that wide draws exactly those groups, so
`view_counts` is what it draws, and a narrower one folds what does not fit
(``assets/graph_camera.js``). It lays out only the children of a group, once, when it
opens.

How a large graph shows quickly: in a notebook kernel, a graph of `GLANCE_INSTRUCTIONS`
instructions or more is shown twice under one display id. First its glance
(`_graph_glance`: the first view's nodes alone, each with what the whole graph says of it,
made from ENTRY's tree alone; a few tens of kilobytes, drawn in its script's own task),
which the frontend draws while the kernel groups and writes the whole graph; then the whole graph in its place, which draws that glance again until its own
payload is inflated, so the picture never blanks. A ResNet-50 training step's first
view is drawn about 0.3 s sooner than the whole graph would be; a saved notebook or page
keeps the whole graph.
"""

from __future__ import annotations

import os
import pathlib
import uuid
from collections import Counter
from collections.abc import Callable, Mapping

from tpukit._errors import ArgumentError, HloTextError, WrongTypeError, user_facing
from tpukit.display import format_bytes, format_seconds, kernel_shell
from tpukit.graph._first_view import BodiesLeftOut, first_view
from tpukit.graph._graph_data import SCOPE, GraphTree
from tpukit.graph._graph_heap import give_back_freed_heap
from tpukit.graph._graph_page import (
    GRAPH,
    TextPieces,
    html_text,
    new_element_id,
    save_page,
    standalone_page,
    viewer_pieces,
)
from tpukit.graph._graph_payload import glance_wire, graph_wire
from tpukit.graph._graph_wire import encode_wire, encode_wire_pieces
from tpukit.hlo.analysis import instruction_count
from tpukit.hlo.text import HloModule, parse_hlo, paused_gc, progress, read_hlo_source

#: A graph of at least this many instructions shows its first view alone first in a
#: notebook kernel (`HloGraph._ipython_display_`). Below it the whole graph takes little
#: longer (about 15 us of Python an instruction: 0.08 s for 5,000), not worth two drawings.
GLANCE_INSTRUCTIONS = 5000


def graph_data(module: HloModule) -> GraphTree:
    """The graph's tree of groups for ``module``, built once per module and kept on it.

    A program drawn again (its graph, then with a profile's times, then beside another
    in a diff) reuses the grouping: it depends on the module alone, not on the title,
    the stage or the times.
    """
    data = module._analysis.get("graph_data")
    if data is None:
        # A long open says what it does (past about 2 s: see `_progress`). The tree is kept
        # with the module: `keep` spares a collection that would only find it all alive.
        grouping = progress(f"grouping {module.name or 'the module'} for its graph")
        with grouping, paused_gc(keep=True):
            data = module._analysis["graph_data"] = GraphTree(module)
        module._analysis.pop("glance_data", None)  # (the whole tree serves glances now)
    return data


def page_data(module: HloModule) -> GraphTree:
    """The tree a page's payload is made from: the whole graph's when it is built, else
    one without the fusion bodies the page builds itself (`GraphTree` with ``lazy``:
    `_graph_bodies`), kept on the module. A large module's bodies are most of its nodes."""
    data = module._analysis.get("graph_data") or module._analysis.get("page_data")
    if data is None:
        grouping = progress(f"grouping {module.name or 'the module'} for its graph")
        with grouping, paused_gc(keep=True):
            data = module._analysis["page_data"] = GraphTree(module, lazy=True)
        module._analysis.pop("glance_data", None)  # (this tree serves glances now)
    return data


def glance_data(module: HloModule) -> GraphTree:
    """The tree a glance of ``module`` is made from: the whole graph's when it is built,
    else ENTRY's alone, without what its instructions run (`GraphTree` without
    ``bodies``: a tenth of a training step's nodes, half the time or less to build),
    kept on the module until the whole tree replaces it.

    The whole tree serves at once where ENTRY holds half the instructions or more (the
    other tree would cost nearly as much, and then the whole one again), and where the
    first view enters a call or loop (a GPU module's command buffer): it needs its body.
    """
    analysis = module._analysis
    data = analysis.get("graph_data") or analysis.get("page_data") or analysis.get("glance_data")
    if data is None:
        total = sum(len(comp.instructions) for comp in module.computations.values())
        if 2 * len(module.entry.instructions) >= total:
            return page_data(module)
        grouping = progress(f"grouping {module.name or 'the module'} for its first view")
        with grouping, paused_gc(keep=True):
            data = GraphTree(module, bodies=False)
            try:
                first_view(data)
            except BodiesLeftOut:
                data = None
        if data is None:
            return page_data(module)
        module._analysis["glance_data"] = data
    return data


class HloGraph:
    """An interactive graph of an HLO module, shown inline by notebooks.

    Build one with `graph`. In a notebook, the last expression of a cell shows
    it; elsewhere use `save` (a standalone HTML page), `to_dot` (Graphviz) or
    ``print(repr(g))`` (a text summary).

    Attributes:
      module: the parsed `HloModule`.
      title: the heading shown above the graph.
      stage: ``"optimized"``, ``"lowered"`` or None, shown beside the title.
      times: measured seconds per run of each timed instruction (from
        ``Compiled.profile``), or None; with times the graph opens coloured by them.
      memory: bytes each instruction's buffers hold at the program's peak (from
        ``MemoryView.graph``), or None; with them the graph opens coloured by memory.
    """

    def __init__(
        self,
        module: HloModule,
        *,
        title: str | None = None,
        stage: str | None = None,
        times: Mapping[str, float] | None = None,
        memory: Mapping[str, int] | None = None,
    ):
        if times and memory:
            raise ArgumentError(
                "A graph is coloured by measured time or by memory, not both: pass times= "
                "(a profile's) or memory= (a memory view's), and make two graphs to compare."
            )
        self.module = module
        self.title = title if title is not None else module.name
        self.stage = stage
        self.times = dict(times) if times is not None else None
        self.memory = dict(memory) if memory else None
        self._payload_b64: TextPieces | None = None
        self._glance_b64: str | None = None
        self._view_counts: tuple[int, int] | None = None

    @property
    def _data(self) -> GraphTree:
        """The graph's tree of groups (`graph_data`), grouped on first use: a kernel shows
        a large graph's glance first, from a smaller tree (`glance_data`)."""
        return graph_data(self.module)

    @property
    def _page_data(self) -> GraphTree:
        """The tree the page's payload and its counts come from (`page_data`); a coloured
        graph's is the whole tree (its bodies' times and memory are summed in Python)."""
        return self._data if self.times or self.memory else page_data(self.module)

    def _is_large(self) -> bool:
        """Whether the module holds `GLANCE_INSTRUCTIONS` instructions or more."""
        computations = self.module.computations.values()
        return sum(len(comp.instructions) for comp in computations) >= GLANCE_INSTRUCTIONS

    @property
    def num_instructions(self) -> int:
        """Instructions the graph can show: every computation that runs as program."""
        data = self._page_data
        built = sum(1 for node in data.instr if node is not None)
        return built + sum(len(body.instructions) for body in data.lazy.values())

    def view_counts(self) -> tuple[int, int]:
        """``(nodes, edges)`` drawn when the graph first opens (groups count as one node),
        in an output at least as wide as the first view's frame (`_graph_frame.FRAME_W`
        pixels and margins: a notebook's); a narrower one folds groups to fit."""
        if self._view_counts is None:
            data = self._page_data  # (the first view never opens a fusion)
            nodes, edges = data.visible(set(first_view(data)))
            self._view_counts = (len(nodes), len(edges))
        return self._view_counts

    def _payload(self) -> TextPieces:
        """The whole graph's payload, in base64, as the texts it joins (`encode_wire_pieces`):
        made once and kept, a page copies them into itself; never joined into one text."""
        if self._payload_b64 is None:
            with progress(f"drawing the graph of {self.title}"), paused_gc():
                wire = graph_wire(
                    self._page_data, self.title, self.stage, self.times, self.memory, typed=True
                )
                self._payload_b64 = TextPieces(encode_wire_pieces(wire, spend=True))
        return self._payload_b64

    def _repr_html_(self) -> str:
        """One self-contained HTML fragment: styles, data, viewer and layout library inline.

        A graph of `GLANCE_INSTRUCTIONS` instructions or more also carries its glance
        (`_graph_glance`), which the page draws at once, while it inflates the whole graph.
        """
        return "".join(self._html_pieces())

    def _html_pieces(self) -> list[str]:
        """`_repr_html_` as the texts it joins (`to_html` joins them into its page once).

        A large graph's page is made where its process is at its largest: before it is,
        the heap that making the graph freed is given back (`give_back_freed_heap`).
        """
        payload = self._payload()  # first: it costs the nodes and opens the first view with
        glance = self._glance_payload() if self._is_large() else ""  # the collector paused
        nodes, edges = self.view_counts()  # (these reuse both)
        said = (
            f"{self.num_instructions:,} instructions drawn, each call site's own "
            f"({nodes} nodes, {edges} edges when opened)"
        )
        if len(payload) > 1:  # (a megabyte of payload or more: `encode_wire_pieces`)
            give_back_freed_heap()  # what grouping, the payload and the glance let go of
        return self._fragment_pieces(said, payload, glance)

    def _glance_html(self) -> str:
        """An HTML fragment of the first view alone (`_graph_glance`): a kernel's first output,
        made without grouping the whole graph."""
        return self._fragment("its first view", self._glance_payload(), "")

    def _glance_payload(self) -> str:
        """The glance's payload, not deflated: a few tens of kilobytes, read at once."""
        if self._glance_b64 is None:
            coloured = self.times or self.memory  # (their sums are checked on whole trees)
            data = self._data if coloured else glance_data(self.module)
            with paused_gc():
                wire = glance_wire(data, self.title, self.stage, self.times, self.memory)
                self._glance_b64 = encode_wire(wire, compress=False)
        return self._glance_b64

    def _fragment(self, said: str, payload: str | TextPieces, glance: str) -> str:
        return "".join(self._fragment_pieces(said, payload, glance))

    def _fragment_pieces(self, said: str, payload: str | TextPieces, glance: str) -> list[str]:
        fallback = html_text(
            f"HLO graph of {self.title}: {said}. It draws with JavaScript: "
            "run the cell in a trusted notebook, or open a file written by HloGraph.save()."
        )
        body = f'<div class="tkg-fallback">{fallback}</div>'
        return viewer_pieces(GRAPH, new_element_id("tkg"), "tkg-root", body, [payload, glance])

    @property
    def _ipython_display_(self) -> Callable[[], None] | None:
        """How a notebook kernel shows a graph of `GLANCE_INSTRUCTIONS` instructions or more:
        its first view at once, then the whole graph in its place.

        Elsewhere (a terminal, a test's shell) or for a smaller graph this is None, and
        IPython shows `_repr_html_` as usual: `IPython.utils.dir2.get_real_method` takes
        only a callable.
        """
        if kernel_shell() is None or not self._is_large():
            return None
        return self._show_glance_first

    def _show_glance_first(self) -> None:
        """Show `_glance_html`, then replace it with `_repr_html_` (one ``display_id``), as
        ``IPython.display.display(..., display_id=True)`` and ``update`` do.

        The frontend draws the glance while the kernel writes the whole graph; every
        frontend that shows outputs applies the update, and a saved notebook keeps the
        whole graph. Interrupted in between, the glance stays and says so when asked for
        more than it holds.
        """
        publish = kernel_shell().display_pub.publish
        shown = {"display_id": uuid.uuid4().hex}
        glance = {"text/html": self._glance_html(), "text/plain": self._glance_text()}
        publish(data=glance, metadata={}, transient=shown)
        whole = {"text/html": self._repr_html_(), "text/plain": repr(self)}
        publish(data=whole, metadata={}, transient=shown, update=True)

    def _glance_text(self) -> str:
        stage = f" ({self.stage})" if self.stage else ""
        return f"HloGraph {self.title!r}{stage}: the first view; the whole graph follows"

    def to_html(self) -> str:
        """A standalone HTML page (with a policy that forbids every network request)."""
        return standalone_page(self._page_title(), self._html_pieces())

    def save(self, path: str | pathlib.Path) -> pathlib.Path:
        """Write the graph as a standalone HTML page that opens offline in any browser."""
        return save_page(path, self._page_title(), self._html_pieces())

    def _page_title(self) -> str:
        return f"{self.title} — HLO graph"

    def to_dot(self) -> str:
        """The graph in Graphviz DOT: ENTRY's instructions, fusions as nodes, scopes as clusters."""
        from tpukit.graph._dot import graph_to_dot

        return graph_to_dot(self._data, self.title)

    def __repr__(self) -> str:
        module = self.module
        entry = module.entry
        counts = Counter(i.opcode for i in entry)
        fusions = sum(1 for c in module.computations.values() if c.kind == "fusion")
        nodes, edges = self.view_counts()
        scopes = sum(1 for k in self._page_data.kind if k == SCOPE)  # (none in bodies)
        top = ", ".join(f"{op} {k:,}" for op, k in counts.most_common(6))
        stage = f" ({self.stage})" if self.stage else ""
        text = (
            f"HloGraph {self.title!r}{stage}: module {module.name!r}, "
            f"{self.num_instructions:,} instructions in {len(module.computations):,} "
            f"computations (drawn, each call site's own; {instruction_count(module):,} "
            "as written)\n"
            f"  ENTRY {entry.name!r}: {len(entry):,} instructions, {fusions:,} fused computations\n"
            f"  name-scope groups: {scopes:,}; opens with {nodes} nodes and {edges} edges\n"
            f"  top ENTRY ops: {top}"
        )
        if self.times:
            longest = max(self.times, key=self.times.__getitem__)
            text += (
                f"\n  coloured by measured time: {len(self.times):,} timed instructions; "
                f"longest {longest!r} ({format_seconds(self.times[longest])} per run)"
            )
        if self.memory:
            largest = max(self.memory, key=self.memory.__getitem__)
            text += (
                f"\n  coloured by memory at the peak: {len(self.memory):,} instructions hold "
                f"{format_bytes(sum(self.memory.values()))}; largest {largest!r} "
                f"({format_bytes(self.memory[largest])})"
            )
        return text


@user_facing
def graph(
    hlo: str | os.PathLike | HloModule,
    *,
    title: str | None = None,
    stage: str | None = None,
    times: Mapping[str, float] | None = None,
    memory: Mapping[str, int] | None = None,
) -> HloGraph:
    """An interactive graph of HLO, for a notebook cell's output.

    Fusions, calls and loops are single nodes that open in place; instructions
    are grouped by the user's layers and name scopes, and a training step by its
    sections (inputs, forward, loss, backward, optimizer update, outputs); colours
    say the kind of op, edge widths the bytes. Click a node for its HLO text,
    shape, source line and estimated FLOPs and bytes; search by opcode, name,
    scope or ``file.py:line``.

    Args:
      hlo: HLO text (``compiled.as_text()`` or
        ``lowered.as_text(dialect="hlo", debug_info=True)``), the path of an HLO
        text file (a dump written with ``XLA_FLAGS=--xla_dump_to=DIR``), a
        parsed `HloModule` (``tpukit.hlo.graph`` also takes an `HloProgram`).
      title: the heading; the module's name when None.
      stage: ``"optimized"`` or ``"lowered"``, shown beside the title.
      times: measured seconds per run by instruction name (``Profile.instruction_seconds()``
        from ``Compiled.profile``): the graph then opens coloured by time on a heat scale,
        with each node's time and share in its panel; a group's time is its members' sum.
      memory: bytes held at the program's peak by instruction name (what
        ``MemoryView.graph()`` passes): the graph then opens coloured by memory ("Colour:
        memory"), each node's bytes and share of the peak in its panel.

    Returns:
      An `HloGraph`: shown by notebooks, ``save(path)`` for a page, ``to_dot()``.

    Example:
        >>> compiled = jax.jit(f).lower(x).compile()
        >>> tpukit.hlo.graph(compiled.as_text(), title="f", stage="optimized")
        HloGraph 'f' (optimized): module 'jit_f', ...
        >>> tpukit.hlo.graph(f"{dump}/module_0007.jit_train_step.sm_9.0_gpu_after_optimizations.txt")
        HloGraph 'jit_train_step': module 'jit_train_step', 42 instructions in 5 computations ...
    """
    if isinstance(hlo, HloModule):
        module = hlo
    elif isinstance(hlo, (str, os.PathLike)):
        text, file = read_hlo_source(hlo)
        with progress(f"opening the graph of {title or file or 'HLO text'}"):
            try:
                module = parse_hlo(text)
            except HloTextError as exc:
                if file is None:
                    raise
                raise HloTextError(f"{file}: {exc}") from None
    else:
        raise WrongTypeError(
            f"graph() takes HLO text, an HLO file's path or an HloModule, got "
            f"{type(hlo).__name__}. Pass e.g. jax.jit(f).lower(x).compile().as_text()."
        )
    if not module.computations:
        raise ArgumentError(
            "This HLO module has no computation to draw; pass the module's full text."
        )
    return HloGraph(module, title=title, stage=stage, times=times, memory=memory)
