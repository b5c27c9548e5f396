// pathscope report --html: draws the page's JSON (python/pathscope/report/html.py says what it
// holds) with plotly.js and html_common.js.  window.pathscope exposes the data and the view's
// state (metric, rank, selected node) so that a reader of the page -- or a browser test -- can
// see what is shown.
const state = { metric: null, rank: "all", root: 0, selected: null };
window.pathscope = { data: D, state };
const METRIC_LABELS = {
  time: "time", mpi_time: "MPI time", oncpu_time: "on-CPU time", offcpu_time: "off-CPU time",
  visits: "MPI visits", bytes: "MPI bytes", calls: "calls (lower bound)",
  alloc_count: "allocations", alloc_bytes: "allocated bytes", free_count: "frees",
  leaked_bytes: "leaked bytes", peak_bytes: "peak bytes", syscall_count: "system calls",
  syscall_time: "system call time", probe_calls: "probe calls", probe_time: "probe time",
  probe_self_time: "probe self time", probe_cpu_time: "probe CPU time",
};

// ---- header ------------------------------------------------------------------------------------

function header() {
  el("title").textContent = `pathscope: ${D.program || "profile"}`;
  document.title = el("title").textContent;
  el("subtitle").textContent = `${D.nranks} ranks` + (D.command ? ` — ${D.command}` : "");
  for (const text of D.problems.concat(D.notes)) {
    const li = document.createElement("li"); li.textContent = text; el("notes").appendChild(li);
  }
}

// ---- call tree ---------------------------------------------------------------------------------

const T = D.tree;

function metricOf(name) { return T.metrics.find(m => m.name === name); }

// each node's exclusive value of metric m on the chosen rank ("all": the sum over the ranks)
function exclusive(m, rank) {
  const n = T.parent.length;
  if (rank === "all") return Float64Array.from(m.all);
  const out = new Float64Array(n);
  const part = m.ranks[rank];
  if (part) part[0].forEach((node, i) => { out[node] = part[1][i]; });
  return out;
}

function inclusive(ex) { return inclusiveOf(T.parent, ex); }

// a node's place; a node merging several call sites (the default: report --call-sites keeps
// them apart) names its heaviest and how many more there are
function whereOf(i) {
  const sites = T.sites[i];
  const where = T.where[i] || T.kind[i];
  return sites ? `${where} and ${sites.length - 1} more call site` +
                 (sites.length > 2 ? "s" : "") : where;
}

function pathOf(node) {
  const parts = [];
  for (let i = node; i > 0; i = T.parent[i]) parts.push(T.label[i]);
  return parts.reverse().join(" > ") || T.label[0];
}

// nodes under 1/PRUNE of the shown root's value are not drawn (under about a pixel wide): a
// tree of thousands of nodes stays quick to draw; clicking a node draws its subtree afresh
const PRUNE = 1000;
const TEXT_ALL = 300, TEXT_MIN = 100;   // over TEXT_ALL tiles: text only from 1/TEXT_MIN
const LAST = T ? subtreeEnds(T.parent) : [];

function drawTree() {
  const m = metricOf(state.metric);
  const incl = inclusive(exclusive(m, state.rank));
  if (!(incl[state.root] > 0)) state.root = 0;        // nothing there for this metric or rank
  const root = state.root;
  const ids = [], labels = [], parents = [], values = [], custom = [], texts = [];
  const add = i => {
    ids.push(String(i)); labels.push(T.label[i]);
    parents.push(i === 0 ? "" : String(T.parent[i]));
    values.push(incl[i]); custom.push([whereOf(i), fmt(incl[i], m.unit)]);
    texts.push(incl[i] * TEXT_MIN >= incl[root] ? "%{label}<br>%{customdata[1]}" : "");
  };
  const chain = [];
  for (let i = T.parent[root]; root > 0 && i >= 0; i = T.parent[i]) chain.push(i);
  chain.reverse().forEach(add);
  let hidden = 0;
  for (let i = root; i <= LAST[root]; i++) {
    if (!(incl[i] > 0)) continue;
    if (incl[i] * PRUNE < incl[root]) { hidden++; continue; }
    add(i);
  }
  // a small tree: text on every tile; a large one: none on tiles too narrow to hold it
  // (measuring the text of a thousand tiles is most of plotly's drawing time)
  if (ids.length <= TEXT_ALL) texts.fill("%{label}<br>%{customdata[1]}");
  const rankText = state.rank === "all" ? "all ranks" : `rank ${state.rank}`;
  el("flame-status").textContent =
    `${METRIC_LABELS[m.name] || m.name}, ${rankText}: ${fmt(incl[root], m.unit)} in ` +
    (root ? `${pathOf(root)}` : "the whole tree") +
    ` (${ids.length - chain.length} nodes drawn` +
    (hidden ? `, ${hidden} under 0.1% of it not drawn)` : ")");
  Plotly.react("flame", [{
    type: "icicle", ids, labels, parents, values, customdata: custom, branchvalues: "total",
    level: String(root), texttemplate: texts, maxdepth: 10,
    tiling: { orientation: "v" },
    hovertemplate: "<b>%{label}</b><br>%{customdata[0]}<br>%{customdata[1]} " +
                   "(%{percentRoot:.1%} of the shown root)<extra></extra>",
  }], { margin: { t: 10, l: 5, r: 5, b: 5 }, height: 540 }, CONFIG);
  showHotPath(incl, m);
  if (state.selected !== null) showDetails(state.selected);
}

