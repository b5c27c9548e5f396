// What the pages of pathscope report --html and pathscope diff --html share (inlined before
// each page's own script, in the same <script>): the page's data, number formats, tables, the
// call-tree sums and the performance marks bench/html_report.py reads.
"use strict";
const D = JSON.parse(document.getElementById("pathscope-data").textContent);
const CONFIG = { displaylogo: false, responsive: true };

function fmt(value, unit) {
  if (value === null || value === undefined) return "-";
  if (unit === "ns") return fmtSeconds(value / 1e9);
  if (unit === "s") return fmtSeconds(value);
  if (unit === "bytes") {
    const steps = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = value, i = 0;
    while (Math.abs(v) >= 1024 && i < steps.length - 1) { v /= 1024; i++; }
    return i === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 2 : 1)} ${steps[i]}`;
  }
  return Math.round(value).toLocaleString("en-US");
}

function fmtSeconds(s) {
  const a = Math.abs(s);
  if (a === 0) return "0 s";
  if (a >= 1) return `${s.toFixed(3)} s`;
  if (a >= 1e-3) return `${(s * 1e3).toFixed(3)} ms`;
  if (a >= 1e-6) return `${(s * 1e6).toFixed(3)} µs`;
  return `${Math.round(s * 1e9)} ns`;
}

function el(id) { return document.getElementById(id); }

function note(id, text) { el(id).textContent = text; }

function option(select, value, text) {
  const o = document.createElement("option");
  o.value = value; o.textContent = text; select.appendChild(o);
}

// A table: columns [{title, get(row), text?}], rows; onClick(row) makes rows clickable.
function table(target, columns, rows, onClick) {
  const t = document.createElement("table");
  const head = t.createTHead().insertRow();
  for (const c of columns) {
    const th = document.createElement("th");
    th.textContent = c.title; if (c.text) th.className = "text"; head.appendChild(th);
  }
  const body = t.createTBody();
  for (const r of rows) {
    const tr = body.insertRow();
    for (const c of columns) {
      const td = tr.insertCell(); td.textContent = c.get(r); if (c.text) td.className = "text";
    }
    if (onClick) { tr.className = "clickable"; tr.addEventListener("click", () => onClick(r)); }
  }
  const box = document.createElement("div"); box.className = "scroll"; box.appendChild(t);
  el(target).replaceChildren(box);
}

// ---- call trees: nodes depth first, parents before children (parent[0] = -1) ---------------

// each node's inclusive value: one pass from the end adds every node into its parent
function inclusiveOf(parent, ex) {
  const incl = Float64Array.from(ex);
  for (let i = incl.length - 1; i > 0; i--) incl[parent[i]] += incl[i];
  return incl;
}

// each node's last descendant (a subtree is i..last[i])
function subtreeEnds(parent) {
  const last = parent.map((_, i) => i);
  for (let i = last.length - 1; i > 0; i--) last[parent[i]] = Math.max(last[parent[i]], last[i]);
  return last;
}

// performance marks (read by bench/html_report.py and the browser tests): each part's end;
// "pathscope:done" after the last
function timed(name, f) { f(); performance.mark(`pathscope:${name}`); }

// a click on a tree node shows its details and draws its subtree (clicking the shown root
// goes up to its parent); each page defines its own state (root, selected), T (the tree, with
// parent) and drawTree()
function clicked(node) {
  state.root = node === state.root ? Math.max(T.parent[node], 0) : node;
  state.selected = node;
  drawTree();
}
