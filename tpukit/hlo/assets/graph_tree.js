// tpukit HLO graph viewer, tree: the payload's nodes as a tree, which groups are open, and
// the edges that show between what is drawn.
//
// The graph is a tree of nodes (instructions, name-scope groups, parts, computations),
// numbered depth first, plus data edges per computation (data.blocks). Only open groups
// show their children.
//
// The tree is built for the first draw of a payload of tens of thousands of nodes, of which
// it draws tens: the constructor does typed-array passes only (each node's children as a
// slice of one array, its subtree's end), and what only some nodes need -- a group's flow,
// an instruction's HLO text -- is worked out when first asked for, and kept.
//
// Takes: data, the payload (unpacked by graph_view.js).
// Offers: new GraphTree(data), with
//   data, n, instructionKind (read only)
//   children(i): node i's children in program order (an Int32Array: read only)
//   text(i): node i's HLO text ("" for a group)
//   isOpen(i), isAncestor(a, b), isInstruction(i), shownAs(i): what is open and drawn
//   setOpen(i, open), openAround(i), resetOpen(), closeAll(): change what is open
//   openState(), changedSince(state): compare what is open with an earlier state
//   visibleEdges(): the edges between drawn nodes, [{a, b, bytes}]
//   childFlow(group): the data edges between a group's children, in an order without cycles
//   matches(query): the nodes whose name, opcode, scope or source line hold `query`
/* exported GraphTree */

"use strict";

function GraphTree(data) {
  var self = this, n = data.kind.length, parent = data.parent, i;
  this.data = data;
  this.n = n;
  this.instructionKind = data.kinds.findIndex(function (kind) { return kind[0] === "instruction"; });
  // Node i's children are kids[first[i], first[i + 1]): nodes are numbered depth first, so
  // filling in node order lists each one's children in program order.
  var first = new Int32Array(n + 1), kids = new Int32Array(Math.max(0, n - 1)), next;
  for (i = 1; i < n; i++) first[parent[i] + 1]++;
  for (i = 0; i < n; i++) first[i + 1] += first[i];
  next = first.slice(0, n);
  for (i = 1; i < n; i++) kids[next[parent[i]]++] = i;
  this.first = first;
  this.kids = kids;
  this.kidLists = new Array(n);  // node -> its children, made when first asked for
  this.end = new Int32Array(n);  // subtree of i: ids [i, end[i])
  for (i = n - 1; i >= 0; i--) {
    if (this.end[i] < i + 1) this.end[i] = i + 1;
    var p = parent[i];
    if (p >= 0 && this.end[p] < this.end[i]) this.end[p] = this.end[i];
  }
  this.blocks = new Map();  // node that owns a computation -> its edges, 4 numbers each
  data.blocks.forEach(function (block) { self.blocks.set(block[0], block[1]); });
  this.flows = new Map();   // group -> its childFlow, made when first asked for
  this.expanded = new Uint8Array(n);
  this.resetOpen();
}

GraphTree.prototype.children = function (i) {
  var list = this.kidLists[i];
  if (!list) list = this.kidLists[i] = this.kids.subarray(this.first[i], this.first[i + 1]);
  return list;
};

GraphTree.prototype.hasChildren = function (i) { return this.first[i + 1] > this.first[i]; };

// The payload sends an instruction's HLO text without the head that its label, shape and
// op give ("%name = shape op"; data.textHead[i] 2: after "ROOT ", 0: no head), see
// tpukit/hlo/_graph_wire.py; the panel asks for one node's text at a time.
GraphTree.prototype.text = function (i) {
  var d = this.data, text = d.text[i], head = d.textHead ? d.textHead[i] : 0;
  if (!head) return text;
  return (head === 2 ? "ROOT %" : "%") + d.label[i] + " = " + d.shape[i] + " " + d.op[i] + text;
};

// ---------------------------------------------------------------- what is open

// The groups the payload opens (data.open), and the root.
GraphTree.prototype.resetOpen = function () {
  this.expanded.fill(0);
  for (var i = 0; i < this.data.open.length; i++) this.expanded[this.data.open[i]] = 1;
  this.expanded[0] = 1;
};

// Only the root open.
GraphTree.prototype.closeAll = function () {
  this.expanded.fill(0);
  this.expanded[0] = 1;
};

GraphTree.prototype.setOpen = function (i, open) { this.expanded[i] = open ? 1 : 0; };

// Open every group around node i, so that it is drawn.
GraphTree.prototype.openAround = function (i) {
  for (var a = this.data.parent[i]; a >= 0; a = this.data.parent[a]) this.expanded[a] = 1;
};

GraphTree.prototype.openState = function () { return this.expanded.slice(); };

GraphTree.prototype.changedSince = function (state) {
  for (var i = 0; i < state.length; i++) if (state[i] !== this.expanded[i]) return true;
  return false;
};

GraphTree.prototype.isOpen = function (i) { return this.expanded[i] === 1 && this.first[i + 1] > this.first[i]; };

GraphTree.prototype.isAncestor = function (a, b) { return a <= b && b < this.end[a]; };

GraphTree.prototype.isInstruction = function (i) { return this.data.kind[i] === this.instructionKind; };

// The node that stands for `node` in the drawing: its outermost closed ancestor, or itself.
GraphTree.prototype.shownAs = function (node) {
  var parent = this.data.parent, shown = node;
  for (var a = parent[node]; a >= 0; a = parent[a]) if (!this.isOpen(a)) shown = a;
  return shown;
};

// ---------------------------------------------------------------- edges

GraphTree.prototype.visibleEdges = function () {
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

GraphTree.prototype.childOf = function (group, node) {
  var parent = this.data.parent;
  while (node >= 0 && parent[node] !== group) node = parent[node];
  return node;
};

GraphTree.prototype.edgeOwner = function (group) {
  for (var g = group; g >= 0; g = this.data.parent[g]) if (this.blocks.has(g)) return g;
  return -1;
};

// The data edges between a group's children, as [from, to, count] by child index, each
// pointing along flowOrder (an edge against it reversed): a graph without cycles.
// `rank` is each child's place in that order.
// Kept per group: the payload's edges do not change.
GraphTree.prototype.childFlow = function (group) {
  var flow = this.flows.get(group);
  if (!flow) this.flows.set(group, flow = this.makeChildFlow(group));
  return flow;
};

GraphTree.prototype.makeChildFlow = function (group) {
  var kids = this.children(group), index = new Map(), counts = new Map(), links = [];
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
    if (rank[link[0]] > rank[link[1]]) { var first = link[0]; link[0] = link[1]; link[1] = first; }
  });
  return {links: links, rank: rank};
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

// ---------------------------------------------------------------- search

// Every node whose name, opcode, op_name scope, source line or file holds `query`
// (lower case), in program order.
GraphTree.prototype.matches = function (query) {
  var d = this.data, found = [];
  for (var i = 0; i < this.n; i++) {
    var hay = d.label[i] + "\n" + d.op[i] + "\n" + d.strings[d.scope[i]] + "\n" +
      d.strings[d.location[i]] + "\n" + d.strings[d.source[i]];
    if (hay.toLowerCase().indexOf(query) >= 0) found.push(i);
  }
  return found;
};
