"""A graph keeps its payload's base64 as pieces, and its pages are made from them without
copies (issue 38: a 400,000-instruction module's graph in at most 3x its text).

`HloGraph._payload` keeps `encode_wire_pieces`' texts (`TextPieces`), not their join: the
whole base64 is never made as bytes and as a text at once, and a page copies the pieces
into itself once. `HloGraph.save` writes the page's pieces without joining them: a page
whose title is not ASCII is twice its length in memory. Before a large graph's page is
joined, the heap that making the graph freed is given back (`give_back_freed_heap`). Every
output is the same text.
"""

from __future__ import annotations

import base64
import platform
import re
import zlib

import pytest

from tests._support.data import HLO_DATA
from tpukit import hlo
from tpukit.graph import _graph_page, _graph_wire
from tpukit.graph._graph_heap import give_back_freed_heap
from tpukit.graph._graph_page import TextPieces, standalone_page
from tpukit.graph._graph_payload import graph_wire
from tpukit.graph._graph_wire import encode_wire, encode_wire_pieces

_ID = re.compile(r"tkg-[0-9a-f]{32}")


def _graph():
    return hlo.graph((HLO_DATA / "gpu_vgg19_forward.hlo").read_text(), title="vgg — forward")


def test_the_payload_is_kept_as_base64_pieces_that_join_into_the_whole(monkeypatch):
    """Each piece is the base64 of `_BASE64_STEP` deflated bytes (the last of the rest);
    joined they are `encode_wire`'s text, and the page holds them in order, in quotes."""
    monkeypatch.setattr(_graph_wire, "_BASE64_STEP", 3 * 100)
    g = _graph()
    pieces = g._payload()
    assert isinstance(pieces, TextPieces) and len(pieces) > 2
    assert g._payload() is pieces  # (made once)
    assert {len(piece) for piece in pieces[:-1]} == {400}
    assert 0 < len(pieces[-1]) <= 400
    whole = encode_wire(graph_wire(g._data, g.title, g.stage, typed=True))
    assert "".join(pieces) == whole
    zlib.decompress(base64.b64decode(whole))  # (one deflated stream)
    assert f'"{whole}"' in g.to_html() and f'"{whole}"' in g._repr_html_()


def test_encode_wire_pieces_join_into_encode_wire(monkeypatch):
    monkeypatch.setattr(_graph_wire, "_BASE64_STEP", 3)
    wire = {"label": [f"n{k}" for k in range(50)]}
    pieces = encode_wire_pieces(wire)
    assert len(pieces) > 1 and all(len(piece) == 4 for piece in pieces[:-1])
    assert "".join(pieces) == encode_wire(wire) == encode_wire(wire, spend=True)
    assert "".join(encode_wire_pieces(wire, compress=False)) == encode_wire(wire, compress=False)


def test_saving_writes_the_pages_pieces_without_joining_them(tmp_path, monkeypatch):
    """`save` writes what `to_html` returns, without making the page as one text; the
    title's dash is written as a reference, so the page holds one byte a character."""
    monkeypatch.setattr(_graph_wire, "_BASE64_STEP", 3 * 100)
    g = _graph()
    page = _ID.sub("tkg-ID", g.to_html())

    def joined(*_args):
        raise AssertionError("save() joined the page")

    monkeypatch.setattr(_graph_page, "standalone_page", joined)
    path = g.save(tmp_path / "g.html")
    assert _ID.sub("tkg-ID", path.read_bytes().decode("utf-8")) == page
    assert "<title>vgg &#8212; forward &#8212; HLO graph</title>" in page
    assert max(map(ord, page)) < 256


def test_a_text_given_as_pieces_goes_as_one_json_text_and_a_list_as_an_array():
    pieces = _graph_page.viewer_pieces(
        _graph_page.GRAPH, "tkg-0", "tkg-root", "", [TextPieces(["eJw", "="]), ["a", "b"]]
    )
    page = standalone_page("t", pieces)
    assert 'getElementById("tkg-0"),"eJw=",["a","b"],dagre);' in page
    odd = _graph_page.viewer_fragment(_graph_page.GRAPH, "tkg-0", "r", "", [TextPieces(["<", "a"])])
    assert '"\\u003ca",dagre);' in odd


def test_a_large_page_is_joined_after_the_freed_heap_is_given_back(monkeypatch):
    """A graph whose payload is a megabyte or more gives the heap that making it freed back
    (`give_back_freed_heap`) once its glance and counts are made, before its page is joined."""
    from tpukit.graph import _graph_view

    monkeypatch.setattr(_graph_wire, "_BASE64_STEP", 3 * 100)
    calls: list[str] = []
    monkeypatch.setattr(_graph_view, "give_back_freed_heap", lambda: calls.append("trim"))
    joined = _graph_view.standalone_page
    monkeypatch.setattr(
        _graph_view, "standalone_page", lambda *a: (calls.append("page"), joined(*a))[1]
    )
    g = _graph()
    g.to_html()
    assert calls == ["trim", "page"]
    assert g._view_counts is not None and g._payload_b64 is not None
    monkeypatch.setattr(_graph_wire, "_BASE64_STEP", 3 << 18)
    calls.clear()
    _graph().to_html()  # (a payload of one piece: a small graph's heap is left as it is)
    assert calls == ["page"]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_the_freed_heap_is_given_back_through_glibc():
    assert give_back_freed_heap() is True


@pytest.mark.parametrize("cores", [1, 2])
def test_the_deflated_pieces_go_into_base64_without_being_joined(cores, monkeypatch):
    """`encode_wire_pieces` takes the compressors' pieces (`deflated_pieces`: the bytes of
    `deflate_parts`, on one core or two) into base64 as they are, never their join."""
    monkeypatch.setattr(_graph_wire, "_free_cores", lambda: cores)
    monkeypatch.setattr(_graph_wire, "SPLIT_AT", 10)
    monkeypatch.setattr(_graph_wire, "_BASE64_STEP", 3 * 7)
    wire = {"label": [f"node {k}" for k in range(2000)]}
    raw = _graph_wire.wire_bytes(wire)
    pieces = _graph_wire.deflated_pieces([raw[at : at + 500] for at in range(0, len(raw), 500)])
    assert len(pieces) > 2 and b"".join(pieces) == _graph_wire.deflate(raw)
    whole = base64.b64encode(_graph_wire.deflate(raw)).decode()

    def joined(*_args, **_kwargs):
        raise AssertionError("the deflated bytes were joined")

    monkeypatch.setattr(_graph_wire, "deflate_parts", joined)
    assert "".join(encode_wire_pieces(wire, spend=True)) == whole
