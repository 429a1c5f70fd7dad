"""A page that shows a ``text/html`` output the way JupyterLab's HTML renderer does (its
scripts re-created so that they run), served from ``ORIGIN`` in the browser tests."""

ORIGIN = "http://tpukit.test"
NOTEBOOK_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>
<div id="cells"></div>
<script>
// What JupyterLab's HTML renderer does with a text/html output.
window.showOutput = function (html) {
  var cell = document.createElement("div");
  cell.className = "jp-OutputArea-output";
  cell.innerHTML = html;
  cell.querySelectorAll("script").forEach(function (old) {
    var script = document.createElement("script");
    script.textContent = old.textContent;
    old.parentNode.replaceChild(script, old);
  });
  document.getElementById("cells").appendChild(cell);
};
</script></body></html>"""


# The first view as drawn: boxes drawn, boxes outside the view, edges drawn and the scale of the first view.
FIRST_VIEW_DRAWN = """() => {
  const root = document.querySelector('.tkg-root');
  const view = root.querySelector('.tkg-viewport').getBoundingClientRect();
  let cut = 0;
  const boxes = root.querySelectorAll('.tkg-node rect.tkg-box');
  for (const r of boxes) {
    const b = r.getBoundingClientRect();
    if (b.left < view.left - 1 || b.right > view.right + 1 || b.top < view.top - 1 ||
        b.bottom > view.bottom + 1) cut++;
  }
  let overrun = 0;  // open groups whose header text runs past their frame
  for (const g of root.querySelectorAll('.tkg-group')) {
    const frame = g.querySelector(':scope > rect.tkg-frame').getBoundingClientRect();
    const text = g.querySelector(':scope > .tkg-header > text').getBoundingClientRect();
    if (text.right > frame.right + 1) overrun++;
  }
  return {nodes: +root.dataset.nodes, boxes: boxes.length, cut, overrun,
          edges: root.querySelectorAll('path.tkg-edge').length,
          scale: +root.dataset.scale};
}"""


JUPYTERLAB_THEMES = {  # the variables JupyterLab 4's light and dark themes set on :root
    "light": "--jp-layout-color0:#ffffff;--jp-layout-color1:#ffffff;--jp-layout-color2:#eeeeee;"
    "--jp-ui-font-color0:rgba(0,0,0,1);--jp-ui-font-color1:rgba(0,0,0,0.87);"
    "--jp-ui-font-color2:rgba(0,0,0,0.54);--jp-border-color1:#bdbdbd;",
    "dark": "--jp-layout-color0:#111111;--jp-layout-color1:#212121;--jp-layout-color2:#424242;"
    "--jp-ui-font-color0:rgba(255,255,255,1);--jp-ui-font-color1:rgba(255,255,255,0.87);"
    "--jp-ui-font-color2:rgba(255,255,255,0.54);--jp-border-color1:#616161;",
}


#: JupyterLab's HTML renderer on a page whose output goes in ``#out``: the HTML put in
#: with innerHTML, then every <script> re-created so that it runs.
SHOW_OUTPUT = """window.showOutput = function (html) {
  var out = document.getElementById("out");
  out.innerHTML = html;
  out.querySelectorAll("script").forEach(function (old) {
    var script = document.createElement("script");
    script.textContent = old.textContent;
    old.parentNode.replaceChild(script, old);
  });
};
"""


def serve(page, pages: dict[str, str]) -> None:
    """Serves ``pages`` (path -> HTML) to ``page`` from `ORIGIN`."""
    page.route(
        "**/*",
        lambda route: route.fulfill(
            status=200, content_type="text/html", body=pages[route.request.url[len(ORIGIN) :]]
        ),
    )


LAB_PAGE = (
    """<!DOCTYPE html><html><head><meta charset="utf-8"><style>
:root {%(variables)s --jp-ui-font-size0:0.83333em; --jp-ui-font-size1:13px;
  --jp-content-font-family:system-ui, sans-serif;}
html, body {margin: 0; height: 100%%;}
body {background: var(--jp-layout-color0, #fff); color: var(--jp-ui-font-color1, #000);
  font-family: var(--jp-content-font-family, sans-serif);}
#panel {height: 100vh; overflow-y: auto;}
.jp-Cell {padding: 8px 16px 8px 80px;}
.jp-InputArea {height: 90px; background: var(--jp-layout-color2, #eee);}
#out {width: 1000px;}
</style></head><body %(body)s><div id="panel">
<div class="jp-Cell"><div class="jp-InputArea"></div><div class="jp-OutputArea-output" id="out"></div></div>
<div class="jp-Cell"><div class="jp-InputArea" style="height: 1500px"></div></div>
</div><script>
// JupyterLab's HTML renderer: innerHTML, then every <script> re-created so that it runs.
"""
    + SHOW_OUTPUT
    + """</script></body></html>"""
)
