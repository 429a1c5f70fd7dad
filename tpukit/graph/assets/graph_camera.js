// tpukit HLO graph viewer, camera: which part of the drawing shows, at what scale.
//
// The page's scroll belongs to the page. A plain wheel over the graph scrolls the notebook;
// Ctrl/Cmd + wheel zooms, and so does a touchpad pinch (browsers send it as a wheel event
// with ctrlKey set); a click inside the graph lets a plain wheel zoom too, until the pointer
// leaves the drawing, Escape is pressed or the page is clicked elsewhere.
//
// The first view fits the drawing, but never below the notebook's small text. The payload
// chose its groups (data.open) to fit a frame (data.frame, _graph_frame.py): a view at least
// that wide opens exactly those, as the text counts them, and grows its height to the
// frame's when the drawing needs it; a drawing too big even so starts on its first open
// group (the work). A narrower view opens them one by one while the whole drawing still
// fits the view at that size; one that would not stays closed (foldToFit): a training step too big to show
// its layers shows its sections, each readable and a click from its layers, rather than a
// corner of one open section. A graph too big even so shows its start (the top) at a
// readable size, to pan from. The Fit button shows the whole drawing however small, with
// the groups that were folded open again (until the user opens or closes one). The view
// refits whenever the output changes size -- so an output that was hidden or narrow when it
// was drawn gets its fit when it shows -- until the user zooms, pans, searches or opens a
// group.
//
// A group the user opens opens in place: its top-left stays where its closed box was, so the
// eye stays on what it clicked. When the open group fits the view there, nothing moves; when
// it runs past an edge, the view slides (and zooms out, as far as needed and never below the
// readable scale above) until the whole group shows (follow). A group too big even so shows
// its start, its header and first ranks at the view's top-left, and the hint below the
// drawing says so. Closing a group moves nothing. The slide takes MOVE_MS (none where the
// user asks for reduced motion); the root's data-camera says "moving" meanwhile, "still"
// after, and data-follow what the last opening did: "kept", "moved" or "start".
//
// Takes: parts = {root, viewport, scene, legend, hint} (the view's elements: the camera
//   moves `scene` inside `viewport`, reads the page's small text from `legend`, writes how
//   to zoom in `hint` and data-scale on `root`), tree (graph_tree.js: the camera opens and
//   closes groups only to fold the first view), layout (graph_layout.js: sizes and places),
//   folds (false: keep the groups the tree opens, however little fits), and the view's
//   callbacks: shown() (the nodes drawn as boxes), redraw() (draw again, view kept),
//   click(target) (a click that was not a drag), open(i) (a double click on node i).
// Offers: new GraphCamera(parts), with
//   fit(whole), firstView(), foldToFit(), grow(), centerOn(i) (in the part of the view the
//     page shows: room(covered))
//   redrawn(before, after): after the view drew, keep a node that moved from `before` to
//     `after` (drawing units; null: none) where it was on screen
//   setTitle(text): the program's title, kept in view
//   follow(i, covered): after group i opened, bring it into the view (less `covered` pixels
//     at its right, where the panel floats)
//   bringIn(i, top, covered): node i, moved to from the keyboard, slid into the view
//   stopRefolding() (the user opened a group or searched), stopRefitting() (the user moved)
/* global MARGIN, clip */
/* exported GraphCamera */

"use strict";

var LABEL_PX = 11;        // node labels' font size in drawing units (graph_view.css)
var MIN_LABEL_PX = 11;    // the smallest a label may be on screen, unless the page's small text is bigger
var MAX_SCALE = 1.25, MIN_HEIGHT = 220;
var HINT = "Ctrl+scroll or click to zoom \u00b7 drag to pan";
var HINT_ACTIVE = "scroll zooms \u00b7 Esc or click outside to scroll the page";
var MOVE_MS = 240;        // a camera move after a group opens (follow)

function GraphCamera(parts) {
  this.root = parts.root;
  this.viewport = parts.viewport;
  this.scene = parts.scene;
  this.legend = parts.legend;
  this.hint = parts.hint;
  this.tree = parts.tree;
  this.layout = parts.layout;
  this.folds = parts.folds !== false;
  this.shown = parts.shown;
  this.redraw = parts.redraw;
  this.view = {k: 1, tx: MARGIN, ty: MARGIN};
  this.title = null;
  this.active = false;
  this.touched = false;    // the user moved the view: stop refitting it
  this.fitted = false;     // the first fit happened (it waits while the output has no size)
  this.opened = false;     // the user opened or closed a group (or searched): no refolding
  this.whole = false;      // fit the whole drawing (the Fit button), not just a readable start
  this.asSaid = false;     // the first view opened the payload's groups as they are (no fold)
  this.fittedSize = "";
  this.autoHeight = "";
  this.fullHeight = 0;
  this.note = "";          // what the hint says before how to zoom (a group bigger than the view)
  this.move = null;        // the move under way: {to, frame}
  this.root.setAttribute("data-camera", "still");
  this.showHint();
  this.bind(parts.click, parts.open);
}

