// tpukit HLO graph viewer, fusion bodies: the nodes of the fusion bodies that the payload
// carries compactly (tpukit/graph/_graph_bodies.py), put in place as the payload loads.
//
// A large module's fused computations hold most of its instructions, and Python no longer
// builds their nodes: the payload's tree leaves each such fusion a leaf, and its body comes
// as columns of its own (bodyOwner, bodySize, bodyLabel: each instruction's name, bodyText:
// its HLO line without its metadata, decoded when the panel first shows a text, bodyMeta:
// its metadata's op name and source and the JAX op it names (in bodyWorks, 0: none), four
// numbers apiece in bodyMetas, bodyOp and bodyShape: indices into bodyOps and bodyShapes,
// its category bodyOpCat of its opcode, bodyArgs and bodyFrom: the operands as indices into
// the body, -1 for a name it does not hold, bodyMade: the bytes each makes, tpukit's costs:
// FLOPs of the rows bodyFlopsAt in bodyFlopsOf, bytes by its opcode (bodyOpBytes: 0 none,
// else those of its result and operands) but for the rows bodyBytesAt, whose bytes are in
// bodyBytesOf, bodyRoot, bodyParams, bodyBlock: where the body's edges go among
// data.blocks). insertBodies puts each body's nodes right after
// its fusion, in the order Python's tree gives them (tpukit/graph/_graph_data.py: program
// order, a parameter or constant just before its first user), in parts where a body has more
// than bodyMaxChildren (tpukit/graph/_graph_parts.py: consecutive, as even as can be, parts of
// parts while there are more), each named by its work as Python names it, and renumbers the
// rest: the payload then reads as one whose tree was built with its bodies, node for node.
//
// Takes: data, a payload whose columns unpackColumns (graph_view.js) has unpacked.
// Offers: insertBodies(data): data with its bodies in place (data itself, changed).
/* exported insertBodies */

"use strict";

function insertBodies(data) {
  if (!data.bodyOwner) return data;
  var owners = data.bodyOwner, sizes = data.bodySize, n0 = data.kind.length;
  var bodies = owners.length, most = data.bodyMaxChildren, added = 0, b, i;
  var nodes = new Int32Array(bodies);  // (each body's nodes: its instructions and parts)
  for (b = 0; b < bodies; b++) added += nodes[b] = bodyNodes(sizes[b], most);
  var n = n0 + added, newId = new Int32Array(n0), shift = 0, next = 0;
  for (i = 0; i < n0; i++) {  // each node moves down by the body rows put before it
    newId[i] = i + shift;
    if (next < bodies && owners[next] === i) shift += nodes[next++];
  }
  var kindOf = function (name) { return data.kinds.findIndex(function (kind) { return kind[0] === name; }); };
  var kinds = {instruction: kindOf("instruction"), part: kindOf("part")};
  var columns = {
    kind: new Uint8Array(n), parent: new Int32Array(n), cat: new Uint8Array(n),
    flops: new Float64Array(n), bytes: new Float64Array(n), count: new Int32Array(n),
    scope: new Int32Array(n), location: new Int32Array(n), source: new Int32Array(n),
    note: new Int32Array(n), textHead: new Uint8Array(n),
    label: new Array(n), op: new Array(n), shape: new Array(n)
  };
  var names = Object.keys(columns), texts = new Array(n), at = new Int32Array(n0);
  for (i = 0; i < n0; i++) {
    var j = newId[i];
    at[i] = j;
    for (var c = 0; c < names.length; c++) columns[names[c]][j] = data[names[c]][i];
    columns.parent[j] = data.parent[i] >= 0 ? newId[data.parent[i]] : -1;
  }
  var blocks = new Array(data.blocks.length + bodies), placed = new Uint8Array(blocks.length);
  var row = 0, arg = 0, param = 0, rowNode = new Int32Array(added), parts = [];
  var works = new Int32Array(n);  // (each body node's JAX op, a part's label names: bodyWorks)
  renumberLinks(data, newId);
  for (b = 0; b < bodies; b++) {
    var made = bodyRows(data, b, row, arg, newId[owners[b]], columns, texts, kinds, works, parts);
    blocks[data.bodyBlock[b]] = [newId[owners[b]], made.edges];
    placed[data.bodyBlock[b]] = 1;
    var params = new Int32Array(made.params);
    for (var p = 0; p < params.length; p++) params[p] = made.id[data.bodyParams[param + p]];
    param += params.length;
    data.params[newId[owners[b]]] = params;
    data.roots[newId[owners[b]]] = made.id[data.bodyRoot[b]];
    for (var r = 0; r < sizes[b]; r++) rowNode[row + r] = made.id[r];
    row += sizes[b];
    arg = made.arg;
  }
  sparseFigures(columns.flops, rowNode, data.bodyFlopsAt, data.bodyFlopsOf);
  sparseFigures(columns.bytes, rowNode, data.bodyBytesAt, data.bodyBytesOf);
  if (parts.length) fillParts(data, parts, columns, texts, kinds, works);
  placeBlocks(data, newId, blocks, placed);
  names.forEach(function (name) { data[name] = columns[name]; });
  mergeTexts(data, at, texts, Object.getOwnPropertyDescriptor(data, "bodyText"));
  data.open = data.open.map(function (k) { return newId[k]; });
  ["bodyOwner", "bodySize", "bodyText", "bodyOp", "bodyOps", "bodyOpCat", "bodyOpBytes",
    "bodyShape", "bodyShapes", "bodyArgs", "bodyFrom", "bodyMade", "bodyFlopsAt", "bodyFlopsOf",
    "bodyBytesAt", "bodyBytesOf", "bodyRoot", "bodyParams", "bodyBlock", "bodyHead",
    "bodyMeta", "bodyMetas", "bodyLabel", "bodyWorks", "bodyMaxChildren"].forEach(function (name) {
    delete data[name];
  });
  return data;
}

