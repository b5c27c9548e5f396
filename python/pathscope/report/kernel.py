"""The kernel-time section of the text report (profiles recorded with PATHSCOPE_KERNEL).

- The source of the numbers, said first: the node's eBPF collector (every system call) or
  the libc wrappers in the process (interposed functions only), and why eBPF was not used.
- Per rank: calls and time in system calls, the threads' system CPU time as the OS reports
  it, and from eBPF the time off the CPU (blocked, waiting in the run queue) and user page
  faults.
- The top paths by time in system calls, the call ending in the system call's name.
- Per thread (STaKTAU's view): its top system calls by time, count and time.

Display choices (docs/user-guide.md says the same): paths as in the heap section (frames
below `main`, the innermost few); per thread the TOP_SYSCALLS largest by time; a thread is
named `rank R tid T` (and its thread index when pathscope registered it).  A tree merged in
the job (tree.tsv only) has no per-rank or per-thread tables: one row per system call over
the run (the `ksys.*` scalars) with its time's per-rank min/mean/max, and the top paths.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from pathscope.cct import SYSCALL
from pathscope.reader import Profile
from pathscope.report.heap import path_label
from pathscope.report.layout import INDENT, TOP_PATHS, table
from pathscope.report.calltree import STATS_HEADERS, stats_cells
from pathscope.sources.kernel import KSYS_CALLS, KSYS_NS, KernelSummary
from pathscope.stats import Stats
from pathscope.units import format_percent, format_time

if TYPE_CHECKING:
    from pathscope.frames import ProfileFrames

TOP_SYSCALLS = 8
ESTIMATED = ("estimated: the calls after a thread's last report of a system call, spread over "
             "the paths its reports reached in proportion (each path off by less than one period "
             "of the thread's time in that call)")
SOURCES = {"ebpf": "eBPF collector: every system call of every thread",
           "libc": "libc wrappers in the process: interposed I/O and synchronisation calls only "
                   "(calls the C library makes internally are not seen)"}


def sections(frames: "ProfileFrames") -> list[str]:
    """The kernel section of the tables' call tree with every thread (the MPI library's
    too)."""
    profile = frames.profile
    if profile.reduced_only():
        return _reduced_kernel(frames.all_threads())
    kernels = {r: p.kernel for r, p in sorted(profile.callpaths.items()) if p.kernel is not None}
    if not kernels:
        return []
    lines = ["Kernel time (system calls by thread and call path)"]
    for source in sorted({k.source for k in kernels.values()}):
        ranks = [r for r, k in kernels.items() if k.source == source]
        lines.append(f"{INDENT}source: {SOURCES.get(source, source)} ({_ranks(ranks)})")
        notes = sorted({k.note for k in kernels.values() if k.source == source and k.note})
        lines += [f"{INDENT}  {'eBPF not used' if source == 'libc' else 'note'}: {n}"
                  for n in notes]
        if source == "ebpf" and any(k.paths == "none" for k in kernels.values()):
            lines.append(f"{INDENT}  no call paths: every call is under [kernel: no call path]")
    missing = [r for r, k in kernels.items() if not k.complete]
    if missing:
        lines.append(f"{INDENT}the collector's tables did not arrive for {_ranks(missing)}: "
                     f"only the attributed calls are shown for them")
    # the collector's counters are node-wide (all processes it served): the largest, not a sum
    dropped = max((k.dropped or 0 for k in kernels.values()), default=0)
    if dropped:
        lines.append(f"{INDENT}events lost by a node's collector (maps full; counted for every "
                     f"process it served, possibly including other runs): up to {dropped:,}")
    lines.append(_rank_table(kernels))
    # a rank file cut short may keep its kernel lines but lose its tree
    lost = sum(k.lost_attributions for k in kernels.values())
    period = sorted({k.period_ns for k in kernels.values()})
    how = ("every call attributed" if period == [0] else
           f"attributed once per {', '.join(format_time(p) for p in period)} of a thread's "
           f"time in a call") + (f"; {lost:,} attributions lost inside pathscope" if lost else "")
    lines += _top_paths(frames.all_threads() if profile.has_call_paths() else None, how)
    lines.append(_thread_tables(profile, kernels))
    return ["\n".join(lines)]


def _top_paths(frames: Optional["ProfileFrames"], how: str) -> list[str]:
    """The system-call leaves of the `nodes` table (values summed over the ranks) by time
    in system calls, largest first (frames None: no call paths)."""
    if frames is None:
        return []
    nodes = frames.nodes
    leaves = nodes[(nodes["kind"] == SYSCALL) & (nodes["kernel_ns"] > 0)].sort_values(
        "kernel_ns", ascending=False, kind="stable")
    if leaves.empty:
        return []
    total = int(leaves["kernel_ns"].sum())
    shown = leaves.head(TOP_PATHS)
    rows = [[format_time(ns), format_percent(ns / total), f"{calls:,}", _estimated(est),
             path_label(frames.merged_node(i), frames.symbols)]
            for i, ns, calls, est in zip(shown["node"], shown["kernel_ns"], shown["syscalls"],
                                         shown["syscalls_estimated"])]
    lines = [f"\n{INDENT}Top paths by time in system calls ({len(shown)} "
             f"of {len(leaves)}; {how})",
             table(["time", "%", "calls", "estimated", "path"], rows, "rrrrl", INDENT * 2)]
    if int(leaves["syscalls_estimated"].sum()):
        lines.append(f"{INDENT * 2}{ESTIMATED}")
    return lines


def _estimated(calls: int) -> str:
    """The estimated part of a path's calls (format 2.12), `-` when all were reported."""
    return f"{calls:,}" if calls else "-"