GraphCamera.prototype.bind = function (click, open) {
  var self = this, vp = this.viewport, drag = null;
  this.onKey = function (event) { if (event.key === "Escape") self.activate(false); };
  this.onOutside = function (event) { if (!vp.contains(event.target)) self.activate(false); };

  vp.addEventListener("pointerdown", function (event) {
    if (event.button !== 0) return;
    self.settle();
    self.activate(true);
    drag = {x: event.clientX, y: event.clientY, tx: self.view.tx, ty: self.view.ty, moved: false,
      target: event.target, id: event.pointerId};
  });
  vp.addEventListener("pointermove", function (event) {
    if (!drag) return;
    var dx = event.clientX - drag.x, dy = event.clientY - drag.y;
    if (!drag.moved && dx * dx + dy * dy < 16) return;
    if (!drag.moved) { drag.moved = true; vp.classList.add("tkg-panning"); vp.setPointerCapture(drag.id); }
    self.view.tx = drag.tx + dx; self.view.ty = drag.ty + dy;
    self.touched = true;
    self.say("");
    self.apply();
  });
  function finish(event) {
    if (!drag) return;
    var was = drag;
    drag = null;
    vp.classList.remove("tkg-panning");
    if (was.moved || event.type === "pointercancel") return;
    click(was.target);
  }
  vp.addEventListener("pointerup", finish);
  vp.addEventListener("pointercancel", finish);
  vp.addEventListener("pointerleave", function () { if (!drag) self.activate(false); });
  vp.addEventListener("dblclick", function (event) {
    var hitNode = event.target.closest && event.target.closest("[data-node]");
    if (hitNode && !event.target.closest(".tkg-toggle")) open(+hitNode.getAttribute("data-node"));
  });
  vp.addEventListener("wheel", function (event) {
    if (!(event.ctrlKey || event.metaKey || self.active)) return;  // the page scrolls
    event.preventDefault();
    var dy = event.deltaY * (event.deltaMode === 1 ? 16 : event.deltaMode === 2 ? 400 : 1);
    var pinch = event.ctrlKey && Math.abs(dy) < 50;  // touchpad pinch: many small steps
    var step = Math.max(-0.5, Math.min(0.5, -dy * (pinch ? 0.01 : 0.002)));
    var rect = vp.getBoundingClientRect();
    self.zoomAt(event.clientX - rect.left, event.clientY - rect.top, Math.exp(step));
  }, {passive: false});

  if (typeof ResizeObserver !== "undefined") {
    new ResizeObserver(function () { self.resized(); }).observe(vp);
  }
};

GraphCamera.prototype.stopRefolding = function () { this.opened = true; };

GraphCamera.prototype.stopRefitting = function () { this.touched = true; };

// While active, a plain wheel zooms; the page listeners that end it exist only meanwhile.
GraphCamera.prototype.activate = function (on) {
  if (this.active === on) return;
  this.active = on;
  this.viewport.classList.toggle("tkg-active", on);
  this.showHint();
  var doc = this.root.ownerDocument;
  if (on) {
    doc.addEventListener("keydown", this.onKey, true);
    doc.addEventListener("pointerdown", this.onOutside, true);
  } else {
    doc.removeEventListener("keydown", this.onKey, true);
    doc.removeEventListener("pointerdown", this.onOutside, true);
  }
};

// The hint below the drawing: the camera's note, if any, then how to zoom.
GraphCamera.prototype.showHint = function () {
  this.hint.textContent = (this.note ? this.note + " \u00b7 " : "") + (this.active ? HINT_ACTIVE : HINT);
};

GraphCamera.prototype.say = function (note) {
  if (note === this.note) return;
  this.note = note;
  this.showHint();
};