const CHILDREN = (() => {
  const out = T ? T.parent.map(() => []) : [];
  if (T) T.parent.forEach((p, i) => { if (i) out[p].push(i); });
  return out;
})();
const PSEUDO = ["failed", "not_unwound"];

// from the shown root, the child with the most of the metric down to a leaf (at the tree's
// root not into [failed unwind] or [not unwound], as the text report's hot path); each step
// a link that zooms to it
function hotPath(incl) {
  const path = [state.root];
  for (let i = state.root; ;) {
    let best = -1;
    for (const c of CHILDREN[i]) {
      if (i === 0 && PSEUDO.includes(T.kind[c])) continue;
      if (incl[c] > 0 && (best < 0 || incl[c] > incl[best])) best = c;
    }
    if (best < 0) return path;
    path.push(best); i = best;
  }
}

function showHotPath(incl, m) {
  const box = el("hot-path");
  box.replaceChildren("hot path: ");
  hotPath(incl).forEach((node, k) => {
    if (k) box.append(" > ");
    const a = document.createElement("a");
    a.href = "#s-tree"; a.dataset.node = node;
    a.textContent = `${T.label[node]} (${fmt(incl[node], m.unit)})`;
    a.addEventListener("click", ev => { ev.preventDefault(); clicked(node); });
    box.append(a);
  });
}

function showDetails(node) {
  state.selected = node;
  const rows = T.metrics.map(m => {
    const ex = exclusive(m, state.rank);
    return { m, incl: inclusive(ex)[node], excl: ex[node] };
  }).filter(r => r.incl);
  const box = el("details");
  box.replaceChildren();
  const h = document.createElement("p");
  h.innerHTML = "<b></b>"; h.firstChild.textContent = pathOf(node);
  const where = document.createElement("p");
  where.textContent = `${whereOf(node)} (${T.kind[node]}; ` +
    `${state.rank === "all" ? "all ranks" : "rank " + state.rank})`;
  const t = document.createElement("div"); t.id = "details-table";
  box.append(h, where, t);
  table("details-table", [
    { title: "metric", text: true, get: r => METRIC_LABELS[r.m.name] || r.m.name },
    { title: "inclusive", get: r => fmt(r.incl, r.m.unit) },
    { title: "exclusive", get: r => fmt(r.excl, r.m.unit) },
  ], rows);
  const sites = T.sites[node];
  if (!sites) return;
  const s = document.createElement("div"); s.id = "details-sites";
  const title = document.createElement("p");
  title.textContent = `its ${sites.length} call sites (all ranks; report --call-sites ` +
                      "draws each apart):";
  box.append(title, s);
  const total = sites.reduce((sum, r) => sum + r[1], 0);
  table("details-sites", [
    { title: "call site", text: true, get: r => r[0] || "-" },
    { title: "time", get: r => fmt(r[1], "ns") },
    { title: "% of the node's", get: r => total ? `${(100 * r[1] / total).toFixed(1)}%` : "-" },
    { title: "MPI time", get: r => fmt(r[2], "ns") },
  ], sites);
}

function setupTree() {
  if (!T) { note("flame-status", "this profile has no call paths"); return; }
  note("tree-note", D.call_sites
    ? "one tile per call site (--call-sites): a function called from several places is " +
      "several tiles"
    : "one tile per function under each caller: its call sites are merged (click it to see " +
      "them; pathscope report --call-sites --html draws each apart)");
  const metric = el("metric");
  for (const m of T.metrics) option(metric, m.name, METRIC_LABELS[m.name] || m.name);
  state.metric = T.metrics[0].name;
  const rank = el("rank");
  option(rank, "all", "all ranks");
  if (T.per_rank) for (const r of T.ranks) option(rank, String(r), `rank ${r}`);
  else { rank.disabled = true; note("rank-note", "only all ranks: see the notes above"); }
  metric.addEventListener("change", () => { state.metric = metric.value; drawTree(); });
  rank.addEventListener("change", () => { state.rank = rank.value; drawTree(); });
  el("reset").addEventListener("click", () => {
    state.root = 0; state.selected = null; el("details").replaceChildren(); drawTree();
  });
  drawTree();
  // our own zoom (clicked) instead of plotly's: returning false cancels plotly's
  el("flame").on("plotly_icicleclick", ev => {
    if (ev.points && ev.points.length) clicked(Number(ev.points[0].id));
    return false;
  });
}

