"""The report's section on probed functions (profiles recorded with PATHSCOPE_PROBE or
changed by `pathscope probe`; format 2.6).

- Per function, largest inclusive time first: its calls and times over all ranks and
  threads, then one row per call path: calls, inclusive, share of the function's inclusive
  time, exclusive and CPU time, the inclusive time's per-rank min / mean / max with their
  ranks, and the path (frames below `main`, the call site's line last).  With several paths,
  how much the largest takes over the smallest (two call sites of one wait, one 20 times the
  other, must not hide in a total).
- Recursion: a nested call's row is marked `(nested)` and has no share; the function's
  inclusive and CPU totals count only outermost calls (pathscope.sources.probe).
- What went wrong, only when it did: calls whose exit was lost, untimed calls, exits by an
  exception, calls open at the end; refusals with their reason; the `probes` line's counters
  (traps in patch windows, the longest window, exits lost, calls passed through).
- One line on hardware counters (this runtime links no PAPI).
- A tree merged in the job (tree.tsv only): per probe its paths with their sums and per-rank
  statistics, and the `probes.*` scalars; nested calls are not told apart (no function
  sizes in tree.tsv), refusals and per-rank counters are not there.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence

import pandas as pd

from pathscope import ranges
from pathscope.calltree import MergedNode
from pathscope.metrics import COLUMNS
from pathscope.reader import Profile
from pathscope.report.calltree import STATS_HEADERS, stats_cells
from pathscope.report.heap import path_label, scalar_rows
from pathscope.report.layout import INDENT, plural, table
from pathscope.sources.probe import (ProbedFunction, ProbePath, ProbeSummary, call_site,
                                     grouped_refusals, probed_functions)
from pathscope.symbols import SymbolTable
from pathscope.units import format_percent, format_time

if TYPE_CHECKING:
    from pathscope.frames import ProfileFrames

PROBE_TIME = "probe_time"     # a probed call's inclusive time (its metric's name)
CALLS, INCL, EXCL, CPU = (COLUMNS[name] for name in (
    "probe_calls", PROBE_TIME, "probe_self_time", "probe_cpu_time"))
PROBLEMS = (("probe_lost_exits", "exit{} lost"), ("probe_untimed_calls", "untimed call{}"),
            ("probe_exception_exits", "exit{} by an exception"),
            ("probe_open_calls", "call{} open at the end"))
NO_PAPI = "hardware counters: none (no PAPI in this build)"


def sections(frames: "ProfileFrames") -> list[str]:
    """The section of the tables' call tree with every thread (the MPI library's too)."""
    frames = frames.all_threads()
    profile, symbols = frames.profile, frames.symbols
    if profile.reduced_only():
        return _reduced_probes(frames)
    summaries = {r: p.probes for r, p in sorted(profile.callpaths.items())
                 if p.probes is not None}
    if not summaries:
        return []
    # a rank file cut short may keep its probe lines but lose its tree
    tree = frames.tree if profile.has_call_paths() else None
    functions = probed_functions(profile, tree)
    functions.sort(key=lambda f: (-f.total(INCL, True), -f.total(CALLS), f.info.name))
    cpu = any(s.measures_cpu for s in summaries.values())
    metrics = ", ".join(sorted({s.metrics for s in summaries.values()}))
    lines = [f"Probed functions ({plural(len(functions), 'function')} on "
             f"{plural(len(summaries), 'rank')}; metrics: {metrics})"]
    for function in functions:
        lines += _function(function, frames if tree is not None else None, cpu,
                           len(summaries))
    lines += _refusals(profile)
    lines += _counters(summaries)
    lines.append(f"{INDENT}{_hardware(summaries)}")
    return ["\n".join(lines)]


def _time_or_dash(ns: int, known: bool) -> str:
    return format_time(ns) if known else "-"


def _function(function: ProbedFunction, frames: Optional["ProfileFrames"], cpu: bool,
              probed_ranks: int) -> list[str]:
    """frames: the tables of the call tree (None: the profile has none)."""
    info = function.info
    where = _basename(info.module) + (f", {_basename(info.file)}:{info.line}" if info.file
                                      else "")
    if len(function.ranks) < probed_ranks:      # `pathscope probe` reached some ranks only
        where += f"; {_ranks(function.ranks)} only"
    calls, outer = function.total(CALLS), sum(p.node.total(CALLS) for p in function.outermost())
    state = f"{info.state}, " if info.state != "active" else ""
    if frames is None or not calls:
        return [f"{INDENT}{info.name} ({where}): {state}"
                + ("never called" if frames is not None else "no call paths in the rank files")]
    symbols = frames.symbols
    incl = function.total(INCL, True)
    head = (f"{INDENT}{info.name} ({where}): {_counted(calls, 'call{}')}"
            + (f" ({outer:,} outermost)" if outer != calls else "")
            + f", {format_time(incl)} inclusive, {format_time(function.total(EXCL))} exclusive"
            + (f", {format_time(function.total(CPU, True))} CPU" if cpu else "")
            + (f"; {info.state}" if info.state != "active" else ""))
    paths = sorted(function.paths, key=lambda p: (p.nested, -p.node.total(INCL),
                                                  _label(p, symbols)))
    outermost_nodes = [frames.node_id(p.node) for p in function.outermost()]
    stats = _path_stats(frames, paths, [outermost_nodes])
    rows = [_path_row(p, s, symbols, incl, cpu) for p, s in zip(paths, stats)]
    lines = [head, table(["calls", "inclusive", "share", "exclusive", "CPU", *STATS_HEADERS,
                          "path"], rows, "rrrrrrrrl", INDENT * 2)]
    outermost = [p.node.total(INCL) for p in paths if not p.nested]
    if len(outermost) > 1:
        ratio = (f"the largest takes {outermost[0] / outermost[-1]:.1f}× the inclusive time "
                 f"of the smallest; " if outermost[-1] else "")
        low, mean, high = stats_cells(stats[-1])
        lines.append(f"{INDENT * 2}{len(outermost)} call paths: {ratio}all of them per rank: "
                     f"min {low}, mean {mean}, max {high}")
    counts = [(sum(p.node.total(COLUMNS[m]) for p in paths), what) for m, what in PROBLEMS]
    problems = [_counted(n, what) for n, what in counts if n]
    if problems:
        lines.append(f"{INDENT * 2}{', '.join(problems)}")
    return lines


def _label(path: ProbePath, symbols: SymbolTable) -> str:
    """The caller's path below main, the call site's line last: two call sites of one
    caller are two rows that must be told apart."""
    parent: Optional[MergedNode] = path.node.parent
    label = path_label(parent, symbols) if parent is not None else ""
    site = call_site(path.node, symbols)
    return label + (f":{site[1]}" if site else "") + (" (nested)" if path.nested else "")


def _path_stats(frames: "ProfileFrames", paths: list[ProbePath],
                more: Sequence[Sequence[int]] = ()) -> list[Any]:
    """Each path's inclusive time over the ranks, then those of the per-rank sums over the
    groups of nodes more (ProfileFrames.group_stats)."""
    groups = [[frames.node_id(p.node)] for p in paths] + list(more)
    return list(frames.group_stats(PROBE_TIME, groups).itertuples())


def _path_row(path: ProbePath, stats: Any, symbols: SymbolTable, function_incl: int,
              cpu: bool) -> list[str]:
    """stats: the path's inclusive time over the ranks (_path_stats)."""
    node = path.node
    incl = node.total(INCL)
    share = ("-" if path.nested or not function_incl else format_percent(incl / function_incl))
    return [f"{node.total(CALLS):,}", format_time(incl), share, format_time(node.total(EXCL)),
            _time_or_dash(node.total(CPU), cpu), *stats_cells(stats), _label(path, symbols)]


