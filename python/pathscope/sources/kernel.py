"""Kernel time (PATHSCOPE_KERNEL, format 2.2): a rank's `kernel` line and its tables (`ksys`,
`kthread`, `kos`, `kend` lines), docs/format.md.  The time itself is on `syscall` nodes, with
(2.12) the estimated part of each in its `knode` line.

    kernel = profile.callpaths[0].kernel          # KernelSummary, or None without --kernel
    kernel.total_ns(); kernel.complete
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional

from pathscope.cct import KERNEL_UNATTRIBUTED, MAX_ID, SYSCALL, RankCallPaths, named_node
from pathscope.errors import ProfileError
from pathscope.sources.base import CALL_PATHS, Metric, Section, Source, Table, TableSpec
from pathscope.tsv import Record
from pathscope.units import seconds

KSYS_CALLS, KSYS_NS = "ksys.calls.", "ksys.ns."   # tree.tsv's scalars of one system call

if TYPE_CHECKING:
    from pathscope.calltree import MergedNode
    from pathscope.frames import ProfileFrames
    from pathscope.reader import Profile
    from pathscope.treefile import ReducedTree


@dataclass
class KernelSyscall:
    """One thread's exact total for one system call (or libc function): a `ksys` line."""
    tid: int
    name: str
    count: int
    time_ns: int


@dataclass
class KernelThread:
    """A thread's scheduling as the eBPF collector saw it (a `kthread` line)."""
    tid: int
    blocked_ns: int               # off the CPU, waiting (sleep, I/O, futex)
    runqueue_ns: int              # off the CPU while runnable (preempted)
    switches: int
    page_faults: int              # user-mode page faults


@dataclass
class ThreadOS:
    """What the OS reports of a thread (a `kos` line: getrusage or /proc)."""
    tid: int
    user_ns: int
    system_ns: int
    minor_faults: int
    major_faults: int
    voluntary_switches: int
    involuntary_switches: int


@dataclass
class KernelSummary:
    """A rank's kernel time (PATHSCOPE_KERNEL): the `kernel` line and its tables."""
    source: str                   # ebpf | libc
    period_ns: int
    paths: str                    # signals | none (eBPF without call paths) | wrappers
    attributions: int             # times calls were put on a call path
    lost_attributions: int        # ... that could not be (the thread was inside pathscope)
    own_calls: int                # reports of pathscope's own system calls (on no path)
    note: str                     # why eBPF paths or eBPF itself were not used, or ""
    syscalls: list[KernelSyscall] = field(default_factory=list)
    threads: list[KernelThread] = field(default_factory=list)
    os: list[ThreadOS] = field(default_factory=list)
    missed_exits: Optional[int] = None   # None: the collector's snapshot did not arrive
    dropped: Optional[int] = None

    @property
    def complete(self) -> bool:
        return self.missed_exits is not None

    def total_ns(self) -> int:
        return sum(s.time_ns for s in self.syscalls)

    def total_count(self) -> int:
        return sum(s.count for s in self.syscalls)


class KernelParser:
    """The kernel lines of one rank file; the tables are read in finish(), once the `kernel`
    line they belong to is known wherever it stands."""

    def __init__(self, name: str, world: int):
        self.kernel: Optional[KernelSummary] = None
        self.kernel_lines: list[Record] = []
        self.knodes: list[Record] = []

    def handlers(self) -> dict[str, Callable[[Record], None]]:
        return {"kernel": self._kernel, "ksys": self._kline, "kthread": self._kline,
                "kos": self._kline, "kend": self._kline, "knode": self._knode}

    def _knode(self, r: Record) -> None:
        r.need(4)
        r.number(0, MAX_ID), r.number(1, MAX_ID), r.number(2), r.number(3)
        self.knodes.append(r)

    def _put_estimates(self, rank_paths: RankCallPaths, complete: bool) -> None:
        """Each `knode` line on its node: a `syscall` node, named once, its estimated part
        at most its calls and time."""
        named: set[tuple[int, int]] = set()
        for r in self.knodes:
            thread, node_id, calls, ns = (r.number(i) for i in range(4))   # (checked)
            node = named_node(rank_paths, "knode", thread, node_id, r.where, complete)
            if node is None:
                continue
            if node.kind != SYSCALL:
                raise ProfileError(f"{r.where}: 'knode' line names node {node_id} of thread "
                                   f"{thread}, a '{node.kind}' node, not a 'syscall' node")
            if (thread, node_id) in named:
                raise ProfileError(f"{r.where}: node {node_id} of thread {thread} has two "
                                   f"'knode' lines")
            named.add((thread, node_id))
            if calls > node.visits or ns > node.kernel_ns:
                raise ProfileError(f"{r.where}: 'knode' line: {calls} calls and {ns} ns "
                                   f"estimated of node {node_id}'s {node.visits} calls and "
                                   f"{node.kernel_ns} ns")
            node.syscalls_est, node.kernel_ns_est = calls, ns

    def _kernel(self, r: Record) -> None:
        r.need(7)
        self.kernel = KernelSummary(r.text(0), r.number(1), r.text(2), r.number(3), r.number(4),
                                    r.number(5), "" if r.text(6) == "-" else r.text(6))

    def _kline(self, r: Record) -> None:
        self.kernel_lines.append(r)

    def finish(self, rank_paths: RankCallPaths, complete: bool) -> Optional[KernelSummary]:
        k = self.kernel
        self._put_estimates(rank_paths, complete)
        for r in self.kernel_lines:
            if k is None:
                raise ProfileError(f"{r.where}: '{r.kind}' line without a 'kernel' line")
            if r.kind == "ksys":
                r.need(4)
                k.syscalls.append(KernelSyscall(r.number(0), r.text(1), r.number(2), r.number(3)))
            elif r.kind == "kthread":
                r.need(5)
                k.threads.append(KernelThread(*(r.number(i) for i in range(5))))
            elif r.kind == "kos":
                r.need(7)
                k.os.append(ThreadOS(*(r.number(i) for i in range(7))))
            elif r.kind == "kend":
                r.need(2)
                if r.text(0) != "-":
                    k.missed_exits, k.dropped = r.number(0), r.number(1)
        return k


