"""An executed notebook as a learner opens it: written by ``scripts/run_notebook.py`` (what
``make demo`` runs), then opened, not run, in JupyterLab in headless Chromium, in the light
and dark themes at 1280 and 1024 px wide. It returns what each view found and writes a
screenshot of each to ``out/screenshots/demo_*.png``.

A notebook JupyterLab does not trust shows every graph's fallback sentence and loses
tpukit's styles; this one must open trusted, its graphs drawn, its tables inside their
outputs (or scrollable where they are wider), its names unbroken.
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest

from tests._support import jupyterlab as _jupyterlab
from tests._support.browser import chromium, unavailable

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "out" / "screenshots"
WIDGET = "window.jupyterapp.shell.currentWidget"
# The notebook is open and its cells are made. ``window.jupyterapp`` comes a moment after
# the page: without the first test the predicate throws, and Playwright does not retry.
OPENED = (
    f"() => window.jupyterapp && {WIDGET} && {WIDGET}.content"
    f" && {WIDGET}.content.widgets.length > 3"
)

_spec = importlib.util.spec_from_file_location("run_notebook", ROOT / "scripts" / "run_notebook.py")
run_notebook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_notebook)

# Per output area: tpukit's tables cut at a box's edge without a scrollbar of their own (on
# the table, or on a box around it alone: not one under another table), and table cells
# whose text the browser may break inside a word (word-break: break-all, overflow-wrap: anywhere).
LAYOUT_FAULTS = """() => {
  const faults = [];
  const scrolls = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX)
      && el.scrollWidth > el.clientWidth;
  document.querySelectorAll('.jp-OutputArea-output').forEach((area, i) => {
    const box = area.getBoundingClientRect();
    area.querySelectorAll('table').forEach(table => {
      if (scrolls(table)) return;  // its own scrollbar, right under it
      const t = table.getBoundingClientRect();
      let el = table.parentElement, right = box.right;
      while (el && el !== area.parentElement) {
        // a box around this table alone that scrolls is its scrollbar too
        if (scrolls(el) && el.querySelectorAll('table').length <= 1) return;
        if (getComputedStyle(el).overflowX !== 'visible')
          right = Math.min(right, el.getBoundingClientRect().right);
        el = el.parentElement;
      }
      if (t.width > 0 && t.right > right + 1)
        faults.push(`output ${i}: a table ${Math.round(t.width)} px wide is cut at ${Math.round(right - t.left)} px`);
    });
    area.querySelectorAll('td, th').forEach(td => {
      const s = getComputedStyle(td);
      if (s.wordBreak === 'break-all' || s.overflowWrap === 'anywhere')
        faults.push(`output ${i}: a cell breaks words (${s.wordBreak}, ${s.overflowWrap}): ${td.innerText.slice(0, 40)}`);
    });
  });
  return faults;
}"""

DRAWN = f"""() => {{
  const nb = {WIDGET};
  const cells = nb.content.widgets;
  return {{
    trusted: cells.filter(c => c.model.type === 'code').every(c => c.model.trusted),
    graphs: document.querySelectorAll('.tkg-root').length,
    ready: document.querySelectorAll('.tkg-root[data-state=ready]').length,
    fallbacks: [...document.querySelectorAll('.tkg-fallback')]
        .filter(e => e.offsetParent !== null && e.innerText.trim()).length,
    images: document.querySelectorAll('.jp-OutputArea-output img').length,
  }};
}}"""


def cell_index(page, start: str) -> int:
    return page.evaluate(
        f"s => {WIDGET}.content.widgets.findIndex(c => c.model.sharedModel.getSource().startsWith(s))",
        start,
    )


def show_cell(page, index: int) -> None:
    page.evaluate(
        f"i => {WIDGET}.content.widgets[i].node.scrollIntoView({{block: 'start'}})", index
    )
    page.wait_for_timeout(400)


def review(notebook: nbformat.NotebookNode, folder: Path, views: dict[str, str]) -> dict:
    """Write ``notebook`` as ``make demo`` does into a JupyterLab's folder, open it in
    each theme and width, and return what each ``(theme, width)`` view found. ``views``
    maps a screenshot's name to the start of the cell it shows."""
    reason = _jupyterlab.missing()
    if reason:
        unavailable(reason)
    folder.mkdir(parents=True, exist_ok=True)
    found = {}
    SHOTS.mkdir(parents=True, exist_ok=True)
    with _jupyterlab.lab_server(folder) as lab, contextlib.ExitStack() as stack:
        # make demo's run signs in the user's Jupyter data folder; here, the server's
        stack.enter_context(pytest.MonkeyPatch.context()).setenv(
            "JUPYTER_DATA_DIR", str(lab.data_dir)
        )
        run_notebook.write_executed(notebook, folder / "demo.ipynb")
        browser = stack.enter_context(chromium())
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(lab.url("lab/tree/demo.ipynb?reset"))
        page.wait_for_function(OPENED, timeout=90000)
        page.evaluate("() => window.jupyterapp.shell.collapseLeft()")
        with contextlib.suppress(Exception):  # an untrusted notebook never gets there
            page.wait_for_function(
                "() => document.querySelector('.tkg-root[data-state=ready]')", timeout=30000
            )
        page.wait_for_timeout(1000)
        for theme in ("light", "dark"):
            if theme == "dark":
                page.evaluate(
                    "() => window.jupyterapp.commands.execute('apputils:change-theme',"
                    " {theme: 'JupyterLab Dark'})"
                )
                page.wait_for_timeout(1500)
            for width in (1280, 1024):
                page.set_viewport_size({"width": width, "height": 900})
                page.wait_for_timeout(800)
                for name, start in views.items():
                    show_cell(page, cell_index(page, start))
                    page.screenshot(path=str(SHOTS / f"demo_{name}_{theme}_{width}.png"))
                with contextlib.suppress(Exception):  # graphs draw when scrolled to
                    page.wait_for_function(
                        "() => [...document.querySelectorAll('.tkg-root')]"
                        ".every(r => r.dataset.state === 'ready')",
                        timeout=20000,
                    )
                found[theme, width] = dict(
                    page.evaluate(DRAWN), faults=page.evaluate(LAYOUT_FAULTS)
                )
    return found


