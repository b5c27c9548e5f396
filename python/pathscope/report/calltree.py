"""The call-path sections of the text report: the time split (Table I of Szebenyi et al.,
"Reconciling sampling and direct instrumentation"), the call tree and the hot path.

Pure formatting: takes a Profile and its SymbolTable, returns the sections; none when the
profile has no call paths.  Display choices (docs/user-guide.md says the same):
- One line per merged node (pathscope.calltree).  A code frame is named by its innermost
  function, with `[inlined into outer > ...]` when functions were inlined; the file (basename)
  and line are the call site for `call` frames and the function's own line for sampled leaves.
- A function called from several sites of one caller is one line (calltree.merge_children,
  the rules of merge_call_sites, merged level by level as the lines are shown: its sites'
  values summed, its children merged the same way), named by the function with
  its call sites' lines, heaviest first (`main (app.c:41,30,45)`); the hot path follows
  these totals.  `pathscope report --call-sites` keeps each call site a line of its own.
- The frames above `main` (`_start > __libc_start_call_main`) are one line; exports keep them.
- The tree shows the nodes with at least 1% of the total time; its footer counts the others.
- Per-rank columns: min, mean and max of the node's inclusive time over the ranks with call
  paths; a rank without the node counts as 0; on ties the lowest rank is named.  A value
  whose per-rank extremes are not known (a reduced tree's difference of two values) shows
  `-` for them.
- A tree reduced in the job (tree.tsv, `--per-rank none`) shows the same sections; the time
  split's thread and sample counts come from its scalars, and what only the rank files hold
  (the sampler, the unwinding modes, per-rank checks) is left out with one line saying so.
- Off-CPU time (format 2.4 and later; older profiles do not have the rows and columns): the
  time split divides the execution's time outside MPI into on-CPU and off-CPU rows, the tree
  and the hot path have an `off CPU` column (inclusive), and one WARNING line says when more
  than OFFCPU_WARN of the time outside MPI was off the CPU, with the remedies.
- Sampled time rests on samples: a time whose sampled part has fewer than FEW_SAMPLES
  samples gets `±N%`, its approximate relative standard error (the sampled part's
  1/sqrt(samples), scaled by that part's share of the time; measured MPI time has none).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable, Hashable, Mapping, Optional

import pandas as pd

from pathscope import ranges
from pathscope.calltree import (BYTES, ENTRIES, INCL_TIME, VISITS, CallTree, MergedNode,
                                function_key, is_mpi, merge_children)
from pathscope.cct import CODE_KINDS, FAILED, NOT_UNWOUND
from pathscope.reader import Profile
from pathscope.report.layout import INDENT, MAIN, table
from pathscope.sources.sample import describe_sampler, sampler_lines, scheduler_placed
from pathscope.symbols import Frame, SourceLine, SymbolTable
from pathscope.units import format_bytes, format_percent, format_time

if TYPE_CHECKING:
    from pathscope.frames import ProfileFrames

SHOWN_PERCENT = 1             # the tree hides nodes below this share of the total time
TOP_COMMS = 3                 # communicators listed under an MPI leaf
ABOVE_MAIN_NAMES = 3          # names of the collapsed frames above main shown in full
SITES_SHOWN = 3               # call sites of a function whose line is listed in its label
ROOT_LABEL = "[all threads]"
STEP = "  "                   # tree indentation per level
STATS_HEADERS = ["min (rank)", "mean", "max (rank)"]
FEW_SAMPLES = 100             # a sampled time on fewer samples gets its uncertainty (±N%)
OFFCPU_WARN = 0.10            # off-CPU share of the time outside MPI that earns a warning
UNCERTAINTY_NOTE = (f"±N%: the approximate relative standard error of a time that rests on "
                    f"fewer than {FEW_SAMPLES} samples (sampled time varies by about "
                    f"1/sqrt(samples); measured MPI time does not)")


def sections(frames: "ProfileFrames", call_sites: bool = False) -> list[str]:
    """The call-path sections of the tables' call tree (without the MPI library's threads),
    or [] when the profile has none.  call_sites: the tree and the hot path keep a
    function's call sites apart (by default they are one row)."""
    profile = frames.profile
    if not profile.has_call_paths():
        return []
    tree = frames.tree
    assert tree is not None and not tree.with_runtime
    symbols = frames.symbols
    view = _View(frames, None if call_sites else function_key(symbols))
    hot_path, hot_marked = _hot_path(view)
    return [_time_split(frames), _call_tree(view, symbols.notes, hot_marked), hot_path]


