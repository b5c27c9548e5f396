// pathscope diff --html: draws the two-profile view of the page's JSON (python/pathscope/report/
// html_diff.py says what it holds) with plotly.js and html_common.js.  window.pathscope
// exposes the data and the view's state (value, tile width, shown root, selected node) for a
// reader of the page or a browser test.
const state = { value: "time_ns", size: "new", root: 0, selected: null };
window.pathscope = { data: D, state };
const T = D.tree;
const R = D.rows;
const VALUES = {
  time_ns: { label: "time", unit: "ns" },
  bytes: { label: "bytes", unit: "bytes" },
  calls: { label: "calls", unit: "count" },
};
const LAST = subtreeEnds(T.parent);
const PRUNE = 1000;           // as report --html: tiles under 1/PRUNE of the shown root left out
const TEXT_ALL = 300, TEXT_MIN = 100;
const TILE_TEXT = "%{label}<br>%{customdata[4]} (%{customdata[2]})";   // its width's value
const TABLE_ROWS = 200;       // rows of the call-path table (the rest: pathscope diff --csv)
// diverging: blue (shrank), light grey (unchanged), red (grew)
const COLOURS = [[0, "#2166ac"], [0.5, "#f2f2f2"], [1, "#b2182b"]];

function signed(v, unit) { return (v > 0 ? "+" : "") + fmt(v, unit); }

// the change in %, "new" for a value only NEW has
function pct(base, now) {
  if (!base) return now ? "new" : "0.0%";
  const p = 100 * (now - base) / base;
  return `${p > 0 ? "+" : ""}${p.toFixed(1)}%`;
}

function pathOf(node) {
  const parts = [];
  for (let i = node; i > 0; i = T.parent[i]) parts.push(T.label[i]);
  return parts.reverse().join(" > ") || T.label[0];
}

// ---- header: both profiles, the totals, the regressions of --fail-above ------------------------

function header() {
  el("title").textContent = `pathscope diff: ${D.base} → ${D.new}`;
  document.title = el("title").textContent;
  el("subtitle").textContent = `BASE ${D.base}, NEW ${D.new}`;
  const t = D.total;
  table("totals", [
    { title: "total", text: true, get: v => VALUES[v].label },
    { title: "BASE", get: v => fmt(t[`base_${v}`], VALUES[v].unit) },
    { title: "NEW", get: v => fmt(t[`new_${v}`], VALUES[v].unit) },
    { title: "change", get: v => signed(t[`delta_${v}`], VALUES[v].unit) },
    { title: "%", get: v => pct(t[`base_${v}`], t[`new_${v}`]) },
  ], Object.keys(VALUES));
  const box = el("regressions");
  const G = D.regressions;
  if (!G) return;
  const p = document.createElement("p");
  p.className = G.lines.length ? "status bad" : "status";
  p.textContent = G.lines.length
    ? `${G.lines.length} regression(s) above ${G.fail_above}% (--fail-above; paths from ` +
      `${G.floor}% of BASE's total time):`
    : `no regression above ${G.fail_above}% (--fail-above)`;
  const ul = document.createElement("ul");
  for (const line of G.lines) {
    const li = document.createElement("li"); li.textContent = line; ul.appendChild(li);
  }
  box.replaceChildren(p, ul);
}

// ---- the differential icicle -------------------------------------------------------------------

function sides() {
  const v = T.values[state.value];
  return { base: inclusiveOf(T.parent, v.base), now: inclusiveOf(T.parent, v.new) };
}

