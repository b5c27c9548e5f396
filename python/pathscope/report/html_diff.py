"""`pathscope diff BASE NEW --html -o FILE`: the two-profile view, one self-contained page as
report --html's (html.html_document: plotly.js, html_common.js and html_diff.js inlined).

    d = pathscope.diff.diff(base_frames, new_frames)
    page = render_diff_html(d, found=regressions(d, 5.0), fail_above=5.0)

The page's data (diff_page_data), all from pathscope.diff's rows (one per call path of frame
names, communicator and operation; a function's call sites are one path there):
- base, new (the directories), total (Diff.total), regressions: --fail-above's lines with
  fail_above and floor (None without --fail-above);
- tree: the union of both profiles' paths, depth first (parents before children, siblings
  by name): an MPI operation is a node under the path that calls it, its communicators
  summed; per value of diff.VALUES each node's exclusive base and new value (the page sums
  subtrees: a node's value in the differential icicle is its inclusive one);
- rows: every row of the diff by impact: the path's text, its node in tree, comm, op, base,
  new and delta of each value, time_pct (None: a path only NEW has);
- comms: the rows of MPI operations summed per communicator and operation.
"""
from __future__ import annotations

from typing import Any, Optional

import pandas as pd

from pathscope.diff import SEPARATOR, VALUES, Diff
from pathscope.report.html import html_document

ROOT_LABEL = "[all threads]"


def render_diff_html(d: Diff, plotly: Optional[str] = None, found: Optional[list[str]] = None,
                     fail_above: Optional[float] = None, floor: Optional[float] = None) -> str:
    """The page (plotly: the bundle's text, default html.load_plotly(); found: the
    regressions of --fail-above fail_above with --floor floor, None without it)."""
    title = f"diff {d.base} -> {d.new}"
    return html_document(title, "html_diff", diff_page_data(d, found, fail_above, floor), plotly)


def diff_page_data(d: Diff, found: Optional[list[str]] = None,
                   fail_above: Optional[float] = None,
                   floor: Optional[float] = None) -> dict[str, Any]:
    keys = [tuple(path) + ((op,) if op else ()) for path, op in zip(d.rows["path"], d.rows["op"])]
    tree, node_of = _tree(d.rows, keys)
    total = dict(d.total, time_pct=_percent(d.total["time_pct"]))
    return {"base": d.base, "new": d.new, "total": total,
            "regressions": None if found is None else {
                "lines": found, "fail_above": fail_above, "floor": floor},
            "tree": tree, "rows": _rows(d.rows, [node_of[k] for k in keys]),
            "comms": _comms(d.rows)}


def _tree(rows: pd.DataFrame, keys: list[tuple[str, ...]]) -> tuple[dict[str, Any],
                                                                     dict[tuple[str, ...], int]]:
    """The union tree and each key's node.  Every prefix of every key is a node; sorted as
    tuples they are in depth-first order (a prefix before what extends it, a subtree
    contiguous)."""
    prefixes = {k[:n] for k in keys for n in range(len(k) + 1)}
    order = sorted(prefixes)
    node_of = {k: i for i, k in enumerate(order)}
    mpi = {k for k, op in zip(keys, rows["op"]) if op}
    sums = rows[[f"{side}_{v}" for v in VALUES for side in ("base", "new")]].groupby(
        pd.Series([node_of[k] for k in keys], index=rows.index)).sum()
    values = {}
    for v in VALUES:
        values[v] = {side: _by_node(sums[f"{side}_{v}"], len(order)) for side in ("base", "new")}
    return {"parent": [-1] + [node_of[k[:-1]] for k in order[1:]],
            "label": [ROOT_LABEL] + [k[-1] for k in order[1:]],
            "kind": ["root"] + ["mpi" if k in mpi else "" for k in order[1:]],
            "values": values}, node_of


def _by_node(column: pd.Series, count: int) -> list[int]:
    out = [0] * count
    for node, value in zip(column.index, column.tolist()):
        out[node] = int(value)
    return out


def _rows(rows: pd.DataFrame, nodes: list[int]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {
        "path": [SEPARATOR.join(p) for p in rows["path"]], "node": nodes,
        "comm": rows["comm"].tolist(), "op": rows["op"].tolist()}
    for v in VALUES:
        for side in ("base", "new", "delta"):
            out[f"{side}_{v}"] = [int(x) for x in rows[f"{side}_{v}"]]
    out["time_pct"] = [_percent(x) for x in rows["time_pct"]]
    return out


def _percent(value: Any) -> Optional[float]:
    """A change in %, None for a path only NEW has (diff gives None or NaN: JSON has neither)."""
    return None if value is None or pd.isna(value) else float(value)


def _comms(rows: pd.DataFrame) -> dict[str, list[Any]]:
    """Per (comm, op) of the MPI rows: base, new and delta of each value, by comm and op."""
    columns = [f"{side}_{v}" for v in VALUES for side in ("base", "new", "delta")]
    ops = rows[rows["op"] != ""].groupby(["comm", "op"], as_index=False)[columns].sum()
    out: dict[str, list[Any]] = {"comm": ops["comm"].tolist(), "op": ops["op"].tolist()}
    for c in columns:
        out[c] = [int(x) for x in ops[c]]
    return out
