"""The report's section of the rank vectors (`--per-rank summary`: tree.tsv's `rankvec` lines,
each rank's value of every column of the heaviest paths): how the heaviest paths' time, and
the MPI calls' counts and bytes, are spread over the ranks, from each rank's exact value
(never the power-of-two sketch).

Pure formatting: takes the profile's tables (pathscope.frames.ProfileFrames), returns the
section (its statistics over the ranks: pandas aggregations, distribution()); none when the
report's call tree does not come from tree.tsv or tree.tsv has no rank vectors.  Display
choices (docs/user-guide.md says the same):
- A path is named by its frames below main (pathscope.report.heap.path_label) and the file
  and line of its innermost code frame.
- Time rows: the TOP_PATHS paths with rank vectors that have the most inclusive time, below
  main (neither the root nor the frames above main: they are the whole run), but not a path
  whose time is all in one child on every rank (a call site and its call: the child says it).
  A path with time in and outside MPI gets an `MPI share` row, when some rank has at least
  SHARE_SHOWN of its time on the path in MPI: each rank's MPI time over its time on that
  path (ranks without the path left out).
- Count rows: the MPI calls with rank vectors whose visits or bytes differ between ranks, by
  MPI time, at most TOP_PATHS: their visits and bytes (uneven work handed out).
- Columns: the total over the ranks (a share: of the totals); min and max with their rank
  (the lowest on ties); median and p90 by nearest rank (the value of the ⌈q·P⌉-th rank in
  ascending order: a value some rank had); max/mean; the ranks more than SLOW_PERCENT above
  the mean; and the ranks left to right as one character each, or per group of ⌈P/SPARK_WIDTH⌉
  consecutive ranks (their largest value), ▁ to █ from 0 to the row's maximum (a share: to
  100%), blank for 0.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import numpy as np
import pandas as pd

from pathscope import ranges
from pathscope.calltree import (BYTES, INCL_MPI, INCL_TIME, VISITS, CallTree, Key,
                                MergedNode, is_mpi)
from pathscope.cct import CODE_KINDS
from pathscope.report.calltree import frames_above_main
from pathscope.report.heap import SPARK_CHARS, path_label
from pathscope.report.layout import INDENT, TOP_PATHS, plural, table
from pathscope.symbols import SymbolTable
from pathscope.units import format_bytes, format_percent, format_time

if TYPE_CHECKING:
    from pathscope.frames import ProfileFrames

SLOW_PERCENT = 10             # a rank more than this above the mean is listed
SHARE_SHOWN = 0.01            # the MPI share row of a path where some rank has this much
SPARK_WIDTH = 64              # characters of the ranks column at most
RANKS_SHOWN = 24              # characters of the list of slow ranks at most
HEADERS = ["value", "total", "min (rank)", "median", "p90", "max (rank)", "max/mean",
           f">mean+{SLOW_PERCENT}%", "ranks", "call path"]


def sections(frames: "ProfileFrames") -> list[str]:
    """The section, or [] when the profile has no rank vectors."""
    profile, symbols = frames.profile, frames.symbols
    if not profile.reduced_only() or profile.tree is None or not profile.tree.rank_vectors:
        return []
    tree = frames.tree
    assert tree is not None
    above = {id(n) for n in frames_above_main(tree, symbols)}
    kept = [n for n in tree.root.walk() if n.parent is not None and id(n) not in above
            and tree.vector(n, INCL_TIME) is not None and not _one_child(tree, n)]
    if not kept:                    # only the root and the frames above main
        return []
    ranks = len(tree.ranks)
    lines = [f"Ranks of the heaviest paths (--per-rank summary: each rank's value, "
             f"{plural(len(profile.tree.rank_vectors), 'path')})",
             f"{INDENT}median, p90: the value of the rank at that place in ascending order; "
             f">mean+{SLOW_PERCENT}%: the ranks more than {SLOW_PERCENT}% above the mean",
             f"{INDENT}ranks: {_ranks_note(ranks)}; ▁ to █: from 0 to the row's max (a share: "
             f"to 100%), blank: 0"]
    heaviest = sorted(kept, key=lambda n: (-n.incl_time_ns, _label(n, symbols)))[:TOP_PATHS]
    lines.append(f"{INDENT}Time: the {plural(len(heaviest), 'path')} with the most inclusive "
                 f"time below main")
    lines.append(table(HEADERS, _cells([row for n in heaviest
                                        for row in _time_rows(tree, n, symbols)]), "lrrrrrrlll"))
    uneven = sorted((n for n in kept if is_mpi(n) and _uneven(tree, n)),
                    key=lambda n: (-n.incl_mpi_ns, _label(n, symbols)))
    if uneven:
        shown = uneven[:TOP_PATHS]
        lines.append(f"{INDENT}MPI calls whose visits or bytes differ between ranks "
                     f"({len(shown)} of {len(uneven)}, by MPI time)")
        lines.append(table(HEADERS, _cells([row for n in shown
                                            for row in _count_rows(tree, n, symbols)]),
                           "lrrrrrrlll"))
    return ["\n".join(lines)]


def _ranks_note(ranks: int) -> str:
    group = -(-ranks // SPARK_WIDTH)
    each = "one character each" if group == 1 else (f"one character per {group} ranks "
                                                     f"(their largest value)")
    return f"ranks {ranges.compress(range(ranks))} left to right, {each}"


def _one_child(tree: CallTree, node: MergedNode) -> bool:
    """True when one child has all of node's time on every rank (a call site's frame and
    the call it makes): the child's row says the same, and where."""
    time = tree.vector(node, INCL_TIME)
    return any(tree.vector(child, INCL_TIME) == time for child in node.children.values())


