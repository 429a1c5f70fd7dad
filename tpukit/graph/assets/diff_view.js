// tpukit HLO diff viewer: two graphs side by side, linked by the diff's matches.
//
// tpukit/graph/_diff_view.py writes one output holding both graphs' payloads, a table of the
// groups of either program, and the diff's marks: per side, the nodes added (green), removed
// (red) or changed (amber), and for each matched node its match on the other side. Each side
// is a DiffSide that owns a GraphView (graph_view.js) and decorates each node it draws with
// its mark, so the marks stay when groups open and close. Clicking a row of the table, or a
// node on either side, opens and centres the match on both sides and highlights the group's
// row.
// Like the single graph: text reaches the page through textContent only, and nothing here
// touches storage, the parent frame or the network.
//
// Takes: GraphView, unpack, schemaProblem, showStale (graph_view.js), followTheme
//   (graph_theme.js), el and svg (graph_shared.js); dagre (handed in by the page).
// Offers: tpukitDiffView(root, payloads, marks, dagre): the page's entry.
/* global GraphView, unpack, schemaProblem, showStale, followTheme, el, svg */
/* exported tpukitDiffView */

"use strict";

// "part": an op of b that is a part of an op XLA split into several; "split": that op of a;
// "fused": an op of a that XLA fused into an op of b; "inlined": a call of a XLA inlined.
var DIFF_CLASS = {added: "tkd-added", removed: "tkd-removed", changed: "tkd-changed",
  part: "tkd-part", split: "tkd-part", fused: "tkd-fused", inlined: "tkd-part"};
var DIFF_WORD = {added: "added", removed: "removed", changed: "changed",
  part: "part of an op XLA split", split: "split by XLA into several ops",
  fused: "fused by XLA into another op", inlined: "a call XLA inlined"};

function tpukitDiffView(root, payloads, marks, dagre) {
  if (!root || root.getAttribute("data-state")) return;
  root.setAttribute("data-state", "loading");
  followTheme(root);
  Promise.all(payloads.map(unpack)).then(function (datas) {
    var stale = datas.map(schemaProblem).filter(Boolean);
    if (stale.length) showStale(root, "tkd", stale[0]);
    else new DiffView(root, datas, marks, dagre);
  }).catch(function (err) {
    var box = el("div", "tkd-error", root);
    box.textContent = "tpukit could not draw this HLO diff: " + (err && err.message || err);
    root.setAttribute("data-state", "error");
  });
}

function DiffView(root, datas, marks, dagre) {
  var self = this;
  this.root = root;
  this.datas = datas;
  this.marks = marks;
  this.rowOf = [{}, {}];  // per side: group node -> table row
  marks.rows.forEach(function (nodes, r) {
    for (var s = 0; s < 2; s++) if (nodes[s] >= 0) self.rowOf[s][nodes[s]] = r;
  });
  var fallback = root.querySelector(".tkd-fallback");
  if (fallback) fallback.remove();
  this.wrap = root.querySelector(".tkd-table-wrap");
  this.rows = root.querySelectorAll(".tkd-table tbody tr");
  this.current = -1;
  var holders = root.querySelectorAll(".tkd-side");
  this.sides = [];
  for (var s = 0; s < 2; s++) {
    holders[s].setAttribute("data-state", "loading");
    followTheme(holders[s]);
    this.sides.push(new DiffSide(holders[s], datas[s], dagre, this, s));
  }
  Array.prototype.forEach.call(this.rows, function (row) {
    var r = +row.getAttribute("data-row");
    row.addEventListener("click", function () { self.showRow(r); });
    row.addEventListener("keydown", function (event) {
      event.stopPropagation();  // keep notebook shortcuts out of the table
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); self.showRow(r); }
    });
  });
  root.setAttribute("data-state", "ready");
}

// A row of the table: its group on both sides (absent on one side for an added or removed one;
// for a call XLA inlined, the ops made of it are shown and ringed in its place). The panels
// close: they would speak of the node clicked before, over the group now centred. Sides below
// the window (the table is above them) are scrolled into sight, keeping the row in sight too.
DiffView.prototype.showRow = function (r) {
  var nodes = this.marks.rows[r].slice(), made = null;
  if (nodes[0] >= 0 && nodes[1] < 0 && (this.marks.inlined[nodes[0]] || []).length) {
    made = this.marks.inlined[nodes[0]];
    nodes[1] = made[0];
  }
  for (var s = 0; s < 2; s++) {
    this.sides[s].view.select(-1);
    this.sides[s].reveal(nodes[s], s === 1 ? made : null, this.rows[r]);
  }
  this.markRow(r);
};