GraphCamera.prototype.zoomAt = function (mx, my, factor) {
  this.settle();
  this.say("");
  var v = this.view, k = Math.min(4, Math.max(0.03, v.k * factor));
  v.tx = mx - (mx - v.tx) * k / v.k;
  v.ty = my - (my - v.ty) * k / v.k;
  v.k = k;
  this.touched = true;
  this.apply();
};

GraphCamera.prototype.redrawn = function (before, after) {
  this.settle();
  if (before) {
    this.view.tx += (before[0] - after[0]) * this.view.k;
    this.view.ty += (before[1] - after[1]) * this.view.k;
  }
  this.apply();
};

GraphCamera.prototype.apply = function () {
  var v = this.view;
  this.scene.setAttribute("transform", "translate(" + v.tx + "," + v.ty + ") scale(" + v.k + ")");
  this.root.setAttribute("data-scale", v.k.toFixed(3));
  this.keepTitleInView();
};

GraphCamera.prototype.setTitle = function (text) {
  this.title = text;
  this.keepTitleInView();
};

// The program's title heads the outermost box; when a drawing too wide for the view shows
// its busiest column, that box's left edge lies off screen, so the title slides right to
// stay readable at the view's left edge.
GraphCamera.prototype.keepTitleInView = function () {
  var title = this.title, v = this.view, layout = this.layout;
  if (!title || !title.isConnected) return;
  var left = (MARGIN - v.tx) / v.k - layout.x[0];
  title.setAttribute("x", String(Math.max(8, Math.min(left + 8, layout.w[0] - 8))));
};

GraphCamera.prototype.resized = function () {
  var vp = this.viewport, size = vp.clientWidth + "x" + vp.clientHeight;
  if (size === this.fittedSize) return;
  if (!this.fitted || !this.touched) this.fit();
};

// The smallest scale at which labels are as big as the page's small text (at least 11 px).
GraphCamera.prototype.minScale = function () {
  var small = parseFloat(getComputedStyle(this.legend).fontSize) || 0;
  return Math.max(MIN_LABEL_PX, Math.min(small, 14)) / LABEL_PX;
};

// The scale at which the whole drawing fits the view (at most MAX_SCALE).
GraphCamera.prototype.fitScale = function (vw, vh) {
  return Math.min(MAX_SCALE, (vw - 2 * MARGIN) / this.layout.w[0], (vh - 2 * MARGIN) / this.layout.h[0]);
};

// Open the first view's groups (data.open, the outermost first) while the whole drawing fits
// the view at a readable scale; a group that would not fit stays closed, except a call or
// loop that the first view enters (it holds the program: one closed box would say nothing).
// Sizes only: nothing is drawn. Until the user opens a group, every fit folds again, so an
// output drawn narrow or hidden gets the first view of its final size. Returns whether the
// open groups changed (the caller draws again).
GraphCamera.prototype.foldToFit = function () {
  var vp = this.viewport, vw = vp.clientWidth, vh = Math.max(this.roomHeight(), this.frameHeight());
  if (!this.folds || !vw || !vh) return false;  // hidden: the first fit folds
  var tree = this.tree, layout = this.layout;
  var before = tree.openState(), open = tree.data.open, minK = this.minScale();
  var frame = tree.data.frame;
  this.asSaid = Boolean(frame && vw >= frame[0] * minK + 2 * MARGIN);
  if (this.asSaid) {  // as wide as the frame: its groups, as the text says
    tree.resetOpen();
    layout.arrange();
    return tree.changedSince(before);
  }
  tree.closeAll();
  for (var k = 0; k < open.length; k++) {
    var group = open[k];
    if (group === 0 || tree.shownAs(group) !== group) continue;  // inside a closed group
    tree.setOpen(group, true);
    if (!tree.isOpen(group) || tree.isInstruction(group)) continue;
    if (layout.leastHeight(group) * minK > vh - 2 * MARGIN) {  // too tall whatever its layout
      tree.setOpen(group, false);
      continue;
    }
    layout.measure();
    if (this.fitScale(vw, vh) < minK) tree.setOpen(group, false);
  }
  layout.arrange();  // sizes and places of what is open now, as the view's drawing leaves them
  return tree.changedSince(before);
};

// The view's height that shows the first view's frame (the payload's, `_graph_frame.py`):
// the first view opens the groups whose drawing fits it, and the view grows to show them.
GraphCamera.prototype.frameHeight = function () {
  var frame = this.tree.data.frame;
  return frame ? frame[1] * this.minScale() + 2 * MARGIN : 0;
};