// The nodes a body of `size` instructions puts under its fusion: its instructions and, past
// `most` (MAX_CHILDREN), the parts cutParts makes of them (_graph_bodies.py: body_nodes).
function bodyNodes(size, most) {
  var nodes = size, count = size;
  while (count > most) {
    count = Math.ceil(count / Math.ceil(count / Math.ceil(count / most)));
    nodes += count;
  }
  return nodes;
}

// `items` cut into consecutive runs of at most `most`, as even as Python's tree cuts them
// (_graph_parts.py: PartsMixin._chunk), while there are more than `most`: a body's
// instructions (their rows in program order) as nested arrays, one per part.
function cutParts(items, most) {
  while (items.length > most) {
    var count = Math.ceil(items.length / most), size = Math.ceil(items.length / count), runs = [];
    for (var k = 0; k < items.length; k += size) runs.push(items.slice(k, k + size));
    items = runs;
  }
  return items;
}

// Body b's nodes (its instructions from `row` on, their operands from `arg` on) written into
// `columns` after its fusion (node `fusion`, renumbered), in parts (`parts` gets each one's
// [node, parent, end]) where it has more than bodyMaxChildren: each instruction's place, its
// edges [from, to, bytes, operand index] and how many parameters it has.
function bodyRows(data, b, row, arg, fusion, columns, texts, kinds, works, parts) {
  // (each column read once here: the payload's object has many fields, some deleted, and
  // a field read through it per instruction cost most of the time)
  var args = data.bodyArgs, from = data.bodyFrom, madeOf = data.bodyMade, labels = data.bodyLabel;
  var opOf = data.bodyOp, ops = data.bodyOps, opCat = data.bodyOpCat, opBytes = data.bodyOpBytes;
  var shapeOf = data.bodyShape, shapes = data.bodyShapes, metaOf = data.bodyMeta;
  var metas = data.bodyMetas, heads = data.bodyHead, instruction = kinds.instruction;
  var kind = columns.kind, parent = columns.parent, label = columns.label, opColumn = columns.op;
  var shape = columns.shape, cat = columns.cat, scope = columns.scope, location = columns.location;
  var source = columns.source, textHead = columns.textHead, bytes = columns.bytes;
  var size = data.bodySize[b], order = new Float64Array(size), k, s, p, first = arg;
  for (k = 0; k < size; k++) order[k] = k;
  for (k = 0; k < size; k++) {  // a parameter or constant sits just before its first user
    for (p = 0; p < args[row + k]; p++) {
      s = from[arg++];
      if (s >= 0 && args[row + s] === 0 && order[s] === s) order[s] = k - 0.5;
    }
  }
  var place = treeOrder(order, size);
  var id = new Int32Array(size), up = new Int32Array(size), params = 0, next = fusion + 1;
  (function number(items, above) {  // depth first, as Python's tree numbers them
    for (var q = 0; q < items.length; q++) {
      if (typeof items[q] === "number") {
        id[items[q]] = next++;
        up[items[q]] = above;
        continue;
      }
      var part = [next++, above, 0];
      parts.push(part);
      number(items[q], part[0]);
      part[2] = next;
    }
  })(cutParts(place, data.bodyMaxChildren), fusion);
  var edges = new Float64Array(4 * countEdges(args, from, row, size, first)), e = 0;
  for (k = 0; k < size; k++) {
    var r = row + k, j = id[k], code = opOf[r], op = ops[code];
    kind[j] = instruction;
    parent[j] = up[k];
    label[j] = labels[r];
    opColumn[j] = op;
    shape[j] = shapes[shapeOf[r]];
    var meta = 4 * metaOf[r], made = madeOf[r];
    cat[j] = opCat[code];
    scope[j] = metas[meta];
    location[j] = metas[meta + 1];
    source[j] = metas[meta + 2];
    textHead[j] = heads[r];
    works[j] = metas[meta + 3];
    texts[j] = r;  // (its line's row: its text when first shown, mergeTexts)
    if (op === "parameter") params++;
    for (p = 0; p < args[r]; p++) {
      s = from[first++];
      if (s >= 0) {
        edges[e++] = id[s];
        edges[e++] = j;
        edges[e++] = madeOf[row + s];
        edges[e++] = p;
        made += madeOf[row + s];
      }
    }
    // (what it reads and writes, or none, by its opcode; bodyBytesOf says where neither)
    bytes[j] = opBytes[code] === 0 ? 0 : made;
  }
  return {id: id, edges: edges, params: params, arg: first};
}