def _label(node: MergedNode, symbols: SymbolTable) -> str:
    """The path's frames below main (pathscope.report.heap.path_label), then the file and
    line of its innermost code frame (a call site, or a sampled function's own line)."""
    label = path_label(node, symbols)
    code = [frame for frame in node.path() if frame.kind in CODE_KINDS]
    lines = symbols.lines(code[-1]) if code else []
    if not lines or not lines[-1].file:
        return label
    where = os.path.basename(lines[-1].file)
    return label + (f" ({where}:{lines[-1].line})" if lines[-1].line else f" ({where})")


def _vector(tree: CallTree, node: MergedNode, key: Key) -> list[int]:
    values = tree.vector(node, key)
    assert values is not None       # the rows are of nodes with rank vectors
    return values


def _uneven(tree: CallTree, node: MergedNode) -> bool:
    return any(len(set(_vector(tree, node, key))) > 1 for key in (VISITS, BYTES))


@dataclass
class _Values:
    """A row to show: each rank's value (a share: of the ranks in it only)."""
    name: str
    values: dict[int, float]      # rank -> value
    show: Callable[[float], str]
    label: str
    share: Optional[float] = None  # a share row: its total (of the sums), else None
    top: float = 0                # a share row: its sparkline's full height


def _time_rows(tree: CallTree, node: MergedNode, symbols: SymbolTable) -> list[_Values]:
    label = _label(node, symbols)
    time = _vector(tree, node, INCL_TIME)
    rows = [_Values("time", dict(enumerate(time)), format_time, label)]
    mpi = _vector(tree, node, INCL_MPI)
    # each rank's MPI time over its time on the path (ranks without time on it left out);
    # shown when not all of it is in MPI, nor almost none of it
    shares = {r: m / t for r, (t, m) in enumerate(zip(time, mpi)) if t}
    if shares and max(shares.values()) >= SHARE_SHOWN and min(shares.values()) < 1:
        rows.append(_Values("MPI share", shares, format_percent, "", sum(mpi) / sum(time),
                            len(time)))
    return rows


def _count_rows(tree: CallTree, node: MergedNode, symbols: SymbolTable) -> list[_Values]:
    rows = [_Values("visits", dict(enumerate(_vector(tree, node, VISITS))),
                    lambda v: f"{v:,.0f}", _label(node, symbols))]
    nbytes = _vector(tree, node, BYTES)
    if any(nbytes):
        rows.append(_Values("bytes", dict(enumerate(nbytes)),
                            lambda v: format_bytes(round(v)), ""))
    return rows