function drawTree() {
  const { base, now } = sides();
  const unit = VALUES[state.value].unit;
  const size = state.size === "new" ? now : base;
  const per = unit === "ns" ? 1e9 : 1;          // the colour bar in seconds, bytes or calls
  if (!(size[state.root] > 0)) state.root = 0;
  const root = state.root;
  const ids = [], labels = [], parents = [], values = [], colours = [], custom = [], texts = [];
  const add = i => {
    ids.push(String(i)); labels.push(T.label[i]);
    parents.push(i === 0 ? "" : String(T.parent[i]));
    values.push(size[i]); colours.push((now[i] - base[i]) / per);
    custom.push([fmt(base[i], unit), fmt(now[i], unit), signed(now[i] - base[i], unit),
                 pct(base[i], now[i]), fmt(size[i], unit)]);
    texts.push(size[i] * TEXT_MIN >= size[root] ? TILE_TEXT : "");
  };
  const chain = [];
  for (let i = T.parent[root]; root > 0 && i >= 0; i = T.parent[i]) chain.push(i);
  chain.reverse().forEach(add);
  let hidden = 0, other = 0;
  for (let i = root; i <= LAST[root]; i++) {
    if (!(size[i] > 0)) { if ((state.size === "new" ? base : now)[i] > 0) other++; continue; }
    if (size[i] * PRUNE < size[root]) { hidden++; continue; }
    add(i);
  }
  if (ids.length <= TEXT_ALL) texts.fill(TILE_TEXT);
  const scale = colours.reduce((m, c) => Math.max(m, Math.abs(c)), 1 / per);
  const [sized, otherSide] = state.size === "new" ? ["NEW", "BASE"] : ["BASE", "NEW"];
  el("flame-status").textContent =
    `${VALUES[state.value].label}: ${fmt(base[root], unit)} → ${fmt(now[root], unit)} ` +
    `(${signed(now[root] - base[root], unit)}, ${pct(base[root], now[root])}) in ` +
    (root ? pathOf(root) : "the whole tree") + `; width: ${sized}` +
    ` (${ids.length - chain.length} nodes drawn` +
    (hidden ? `, ${hidden} under 0.1% not drawn` : "") +
    (other ? `, ${other} only in ${otherSide}: width ${otherSide} shows them` : "") + ")";
  Plotly.react("flame", [{
    type: "icicle", ids, labels, parents, values, customdata: custom, branchvalues: "total",
    level: String(root), texttemplate: texts, maxdepth: 10, tiling: { orientation: "v" },
    marker: { colors: colours, colorscale: COLOURS, cmin: -scale, cmax: scale,
              showscale: true, colorbar: { title: { text: `change (${unit === "ns" ? "s" : unit})` },
                                      thickness: 12 } },
    hovertemplate: "<b>%{label}</b><br>BASE %{customdata[0]}, NEW %{customdata[1]}<br>" +
                   "change %{customdata[2]} (%{customdata[3]})<extra></extra>",
  }], { margin: { t: 10, l: 5, r: 5, b: 5 }, height: 540 }, CONFIG);
  if (state.selected !== null) showDetails(state.selected);
}

function showDetails(node) {
  state.selected = node;
  const box = el("details");
  box.replaceChildren();
  const h = document.createElement("p");
  h.innerHTML = "<b></b>"; h.firstChild.textContent = pathOf(node);
  const t = document.createElement("div"); t.id = "details-table";
  box.append(h, t);
  const rows = Object.keys(VALUES).map(v => {
    const ex = T.values[v];
    const incl = [inclusiveOf(T.parent, ex.base)[node], inclusiveOf(T.parent, ex.new)[node]];
    return { v, incl, excl: [ex.base[node], ex.new[node]] };
  });
  table("details-table", [
    { title: "value", text: true, get: r => VALUES[r.v].label },
    { title: "BASE", get: r => fmt(r.incl[0], VALUES[r.v].unit) },
    { title: "NEW", get: r => fmt(r.incl[1], VALUES[r.v].unit) },
    { title: "change", get: r => signed(r.incl[1] - r.incl[0], VALUES[r.v].unit) },
    { title: "%", get: r => pct(r.incl[0], r.incl[1]) },
    { title: "BASE self", get: r => fmt(r.excl[0], VALUES[r.v].unit) },
    { title: "NEW self", get: r => fmt(r.excl[1], VALUES[r.v].unit) },
  ], rows);
  // an MPI operation: its communicators (the rows of the node)
  const own = R.node.map((n, i) => i).filter(i => R.node[i] === node && R.op[i]);
  if (!own.length) return;
  const c = document.createElement("div"); c.id = "details-comms";
  box.append(c);
  table("details-comms", rowColumns(false), own);
}

// ---- the rows: per call path, communicator and operation ----------------------------------------