// ---- time split --------------------------------------------------------------------------------

function setupSplit() {
  if (!D.split.length) { note("split-table", "no call paths: no time split"); return; }
  const total = D.split[0].sum;
  const share = v => total ? `${(100 * v / total).toFixed(1)}%` : "-";
  const withRank = (v, r) => v === null ? "-" : `${fmt(v, "ns")} (${r})`;
  table("split-table", [
    { title: "", text: true, get: r => r.row }, { title: "time", get: r => fmt(r.sum, "ns") },
    { title: "%", get: r => share(r.sum) },
    { title: "min (rank)", get: r => withRank(r.min, r.min_rank) },
    { title: "mean", get: r => fmt(r.mean, "ns") },
    { title: "max (rank)", get: r => withRank(r.max, r.max_rank) },
  ], D.split);
  const parts = D.split.slice(1);
  Plotly.newPlot("split", [{
    type: "bar", orientation: "h", y: parts.map(r => r.row), x: parts.map(r => r.sum / 1e9),
    hovertemplate: "%{y}: %{x:.3f} s<extra></extra>",
  }], { margin: { l: 230, t: 10 }, xaxis: { title: { text: "seconds (all ranks)" } },
        yaxis: { autorange: "reversed" } }, CONFIG);
}

// ---- per-path imbalance ------------------------------------------------------------------------

function setupImbalance() {
  const metrics = Object.keys(D.imbalance);
  if (!metrics.length) { note("imbalance-table", "no call paths"); return; }
  const select = el("imbalance-metric");
  const names = { incl_time: "time (inclusive)", incl_mpi: "MPI time (inclusive)" };
  for (const k of metrics) option(select, k, names[k] || k);
  const draw = () => {
    const rows = D.imbalance[select.value];
    const ms = r => r.mean / 1e6;
    Plotly.react("imbalance", [{
      type: "bar", orientation: "h", y: rows.map(r => `${r.path} #${r.node}`), x: rows.map(ms),
      error_x: { type: "data", array: rows.map(r => (r.max - r.mean) / 1e6),
                 arrayminus: rows.map(r => (r.mean - r.min) / 1e6) },
      customdata: rows.map(r => [fmt(r.min, "ns"), r.min_rank, fmt(r.max, "ns"), r.max_rank]),
      hovertemplate: "%{y}<br>mean %{x:.3f} ms, min %{customdata[0]} (rank %{customdata[1]})," +
                     " max %{customdata[2]} (rank %{customdata[3]})<extra></extra>",
    }], { margin: { l: 420, t: 10 }, height: 120 + 18 * rows.length,
          xaxis: { title: { text: "ms per rank: mean, bars from min to max" } },
          yaxis: { autorange: "reversed", automargin: true } }, CONFIG);
    table("imbalance-table", [
      { title: "path", text: true, get: r => r.path }, { title: "node", get: r => r.node },
      { title: "all ranks", get: r => fmt(r.sum, "ns") },
      { title: "min (rank)", get: r => `${fmt(r.min, "ns")} (${r.min_rank})` },
      { title: "mean", get: r => fmt(r.mean, "ns") },
      { title: "max (rank)", get: r => `${fmt(r.max, "ns")} (${r.max_rank})` },
      { title: "max/mean", get: r => r.mean ? (r.max / r.mean).toFixed(2) : "-" },
    ], rows, r => showRanks(r));
    showRanks(rows[0]);
  };
  select.addEventListener("change", draw);
  draw();
}

function showRanks(row) {
  const ranks = Object.keys(row.ranks);
  if (!ranks.length) {
    Plotly.purge("imbalance-ranks");
    el("imbalance-ranks").textContent =
      `${row.path}: no per-rank values kept for this path (only min, mean and max)`;
    return;
  }
  el("imbalance-ranks").textContent = "";
  const all = Array.from({ length: D.nranks }, (_, r) => r);
  Plotly.react("imbalance-ranks", [{
    type: "bar", x: all, y: all.map(r => (row.ranks[String(r)] || 0) / 1e6),
    hovertemplate: "rank %{x}: %{y:.3f} ms<extra></extra>",
  }], { title: { text: `${row.path}: each rank` }, margin: { t: 40 },
        xaxis: { title: { text: "rank" } }, yaxis: { title: { text: "ms" } } }, CONFIG);
}

// ---- communicators -----------------------------------------------------------------------------

