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
  return {nodes: +root.dataset.nodes, boxes: boxes.length, cut,
          edges: root.querySelectorAll('path.tkg-edge').length,
          scale: +root.dataset.scale};
}"""