// Fit (the whole drawing, however small) shows every group the first view opens, folded
// or not. Returns whether that opened any.
GraphCamera.prototype.unfold = function () {
  var before = this.tree.openState();
  this.tree.resetOpen();
  return this.tree.changedSince(before);
};

// The height the view may have: its own, or the full one where the first fit shortened it.
GraphCamera.prototype.roomHeight = function () {
  var vp = this.viewport;
  return this.autoHeight && vp.style.height === this.autoHeight ? this.fullHeight : vp.clientHeight;
};

// Collapse: the first view again, fitted as when it was first drawn (a height that the
// first fit gave the view goes back to the default first).
GraphCamera.prototype.firstView = function () {
  var vp = this.viewport;
  if (this.autoHeight && vp.style.height === this.autoHeight) vp.style.height = "";
  this.fitted = false;
  this.opened = false;
  this.tree.resetOpen();
  this.foldToFit();
  this.redraw();
  this.fit(false);
};

// Fit the drawing to the view, never below a readable scale (then the start shows) unless
// `whole` (then the whole drawing shows). Later refits, on resizes, keep the choice. The
// first fit also sets the height of the view to the drawing's, up to its default height.
GraphCamera.prototype.fit = function (whole) {
  this.settle();
  this.say("");
  if (whole !== undefined) this.whole = whole;
  this.touched = false;
  var vp = this.viewport, vw = vp.clientWidth, vh = vp.clientHeight;
  if (!vw || !vh) return;  // hidden, or not in the page yet: the ResizeObserver calls again
  if (!this.opened && (this.whole ? this.unfold() : this.foldToFit())) {
    this.redraw();
    this.grow();
    vh = vp.clientHeight;
  }
  var gw = this.layout.w[0], gh = this.layout.h[0], minK = this.whole ? 0.03 : this.minScale();
  var k = this.fitScale(vw, vh);
  if (k < minK) k = minK;
  if (!this.fitted) {
    this.fitted = true;
    this.fullHeight = vh;
    var want = Math.max(MIN_HEIGHT, Math.ceil(gh * k + 2 * MARGIN));
    if (want < vh) {
      this.autoHeight = want + "px";
      vp.style.height = this.autoHeight;
      vh = vp.clientHeight;
    }
  }
  // A first view taller than the view (up to the payload's frame): the view grows to it,
  // unless the user set its height.
  var tall = Math.min(Math.ceil(gh * minK + 2 * MARGIN), Math.ceil(this.frameHeight()));
  var own = !vp.style.height || vp.style.height === this.autoHeight;
  if (!this.whole && own && this.fitScale(vw, vh) < minK && tall > vh) {
    this.autoHeight = tall + "px";
    vp.style.height = this.autoHeight;
    vh = vp.clientHeight;
    k = Math.max(minK, this.fitScale(vw, vh));
  }
  var tx;
  if (gw * k <= vw - 2 * MARGIN) {
    tx = (vw - gw * k) / 2;
  } else {
    tx = MARGIN - this.busiestColumn((vw - 2 * MARGIN) / k, (vh - MARGIN) / k) * k;
    tx = Math.max(vw - MARGIN - gw * k, Math.min(MARGIN, tx));
  }
  var ty = MARGIN, work = this.work();
  if (this.asSaid && work > 0 && gh * k > vh - 2 * MARGIN) {  // too big: start on the work
    ty = Math.max(vh - MARGIN - gh * k, Math.min(MARGIN, MARGIN - this.layout.y[work] * k));
    if (gw * k > vw - 2 * MARGIN) {
      tx = Math.max(vw - MARGIN - gw * k, Math.min(MARGIN, MARGIN - this.layout.x[work] * k));
    }
  }
  this.view = {k: k, tx: tx, ty: ty};
  this.fittedSize = vw + "x" + vh;
  this.apply();
};

// The group the first view opened first below the root (the one holding the most FLOPs,
// `_first_view.py`), if it is drawn open; else 0.
GraphCamera.prototype.work = function () {
  var open = this.tree.data.open;
  for (var k = 1; k < open.length; k++) {
    if (this.tree.isOpen(open[k]) && !this.tree.isInstruction(open[k])) return open[k];
  }
  return 0;
};