# ---- export tables ----------------------------------------------------------------------------

KERNEL_SYSCALLS_COLUMNS = ["rank", "tid", "thread", "source", "syscall", "count", "time_s"]
KERNEL_THREADS_COLUMNS = ["rank", "tid", "thread", "source", "syscalls", "syscall_time_s",
                          "user_s", "system_s", "minor_faults", "major_faults",
                          "voluntary_switches", "involuntary_switches", "blocked_s",
                          "runqueue_s", "switches", "user_page_faults"]


def _kernel_ranks(profile: "Profile"):
    for rank, paths in sorted(profile.callpaths.items()):
        if paths.kernel is not None:
            yield rank, paths.kernel, {t.tid: i for i, t in paths.threads.items()}


def kernel_syscalls_table(profile: "Profile") -> Table:
    """Kernel time, STaKTAU's table: one row per rank, thread and system call (exact counts
    and times)."""
    rows = []
    for rank, k, index in _kernel_ranks(profile):
        for s in sorted(k.syscalls, key=lambda s: (s.tid, -s.time_ns, s.name)):
            rows.append({"rank": rank, "tid": s.tid, "thread": index.get(s.tid),
                         "source": k.source, "syscall": s.name, "count": s.count,
                         "time_s": seconds(s.time_ns)})
    return Table(KERNEL_SYSCALLS_COLUMNS, rows)


def kernel_threads_table(profile: "Profile") -> Table:
    """Kernel time: one row per rank and thread: system calls, the OS's CPU times and
    faults, and (eBPF) the time off the CPU (blocked and in the run queue)."""
    rows = []
    for rank, k, index in _kernel_ranks(profile):
        tids = sorted({s.tid for s in k.syscalls} | {t.tid for t in k.threads} |
                      {o.tid for o in k.os})
        sched = {t.tid: t for t in k.threads}
        osv = {o.tid: o for o in k.os}
        for tid in tids:
            calls = [s for s in k.syscalls if s.tid == tid]
            t, o = sched.get(tid), osv.get(tid)
            rows.append({
                "rank": rank, "tid": tid, "thread": index.get(tid), "source": k.source,
                "syscalls": sum(s.count for s in calls),
                "syscall_time_s": seconds(sum(s.time_ns for s in calls)),
                "user_s": seconds(o.user_ns) if o else None,
                "system_s": seconds(o.system_ns) if o else None,
                "minor_faults": o.minor_faults if o else None,
                "major_faults": o.major_faults if o else None,
                "voluntary_switches": o.voluntary_switches if o else None,
                "involuntary_switches": o.involuntary_switches if o else None,
                "blocked_s": seconds(t.blocked_ns) if t else None,
                "runqueue_s": seconds(t.runqueue_ns) if t else None,
                "switches": t.switches if t else None,
                "user_page_faults": t.page_faults if t else None})
    return Table(KERNEL_THREADS_COLUMNS, rows)


TABLES = (
    TableSpec("kernel-syscalls", "", KERNEL_SYSCALLS_COLUMNS, kernel_syscalls_table, 60),
    TableSpec("kernel-threads", "", KERNEL_THREADS_COLUMNS, kernel_threads_table, 61),
)

ESTIMATE_FORMAT = (2, 12)     # `knode` lines: the estimated part of syscall nodes
_ESTIMATED = dict(needs_format=ESTIMATE_FORMAT,
                  needs_what="mark the estimated part of system calls on call paths")

