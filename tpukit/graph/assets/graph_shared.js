// tpukit HLO graph viewer, shared: the constants and small helpers that more than one part
// of the viewer uses. Nothing here holds state.
//
// Takes: nothing (the first file of the viewer's script).
// Offers:
//   sizes of the drawing, in drawing units: NODE_H (a closed box's height), HEADER_H (an
//     open group's header), PAD (an open group's inner margin), RANK_SEP (between ranks),
//     CHAR_W (a label character), MAX_CHARS (a box label's longest line)
//   MARGIN: the view's margin around the drawing, in screen pixels
//   el(tag, cls, parent), svg(tag, attrs, parent): make an HTML or SVG element
//   clip(text, n), shortShape(shape): shorter text
//   fmt(value, unit), fmtBytes(bytes), fmtSeconds(seconds), fmtShare(share), fmtGrouped(value):
//     numbers as the page writes them (bytes in KiB, MiB, GiB: as tpukit's Python writes them)
//   fillCategory(node, data, k): fill an element with colour category k of the payload's palette
//   categoryClass(name): the CSS class of a colour category
//   heatPosition(share), heatColour(scale, position), HEAT_DECADES: the heat scale
/* exported NODE_H, HEADER_H, PAD, RANK_SEP, CHAR_W, MAX_CHARS, MARGIN, el, svg, clip,
   shortShape, fmt, fmtBytes, fmtSeconds, fmtShare, fmtGrouped, fillCategory, categoryClass,
   heatPosition, heatColour, HEAT_DECADES */

"use strict";

var SVG_NS = "http://www.w3.org/2000/svg";
var NODE_H = 36, CHAR_W = 6.7, HEADER_H = 24, PAD = 10, MAX_CHARS = 40, RANK_SEP = 34;
var MARGIN = 16;
// The heat scale spans this many decades of share: 1% to 100%.
var HEAT_DECADES = 2;

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

function shortShape(shape) { return shape.replace(/\{[^{}]*\}/g, ""); }

function fmt(value, unit) {
  if (!value) return "0 " + unit;
  var steps = ["", "k", "M", "G", "T", "P"], i = 0;
  while (value >= 999.5 && i < steps.length - 1) { value /= 1000; i++; }  // 999.9 k is 1.00 M
  return (i ? value.toPrecision(3) : String(value)) + " " + steps[i] + unit;
}

// "1.5 KiB": bytes in binary units, as tpukit.display.format_bytes writes them (one figure
// reads the same in the graph and in the tables around it).
function fmtBytes(bytes) {
  var units = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
  while (Math.abs(bytes) >= 1024 && i < units.length - 1) { bytes /= 1024; i++; }
  return (i ? bytes.toFixed(1) : bytes.toFixed(0)) + " " + units[i];
}

function fmtSeconds(seconds) {
  var units = [["s", 1], ["ms", 1e-3], ["\u00b5s", 1e-6], ["ns", 1e-9]];
  for (var k = 0; k < units.length; k++) {
    if (seconds >= units[k][1] || k === units.length - 1) {
      return String(parseFloat((seconds / units[k][1]).toPrecision(3))) + " " + units[k][0];
    }
  }
}

// "1,234,567": a count with "," between thousands, as Python's f"{n:,}" writes it (the cell's
// text says the same numbers). Not toLocaleString: its first call starts the browser's
// number formatting (10-30 ms of the first draw), and its separator follows the locale.
function fmtGrouped(value) {
  var text = Number.isInteger(value) ? BigInt(value).toString() : String(value), sign = "";
  if (text.charAt(0) === "-") { sign = "-"; text = text.slice(1); }
  var dot = text.search(/[^0-9]/), whole = dot < 0 ? text : text.slice(0, dot);
  return sign + whole.replace(/\B(?=(\d{3})+$)/g, ",") + (dot < 0 ? "" : text.slice(dot));
}

function fmtShare(share) {
  var percent = 100 * share;
  return (percent >= 10 ? percent.toFixed(0) : String(parseFloat(percent.toPrecision(2)))) + "%";
}

// The CSS class of a colour category: "data_movement" -> "tkg-c-data-movement".
function categoryClass(name) { return "tkg-c-" + name.replace(/[^a-z]+/g, "-"); }

// Fill an element (a node's box, a legend key) with colour category k of the payload's
// palette: it carries both themes' fills and graph_view.css picks the page's.
function fillCategory(node, data, k) {
  node.classList.add("tkg-filled", categoryClass(data.categories[k]));
  node.style.setProperty("--tkg-fill-light", data.palette.light[k]);
  node.style.setProperty("--tkg-fill-dark", data.palette.dark[k]);
}

// Where a share (0 to 1) sits on the heat scale: a log scale from 1% (0) to 100% (1).
function heatPosition(share) {
  return share > 0 ? Math.max(0, Math.min(1, 1 + Math.log10(share) / HEAT_DECADES)) : 0;
}

// The colour at `position` (0 to 1) of a scale of "#rrggbb" colours, interpolated.
function heatColour(scale, position) {
  var x = position * (scale.length - 1), k = Math.min(scale.length - 2, Math.floor(x)), f = x - k;
  var a = parseInt(scale[k].slice(1), 16), b = parseInt(scale[k + 1].slice(1), 16), rgb = [];
  for (var shift = 16; shift >= 0; shift -= 8) {
    var p = (a >> shift) & 255, q = (b >> shift) & 255;
    rgb.push(Math.round(p + (q - p) * f));
  }
  return "rgb(" + rgb.join(",") + ")";
}
