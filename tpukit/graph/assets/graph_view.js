// tpukit HLO graph viewer: draws the payload that tpukit/graph/_graph_view.py writes.
//
// GraphView owns the page of one graph and composes its parts, each in its own file:
//   graph_tree.js    GraphTree: the payload's tree of nodes, which groups are open, edges
//   graph_bodies.js  insertBodies: the fusion bodies the payload carries apart, put in place
//   graph_layout.js  GraphLayout: node sizes and places (dagre, one open group at a time)
//   graph_camera.js  GraphCamera: which part of the drawing shows, at what scale
//   graph_panel.js   GraphPanel: the selected node's facts
//   graph_keys.js    GraphKeys: the drawing from the keyboard, as a tree
//   graph_colour.js  GraphColour: fills by op kind, or by measured time or memory
//   graph_theme.js   followTheme: the page's light or dark theme
//   graph_shared.js  the constants and helpers more than one part uses
// Each part says at its top what it takes and what it offers, and no file sets another's
// fields. This file builds the page, draws the boxes and edges where the layout put them,
// and answers clicks, keys (through GraphKeys) and searches.
// All text from the payload reaches the page through textContent, never as markup.
// Nothing here touches storage, the parent frame or the network, so the same output works
// in a sandboxed iframe (Colab) as in the page itself (JupyterLab, VS Code, a saved file).
//
// What the payload means is written once, in tpukit/graph/_graph_schema.py: the node kinds,
// the colour categories with their light and dark fills, the heat scale all come in the
// payload. This file keeps only the schema number it reads; a payload of another schema
// gets a one-line message instead of a drawing.
//
// Takes: the parts above; dagre (handed in by the page).
// Offers:
//   tpukitGraphView(root, b64, glance, dagre): the page's entry: unpack, check and draw a
//     payload; a glance's payload ("" for none) is drawn first, until the payload's replaces it
//   unpack(b64), schemaProblem(data), showStale(root, prefix, text): loading a payload
//   new GraphView(root, data, dagre, options), where options (all optional) are
//     folds: false to open what data.open says, however little of it fits the view
//     decorate(i, element, closed, width): called as each node is drawn (a closed box, or
//       an open group's frame), `width` wide
//     onSelect(i): a node was newly selected
//     panelRows(i): rows [name, value, class] that head the panel of node i
//   and a GraphView offers tree and layout (read only), select(i), reveal(i), element(i),
//   render(anchor), leave()
/* global GraphTree, GraphLayout, insertBodies, GraphCamera, GraphPanel, GraphKeys, GraphColour, followTheme, el, svg,
   clip, fmtBytes, fmtGrouped, fillCategory, HEADER_H, MAX_CHARS */
/* exported tpukitGraphView, unpack, schemaProblem, showStale, GraphView */

"use strict";

var SCHEMA = 2;  // _graph_schema.SCHEMA (tests/test_hlo_graph.py keeps the two equal)

function tpukitGraphView(root, b64, glance, dagre) {
  if (!root || root.getAttribute("data-state")) return;
  root.setAttribute("data-state", "loading");
  root.setAttribute("data-script-ms", performance.now().toFixed(1));
  followTheme(root);
  // A large graph's output also carries its first view alone (a glance, uncompressed): drawn
  // now, in this task, and replaced in one task by the whole graph once that is inflated, so
  // no frame shows the fallback or an empty box (a kernel's update of a glance included).
  var first = glance ? glanceView(root, glance, dagre) : null;
  unpack(b64).then(function (data) {
    root.setAttribute("data-decoded-ms", performance.now().toFixed(1));
    var stale = schemaProblem(data);
    if (first) first.leave();
    if (stale) showStale(root, "tkg", stale);
    else new GraphView(root, data, dagre);
  }).catch(function (err) {
    if (first) first.leave();
    var fallback = root.querySelector(".tkg-fallback");
    if (fallback) fallback.remove();
    var box = el("div", "tkg-error");
    box.textContent = "tpukit could not draw this HLO graph: " + (err && err.message || err);
    root.appendChild(box);
    root.setAttribute("data-state", "error");
  });
}

