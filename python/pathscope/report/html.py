"""`pathscope report DIR --html -o FILE`: one self-contained page (plotly.js, our script and
style inlined: it works offline) built from `pathscope.open(DIR)`'s frames.

    html = render_html(pathscope.frames.open("prof"))

The page's data is one JSON object (page_data); html_common.js and html_page.js draw it:
- tree: the call tree by function (ProfileFrames.by_function: a function's call sites are
  one node; call_sites=True: the tree by call site, `nodes`) with parent, label, where, kind,
  and `sites`: for each node merging several call sites, the sites' where and inclusive time
  and MPI time (all ranks), heaviest first; per metric of
  pathscope.metrics.CALL_PATH_METRICS that some node has, each node's exclusive value over all
  ranks (`all`) and, where every node's per-rank value is known (`--per-rank all`: the rank
  files) and there are at most PER_RANK_VALUES_MAX of them, per rank.  The page sums a
  subtree itself (the icicle's value of a node is its inclusive value).  A negative
  exclusive value (leaked bytes of a path that frees more than it allocates) is drawn as 0.
- imbalance: the IMBALANCE_PATHS paths with the most inclusive time (or MPI time; not a path
  whose value is all in one child: the child says it), with
  min/mean/max over the ranks and the ranks at the extremes (node_stats), and each rank's
  value where it is known (rank files, or a reduced profile's `rankvec` paths);
- comms: time, bytes (both sides, as comm-ops counts them) and calls per communicator and
  operation (comm-ops), and per rank (rank_comm_ops, from the rank files) for the rank x
  communicator heatmap;
- heap: the heap timeline of the HEAP_RANKS ranks with the highest peak, at most
  HEAP_POINTS points each (every k-th, the last one kept);
- syscalls: the kernel-threads table and the SYSCALL_ROWS system calls with the most time
  (kernel-syscalls);
- split: the time split (ProfileFrames.time_split) with its per-rank statistics.
"""
from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import pandas as pd
import pyarrow as pa

from pathscope.errors import PathscopeError

if TYPE_CHECKING:
    from pathscope.frames import ProfileFrames

# plotly.js as scripts/fetch-html-deps.sh stores it (the same pinned digest)
PLOTLY_FILE = "plotly.min.js"
PLOTLY_JS_VERSION = "4.1.1"
PLOTLY_JS_SHA256 = "3b6e15d45dbb7fca5bd2094291e961ddc5472cd887009e6009a56dab668d721f"
PER_RANK_VALUES_MAX = 500_000   # per-rank icicle values kept in the page (about 8 MB of JSON)
IMBALANCE_PATHS = 50
HEAP_RANKS = 32
HEAP_POINTS = 400
SYSCALL_ROWS = 300


class HtmlAssetError(PathscopeError):
    """plotly.js is missing or not the pinned bundle."""


def assets_dir() -> Path:
    """Where scripts/setup.sh stores plotly.js: .deps/html of the checkout (or of the installed
    prefix) this pathscope runs from."""
    from pathscope.home import find_home
    home = find_home()
    root = home.root if home is not None else Path(__file__).resolve().parents[3]
    return root / ".deps" / "html"


def load_plotly(directory: Optional[Path] = None, needed_by: str = "report --html") -> str:
    """The pinned plotly.js bundle's text; HtmlAssetError when it is missing or differs
    (needed_by: the command named in the message)."""
    path = (directory or assets_dir()) / PLOTLY_FILE
    fix = "run scripts/setup.sh (it fetches the pinned bundle)"
    try:
        data = path.read_bytes()
    except OSError as e:
        raise HtmlAssetError(f"{needed_by} needs plotly.js {PLOTLY_JS_VERSION} at {path}: "
                             f"{e.strerror}; {fix}") from e
    if hashlib.sha256(data).hexdigest() != PLOTLY_JS_SHA256:
        raise HtmlAssetError(f"{needed_by}: {path} is not plotly.js {PLOTLY_JS_VERSION} "
                             f"(sha256 differs from the pinned one); {fix}")
    return data.decode("utf-8")


