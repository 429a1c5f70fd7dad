"""The graph page's first draw in headless Chromium: the stages it reports, and a damaged
payload, which must end in the page's error line rather than in an uncaught exception.

The page decodes its payload (base64, inflate, JSON) before it draws; the root element
says when each stage ended (``data-script-ms``, ``data-decoded-ms``, ``data-ready-ms``), so a
benchmark can split the browser's time without instrumenting the page. Without Chromium
these tests skip, except under CI=true, where they fail.
"""

import base64
import zlib

import pytest
from _fixtures import mlp_hlo

from tpukit.hlo import graph
from tpukit.hlo._graph_page import GRAPH, standalone_page, viewer_fragment

STAGES = ("data-script-ms", "data-decoded-ms", "data-ready-ms")


def _open(browser, html: str, state: str):
    """A page showing ``html`` once its graph reaches ``state``, with the errors it raised."""
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_content(html)
    page.wait_for_selector(f".tkg-root[data-state={state}]", timeout=15000)
    return page, errors


def _page_with_payload(payload: str) -> str:
    fallback = '<div class="tkg-fallback">fallback</div>'
    return standalone_page("t", viewer_fragment(GRAPH, "tkg-t", "tkg-root", fallback, [payload]))


def test_the_page_says_when_each_stage_of_its_first_draw_ended(browser):
    page, errors = _open(browser, graph(mlp_hlo(), title="mlp").to_html(), "ready")
    root = page.locator(".tkg-root")
    times = [float(root.get_attribute(name)) for name in STAGES]
    assert 0 < times[0] <= times[1] <= times[2], times
    assert errors == []
    page.close()


@pytest.mark.parametrize(
    "payload",
    [
        "not base64 at all!",
        base64.b64encode(b"not deflated").decode(),
        base64.b64encode(zlib.compress(b"[not json")).decode(),
    ],
    ids=["base64", "deflate", "json"],
)
def test_a_damaged_payload_shows_the_error_line_and_throws_nothing(browser, payload):
    page, errors = _open(browser, _page_with_payload(payload), "error")
    assert "could not draw this HLO graph" in page.locator(".tkg-error").inner_text()
    assert page.locator(".tkg-fallback").count() == 0
    assert errors == []
    page.close()