def whole_notebooks(paths: list[Path], shots: Path, tile: int = 1600) -> dict:
    """Open each executed notebook of ``paths`` in one JupyterLab, light and dark, at 1280
    and 1024 px, and write each view whole into ``shots``, cut into tiles ``tile`` px tall
    (``{stem}_{theme}_{width}_{k}.png``), for a person to look at every output as a
    learner sees it. Returns what each ``(stem, theme, width)`` view found (`DRAWN`, and
    ``faults``: `LAYOUT_FAULTS`).

    The notebook panel scrolls inside the page, and JupyterLab leaves cells out of view
    unrendered; the view is made as tall as the notebook, so every cell is drawn at once.

        python -m tests._support.lab_review SHOTS out/01_mnist_mlp.ipynb ...  # doctest: +SKIP
    """
    from PIL import Image

    shots.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="tpukit-review-"))
    found = {}
    with _jupyterlab.lab_server(folder) as lab, contextlib.ExitStack() as stack:
        stack.enter_context(pytest.MonkeyPatch.context()).setenv(
            "JUPYTER_DATA_DIR", str(lab.data_dir)
        )
        for path in paths:
            notebook = nbformat.read(path, as_version=4)
            run_notebook.write_executed(notebook, folder / path.name)
        browser = stack.enter_context(chromium(scrollbars=True))  # as a learner sees them
        for path in paths:
            for theme in ("light", "dark"):
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(lab.url(f"lab/tree/{path.name}?reset"))
                page.wait_for_function(OPENED, timeout=120000)
                page.evaluate("() => window.jupyterapp.shell.collapseLeft()")
                page.evaluate(  # (the theme is a setting: it stays from the view before)
                    "t => window.jupyterapp.commands.execute('apputils:change-theme', {theme: t})",
                    f"JupyterLab {theme.title()}",
                )
                page.wait_for_timeout(3000)
                for width in (1280, 1024):
                    height = 900
                    for _ in range(4):  # the notebook's height settles as its outputs draw
                        page.set_viewport_size({"width": width, "height": height})
                        page.wait_for_timeout(2500)
                        tall = page.evaluate(  # (not scrollHeight: it adds a view's
                            f"() => {{ const cells = {WIDGET}.content.widgets; "  # height)
                            "return cells[cells.length - 1].node.getBoundingClientRect()"
                            ".bottom + 60; }"
                        )
                        if abs(tall - height) < 20:
                            break
                        height = min(int(tall), 32000)
                    with contextlib.suppress(Exception):
                        page.wait_for_function(
                            "() => [...document.querySelectorAll('.tkg-root')]"
                            ".every(r => r.dataset.state === 'ready')",
                            timeout=30000,
                        )
                    whole = shots / f"{path.stem}_{theme}_{width}.png"
                    page.screenshot(path=str(whole))
                    with Image.open(whole) as image:
                        for k, top in enumerate(range(0, image.height, tile)):
                            part = image.crop((0, top, image.width, min(image.height, top + tile)))
                            part.save(shots / f"{path.stem}_{theme}_{width}_{k}.png")
                    whole.unlink()
                    found[path.stem, theme, width] = dict(
                        page.evaluate(DRAWN), faults=page.evaluate(LAYOUT_FAULTS)
                    )
                page.close()
    shutil.rmtree(folder, ignore_errors=True)
    return found


if __name__ == "__main__":  # python -m tests._support.lab_review SHOTS NOTEBOOK...
    import sys

    for key, value in whole_notebooks([Path(p) for p in sys.argv[2:]], Path(sys.argv[1])).items():
        print(key, value)
