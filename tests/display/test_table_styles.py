"""tpukit's tables (compile summary, HLO diff) against the frontends' own table rules, in Chromium.

Each table is put into a page carrying the rules JupyterLab 4 / Notebook 7 apply to
rendered HTML outputs (``@jupyterlab/rendermime`` ``base.css``: right-aligned cells,
0.5em padding, fixed layout, striped rows; the output area's table margins) with the
light or dark theme's colours, or the rules of VS Code's notebook output webview.
The computed style of every cell must be tpukit's: left-aligned text, right-aligned
numbers, no stripes, the theme's text colour. Screenshots go to
``out/screenshots/tables_*.png``. Without Chromium these tests skip, except under
CI=true, where they fail.
"""

import pathlib
import time

import jax.numpy as jnp
import pytest

import tpukit

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHOTS = ROOT / "out" / "screenshots"

# JupyterLab 4.x, packages/rendermime/style/base.css (BSD-3-Clause), the table rules.
JUPYTERLAB_TABLES = """
.jp-RenderedHTMLCommon { color: var(--jp-content-font-color1); font-family: var(--jp-content-font-family);
  font-size: var(--jp-content-font-size1); line-height: var(--jp-content-line-height); padding-right: 20px; }
.jp-RenderedHTMLCommon table { border-collapse: collapse; border-spacing: 0; border: none;
  color: var(--jp-ui-font-color1); font-size: var(--jp-ui-font-size1); table-layout: fixed;
  margin-left: auto; margin-bottom: 1em; margin-right: auto; }
.jp-RenderedHTMLCommon thead { border-bottom: var(--jp-border-width) solid var(--jp-border-color1);
  vertical-align: bottom; }
.jp-RenderedHTMLCommon td, .jp-RenderedHTMLCommon th, .jp-RenderedHTMLCommon tr {
  vertical-align: middle; padding: 0.5em; line-height: normal; white-space: normal; max-width: none;
  border: none; }
:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon td, :not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon th,
:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon tr { text-align: right; }
.jp-RenderedHTMLCommon th { font-weight: bold; }
.jp-RenderedHTMLCommon tbody tr:nth-child(odd) { background: var(--jp-layout-color0); }
.jp-RenderedHTMLCommon tbody tr:nth-child(even) { background: var(--jp-rendermime-table-row-background); }
.jp-RenderedHTMLCommon tbody tr:hover { background: var(--jp-rendermime-table-row-hover-background); }
.jp-RenderedHTMLCommon :not(pre) > code { background-color: var(--jp-layout-color2); padding: 1px 5px; }
.jp-OutputArea-output.jp-RenderedHTMLCommon table { margin-left: 0; margin-right: 0; }
"""
# The theme-light and theme-dark extensions' values of the variables used above.
JUPYTERLAB_THEMES = {
    "light": """:root { --jp-ui-font-color1: rgba(0,0,0,.87); --jp-ui-font-color2: rgba(0,0,0,.54);
      --jp-content-font-color1: rgba(0,0,0,.87); --jp-layout-color0: white; --jp-layout-color2: #eee;
      --jp-rendermime-table-row-background: #f5f5f5; --jp-rendermime-table-row-hover-background: #e1f5fe;
      --jp-border-color1: #bdbdbd; --jp-border-color2: #e0e0e0; --jp-border-width: 1px;
      --jp-ui-font-size1: 13px; --jp-content-font-size1: 14px; --jp-code-font-size: 13px;
      --jp-code-font-family: menlo, consolas, "DejaVu Sans Mono", monospace; }""",
    "dark": """:root { --jp-ui-font-color1: rgba(255,255,255,.87); --jp-ui-font-color2: rgba(255,255,255,.54);
      --jp-content-font-color1: #fff; --jp-layout-color0: #111; --jp-layout-color2: #424242;
      --jp-rendermime-table-row-background: #212121;
      --jp-rendermime-table-row-hover-background: rgba(3,169,244,.2);
      --jp-border-color1: #616161; --jp-border-color2: #424242; --jp-border-width: 1px;
      --jp-ui-font-size1: 13px; --jp-content-font-size1: 14px; --jp-code-font-size: 13px;
      --jp-code-font-family: menlo, consolas, "DejaVu Sans Mono", monospace; }
      body { background: #111; }""",
}
# VS Code, src/vs/workbench/contrib/notebook/browser/view/renderers/backLayerWebView.ts (MIT).
VSCODE_TABLES = """
table, thead, tr, th, td, tbody { border: none !important; border-color: transparent; border-spacing: 0;
  border-collapse: collapse; }
table, th, tr { vertical-align: middle; text-align: right; }
thead { font-weight: bold; background-color: rgba(130, 130, 130, 0.16); }
th, td { padding: 4px 8px; }
tr:nth-child(even) { background-color: rgba(130, 130, 130, 0.08); }
tbody th { font-weight: normal; }
body { background: #1f1f1f; color: #ccc; font-size: 13px; }
"""
FRONTENDS = {
    "jupyterlab_light": (JUPYTERLAB_THEMES["light"] + JUPYTERLAB_TABLES, "rgba(0, 0, 0, 0.87)"),
    "jupyterlab_dark": (JUPYTERLAB_THEMES["dark"] + JUPYTERLAB_TABLES, "rgba(255, 255, 255, 0.87)"),
    "vscode_dark": (VSCODE_TABLES, "rgb(204, 204, 204)"),
}