def render_html(frames: "ProfileFrames", plotly: Optional[str] = None,
                call_sites: bool = False) -> str:
    """The page (plotly: the bundle's text, default load_plotly(); call_sites: page_data's)."""
    title = str(frames.profile.meta.get("program") or frames.profile.path)
    return html_document(title, "html_page", page_data(frames, call_sites), plotly)


def html_document(title: str, page: str, data: dict[str, Any],
                  plotly: Optional[str] = None) -> str:
    """One self-contained page: the style, plotly.js, the body of `page`.html, data as JSON,
    html_common.js then `page`.js, all inlined."""
    script = plotly if plotly is not None else load_plotly()
    files = resources.files("pathscope.report")
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>pathscope: {_escape(title)}</title>"
            f"<style>{files.joinpath('html_page.css').read_text()}</style>"
            f"<script>{_script_safe(script)}</script></head><body>"
            f"{files.joinpath(page + '.html').read_text()}"
            f"<script id=\"pathscope-data\" type=\"application/json\">{_script_safe(text)}"
            f"</script><script>{files.joinpath('html_common.js').read_text()}"
            f"{files.joinpath(page + '.js').read_text()}</script>"
            "</body></html>\n")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _script_safe(text: str) -> str:
    """Inside <script>, only `</script` ends the element: break every `</`."""
    return text.replace("</", "<\\/")


def page_data(frames: "ProfileFrames", call_sites: bool = False) -> dict[str, Any]:
    """call_sites: the icicle and the imbalance paths by call site (`nodes`), not by function
    (by_function(), the default)."""
    profile = frames.profile
    reduced = frames.tree is not None and not frames.per_rank_known
    shown = frames if call_sites else frames.by_function()
    notes: list[str] = []
    data: dict[str, Any] = {
        "program": str(profile.meta.get("program") or ""),
        "command": str(profile.meta.get("command") or ""),
        "nranks": profile.nranks,
        "problems": profile.problems(),
        "call_sites": call_sites,
        "tree": _tree(shown, notes),
        "imbalance": _imbalance(shown),
        "comms": _comms(frames, reduced),
        "heap": _heap(frames),
        "syscalls": _syscalls(frames),
        "split": _split(frames),
    }
    data["notes"] = notes
    return data


# ---- the call tree ------------------------------------------------------------------------------

def _tree(frames: "ProfileFrames", notes: list[str]) -> Optional[dict[str, Any]]:
    from pathscope.metrics import CALL_PATH_METRICS, METRICS
    nodes = frames.nodes
    if nodes.empty:
        return None
    metrics = []
    for name in CALL_PATH_METRICS:
        metric = METRICS[name]
        values = metric.value(lambda column: nodes[column]).clip(lower=0)
        if values.sum():
            metrics.append({"name": name, "unit": metric.unit,
                            "all": values.astype("int64").tolist()})
    ranks, reason = _per_rank(frames, [m["name"] for m in metrics])
    if reason:
        notes.append(reason)
    for m in metrics:
        m["ranks"] = ranks.get(m["name"], {})
    return {"parent": [-1 if p is None else int(p) for p in _plain(nodes["parent"])],
            "label": _plain(nodes["name"]), "kind": _plain(nodes["kind"]),
            "where": [_where(*row) for row in zip(*(_plain(nodes[c]) for c in (
                "file", "line", "module", "address")))],
            "ranks": sorted(frames.tree.ranks) if frames.tree is not None else [],
            "per_rank": bool(ranks), "metrics": metrics, "sites": _sites(frames)}


def _sites(frames: "ProfileFrames") -> dict[str, list[list[Any]]]:
    """{node: [[where, inclusive time, inclusive MPI time], ...]} of the nodes that merge
    several call sites (merge_call_sites orders them heaviest first)."""
    out: dict[str, list[list[Any]]] = {}
    for i in range(len(frames.nodes)):
        sites = frames.merged_node(i).sites
        if len(sites) > 1:
            out[str(i)] = [[_site_where(frames, s), s.incl_time_ns, s.incl_mpi_ns]
                           for s in sites]
    return out