// A node clicked on side s: the nearest matched node at or above it is shown on the other side
// (an op XLA split: its first part shown, every part ringed; a part: the op it is part of;
// an op XLA fused: the fusion it is in, every fusion it may be in ringed; a fusion: the ops
// fused into it ringed beside its match).
DiffView.prototype.fromNode = function (s, i) {
  var link = this.marks.link[s], parent = this.datas[s].parent;
  var k = i;
  while (k >= 0 && link[k] === undefined) k = parent[k];
  var g = i;
  while (g >= 0 && this.rowOf[s][g] === undefined) g = parent[g];
  this.markRow(g >= 0 ? this.rowOf[s][g] : -1);
  this.sides[s].mark(i);
  this.sides[s].clearOfPanel(i);
  this.sides[1 - s].view.select(-1);  // its panel spoke of the node clicked there before
  var also = k >= 0 ? (this.marks.parts[s][k] || []).concat(this.marks.fused[s][k] || []) : null;
  this.sides[1 - s].reveal(k >= 0 ? link[k] : -1, also, this.sides[s].view.element(i));
};

DiffView.prototype.markRow = function (r) {
  if (this.current >= 0 && this.rows[this.current]) this.rows[this.current].classList.remove("tkd-current");
  this.current = r;
  this.root.setAttribute("data-row", String(r));
  var row = this.rows[r];
  if (!row) return;
  row.classList.add("tkd-current");
  var box = this.wrap.getBoundingClientRect(), at = row.getBoundingClientRect();
  var head = this.wrap.querySelector("thead"), top = box.top + (head ? head.offsetHeight : 0);
  if (at.top < top || at.bottom > box.bottom) {  // scroll the table, never the page
    this.wrap.scrollTop += at.top - top - (box.bottom - top - at.height) / 2;
  }
};

// What the panel says about node i of side s: added, removed or changed, and its match.
DiffView.prototype.describe = function (s, i) {
  var marks = this.marks, status = marks.status[s][i], other = marks.link[s][i];
  var labels = marks.labels, text = [];
  if (status === "added") text.push("only in " + labels[1] + ": added");
  if (status === "removed") text.push("only in " + labels[0] + ": removed");
  var parts = marks.parts[s][i], fused = marks.fused[s][i], names = this.datas[1 - s].label;
  var paired = other !== undefined && !(parts && parts.indexOf(other) >= 0) &&
    !(s === 0 && fused);
  if (paired) {
    text.push("matches " + names[other] + " in " + labels[1 - s]);
  }
  if (parts && s === 1) {
    text.push("part of " + (parts.length > 1 ? "one of " : "") +
      parts.map(function (k) { return names[k]; }).join(", ") + " in " + labels[0] +
      (parts.length > 1 ? " (their op_name, source and data flow do not tell which)" : ""));
  }
  if (parts && s === 0) {
    var shown = parts.slice(0, 6).map(function (k) { return names[k]; }).join(", ");
    text.push("XLA made it into " + parts.length + (paired ? " more" : "") + " op" +
      (parts.length > 1 ? "s" : "") +
      " in " + labels[1] + ": " + shown + (parts.length > 6 ? ", ..." : ""));
  }
  if (fused && s === 0) {
    var into = fused.map(function (k) { return names[k]; });
    if (into.length === 1) text.push("fused by XLA into " + into[0] + " in " + labels[1]);
    else if (marks.copied.indexOf(i) >= 0) {
      text.push("fused by XLA into " + into.join(", ") + " in " + labels[1] + " (copied into each)");
    } else {
      text.push("fused by XLA into one of " + into.join(", ") + " in " + labels[1] +
        " (their op_name, source and data flow do not tell which)");
    }
  }
  if (fused && s === 1) {
    var held = fused.slice(0, 6).map(function (k) { return names[k]; }).join(", ");
    text.push("holds " + fused.length + " op" + (fused.length > 1 ? "s" : "") + " of " +
      labels[0] + " XLA fused into it: " + held + (fused.length > 6 ? ", ..." : ""));
  }
  var r = this.rowOf[s][i];
  if (r !== undefined && status !== "added" && status !== "removed") text.push(marks.notes[r]);
  if (status === "inlined" && !parts) text.push("a call XLA inlined");
  return text.join("; ");
};

// ---------------------------------------------------------------- one side

// Side `side` (0: a, 1: b) of the diff: a GraphView of its program that opens on what changed
// (data.open), however little of it fits the half view, with every node decorated by its mark.
function DiffSide(root, data, dagre, owner, side) {
  var self = this;
  this.root = root;
  this.data = data;
  this.status = owner.marks.status[side];
  this.linked = -1;
  this.also = [];  // more nodes ringed with the linked one: the other parts of a split op
  this.view = new GraphView(root, data, dagre, {
    folds: false,
    decorate: function (i, node, closed, width) { self.decorate(i, node, closed, width); },
    onSelect: function (i) { owner.fromNode(side, i); },
    panelRows: function (i) {
      var text = owner.describe(side, i);
      return text ? [["diff", text, "tkd-panel-diff"]] : [];
    }
  });
}