const NO_COMM = "-";

function setupComms() {
  const C = D.comms;
  if (!C.comm.length) { note("comm-note", "no MPI operations recorded"); return; }
  const select = el("comm-metric");
  const unit = { time_s: "s", bytes: "bytes", calls: "count" };
  const draw = () => {
    const key = select.value;
    // the charts are per communicator (mpisee's figures): not the calls made without one
    // ("-": MPI_Init, MPI_Finalize, ...), which the table below still lists
    const comms = [...new Set(C.comm)].filter(c => c !== NO_COMM);
    const ops = [...new Set(C.op.filter((_, i) => C.comm[i] !== NO_COMM))];
    const cell = new Map();                       // "comm\top" -> value
    C.comm.forEach((c, i) => cell.set(`${c}\t${C.op[i]}`, C[key][i]));
    const traces = ops.map(op => ({
      type: "bar", name: op, x: comms, y: comms.map(c => cell.get(`${c}\t${op}`) || 0),
    }));
    Plotly.react("comm-bars", traces, {
      barmode: "stack", margin: { t: 30 }, title: { text: "per communicator and operation" },
      xaxis: { title: { text: "communicator" }, type: "category" },
      yaxis: { title: { text: select.options[select.selectedIndex].text } } }, CONFIG);
    const R = C.rank;
    if (!R.rank.length) {
      Plotly.purge("comm-heatmap"); el("comm-heatmap").style.minHeight = "0";
      note("comm-note", C.rank_note);
    } else {
      const ranks = [...new Set(R.rank)].sort((a, b) => a - b);
      const rcomms = [...new Set(R.comm)].filter(c => c !== NO_COMM);
      const z = ranks.map(() => rcomms.map(() => 0));
      const row = new Map(ranks.map((r, i) => [r, i]));
      const col = new Map(rcomms.map((c, i) => [c, i]));
      R.rank.forEach((r, i) => {
        if (col.has(R.comm[i])) z[row.get(r)][col.get(R.comm[i])] += R[key][i];
      });
      Plotly.react("comm-heatmap", [{
        type: "heatmap", x: rcomms, y: ranks, z, colorscale: "Viridis",
        hovertemplate: "rank %{y}, %{x}: %{z}<extra></extra>",
      }], { title: { text: "rank × communicator" }, margin: { t: 30 },
            xaxis: { type: "category", title: { text: "communicator" } },
            yaxis: { title: { text: "rank" } } }, CONFIG);
    }
    const rows = C.comm.map((c, i) => i).sort((a, b) => C[key][b] - C[key][a]);
    table("comm-table", [
      { title: "communicator", text: true, get: i => C.comm[i] },
      { title: "operation", text: true, get: i => C.op[i] },
      { title: "time", get: i => fmt(C.time_s[i], "s") },
      { title: "bytes (both sides)", get: i => fmt(C.bytes[i], "bytes") },
      { title: "calls", get: i => fmt(C.calls[i], "count") },
    ], rows);
  };
  select.addEventListener("change", draw);
  draw();
}

// ---- heap and system calls ---------------------------------------------------------------------

function setupHeap() {
  const H = D.heap;
  if (!H.series) {
    note("heap-note", "no heap timeline in this profile (pathscope run --heap)");
    return;
  }
  const ranks = Object.keys(H.series);
  if (H.ranks_total > ranks.length)
    note("heap-note", `the ${ranks.length} ranks with the highest peak of ${H.ranks_total}`);
  Plotly.newPlot("heap", ranks.map(r => ({
    type: "scatter", mode: "lines", name: `rank ${r}`, x: H.series[r][0], y: H.series[r][1],
  })), { margin: { t: 10 }, xaxis: { title: { text: "seconds since start" } },
         yaxis: { title: { text: "live bytes" } } }, CONFIG);
}

function setupSyscalls() {
  const S = D.syscalls;
  if (!S.threads) {
    note("syscall-note", "no kernel data in this profile (pathscope run --kernel)");
    return;
  }
  const columns = cols => cols.map((c, i) => ({
    title: c, text: ["thread", "source", "syscall"].includes(c),
    get: r => r[i] === null ? "-" : r[i],
  }));
  table("syscall-threads", columns(S.threads.columns), S.threads.rows);
  table("syscall-calls", columns(S.calls.columns), S.calls.rows);
  if (S.calls_total > S.calls.rows.length)
    note("syscall-note",
         `system calls: the ${S.calls.rows.length} with the most time of ${S.calls_total}`);
}

timed("header", header);
timed("tree", setupTree);
timed("split", setupSplit);
timed("imbalance", setupImbalance);
timed("comms", setupComms);
timed("heap", setupHeap);
timed("syscalls", setupSyscalls);
performance.mark("pathscope:done");
