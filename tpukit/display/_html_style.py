"""How tpukit's HTML tables look in every notebook frontend, light and dark.

Frontends style every table in an output: JupyterLab and Notebook 7 right-align
each cell, pad it by 0.5em, fix the table layout and stripe the rows
(``:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon td``, ``.jp-RenderedHTMLCommon
tbody tr:nth-child(odd)``), VS Code draws cell borders, and Colab has rules of its own.
tpukit's rules are therefore written under its root class repeated three times
(``.tpukit-out.tpukit-out.tpukit-summary td``): more specific than any of those, and
still plain CSS in the output, so a saved notebook looks the same. Colours come from
the frontend's theme variables (JupyterLab's ``--jp-*``, VS Code's ``--vscode-*``,
Colab's ``--colab-*``) with neutral fallbacks that read on light and dark.

    >>> html = f'{table_style("tpukit-diff", "& tr.changed td{font-weight:600}")}'
    >>> html += f'<div class="{root_classes("tpukit-diff")}"><table>...</table></div>'
"""

from __future__ import annotations

ROOT = "tpukit-out"

_FONT = (
    "var(--jp-code-font-family,var(--vscode-editor-font-family,"
    "ui-monospace,SFMono-Regular,Menlo,Consolas,'Liberation Mono',monospace))"
)
_TEXT = "var(--jp-ui-font-color1,inherit)"
_MUTED = "var(--jp-ui-font-color2,var(--vscode-descriptionForeground,var(--colab-secondary-text-color,#888)))"
_BORDER = "var(--jp-border-color2,var(--vscode-editorWidget-border,var(--colab-border-color,rgba(128,128,128,.4))))"

#: The rules every tpukit table gets; ``&`` stands for the scoped root.
_BASE = (
    f"&{{font-family:{_FONT};font-size:var(--jp-code-font-size,12px);line-height:1.4;"
    f"color:{_TEXT};text-align:left}}"
    # Each table scrolls on its own when wider than its output (its scrollbar right under
    # it, not under the output's last table), and no cell breaks a word to fit.
    "& table{border-collapse:collapse;border-spacing:0;border:none;table-layout:auto;"
    "width:auto;max-width:100%;display:block;overflow-x:auto;margin:2px 0;"
    "font-size:inherit;color:inherit;background:none}"
    "& thead,& tbody,& tr,& tbody tr:nth-child(n){border:none;background:none;"
    "text-align:left;vertical-align:top}"
    "& th,& td{padding:1px 8px;text-align:left;vertical-align:top;line-height:inherit;"
    "white-space:normal;overflow-wrap:normal;word-break:normal;max-width:none;border:none;"
    "background:none;color:inherit;font-size:inherit;font-family:inherit}"
    "& th{font-weight:600}"
    # A shadow, not a border: VS Code's output webview sets ``border: none !important``.
    f"& thead th{{box-shadow:inset 0 -1px 0 {_BORDER}}}"
    "& td.num,& th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    "& td.nowrap{white-space:nowrap}"
    "& code{background:none;padding:0;font-family:inherit;font-size:inherit;color:inherit}"
    "& details>summary{cursor:pointer;margin-top:4px;color:inherit}"
)


def scope(kind: str) -> str:
    """The selector tpukit's rules for ``kind`` start with (three classes: wins over frontends)."""
    return f".{ROOT}.{ROOT}.{kind}"


def root_classes(kind: str) -> str:
    """The ``class`` attribute of the element that holds one ``kind`` of output."""
    return f"{ROOT} {kind}"


def table_style(kind: str, rules: str = "") -> str:
    """A ``<style>`` element: the base table rules plus ``rules``, ``&`` meaning the root."""
    css = (_BASE + rules).replace("&", scope(kind))
    return f"<style>{css}</style>"


#: Theme-aware colours for outputs' own rules (borders, secondary text).
BORDER_COLOR = _BORDER
MUTED_COLOR = _MUTED