# ---- helpers ---------------------------------------------------------------------------------

def stats_cells(stats: Any) -> list[str]:
    """min (rank), mean, max (rank) of a row of statistics over the ranks (a row of
    ProfileFrames.group_stats or node_stats, or a tree.tsv scalar's Stats); `-` for
    extremes not known (None or <NA>)."""
    if not known(stats):
        return ["-", format_time(stats.mean), "-"]
    return [f"{format_time(stats.min or 0)} ({stats.min_rank})", format_time(stats.mean),
            f"{format_time(stats.max or 0)} ({stats.max_rank})"]


def known(stats: Any) -> bool:
    """The row of statistics has its extremes."""
    return stats.min is not None and stats.min is not pd.NA


def _optional_time(ns: int) -> str:
    return format_time(ns) if ns else "-"


def uncertainty(node: MergedNode) -> str:
    """`±N%` for an inclusive time whose sampled part rests on fewer than FEW_SAMPLES
    samples (all ranks), else "".  A time without samples (measured MPI time, the time after
    a thread's last sample) has no sampling error."""
    total = node.incl_time_ns
    sampled = total - node.incl_mpi_ns
    samples = node.incl_samples
    if not 0 < samples < FEW_SAMPLES or sampled <= 0 or total <= 0:
        return ""
    percent = round(100 * sampled / math.sqrt(samples) / total)
    return f"±{percent}%" if percent else ""


def _grouped(by_rank: Mapping[int, str]) -> str:
    """One value, or `ranks 0-1: a; ranks 2: b` when the ranks differ."""
    values = sorted(set(by_rank.values()))
    if len(values) == 1:
        return values[0]
    return "; ".join(f"ranks {ranges.compress(sorted(r for r, v in by_rank.items() if v == value))}"
                     f": {value}" for value in values)


def frames_above_main(tree: CallTree, symbols: SymbolTable) -> list[MergedNode]:
    """The frames from the root's child down to the shallowest `main`, not included."""
    level = [c for c in tree.root.children.values() if c.frame.kind not in (FAILED, NOT_UNWOUND)]
    while level:
        for node in level:
            names = symbols.names(node.frame)
            if names and names[0] == MAIN:
                above = []
                parent = node.parent
                while parent is not None and parent.parent is not None:
                    above.append(parent)
                    parent = parent.parent
                return above[::-1]
        level = [c for node in level for c in node.children.values()]
    return []


def _sites_text(sites: list[list[SourceLine]]) -> str:
    """Where a function's call sites are, heaviest first: `app.c:41`, `app.c:41,30,45`,
    `verlet.cpp:120,95,77,... 6 call sites` (a site is its innermost level; one without a
    file adds nothing; two sites on one line are shown once)."""
    shown: list[tuple[str, int]] = []
    for lines in sites:
        if lines and lines[-1].file:
            where = (os.path.basename(lines[-1].file), lines[-1].line)
            if where not in shown:
                shown.append(where)
    parts: list[str] = []
    for i, (name, line) in enumerate(shown[:SITES_SHOWN]):
        same_file = i and shown[i - 1][0] == name
        text = str(line) if line else ""
        parts.append((f",{text}" if text else "") if same_file
                     else (", " if i else "") + name + (f":{text}" if text else ""))
    text = "".join(parts)
    if len(sites) > SITES_SHOWN:
        text += f",... {len(sites)} call sites"
    return text


@dataclass
class _Row:
    """A line of the tree: one merged node, or the chain of frames above main."""
    label: str
    nodes: list[MergedNode]

    @property
    def head(self) -> MergedNode:
        return self.nodes[0]

    @property
    def incl_ns(self) -> int:
        return self.head.incl_time_ns

    @property
    def self_ns(self) -> int:
        return sum(n.time_ns for n in self.nodes)