// A body's instructions in the order Python's tree sorts them by `order` (each its index, or
// for one moved to its first user that user's less a half; of equals, the first): each
// moved one just before its user, in their order, with no general sort.
function treeOrder(order, size) {
  var first = new Int32Array(size).fill(-1), after = new Int32Array(size);
  var place = new Int32Array(size), n = 0, k, s;
  for (s = size - 1; s >= 0; s--) {
    if (order[s] === s) continue;
    var user = order[s] + 0.5;
    after[s] = first[user];
    first[user] = s;
  }
  for (k = 0; k < size; k++) {
    if (order[k] !== k) continue;
    for (s = first[k]; s >= 0; s = after[s]) place[n++] = s;
    place[n++] = k;
  }
  return place;
}

// The edges of a body's instructions (`size` from `row` on, their operands from `first` on):
// the operands it holds.
function countEdges(args, from, row, size, first) {
  var count = 0;
  for (var k = 0; k < size; k++) {
    for (var p = 0; p < args[row + k]; p++) if (from[first++] >= 0) count++;
  }
  return count;
}

// The parts' columns (`parts`: [node, parent, end] each, outer parts before the parts in
// them), as Python's tree and payload have them: a group's category, its members' FLOPs,
// bytes and instructions summed (_graph_costs.py, _graph_payload.py: _counts), and its
// label named by its work (partLabel).
function fillParts(data, parts, columns, texts, kinds, works) {
  var group = data.categories.indexOf("group"), ends = new Map(), names = data.bodyWorks, q;
  for (q = 0; q < parts.length; q++) ends.set(parts[q][0], parts[q][2]);
  for (q = parts.length - 1; q >= 0; q--) {  // the parts in a part first
    var node = parts[q][0], end = parts[q][2], flops = 0, bytes = 0, count = 0, held = 0, stages = false;
    for (var j = node + 1; j < end; j = columns.kind[j] === kinds.part ? ends.get(j) : j + 1) {
      flops += columns.flops[j];
      bytes += columns.bytes[j];
      count += columns.kind[j] === kinds.part ? columns.count[j] : 1;
      stages = stages || columns.kind[j] === kinds.part;
      held++;
    }
    columns.kind[node] = kinds.part;
    columns.parent[node] = parts[q][1];
    columns.cat[node] = group;
    columns.flops[node] = flops;
    columns.bytes[node] = bytes;
    columns.count[node] = count;
    columns.op[node] = columns.shape[node] = "";
    texts[node] = -1;  // (no text: mergeTexts)
    var label = partLabel(names, columns, node, end, kinds.instruction, works);
    if (stages) {  // a part of parts: says how many (_graph_payload.py: _PartNamer)
      var cut = label.lastIndexOf(" \u00b7 ");
      label = (cut < 0 ? label : label.slice(0, cut)) + " \u00b7 " + held + " stages";
    }
    columns.label[node] = label;
  }
}
// data.blocks with the nodes renumbered (`newId`): the bodies' blocks in their places
// (`blocks`, where `placed`), the payload's own in the others, in order.
function placeBlocks(data, newId, blocks, placed) {
  var k = 0;
  data.blocks.forEach(function (block) {
    var edges = block[1];
    for (var e = 0; e < edges.length; e += 4) {
      edges[e] = newId[edges[e]];
      edges[e + 1] = newId[edges[e + 1]];
    }
    while (placed[k]) k++;
    blocks[k++] = [newId[block[0]], edges];
  });
  data.blocks = blocks;
}

