// tpukit HLO graph viewer, tree: the payload's nodes as a tree, which groups are open, and
// the edges that show between what is drawn.
//
// The graph is a tree of nodes (instructions, name-scope groups, parts, computations),
// numbered depth first, plus data edges per computation (data.blocks). Only open groups
// show their children.
//
// The tree is built for the first draw of a payload of tens of thousands of nodes, of which
// it draws tens: the constructor makes one pass over the nodes (each one's subtree end), and
// what only some nodes need -- a group's children and flow, an instruction's HLO text -- is
// worked out when first asked for, and kept. What is open is kept twice: a byte per node
// (isOpen) and the set of open nodes (to compare states without a pass over every node).
//
// Takes: data, the payload (unpacked by graph_view.js).
// Offers: new GraphTree(data), with
//   data, n, instructionKind (read only)
//   children(i): node i's children in program order (read only); hasChildren(i); canOpen(i):
//     false for a glance's closed groups (data.more), which hold children it does not send
//   text(i): node i's HLO text ("" for a group)
//   isOpen(i), isAncestor(a, b), isInstruction(i), shownAs(i): what is open and drawn;
//     shownTable(): shownAs of every node, as an Int32Array; boxes(): the nodes drawn closed
//   setOpen(i, open), openAround(i), resetOpen(), closeAll(): change what is open
//   openState(), changedSince(state): compare what is open with an earlier state
//   visibleEdges(): the edges between drawn nodes, [{a, b, bytes}]
//   childFlow(group): the data edges between a group's children, in an order without cycles
//   childTable(group): which child of a group holds each of its members
//   matches(query): the nodes whose name, opcode, scope or source line hold `query`
/* exported GraphTree */

"use strict";

function GraphTree(data) {
  var self = this, n = data.kind.length, parent = data.parent, i;
  this.data = data;
  this.n = n;
  this.instructionKind = data.kinds.findIndex(function (kind) { return kind[0] === "instruction"; });
  this.end = new Int32Array(n);  // subtree of i: ids [i, end[i])
  for (i = n - 1; i >= 0; i--) {
    if (this.end[i] < i + 1) this.end[i] = i + 1;
    var p = parent[i];
    if (p >= 0 && this.end[p] < this.end[i]) this.end[p] = this.end[i];
  }
  this.blocks = new Map();  // node that owns a computation -> its edges, 4 numbers each
  data.blocks.forEach(function (block) { self.blocks.set(block[0], block[1]); });
  this.kidLists = new Map();  // node -> its children, made when first asked for
  this.flows = new Map();     // group -> its childFlow, made when first asked for
  this.expanded = new Uint8Array(n);
  this.openNodes = new Set(); // the nodes i with expanded[i] = 1
  // A glance (tpukit/graph/_graph_glance.py) sends the first view alone: its closed groups
  // (data.more) hold more than it sends, and cannot open until the whole graph comes.
  this.more = new Set(data.more || []);
  this.resetOpen();
}

// Nodes are numbered depth first: node i's first child is i + 1, and each next child starts
// where the one before it ends.
GraphTree.prototype.children = function (i) {
  var list = this.kidLists.get(i);
  if (!list) {
    list = [];
    for (var kid = i + 1, end = this.end[i]; kid < end; kid = this.end[kid]) list.push(kid);
    this.kidLists.set(i, list);
  }
  return list;
};

GraphTree.prototype.hasChildren = function (i) { return this.end[i] > i + 1 || this.more.has(i); };

// Whether node i's children are here to show (not in a glance's closed groups).
GraphTree.prototype.canOpen = function (i) { return this.end[i] > i + 1; };

// The payload sends an instruction's HLO text without the head that its label, shape and
// op give ("%name = shape op"; data.textHead[i] 2: after "ROOT ", 0: no head), see
// tpukit/graph/_graph_wire.py; the panel asks for one node's text at a time.
GraphTree.prototype.text = function (i) {
  var d = this.data, text = d.text[i], head = d.textHead ? d.textHead[i] : 0;
  if (!head) return text;
  return (head === 2 ? "ROOT %" : "%") + d.label[i] + " = " + d.shape[i] + " " + d.op[i] + text;
};

// ---------------------------------------------------------------- what is open

// The groups the payload opens (data.open), and the root.
GraphTree.prototype.resetOpen = function () {
  this.closeAll();
  for (var i = 0; i < this.data.open.length; i++) this.setOpen(this.data.open[i], true);
};

// Only the root open.
GraphTree.prototype.closeAll = function () {
  var self = this;
  this.openNodes.forEach(function (i) { self.expanded[i] = 0; });
  this.openNodes.clear();
  this.setOpen(0, true);
};

GraphTree.prototype.setOpen = function (i, open) {
  this.expanded[i] = open ? 1 : 0;
  if (open) this.openNodes.add(i); else this.openNodes.delete(i);
};

