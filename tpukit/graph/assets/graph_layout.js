// tpukit HLO graph viewer, layout: node sizes, one dagre layout per open group, and the
// "make room" placement that keeps the rest of the drawing still when a group opens.
//
// Each group's children are laid out alone by dagre, once, with every child at its closed
// size; opening a child then "makes room": later ranks move down and later nodes of the
// same rank move right by the growth, so the rest keeps its arrangement.
//
// Data flows top to bottom. Grouping makes cycles between a group's children (a group that
// feeds another and also reads from it), and dagre breaks a cycle wherever its search
// happens to meet it, which drew a training step's forward pass below its backward pass.
// So the children are first put in an order that puts few edges backwards (the tree's
// childFlow, ties by program order); an edge against that order goes to dagre reversed, and
// dagre sees a graph without cycles whose ranks follow the data.
//
// Takes: a GraphTree (graph_tree.js) and the dagre library; sizes from graph_shared.js.
// Offers: new GraphLayout(tree, dagre), with
//   x, y, w, h: each node's box in drawing units, as the last measure() or arrange() left
//     them (read only; the whole drawing is node 0's box)
//   measure(): the sizes of what is open; arrange(): sizes and absolute places
//   lines(i): a closed box's two lines of text; headerText(i): an open group's header
//   route(group, a, b): the inner points of the edge from child a to child b of a group
//   leastHeight(group): the least height a group can have open, without laying it out
//   openGroups(): the open groups that the last measure placed
/* global NODE_H, CHAR_W, HEADER_H, PAD, MAX_CHARS, RANK_SEP, clip, fmt, fmtBytes, fmtSeconds, shortShape */
/* exported GraphLayout */

"use strict";

function GraphLayout(tree, dagre) {
  var n = tree.n;
  this.tree = tree;
  this.data = tree.data;
  this.dagre = dagre;
  this.layouts = new Map();   // group -> cached dagre layout of its children
  this.sizes = new Map();     // node -> {w, h} closed size
  this.geom = new Map();      // group -> make-room state for the current measure
  this.x = new Float64Array(n);
  this.y = new Float64Array(n);
  this.w = new Float64Array(n);
  this.h = new Float64Array(n);
}

// ---------------------------------------------------------------- text and sizes

GraphLayout.prototype.lines = function (i) {
  var d = this.data;
  if (this.tree.isInstruction(i)) {
    var op = d.op[i];
    if (op === "fusion" && d.count[i]) op = "fusion \u00b7 " + d.count[i] + " ops";
    return [d.label[i], op + " " + shortShape(d.shape[i])];
  }
  return [d.label[i], this.costText(i)];
};

// "12 ops · 3.4 MFLOP · 56 kB": a group's size and estimated work, in its box or header;
// in a profiled graph a closed box ends with its measured time ("· 1.2 ms").
GraphLayout.prototype.costText = function (i, withoutTime) {
  var d = this.data;
  var timed = !withoutTime && d.time && d.time[i] > 0;
  return d.count[i] + (d.count[i] === 1 ? " op" : " ops") +
    (d.flops[i] ? " \u00b7 " + fmt(d.flops[i], "FLOP") : "") +
    (d.bytes[i] ? " \u00b7 " + fmtBytes(d.bytes[i]) : "") +
    (timed ? " \u00b7 " + fmtSeconds(d.time[i]) : "");
};

// The header line of an open group: its label, then its size and work (its measured
// time is drawn at the header's right end), in at most MAX_CHARS + 20 characters, the
// most a group's width makes room for: the label is clipped first, so the figures stay.
// A part's label ends with its op count ("dot ×2 (1.2 GFLOP) · 3 ops"), which the
// figures say next: the header says it once.
GraphLayout.prototype.headerText = function (i) {
  var label = this.data.label[i], count = " \u00b7 " + this.data.count[i] + " ops";
  if (label.slice(-count.length) === count) label = label.slice(0, -count.length);
  var cost = "  \u00b7 " + this.costText(i, true), most = MAX_CHARS + 20;
  var room = Math.max(16, most - cost.length);
  return clip(clip(stagesKept(label, room), room) + cost, most);
};

// A stage of stages ("aten__mm ×22 (67.8 MFLOP) · 4 stages") too long for its header keeps
// how many stages it holds: its work's figure goes first (the header's figures say the
// group's), then the head is clipped.
function stagesKept(label, room) {
  var stages = / \u00b7 \d+ stages$/.exec(label);
  if (!stages || label.length <= room) return label;
  var head = label.slice(0, stages.index).replace(/ \([^()]*\)$/, "");
  return clip(head, Math.max(1, room - stages[0].length)) + stages[0];
}

GraphLayout.prototype.closedSize = function (i) {
  var size = this.sizes.get(i);
  if (!size) {
    var lines = this.lines(i);
    var chars = Math.min(MAX_CHARS, Math.max(lines[0].length, lines[1].length));
    var w = Math.max(70, chars * CHAR_W + 20 + (this.tree.hasChildren(i) ? 18 : 0));
    size = {w: w, h: NODE_H};
    this.sizes.set(i, size);
  }
  return size;
};