function rowColumns(withPath) {
  const cell = (name, unit) => i => fmt(R[name][i], unit);
  return (withPath ? [{ title: "call path", text: true, get: i => R.path[i] || "(root)" }] : [])
    .concat([
      { title: "communicator", text: true, get: i => R.op[i] ? (R.comm[i] || "(none)") : "" },
      { title: "operation", text: true, get: i => R.op[i] },
      { title: "BASE time", get: cell("base_time_ns", "ns") },
      { title: "NEW time", get: cell("new_time_ns", "ns") },
      { title: "Δ time", get: i => signed(R.delta_time_ns[i], "ns") },
      { title: "Δ time %", get: i => pct(R.base_time_ns[i], R.new_time_ns[i]) },
      { title: "Δ bytes", get: i => signed(R.delta_bytes[i], "bytes") },
      { title: "Δ calls", get: i => signed(R.delta_calls[i], "count") },
    ]);
}

// by the absolute change in the chosen value, then in the others (diff's impact order: the
// page's rows come in it for time)
function byImpact(indices, first) {
  const keys = [first].concat(Object.keys(VALUES).filter(v => v !== first));
  return indices.slice().sort((a, b) => {
    for (const k of keys) {
      const d = Math.abs(R[`delta_${k}`][b]) - Math.abs(R[`delta_${k}`][a]);
      if (d) return d;
    }
    return a - b;
  });
}

function drawRows() {
  const all = byImpact(R.node.map((_, i) => i), state.value);
  const shown = all.slice(0, TABLE_ROWS);
  note("rows-note", `${shown.length} of ${all.length} rows, by the change in ` +
       `${VALUES[state.value].label} (pathscope diff --csv writes them all); click a row: ` +
       "its tile in the icicle");
  table("rows", rowColumns(true), shown, i => { clicked(R.node[i]); el("s-tree").scrollIntoView(); });
}

// ---- communicators and operations --------------------------------------------------------------

function drawComms() {
  const C = D.comms;
  if (!C.comm.length) {
    note("comm-note", "no MPI operations in either profile"); return;
  }
  const v = state.value, unit = VALUES[v].unit;
  const order = C.comm.map((_, i) => i).sort((a, b) =>
    Math.abs(C[`delta_${v}`][b]) - Math.abs(C[`delta_${v}`][a]) || a - b);
  const names = order.map(i => `${C.op[i]} on ${C.comm[i] || "(none)"}`);
  const scale = unit === "ns" ? 1e9 : 1;
  Plotly.react("comm-bars", ["base", "new"].map(side => ({
    type: "bar", name: side.toUpperCase(), x: names, y: order.map(i => C[`${side}_${v}`][i] / scale),
  })), { barmode: "group", margin: { t: 30 },
         title: { text: `${VALUES[v].label} per operation and communicator` },
         xaxis: { type: "category" },
         yaxis: { title: { text: unit === "ns" ? "seconds" : VALUES[v].label } } }, CONFIG);
  table("comm-table", [
    { title: "communicator", text: true, get: i => C.comm[i] || "(none)" },
    { title: "operation", text: true, get: i => C.op[i] },
    ...Object.keys(VALUES).flatMap(k => [
      { title: `BASE ${VALUES[k].label}`, get: i => fmt(C[`base_${k}`][i], VALUES[k].unit) },
      { title: `NEW ${VALUES[k].label}`, get: i => fmt(C[`new_${k}`][i], VALUES[k].unit) },
      { title: `Δ ${VALUES[k].label}`, get: i => signed(C[`delta_${k}`][i], VALUES[k].unit) },
    ]),
  ], order);
}

function setupControls() {
  const value = el("value"), size = el("size");
  value.addEventListener("change", () => {
    state.value = value.value; drawTree(); drawRows(); drawComms();
  });
  size.addEventListener("change", () => { state.size = size.value; drawTree(); });
  el("reset").addEventListener("click", () => {
    state.root = 0; state.selected = null; el("details").replaceChildren(); drawTree();
  });
  drawTree();
  el("flame").on("plotly_icicleclick", ev => {
    if (ev.points && ev.points.length) clicked(Number(ev.points[0].id));
    return false;
  });
}

timed("header", header);
timed("tree", setupControls);
timed("rows", drawRows);
timed("comms", drawComms);
performance.mark("pathscope:done");
