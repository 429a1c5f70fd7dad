// ---------------------------------------------------------------- bytes at the peak

// A memory view (MemoryView.graph()) sends in data.memory the bytes each node holds at the
// program's peak: XLA's buffers live then, each at the instruction that made it (a group
// holds its members' sum, a loop also what its body holds; null: nothing at the peak), and
// in data.memoryTotal the bytes in use at the peak. "Colour: memory" fills nodes on the heat
// scale of graph_view.js (heatPosition, heatColour: log scale, 1% to 100%) by their share of
// it; "Colour: kind" goes back to the op-kind colours. graph_view.js calls the three methods
// below where it builds the legend, draws a closed node and fills the panel.

GraphView.prototype.buildMemoryKey = function (bar, legend) {
  var self = this, d = this.data;
  this.colourBy = "memory";
  var toggle = el("button", "tkg-colour", null);
  toggle.type = "button";
  bar.insertBefore(toggle, this.status);
  var key = el("span", "tkg-heat-key tkg-memory-key", null);
  legend.insertBefore(key, this.hint);
  var low = el("span", "", key);
  low.textContent = "held at the peak: " + fmtShare(Math.pow(10, -HEAT_DECADES)) + " or less";
  var ramp = el("i", "tkg-heat-ramp", key);
  ramp.style.background = "linear-gradient(to right," + d.heat.colours.join(",") + ")";
  var high = el("span", "", key);
  high.textContent = "100% of " + fmt(d.memoryTotal, "B") + " (log scale)";
  var none = el("span", "tkg-key tkg-untimed-key", key);
  this.fillWith(el("i", "tkg-untimed", none), d.categories.indexOf("other"));
  none.appendChild(document.createTextNode("nothing at the peak"));
  function apply() {
    var byMemory = self.colourBy === "memory";
    toggle.textContent = byMemory ? "Colour: memory" : "Colour: kind";
    toggle.title = byMemory ? "colour by op kind" : "colour by bytes held at the peak";
    legend.classList.toggle("tkg-by-time", byMemory);  // the heat key instead of the kinds
    self.root.setAttribute("data-colour", self.colourBy);
  }
  toggle.addEventListener("click", function () {
    self.colourBy = self.colourBy === "memory" ? "kind" : "memory";
    apply();
    self.render(-1);
    if (self.selected >= 0) self.select(self.selected);
  });
  apply();
};

// Fill a closed node by the bytes it holds at the peak (memory mode).
GraphView.prototype.paintMemory = function (i, node, box) {
  var d = this.data;
  if (!d.memory) return;
  var bytes = d.memory[i], share = (bytes || 0) / (d.memoryTotal || 1);
  if (bytes !== null && bytes !== undefined) {
    node.setAttribute("data-memory", String(bytes));
    var tip = svg("title", {}, node);
    tip.textContent = d.label[i] + ": " + fmt(bytes, "B") + " at the peak, " + fmtShare(share) +
      " of " + fmt(d.memoryTotal, "B");
  }
  if (this.colourBy !== "memory") return;
  if (bytes === null || bytes === undefined) {
    node.classList.add("tkg-untimed");
    box.classList.remove(categoryClass(d.categories[d.cat[i]]));
    this.fillWith(box, d.categories.indexOf("other"));
    return;
  }
  var position = heatPosition(share);
  box.style.fill = heatColour(d.heat.colours, position);
  node.classList.add(position > d.heat.darkFrom ? "tkg-heat-dark" : "tkg-heat-light");
};

GraphView.prototype.memoryRows = function (i, row) {
  var d = this.data, bytes = d.memory[i];
  if (bytes === null || bytes === undefined) {
    row("memory at the peak", "none: its buffers are not live at the peak (or it makes none)");
    return;
  }
  row("memory at the peak", bytes.toLocaleString() + " B (" + fmt(bytes, "B") + ") \u00b7 " +
    fmtShare(bytes / (d.memoryTotal || 1)) + " of " + fmt(d.memoryTotal, "B"));
};
