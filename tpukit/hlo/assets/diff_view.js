// tpukit HLO diff viewer: two graphs side by side, linked by the diff's matches.
//
// tpukit/hlo/_diff_view.py writes one output holding both graphs' payloads, a table of the
// groups of either program, and the diff's marks: per side, the nodes added (green), removed
// (red) or changed (amber), and for each matched node its match on the other side. Each side
// is a GraphView (graph_view.js) whose render also paints the marks, so they stay when
// groups open and close. Clicking a row of the table, or a node on either side, opens and
// centres the match on both sides and highlights the group's row.
// Like the single graph: text reaches the page through textContent only, and nothing here
// touches storage, the parent frame or the network.

"use strict";

var DIFF_CLASS = {added: "tkd-added", removed: "tkd-removed", changed: "tkd-changed"};
var DIFF_WORD = {added: "added", removed: "removed", changed: "changed"};

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

// A row of the table: its group on both sides (absent on one side for an added or removed one).
DiffView.prototype.showRow = function (r) {
  var nodes = this.marks.rows[r];
  for (var s = 0; s < 2; s++) this.sides[s].reveal(nodes[s]);
  this.markRow(r);
};

// A node clicked on side s: the nearest matched node at or above it is shown on the other side.
DiffView.prototype.fromNode = function (s, i) {
  var link = this.marks.link[s], parent = this.sides[s].data.parent;
  var k = i;
  while (k >= 0 && link[k] === undefined) k = parent[k];
  var g = i;
  while (g >= 0 && this.rowOf[s][g] === undefined) g = parent[g];
  this.markRow(g >= 0 ? this.rowOf[s][g] : -1);
  this.sides[s].mark(i);
  this.sides[1 - s].reveal(k >= 0 ? link[k] : -1);
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
  if (other !== undefined) {
    text.push("matches " + this.sides[1 - s].data.label[other] + " in " + labels[1 - s]);
  }
  var r = this.rowOf[s][i];
  if (r !== undefined && status !== "added" && status !== "removed") text.push(marks.notes[r]);
  return text.join("; ");
};

// ---------------------------------------------------------------- one side

function DiffSide(root, data, dagre, owner, side) {
  this.owner = owner;
  this.side = side;
  this.linked = -1;
  GraphView.call(this, root, data, dagre);
}

DiffSide.prototype = Object.create(GraphView.prototype);
DiffSide.prototype.constructor = DiffSide;
// A side opens on what changed (data.open), however little of it fits the half view.
DiffSide.prototype.foldsToFit = false;

DiffSide.prototype.render = function (anchor) {
  GraphView.prototype.render.call(this, anchor);
  this.paintDiff();
};

// Colour what was added, removed or changed; badge the closed boxes; ring the linked node.
DiffSide.prototype.paintDiff = function () {
  var status = this.owner.marks.status[this.side];
  var drawn = this.scene.querySelectorAll("[data-node]");
  for (var k = 0; k < drawn.length; k++) {
    var node = drawn[k], i = +node.getAttribute("data-node"), mark = status[i];
    if (mark) {
      node.classList.add(DIFF_CLASS[mark]);
      node.setAttribute("data-diff", mark);
      if (mark !== "changed" && node.classList.contains("tkg-node")) {
        var badge = svg("text", {"class": "tkd-badge", x: this.w[i] - 6, y: 14, "text-anchor": "end"}, node);
        badge.textContent = mark === "added" ? "+" : "\u2212";
        var tip = svg("title", {}, node);
        tip.textContent = this.data.label[i] + ": " + DIFF_WORD[mark];
      }
    }
    if (i === this.linked) node.classList.add("tkd-linked");
  }
};

DiffSide.prototype.select = function (i) {
  var changed = i !== this.selected;
  GraphView.prototype.select.call(this, i);
  if (i >= 0 && changed) this.owner.fromNode(this.side, i);
};

DiffSide.prototype.fillPanel = function (i) {
  GraphView.prototype.fillPanel.call(this, i);
  var text = this.owner.describe(this.side, i);
  if (!text) return;
  var dt = el("dt", ""), dd = el("dd", "tkd-panel-diff");
  dt.textContent = "diff";
  dd.textContent = text;
  dd.setAttribute("data-field", "diff");
  this.panelFields.insertBefore(dd, this.panelFields.firstChild);
  this.panelFields.insertBefore(dt, dd);
};

// Ring node i (or nothing) without moving the view.
DiffSide.prototype.mark = function (i) {
  this.linked = i;
  this.root.setAttribute("data-linked", String(i));
  var old = this.scene.querySelectorAll(".tkd-linked");
  for (var k = 0; k < old.length; k++) old[k].classList.remove("tkd-linked");
  var shown = this.scene.querySelector('[data-node="' + i + '"]');
  if (shown) shown.classList.add("tkd-linked");
};

// Open the groups around node i, ring it and centre the view on it (-1: only clear the ring).
DiffSide.prototype.reveal = function (i) {
  if (i < 0) { this.mark(-1); return; }
  for (var a = this.data.parent[i]; a >= 0; a = this.data.parent[a]) this.expanded[a] = 1;
  this.linked = i;
  this.render(-1);
  this.grow();
  if (i === 0) this.fit(false); else this.centerOn(i);
  this.mark(i);
};