def page(css: str, outputs: list[str]) -> str:
    cells = "".join(
        f'<div class="jp-OutputArea-output jp-RenderedHTMLCommon jp-RenderedHTML">{html}</div>'
        for html in outputs
    )
    return f'<!DOCTYPE html><html><head><meta charset="utf-8"><style>{css}</style></head><body>{cells}</body></html>'


@pytest.fixture(scope="module")
def outputs():
    def layer(x, w):
        return jnp.tanh(x @ w).sum(axis=1)

    f32 = tpukit.compile(layer, tpukit.shape("f32[32,64]"), tpukit.shape("f32[64,64]"))
    bf16 = tpukit.compile(layer, tpukit.shape("bf16[32,64]"), tpukit.shape("bf16[64,64]"))
    return [f32._repr_html_(), tpukit.diff(f32, bf16, labels=("f32", "bf16"))._repr_html_()]


CELL_STYLES = """() => [...document.querySelectorAll('.tpukit-out td, .tpukit-out th')].map(cell => {
  const style = getComputedStyle(cell), row = getComputedStyle(cell.parentElement);
  return {table: cell.closest('.tpukit-out').classList[1], text: cell.textContent,
          numeric: cell.classList.contains('num'), section: cell.classList.contains('section'),
          changed: cell.parentElement.classList.contains('changed'),
          align: style.textAlign, padding: style.paddingLeft, color: style.color,
          background: style.backgroundColor, rowBackground: row.backgroundColor,
          layout: getComputedStyle(cell.closest('table')).tableLayout};
})"""


@pytest.mark.parametrize("frontend", sorted(FRONTENDS))
def test_tables_keep_their_alignment_and_colours_against_the_frontends_rules(
    browser, outputs, frontend
):
    css, text_color = FRONTENDS[frontend]
    tab = browser.new_page(viewport={"width": 1100, "height": 800})
    tab.set_content(page(css, outputs))
    tab.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    SHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SHOTS / f"tables_{frontend}.png"), full_page=True)
    cells = tab.evaluate(CELL_STYLES)
    tab.close()
    assert {c["table"] for c in cells} == {"tpukit-summary", "tpukit-diff"}
    for cell in cells:
        where = f"{cell['table']} cell {cell['text']!r} in {frontend}"
        assert cell["align"] == ("right" if cell["numeric"] else "left"), where
        assert cell["padding"] == "8px", where
        if not cell["section"]:  # section titles are in the theme's secondary colour
            assert cell["color"] == text_color, where
        assert cell["rowBackground"] == "rgba(0, 0, 0, 0)", where  # no stripes
        if not cell["changed"]:
            assert cell["background"] == "rgba(0, 0, 0, 0)", where
        assert cell["layout"] == "auto", where  # columns sized by their content
    assert any(c["changed"] and c["background"] != "rgba(0, 0, 0, 0)" for c in cells)
    counts = [c for c in cells if c["table"] == "tpukit-summary" and c["text"].isdigit()]
    assert counts and all(c["align"] == "right" for c in counts)  # the op counts