def _reduced_probes(frames: "ProfileFrames") -> list[str]:
    """A tree merged in the job: per probe of tree.tsv its call paths with their sums and
    per-rank statistics, and the `probes.*` scalars (no refusals, no per-rank counters)."""
    profile, symbols, tree = frames.profile, frames.symbols, frames.tree
    data = profile.tree
    assert data is not None
    if not data.probes:
        return []
    functions = probed_functions(profile, tree)
    functions.sort(key=lambda f: (-f.total(INCL, True), -f.total(CALLS), f.info.name))
    lines = [f"Probed functions ({plural(len(functions), 'function')}, merged in the job over "
             f"{plural(data.ranks, 'rank')}; tree.tsv keeps no function sizes: recursion is "
             f"not told apart)"]
    for function in functions:
        info = function.info
        where = _basename(info.module) + (f", {_basename(info.file)}:{info.line}"
                                          if info.file else "")
        incl = function.total(INCL, True)
        if not function.paths:
            lines.append(f"{INDENT}{info.name} ({where}): never called")
            continue
        lines.append(f"{INDENT}{info.name} ({where}): "
                     f"{_counted(function.total(CALLS), 'call{}')}, {format_time(incl)} "
                     f"inclusive, {format_time(function.total(EXCL))} exclusive")
        paths = sorted(function.paths, key=lambda p: (p.nested, -p.node.total(INCL),
                                                      _label(p, symbols)))
        rows = [_path_row(p, s, symbols, incl, False)
                for p, s in zip(paths, _path_stats(frames, paths))]
        rows = [row[:4] + row[5:] for row in rows]       # no CPU column: not kept
        lines.append(table(["calls", "inclusive", "share", "exclusive", *STATS_HEADERS,
                            "path"], rows, "rrrrrrrl", INDENT * 2))
    rows = scalar_rows(data.scalars, "probes.")
    if rows:
        lines.append(table(["", "total", *STATS_HEADERS], rows, "lrrrr", INDENT))
    return ["\n".join(lines)]


