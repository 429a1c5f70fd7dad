// tpukit HLO graph viewer, panel: the facts of the selected node, beside the drawing.
//
// Text from the payload reaches the page through textContent only, never as markup.
//
// Takes: the viewport element (the panel floats at its right), a GraphTree (graph_tree.js)
//   for the node's facts, and callbacks: close() (the × button) and toggle() (the button that
//   opens or closes the node's group in place).
// Offers: new GraphPanel(viewport, tree, callbacks), with
//   show(i, first, last): the panel of node i, with rows [name, value, class] of the
//     caller's before (`first`) and after (`last`) its own; a row without a value is left out
//   hide()
/* global el, fmt, fmtBytes, fmtGrouped */
/* exported GraphPanel */

"use strict";

function GraphPanel(viewport, tree, callbacks) {
  var panel = el("div", "tkg-panel", viewport);
  panel.hidden = true;
  var head = el("div", "tkg-panel-head", panel);
  this.title = el("div", "tkg-panel-title", head);
  var close = el("button", "tkg-close", head);
  close.type = "button"; close.textContent = "\u00d7"; close.title = "close";
  this.fields = el("dl", "tkg-fields", panel);
  this.toggle = el("button", "tkg-panel-toggle", panel);
  this.toggle.type = "button";
  this.text = el("pre", "tkg-hlo", panel);
  this.element = panel;
  this.tree = tree;
  close.addEventListener("click", function () { callbacks.close(); });
  this.toggle.addEventListener("click", function () { callbacks.toggle(); });
  ["pointerdown", "wheel", "keydown"].forEach(function (type) {
    panel.addEventListener(type, function (event) { event.stopPropagation(); });
  });
}

GraphPanel.prototype.hide = function () { this.element.hidden = true; };

GraphPanel.prototype.show = function (i, first, last) {
  var d = this.tree.data, fields = this.fields, tree = this.tree;
  this.title.textContent = d.label[i];
  fields.textContent = "";
  function row(name, value, cls) {
    if (value === "" || value === undefined || value === null) return;
    var dt = el("dt", "", fields), dd = el("dd", cls || "", fields);
    dt.textContent = name; dd.textContent = String(value);
    dd.setAttribute("data-field", name);
  }
  function rows(list) { list.forEach(function (r) { row(r[0], r[1], r[2]); }); }
  rows(first || []);
  rows(this.facts(i));
  rows(last || []);
  var group = tree.hasChildren(i);
  this.toggle.hidden = !group;
  this.toggle.textContent = tree.isOpen(i) ? "Close group" : "Open in place";
  var text = tree.text(i);
  this.text.hidden = !text;
  this.text.textContent = text;
  this.element.hidden = false;
};

// What the payload says of node i, as [name, value] rows.
GraphPanel.prototype.facts = function (i) {
  var d = this.tree.data, tree = this.tree, out = [];
  function row(name, value) { out.push([name, value]); }
  var instruction = tree.isInstruction(i), group = tree.hasChildren(i);
  row("kind", instruction && group ? d.op[i] + " (opens in place)" : d.kinds[d.kind[i]][1]);
  if (instruction) {
    row("opcode", d.op[i]);
    row("category", d.categories[d.cat[i]].replace("_", " "));
    var shape = d.shape[i], m = /^(\w+)\[([^\]]*)\](?:\{([^}]*)\})?$/.exec(shape);
    row("shape", shape);
    row("dtype", m ? m[1] : (shape.charAt(0) === "(" ? "tuple" : ""));
    row("layout", m && m[3] !== undefined ? "{" + m[3] + "}" : "");
    var location = d.strings[d.location[i]], path = d.strings[d.source[i]];
    row("source", location || "(no source line in the HLO)");
    if (path !== location) row("file", path);
    row("op_name", d.strings[d.scope[i]]);
  }
  row("note", d.strings[d.note[i]]);
  if (group) row("contents", d.count[i] + " instructions");
  row("FLOPs (est.)", fmtGrouped(d.flops[i]) + " (" + fmt(d.flops[i], "FLOP") + ")");
  row("bytes (est.)", fmtGrouped(d.bytes[i]) + " (" + fmtBytes(d.bytes[i]) + ")");
  return out;
};