# Each epoch line of fit's HTML progress: where its title, groups and pieces landed.
PROGRESS_LAYOUT = """() => [...document.querySelectorAll('.tpukit-progress')].map(line => {
  const title = line.firstElementChild.getBoundingClientRect();
  const body = line.lastElementChild, box = body.getBoundingClientRect();
  const groups = [...body.children].map(g => g.children.length && !g.firstElementChild.style.width
      ? [...g.children] : [g]);
  return {titleRight: title.right, left: box.left, right: box.right,
          groups: groups.map(pieces => pieces.map(p => {
            const r = p.getBoundingClientRect();
            return {text: p.innerText, rects: p.getClientRects().length, left: r.left,
                    right: r.right, top: r.top, width: r.width};
          }))};
})"""


def _epoch_lines() -> list[str]:
    """fit's three HTML lines of 01's MNIST run, the first with its compile and data note."""
    from tpukit.train._progress import EpochBar, Speed

    lines, now = [], time.perf_counter()
    for epoch in (1, 2, 3):
        bar = EpochBar(
            epoch,
            3,
            468,
            enabled=False,
            speed=Speed(128),
            started=now - (2.5 if epoch == 1 else 0.2),
            note="data placed in 75 ms" if epoch == 1 else "",
        )
        figures = {"loss": 0.3012, "accuracy": 0.9134, "val_loss": 0.2021, "val_accuracy": 0.9412}
        bar.advance(468, figures, seconds=2.4 if epoch == 1 else 0.19, compiled=epoch == 1)
        lines.append(bar.html())
    return lines


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_progress_line_wraps_under_its_bar_between_whole_groups(browser, theme):
    """At JupyterLab's output widths for a 1280 and a 1024 px window (and a narrow 420 px
    one), each epoch's line wraps under its bar, never under the title, and between whole
    groups (bar and count, figures, speed and time) before inside one; no figure breaks.
    It wrapped between single figures before, its second row under the title."""
    css = JUPYTERLAB_THEMES[theme] + JUPYTERLAB_TABLES
    SHOTS.mkdir(parents=True, exist_ok=True)
    tab = browser.new_page(viewport={"width": 1280, "height": 400})
    for window, width in ((1280, 1100), (1024, 845), (420, 380)):
        tab.set_content(
            page(css, _epoch_lines()).replace(
                'class="jp-Output', f'style="width:{width}px" class="jp-Output'
            )
        )
        tab.screenshot(path=str(SHOTS / f"progress_{theme}_{window}.png"))
        lines = tab.evaluate(PROGRESS_LAYOUT)
        assert len(lines) == 3 and len({round(line["left"]) for line in lines}) == 1  # bars aligned
        for line in lines:
            pieces = [p for group in line["groups"] for p in group]
            where = f"{theme} {window}px: {[p['text'] for p in pieces]}"
            assert all(p["rects"] == 1 and p["right"] <= line["right"] + 1 for p in pieces), where
            assert all(p["left"] >= line["titleRight"] for p in pieces), where
            starts = [p for a, p in zip(pieces, pieces[1:]) if p["top"] > a["top"] + 1]
            assert all(abs(p["left"] - line["left"]) < 1 for p in starts), where  # under the bar
            for group in line["groups"]:  # a group breaks inside only when a row can't hold it
                if len({round(p["top"]) for p in group}) > 1:
                    assert sum(p["width"] for p in group) > line["right"] - line["left"], where
    tab.close()