// Colour what was added, removed or changed; badge the closed boxes; ring the linked node.
DiffSide.prototype.decorate = function (i, node, closed, width) {
  var mark = this.status[i];
  if (mark) {
    node.classList.add(DIFF_CLASS[mark]);
    node.setAttribute("data-diff", mark);
    if ((mark === "added" || mark === "removed") && closed) {
      var badge = svg("text", {"class": "tkd-badge", x: width - 6, y: 14, "text-anchor": "end"}, node);
      badge.textContent = mark === "added" ? "+" : "\u2212";
      var tip = svg("title", {}, node);
      tip.textContent = this.data.label[i] + ": " + DIFF_WORD[mark];
    }
  }
  if (i === this.linked || this.also.indexOf(i) >= 0) node.classList.add("tkd-linked");
};

// Ring node i (or nothing), and the nodes in also (or none), without moving the view.
DiffSide.prototype.mark = function (i, also) {
  this.linked = i;
  this.also = also || [];
  this.root.setAttribute("data-linked", String(i));
  var old = this.root.querySelectorAll(".tkd-linked");
  for (var k = 0; k < old.length; k++) old[k].classList.remove("tkd-linked");
  var ringed = [i].concat(this.also);
  for (var r = 0; r < ringed.length; r++) {
    var shown = ringed[r] >= 0 ? this.view.element(ringed[r]) : null;
    if (shown) shown.classList.add("tkd-linked");
  }
};

// The panel of node i, just opened at the right of this half-width side, must not cover it:
// when it does, the view slides left until the node stands in the room left of the panel,
// in its middle (at its left edge when the node is wider than that room).
DiffSide.prototype.clearOfPanel = function (i) {
  var view = this.view, panel = view.panel && view.panel.element, node = view.element(i);
  if (!panel || panel.hidden || !node) return;
  var box = node.getBoundingClientRect(), cover = panel.getBoundingClientRect();
  if (box.right <= cover.left || box.left >= cover.right) return;
  var left = view.viewport.getBoundingClientRect().left, room = cover.left - left;
  var shift = box.width + 16 > room ? left + 8 - box.left
    : left + room / 2 - (box.left + box.width / 2);
  view.camera.view.tx += shift;
  view.camera.stopRefitting();
  view.camera.apply();
  this.root.setAttribute("data-cleared", String(i));
};

// Open the groups around node i, ring it (and also's nodes) and centre the view on it
// (-1: only clear the rings) -- in the part of the view the page shows, for a side taller
// than the notebook's window. With `clicked` (the element of the node clicked on the other
// side, or the table's row), node i still out of sight (this side scrolled nearly out of the
// window) is scrolled into sight, keeping `clicked` in sight too where both fit.
DiffSide.prototype.reveal = function (i, also, clicked) {
  if (i < 0) { this.mark(-1); return; }
  this.linked = i;
  this.view.reveal(i);
  this.mark(i, also);
  var node = clicked && this.view.element(i);
  if (node) this.root.setAttribute("data-scrolled", String(scrollIntoSight(node, clicked)));
};

// Scroll the page's scrolled boxes that hold `element` (an output with its own scroll, the
// notebook's panel) and then the window, each as little as shows the element whole (its top,
// when taller than the box), as a block "nearest" scrollIntoView would -- but never the
// graph's viewport, whose overflow is hidden: the camera, not a scroll, places the drawing
// there -- and, where both fit, not so far that `keep` (the node clicked on the other side),
// in sight before, leaves it. Returns the pixels scrolled in all (0: it was in sight).
function scrollIntoSight(element, keep) {
  var doc = element.ownerDocument, win = doc.defaultView, moved = 0;
  function by(top, bottom) {  // the scroll that brings the element between top and bottom
    var at = element.getBoundingClientRect(), room = bottom - top;
    var pad = Math.max(0, Math.min(24, (room - at.height) / 2));
    if (at.top >= top && at.bottom <= bottom) return 0;
    if (at.height > room) return at.top - top;
    var shift = at.top < top ? at.top - top - pad : at.bottom - bottom + pad;
    var held = keep && keep.getBoundingClientRect();
    if (!held || held.top < top || held.bottom > bottom) return shift;
    return shift > 0 ? Math.max(at.bottom - bottom, Math.min(shift, held.top - top))
      : Math.min(at.top - top, Math.max(shift, held.bottom - bottom));
  }
  for (var box = element.parentElement; box && box !== doc.body && box !== doc.documentElement;
    box = box.parentElement) {
    var overflow = win.getComputedStyle(box).overflowY;
    if ((overflow !== "auto" && overflow !== "scroll") || box.scrollHeight <= box.clientHeight) continue;
    var edge = box.getBoundingClientRect().top + box.clientTop, before = box.scrollTop;
    box.scrollTop += by(edge, edge + box.clientHeight);
    moved += Math.abs(box.scrollTop - before);
  }
  var shift = by(0, win.innerHeight), y = win.scrollY;
  if (shift) win.scrollBy(0, shift);
  return moved + Math.abs(win.scrollY - y);
}