// ---------------------------------------------------------------- loading a payload

// The first view of a glance's payload, drawn now; null (and nothing drawn) if it cannot be.
function glanceView(root, b64, dagre) {
  var view = null;
  try {
    var data = readNow(base64Bytes(b64));
    if (!schemaProblem(data)) view = new GraphView(root, data, dagre);
  } catch {  // the whole graph still comes (or says what went wrong)
    var part = root.querySelector(".tkg-app");
    if (part) part.remove();
  }
  return view;
}

function unpack(b64) {
  var bytes;
  try { bytes = base64Bytes(b64); } catch (err) { return Promise.reject(err); }
  if (bytes[0] === 0) {  // not deflated (a glance: a few kB)
    try { return Promise.resolve(readNow(bytes)); } catch (err) { return Promise.reject(err); }
  }
  if (typeof DecompressionStream === "undefined") {
    return Promise.reject(new Error("this browser lacks DecompressionStream; use a current browser."));
  }
  // The bytes go straight into the inflater (a Blob's stream would fetch them back from the
  // browser's blob store); an error there reaches the caller through the buffer's promise.
  var inflate = new DecompressionStream("deflate"), writer = inflate.writable.getWriter();
  writer.write(bytes).catch(function () {});
  writer.close().catch(function () {});
  return new Response(inflate.readable).arrayBuffer().then(readWire).then(unpackColumns);
}

// A payload that is not deflated (it opens with a zero byte, which no zlib stream does).
function readNow(bytes) { return unpackColumns(readWire(bytes.buffer)); }

// The bytes of a base64 string: natively where the browser can (a millisecond for a
// megabyte, against ten for a loop over atob's characters).
function base64Bytes(b64) {
  if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(b64);
  var bin = atob(b64), bytes = new Uint8Array(bin.length);
  for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return bytes;
}

var WIRE_ARRAYS = {u8: Uint8Array, u16: Uint16Array, i32: Int32Array, f64: Float64Array};

// The inflated payload (tpukit/graph/_graph_wire.py's wire_bytes): JSON alone (it starts
// with "{"), or a zero byte, the JSON's length, the JSON, then the columns of whole numbers
// as typed arrays and the long columns of texts as UTF-8 lines ("lines": their length in
// bytes), each at a multiple of 8 bytes, as data.binary lists them. The arrays are views on
// the inflated buffer: no copy, no number parsed.
function readWire(buffer) {
  var bytes = new Uint8Array(buffer), decoder = new TextDecoder();
  if (bytes[0] !== 0) return JSON.parse(decoder.decode(bytes));
  var size = new DataView(buffer).getUint32(1, true), at = 5 + size;
  var data = JSON.parse(decoder.decode(bytes.subarray(5, at)));
  data.binary.forEach(function (column) {
    at += (8 - at % 8) % 8;
    if (column[1] === "lines") {
      var lines = bytes.subarray(at, at + column[2]);
      if (READ_WHEN_SHOWN[column[0]]) readWhenShown(data, column[0], lines, decoder);
      else data[column[0]] = decoder.decode(lines).split("\n");
      at += column[2];
      return;
    }
    var Typed = WIRE_ARRAYS[column[1]];
    data[column[0]] = new Typed(buffer, at, column[2]);
    at += column[2] * Typed.BYTES_PER_ELEMENT;
  });
  delete data.binary;
  return data;
}

// The columns of texts that the first view does not read: the instructions' HLO text, which
// only the panel shows (a third of a training step's payload: 5-20 ms to decode and split).
var READ_WHEN_SHOWN = {text: true, bodyText: true};

// data[name]: the lines of the UTF-8 `bytes`, decoded on its first read and kept.
function readWhenShown(data, name, bytes, decoder) {
  Object.defineProperty(data, name, {
    configurable: true,
    enumerable: true,
    get: function () {
      var lines = decoder.decode(bytes).split("\n");
      Object.defineProperty(data, name, {value: lines, writable: true, enumerable: true, configurable: true});
      return lines;
    },
  });
}