class _View:
    """The merged tree as displayed: labels, the frames above main as one row, and with a
    function key the call sites of one function as one row (merged as they are shown)."""

    def __init__(self, frames: "ProfileFrames",
                 key: Optional[Callable[[Frame], Hashable]] = None):
        tree, symbols = frames.tree, frames.symbols
        assert tree is not None
        self.frames = frames
        self.tree = tree
        self.symbols = symbols
        self.key = key
        self.above_main = frames_above_main(tree, symbols)
        self.root = _Row(ROOT_LABEL, [tree.root])
        self.total_ns = tree.root.incl_time_ns

    def label(self, node: MergedNode) -> str:
        names = self.symbols.names(node.frame)
        if not names:
            return ROOT_LABEL
        if node.frame.kind not in CODE_KINDS:
            return names[0]
        text = names[-1]
        where = _sites_text([self.symbols.lines(site.frame) for site in node.sites or [node]])
        if where:
            text += f" ({where})"
        if len(names) > 1:
            text += f" [inlined into {' > '.join(names[:-1])}]"
        return text

    def row(self, node: MergedNode) -> _Row:
        if len(self.above_main) > 1 and node is self.above_main[0]:
            names = [n for above in self.above_main for n in self.symbols.names(above.frame)]
            if len(names) > ABOVE_MAIN_NAMES:
                names = names[:2] + ["...", names[-1]]
            return _Row(" > ".join(names), list(self.above_main))
        return _Row(self.label(node), [node])

    def children(self, row: _Row) -> list[_Row]:
        inside = {id(n) for n in row.nodes[1:]}
        sites = [site for n in row.nodes for site in n.sites or [n]]
        if self.key is None:
            below = [c for n in sites for c in n.children.values()]
        else:
            below = merge_children(sites, self.key, len(self.tree.ranks))
        rows = [self.row(c) for c in below if id(c) not in inside]
        return sorted(rows, key=lambda r: (-r.incl_ns, r.label))

    def subtree_size(self, row: _Row) -> int:
        """The call-path nodes of the row's subtree (its sites' subtrees)."""
        return sum(1 for site in row.head.sites or [row.head] for _ in site.walk())

    def percent(self, ns: int) -> str:
        return format_percent(ns / self.total_ns) if self.total_ns else "-"

    def stats(self, rows: list[_Row]) -> list[Any]:
        """Each row's inclusive time over the ranks (the per-rank sum over its call sites:
        ProfileFrames.group_stats), as rows with sum, mean, min, min_rank, max, max_rank."""
        groups = [[self.frames.node_id(site) for site in row.head.sites or [row.head]]
                  for row in rows]
        return list(self.frames.group_stats(INCL_TIME, groups).itertuples())


# ---- sections --------------------------------------------------------------------------------

def _time_split(frames: "ProfileFrames") -> str:
    """The rows of ProfileFrames.time_split, with the checks of the split."""
    profile, tree = frames.profile, frames.tree
    assert tree is not None
    split = {part: SimpleNamespace(**row)
             for part, row in frames.time_split().to_dict("index").items()}
    total = split["time"].sum
    rows = []
    for label, part, always in (
            ("Time", "time", True),
            ("  Failed unwind", "failed", True),
            ("    MPI", "failed_mpi", False),
            ("  Not unwound", "not_unwound", True),
            ("    MPI (groups counted, not unwound)", "not_unwound_mpi", False),
            ("  Execution", "execution", True),
            ("    MPI", "execution_mpi", True),
            *((("    outside MPI, on CPU", "execution_oncpu", True),
               ("    outside MPI, off CPU (run queue, blocked)", "execution_offcpu", True))
              if tree.knows_offcpu else ())):
        stats = split[part]
        if not stats.sum and not always:
            continue
        share = format_percent(stats.sum / total) if total else "-"
        rows.append([label, format_time(stats.sum), share] + stats_cells(stats))
    lines = [f"Time split (call paths of {tree.thread_count()} threads on {len(tree.ranks)} "
             f"ranks; per rank: min, mean, max)",
             table(["", "time", "%"] + STATS_HEADERS, rows, "lrrrrr")]
    if tree.runtime_threads:
        lines.append(f"  not shown  {tree.runtime_threads} threads of the MPI library's "
                     f"runtime (progress, PMIx, event loops; {format_time(tree.runtime_elapsed)} "
                     f"elapsed, mostly waiting): export --format folded includes them")
    shown = []                    # the ranks' samplers (a reduced tree keeps none)
    if tree.reduced is None:
        shown = [profile.callpaths[r].sampler for r in tree.ranks]
        lines += _rank_file_lines(profile, tree, shown)
    else:
        lines += _reduced_lines(tree)
    for who, (ns, allowed) in frames.unaccounted().items():
        if abs(ns) > allowed:
            side = "less" if ns > 0 else "more"
            lines.append(f"{INDENT}WARNING: {who}: the call tree holds {format_time(abs(ns))} "
                         f"{side} than its threads' elapsed time (allowed: 1 ns per node, "
                         f"{allowed} ns)")
    for r, index in tree.threads:
        thread = profile.callpaths[r].threads[index]
        if thread.node_count != len(thread.nodes):
            lines.append(f"{INDENT}WARNING: rank {r} thread {index}: {thread.node_count} nodes "
                         f"declared, {len(thread.nodes)} read")
    outside_mpi = total - split["mpi"].sum
    share = (split["offcpu"].sum / outside_mpi if tree.knows_offcpu and outside_mpi > 0
             else None)
    if share is not None and share > OFFCPU_WARN:
        lines.append(offcpu_warning(share, kernel=bool(scheduler_placed(shown))))
    lines.append(f"{INDENT}per rank: over the {len(tree.ranks)} ranks with call paths; a rank "
                 f"without a value counts as 0; (rank) is the lowest on ties")
    return "\n".join(lines)


