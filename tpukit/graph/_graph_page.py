"""The one writer of the graph viewer's HTML: a self-contained notebook fragment, and a page.

The graph (`_graph_view.HloGraph`) and the diff of two graphs (`_diff_view.HloDiffView`)
are each one ``<div>`` holding its ``<style>``, its own markup and one ``<script>``: the
bundled layout library (dagre) wrapped in a function so that it defines no global, the
viewer's scripts (``assets/*.js``, whose heads say what each part takes and offers)
joined into one function scope, in strict mode (the library's own stays as it was
written), and a call of the viewer's entry with the output's
element and its data. No request to any server and nothing that a sandboxed iframe
forbids, so the same output works in Jupyter, JupyterLab, VS Code, Colab and a saved
file. Every argument is written as JSON that cannot end the ``<script>`` early.

    >>> fragment = viewer_fragment(
    ...     GRAPH, "tkg-0", "tkg-root", '<div class="tkg-fallback">f</div>', ["eJw=", ""]
    ... )
    >>> fragment.startswith('<div id="tkg-0" class="tkg-root"><style>')
    True
    >>> 'tpukitGraphView(document.getElementById("tkg-0"),"eJw=","",dagre);' in fragment
    True
    >>> "Content-Security-Policy" in standalone_page("t", fragment)
    True
    >>> pieces = viewer_pieces(
    ...     GRAPH, "tkg-0", "tkg-root", '<div class="tkg-fallback">f</div>', ["eJw=", ""]
    ... )
    >>> standalone_page("t", pieces) == standalone_page("t", fragment)
    True
"""

from __future__ import annotations

import functools
import html
import json
import pathlib
import re
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from tpukit._errors import AssetError

_ASSETS = pathlib.Path(__file__).parent / "assets"
_SOURCE_MAP = re.compile(r"//# sourceMappingURL=\S*")
_UNSAFE_IN_SCRIPT = re.compile(r"</script|<!--|<script", re.IGNORECASE)
#: V8's explicit compile hint for a whole script (see `_viewer_code`).
_COMPILE_EAGERLY = "//# allFunctionsCalledOnLoad\n"

#: The graph viewer's scripts, joined in this order: the shared helpers, then the parts,
#: then the view that composes them (``assets/README.md`` maps them).
_GRAPH_SCRIPTS = (
    "graph_shared.js",
    "graph_theme.js",
    "graph_tree.js",
    "graph_bodies.js",
    "graph_layout.js",
    "graph_camera.js",
    "graph_panel.js",
    "graph_keys.js",
    "graph_colour.js",
    "graph_view.js",
)


class Viewer(NamedTuple):
    """One kind of output: the JS function it calls, and the scripts and styles it needs."""

    entry: str
    scripts: tuple[str, ...]
    styles: tuple[str, ...]


#: One graph: ``tpukitGraphView(root, payload, glance, dagre)`` (``glance``: "" or the first
#: view's own payload, drawn until the whole payload is inflated).
GRAPH = Viewer("tpukitGraphView", _GRAPH_SCRIPTS, ("graph_view.css",))
#: Two graphs and their diff: ``tpukitDiffView(root, [payload_a, payload_b], marks, dagre)``.
DIFF = Viewer(
    "tpukitDiffView", (*_GRAPH_SCRIPTS, "diff_view.js"), ("graph_view.css", "diff_view.css")
)


def new_element_id(prefix: str) -> str:
    """A unique id for one output's root element (``"tkg-3f2a..."``)."""
    return f"{prefix}-{uuid.uuid4().hex}"


def viewer_fragment(
    viewer: Viewer, element_id: str, root_class: str, body: str, arguments: Sequence[object]
) -> str:
    """One output: ``<div id=element_id class=root_class>``, the viewer's styles, ``body``
    (markup shown before the script runs: a fallback, a table), and the script that calls
    ``viewer.entry(root, *arguments, dagre)``; each argument is written as JSON."""
    return "".join(viewer_pieces(viewer, element_id, root_class, body, arguments))


def viewer_pieces(
    viewer: Viewer, element_id: str, root_class: str, body: str, arguments: Sequence[object]
) -> list[str]:
    """`viewer_fragment` as the texts it joins, which a page (`standalone_page`) joins
    with its own once: a large graph's payload (megabytes of base64) is copied into the
    page alone, not into each string the page was once built up from."""
    css, code = _viewer_code(viewer)
    pieces = [
        f'<div id="{element_id}" class="{root_class}"><style>{css}</style>{body}<script>',
        code,
        f'\n{viewer.entry}(document.getElementById("{element_id}"),',
    ]
    for argument in arguments:
        pieces += (*_json_pieces(argument), ",")
    pieces.append("dagre);})();})();</script></div>")
    return pieces