// The payload's shorter columns on the wire (tpukit/graph/_graph_wire.py), as the viewer reads
// them: shapes and opcodes by index into data.shapes and data.ops, blocks as [owner, edges]
// from the three arrays that carry them, params and roots as objects by owner from theirs.
// An instruction's HLO text stays as the wire has it (without the head that its label,
// shape and op give) until the panel shows it: GraphTree's text(i) puts the head back.
function unpackColumns(data) {
  if (data.shapes) {
    data.shape = byIndex(data.shapes, data.shape);
    delete data.shapes;
  }
  if (data.ops) {
    data.op = byIndex(data.ops, data.op);
    delete data.ops;
  }
  if (data.blockOwner) {
    var owner = data.blockOwner, size = data.blockSize, edges = blockEdges(data), start = 0;
    data.blocks = new Array(owner.length);
    for (var k = 0; k < owner.length; k++) {
      data.blocks[k] = [owner[k], edges.subarray(start, start + size[k])];
      start += size[k];
    }
    delete data.blockOwner; delete data.blockSize;
    delete data.blockFrom; delete data.blockTo; delete data.blockBytes; delete data.blockIndex;
  }
  if (data.paramOwner) {
    var params = {}, nodes = data.paramNodes, from = 0;
    for (var p = 0; p < data.paramOwner.length; p++) {
      params[data.paramOwner[p]] = nodes.subarray(from, from + data.paramSize[p]);
      from += data.paramSize[p];
    }
    var roots = {};
    for (var r = 0; r < data.rootOwner.length; r++) roots[data.rootOwner[r]] = data.rootNode[r];
    data.params = params;
    data.roots = roots;
    delete data.paramOwner; delete data.paramSize; delete data.paramNodes;
    delete data.rootOwner; delete data.rootNode;
  }
  return insertBodies(data);  // (graph_bodies.js: the fusion bodies the payload carries apart)
}

// The blocks' edges as [from, to, bytes, index] after one another, from the four columns
// the wire carries them in (bytes may need doubles: then all are).
function blockEdges(data) {
  var from = data.blockFrom, to = data.blockTo, bytes = data.blockBytes, index = data.blockIndex;
  var Flat = bytes instanceof Float64Array ? Float64Array : Int32Array;
  var edges = new Flat(4 * from.length);
  for (var i = 0, e = 0; i < from.length; i++, e += 4) {
    edges[e] = from[i]; edges[e + 1] = to[i]; edges[e + 2] = bytes[i]; edges[e + 3] = index[i];
  }
  return edges;
}

// The values of a table that a column of indices names, in the column's order.
function byIndex(table, indices) {
  var values = new Array(indices.length);
  for (var i = 0; i < indices.length; i++) values[i] = table[indices[i]];
  return values;
}

// "" when this viewer reads the payload's schema, else what to do. Payloads older than
// schemas (tpukit's first, "version": 1) say nothing and count as schema 1.
function schemaProblem(data) {
  var schema = typeof data.schema === "number" ? data.schema : 1;
  if (schema === SCHEMA) return "";
  return "This graph was made by " + (schema > SCHEMA ? "a newer" : "an older") +
    " tpukit (payload schema " + schema + ", this viewer reads " + SCHEMA + "): re-run the cell.";
}

// The stale-schema line in place of the drawing (prefix: "tkg" for a graph, "tkd" for a diff).
function showStale(root, prefix, text) {
  var fallback = root.querySelector("." + prefix + "-fallback");
  if (fallback) fallback.remove();
  var line = el("div", prefix + "-stale", root);
  line.textContent = text;
  root.setAttribute("data-state", "stale");
}

// ---------------------------------------------------------------- the viewer