// The FLOPs or bytes the payload gives of some body rows (`at`: dots and convolutions; rows
// whose bytes are neither none nor what they read and write: a slice, a tuple), in their nodes.
function sparseFigures(column, rowNode, at, figures) {
  for (var k = 0; k < at.length; k++) column[rowNode[at[k]]] = figures[k];
}

// data.params and data.roots (the payload's own) with the nodes renumbered (`newId`).
function renumberLinks(data, newId) {
  var params = {}, roots = {};
  Object.keys(data.params).forEach(function (owner) {
    // (not the payload's array's map: it may be of bytes, and the new ids are larger)
    params[newId[owner]] = Int32Array.from(data.params[owner], function (node) { return newId[node]; });
  });
  Object.keys(data.roots).forEach(function (owner) { roots[newId[owner]] = newId[data.roots[owner]]; });
  data.params = params;
  data.roots = roots;
}

// data.text with the bodies' texts among the payload's (old node i at `at[i]`; a body node's
// entry in `texts` is its line's row in bodyText, given by `lines`), made when first read,
// as the payload's own is (graph_view.js: readWhenShown): a body's lines are a large
// module's most bytes, and the first view shows none. They come without their heads, as
// the payload's own texts (GraphTree's text(i) puts the head back).
function mergeTexts(data, at, texts, lines) {
  var payload = Object.getOwnPropertyDescriptor(data, "text");
  Object.defineProperty(data, "text", {
    configurable: true,
    enumerable: true,
    get: function () {
      var old = payload.get ? payload.get.call(data) : payload.value;
      var body = lines.get ? lines.get.call(data) : lines.value;
      for (var j = 0; j < texts.length; j++) if (texts[j] !== undefined) texts[j] = texts[j] < 0 ? "" : body[texts[j]];
      for (var i = 0; i < at.length; i++) texts[at[i]] = old[i];
      delete data.bodyText;  // (put back by its first read)
      Object.defineProperty(data, "text", {value: texts, writable: true, enumerable: true, configurable: true});
      return texts;
    },
  });
}

// The ops a part's label leaves out: they carry values around (_graph_nodes.py: PLUMBING).
var PLUMBING = {parameter: 1, constant: 1, "get-tuple-element": 1, tuple: 1, bitcast: 1};

// A part's label, as _graph_nodes.py's totals_label gives it: the name of the work (the JAX
// op its metadata names, else its opcode) that holds the most FLOPs, else bytes, else ops,
// with its count and figure, and the part's size ("dot ×4 (12.3 TFLOP) · 40 ops"); a part of
// plumbing alone is "constants" or "parameters". Its instructions are the nodes from `node`
// to `end` (its subtree, ids depth first), counted from the last, as Python counts them: its
// names come in that order, and of equals the first is named.
function partLabel(names, columns, node, end, instruction, works) {
  var totals = new Map(), ops = 0, constants = true, column = 0;
  var kind = columns.kind, opOf = columns.op, flops = columns.flops, bytes = columns.bytes;
  for (var j = end - 1; j > node; j--) {
    if (kind[j] !== instruction) continue;
    var op = opOf[j];
    ops++;
    constants = constants && op === "constant";
    if (PLUMBING[op] === 1) continue;
    var name = works[j] ? names[works[j]] : op, entry = totals.get(name);
    if (entry === undefined) totals.set(name, [1, flops[j], bytes[j]]);
    else {
      entry[0]++;
      entry[1] += flops[j];
      entry[2] += bytes[j];
    }
    if (flops[j]) column = 1;
    else if (bytes[j] && column === 0) column = 2;
  }
  if (!totals.size) return constants ? "constants" : "parameters";
  var best = null, most = -1;
  totals.forEach(function (sums, key) {  // (the first of equals: Python's max)
    if (sums[column] > most) { best = key; most = sums[column]; }
  });
  var count = totals.get(best)[0];
  var figure = column === 1 ? pyFlops(most) : column === 2 ? pyBytes(most) : "";
  return best + (count > 1 ? " \u00d7" + count : "") + (figure ? " (" + figure + ")" : "") +
    (ops > 1 ? " \u00b7 " + ops + " ops" : "");
}

