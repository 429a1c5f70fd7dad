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
