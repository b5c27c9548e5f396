"""`pathscope diff BASE NEW`: what changed between two profiles, per call path, communicator
and MPI operation (issue 15).

    d = diff(pathscope.open("base", runtime_threads=False), pathscope.open("new", ...))
    d.rows          # one row per (path, comm, op): base, new and delta of time, bytes, calls
    d.total         # the same for the whole profile
    regressions(d, fail_above=5.0, floor=1.0)   # what --fail-above reports (empty: passed)

A row's key is its call path as frame names (root excluded), so two runs match although
their addresses, modules or call-site lines differ; call sites with the same names add up.
A row holds a node's exclusive values: for an MPI operation, one row per communicator (the
node's `pcomm` parts; a part of the node on no communicator gets comm ""), with `path` the
call path leading to the operation and `op` its name; for any other node comm and op are "".
time is the report's "time" (sampled + MPI, ns), bytes the node's bytes (MPI: sent and
received, the `bytes` metric), calls the operation's calls (MPI) or the call-site entries
counted in thunk mode (the `calls` metric).  Reduced profiles (tree.tsv) give the same rows:
only sums are compared.  `pathscope diff` leaves the MPI library's own threads out, as the
report does: a progress thread blocked in poll() for the whole run grows with the elapsed
time, as much as the function that made the run slower.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Optional, TextIO

import pandas as pd

from pathscope.calltree import no_call_paths_message
from pathscope.errors import ProfileError
from pathscope.frames import ProfileFrames

KEY = ["path", "comm", "op"]
VALUES = ["time_ns", "bytes", "calls"]
SEPARATOR = " > "             # between the frames of a path, in the table and the CSV
DEFAULT_FLOOR = 1.0           # --floor: % of BASE's total time a path needs to be judged
DEFAULT_TOP = 30              # rows of the terminal table


@dataclass
class Diff:
    base: str
    new: str
    rows: pd.DataFrame        # KEY, then base_X, new_X, delta_X for X in VALUES, time_pct
    total: dict[str, Any]     # base_X, new_X, delta_X for X in VALUES, time_pct


def path_rows(p: ProfileFrames) -> pd.DataFrame:
    """A profile's rows: KEY + VALUES, summed per key, rows of zeros left out."""
    nodes = p.nodes
    if nodes.empty:
        raise ProfileError(no_call_paths_message(p.profile))
    names = nodes["name"].tolist()
    parents = nodes["parent"].tolist()
    paths: list[tuple[str, ...]] = [()]
    for i in range(1, len(nodes)):          # parents come before their children
        paths.append(paths[parents[i]] + (names[i],))
    is_mpi = (nodes["kind"] == "mpi").to_numpy()
    time = (nodes["sample_ns"] + nodes["mpi_ns"]).tolist()
    nbytes, visits, entries = (nodes[c].tolist() for c in ("bytes", "visits", "entries"))
    by_node: dict[int, list[tuple[str, int, int, int]]] = {}
    c = p.node_comms
    for node, *part in zip(c["node"].tolist(), c["comm"].tolist(), c["time_ns"].tolist(),
                           c["bytes"].tolist(), c["calls"].tolist()):
        by_node.setdefault(node, []).append(tuple(part))
    records = []
    for i in range(1, len(nodes)):
        if not is_mpi[i]:
            records.append((paths[i], "", "", time[i], nbytes[i], entries[i]))
            continue
        left = [time[i], nbytes[i], visits[i]]
        for comm, ns, b, calls in by_node.get(i, ()):
            records.append((paths[i][:-1], comm, names[i], ns, b, calls))
            left = [left[0] - ns, left[1] - b, left[2] - calls]
        records.append((paths[i][:-1], "", names[i], *left))
    rows = pd.DataFrame.from_records(records, columns=KEY + VALUES)
    rows = rows[(rows[VALUES] != 0).any(axis=1)]
    return rows.groupby(KEY, sort=False, as_index=False)[VALUES].sum()


def diff(base: ProfileFrames, new: ProfileFrames) -> Diff:
    """Every (path, comm, op) of either profile, sorted by impact: the absolute change in time,
    then in bytes, then in calls (largest first), then by path."""
    a, b = path_rows(base), path_rows(new)
    rows = a.merge(b, on=KEY, how="outer", suffixes=("_base", "_new"))
    out = rows[KEY].copy()
    for v in VALUES:
        out[f"base_{v}"] = rows[f"{v}_base"].fillna(0).astype("int64")
        out[f"new_{v}"] = rows[f"{v}_new"].fillna(0).astype("int64")
        out[f"delta_{v}"] = out[f"new_{v}"] - out[f"base_{v}"]
    out["time_pct"] = [_pct(x, y) for x, y in zip(out["base_time_ns"], out["new_time_ns"])]
    return Diff(str(base.profile.path), str(new.profile.path), _by_impact(out), _totals(out))


def _by_impact(rows: pd.DataFrame) -> pd.DataFrame:
    order = pd.DataFrame({f"k{i}": -rows[f"delta_{v}"].abs() for i, v in enumerate(VALUES)})
    order["path"] = [SEPARATOR.join(p) for p in rows["path"]]
    order["comm"], order["op"] = rows["comm"], rows["op"]
    ordered = order.sort_values(["k0", "k1", "k2", "path", "comm", "op"]).index
    return rows.loc[ordered].reset_index(drop=True)