// The left edge of the strip, `width` wide, that holds the most boxes whose top is above
// `bottom`: where a drawing too wide for the view shows its start. The strip then moves
// left to the edge of a group it cuts through, if the boxes still fit, so that the group's
// title shows.
GraphCamera.prototype.busiestColumn = function (width, bottom) {
  var boxes = [], best = 0, most = -1, right = 0, layout = this.layout, shown = this.shown();
  for (var s = 0; s < shown.length; s++) {
    var i = shown[s];
    if (layout.y[i] < bottom) boxes.push([layout.x[i], layout.x[i] + Math.min(layout.w[i], width)]);
  }
  boxes.forEach(function (start) {
    var count = 0, end = start[0];
    boxes.forEach(function (box) {
      if (box[0] >= start[0] && box[1] <= start[0] + width) { count++; end = Math.max(end, box[1]); }
    });
    if (count > most || (count === most && start[0] < best)) { most = count; best = start[0]; right = end; }
  });
  layout.openGroups().forEach(function (g) {
    var left = layout.x[g];
    if (layout.y[g] < bottom && left < best && best < left + layout.w[g] && right - left <= width) best = left;
  });
  return best;
};

// After a group opens, a view that the first fit made short goes back to its full height
// if the drawing needs it (a height the user dragged stays).
GraphCamera.prototype.grow = function () {
  var vp = this.viewport;
  if (this.autoHeight && vp.style.height === this.autoHeight && vp.clientHeight < this.fullHeight &&
      this.layout.h[0] * this.view.k + 2 * MARGIN > vp.clientHeight) vp.style.height = "";
};

// Centre node i in the part of the view the page shows (room: a view taller than the
// notebook's window, its part above the fold), at a readable scale at least.
GraphCamera.prototype.centerOn = function (i) {
  this.settle();
  this.say("");
  var room = this.room(0) || {left: 0, top: 0, right: 800, bottom: 600}, layout = this.layout;
  this.view.k = Math.max(this.view.k, this.minScale());
  this.view.tx = (room.left + room.right) / 2 - (layout.x[i] + layout.w[i] / 2) * this.view.k;
  this.view.ty = (room.top + room.bottom) / 2 - (layout.y[i] + layout.h[i] / 2) * this.view.k;
  this.touched = true;
  this.apply();
};

// ---------------------------------------------------------------- following an opened group

// Group i just opened in place, its top-left where its closed box was: where the open group
// fits the view as it is, nothing moves; else the view zooms out about that corner, as far
// as needed to hold the whole group but never below the readable scale (or the scale the
// user chose, if smaller), and slides as little as brings the group inside the margins. A
// group bigger than the view even so shows its start: where it is too tall, its top (header,
// first ranks) at the view's top; too wide, its left edge at the view's left; and the hint
// says so. The view here is the part of it the page shows (room): a view taller than the
// notebook's window counts down to the fold, and `covered` pixels at its right, where the
// panel floats, do not count. For example, a group opened 300 pixels too far right for a
// view it fits slides left by 300, unscaled.
GraphCamera.prototype.follow = function (i, covered) {
  this.settle();
  var room = this.room(covered), layout = this.layout, v = this.view;
  if (!room) return;
  var w = layout.w[i], h = layout.h[i], k = v.k;
  var across = room.right - room.left - 2 * MARGIN, down = room.bottom - room.top - 2 * MARGIN;
  var whole = Math.min(across / w, down / h);
  if (whole < k) k = Math.max(whole, Math.min(k, this.minScale()));
  var left = v.tx + layout.x[i] * v.k, top = v.ty + layout.y[i] * v.k;  // the corner, kept while zooming
  var dx = slide(left, w * k, room.left, room.right), dy = slide(top, h * k, room.top, room.bottom);
  var start = w * k > across + 0.5 || h * k > down + 0.5;
  var kept = k === v.k && Math.abs(dx) < 0.5 && Math.abs(dy) < 0.5;
  this.root.setAttribute("data-follow", kept ? "kept" : start ? "start" : "moved");
  var name = clip(this.tree.data.label[i], 40);
  this.say(start ? name + " is bigger than the view: its start shows, drag to see the rest" : "");
  if (kept) return;
  this.moveTo({k: k, tx: left + dx - layout.x[i] * k, ty: top + dy - layout.y[i] * k}, layout.x[i], layout.y[i]);
};