def distribution(values: pd.DataFrame) -> dict[int, dict[str, Any]]:
    """Per row of the long form values (row, rank, value; a row's ranks are its population):
    total, count, min and max with their ranks (the lowest on ties), median and p90 by
    nearest rank (the value of the ⌈q·n⌉-th of the n values in ascending order).  The rows
    numbered by a pandas groupby, sorted by value then rank, and aggregated per row by
    numpy's segment reductions (as frames.group_arrays: pandas' own took most of the
    report's time on the demo)."""
    grouped = values.groupby("row", sort=True)
    group = grouped.ngroup().to_numpy(dtype=np.int64)
    rank = values["rank"].to_numpy()
    value = values["value"].to_numpy()
    by_value = np.lexsort((rank, value, group))
    by_value_down = np.lexsort((rank, -value, group))
    starts = np.flatnonzero(np.diff(group[by_value], prepend=-1))
    count = np.diff(np.append(starts, len(group)))
    low, high = by_value[starts], by_value_down[starts]
    out = {"total": np.add.reduceat(value[by_value], starts), "count": count,
           "min": value[low], "min_rank": rank[low], "max": value[high], "max_rank": rank[high]}
    for name, percent in (("median", 50), ("p90", 90)):
        out[name] = value[by_value[starts + np.maximum(0, -(-percent * count // 100) - 1)]]
    return {int(r): {c: v[i].item() for c, v in out.items()}
            for i, r in enumerate(grouped.size().index)}


def _cells(rows: list[_Values]) -> list[list[str]]:
    """The table's cells of the rows, their statistics over the ranks from distribution()."""
    if not rows:
        return []
    # counts and times (int64) apart from shares (float64)
    stats = {}
    for counts in (True, False):
        long = pd.DataFrame([(i, r, v) for i, row in enumerate(rows)
                             if (row.share is None) == counts for r, v in row.values.items()],
                            columns=["row", "rank", "value"])
        if not long.empty:
            stats.update(distribution(long))
    out = []
    for i, row in enumerate(rows):
        d = stats[i]
        show = row.show
        low = f"{show(d['min'])} ({int(d['min_rank'])})"
        high = f"{show(d['max'])} ({int(d['max_rank'])})"
        if row.share is not None:
            cells = [round(row.values[r] * 1_000_000) if r in row.values else 0
                     for r in range(int(row.top))]
            out.append([row.name, format_percent(row.share), low, show(d["median"]),
                        show(d["p90"]), high, "", "", _sparkline(cells, 1_000_000), ""])
            continue
        values = [int(row.values[r]) for r in range(len(row.values))]
        total, top = int(d["total"]), int(d["max"])
        slow = [r for r, v in enumerate(values)
                if v * 100 * len(values) > total * (100 + SLOW_PERCENT)]
        out.append([row.name, show(total), low, show(d["median"]), show(d["p90"]), high,
                    f"{top * len(values) / total:.2f}" if total else "-", _ranks_cell(slow),
                    _sparkline(values, top), row.label])
    return out


def _ranks_cell(ranks: list[int]) -> str:
    """`3: 5-7`; a long list cut at RANKS_SHOWN characters."""
    if not ranks:
        return "-"
    text = ranges.compress(ranks)
    if len(text) > RANKS_SHOWN:
        cut = text.rfind(",", 0, RANKS_SHOWN)
        text = text[:cut if cut > 0 else RANKS_SHOWN] + ",..."
    return f"{len(ranks)}: {text}"


def _sparkline(values: Sequence[int], top: int) -> str:
    """One character per rank, or per group of consecutive ranks (their largest value): the
    eighths of top, (0, top/8] as ▁ up to (7·top/8, top] as █; blank for 0."""
    group = -(-len(values) // SPARK_WIDTH)
    out = []
    for start in range(0, len(values), group):
        value = min(top, max(values[start:start + group]))
        out.append(SPARK_CHARS[(value * len(SPARK_CHARS) - 1) // top] if value > 0 else " ")
    return "".join(out)