// FLOPs as tpukit.display.format_flops writes them ("12.2 kFLOP": three significant figures,
// Python's "%.3g", a tie to the even figure), for a part's label.
function pyFlops(flops) {
  var units = [["PFLOP", 1e15], ["TFLOP", 1e12], ["GFLOP", 1e9], ["MFLOP", 1e6], ["kFLOP", 1e3]];
  for (var k = 0; k < units.length; k++) {
    if (flops >= units[k][1]) return pyG3(flops / units[k][1]) + " " + units[k][0];
  }
  return pyRounded(flops, 0) + " FLOP";
}

// Bytes as tpukit.display.format_bytes writes them ("1.2 KiB": "%.1f" of binary units, a tie
// to the even figure; whole bytes below a KiB).
function pyBytes(bytes) {
  var units = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
  while (Math.abs(bytes) >= 1024 && i < units.length - 1) { bytes /= 1024; i++; }
  return pyRounded(bytes, i ? 1 : 0) + " " + units[i];
}

// The exact decimal digits of a double (it has at most 1,100: toPrecision gives up to 100,
// enough for the figures here) as [sign, digits, exponent of the first digit].
function exactDigits(value) {
  var text = Math.abs(value).toPrecision(100), e = text.indexOf("e"), exponent = 0;
  if (e >= 0) { exponent = +text.slice(e + 1); text = text.slice(0, e); }
  var dot = text.indexOf("."), digits = text.replace(".", "");
  exponent += (dot < 0 ? text.length : dot) - 1;
  var lead = digits.search(/[1-9]/);
  if (lead < 0) return [value < 0 ? "-" : "", "0", 0];
  return [value < 0 ? "-" : "", digits.slice(lead).replace(/0+$/, "") || "0", exponent - lead];
}

// `digits` (of a number whose first digit is at 10^exponent) rounded to `keep` digits, a
// tie to the even last digit, as Python rounds: [digits, exponent] (a carry may add a digit).
function roundDigits(digits, exponent, keep) {
  if (keep < 0) return ["0", exponent];
  if (digits.length <= keep) return [digits, exponent];
  var kept = digits.slice(0, keep), rest = digits.slice(keep), up;
  if (rest[0] > "5") up = true;
  else if (rest[0] < "5") up = false;
  else up = /[1-9]/.test(rest.slice(1)) || (keep > 0 && +kept[keep - 1] % 2 === 1);
  if (!up) return [kept || "0", kept ? exponent : exponent + 1];
  var out = kept.split(""), q = out.length - 1;
  while (q >= 0 && out[q] === "9") out[q--] = "0";
  if (q < 0) return ["1" + out.join(""), exponent + 1];
  out[q] = String(+out[q] + 1);
  return [out.join(""), exponent];
}

// Python's "%.{places}f" of a double.
function pyRounded(value, places) {
  var exact = exactDigits(value), sign = exact[0];
  var found = roundDigits(exact[1], exact[2], exact[2] + 1 + places), digits = found[0];
  var whole = found[1] + 1;  // (digits before the point)
  if (digits === "0") { sign = ""; whole = 1; }
  if (whole <= 0) { digits = "0".repeat(1 - whole) + digits; whole = 1; }
  digits = digits.padEnd(whole + places, "0");
  return sign + digits.slice(0, whole) + (places ? "." + digits.slice(whole, whole + places) : "");
}

// Python's "%.3g" of a positive double: three significant figures, trailing zeros cut.
function pyG3(value) {
  var exact = exactDigits(value), found = roundDigits(exact[1], exact[2], 3);
  var digits = found[0].replace(/0+$/, "") || "0", exponent = found[1];
  if (exponent < -4 || exponent >= 3) {
    var mantissa = digits[0] + (digits.length > 1 ? "." + digits.slice(1) : "");
    return mantissa + "e" + (exponent < 0 ? "-" : "+") + String(Math.abs(exponent)).padStart(2, "0");
  }
  if (exponent < 0) return "0." + "0".repeat(-exponent - 1) + digits;
  if (digits.length <= exponent + 1) return digits.padEnd(exponent + 1, "0");
  return digits.slice(0, exponent + 1) + "." + digits.slice(exponent + 1);
}