def _refusals(profile: Profile) -> list[str]:
    lines = []
    for refusal, ranks in grouped_refusals(profile):
        where = _basename(refusal.module)
        if refusal.address is not None:
            where += f" at 0x{refusal.address:x}"
        lines.append(f"{INDENT}refused '{refusal.spec}'{f' ({where.strip()})' if where else ''}"
                     f": {refusal.reason}: {refusal.text} "
                     f"({'rank' if len(ranks) == 1 else 'ranks'} {ranges.compress(ranks)})")
    return lines


def _counters(summaries: dict[int, ProbeSummary]) -> list[str]:
    lines = []
    untimed = {r: s.exit_timing for r, s in summaries.items() if not s.timed}
    for why in sorted(set(untimed.values())):
        ranks = [r for r, w in untimed.items() if w == why]
        lines.append(f"{INDENT}exits not timed on {_ranks(ranks)} ({why}): calls are counted "
                     f"per path, without times")
    counts = []
    # the ranks' counters as a table (by rank): sums, and the longest window with its rank
    # (idxmax: the first, the lowest rank, on ties)
    counters = pd.DataFrame([(r, s.traps, s.longest_window_ns, s.exits_lost, s.passed_through)
                             for r, s in sorted(summaries.items())],
                            columns=["rank", "traps", "longest", "exits_lost", "passed"]
                            ).set_index("rank")
    totals = counters.sum()
    if totals["traps"]:
        counts.append(_counted(int(totals["traps"]), "trap{} in patch windows"))
    longest_rank = int(counters["longest"].idxmax())
    longest = int(counters.loc[longest_rank, "longest"])
    if longest:
        counts.append(f"longest patch window {format_time(longest)} (rank {longest_rank})")
    for what, value in (("exit{} lost", int(totals["exits_lost"])),
                        ("call{} passed through (made inside pathscope or by a thread it does "
                         "not know)", int(totals["passed"]))):
        if value:
            counts.append(_counted(value, what))
    if counts:
        lines.append(f"{INDENT}{'; '.join(counts)}")
    return lines


def _counted(count: int, what: str) -> str:
    """`1 exit lost`, `2 exits lost`: what has `{}` where the plural's s goes."""
    return f"{count:,} {what.format('' if count == 1 else 's')}"


def _basename(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _ranks(ranks: list[int]) -> str:
    return f"{'rank' if len(ranks) == 1 else 'ranks'} {ranges.compress(ranks)}"


def _hardware(summaries: dict[int, ProbeSummary]) -> str:
    named = sorted({s.hardware_counters for s in summaries.values() if s.hardware_counters})
    return f"hardware counters: {', '.join(named)}" if named else NO_PAPI
