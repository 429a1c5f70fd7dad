// tpukit HLO graph viewer: draws the payload that tpukit/hlo/_graph_view.py writes.
//
// The graph is a tree of nodes (instructions, name-scope groups, parts, computations),
// numbered depth first, plus data edges per computation. Only open groups show their
// children. This file builds the page, draws, and answers clicks and searches;
// graph_layout.js places the nodes and graph_camera.js moves the view.
// All text from the payload reaches the page through textContent, never as markup.
// Nothing here touches storage, the parent frame or the network, so the same output works
// in a sandboxed iframe (Colab) as in the page itself (JupyterLab, VS Code, a saved file).
//
// What the payload means is written once, in tpukit/hlo/_graph_schema.py: the node kinds,
// the colour categories with their light and dark fills, the heat scale all come in the
// payload. This file keeps only the schema number it reads; a payload of another schema
// gets a one-line message instead of a drawing.

"use strict";

var SVG_NS = "http://www.w3.org/2000/svg";
var SCHEMA = 2;  // _graph_schema.SCHEMA (tests/test_hlo_graph.py keeps the two equal)

function tpukitGraphView(root, b64, dagre) {
  if (!root || root.getAttribute("data-state")) return;
  root.setAttribute("data-state", "loading");
  followTheme(root);
  unpack(b64).then(function (data) {
    var stale = schemaProblem(data);
    if (stale) showStale(root, "tkg", stale);
    else new GraphView(root, data, dagre);
  }).catch(function (err) {
    var fallback = root.querySelector(".tkg-fallback");
    if (fallback) fallback.remove();
    var box = el("div", "tkg-error");
    box.textContent = "tpukit could not draw this HLO graph: " + (err && err.message || err);
    root.appendChild(box);
    root.setAttribute("data-state", "error");
  });
}

function unpack(b64) {
  var bin = atob(b64), bytes = new Uint8Array(bin.length);
  for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  if (typeof DecompressionStream === "undefined") {
    return Promise.reject(new Error("this browser lacks DecompressionStream; use a current browser."));
  }
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Response(stream).text().then(JSON.parse).then(unpackColumns);
}