def _rank_file_lines(profile: Profile, tree: CallTree, shown: list) -> list[str]:
    """The sampler, unwinding and sample counts of the rank files."""
    threads = [profile.callpaths[r].threads[t] for r, t in tree.threads]
    samplers = {}
    unwinding = {}
    for r in tree.ranks:
        paths = profile.callpaths[r]
        samplers[r] = describe_sampler(paths.sampler)
        modes: dict[str, list[str]] = {}
        for group, mode in paths.unwind.items():
            modes.setdefault(mode, []).append(group)
        unwinding[r] = "; ".join(f"{mode}: {', '.join(groups)}"
                                 for mode, groups in sorted(modes.items(), reverse=True)) or "-"
    lines = [f"{INDENT}sampler    {_grouped(samplers)}"]
    lines += sampler_lines(shown, INDENT)
    lines.append(_samples_line(sum(t.samples_kept for t in threads),
                               sum(t.samples_in_mpi for t in threads),
                               sum(t.samples_other for t in threads),
                               sum(t.unwind_failures for t in threads)))
    lines.append(f"{INDENT}unwinding  {_grouped(unwinding)}")
    return lines


def _reduced_lines(tree: CallTree) -> list[str]:
    """The sample counts of tree.tsv's scalars (summed over the ranks' threads)."""
    kept, in_mpi, other, failures = (tree.scalar(f"thread.{name}").sum for name in (
        "samples_kept", "samples_in_mpi", "samples_other", "unwind_failures"))
    return [_samples_line(kept, in_mpi, other, failures),
            f"{INDENT}reduced    the call tree was merged in the job (tree.tsv): per-rank "
            f"detail (sampler, unwinding modes, threads) is not kept"]


def _samples_line(kept: int, in_mpi: int, other: int, failures: int) -> str:
    return (f"{INDENT}samples    {kept} kept, {in_mpi} in MPI (its time is measured), "
            f"{other} other (dropped); {failures} unwind failures")


def offcpu_warning(share: float, kernel: bool = False) -> str:
    """The one line for a run that spent more than OFFCPU_WARN of its time outside MPI off
    the CPU: what it means and what to do (kernel: the run had --kernel, whose scheduler
    reports placed the time and whose tables split it)."""
    where = ("the Kernel time section splits it into blocked and run queue per thread" if kernel
             else "pathscope run --kernel places it exactly and shows the system calls")
    return (f"{INDENT}WARNING: {format_percent(share)} of the time outside MPI was off the CPU "
            f"(run queue or blocked): run no more ranks and threads than cores, pin them "
            f"(mpirun --bind-to core), look for other load on the nodes; for time blocked in "
            f"I/O, {where}")


def _comms_line(node: MergedNode) -> str:
    ranked = sorted(node.comms.items(), key=lambda kv: (-kv[1][1], kv[0]))
    parts = [f"{comm} {format_time(ns)} ({calls} calls, {format_bytes(nbytes)})"
             for comm, (calls, ns, nbytes) in ranked[:TOP_COMMS]]
    if len(ranked) > TOP_COMMS:
        parts.append(f"+{len(ranked) - TOP_COMMS} more")
    return "comms: " + ", ".join(parts)