def _totals(rows: pd.DataFrame) -> dict[str, Any]:
    total: dict[str, Any] = {}
    for v in VALUES:
        total[f"base_{v}"] = int(rows[f"base_{v}"].sum())
        total[f"new_{v}"] = int(rows[f"new_{v}"].sum())
        total[f"delta_{v}"] = total[f"new_{v}"] - total[f"base_{v}"]
    total["time_pct"] = _pct(total["base_time_ns"], total["new_time_ns"])
    return total


def _pct(base: int, new: int) -> Optional[float]:
    """The change in %, None for a path only NEW has (no base to compare with)."""
    if base == 0:
        return 0.0 if new == 0 else None
    return (new - base) * 100.0 / base


def regressions(d: Diff, fail_above: float, floor: float = DEFAULT_FLOOR) -> list[str]:
    """What regressed by more than fail_above % in time: the total, and every path whose time
    in BASE or NEW is at least floor % of BASE's total time (a path new in NEW counts as an
    unbounded regression).  One line each, the total first, then by impact."""
    t = d.total
    found = [_regression("total", t["base_time_ns"], t["new_time_ns"], t["time_pct"])
             ] if t["delta_time_ns"] > 0 and _above(t["time_pct"], fail_above) else []
    least = floor / 100.0 * t["base_time_ns"]
    for r in d.rows.itertuples():
        if max(r.base_time_ns, r.new_time_ns) < least or r.delta_time_ns <= 0:
            continue
        if _above(r.time_pct, fail_above):
            found.append(_regression(_label(r.path, r.comm, r.op) + ":", r.base_time_ns,
                                     r.new_time_ns, r.time_pct))
    return found


def _above(pct: Optional[float], fail_above: float) -> bool:
    """A growth above fail_above %; None (or NaN): grown from 0, above any."""
    pct = _finite(pct)
    return pct is None or pct > fail_above


def _regression(what: str, base: int, new: int, pct: Optional[float]) -> str:
    pct = _finite(pct)
    change = "new" if pct is None else f"{pct:+.1f}%"
    return f"{what} time {_seconds(base)} -> {_seconds(new)} ({change})"


def _label(path: tuple[str, ...], comm: str, op: str) -> str:
    text = SEPARATOR.join(path) or "(root)"
    if op:
        text += f" > {op}" + (f" on {comm}" if comm else "")
    return text


def _seconds(ns: float) -> str:
    return f"{ns / 1e9:.6f} s"


# ---- output ------------------------------------------------------------------------------------

def _plain_rows(d: Diff) -> list[dict[str, Any]]:
    rows = d.rows.to_dict("records")
    for r in rows:
        r["time_pct"] = _finite(r["time_pct"])
    return rows


def _finite(value: Any) -> Optional[float]:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def write_csv(d: Diff, out: TextIO) -> None:
    """One line per row; path's frames joined by ' > '; time_pct empty for a new path."""
    rows = d.rows.copy()
    rows["path"] = [SEPARATOR.join(p) for p in rows["path"]]
    rows["time_pct"] = [None if x is None else round(x, 6) for x in map(_finite, rows["time_pct"])]
    rows.to_csv(out, index=False, lineterminator="\n")


def write_json(d: Diff, out: TextIO, found: Optional[list[str]] = None) -> None:
    """{"base", "new", "total", "rows": [...], "regressions": [...] (with --fail-above)};
    path a list of frame names, time_pct null for a new path."""
    rows = _plain_rows(d)
    for r in rows:
        r["path"] = list(r["path"])
    doc: dict[str, Any] = {"base": d.base, "new": d.new, "total": d.total, "rows": rows}
    if found is not None:
        doc["regressions"] = found
    json.dump(doc, out, indent=1)
    out.write("\n")


def write_table(d: Diff, out: TextIO, top: int = DEFAULT_TOP) -> None:
    """The rows of most impact as a rich table, the totals last."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    # (Text: frame names such as "[not unwound]" are not rich markup)
    table = Table(title=Text(f"pathscope diff: {d.base} -> {d.new}"), title_justify="left")
    for name in ("call path", "comm", "op"):
        table.add_column(name, overflow="fold")
    for name in ("base time", "new time", "Δ time", "Δ time %", "Δ bytes", "Δ calls"):
        table.add_column(name, justify="right", no_wrap=True)
    for r in d.rows.head(top).itertuples():
        table.add_row(Text(SEPARATOR.join(r.path)), Text(r.comm), Text(r.op),
                      *_cells(r._asdict()))
    table.add_section()
    table.add_row("total", "", "", *_cells(d.total), style="bold")
    # a terminal's own width; a pipe or file gets 160 columns, not rich's 80
    console = Console(file=out, width=None if out.isatty() else 160, highlight=False)
    console.print(table)
    shown = min(top, len(d.rows))
    console.print(Text(f"{shown} of {len(d.rows)} rows by impact (--top N shows more; --csv and "
                  f"--json write them all)"))


def _cells(r: dict[str, Any]) -> list[str]:
    delta = r["delta_time_ns"]
    colour = "red" if delta > 0 else "green" if delta < 0 else ""
    pct = _finite(r["time_pct"])
    return [_seconds(r["base_time_ns"]), _seconds(r["new_time_ns"]),
            _styled(f"{delta / 1e9:+.6f} s", colour),
            _styled("new" if pct is None else f"{pct:+.1f}%", colour),
            f"{r['delta_bytes']:+d}", f"{r['delta_calls']:+d}"]


def _styled(text: str, colour: str) -> str:
    return f"[{colour}]{text}[/]" if colour else text