// Open every group around node i, so that it is drawn.
GraphTree.prototype.openAround = function (i) {
  for (var a = this.data.parent[i]; a >= 0; a = this.data.parent[a]) this.setOpen(a, true);
};

// The open nodes, in order.
GraphTree.prototype.openState = function () {
  return Array.from(this.openNodes).sort(function (a, b) { return a - b; });
};

GraphTree.prototype.changedSince = function (state) {
  var now = this.openState();
  if (now.length !== state.length) return true;
  for (var k = 0; k < now.length; k++) if (now[k] !== state[k]) return true;
  return false;
};

GraphTree.prototype.isOpen = function (i) { return this.expanded[i] === 1 && this.end[i] > i + 1; };

GraphTree.prototype.isAncestor = function (a, b) { return a <= b && b < this.end[a]; };

GraphTree.prototype.isInstruction = function (i) { return this.data.kind[i] === this.instructionKind; };

// The node that stands for `node` in the drawing: its outermost closed ancestor, or itself.
GraphTree.prototype.shownAs = function (node) {
  var parent = this.data.parent, shown = node;
  for (var a = parent[node]; a >= 0; a = parent[a]) if (!this.isOpen(a)) shown = a;
  return shown;
};

// The nodes drawn as boxes (closed, inside open groups), in drawing order.
GraphTree.prototype.boxes = function () {
  var out = [], self = this;
  (function walk(i) {
    if (!self.isOpen(i)) { out.push(i); return; }
    self.children(i).forEach(walk);
  })(0);
  return out;
};

// ---------------------------------------------------------------- edges

// shownAs of every node at once: each closed box stands for its whole subtree (a native fill
// over its ids), each open group for itself. The edges of a first view ask this of thousands
// of nodes; walking up from each was most of visibleEdges' time.
GraphTree.prototype.shownTable = function () {
  var shown = new Int32Array(this.n), self = this;
  (function fill(i) {
    if (!self.isOpen(i)) { shown.fill(i, i, self.end[i]); return; }
    shown[i] = i;
    self.children(i).forEach(fill);
  })(0);
  return shown;
};

// Most of a block's edges join two members of one closed box: those cost a table look-up
// each, without a call (a training step's first view reads thousands, in code not yet
// compiled); only an edge at an open call or loop is followed inside it.
GraphTree.prototype.visibleEdges = function () {
  var self = this, d = this.data, edges = new Map(), shown = this.shownTable();
  var expanded = this.expanded, end = this.end;
  this.blocks.forEach(function (block, owner) {
    if (!self.isOpen(owner) || shown[owner] !== owner) return;
    for (var e = 0; e < block.length; e += 4) {
      var s = block[e], t = block[e + 1], index = block[e + 3], guard = 0;
      if (expanded[s] === 1) {
        while (self.isOpen(s) && d.roots[s] !== undefined && guard++ < 64) s = d.roots[s];
        guard = 0;
      }
      if (expanded[t] === 1) {
        while (self.isOpen(t) && d.params[t] && index < d.params[t].length && guard++ < 64) t = d.params[t][index];
      }
      var a = shown[s], b = shown[t];
      if (a === b || (a < b && b < end[a]) || (b < a && a < end[b])) continue;  // one holds the other
      var key = a * self.n + b, edge = edges.get(key);
      if (edge) edge.bytes += block[e + 2];
      else edges.set(key, {a: a, b: b, bytes: block[e + 2]});
    }
  });
  return Array.from(edges.values());
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
  var kids = this.children(group), counts = new Map(), links = [];
  var owner = this.edgeOwner(group);
  var block = owner >= 0 ? this.blocks.get(owner) : [];
  var lo = group + 1, hi = this.end[group], child = this.childTable(group), n = kids.length;
  for (var e = 0; e < block.length; e += 4) {
    var s = block[e], t = block[e + 1];
    if (s < lo || s >= hi || t < lo || t >= hi) continue;
    var a = child[s - lo], b = child[t - lo];
    if (a !== b) counts.set(a * n + b, (counts.get(a * n + b) || 0) + 1);
  }
  counts.forEach(function (count, key) {
    links.push([Math.floor(key / n), key % n, count]);
  });
  var rank = flowOrder(n, links);
  links.forEach(function (link) {
    if (rank[link[0]] > rank[link[1]]) { var first = link[0]; link[0] = link[1]; link[1] = first; }
  });
  return {links: links, rank: rank};
};

// For each member of a group (ids group + 1 to its end), the index of the child whose subtree
// holds it: a native fill per child, as each child's subtree is the ids from it to the next
// child. A training step's root flow reads it for each of thousands of edges, where a search
// per edge end was most of the first view's own time.
GraphTree.prototype.childTable = function (group) {
  var kids = this.children(group), lo = group + 1, table = new Int32Array(this.end[group] - lo);
  for (var k = 0; k < kids.length; k++) table.fill(k, kids[k] - lo, this.end[kids[k]] - lo);
  return table;
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