def _call_tree(view: _View, notes: list[str], marked: bool) -> str:
    """marked: the hot path shows uncertainty marks (the note explaining them is here)."""
    offcpu = view.tree.knows_offcpu
    headers = (["time", "±", "%", "self", "MPI"] + (["off CPU"] if offcpu else [])
               + ["visits", "bytes"] + STATS_HEADERS + ["call path"])
    shown: list[tuple[_Row, int]] = []
    hidden = 0
    stack: list[tuple[_Row, int]] = [(view.root, 0)]
    while stack:
        row, depth = stack.pop()
        if depth and row.incl_ns * 100 < view.total_ns * SHOWN_PERCENT:
            hidden += view.subtree_size(row)
            continue
        shown.append((row, depth))
        for child in reversed(view.children(row)):
            stack.append((child, depth + 1))
    rows: list[list[str]] = []
    counted = False
    for (row, depth), stats in zip(shown, view.stats([row for row, _ in shown])):
        mpi = is_mpi(row.head)
        calls = row.head.total(ENTRIES)  # thunk mode: calls made at this call site, at least
        counted = counted or bool(calls)
        mark = uncertainty(row.head)
        marked = marked or bool(mark)
        rows.append([format_time(row.incl_ns), mark, view.percent(row.incl_ns),
                     _optional_time(row.self_ns), _optional_time(row.head.incl_mpi_ns)]
                    + ([_optional_time(row.head.incl_offcpu_ns)] if offcpu else [])
                    + [str(row.head.total(VISITS)) if mpi else (f">={calls}" if calls else ""),
                       format_bytes(row.head.total(BYTES)) if mpi else ""]
                    + stats_cells(stats) + [STEP * depth + row.label])
        if mpi and row.head.comms:
            rows.append([""] * (len(headers) - 1) + [STEP * (depth + 1) + _comms_line(row.head)])
    lines = [f"Call tree (inclusive time, top-down; nodes with at least {SHOWN_PERCENT}% of "
             f"the total time)"]
    lines += [f"{INDENT}note: {note}" for note in notes]
    if counted:
        lines.append(f"{INDENT}visits >=N on a call frame: calls made at that call site that a "
                     f"stack walk saw start (thunk mode; a lower bound)")
    if marked:
        lines.append(f"{INDENT}{UNCERTAINTY_NOTE}")
    lines.append(table(headers, rows, "r" * (len(headers) - 1) + "l"))
    lines.append(f"{INDENT}{hidden} node{'' if hidden == 1 else 's'} below {SHOWN_PERCENT}% of "
                 f"the total time hidden (pathscope export --format folded shows every path)")
    return "\n".join(lines)


def _hot_path(view: _View) -> tuple[str, bool]:
    """From the root, the child with the most inclusive time, down to a leaf; at the root the
    pseudo frames are passed over (they are no part of the program: see the time split).
    Also whether a row has an uncertainty mark."""
    offcpu = view.tree.knows_offcpu
    path: list[_Row] = []
    row: Optional[_Row] = view.root
    while row is not None:
        path.append(row)
        children = view.children(row)
        if row is view.root:
            children = [c for c in children if c.head.frame.kind not in (FAILED, NOT_UNWOUND)]
        row = children[0] if children else None
    rows = []
    marked = False
    for row, stats in zip(path, view.stats(path)):
        balance = (f"{(stats.max or 0) / stats.mean:.2f}" if stats.mean and known(stats)
                   else "-")
        mark = uncertainty(row.head)
        marked = marked or bool(mark)
        rows.append([format_time(row.incl_ns), mark, view.percent(row.incl_ns)]
                    + ([_optional_time(row.head.incl_offcpu_ns)] if offcpu else [])
                    + stats_cells(stats) + [balance, row.label])
    headers = (["time", "±", "%"] + (["off CPU"] if offcpu else []) + STATS_HEADERS
               + ["max/mean", "frame"])
    return "\n".join([
        "Hot path (at each level the child with the most inclusive time, from the root but not "
        "into [failed unwind] or [not unwound]; max/mean: the load imbalance)",
        table(headers, rows, "r" * (len(headers) - 1) + "l")]), marked