def _site_where(frames: "ProfileFrames", site: Any) -> str:
    f = site.frame
    lines = frames.symbols.lines(f)
    line = lines[-1] if lines else None
    return _where(line.file if line else None, line.line if line else None, f.module or None,
                  f"0x{f.address:x}" if f.module else None)


def _plain(series: pd.Series) -> list[Any]:
    """Plain Python values, None for a missing one."""
    return pa.array(series).to_pylist()


def _where(file: Optional[str], line: Optional[int], module: Optional[str],
           address: Optional[str]) -> str:
    """file:line, else module+address (the module's file name), else nothing."""
    if file:
        return f"{file}:{line}" if line else str(file)
    if module:
        return f"{Path(str(module)).name}+{address}"
    return ""


def _per_rank(frames: "ProfileFrames", names: list[str]) -> tuple[dict[str, dict[str, Any]],
                                                                  str]:
    """{metric: {rank: [[node...], [value...]]}} of the nonzero per-rank values, or {} and
    why not."""
    from pathscope.metrics import METRICS
    if frames.tree is None:
        return {}, ""
    if not frames.per_rank_known:
        return {}, ("per-rank call trees need the rank files (--per-rank all); this profile "
                    "has the job's statistics (the icicle shows all ranks; per-path imbalance "
                    "shows each rank's value where tree.tsv kept it: its rankvec paths)")
    long = frames.metrics
    stored = long[~long["metric"].isin(["incl_time", "incl_mpi", "incl_offcpu"])]
    wide = stored.pivot_table(index=["node", "rank"], columns="metric", values="value",
                              aggfunc="sum", fill_value=0)
    out: dict[str, dict[str, Any]] = {}
    count = 0
    for name in names:
        def column(c: str) -> Any:
            return wide[c] if c in wide.columns else 0
        values = METRICS[name].value(column)
        if isinstance(values, int):
            continue
        values = values.clip(lower=0)
        values = values[values != 0]
        count += len(values)
        if count > PER_RANK_VALUES_MAX:
            return {}, (f"per-rank call trees left out: more than {PER_RANK_VALUES_MAX:,} "
                        f"per-rank values (pathscope export --format folded --rank R gives "
                        f"one rank's)")
        by_rank: dict[str, Any] = {}
        for rank, part in values.groupby(level="rank"):
            by_rank[str(int(rank))] = [part.index.get_level_values("node").astype(int).tolist(),
                                       part.astype("int64").tolist()]
        out[name] = by_rank
    return out, ""


# ---- per-path load imbalance --------------------------------------------------------------------

def _imbalance(frames: "ProfileFrames") -> dict[str, Any]:
    """Per metric (incl_time, incl_mpi): the heaviest paths by sum, with their statistics and
    the per-rank values known for them."""
    if frames.tree is None:
        return {}
    stats = frames.node_stats
    nodes = frames.nodes
    parents = dict(zip(nodes["node"].astype(int), _plain(nodes["parent"])))
    names = dict(zip(nodes["node"].astype(int), _plain(nodes["name"])))
    long = frames.metrics
    out: dict[str, Any] = {}
    for metric in ("incl_time", "incl_mpi"):
        rows = stats[(stats["metric"] == metric) & (stats["node"] != 0)]
        # a path whose value is all in one child (a call site and its call): the child says it
        by_parent = rows.assign(parent=rows["node"].map(parents)).groupby("parent")["sum"].max()
        rows = rows[rows["sum"] != rows["node"].map(by_parent).fillna(-1)]
        rows = rows.sort_values(["sum", "node"], ascending=[False, True]).head(IMBALANCE_PATHS)
        if rows.empty:
            continue
        chosen = rows["node"].astype(int).tolist()
        per_rank = long[(long["metric"] == metric) & long["node"].isin(chosen)]
        vectors = {str(n): dict(zip(g["rank"].astype(int).astype(str), g["value"].astype(int)))
                   for n, g in per_rank.groupby("node")}
        out[metric] = [{"node": n, "path": _path_label(n, parents, names),
                        "sum": int(r.sum), "mean": float(r.mean),
                        "min": _int(r.min), "min_rank": _int(r.min_rank),
                        "max": _int(r.max), "max_rank": _int(r.max_rank),
                        "ranks": vectors.get(str(n), {})}
                       for n, r in zip(chosen, rows.itertuples(index=False))]
    return out