// ---------------------------------------------------------------- one group's layout

// The cached dagre layout of one group's children, each at its closed size.
GraphLayout.prototype.baseLayout = function (group) {
  var layout = this.layouts.get(group);
  if (layout) return layout;
  var kids = this.tree.children(group), self = this, flow = this.tree.childFlow(group);
  var g = new this.dagre.graphlib.Graph();
  g.setGraph({rankdir: "TB", nodesep: 18, ranksep: RANK_SEP, edgesep: 8, marginx: 0, marginy: 0});
  g.setDefaultEdgeLabel(function () { return {}; });
  kids.forEach(function (kid) {
    var s = self.closedSize(kid);
    g.setNode(String(kid), {width: s.w, height: s.h});
  });
  flow.links.forEach(function (link) {  // see the top of this file
    g.setEdge(String(kids[link[0]]), String(kids[link[1]]));
  });
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

// The least height a group can have open with its children closed, without laying it out:
// dagre puts the nodes of a path in as many ranks, so the longest path of its children's
// flow stacks that many boxes. The first view closes a group that cannot fit this way
// without paying for its layout (graph_camera.js, foldToFit).
GraphLayout.prototype.leastHeight = function (group) {
  var flow = this.tree.childFlow(group), n = this.tree.children(group).length, depth = new Int32Array(n);
  var order = new Int32Array(n), longest = n ? 1 : 0;
  for (var k = 0; k < n; k++) { order[flow.rank[k]] = k; depth[k] = 1; }
  var out = [];
  for (k = 0; k < n; k++) out.push([]);
  flow.links.forEach(function (link) { out[link[0]].push(link[1]); });
  for (var r = 0; r < n; r++) {
    var v = order[r];
    for (var j = 0; j < out[v].length; j++) {
      var w = out[v][j];
      if (depth[w] < depth[v] + 1) depth[w] = depth[v] + 1;
      if (depth[w] > longest) longest = depth[w];
    }
  }
  return longest * NODE_H + Math.max(0, longest - 1) * RANK_SEP + HEADER_H + PAD;
};

// The inner points of dagre's route from sibling a to sibling b in group l, in the order
// a to b (an edge dagre saw reversed comes back reversed).
GraphLayout.prototype.route = function (l, a, b) {
  var layout = this.layouts.get(l);
  if (!layout) return [];
  var raw = layout.points.get(a + ">" + b), out = [], k;
  if (raw) {
    for (k = 0; k < raw.length; k++) out.push(this.movePoint(l, raw[k].x, raw[k].y));
    return out;
  }
  raw = layout.points.get(b + ">" + a) || [];
  for (k = raw.length - 1; k >= 0; k--) out.push(this.movePoint(l, raw[k].x, raw[k].y));
  return out;
};

// ---------------------------------------------------------------- the whole drawing

// Sizes of what is open (node 0's box is the whole drawing's); places are relative.
GraphLayout.prototype.measure = function () {
  this.geom.clear();
  this.measureNode(0);
};

// Sizes, then absolute places.
GraphLayout.prototype.arrange = function () {
  this.measure();
  this.place(0, 0, 0);
};

GraphLayout.prototype.openGroups = function () { return Array.from(this.geom.keys()); };

// Sizes of open groups, bottom up: children where dagre put them, moved to make room.
GraphLayout.prototype.measureNode = function (i) {
  if (!this.tree.isOpen(i)) {
    var s = this.closedSize(i);
    this.w[i] = s.w; this.h[i] = s.h;
    return;
  }
  var layout = this.baseLayout(i), kids = this.tree.children(i), self = this;
  kids.forEach(function (kid) { self.measureNode(kid); });
  var above = [], shift = 0, minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
  var dxOf = new Map(), growth = [];
  layout.bands.forEach(function (band) {
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
  var header = this.headerText(i).length;
  this.w[i] = Math.max(maxX - minX + 2 * PAD, Math.min(MAX_CHARS + 20, header) * CHAR_W + 40);
  this.h[i] = maxY - minY + HEADER_H + PAD;
  this.geom.set(i, {above: above, total: shift, growth: growth, minX: minX, minY: minY, layout: layout});
};

// Absolute positions, top down.
GraphLayout.prototype.place = function (i, x, y) {
  this.x[i] = x; this.y[i] = y;
  if (!this.tree.isOpen(i)) return;
  var geom = this.geom.get(i), kids = this.tree.children(i);
  var ox = x + PAD - geom.minX, oy = y + HEADER_H - geom.minY;
  for (var k = 0; k < kids.length; k++) this.place(kids[k], this.x[kids[k]] + ox, this.y[kids[k]] + oy);
};

// A point of a dagre edge inside open group i, moved like the nodes around it.
GraphLayout.prototype.movePoint = function (i, px, py) {
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