function GraphView(root, data, dagre, options) {
  this.started = performance.now();  // the first render's "drawn in" counts the fold too
  root.setAttribute("data-started-ms", this.started.toFixed(1));
  this.root = root;
  this.data = data;
  this.options = options || {};
  this.tree = new GraphTree(data);
  this.layout = new GraphLayout(this.tree, dagre);
  this.colour = new GraphColour(data);
  this.shown = [];            // the nodes drawn as boxes (not open groups)
  this.selected = -1;
  this.hit = -1;
  this.renders = 0;
  this.searchState = {query: null, matches: [], index: -1};
  this.build();
  this.keys = new GraphKeys(this);
  // Folded and fitted while the view holds no drawing, so that reading its size lays out
  // the toolbar and an empty view, not the drawing too: the drawing is laid out once, in
  // the frame that shows it. The fit reads the sizes of what is open, folded or not.
  this.camera.foldToFit();
  this.layout.arrange();
  this.camera.fit();
  this.render(-1);
  root.setAttribute("data-ready-ms", performance.now().toFixed(1));
  root.setAttribute("data-state", data.glance ? "glance" : "ready");
}

// Takes this view out of the page (a glance, for the whole graph that replaces it).
GraphView.prototype.leave = function () {
  this.camera.activate(false);
  this.app.remove();
};

// A glance's answer to what needs the whole graph (opening a closed group, searching).
GraphView.prototype.waitForWhole = function () {
  this.status.textContent = "the whole graph of " + fmtGrouped(this.data.instructions) +
    " instructions is on its way from the kernel; if it does not come, run the cell again";
  this.root.setAttribute("data-waiting", "1");
};

// ---------------------------------------------------------------- page structure

