"""The HLO graph opened in headless Chromium, as a saved page or as a notebook output.

`open_graph` serves the page from `notebook_page.ORIGIN` through a `Page`, which records
every request, error and dialog, and waits until each graph is drawn; `node` finds a
node by its name; `LABEL_PX` measures the smallest label on screen::

    page = open_graph(browser, [graph], "standalone")
    node(page, "dot.1").click()
    assert page.errors == [] and page.page.evaluate(LABEL_PX) >= 10
"""

import pathlib

from tests._support.notebook_page import NOTEBOOK_PAGE, ORIGIN


class Page:
    """A Playwright page served from a fake origin, recording requests, errors and dialogs."""

    def __init__(self, browser, pages: dict[str, str], **options):
        self.page = browser.new_page(viewport={"width": 1200, "height": 800}, **options)
        self.requests, self.errors, self.dialogs = [], [], []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on(
            "console",
            lambda m: self.errors.append(m.text) if m.type in ("error", "warning") else None,
        )
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

        def serve(route):
            path = route.request.url[len(ORIGIN) :]
            if path in pages:
                route.fulfill(status=200, content_type="text/html", body=pages[path])
            else:
                route.fulfill(status=404, body="")

        self.page.route("**/*", serve)

    def ready(self, count: int = 1):
        self.page.wait_for_function(
            f"document.querySelectorAll('.tkg-root[data-state=ready]').length === {count}",
            timeout=15000,
        )
        return self

    def nodes(self, root=".tkg-root") -> int:
        return int(self.page.locator(root).first.get_attribute("data-nodes"))


def open_graph(browser, graphs, mode: str) -> Page:
    """Open one or more HloGraphs as a saved page ("standalone") or as notebook outputs."""
    if mode == "standalone":
        assert len(graphs) == 1
        page = Page(browser, {"/graph.html": graphs[0].to_html()})
        page.page.goto(f"{ORIGIN}/graph.html")
    else:
        page = Page(browser, {"/notebook.html": NOTEBOOK_PAGE})
        page.page.goto(f"{ORIGIN}/notebook.html")
        for g in graphs:
            page.page.evaluate("html => window.showOutput(html)", g._repr_html_())
    return page.ready(len(graphs))


def node(page: Page, name: str):
    return page.page.locator(f'.tkg-root [data-name="{name}"]').first


LABEL_PX = """() => Math.min(...Array.from(document.querySelectorAll('.tkg-node text'), t =>
  parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a))"""


SCREENSHOTS = pathlib.Path(__file__).resolve().parents[2] / "out" / "screenshots"


def screenshot(page: Page, name: str) -> None:
    """Writes what ``page`` shows to ``out/screenshots/graph_<name>.png``, to look at."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.page.screenshot(path=str(SCREENSHOTS / f"graph_{name}.png"))
