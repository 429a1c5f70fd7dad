// tpukit HLO graph viewer, fusion bodies: the nodes of the fusion bodies that the payload
// carries compactly (tpukit/graph/_graph_bodies.py), put in place as the payload loads.
//
// A large module's fused computations hold most of its instructions, and Python no longer
// builds their nodes: the payload's tree leaves each such fusion a leaf, and its body comes
// as columns of its own (bodyOwner, bodySize, bodyLabel: each instruction's name, bodyText:
// its HLO line without its metadata, decoded when the panel first shows a text, bodyMeta:
// its metadata's op name and source, three numbers apiece in bodyMetas, bodyOp and
// bodyShape: indices into bodyOps and bodyShapes, its category bodyOpCat of its opcode,
// bodyArgs and bodyFrom: the operands as indices into the body, -1 for a name it does not
// hold, bodyMade: the bytes each makes, tpukit's costs: FLOPs of the rows bodyFlopsAt in
// bodyFlopsOf, bytes by its opcode (bodyOpBytes: 0 none, else those of its result and
// operands) but for the rows bodyBytesAt, whose bytes are in bodyBytesOf, bodyRoot,
// bodyParams, bodyBlock: where
// the body's edges go among data.blocks). insertBodies puts each body's nodes right after
// its fusion, in the order Python's tree gives them (tpukit/graph/_graph_data.py: program
// order, a parameter or constant just before its first user), and renumbers the rest: the
// payload then reads as one whose tree was built with its bodies, node for node.
//
// Takes: data, a payload whose columns unpackColumns (graph_view.js) has unpacked.
// Offers: insertBodies(data): data with its bodies in place (data itself, changed).
/* exported insertBodies */

"use strict";

function insertBodies(data) {
  if (!data.bodyOwner) return data;
  var owners = data.bodyOwner, sizes = data.bodySize, n0 = data.kind.length;
  var bodies = owners.length, added = 0, b, i;
  for (b = 0; b < bodies; b++) added += sizes[b];
  var n = n0 + added, newId = new Int32Array(n0), shift = 0, next = 0;
  for (i = 0; i < n0; i++) {  // each node moves down by the body rows put before it
    newId[i] = i + shift;
    if (next < bodies && owners[next] === i) shift += sizes[next++];
  }
  var instruction = data.kinds.findIndex(function (kind) { return kind[0] === "instruction"; });
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
  var row = 0, arg = 0, param = 0, rowNode = new Int32Array(added);
  renumberLinks(data, newId);
  for (b = 0; b < bodies; b++) {
    var made = bodyRows(data, b, row, arg, newId[owners[b]], columns, texts, instruction, rowNode);
    blocks[data.bodyBlock[b]] = [newId[owners[b]], made.edges];
    placed[data.bodyBlock[b]] = 1;
    var params = new Int32Array(made.params);
    for (var p = 0; p < params.length; p++) params[p] = made.id[data.bodyParams[param + p]];
    param += params.length;
    data.params[newId[owners[b]]] = params;
    data.roots[newId[owners[b]]] = made.id[data.bodyRoot[b]];
    row += sizes[b];
    arg = made.arg;
  }
  sparseFigures(columns.flops, rowNode, data.bodyFlopsAt, data.bodyFlopsOf);
  sparseFigures(columns.bytes, rowNode, data.bodyBytesAt, data.bodyBytesOf);
  placeBlocks(data, newId, blocks, placed);
  names.forEach(function (name) { data[name] = columns[name]; });
  mergeTexts(data, at, texts, Object.getOwnPropertyDescriptor(data, "bodyText"));
  data.open = data.open.map(function (k) { return newId[k]; });
  ["bodyOwner", "bodySize", "bodyText", "bodyOp", "bodyOps", "bodyOpCat", "bodyOpBytes",
    "bodyShape", "bodyShapes", "bodyArgs", "bodyFrom", "bodyMade", "bodyFlopsAt", "bodyFlopsOf",
    "bodyBytesAt", "bodyBytesOf", "bodyRoot", "bodyParams", "bodyBlock", "bodyHead",
    "bodyMeta", "bodyMetas", "bodyLabel"].forEach(function (name) { delete data[name]; });
  return data;
}

// Body b's nodes (its instructions from `row` on, their operands from `arg` on) written into
// `columns` after its fusion (node `fusion`, renumbered): each instruction's place, its
// edges [from, to, bytes, operand index] and how many parameters it has.
function bodyRows(data, b, row, arg, fusion, columns, texts, instruction, rowNode) {
  var size = data.bodySize[b], order = new Float64Array(size), k, s, p, first = arg;
  for (k = 0; k < size; k++) order[k] = k;
  for (k = 0; k < size; k++) {  // a parameter or constant sits just before its first user
    for (p = 0; p < data.bodyArgs[row + k]; p++) {
      s = data.bodyFrom[arg++];
      if (s >= 0 && data.bodyArgs[row + s] === 0 && order[s] === s) order[s] = k - 0.5;
    }
  }
  var place = Array.from(order.keys()).sort(function (x, y) { return order[x] - order[y]; });
  var id = new Int32Array(size), params = 0, edges = [];
  for (k = 0; k < size; k++) id[place[k]] = fusion + 1 + k;
  for (k = 0; k < size; k++) {
    var r = row + k, j = id[k], name = data.bodyLabel[r];
    rowNode[r] = j;
    var op = data.bodyOps[data.bodyOp[r]], shape = data.bodyShapes[data.bodyShape[r]];
    columns.kind[j] = instruction;
    columns.parent[j] = fusion;
    columns.label[j] = name;
    columns.op[j] = op;
    columns.shape[j] = shape;
    var meta = 3 * data.bodyMeta[r], made = data.bodyMade[r];
    columns.cat[j] = data.bodyOpCat[data.bodyOp[r]];
    columns.scope[j] = data.bodyMetas[meta];
    columns.location[j] = data.bodyMetas[meta + 1];
    columns.source[j] = data.bodyMetas[meta + 2];
    columns.textHead[j] = data.bodyHead[r];
    texts[j] = r;  // (its line's row: its text when first shown, mergeTexts)
    if (op === "parameter") params++;
    for (p = 0; p < data.bodyArgs[r]; p++) {
      s = data.bodyFrom[first++];
      if (s >= 0) {
        edges.push(id[s], j, data.bodyMade[row + s], p);
        made += data.bodyMade[row + s];
      }
    }
    // (what it reads and writes, or none, by its opcode; bodyBytesOf says where neither)
    columns.bytes[j] = data.bodyOpBytes[data.bodyOp[r]] === 0 ? 0 : made;
  }
  return {id: id, edges: Float64Array.from(edges), params: params, arg: first};
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
      for (var j = 0; j < texts.length; j++) if (texts[j] !== undefined) texts[j] = body[texts[j]];
      for (var i = 0; i < at.length; i++) texts[at[i]] = old[i];
      delete data.bodyText;  // (put back by its first read)
      Object.defineProperty(data, "text", {value: texts, writable: true, enumerable: true, configurable: true});
      return texts;
    },
  });
}