#: A text whose JSON is itself in quotes, safe in a ``<script>`` (a payload's base64).
_PLAIN_TEXT = re.compile(r"[A-Za-z0-9+/=]*")


class TextPieces(tuple):
    """One text argument of `viewer_pieces` given as the texts it joins (a large graph's
    payload: `_graph_wire.encode_wire_pieces`), which the page copies in once; a list
    stays a JSON array."""

    __slots__ = ()


def _json_pieces(value: object) -> tuple[str, ...]:
    """`script_json` of ``value`` in pieces that join into it: a plain text (`_PLAIN_TEXT`)
    as itself between quotes, not copied; `TextPieces` of plain texts as those texts."""
    if isinstance(value, TextPieces):
        if all(_PLAIN_TEXT.fullmatch(piece) for piece in value):
            return '"', *value, '"'
        value = "".join(value)
    if isinstance(value, str) and _PLAIN_TEXT.fullmatch(value):
        return '"', value, '"'
    return (script_json(value),)


@functools.cache
def _viewer_code(viewer: Viewer) -> tuple[str, str]:
    """``(styles, script up to the entry's call)`` of ``viewer``: read and checked once a
    session, not for every output (a few ms each).

    The script opens with V8's compile hint (``allFunctionsCalledOnLoad``, Chrome 136 and
    later; other browsers read a comment): the first view calls most of the viewer and of
    dagre, and compiling them with the script saves pre-parsing them first and parsing
    them again one by one on their first call. The first layout gets 15-25 ms quicker, the
    script's start about 10 ms later: the page is ready 5-15 ms sooner."""
    css = "\n".join(_read_asset(name) for name in viewer.styles)
    dagre = _SOURCE_MAP.sub("", _read_asset("dagre.min.js"))
    code = "\n".join(_script_safe(_read_asset(name), name) for name in viewer.scripts)
    return css, (
        _COMPILE_EAGERLY
        + "(function(){var dagre=(function(){"
        + _script_safe(dagre, "dagre.min.js")
        + '\nreturn dagre;})();\n(function(){"use strict";\n'
        + code
    )


def standalone_page(title: str, fragment: str | Sequence[str]) -> str:
    """An HTML page around a notebook output ``fragment`` (or the texts it joins:
    `viewer_pieces`), under a content policy that forbids every network request: the
    page opens offline, and shows that it needs nothing."""
    return "".join(_page_pieces(title, fragment))


def _page_pieces(title: str, fragment: str | Sequence[str]) -> list[str]:
    """`standalone_page` as the texts it joins."""
    policy = (
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        "img-src data:; connect-src 'none'"
    )
    head = (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        f"<title>{html_text(title)}</title></head>"
        '<body style="margin:0;padding:12px;font-family:sans-serif">'
    )
    pieces = [fragment] if isinstance(fragment, str) else fragment
    return [head, *pieces, "</body></html>\n"]


def html_text(text: str) -> str:
    """``text`` escaped for HTML, each character past Latin-1 as a reference (``&#8212;``):
    one such character (a title's dash) would make Python hold the whole page at 2 or 4
    bytes a character, 18 MB instead of 9 for a 400,000-instruction module."""
    text = html.escape(text)
    return text if text.isascii() else text.encode("latin-1", "xmlcharrefreplace").decode("latin-1")


def save_page(path: str | pathlib.Path, title: str, fragment: str | Sequence[str]) -> pathlib.Path:
    """Write `standalone_page` to ``path``, a piece at a time (as ``Path.write_text`` would
    write it whole): a large graph's page, twice its length in memory where its title is
    not ASCII, is never made; returns the path."""
    path = pathlib.Path(path)
    with path.open("w", encoding="utf-8") as file:
        file.writelines(_page_pieces(title, fragment))
    return path


def script_json(value: object) -> str:
    """JSON that can sit inside a ``<script>``: no ``<``, ``>`` or ``&`` as themselves."""
    text = json.dumps(value, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _read_asset(name: str) -> str:
    return (_ASSETS / name).read_text(encoding="utf-8")


def _script_safe(js: str, what: str) -> str:
    if _UNSAFE_IN_SCRIPT.search(js):
        raise AssetError(
            f"{what} contains text that would end its <script> element early; reinstall "
            "tpukit (its viewer assets are damaged)."
        )
    return js