// The payload's shorter columns on the wire (tpukit/hlo/_graph_wire.py), as the viewer reads
// them: shapes by index into data.shapes; an instruction's HLO text without the head that its
// label, shape and op give ("%name = shape op"; textHead 2: after "ROOT ", 0: none).
function unpackColumns(data) {
  if (data.shapes) {
    data.shape = data.shape.map(function (k) { return data.shapes[k]; });
    delete data.shapes;
  }
  if (data.textHead) {
    var heads = data.textHead, text = data.text;
    for (var i = 0; i < heads.length; i++) {
      if (!heads[i]) continue;
      text[i] = (heads[i] === 2 ? "ROOT %" : "%") + data.label[i] + " = " + data.shape[i] + " " +
        data.op[i] + text[i];
    }
    delete data.textHead;
  }
  return data;
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

// ---------------------------------------------------------------- theme

// Light or dark, as the host page says: JupyterLab marks <body data-jp-theme-light>, VS Code
// gives <body> a vscode-light/-dark/-high-contrast class, other pages have an opaque
// background to read. Where none says (Colab draws outputs in transparent sandboxed
// iframes), no class is set and graph_view.css follows prefers-color-scheme.
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

// ---------------------------------------------------------------- small helpers

function el(tag, cls, parent) {
  var node = document.createElement(tag);
  if (cls) node.className = cls;
  if (parent) parent.appendChild(node);
  return node;
}

function svg(tag, attrs, parent) {
  var node = document.createElementNS(SVG_NS, tag);
  for (var key in attrs) node.setAttribute(key, attrs[key]);
  if (parent) parent.appendChild(node);
  return node;
}

function clip(text, n) { return text.length > n ? text.slice(0, n - 1) + "\u2026" : text; }

function fmt(value, unit) {
  if (!value) return "0 " + unit;
  var steps = ["", "k", "M", "G", "T", "P"], i = 0;
  while (value >= 999.5 && i < steps.length - 1) { value /= 1000; i++; }  // 999.9 k is 1.00 M
  return (i ? value.toPrecision(3) : String(value)) + " " + steps[i] + unit;
}

function shortShape(shape) { return shape.replace(/\{[^{}]*\}/g, ""); }

// The CSS class of a colour category: "data_movement" -> "tkg-c-data-movement".
function categoryClass(name) { return "tkg-c-" + name.replace(/[^a-z]+/g, "-"); }

// ---------------------------------------------------------------- the viewer

function GraphView(root, data, dagre) {
  var self = this;
  this.root = root;
  this.data = data;
  this.dagre = dagre;
  this.instructionKind = data.kinds.findIndex(function (kind) { return kind[0] === "instruction"; });
  var n = data.kind.length;
  this.n = n;
  this.children = [];
  for (var i = 0; i < n; i++) this.children.push([]);
  for (i = 1; i < n; i++) this.children[data.parent[i]].push(i);
  this.end = new Int32Array(n);  // subtree of i: ids [i, end[i])
  for (i = n - 1; i >= 0; i--) {
    if (this.end[i] < i + 1) this.end[i] = i + 1;
    var p = data.parent[i];
    if (p >= 0 && this.end[p] < this.end[i]) this.end[p] = this.end[i];
  }
  this.blocks = new Map();
  data.blocks.forEach(function (block) { self.blocks.set(block[0], block[1]); });
  this.expanded = new Uint8Array(n);
  this.layouts = new Map();   // group -> cached dagre layout of its children
  this.sizes = new Map();     // node -> {w, h} closed size
  this.geom = new Map();      // group -> make-room state for the current render
  this.x = new Float64Array(n);
  this.y = new Float64Array(n);
  this.w = new Float64Array(n);
  this.h = new Float64Array(n);
  this.shown = [];            // the nodes drawn as boxes (not open groups)
  this.selected = -1;
  this.hit = -1;
  this.view = {k: 1, tx: MARGIN, ty: MARGIN};
  this.renders = 0;
  this.searchState = {query: null, matches: [], index: -1};
  this.resetOpen();
  this.build();
  this.foldToFit();
  this.render(-1);
  this.fit();
  root.setAttribute("data-ready-ms", performance.now().toFixed(1));
  root.setAttribute("data-state", "ready");
}

GraphView.prototype.resetOpen = function () {
  this.expanded.fill(0);
  for (var i = 0; i < this.data.open.length; i++) this.expanded[this.data.open[i]] = 1;
  this.expanded[0] = 1;
};

GraphView.prototype.isOpen = function (i) { return this.expanded[i] === 1 && this.children[i].length > 0; };

GraphView.prototype.isAncestor = function (a, b) { return a <= b && b < this.end[a]; };

// Fill an element (a node's box, a legend key) with colour category k of the payload's
// palette: it carries both themes' fills and graph_view.css picks the page's.
GraphView.prototype.fillWith = function (node, k) {
  var d = this.data;
  node.classList.add("tkg-filled", categoryClass(d.categories[k]));
  node.style.setProperty("--tkg-fill-light", d.palette.light[k]);
  node.style.setProperty("--tkg-fill-dark", d.palette.dark[k]);
};

// ---------------------------------------------------------------- page structure

GraphView.prototype.build = function () {
  var self = this, d = this.data, root = el("div", "tkg-app");
  var fallback = this.root.querySelector(".tkg-fallback");
  if (fallback) fallback.remove();
  this.root.appendChild(root);  // beside the <style>, which must stay
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
  this.search = search;

  var viewport = el("div", "tkg-viewport", root);
  this.viewport = viewport;
  this.svg = svg("svg", {"class": "tkg-svg"}, viewport);
  var defs = svg("defs", {}, this.svg);
  this.arrowId = (this.root.id || "tkg") + "-arrow";
  var marker = svg("marker", {id: this.arrowId, viewBox: "0 0 10 10", refX: "9", refY: "5",
    markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse", markerUnits: "userSpaceOnUse"}, defs);
  svg("path", {"class": "tkg-arrowhead", d: "M0,0 L10,5 L0,10 z"}, marker);
  this.scene = svg("g", {"class": "tkg-scene"}, this.svg);
  this.buildPanel(viewport);

  // Below the drawing, never over it: the colour key and how to zoom.
  var legend = el("div", "tkg-legend", root);
  d.legend.forEach(function (entry) {
    var item = el("span", "tkg-key", legend);
    self.fillWith(el("i", "", item), d.categories.indexOf(entry[0]));
    item.appendChild(document.createTextNode(entry[1]));
  });
  this.legend = legend;
  this.hint = el("span", "tkg-hint", legend);
  this.hint.textContent = HINT;
  if (d.time) this.buildTimeKey(bar, legend);
  if (d.memory) this.buildMemoryKey(bar, legend);  // graph_memory.js

  fit.addEventListener("click", function () { self.fit(true); });
  reset.addEventListener("click", function () { self.hit = -1; self.firstView(); });
  search.addEventListener("keydown", function (event) {
    event.stopPropagation();  // keep notebook shortcuts out of the search box
    if (event.key === "Enter") { event.preventDefault(); self.find(search.value, event.shiftKey ? -1 : 1); }
  });
  search.addEventListener("keyup", function (event) { event.stopPropagation(); });
  search.addEventListener("keypress", function (event) { event.stopPropagation(); });
  this.bindCamera();
};

GraphView.prototype.buildPanel = function (viewport) {
  var self = this;
  var panel = el("div", "tkg-panel", viewport);
  panel.hidden = true;
  var head = el("div", "tkg-panel-head", panel);
  this.panelTitle = el("div", "tkg-panel-title", head);
  var close = el("button", "tkg-close", head);
  close.type = "button"; close.textContent = "\u00d7"; close.title = "close";
  this.panelFields = el("dl", "tkg-fields", panel);
  this.panelToggle = el("button", "tkg-panel-toggle", panel);
  this.panelToggle.type = "button";
  this.panelText = el("pre", "tkg-hlo", panel);
  this.panel = panel;
  close.addEventListener("click", function () { self.select(-1); });
  this.panelToggle.addEventListener("click", function () {
    if (self.selected >= 0) self.toggle(self.selected);
  });
  ["pointerdown", "wheel", "keydown"].forEach(function (type) {
    panel.addEventListener(type, function (event) { event.stopPropagation(); });
  });
};

GraphView.prototype.click = function (target) {
  if (!target || !target.closest) return;
  var toggle = target.closest(".tkg-toggle");
  var holder = target.closest("[data-node]");
  if (!holder) { this.select(-1); return; }
  var id = +holder.getAttribute("data-node");
  if (toggle) this.toggle(id); else this.select(id);
};

// ---------------------------------------------------------------- drawing

GraphView.prototype.render = function (anchor) {
  var t0 = performance.now();
  var before = anchor >= 0 ? [this.x[anchor], this.y[anchor]] : null;
  this.geom.clear();
  this.measure(0);
  this.place(0, 0, 0);
  var edges = this.visibleEdges();
  var scene = this.scene;
  while (scene.firstChild) scene.removeChild(scene.firstChild);
  var boxes = svg("g", {"class": "tkg-boxes"}, scene);
  var edgeLayer = svg("g", {"class": "tkg-edges"}, scene);
  var nodeLayer = svg("g", {"class": "tkg-nodes"}, scene);
  this.shown = [];
  this.drawNode(0, boxes, nodeLayer);
  for (var e = 0; e < edges.length; e++) this.drawEdge(edges[e], edgeLayer);
  if (before) {
    this.view.tx += (before[0] - this.x[anchor]) * this.view.k;
    this.view.ty += (before[1] - this.y[anchor]) * this.view.k;
  }
  this.applyView();
  this.renders += 1;
  var ms = performance.now() - t0, count = this.shown.length;
  this.status.textContent = count + " nodes \u00b7 " + edges.length + " edges \u00b7 " +
    this.data.instructions.toLocaleString() + " instructions in all \u00b7 drawn in " + Math.round(ms) + " ms";
  this.root.setAttribute("data-nodes", String(count));
  this.root.setAttribute("data-edges", String(edges.length));
  this.root.setAttribute("data-renders", String(this.renders));
  this.root.setAttribute("data-render-ms", ms.toFixed(1));
};

GraphView.prototype.drawNode = function (i, boxes, nodes) {
  var d = this.data, self = this;
  if (this.isOpen(i)) {
    var group = svg("g", {"class": "tkg-group", "data-node": String(i), "data-name": d.label[i],
      transform: "translate(" + this.x[i] + "," + this.y[i] + ")"}, boxes);
    if (i === this.selected) group.classList.add("tkg-selected");
    if (i === this.hit) group.classList.add("tkg-hit");
    svg("rect", {"class": "tkg-frame", width: this.w[i], height: this.h[i], rx: 6}, group);
    var header = svg("g", {"class": "tkg-header"}, group);
    svg("rect", {width: this.w[i], height: HEADER_H, fill: "transparent"}, header);
    if (i !== 0) this.drawToggle(header, 6, 5, "\u2212");
    var text = svg("text", {x: i !== 0 ? 26 : 8, y: 16}, header);
    text.textContent = this.headerText(i);
    if (i === 0) { this.rootTitle = text; this.keepTitleInView(); }
    this.drawHeaderTime(i, header, text.textContent.length);
    this.children[i].forEach(function (kid) { self.drawNode(kid, boxes, nodes); });
    return;
  }
  this.shown.push(i);
  var node = svg("g", {"class": "tkg-node", "data-node": String(i), "data-name": d.label[i],
    transform: "translate(" + this.x[i] + "," + this.y[i] + ")"}, nodes);
  var expandable = this.children[i].length > 0;
  if (expandable) node.classList.add("tkg-collapsed");
  if (i === this.selected) node.classList.add("tkg-selected");
  if (i === this.hit) node.classList.add("tkg-hit");
  var instruction = d.kind[i] === this.instructionKind;
  var box = svg("rect", {"class": "tkg-box", width: this.w[i], height: this.h[i], rx: instruction ? 3 : 7}, node);
  this.fillWith(box, d.cat[i]);
  this.paintTime(i, node, box);
  this.paintMemory(i, node, box);
  if (expandable && !instruction) {
    svg("rect", {"class": "tkg-inset", x: 3, y: 3, width: this.w[i] - 6, height: this.h[i] - 6, rx: 5}, node);
  }
  var lines = this.lines(i), left = expandable ? 24 : 8;
  var title = svg("text", {x: left, y: 15}, node);
  title.textContent = clip(lines[0], MAX_CHARS);
  var sub = svg("text", {"class": "tkg-sub", x: left, y: 29}, node);
  sub.textContent = clip(lines[1], MAX_CHARS);
  if (expandable) this.drawToggle(node, 5, 11, "+");
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
  var a = edge.a, b = edge.b, d = this.data, parent = d.parent;
  var l = parent[a];
  while (l >= 0 && !this.isAncestor(l, b)) l = parent[l];
  var siblings = l >= 0 && parent[a] === l && parent[b] === l;
  var pts = siblings ? this.route(l, a, b) : [];
  // A back edge (target above its source, from a cycle that grouping made) leaves the
  // source's top and enters the target's bottom, so it never loops around the boxes.
  var back = this.y[b] + this.h[b] <= this.y[a];
  var x1 = this.x[a] + this.w[a] / 2, y1 = back ? this.y[a] : this.y[a] + this.h[a];
  var x2 = this.x[b] + this.w[b] / 2, y2 = back ? this.y[b] + this.h[b] : this.y[b];
  var path = smooth([[x1, y1]].concat(pts, [[x2, y2]]));
  var width = Math.min(7, Math.max(0.7, 0.6 + 0.55 * Math.log2(1 + edge.bytes / 65536)));
  var line = svg("path", {"class": "tkg-edge" + (back ? " tkg-back" : "") + (siblings ? "" : " tkg-cross"), d: path,
    "stroke-width": width.toFixed(2), "marker-end": "url(#" + this.arrowId + ")",
    "data-from": String(a), "data-to": String(b)}, layer);
  var tip = svg("title", {}, line);
  tip.textContent = d.label[a] + " \u2192 " + d.label[b] + ": " + fmt(edge.bytes, "B");
};

// ---------------------------------------------------------------- interaction

GraphView.prototype.toggle = function (i) {
  if (!this.children[i].length || i === 0) return;
  this.expanded[i] = this.isOpen(i) ? 0 : 1;
  this.touched = true;
  this.opened = true;
  this.render(i);
  this.grow();
  if (this.selected === i) this.select(i);
};

GraphView.prototype.select = function (i) {
  this.selected = i;
  var nodes = this.scene.querySelectorAll(".tkg-selected");
  for (var k = 0; k < nodes.length; k++) nodes[k].classList.remove("tkg-selected");
  if (i < 0) { this.panel.hidden = true; return; }
  var shown = this.scene.querySelector('[data-node="' + i + '"]');
  if (shown) shown.classList.add("tkg-selected");
  this.fillPanel(i);
  this.panel.hidden = false;
};

GraphView.prototype.fillPanel = function (i) {
  var d = this.data, fields = this.panelFields, kind = d.kind[i];
  this.panelTitle.textContent = d.label[i];
  fields.textContent = "";
  function row(name, value) {
    if (value === "" || value === undefined || value === null) return;
    var dt = el("dt", "", fields), dd = el("dd", "", fields);
    dt.textContent = name; dd.textContent = String(value);
    dd.setAttribute("data-field", name);
  }
  var instruction = kind === this.instructionKind;
  row("kind", instruction && this.children[i].length ? d.op[i] + " (opens in place)" : d.kinds[kind][1]);
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
  if (this.children[i].length) row("contents", d.count[i] + " instructions");
  row("FLOPs (est.)", d.flops[i].toLocaleString() + " (" + fmt(d.flops[i], "FLOP") + ")");
  row("bytes (est.)", d.bytes[i].toLocaleString() + " (" + fmt(d.bytes[i], "B") + ")");
  if (d.time) this.timeRows(i, row);
  if (d.memory) this.memoryRows(i, row);
  this.panelToggle.hidden = !this.children[i].length;
  this.panelToggle.textContent = this.isOpen(i) ? "Close group" : "Open in place";
  this.panelText.hidden = !d.text[i];
  this.panelText.textContent = d.text[i];
};

GraphView.prototype.find = function (query, step) {
  query = query.trim().toLowerCase();
  var state = this.searchState, d = this.data;
  if (!query) { this.hits.textContent = ""; this.hit = -1; this.render(-1); return; }
  if (state.query !== query) {
    state.query = query; state.index = -1; state.matches = [];
    for (var i = 0; i < this.n; i++) {
      var hay = d.label[i] + "\n" + d.op[i] + "\n" + d.strings[d.scope[i]] + "\n" +
        d.strings[d.location[i]] + "\n" + d.strings[d.source[i]];
      if (hay.toLowerCase().indexOf(query) >= 0) state.matches.push(i);
    }
  }
  if (!state.matches.length) { this.hits.textContent = "no match"; return; }
  state.index = (state.index + step + state.matches.length) % state.matches.length;
  var target = state.matches[state.index];
  for (var a = d.parent[target]; a >= 0; a = d.parent[a]) this.expanded[a] = 1;
  this.opened = true;
  this.hit = target;
  this.render(-1);
  this.grow();
  this.centerOn(target);
  this.hits.textContent = (state.index + 1) + " of " + state.matches.length;
  this.root.setAttribute("data-hit", String(target));
};

// ---------------------------------------------------------------- measured time

// A profile (Compiled.profile) sends each node's measured seconds per run in data.time
// (null: not in the trace; a group's is the sum of its members'). Nodes are then coloured on
// a heat scale by their share of the program's time, on a log scale from 1% to 100%;
// "Colour: kind" in the toolbar goes back to the op-kind colours. The scale's colours, and
// where on it the fills turn dark enough for white text, come in the payload (data.heat).
var HEAT_DECADES = 2;

function heatPosition(share) {
  return share > 0 ? Math.max(0, Math.min(1, 1 + Math.log10(share) / HEAT_DECADES)) : 0;
}

function heatColour(scale, position) {
  var x = position * (scale.length - 1), k = Math.min(scale.length - 2, Math.floor(x)), f = x - k;
  var a = parseInt(scale[k].slice(1), 16), b = parseInt(scale[k + 1].slice(1), 16), rgb = [];
  for (var shift = 16; shift >= 0; shift -= 8) {
    var p = (a >> shift) & 255, q = (b >> shift) & 255;
    rgb.push(Math.round(p + (q - p) * f));
  }
  return "rgb(" + rgb.join(",") + ")";
}

function fmtSeconds(seconds) {
  var units = [["s", 1], ["ms", 1e-3], ["\u00b5s", 1e-6], ["ns", 1e-9]];
  for (var k = 0; k < units.length; k++) {
    if (seconds >= units[k][1] || k === units.length - 1) {
      return String(parseFloat((seconds / units[k][1]).toPrecision(3))) + " " + units[k][0];
    }
  }
}

function fmtShare(share) {
  var percent = 100 * share;
  return (percent >= 10 ? percent.toFixed(0) : String(parseFloat(percent.toPrecision(2)))) + "%";
}

GraphView.prototype.buildTimeKey = function (bar, legend) {
  var self = this, d = this.data;
  this.colourBy = "time";
  var toggle = el("button", "tkg-colour", null);
  toggle.type = "button";
  bar.insertBefore(toggle, this.status);
  var key = el("span", "tkg-heat-key", null);
  legend.insertBefore(key, this.hint);
  var low = el("span", "", key);
  low.textContent = "time per run: " + fmtShare(Math.pow(10, -HEAT_DECADES)) + " or less";
  var ramp = el("i", "tkg-heat-ramp", key);
  ramp.style.background = "linear-gradient(to right," + d.heat.colours.join(",") + ")";
  var high = el("span", "", key);
  high.textContent = "100% of " + fmtSeconds(d.timeTotal) + " (log scale)";
  var none = el("span", "tkg-key tkg-untimed-key", key);
  this.fillWith(el("i", "tkg-untimed", none), d.categories.indexOf("other"));
  none.appendChild(document.createTextNode("not in the trace"));
  function apply() {
    var byTime = self.colourBy === "time";
    toggle.textContent = byTime ? "Colour: time" : "Colour: kind";
    toggle.title = byTime ? "colour by op kind" : "colour by measured time";
    legend.classList.toggle("tkg-by-time", byTime);
    self.root.setAttribute("data-colour", self.colourBy);
  }
  toggle.addEventListener("click", function () {
    self.colourBy = self.colourBy === "time" ? "kind" : "time";
    apply();
    self.render(-1);
    if (self.selected >= 0) self.select(self.selected);
  });
  apply();
};

// Fill a closed node by its time (time mode), with text that reads on the fill.
GraphView.prototype.paintTime = function (i, node, box) {
  var d = this.data;
  if (!d.time) return;
  var seconds = d.time[i];
  if (seconds !== null && seconds !== undefined) {
    node.setAttribute("data-time", String(seconds));
    var tip = svg("title", {}, node);
    tip.textContent = d.label[i] + ": " + fmtSeconds(seconds) + " per run, " +
      fmtShare(seconds / (d.timeTotal || 1)) + " of the program";
  }
  if (this.colourBy !== "time") return;
  if (seconds === null || seconds === undefined) {
    node.classList.add("tkg-untimed");
    box.classList.remove(categoryClass(d.categories[d.cat[i]]));
    this.fillWith(box, d.categories.indexOf("other"));
    return;
  }
  var position = heatPosition(seconds / (d.timeTotal || 1));
  box.style.fill = heatColour(d.heat.colours, position);
  node.classList.add(position > d.heat.darkFrom ? "tkg-heat-dark" : "tkg-heat-light");
};

// An open group's measured time, "254 µs (37%)", at the right of its header where it fits.
GraphView.prototype.drawHeaderTime = function (i, header, chars) {
  var d = this.data;
  if (!d.time || d.time[i] === null || d.time[i] === undefined) return;
  var label = fmtSeconds(d.time[i]) + " (" + fmtShare(d.time[i] / (d.timeTotal || 1)) + ")";
  var tip = svg("title", {}, header);
  tip.textContent = d.label[i] + ": " + label + " of the measured time per run";
  if ((i !== 0 ? 26 : 8) + (chars + label.length + 2) * CHAR_W + 8 > this.w[i]) return;
  var text = svg("text", {"class": "tkg-header-time", x: this.w[i] - 8, y: 16, "text-anchor": "end"}, header);
  text.textContent = label;
};

GraphView.prototype.timeRows = function (i, row) {
  var d = this.data, seconds = d.time[i];
  if (seconds === null || seconds === undefined) {
    row("time (measured)", "not in the trace: parameters, tuples and the ops inside a fusion do not run apart");
    return;
  }
  row("time (measured)", fmtSeconds(seconds) + " per run \u00b7 " + fmtShare(seconds / (d.timeTotal || 1)) +
    " of " + fmtSeconds(d.timeTotal));
  if (seconds > 0 && d.flops[i]) row("FLOP/s achieved", fmt(d.flops[i] / seconds, "FLOP/s"));
  if (seconds > 0 && d.bytes[i]) row("bandwidth achieved", fmt(d.bytes[i] / seconds, "B/s"));
};
