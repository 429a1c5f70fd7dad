// tpukit HLO graph viewer, colour: what a closed node's fill says. By default its kind of
// op (the payload's categories and palette); a graph that carries a measure colours nodes
// on the heat scale by their share of it, and a toolbar button goes back to the kinds.
//
// The measures: a profile (Compiled.profile) sends each node's measured seconds per run in
// data.time and the program's in data.timeTotal (null: not in the trace; a group's is the
// sum of its members'). A memory view (MemoryView.graph()) sends in data.memory the bytes
// each node holds at the program's peak -- XLA's buffers live then, each at the instruction
// that made it (a group holds its members' sum, a loop also what its body holds; null:
// nothing at the peak) -- and in data.memoryTotal the bytes in use at the peak. The heat
// scale is a log scale from 1% to 100%; its colours, and where on it the fills turn dark
// enough for white text, come in the payload (data.heat).
//
// Takes: data, the payload; helpers from graph_shared.js.
// Offers: new GraphColour(data), with
//   by: "kind", "time" or "memory", what the fills say now (read only)
//   buildKey(parts, changed): the toolbar button and the legend's heat key, where the graph
//     carries a measure; parts = {root, bar, status, legend, hint}: the button goes into
//     `bar` before `status`, the key into `legend` before `hint`; changed() after each click
//   paint(i, node, box): fill node i's box (and say its measure in its tooltip)
//   drawHeader(i, header, chars, width): an open group's measured time at its header's end
//   rows(i): the panel's rows of node i's measure, [[name, value]]
/* global svg, el, fmt, fmtBytes, fmtSeconds, fmtShare, fmtGrouped, fillCategory, categoryClass,
   heatPosition, heatColour, HEAT_DECADES, CHAR_W */
/* exported GraphColour */

"use strict";

// What each measure says, and how.
var MEASURES = {
  time: {
    values: "time", total: "timeTotal", keyClass: "tkg-heat-key",
    low: "time per run: ", none: "not in the trace", title: "colour by measured time",
    amount: fmtSeconds,
    tip: function (label, value, share) {
      return label + ": " + fmtSeconds(value) + " per run, " + fmtShare(share) + " of the program";
    },
    rows: function (d, i, value, total) {
      if (value === null || value === undefined) {
        return [["time (measured)", "not in the trace: parameters, tuples and the ops inside a fusion do not run apart"]];
      }
      var out = [["time (measured)", fmtSeconds(value) + " per run \u00b7 " + fmtShare(value / (total || 1)) +
        " of " + fmtSeconds(total)]];
      if (value > 0 && d.flops[i]) out.push(["FLOP/s achieved", fmt(d.flops[i] / value, "FLOP/s")]);
      if (value > 0 && d.bytes[i]) out.push(["bandwidth achieved", fmtBytes(d.bytes[i] / value) + "/s"]);
      return out;
    },
    inHeader: true
  },
  memory: {
    values: "memory", total: "memoryTotal", keyClass: "tkg-heat-key tkg-memory-key",
    low: "held at the peak: ", none: "nothing at the peak", title: "colour by bytes held at the peak",
    amount: function (bytes) { return fmtBytes(bytes); },
    tip: function (label, value, share, total) {
      return label + ": " + fmtBytes(value) + " at the peak, " + fmtShare(share) + " of " + fmtBytes(total);
    },
    rows: function (d, i, value, total) {
      if (value === null || value === undefined) {
        return [["memory at the peak", "none: its buffers are not live at the peak (or it makes none)"]];
      }
      return [["memory at the peak", fmtGrouped(value) + " B (" + fmtBytes(value) + ") \u00b7 " +
        fmtShare(value / (total || 1)) + " of " + fmtBytes(total)]];
    },
    inHeader: false
  }
};

function GraphColour(data) {
  this.data = data;
  this.name = data.memory ? "memory" : data.time ? "time" : "";
  this.measure = this.name ? MEASURES[this.name] : null;
  this.values = this.measure ? data[this.measure.values] : null;
  this.total = this.measure ? data[this.measure.total] : 0;
  this.by = this.name || "kind";
}

GraphColour.prototype.buildKey = function (parts, changed) {
  var self = this, d = this.data, m = this.measure;
  if (!m) return;
  var toggle = el("button", "tkg-colour", null);
  toggle.type = "button";
  parts.bar.insertBefore(toggle, parts.status);
  var key = el("span", m.keyClass, null);
  parts.legend.insertBefore(key, parts.hint);
  var low = el("span", "", key);
  low.textContent = m.low + fmtShare(Math.pow(10, -HEAT_DECADES)) + " or less";
  var ramp = el("i", "tkg-heat-ramp", key);
  ramp.style.background = "linear-gradient(to right," + d.heat.colours.join(",") + ")";
  var high = el("span", "", key);
  high.textContent = "100% of " + m.amount(this.total) + " (log scale)";
  var none = el("span", "tkg-key tkg-untimed-key", key);
  fillCategory(el("i", "tkg-untimed", none), d, d.categories.indexOf("other"));
  none.appendChild(document.createTextNode(m.none));
  function apply() {
    var on = self.by === self.name;
    toggle.textContent = on ? "Colour: " + self.name : "Colour: kind";
    toggle.title = on ? "colour by op kind" : m.title;
    parts.legend.classList.toggle("tkg-by-time", on);  // the heat key instead of the kinds
    parts.root.setAttribute("data-colour", self.by);
  }
  toggle.addEventListener("click", function () {
    self.by = self.by === self.name ? "kind" : self.name;
    apply();
    changed();
  });
  apply();
};

GraphColour.prototype.paint = function (i, node, box) {
  var d = this.data, m = this.measure;
  fillCategory(box, d, d.cat[i]);
  if (!m) return;
  var value = this.values[i], share = (value || 0) / (this.total || 1);
  if (value !== null && value !== undefined) {
    node.setAttribute("data-" + this.name, String(value));
    var tip = svg("title", {}, node);
    tip.textContent = m.tip(d.label[i], value, share, this.total);
  }
  if (this.by !== this.name) return;
  if (value === null || value === undefined) {
    node.classList.add("tkg-untimed");
    box.classList.remove(categoryClass(d.categories[d.cat[i]]));
    fillCategory(box, d, d.categories.indexOf("other"));
    return;
  }
  var position = heatPosition(share);
  box.style.fill = heatColour(d.heat.colours, position);
  node.classList.add(position > d.heat.darkFrom ? "tkg-heat-dark" : "tkg-heat-light");
};

// An open group's measured time, "254 µs (37%)", at the right of its header where it fits:
// `chars` of header text start at `left`, and the header is `width` wide.
GraphColour.prototype.drawHeader = function (i, header, left, chars, width) {
  var d = this.data, m = this.measure;
  if (!m || !m.inHeader) return;
  var value = this.values[i];
  if (value === null || value === undefined) return;
  var label = m.amount(value) + " (" + fmtShare(value / (this.total || 1)) + ")";
  var tip = svg("title", {}, header);
  tip.textContent = d.label[i] + ": " + label + " of the measured time per run";
  if (left + (chars + label.length + 2) * CHAR_W + 8 > width) return;
  var text = svg("text", {"class": "tkg-header-time", x: width - 8, y: 16, "text-anchor": "end"}, header);
  text.textContent = label;
};

GraphColour.prototype.rows = function (i) {
  if (!this.measure) return [];
  return this.measure.rows(this.data, i, this.values[i], this.total);
};
