// tpukit HLO graph viewer: draws the payload that tpukit/hlo/_graph_view.py writes.
//
// The graph is a tree of nodes (instructions, name-scope groups, parts, computations),
// numbered depth first, plus data edges per computation. Only open groups show their
// children. Each group's children are laid out alone by dagre, once, with every child at
// its closed size; opening a child then "makes room": later ranks move down and later
// nodes of the same rank move right by the growth, so the rest keeps its arrangement.
// All text from the payload reaches the page through textContent, never as markup.

"use strict";

var SVG_NS = "http://www.w3.org/2000/svg";
var KIND_INSTRUCTION = 0, KIND_SCOPE = 1, KIND_PART = 2, KIND_COMPUTATION = 3;
var NODE_H = 36, CHAR_W = 6.7, HEADER_H = 24, PAD = 10, MAX_CHARS = 40;
var COLORS = {
  matmul: "#f6b26b", elementwise: "#b6d7a8", reduction: "#9fc5e8",
  data_movement: "#d9cdee", control_flow: "#ffe599", collective: "#ea9999",
  "parameter/constant": "#eeeeee", other: "#ffffff", group: "#eef1f6"
};
var LEGEND = [
  ["matmul", "matmul / conv"], ["elementwise", "elementwise"], ["reduction", "reduction"],
  ["data_movement", "data movement"], ["control_flow", "control flow"],
  ["collective", "collective"], ["parameter/constant", "parameter / constant"]
];

