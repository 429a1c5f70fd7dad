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
// So the children are first put in an order that puts few edges backwards (flowOrder, ties
// by program order); an edge against that order goes to dagre reversed, and dagre sees a
// graph without cycles whose ranks follow the data.

var NODE_H = 36, CHAR_W = 6.7, HEADER_H = 24, PAD = 10, MAX_CHARS = 40, RANK_SEP = 34;

GraphView.prototype.lines = function (i) {
  var d = this.data, kind = d.kind[i];
  if (kind === this.instructionKind) {
    var op = d.op[i];
    if (op === "fusion" && d.count[i]) op = "fusion \u00b7 " + d.count[i] + " ops";
    return [d.label[i], op + " " + shortShape(d.shape[i])];
  }
  return [d.label[i], this.costText(i)];
};

// "12 ops · 3.4 MFLOP · 56 kB": a group's size and estimated work, in its box or header;
// in a profiled graph a closed box ends with its measured time ("· 1.2 ms").
GraphView.prototype.costText = function (i, withoutTime) {
  var d = this.data;
  var timed = !withoutTime && d.time && d.time[i] > 0;
  return d.count[i] + (d.count[i] === 1 ? " op" : " ops") +
    (d.flops[i] ? " \u00b7 " + fmt(d.flops[i], "FLOP") : "") +
    (d.bytes[i] ? " \u00b7 " + fmt(d.bytes[i], "B") : "") +
    (timed ? " \u00b7 " + fmtSeconds(d.time[i]) : "");
};

// The header line of an open group: its label, then its size and work (its measured
// time is drawn at the header's right end).
GraphView.prototype.headerText = function (i) {
  return clip(this.data.label[i], MAX_CHARS + 20) + "  \u00b7 " + this.costText(i, true);
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
  var kids = this.children[group], self = this, flow = this.childFlow(group);
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

// The data edges between a group's children, as [from, to, count] by child index, each
// pointing along flowOrder (an edge against it reversed): a graph without cycles.
GraphView.prototype.childFlow = function (group) {
  var kids = this.children[group], index = new Map(), counts = new Map(), links = [];
  kids.forEach(function (kid, k) { index.set(kid, k); });
  var owner = this.edgeOwner(group);
  var block = owner >= 0 ? this.blocks.get(owner) : [];
  var lo = group + 1, hi = this.end[group];
  for (var e = 0; e < block.length; e += 4) {
    var s = block[e], t = block[e + 1];
    if (s < lo || s >= hi || t < lo || t >= hi) continue;
    var a = index.get(this.childOf(group, s)), b = index.get(this.childOf(group, t));
    if (a !== b) counts.set(a * kids.length + b, (counts.get(a * kids.length + b) || 0) + 1);
  }
  counts.forEach(function (count, key) {
    links.push([Math.floor(key / kids.length), key % kids.length, count]);
  });
  var rank = flowOrder(kids.length, links);
  links.forEach(function (link) {
    if (rank[link[0]] > rank[link[1]]) { var a = link[0]; link[0] = link[1]; link[1] = a; }
  });
  return {links: links, rank: rank};
};

// The least height a group can have open with its children closed, without laying it out:
// dagre puts the nodes of a path in as many ranks, so the longest path of its children's
// flow stacks that many boxes. The first view closes a group that cannot fit this way
// without paying for its layout (graph_camera.js, foldToFit).
GraphView.prototype.leastHeight = function (group) {
  var flow = this.childFlow(group), n = this.children[group].length, depth = new Int32Array(n);
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

// An order of n nodes that puts few edges backwards: the greedy heuristic of Eades, Lin and
// Smyth (1993) on edges [from, to, weight]. Sinks go last and sources first as they appear;
// inside a cycle, the node whose edges out outweigh its edges in most comes next, the earlier
// in program order on a tie. Returns each node's position.
function flowOrder(n, links) {
  var out = [], into = [], wOut = new Float64Array(n), wIn = new Float64Array(n);
  var alive = new Uint8Array(n).fill(1), left = n, head = [], tail = [], i;
  for (i = 0; i < n; i++) { out.push([]); into.push([]); }
  links.forEach(function (l) {
    out[l[0]].push(l); into[l[1]].push(l); wOut[l[0]] += l[2]; wIn[l[1]] += l[2];
  });
  function take(v, list) {
    alive[v] = 0; left--; list.push(v);
    out[v].forEach(function (l) { wIn[l[1]] -= l[2]; });
    into[v].forEach(function (l) { wOut[l[0]] -= l[2]; });
  }
  while (left > 0) {
    var changed = true;
    while (changed) {
      changed = false;
      for (i = 0; i < n; i++) {
        if (alive[i] && wOut[i] <= 0) { take(i, tail); changed = true; }
        else if (alive[i] && wIn[i] <= 0) { take(i, head); changed = true; }
      }
    }
    if (left === 0) break;
    var best = -1;
    for (i = 0; i < n; i++) {
      if (alive[i] && (best < 0 || wOut[i] - wIn[i] > wOut[best] - wIn[best])) best = i;
    }
    take(best, head);
  }
  var rank = new Int32Array(n), order = head.concat(tail.reverse());
  order.forEach(function (v, k) { rank[v] = k; });
  return rank;
}

// The inner points of dagre's route from sibling a to sibling b in group l, in the order
// a to b (an edge dagre saw reversed comes back reversed).
GraphView.prototype.route = function (l, a, b) {
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