def _reduced_kernel(frames: "ProfileFrames") -> list[str]:
    """A tree merged in the job: per system call its calls and time over all threads (the
    `ksys.*` scalars) with the time's per-rank min, mean and max; the top paths."""
    profile = frames.profile
    assert profile.tree is not None
    scalars = profile.tree.scalars
    names = sorted(n[len(KSYS_CALLS):] for n in scalars if n.startswith(KSYS_CALLS))
    if not names:
        return []
    zero = Stats.zero(profile.tree.ranks)
    times = {n: scalars.get(KSYS_NS + n, zero) for n in names}
    rows = [[n, f"{scalars[KSYS_CALLS + n].sum:,}", format_time(times[n].sum),
             *stats_cells(times[n])] for n in sorted(names, key=lambda n: (-times[n].sum, n))]
    lines = [f"Kernel time (system calls by call path, merged in the job over "
             f"{profile.tree.ranks} ranks; time per rank: min, mean, max)",
             table(["syscall", "calls", "time", *STATS_HEADERS], rows, "lrrrrr")]
    lines += _top_paths(frames, "merged in the job")
    return ["\n".join(lines)]


def _ranks(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) != 1 else ''} {', '.join(map(str, ranks))}"


def _rank_table(kernels: dict[int, KernelSummary]) -> str:
    ebpf = any(k.threads for k in kernels.values())
    rows = []
    for rank, k in kernels.items():
        row = [str(rank), k.source, f"{k.total_count():,}", format_time(k.total_ns()),
               format_time(sum(o.system_ns for o in k.os)),
               f"{sum(o.minor_faults + o.major_faults for o in k.os):,}"]
        if ebpf:
            row += [format_time(sum(t.blocked_ns for t in k.threads)),
                    format_time(sum(t.runqueue_ns for t in k.threads))]
        rows.append(row)
    headers = ["rank", "source", "syscalls", "in syscalls", "system CPU", "page faults"]
    if ebpf:
        headers += ["blocked", "run queue"]
    return table(headers, rows, "rl" + "r" * (len(headers) - 2))


def _thread_tables(profile: Profile, kernels: dict[int, KernelSummary]) -> str:
    lines = [f"\n{INDENT}Per thread (top {TOP_SYSCALLS} system calls by time)"]
    for rank, k in kernels.items():
        index_of = {t.tid: i for i, t in profile.callpaths[rank].threads.items()}
        by_tid: dict[int, list] = {}
        for s in k.syscalls:
            by_tid.setdefault(s.tid, []).append(s)
        sched = {t.tid: t for t in k.threads}
        for tid, calls in sorted(by_tid.items(), key=lambda kv: (index_of.get(kv[0], 1 << 30), kv[0])):
            calls.sort(key=lambda s: (-s.time_ns, s.name))
            name = f"rank {rank} tid {tid}"
            if tid in index_of:
                name += f" (thread {index_of[tid]})"
            extra = ""
            if tid in sched:
                t = sched[tid]
                extra = (f"; off CPU: blocked {format_time(t.blocked_ns)}, run queue "
                         f"{format_time(t.runqueue_ns)}; {t.page_faults:,} page faults")
            total = sum(s.time_ns for s in calls)
            lines.append(f"{INDENT * 2}{name}: {sum(s.count for s in calls):,} calls, "
                         f"{format_time(total)}{extra}")
            rows = [[s.name, f"{s.count:,}", format_time(s.time_ns)] for s in calls[:TOP_SYSCALLS]]
            lines.append(table(["syscall", "count", "time"], rows, "lrr", INDENT * 3))
    return "\n".join(lines)