METRICS = (
    # kernel time (KernelSummary): calls of a system call (or libc function), time in it
    Metric("syscalls", "kernel", "count", field="visits", kind=SYSCALL, column=11),
    Metric("kernel_ns", "kernel", "ns", field="kernel_ns", kind=SYSCALL, column=12),
    # (2.12) the part of them that is estimated: what no report carried, spread over the
    # paths the thread's reports of that system call reached (docs/format.md)
    Metric("syscalls_estimated", "kernel", "count", field="syscalls_est", kind=SYSCALL,
           column=22),
    Metric("kernel_ns_estimated", "kernel", "ns", field="kernel_ns_est", kind=SYSCALL,
           column=23),
    # kernel time (--kernel): the system call (or libc function) innermost, below the path
    # that made it; `[kernel: no call path]` holds what no path got (totals = the tables)
    Metric("syscall_count", "kernel", "count", formula=lambda v: v("syscalls"),
           exports=(CALL_PATHS,), order=130),
    Metric("syscall_time", "kernel", "ns", formula=lambda v: v("kernel_ns"),
           exports=(CALL_PATHS,), order=140),
    Metric("syscall_count_estimated", "kernel", "count",
           formula=lambda v: v("syscalls_estimated"), exports=(CALL_PATHS,), order=135,
           **_ESTIMATED),
    Metric("syscall_time_estimated", "kernel", "ns", formula=lambda v: v("kernel_ns_estimated"),
           exports=(CALL_PATHS,), order=145, **_ESTIMATED),
)


# ---- call tree ---------------------------------------------------------------------------------

def add_residue(root: "MergedNode", rank: int, paths: RankCallPaths,
                thread: Optional[int]) -> None:
    """The kernel time no call path got (threads pathscope never registered; system calls no
    report of a thread reached a path for; eBPF reports that reached none; before format 2.12
    also the end of each thread's period, which the runtime now spreads over the reported
    paths): per system call below the pseudo frame `[kernel: no call path]`, so that the
    tree's totals equal the exact tables."""
    if paths.kernel is None:
        return
    from pathscope.calltree import METRIC_COUNT   # the analysis imports the sources
    from pathscope.metrics import COLUMNS
    from pathscope.symbols import Frame
    by_tid = {cct.tid: index for index, cct in paths.threads.items()}
    attributed: dict[tuple[int, str], list[int]] = {}
    for cct in paths.threads.values():
        for node in cct.nodes:
            if node.kind == SYSCALL:
                into = attributed.setdefault((cct.tid, node.op), [0, 0])
                into[0] += node.visits
                into[1] += node.kernel_ns
    for entry in paths.kernel.syscalls:
        index = by_tid.get(entry.tid)
        if thread is not None and index != thread:
            continue
        done = attributed.get((entry.tid, entry.name), [0, 0])
        count, ns = entry.count - done[0], entry.time_ns - done[1]
        if count <= 0 and ns <= 0:
            continue
        leaf = root.child(Frame(KERNEL_UNATTRIBUTED)).child(Frame(SYSCALL, name=entry.name))
        values = leaf.by_rank.setdefault(rank, [0] * METRIC_COUNT)
        values[COLUMNS["syscalls"]] += max(count, 0)
        values[COLUMNS["kernel_ns"]] += max(ns, 0)


def add_reduced_residue(root: "MergedNode", tree: "ReducedTree") -> None:
    """add_residue for a tree reduced in the job: per system call, the `ksys.calls.NAME` and
    `ksys.ns.NAME` scalars minus the sums of its `syscall` nodes (both roots).  The residue's
    statistics are the scalar's when no node of that name holds any, else its sum alone (a
    per-rank difference: pathscope.stats)."""
    from pathscope.stats import Stats
    from pathscope.symbols import Frame
    attributed: dict[str, list[int]] = {}
    for node in tree.nodes:
        if node.kind == SYSCALL:
            into = attributed.setdefault(node.name, [0, 0])
            for i, column in enumerate(("syscalls", "kernel_ns")):
                value = node.stats.get(column)
                into[i] += value.sum if value is not None else 0
    for scalar, calls in tree.scalars.items():
        if not scalar.startswith(KSYS_CALLS):
            continue
        name = scalar[len(KSYS_CALLS):]
        done = attributed.get(name, [0, 0])
        values = (calls, tree.scalars.get(KSYS_NS + name) or Stats.zero(tree.ranks))
        residue = [v.sum - d for v, d in zip(values, done)]
        if all(r <= 0 for r in residue):
            continue
        leaf = root.child(Frame(KERNEL_UNATTRIBUTED)).child(Frame(SYSCALL, name=name))
        for column, value, left, d in zip(("syscalls", "kernel_ns"), values, residue, done):
            leaf.stats[column] = value if not d else Stats(max(left, 0), tree.ranks)


# ---- report ------------------------------------------------------------------------------------

def report_sections(frames: "ProfileFrames") -> list[str]:
    """The report's kernel-time section ([] without --kernel)."""
    from pathscope.report import kernel as kernel_report   # the analysis imports the sources
    return kernel_report.sections(frames)


SOURCE = Source("kernel", KernelParser, metrics=METRICS, tables=TABLES,
                sections=(Section(50, report_sections),), tree_hook=add_residue,
                reduced_hook=add_reduced_residue,
                node_kinds=(SYSCALL,))