GraphView.prototype.build = function () {
  var self = this, d = this.data, root = el("div", "tkg-app");
  var fallback = this.root.querySelector(".tkg-fallback");
  if (fallback) fallback.remove();
  this.root.appendChild(root);  // beside the <style>, which must stay
  this.app = root;
  var bar = el("div", "tkg-toolbar", root);
  var title = el("span", "tkg-title", bar);
  title.textContent = d.title;
  title.title = d.title + (d.stage ? " (" + d.stage + ")" : "") + ", module " + d.module;
  if (d.stage) { var stage = el("span", "tkg-stage", bar); stage.textContent = d.stage; }
  var search = el("input", "tkg-search", bar);
  search.type = "search";
  search.placeholder = "search: name, opcode, scope, file.py:line";
  search.setAttribute("aria-label", "search the graph");
  var hits = el("span", "tkg-hits", bar);
  var fit = el("button", "tkg-fit", bar);
  fit.type = "button"; fit.textContent = "Fit"; fit.title = "show the whole graph";
  var reset = el("button", "tkg-reset", bar);
  reset.type = "button"; reset.textContent = "Collapse"; reset.title = "back to the first view";
  this.status = el("span", "tkg-status", bar);
  this.hits = hits;

  var viewport = el("div", "tkg-viewport", root);
  var drawing = svg("svg", {"class": "tkg-svg"}, viewport);
  var defs = svg("defs", {}, drawing);
  this.arrowId = (this.root.id || "tkg") + "-arrow";
  var marker = svg("marker", {id: this.arrowId, viewBox: "0 0 10 10", refX: "9", refY: "5",
    markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse", markerUnits: "userSpaceOnUse"}, defs);
  svg("path", {"class": "tkg-arrowhead", d: "M0,0 L10,5 L0,10 z"}, marker);
  this.scene = svg("g", {"class": "tkg-scene"}, drawing);
  this.viewport = viewport;
  this.panel = null;  // made when a node is first selected (panelOf)

  // Below the drawing, never over it: the colour key and how to zoom.
  var legend = el("div", "tkg-legend", root);
  d.legend.forEach(function (entry) {
    var item = el("span", "tkg-key", legend);
    fillCategory(el("i", "", item), d, d.categories.indexOf(entry[0]));
    item.appendChild(document.createTextNode(entry[1]));
  });
  var hint = el("span", "tkg-hint", legend);
  this.colour.buildKey({root: this.root, bar: bar, status: this.status, legend: legend, hint: hint}, function () {
    self.render(-1);
    if (self.selected >= 0) self.select(self.selected);
  });
  this.camera = new GraphCamera({
    root: this.root, viewport: viewport, scene: this.scene, legend: legend, hint: hint,
    tree: this.tree, layout: this.layout, folds: this.options.folds,
    shown: function () { return self.tree.boxes(); },
    redraw: function () { self.render(-1); },
    click: function (target) { self.click(target); },
    open: function (i) { self.toggle(i); }
  });

  fit.addEventListener("click", function () { self.camera.fit(true); });
  reset.addEventListener("click", function () { self.hit = -1; self.camera.firstView(); });
  search.addEventListener("keydown", function (event) {
    event.stopPropagation();  // keep notebook shortcuts out of the search box
    if (event.key === "Enter") { event.preventDefault(); self.find(search.value, event.shiftKey ? -1 : 1); }
  });
  search.addEventListener("keyup", function (event) { event.stopPropagation(); });
  search.addEventListener("keypress", function (event) { event.stopPropagation(); });
};

// The panel of the selected node, made on the first selection: the first view has none.
GraphView.prototype.panelOf = function () {
  var self = this;
  if (!this.panel) {
    this.panel = new GraphPanel(this.viewport, this.tree, {
      close: function () { self.select(-1); },
      toggle: function () { if (self.selected >= 0) self.toggle(self.selected); }
    });
  }
  return this.panel;
};

GraphView.prototype.click = function (target) {
  if (!target || !target.closest) return;
  var toggle = target.closest(".tkg-toggle");
  var holder = target.closest("[data-node]");
  if (!holder) { this.select(-1); return; }
  var id = +holder.getAttribute("data-node");
  if (toggle) this.toggle(id); else this.select(id);
};

// The drawn element of node i (a box or an open group's frame), or null.
GraphView.prototype.element = function (i) {
  return this.scene.querySelector('[data-node="' + i + '"]');
};

// ---------------------------------------------------------------- drawing

// Draw what is open, keeping node `anchor` (if >= 0) where it was on screen.
GraphView.prototype.render = function (anchor) {
  var t0 = this.renders ? performance.now() : this.started, layout = this.layout;
  var before = anchor >= 0 ? [layout.x[anchor], layout.y[anchor]] : null;
  var held = this.keys.holding();
  layout.arrange();
  var edges = this.tree.visibleEdges();
  var scene = this.scene;
  while (scene.firstChild) scene.removeChild(scene.firstChild);
  var boxes = svg("g", {"class": "tkg-boxes"}, scene);
  var edgeLayer = svg("g", {"class": "tkg-edges"}, scene);
  var nodeLayer = svg("g", {"class": "tkg-nodes"}, scene);
  this.shown = [];
  this.drawNode(0, boxes, nodeLayer);
  for (var e = 0; e < edges.length; e++) this.drawEdge(edges[e], edgeLayer);
  this.keys.drawn(held);
  this.camera.redrawn(before, before && [layout.x[anchor], layout.y[anchor]]);
  this.renders += 1;
  var now = performance.now(), ms = now - t0, count = this.shown.length;
  this.status.textContent = count + " nodes \u00b7 " + edges.length + " edges \u00b7 " +
    fmtGrouped(this.data.instructions) + " instructions as written \u00b7 drawn in " + Math.round(ms) + " ms" +
    (this.data.glance ? " \u00b7 the rest is loading" : "");
  this.root.setAttribute("data-nodes", String(count));
  this.root.setAttribute("data-edges", String(edges.length));
  this.root.setAttribute("data-renders", String(this.renders));
  this.root.setAttribute("data-render-ms", ms.toFixed(1));
  this.root.setAttribute("data-drawn-ms", now.toFixed(1));
};

GraphView.prototype.drawNode = function (i, boxes, nodes) {
  var d = this.data, self = this, tree = this.tree, L = this.layout;
  var decorate = this.options.decorate;
  if (tree.isOpen(i)) {
    var group = svg("g", {"class": "tkg-group", "data-node": String(i), "data-name": d.label[i],
      transform: "translate(" + L.x[i] + "," + L.y[i] + ")"}, boxes);
    if (i === this.selected) group.classList.add("tkg-selected");
    if (i === this.hit) group.classList.add("tkg-hit");
    svg("rect", {"class": "tkg-frame", width: L.w[i], height: L.h[i], rx: 6}, group);
    var header = svg("g", {"class": "tkg-header"}, group);
    svg("rect", {width: L.w[i], height: HEADER_H, fill: "transparent"}, header);
    if (i !== 0) this.drawToggle(header, 6, 5, "\u2212");
    var left = i !== 0 ? 26 : 8;
    var text = svg("text", {x: left, y: 16}, header);
    text.textContent = L.headerText(i);
    if (i === 0) this.camera.setTitle(text);
    this.colour.drawHeader(i, header, left, text.textContent.length, L.w[i]);
    if (decorate) decorate(i, group, false, L.w[i]);
    this.keys.mark(i, group, text.textContent);
    tree.children(i).forEach(function (kid) { self.drawNode(kid, boxes, nodes); });
    return;
  }
  this.shown.push(i);
  var node = svg("g", {"class": "tkg-node", "data-node": String(i), "data-name": d.label[i],
    transform: "translate(" + L.x[i] + "," + L.y[i] + ")"}, nodes);
  var expandable = tree.hasChildren(i);
  if (expandable) node.classList.add("tkg-collapsed");
  if (i === this.selected) node.classList.add("tkg-selected");
  if (i === this.hit) node.classList.add("tkg-hit");
  var instruction = tree.isInstruction(i);
  var box = svg("rect", {"class": "tkg-box", width: L.w[i], height: L.h[i], rx: instruction ? 3 : 7}, node);
  this.colour.paint(i, node, box);
  if (expandable && !instruction) {
    svg("rect", {"class": "tkg-inset", x: 3, y: 3, width: L.w[i] - 6, height: L.h[i] - 6, rx: 5}, node);
  }
  var lines = L.lines(i), x = expandable ? 24 : 8;
  var title = svg("text", {x: x, y: 15}, node);
  title.textContent = clip(lines[0], MAX_CHARS);
  var sub = svg("text", {"class": "tkg-sub", x: x, y: 29}, node);
  sub.textContent = clip(lines[1], MAX_CHARS);
  if (expandable) this.drawToggle(node, 5, 11, "+");
  if (decorate) decorate(i, node, true, L.w[i]);
  this.keys.mark(i, node, lines[0] + ", " + lines[1]);
};

GraphView.prototype.drawToggle = function (parent, x, y, sign) {
  var toggle = svg("g", {"class": "tkg-toggle", transform: "translate(" + x + "," + y + ")"}, parent);
  svg("rect", {width: 14, height: 14, rx: 3}, toggle);
  var text = svg("text", {x: 3.5, y: 11}, toggle);
  text.textContent = sign;
  var label = svg("title", {}, toggle);
  label.textContent = sign === "+" ? "open" : "close";
};

GraphView.prototype.drawEdge = function (edge, layer) {
  var a = edge.a, b = edge.b, d = this.data, parent = d.parent, L = this.layout;
  var l = parent[a];
  while (l >= 0 && !this.tree.isAncestor(l, b)) l = parent[l];
  var siblings = l >= 0 && parent[a] === l && parent[b] === l;
  var pts = siblings ? L.route(l, a, b) : [];
  // A back edge (target above its source, from a cycle that grouping made) leaves the
  // source's top and enters the target's bottom, so it never loops around the boxes.
  var back = L.y[b] + L.h[b] <= L.y[a];
  var x1 = L.x[a] + L.w[a] / 2, y1 = back ? L.y[a] : L.y[a] + L.h[a];
  var x2 = L.x[b] + L.w[b] / 2, y2 = back ? L.y[b] + L.h[b] : L.y[b];
  var path = smooth([[x1, y1]].concat(pts, [[x2, y2]]));
  var width = Math.min(7, Math.max(0.7, 0.6 + 0.55 * Math.log2(1 + edge.bytes / 65536)));
  var line = svg("path", {"class": "tkg-edge" + (back ? " tkg-back" : "") + (siblings ? "" : " tkg-cross"), d: path,
    "stroke-width": width.toFixed(2), "marker-end": "url(#" + this.arrowId + ")",
    "data-from": String(a), "data-to": String(b)}, layer);
  var tip = svg("title", {}, line);
  tip.textContent = d.label[a] + " \u2192 " + d.label[b] + ": " + fmtBytes(edge.bytes);
};

// A uniform B-spline through the points (like d3.curveBasis): it follows dagre's route
// without the overshoot an interpolating curve makes where the route zigzags.
function smooth(p) {
  var out = "M" + p[0][0] + "," + p[0][1];
  if (p.length === 2) {
    var my = (p[0][1] + p[1][1]) / 2;
    return out + " C" + p[0][0] + "," + my + " " + p[1][0] + "," + my + " " + p[1][0] + "," + p[1][1];
  }
  var x0 = p[0][0], y0 = p[0][1], x1 = p[1][0], y1 = p[1][1];
  out += " L" + (5 * x0 + x1) / 6 + "," + (5 * y0 + y1) / 6;
  function segment(x, y) {
    out += " C" + (2 * x0 + x1) / 3 + "," + (2 * y0 + y1) / 3 + " " + (x0 + 2 * x1) / 3 + "," +
      (y0 + 2 * y1) / 3 + " " + (x0 + 4 * x1 + x) / 6 + "," + (y0 + 4 * y1 + y) / 6;
    x0 = x1; y0 = y1; x1 = x; y1 = y;
  }
  for (var i = 2; i < p.length; i++) segment(p[i][0], p[i][1]);
  segment(x1, y1);
  return out + " L" + x1 + "," + y1;
}

// ---------------------------------------------------------------- interaction

GraphView.prototype.toggle = function (i) {
  var tree = this.tree;
  if (!tree.hasChildren(i) || i === 0) return;
  if (!tree.canOpen(i)) { this.waitForWhole(); return; }
  tree.setOpen(i, !tree.isOpen(i));
  this.camera.stopRefitting();
  this.camera.stopRefolding();
  this.render(i);
  this.camera.grow();
  if (this.selected === i) this.select(i);
  var panel = this.panel && !this.panel.element.hidden ? this.panel.element.offsetWidth : 0;
  if (tree.isOpen(i)) this.camera.follow(i, panel);  // opened: into view (closed: nothing moves)
};

GraphView.prototype.select = function (i) {
  var changed = i !== this.selected;
  this.selected = i;
  var nodes = this.scene.querySelectorAll(".tkg-selected");
  for (var k = 0; k < nodes.length; k++) nodes[k].classList.remove("tkg-selected");
  if (i < 0) { if (this.panel) this.panel.hide(); return; }
  var shown = this.element(i);
  if (shown) shown.classList.add("tkg-selected");
  var first = this.options.panelRows ? this.options.panelRows(i) : [];
  this.panelOf().show(i, first, this.colour.rows(i));
  if (changed && this.options.onSelect) this.options.onSelect(i);
};

// Open the groups around node i and centre the view on it (the whole view for the root).
GraphView.prototype.reveal = function (i) {
  this.tree.openAround(i);
  this.render(-1);
  this.camera.grow();
  if (i === 0) this.camera.fit(false); else this.camera.centerOn(i);
};

GraphView.prototype.find = function (query, step) {
  query = query.trim().toLowerCase();
  var state = this.searchState;
  if (!query) { this.hits.textContent = ""; this.hit = -1; this.render(-1); return; }
  if (this.data.glance) { this.waitForWhole(); return; }
  if (state.query !== query) {
    state.query = query; state.index = -1; state.matches = this.tree.matches(query);
  }
  if (!state.matches.length) { this.hits.textContent = "no match"; return; }
  state.index = (state.index + step + state.matches.length) % state.matches.length;
  var target = state.matches[state.index];
  this.tree.openAround(target);
  this.camera.stopRefolding();
  this.hit = target;
  this.render(-1);
  this.camera.grow();
  this.camera.centerOn(target);
  this.hits.textContent = (state.index + 1) + " of " + state.matches.length;
  this.root.setAttribute("data-hit", String(target));
};