// Node i, moved to from the keyboard, brought into the part of the view the page shows: the
// view slides (at its scale) as little as shows it -- an open group's header alone (`top`
// drawing units high), the left part of a box wider than the view. Where it shows, nothing moves.
GraphCamera.prototype.bringIn = function (i, top, covered) {
  this.settle();
  var room = this.room(covered), layout = this.layout, v = this.view;
  if (!room) return;
  var left = v.tx + layout.x[i] * v.k, upper = v.ty + layout.y[i] * v.k;
  var w = Math.min(layout.w[i] * v.k, room.right - room.left - 2 * MARGIN);
  var dx = slide(left, w, room.left, room.right);
  var dy = slide(upper, (top || layout.h[i]) * v.k, room.top, room.bottom);
  if (Math.abs(dx) < 0.5 && Math.abs(dy) < 0.5) return;
  this.touched = true;
  this.moveTo({k: v.k, tx: v.tx + dx, ty: v.ty + dy}, layout.x[i], layout.y[i]);
};

// The part of the view the page shows, in the view's pixels ({left, top, right, bottom}), less
// `covered` pixels at its right: the view clipped by the boxes around it that scroll or clip
// (the notebook's panel, an output's scroll) and by the window. A part under 240 pixels each
// way (the view scrolled nearly out of sight) counts as the whole view; null: no size.
GraphCamera.prototype.room = function (covered) {
  var vp = this.viewport, vw = vp.clientWidth, vh = vp.clientHeight;
  if (!vw || !vh) return null;
  var at = vp.getBoundingClientRect(), doc = vp.ownerDocument, win = doc.defaultView;
  var shown = {left: 0, top: 0, right: win.innerWidth, bottom: win.innerHeight};
  // (not the body: its overflow is the window's, and JupyterLab's body has no height)
  for (var box = vp.parentElement; box && box !== doc.body && box !== doc.documentElement; box = box.parentElement) {
    if (win.getComputedStyle(box).overflowY === "visible") continue;
    var edge = box.getBoundingClientRect();
    shown = {left: Math.max(shown.left, edge.left), top: Math.max(shown.top, edge.top),
      right: Math.min(shown.right, edge.right), bottom: Math.min(shown.bottom, edge.bottom)};
  }
  var room = {left: Math.max(0, shown.left - at.left), top: Math.max(0, shown.top - at.top),
    right: Math.min(vw, shown.right - at.left), bottom: Math.min(vh, shown.bottom - at.top)};
  if (room.right - room.left < Math.min(240, vw)) { room.left = 0; room.right = vw; }
  if (room.bottom - room.top < Math.min(240, vh)) { room.top = 0; room.bottom = vh; }
  var left = Math.min(room.right, vw - (covered || 0));  // the panel's left edge, or the room's
  if (left - room.left >= 240) room.right = left;
  return room;
};

// How far a box from `start`, `size` long on screen, slides to lie between `low` and `high`
// (less the margins): as little as brings it in, or, too long for that, to its start.
function slide(start, size, low, high) {
  low += MARGIN; high -= MARGIN;
  if (size > high - low || start < low) return low - start;
  return start + size > high ? high - (start + size) : 0;
}

// Move the view to `to` in MOVE_MS: the point (x, y) of the drawing goes in a straight line
// on screen while the scale changes evenly (at once where the user asks for reduced motion).
GraphCamera.prototype.moveTo = function (to, x, y) {
  this.settle();
  var self = this, from = this.view, root = this.root, win = root.ownerDocument.defaultView;
  var reduced = win.matchMedia && win.matchMedia("(prefers-reduced-motion: reduce)").matches;
  if (reduced || !win.requestAnimationFrame) {
    this.view = to;
    this.apply();
    return;
  }
  var sx = from.tx + x * from.k, sy = from.ty + y * from.k, ex = to.tx + x * to.k, ey = to.ty + y * to.k;
  var began = null, move = {to: to, frame: 0, win: win};
  function step(now) {
    if (began === null) began = now;
    var t = Math.min(1, (now - began) / MOVE_MS), e = 1 - Math.pow(1 - t, 3);  // eases out
    var k = from.k * Math.pow(to.k / from.k, e);
    self.view = {k: k, tx: sx + (ex - sx) * e - x * k, ty: sy + (ey - sy) * e - y * k};
    if (t < 1) {
      self.apply();
      move.frame = win.requestAnimationFrame(step);
    } else {
      self.settle();
    }
  }
  this.move = move;
  root.setAttribute("data-camera", "moving");
  move.frame = win.requestAnimationFrame(step);
};

// End the move under way, if any, where it was going (before anything else moves the view).
GraphCamera.prototype.settle = function () {
  var move = this.move;
  if (!move) return;
  this.move = null;
  move.win.cancelAnimationFrame(move.frame);
  this.view = move.to;
  this.root.setAttribute("data-camera", "still");
  this.apply();
};
