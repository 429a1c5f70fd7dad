// tpukit HLO graph viewer, theme: light or dark, as the host page says.
//
// JupyterLab marks <body data-jp-theme-light>, VS Code gives <body> a vscode-light/-dark/
// -high-contrast class, other pages have an opaque background to read. Where none says
// (Colab draws outputs in transparent sandboxed iframes), no class is set and
// graph_view.css follows prefers-color-scheme.
//
// Takes: nothing.
// Offers: followTheme(root): root gets the class tkg-dark or tkg-light, kept up to date
//   while the page changes theme and the output is in the page.
/* exported followTheme */

"use strict";

function followTheme(root) {
  var body = root.ownerDocument.body, seen = false, observer = null;
  function apply() {
    if (root.isConnected) seen = true;
    else if (seen && observer) { observer.disconnect(); return; }  // the output was removed
    var dark = pageIsDark(root);
    root.classList.toggle("tkg-dark", dark === true);
    root.classList.toggle("tkg-light", dark === false);
  }
  apply();
  if (body && typeof MutationObserver !== "undefined") {
    observer = new MutationObserver(apply);
    observer.observe(body, {attributes: true, attributeFilter: ["class", "data-jp-theme-light"]});
  }
}

// true, false, or null where the page does not say.
function pageIsDark(root) {
  var body = root.ownerDocument.body;
  if (body) {
    var jupyter = body.getAttribute("data-jp-theme-light");
    if (jupyter === "true" || jupyter === "false") return jupyter === "false";
    var cls = body.classList;
    if (cls.contains("vscode-light") || cls.contains("vscode-high-contrast-light")) return false;
    if (cls.contains("vscode-dark") || cls.contains("vscode-high-contrast")) return true;
  }
  for (var node = root.parentElement; node; node = node.parentElement) {
    var rgba = /rgba?\(([\d.]+)[, ]+([\d.]+)[, ]+([\d.]+)(?:[,/ ]+([\d.]+))?/.exec(
      getComputedStyle(node).backgroundColor);
    if (rgba && (rgba[4] === undefined || +rgba[4] > 0.5)) {
      return 0.2126 * rgba[1] + 0.7152 * rgba[2] + 0.0722 * rgba[3] < 110;
    }
  }
  return null;
}
