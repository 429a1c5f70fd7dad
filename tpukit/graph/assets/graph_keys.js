// tpukit HLO graph viewer, keys: the drawing from the keyboard, as a tree (the tree view
// pattern of WAI-ARIA's Authoring Practices).
//
// The drawing is one stop in the page's Tab order: the node last moved to (at first, the whole
// program). From there the arrows move among the nodes drawn, in the tree's order: Down and Up
// to the next and the previous one, Right opens a closed group (or moves into an open one),
// Left closes an open group (or moves to the group it is in), Home and End to the first and the
// last. Enter shows the node's panel (an instruction's HLO), Space opens or closes a group,
// Escape closes the panel. The keys pressed there stay there: a notebook's one-key shortcuts
// (JupyterLab's d-d deletes a cell) never see them; those with Ctrl, Alt or Cmd, and Shift+Enter
// (save, run the cell), go on to the page. A node moved to from the keyboard is brought into the part
// of the view the page shows (the camera slides as little as shows it, or an open group's
// header), and it keeps the focus when the drawing is drawn again (a group opened or closed).
// A click moves the keyboard's place too, and moves nothing.
//
// Takes: view (graph_view.js's GraphView: its data, tree, layout, camera, scene, viewport and
//   panel; select(i), toggle(i)).
// Offers: new GraphKeys(view), with
//   holding(): whether the focus is on a node (asked before a drawing)
//   mark(i, element, label): called as each node is drawn, in the tree's order (an open group's
//     frame before its children), with what a screen reader says of it
//   drawn(held): after a drawing, the one node in the Tab order, focused again if `held`
/* global HEADER_H */
/* exported GraphKeys */

"use strict";

function GraphKeys(view) {
  var self = this, scene = view.scene;
  this.view = view;
  this.order = [];        // the nodes drawn, in the tree's order
  this.elements = {};     // node -> its drawn element
  this.cursor = 0;        // the node in the Tab order
  this.restoring = false; // the focus is being put back after a drawing: nothing moves
  scene.setAttribute("role", "tree");
  scene.setAttribute("tabindex", "-1");  // (a tree is a Tab stop of its own in Chromium: its nodes are)
  scene.setAttribute("aria-label", "HLO graph of " + view.data.title +
    ": arrows move, Enter shows a node, Space opens or closes a group");
  scene.addEventListener("keydown", function (event) { self.key(event); });
  scene.addEventListener("focusin", function (event) { self.focused(event.target); });
}

GraphKeys.prototype.holding = function () {
  var active = this.view.scene.ownerDocument.activeElement;
  return !!active && this.view.scene.contains(active);
};

GraphKeys.prototype.mark = function (i, element, label) {
  if (i === 0) { this.order = []; this.elements = {}; }  // (a drawing starts at the program)
  var tree = this.view.tree, level = 1;
  for (var p = this.view.data.parent[i]; p >= 0; p = this.view.data.parent[p]) level += 1;
  this.order.push(i);
  this.elements[i] = element;
  element.setAttribute("tabindex", "-1");
  element.setAttribute("role", "treeitem");
  element.setAttribute("aria-level", String(level));
  element.setAttribute("aria-label", label.replace(/\s+/g, " "));
  if (i !== 0 && tree.hasChildren(i)) element.setAttribute("aria-expanded", String(tree.isOpen(i)));
};

GraphKeys.prototype.drawn = function (held) {
  var parent = this.view.data.parent, i = this.cursor;
  while (i >= 0 && !this.elements[i]) i = parent[i];  // a node closed away: its group
  this.cursor = i >= 0 ? i : this.order[0];
  var element = this.elements[this.cursor];
  if (!element) return;
  element.setAttribute("tabindex", "0");
  if (!held) return;
  this.restoring = true;
  element.focus({preventScroll: true});
  this.restoring = false;
};

// Node i becomes the one in the Tab order (a click, a key, a Tab into the drawing).
GraphKeys.prototype.focused = function (target) {
  var holder = target.closest && target.closest("[data-node]");
  if (!holder) return;
  var i = +holder.getAttribute("data-node"), before = this.elements[this.cursor];
  if (before && before !== holder) before.setAttribute("tabindex", "-1");
  holder.setAttribute("tabindex", "0");
  this.cursor = i;
  var vp = this.view.viewport;  // (a browser scrolls a focused element into sight: not here)
  vp.scrollTop = 0;
  vp.scrollLeft = 0;
  if (this.restoring || i === 0 || !holder.matches(":focus-visible")) return;  // a click: nothing moves
  var panel = this.view.panel, covered = panel && !panel.element.hidden ? panel.element.offsetWidth : 0;
  this.view.camera.bringIn(i, this.view.tree.isOpen(i) ? HEADER_H : 0, covered);
};

GraphKeys.prototype.key = function (event) {
  var view = this.view, tree = view.tree, i = this.cursor, at = this.order.indexOf(i);
  if (event.altKey || event.ctrlKey || event.metaKey || (event.shiftKey && event.key === "Enter")) {
    return;  // the page's own (Ctrl+S saves the notebook, Shift+Enter runs the cell)
  }
  event.stopPropagation();  // keep the notebook's one-key shortcuts out of the drawing
  if (at < 0) return;
  var open = tree.isOpen(i) && i !== 0, group = i !== 0 && tree.hasChildren(i), to = -1;
  switch (event.key) {
    case "ArrowDown": to = this.order[Math.min(at + 1, this.order.length - 1)]; break;
    case "ArrowUp": to = this.order[Math.max(at - 1, 0)]; break;
    case "Home": to = this.order[0]; break;
    case "End": to = this.order[this.order.length - 1]; break;
    case "ArrowRight":
      if (group && !open) view.toggle(i); else if (tree.isOpen(i)) to = this.order[at + 1];
      break;
    case "ArrowLeft":
      if (open) view.toggle(i); else to = this.drawnAbove(i);
      break;
    case "Enter": view.select(i); break;
    case " ": if (group) view.toggle(i); break;
    case "Escape": view.select(-1); break;
    default: return;
  }
  event.preventDefault();
  if (to >= 0 && this.elements[to]) this.elements[to].focus({preventScroll: true});
};

// The nearest group drawn around node i (-1 for the whole program).
GraphKeys.prototype.drawnAbove = function (i) {
  var parent = this.view.data.parent;
  for (var p = parent[i]; p >= 0; p = parent[p]) if (this.elements[p]) return p;
  return -1;
};