function tpukitGraphView(root, b64, dagre) {
  if (!root || root.getAttribute("data-state")) return;
  root.setAttribute("data-state", "loading");
  unpack(b64).then(function (data) {
    new GraphView(root, data, dagre);
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
  return new Response(stream).text().then(JSON.parse);
}

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
  while (value >= 1000 && i < steps.length - 1) { value /= 1000; i++; }
  return (i ? value.toPrecision(3) : String(value)) + " " + steps[i] + unit;
}

function shortShape(shape) { return shape.replace(/\{[^{}]*\}/g, ""); }

function GraphView(root, data, dagre) {
  var self = this;
  this.root = root;
  this.data = data;
  this.dagre = dagre;
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
  this.selected = -1;
  this.hit = -1;
  this.view = {k: 1, tx: 20, ty: 20};
  this.renders = 0;
  this.searchState = {query: null, matches: [], index: -1};
  this.resetOpen();
  this.build();
  this.render(-1);
  this.fit(0.5);
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

// ---------------------------------------------------------------- page structure

GraphView.prototype.build = function () {
  var self = this, d = this.data, root = el("div", "tkg-app");
  var fallback = this.root.querySelector(".tkg-fallback");
  if (fallback) fallback.remove();
  this.root.appendChild(root);  // beside the <style>, which must stay
  var bar = el("div", "tkg-toolbar", root);
  var title = el("span", "tkg-title", bar);
  title.textContent = d.title;
  title.title = d.title + " (module " + d.module + ")";
  if (d.stage) { var stage = el("span", "tkg-stage", title); stage.textContent = "(" + d.stage + ")"; }
  var search = el("input", "tkg-search", bar);
  search.type = "search";
  search.placeholder = "search: name, opcode, scope, file.py:line";
  search.setAttribute("aria-label", "search the graph");
  var hits = el("span", "tkg-hits", bar);
  var fit = el("button", "tkg-fit", bar);
  fit.type = "button"; fit.textContent = "Fit"; fit.title = "fit the graph to the view";
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
  svg("path", {d: "M0,0 L10,5 L0,10 z", fill: "#8a93a6"}, marker);
  this.scene = svg("g", {"class": "tkg-scene"}, this.svg);

  var legend = el("div", "tkg-legend", viewport);
  LEGEND.forEach(function (entry) {
    var item = el("span", "", legend), swatch = el("i", "", item);
    swatch.style.background = COLORS[entry[0]];
    item.appendChild(document.createTextNode(entry[1]));
  });
  this.buildPanel(viewport);

  fit.addEventListener("click", function () { self.fit(); });
  reset.addEventListener("click", function () {
    self.resetOpen(); self.hit = -1; self.render(-1); self.fit(0.5);
  });
  search.addEventListener("keydown", function (event) {
    event.stopPropagation();  // keep notebook shortcuts out of the search box
    if (event.key === "Enter") { event.preventDefault(); self.find(search.value, event.shiftKey ? -1 : 1); }
  });
  search.addEventListener("keyup", function (event) { event.stopPropagation(); });
  search.addEventListener("keypress", function (event) { event.stopPropagation(); });
  this.bindPointer();
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

GraphView.prototype.bindPointer = function () {
  var self = this, vp = this.viewport, drag = null;
  vp.addEventListener("pointerdown", function (event) {
    if (event.button !== 0) return;
    drag = {x: event.clientX, y: event.clientY, tx: self.view.tx, ty: self.view.ty, moved: false,
      target: event.target, id: event.pointerId};
  });
  vp.addEventListener("pointermove", function (event) {
    if (!drag) return;
    var dx = event.clientX - drag.x, dy = event.clientY - drag.y;
    if (!drag.moved && dx * dx + dy * dy < 16) return;
    if (!drag.moved) { drag.moved = true; vp.classList.add("tkg-panning"); vp.setPointerCapture(drag.id); }
    self.view.tx = drag.tx + dx; self.view.ty = drag.ty + dy;
    self.applyView();
  });
  function finish(event) {
    if (!drag) return;
    var was = drag;
    drag = null;
    vp.classList.remove("tkg-panning");
    if (was.moved || event.type === "pointercancel") return;
    self.click(was.target);
  }
  vp.addEventListener("pointerup", finish);
  vp.addEventListener("pointercancel", finish);
  vp.addEventListener("dblclick", function (event) {
    var hitNode = event.target.closest && event.target.closest("[data-node]");
    if (hitNode && !event.target.closest(".tkg-toggle")) self.toggle(+hitNode.getAttribute("data-node"));
  });
  vp.addEventListener("wheel", function (event) {
    event.preventDefault();
    var rect = vp.getBoundingClientRect();
    var mx = event.clientX - rect.left, my = event.clientY - rect.top;
    var k = Math.min(4, Math.max(0.03, self.view.k * Math.exp(-event.deltaY * 0.0015)));
    self.view.tx = mx - (mx - self.view.tx) * k / self.view.k;
    self.view.ty = my - (my - self.view.ty) * k / self.view.k;
    self.view.k = k;
    self.applyView();
  }, {passive: false});
};

GraphView.prototype.click = function (target) {
  if (!target || !target.closest) return;
  var toggle = target.closest(".tkg-toggle");
  var holder = target.closest("[data-node]");
  if (!holder) { this.select(-1); return; }
  var id = +holder.getAttribute("data-node");
  if (toggle) this.toggle(id); else this.select(id);
};

// ---------------------------------------------------------------- sizes and layout

GraphView.prototype.lines = function (i) {
  var d = this.data, kind = d.kind[i];
  if (kind === KIND_INSTRUCTION) {
    var op = d.op[i];
    if (op === "fusion" && d.count[i]) op = "fusion \u00b7 " + d.count[i] + " ops";
    return [d.label[i], op + " " + shortShape(d.shape[i])];
  }
  return [d.label[i], d.count[i] + " ops" + (d.flops[i] ? " \u00b7 " + fmt(d.flops[i], "FLOP") : "")];
};

GraphView.prototype.closedSize = function (i) {
  var size = this.sizes.get(i);
  if (!size) {
    var lines = this.lines(i);
    var chars = Math.min(MAX_CHARS, Math.max(lines[0].length, lines[1].length));
    var w = Math.max(70, chars * CHAR_W + 20 + (this.children[i].length ? 18 : 0));
    size = {w: w, h: NODE_H};
    this.sizes.set(i, size);
  }
  return size;
};

GraphView.prototype.childOf = function (group, node) {
  var parent = this.data.parent;
  while (node >= 0 && parent[node] !== group) node = parent[node];
  return node;
};

GraphView.prototype.edgeOwner = function (group) {
  for (var g = group; g >= 0; g = this.data.parent[g]) if (this.blocks.has(g)) return g;
  return -1;
};

// The cached dagre layout of one group's children, each at its closed size.
GraphView.prototype.baseLayout = function (group) {
  var layout = this.layouts.get(group);
  if (layout) return layout;
  var kids = this.children[group], self = this;
  var g = new this.dagre.graphlib.Graph();
  g.setGraph({rankdir: "TB", nodesep: 18, ranksep: 34, edgesep: 8, marginx: 0, marginy: 0});
  g.setDefaultEdgeLabel(function () { return {}; });
  kids.forEach(function (kid) {
    var s = self.closedSize(kid);
    g.setNode(String(kid), {width: s.w, height: s.h});
  });
  var owner = this.edgeOwner(group), seen = new Map();
  var block = owner >= 0 ? this.blocks.get(owner) : [];
  var lo = group + 1, hi = this.end[group];
  for (var e = 0; e < block.length; e += 4) {
    var s = block[e], t = block[e + 1];
    if (s < lo || s >= hi || t < lo || t >= hi) continue;
    var a = this.childOf(group, s), b = this.childOf(group, t);
    if (a === b) continue;
    var key = a + ">" + b;
    if (!seen.has(key)) { seen.set(key, 1); g.setEdge(String(a), String(b)); }
  }
  this.dagre.layout(g);
  var pos = new Map(), rankOf = new Map(), rankYs = [];
  kids.forEach(function (kid) {
    var node = g.node(String(kid));
    pos.set(kid, {x: node.x, y: node.y, w: node.width, h: node.height});
    var y = Math.round(node.y);
    if (rankYs.indexOf(y) < 0) rankYs.push(y);
  });
  rankYs.sort(function (p, q) { return p - q; });
  var bands = rankYs.map(function () { return {top: Infinity, bottom: -Infinity, members: []}; });
  kids.forEach(function (kid) {
    var p = pos.get(kid), r = rankYs.indexOf(Math.round(p.y));
    rankOf.set(kid, r);
    bands[r].top = Math.min(bands[r].top, p.y - p.h / 2);
    bands[r].bottom = Math.max(bands[r].bottom, p.y + p.h / 2);
    bands[r].members.push(kid);
  });
  bands.forEach(function (band) {
    band.members.sort(function (p, q) { return pos.get(p).x - pos.get(q).x; });
  });
  var points = new Map();
  g.edges().forEach(function (edge) {
    var pts = g.edge(edge).points || [];
    points.set(edge.v + ">" + edge.w, pts.slice(1, -1));
  });
  layout = {pos: pos, rankOf: rankOf, bands: bands, points: points};
  this.layouts.set(group, layout);
  return layout;
};

// Sizes of open groups, bottom up: children where dagre put them, moved to make room.
GraphView.prototype.measure = function (i) {
  if (!this.isOpen(i)) {
    var s = this.closedSize(i);
    this.w[i] = s.w; this.h[i] = s.h;
    return;
  }
  var layout = this.baseLayout(i), kids = this.children[i], self = this;
  kids.forEach(function (kid) { self.measure(kid); });
  var above = [], shift = 0, minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
  var dxOf = new Map(), growth = [];
  layout.bands.forEach(function (band, r) {
    above.push(shift);
    var extra = 0, dx = 0, grow = [];
    band.members.forEach(function (kid) {
      var base = layout.pos.get(kid);
      dxOf.set(kid, dx);
      var dw = Math.max(0, self.w[kid] - base.w);
      if (dw > 0) grow.push([base.x, dw]);
      dx += dw;
      extra = Math.max(extra, self.h[kid] - base.h);
    });
    growth.push(grow);
    shift += Math.max(0, extra);
  });
  kids.forEach(function (kid) {
    var base = layout.pos.get(kid), r = layout.rankOf.get(kid);
    var x = base.x - base.w / 2 + dxOf.get(kid), y = base.y - base.h / 2 + above[r];
    self.x[kid] = x; self.y[kid] = y;  // relative for now, made absolute in place()
    minX = Math.min(minX, x); minY = Math.min(minY, y);
    maxX = Math.max(maxX, x + self.w[kid]); maxY = Math.max(maxY, y + self.h[kid]);
  });
  var label = this.lines(i)[0];
  this.w[i] = Math.max(maxX - minX + 2 * PAD, Math.min(MAX_CHARS, label.length + 14) * CHAR_W + 40);
  this.h[i] = maxY - minY + HEADER_H + PAD;
  this.geom.set(i, {above: above, total: shift, growth: growth, minX: minX, minY: minY, layout: layout});
};

// Absolute positions, top down.
GraphView.prototype.place = function (i, x, y) {
  this.x[i] = x; this.y[i] = y;
  if (!this.isOpen(i)) return;
  var geom = this.geom.get(i), kids = this.children[i];
  var ox = x + PAD - geom.minX, oy = y + HEADER_H - geom.minY;
  for (var k = 0; k < kids.length; k++) this.place(kids[k], this.x[kids[k]] + ox, this.y[kids[k]] + oy);
};

// A point of a dagre edge inside open group i, moved like the nodes around it.
GraphView.prototype.movePoint = function (i, px, py) {
  var geom = this.geom.get(i), bands = geom.layout.bands, dy = geom.total, dx = 0;
  for (var r = 0; r < bands.length; r++) {
    if (py < bands[r].top - 1) { dy = geom.above[r]; break; }
    if (py <= bands[r].bottom + 1) {
      dy = geom.above[r];
      geom.growth[r].forEach(function (g) { if (g[0] < px) dx += g[1]; });
      break;
    }
  }
  return [px + dx + this.x[i] + PAD - geom.minX, py + dy + this.y[i] + HEADER_H - geom.minY];
};

// ---------------------------------------------------------------- what is visible

GraphView.prototype.shownAs = function (node) {
  var parent = this.data.parent, shown = node;
  for (var a = parent[node]; a >= 0; a = parent[a]) if (!this.isOpen(a)) shown = a;
  return shown;
};

GraphView.prototype.visibleEdges = function () {
  var self = this, d = this.data, edges = new Map();
  this.blocks.forEach(function (block, owner) {
    if (!self.isOpen(owner) || self.shownAs(owner) !== owner) return;
    for (var e = 0; e < block.length; e += 4) {
      var s = block[e], t = block[e + 1], index = block[e + 3], guard = 0;
      while (self.isOpen(s) && d.roots[s] !== undefined && guard++ < 64) s = d.roots[s];
      guard = 0;
      while (self.isOpen(t) && d.params[t] && index < d.params[t].length && guard++ < 64) t = d.params[t][index];
      var a = self.shownAs(s), b = self.shownAs(t);
      if (a === b || self.isAncestor(a, b) || self.isAncestor(b, a)) continue;
      var key = a * self.n + b, edge = edges.get(key);
      if (edge) edge.bytes += block[e + 2];
      else edges.set(key, {a: a, b: b, bytes: block[e + 2]});
    }
  });
  return Array.from(edges.values());
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
  var count = this.drawNode(0, boxes, nodeLayer);
  for (var e = 0; e < edges.length; e++) this.drawEdge(edges[e], edgeLayer);
  if (before) {
    this.view.tx += (before[0] - this.x[anchor]) * this.view.k;
    this.view.ty += (before[1] - this.y[anchor]) * this.view.k;
  }
  this.applyView();
  this.renders += 1;
  var ms = performance.now() - t0;
  this.status.textContent = count + " nodes \u00b7 " + edges.length + " edges \u00b7 " +
    this.data.kind.length.toLocaleString() + " in all \u00b7 drawn in " + Math.round(ms) + " ms";
  this.root.setAttribute("data-nodes", String(count));
  this.root.setAttribute("data-edges", String(edges.length));
  this.root.setAttribute("data-renders", String(this.renders));
  this.root.setAttribute("data-render-ms", ms.toFixed(1));
};

GraphView.prototype.drawNode = function (i, boxes, nodes) {
  var d = this.data, self = this;
  if (this.isOpen(i)) {
    var kids = this.children[i], count = 0;
    var group = svg("g", {"class": "tkg-group", "data-node": String(i), "data-name": d.label[i],
      transform: "translate(" + this.x[i] + "," + this.y[i] + ")"}, boxes);
    if (i === this.selected) group.classList.add("tkg-selected");
    if (i === this.hit) group.classList.add("tkg-hit");
    svg("rect", {"class": "tkg-frame", width: this.w[i], height: this.h[i], rx: 6}, group);
    var header = svg("g", {"class": "tkg-header"}, group);
    svg("rect", {width: this.w[i], height: HEADER_H, fill: "transparent"}, header);
    if (i !== 0) this.drawToggle(header, 6, 5, "\u2212");
    var text = svg("text", {x: i !== 0 ? 26 : 8, y: 16}, header);
    text.textContent = clip(d.label[i], MAX_CHARS + 20) + "  \u00b7 " + d.count[i] + " ops";
    kids.forEach(function (kid) { count += self.drawNode(kid, boxes, nodes); });
    return count;
  }
  var node = svg("g", {"class": "tkg-node", "data-node": String(i), "data-name": d.label[i],
    transform: "translate(" + this.x[i] + "," + this.y[i] + ")"}, nodes);
  var expandable = this.children[i].length > 0;
  if (expandable) node.classList.add("tkg-collapsed");
  if (i === this.selected) node.classList.add("tkg-selected");
  if (i === this.hit) node.classList.add("tkg-hit");
  var fill = COLORS[d.categories[d.cat[i]]] || COLORS.other;
  svg("rect", {"class": "tkg-box", width: this.w[i], height: this.h[i], rx: d.kind[i] ? 7 : 3, fill: fill}, node);
  if (expandable && d.kind[i] !== KIND_INSTRUCTION) {
    svg("rect", {x: 3, y: 3, width: this.w[i] - 6, height: this.h[i] - 6, rx: 5, fill: "none",
      stroke: "#a3acbb", "stroke-width": 1}, node);
  }
  var lines = this.lines(i), left = expandable ? 24 : 8;
  var title = svg("text", {x: left, y: 15}, node);
  title.textContent = clip(lines[0], MAX_CHARS);
  var sub = svg("text", {"class": "tkg-sub", x: left, y: 28}, node);
  sub.textContent = clip(lines[1], MAX_CHARS);
  if (expandable) this.drawToggle(node, 5, 10, "+");
  return 1;
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
  var pts = [], siblings = l >= 0 && parent[a] === l && parent[b] === l;
  if (siblings) {
    var layout = this.layouts.get(l), raw = layout && layout.points.get(a + ">" + b);
    if (raw) for (var k = 0; k < raw.length; k++) pts.push(this.movePoint(l, raw[k].x, raw[k].y));
  }
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

GraphView.prototype.applyView = function () {
  var v = this.view;
  this.scene.setAttribute("transform", "translate(" + v.tx + "," + v.ty + ") scale(" + v.k + ")");
};

// Fit the whole graph in the view, at a scale of at least minScale (then the top shows).
GraphView.prototype.fit = function (minScale) {
  var rect = this.viewport.getBoundingClientRect();
  var vw = rect.width || 800, vh = rect.height || 600;
  var k = Math.min(1.2, Math.max(0.03, Math.min((vw - 40) / this.w[0], (vh - 40) / this.h[0])));
  if (minScale) k = Math.max(k, Math.min(minScale, (vw - 40) / this.w[0]));
  this.view = {k: k, tx: (vw - this.w[0] * k) / 2, ty: 20};
  this.applyView();
};

GraphView.prototype.centerOn = function (i) {
  var rect = this.viewport.getBoundingClientRect();
  var vw = rect.width || 800, vh = rect.height || 600;
  if (this.view.k < 0.6) this.view.k = 0.8;
  this.view.tx = vw / 2 - (this.x[i] + this.w[i] / 2) * this.view.k;
  this.view.ty = vh / 2 - (this.y[i] + this.h[i] / 2) * this.view.k;
  this.applyView();
};

// ---------------------------------------------------------------- interaction

GraphView.prototype.toggle = function (i) {
  if (!this.children[i].length || i === 0) return;
  this.expanded[i] = this.isOpen(i) ? 0 : 1;
  this.render(i);
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
  var kinds = ["instruction", "name scope", "part of a group", "computation"];
  row("kind", kind === KIND_INSTRUCTION && this.children[i].length ? d.op[i] + " (opens in place)" : kinds[kind]);
  if (kind === KIND_INSTRUCTION) {
    row("opcode", d.op[i]);
    row("category", d.categories[d.cat[i]].replace("_", " "));
    var shape = d.shape[i], m = /^(\w+)\[([^\]]*)\](?:\{([^}]*)\})?$/.exec(shape);
    row("shape", shape);
    row("dtype", m ? m[1] : (shape.charAt(0) === "(" ? "tuple" : ""));
    row("layout", m && m[3] !== undefined ? "{" + m[3] + "}" : "");
    row("source", d.strings[d.source[i]] || "(no source line in the HLO)");
    row("op_name", d.strings[d.scope[i]]);
  }
  if (this.children[i].length) row("contents", d.count[i] + " instructions");
  row("FLOPs (est.)", d.flops[i].toLocaleString() + " (" + fmt(d.flops[i], "FLOP") + ")");
  row("bytes (est.)", d.bytes[i].toLocaleString() + " (" + fmt(d.bytes[i], "B") + ")");
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
      var hay = d.label[i] + "\n" + d.op[i] + "\n" + d.strings[d.scope[i]] + "\n" + d.strings[d.source[i]];
      if (hay.toLowerCase().indexOf(query) >= 0) state.matches.push(i);
    }
  }
  if (!state.matches.length) { this.hits.textContent = "no match"; return; }
  state.index = (state.index + step + state.matches.length) % state.matches.length;
  var target = state.matches[state.index];
  for (var a = d.parent[target]; a >= 0; a = d.parent[a]) this.expanded[a] = 1;
  this.hit = target;
  this.render(-1);
  this.centerOn(target);
  this.hits.textContent = (state.index + 1) + " of " + state.matches.length;
  this.root.setAttribute("data-hit", String(target));
};