def _int(value: Any) -> Optional[int]:
    return None if value is None or pd.isna(value) else int(value)


def _path_label(node: int, parents: dict[int, Any], names: dict[int, Any], depth: int = 3) -> str:
    """The node's last `depth` frames, outermost first."""
    parts: list[str] = []
    while node is not None and node != 0 and len(parts) < depth:
        parts.append(str(names[node]))
        node = parents[node]
    more = "… > " if node not in (None, 0) else ""
    return more + " > ".join(reversed(parts))


# ---- communicators ------------------------------------------------------------------------------

def _comms(frames: "ProfileFrames", reduced: bool) -> dict[str, Any]:
    ops = frames.comm_ops
    ops = ops[ops["comm"] != "*"]
    per_rank = frames.rank_comm_ops
    return {"comm": _plain(ops["comm"]), "op": _plain(ops["op"]),
            "calls": _plain(ops["calls"]), "bytes": _plain(ops["bytes"]),
            "time_s": _plain(ops["time_sum_s"]),
            "rank": {"rank": _plain(per_rank["rank"]), "comm": _plain(per_rank["comm"]),
                     "op": _plain(per_rank["op"]), "calls": _plain(per_rank["calls"]),
                     "bytes": _plain(per_rank["bytes"]), "time_s": _plain(per_rank["time_s"])},
            "rank_note": "" if not per_rank.empty else (
                "the rank x communicator heatmap needs the rank files (--per-rank all)"
                if reduced or frames.profile.source == "profile" else "")}


# ---- heap, system calls, time split -------------------------------------------------------------

def _heap(frames: "ProfileFrames") -> dict[str, Any]:
    timeline = frames.table("heap-timeline")
    if timeline.empty:
        return {}
    peaks = timeline.groupby("rank")["live_bytes"].max().sort_values(ascending=False)
    chosen = sorted(int(r) for r in peaks.index[:HEAP_RANKS])
    out: dict[str, Any] = {"ranks_total": len(peaks), "series": {}}
    for rank in chosen:
        part = timeline[timeline["rank"] == rank].sort_values("time_s")
        step = max(1, -(-len(part) // HEAP_POINTS))
        keep = list(range(0, len(part), step))
        if keep[-1] != len(part) - 1:
            keep.append(len(part) - 1)
        part = part.iloc[keep]
        out["series"][str(rank)] = [_plain(part["time_s"]), _plain(part["live_bytes"])]
    return out


def _table(df: pd.DataFrame) -> dict[str, Any]:
    return {"columns": list(df.columns), "rows": [list(r) for r in zip(*(
        _plain(df[c]) for c in df.columns))]}


def _syscalls(frames: "ProfileFrames") -> dict[str, Any]:
    threads = frames.table("kernel-threads")
    calls = frames.table("kernel-syscalls")
    if threads.empty and calls.empty:
        return {}
    top = calls.sort_values(["time_s", "rank", "tid"], ascending=[False, True, True]).head(
        SYSCALL_ROWS)
    return {"threads": _table(threads), "calls": _table(top), "calls_total": len(calls)}


def _split(frames: "ProfileFrames") -> list[dict[str, Any]]:
    tree = frames.tree
    if tree is None:
        return []
    split = frames.time_split()
    rows = [("time", "time"), ("failed unwind", "failed"), ("not unwound", "not_unwound"),
            ("execution", "execution"), ("execution: MPI", "execution_mpi")]
    if tree.knows_offcpu:
        rows += [("execution: outside MPI, on CPU", "execution_oncpu"),
                 ("execution: outside MPI, off CPU", "execution_offcpu")]
    return [{"row": label, **{c: None if pd.isna(v) else v
                              for c, v in split.loc[[part]].to_dict("records")[0].items()}}
            for label, part in rows]
