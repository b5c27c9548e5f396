"""The call paths of one rank file (docs/format.md, "Call paths (format 2.0)"): the sampler
and unwind settings, the modules, and per thread its calling context tree (CCT).

    rank_paths = profile.callpaths[0]
    thread = rank_paths.threads[0]
    thread.nodes[0].kind == "root"; thread.nodes[5].parent == 3

Rules this module keeps (the reader-side duties of the contract):
- Node ids are dense per thread, node 0 is the root, a parent's id is smaller than its
  child's; a node names a module listed in the file; a `pcomm` line names an `mpi` node;
  a `node` or `pcomm` line names a thread that has a `thread` line.  Anything else is a
  ProfileError naming file and line.  A node's off-CPU time (format 2.4) is part of its
  sampled time: offcpu_ns <= sample_ns; files older than 2.4 have neither offcpu_ns nor the
  thread's cpu_ns (read as 0; RankCallPaths.knows_offcpu() tells them apart).
- In a file cut short (no `end` line) the tree is kept up to the first node that breaks a rule
  (a missing id, an unknown parent): what was written before the cut is still data.
- Metrics stay as written: exclusive, per node.  Merging across threads and ranks is
  pathscope.calltree's job; names are pathscope.symbols'.
Nothing here prints or exits.
"""
from __future__ import annotations

import re

from dataclasses import dataclass, field
from typing import Callable, Optional

from pathscope.errors import ProfileError
from pathscope.tsv import Record, version_at_least

ROOT = "root"
CALL = "call"
FN = "fn"
PC = "pc"
MPI = "mpi"
FAILED = "failed"
NOT_UNWOUND = "not_unwound"
HEAP = "heap"                       # an allocator function (malloc, calloc, ...): a leaf
SYSCALL = "syscall"                 # a system call or libc function (kernel time): a leaf
KERNEL_UNATTRIBUTED = "kernel_unattributed"  # (reader only) kernel time no call path got
OFFCPU_FORMAT = (2, 4)              # node offcpu_ns and thread cpu_ns (docs/format.md)
CODE_KINDS = (CALL, FN, PC)          # nodes with a module and an address
PSEUDO_KINDS = (FAILED, NOT_UNWOUND)  # the pseudo frames, children of the root


# Modules whose threads are the MPI library's own (progress, PMIx, event loops): the report's
# call tree leaves them out by default (their time is mostly waiting in poll/epoll_wait).
MAX_DEPTH = 1024              # levels below the root (the runtime keeps at most 256 frames)
MAX_ID = (1 << 32) - 1        # thread indices, node ids, module ids, tids
_HEX = re.compile(r"^(0[xX])?[0-9a-fA-F]{1,16}$")

RUNTIME_MODULES = re.compile(r"^(libmpi|libopen-pal|libopen-rte|libpmix|libpmi|libmpich|"
                             r"libevent|libucs|libucp|libuct|libfabric|libpsm|libhwloc|mca_|"
                             r"libprrte|libprte|libhcoll|libxpmem)")

@dataclass
class Module:
    id: int
    path: str                     # as mapped; `[vdso]` for the vDSO
    build_id: str                 # hex, or "" when the file has none


@dataclass
class PathComm:
    """One communicator's share of an `mpi` node (a `pcomm` line)."""
    comm: str
    calls: int
    time_ns: int
    bytes: int


@dataclass
class HeapStats:
    """The heap metrics of one node (an `hnode` line): blocks allocated on this path, and
    how many of them were freed (by any thread)."""
    allocs: int
    alloc_bytes: int
    frees: int
    freed_bytes: int
    peak_bytes: int               # of its blocks, live at the rank's peak

    @property
    def leaked_bytes(self) -> int:
        return self.alloc_bytes - self.freed_bytes

    @property
    def leaked_blocks(self) -> int:
        return self.allocs - self.frees


@dataclass
class HeapPoint:
    time_ns: int                  # since recording started in the process
    live_bytes: int
    max_bytes: int                # the most live bytes since the previous point


@dataclass
class HeapSummary:
    """A rank's `heap` line and its timeline (`hpoint` lines)."""
    traversal: str
    allocs: int
    alloc_bytes: int
    frees: int
    freed_bytes: int
    peak_bytes: int
    peak_ns: int
    live_bytes: int               # at the end: leaked
    untracked_allocs: int
    untracked_frees: int
    foreign_frees: int
    timeline: list[HeapPoint] = field(default_factory=list)


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


@dataclass
class Walks:
    """A thread's stack walks (a `walks` line)."""
    walks: int
    reused: int
    checks: int                   # repeated as a full walk
    agree: int                    # ... with the same result


@dataclass
class Node:
    id: int
    parent: Optional[int]         # None for the root
    kind: str                     # root | call | fn | pc | mpi | failed | not_unwound | newer
    module: Optional[int]         # module id (code kinds), or None
    address: Optional[int]        # ELF virtual address (code kinds), or None
    op: str                       # mpi: the operation name; a newer kind: its address field
    visits: int
    sample_ns: int
    samples: int
    mpi_ns: int
    bytes: int
    comms: list[PathComm] = field(default_factory=list)
    heap: Optional[HeapStats] = None
    entries: int = 0              # call nodes, thunk mode: calls made here, a lower bound (2.1)
    kernel_ns: int = 0            # syscall nodes: time in the call (visits: calls) (2.2)
    offcpu_ns: int = 0            # the part of sample_ns the thread was off the CPU (2.4)

    @property
    def time_ns(self) -> int:
        """The node's exclusive time: sampled time plus measured MPI time."""
        return self.sample_ns + self.mpi_ns

    @property
    def oncpu_ns(self) -> int:
        """The part of sample_ns the thread was running (all of it before format 2.4)."""
        return self.sample_ns - self.offcpu_ns


@dataclass
class Thread:
    index: int                    # 0 = the main thread, then in order of registration
    tid: int
    elapsed_ns: int
    samples_kept: int
    samples_in_mpi: int
    samples_other: int            # dropped inside pathscope itself or while the tree was full
    unwind_failures: int
    node_count: int               # as declared on the `thread` line
    nodes: list[Node] = field(default_factory=list)   # by id: nodes[0] is the root
    start_module: Optional[int] = None   # module id of the function pthread_create started
    start_address: Optional[int] = None  # (None for the main thread and format 2.0 files
                                         # written before these fields existed)
    walks: Optional[Walks] = None        # format 2.1
    cpu_ns: int = 0               # CPU time (user + system) from registration to the end,
                                  # exact; 0 when unknown or written before format 2.4

    def runtime_thread(self, modules: "dict[int, Module]") -> bool:
        """True for a thread the MPI library or its runtime started (progress threads of
        Open MPI, PMIx, libevent, UCX, ...): its start function is in one of their modules."""
        module = modules.get(self.start_module) if self.start_module is not None else None
        return module is not None and bool(RUNTIME_MODULES.search(module.path.rsplit("/", 1)[-1]))

    def tree_time_ns(self) -> int:
        return sum(n.time_ns for n in self.nodes)

    def time_balance_ns(self) -> int:
        """elapsed_ns minus the time in the tree: within ±len(nodes) ns for a correct thread
        (each node's weight may be rounded by 1 ns, docs/format.md)."""
        return self.elapsed_ns - self.tree_time_ns()


@dataclass
class Sampler:
    source: str                   # auto | perf-task-clock | posix-cpu-timer | posix-wall-timer | off
    rate_hz: int
    clock: str                    # cpu | wall
    # (2.4) timer signals taken from each kind of timer, and timer changes of threads (auto)
    by_perf: int = 0
    by_posix: int = 0
    by_wall: int = 0
    changes: int = 0
    # (2.5) where off-CPU time comes from: "samples" (wall minus CPU time at each kept sample)
    # or "scheduler" (the kernel collector's reports, --kernel); reports placed, inside MPI
    offcpu_from: str = "samples"
    offcpu_reports: int = 0
    offcpu_in_mpi: int = 0


@dataclass
class RankCallPaths:
    rank: int
    sampler: Optional[Sampler]
    unwind: dict[str, str]        # MPI function group -> path | count
    modules: dict[int, Module]
    threads: dict[int, Thread]    # by thread index, sorted
    # mode, check every N-th walk, the mode asked for when refused ("" if none) (format 2.1)
    traversal: Optional[tuple[str, int, str]] = None
    heap: Optional[HeapSummary] = None            # PATHSCOPE_HEAP=on (format 2.1)
    kernel: Optional[KernelSummary] = None        # PATHSCOPE_KERNEL (format 2.2)
    version: str = ""             # the rank file's format version (set by the reader)

    def knows_offcpu(self) -> bool:
        """True from format 2.4: sample_ns is split into on-CPU and off-CPU time (before,
        off-CPU time is somewhere in sample_ns, on no particular path)."""
        return version_at_least(self.version, *OFFCPU_FORMAT)

    def has_paths(self) -> bool:
        """True when something was unwound: a node outside `[not unwound]` besides the root.
        A run with the sampler off and every group counted has none."""
        for thread in self.threads.values():
            inside = {n.id for n in thread.nodes if n.kind == NOT_UNWOUND}
            for node in thread.nodes[1:]:
                if node.parent in inside:
                    inside.add(node.id)
                elif node.id not in inside:
                    return True
        return False


class CallPathParser:
    """Collects the call-path lines of one rank file; finish() checks and links them."""

    def __init__(self, name: str):
        self.name = name
        self.sampler: Optional[Sampler] = None
        self.unwind: dict[str, str] = {}
        self.modules: dict[int, Module] = {}
        self.threads: dict[int, Thread] = {}
        self.nodes: dict[int, dict[int, tuple[Node, str]]] = {}   # thread -> id -> node, where
        self.pcomms: list[tuple[int, int, PathComm, str]] = []
        self.hnodes: list[tuple[int, int, HeapStats, str]] = []
        self.walks: list[tuple[int, Walks, str]] = []
        self.traversal: Optional[tuple[str, int, str]] = None
        self.heap: Optional[HeapSummary] = None
        self.points: list[HeapPoint] = []
        self.kernel: Optional[KernelSummary] = None
        self.kernel_lines: list[Record] = []

    def handlers(self) -> dict[str, Callable[[Record], None]]:
        return {"sampler": self._sampler, "unwind": self._unwind, "module": self._module,
                "thread": self._thread, "node": self._node, "pcomm": self._pcomm,
                "traversal": self._traversal, "walks": self._walks, "heap": self._heap,
                "hnode": self._hnode, "hpoint": self._hpoint, "kernel": self._kernel,
                "ksys": self._kline, "kthread": self._kline, "kos": self._kline,
                "kend": self._kline}

    def _kernel(self, r: Record) -> None:
        r.need(7)
        self.kernel = KernelSummary(r.text(0), r.number(1), r.text(2), r.number(3), r.number(4),
                                    r.number(5), "" if r.text(6) == "-" else r.text(6))

    def _kline(self, r: Record) -> None:
        self.kernel_lines.append(r)

    def _finish_kernel(self) -> None:
        k = self.kernel
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

    def _traversal(self, r: Record) -> None:
        r.need(2)
        requested = r.text(2) if len(r.fields) > 2 and r.fields[2] != "-" else ""
        self.traversal = (r.text(0), r.number(1), requested)

    def _walks(self, r: Record) -> None:
        r.need(5)
        self.walks.append((r.number(0, MAX_ID), Walks(*(r.number(i) for i in range(1, 5))), r.where))

    def _heap(self, r: Record) -> None:
        r.need(11)
        self.heap = HeapSummary(r.text(0), *(r.number(i) for i in range(1, 11)))

    def _hnode(self, r: Record) -> None:
        r.need(7)
        self.hnodes.append((r.number(0, MAX_ID), r.number(1, MAX_ID),
                            HeapStats(*(r.number(i) for i in range(2, 7))), r.where))

    def _hpoint(self, r: Record) -> None:
        r.need(3)
        self.points.append(HeapPoint(r.number(0), r.number(1), r.number(2)))

    def _sampler(self, r: Record) -> None:
        r.need(3)
        counts = [r.number(i) if len(r.fields) > i else 0 for i in range(3, 7)]
        offcpu = [r.text(7) if len(r.fields) > 7 else "samples",
                  *(r.number(i) if len(r.fields) > i else 0 for i in (8, 9))]
        self.sampler = Sampler(r.text(0), r.number(1), r.text(2), *counts, *offcpu)

    def _unwind(self, r: Record) -> None:
        r.need(2)
        self.unwind[r.text(0)] = r.text(1)

    def _module(self, r: Record) -> None:
        r.need(3)
        module_id = r.number(0, MAX_ID)
        if module_id in self.modules:
            raise ProfileError(f"{r.where}: module {module_id} listed twice")
        build_id = r.text(2)
        self.modules[module_id] = Module(module_id, r.text(1), "" if build_id == "-" else build_id)

    def _thread(self, r: Record) -> None:
        r.need(8)
        index = r.number(0, MAX_ID)
        if index in self.threads:
            raise ProfileError(f"{r.where}: thread {index} listed twice")
        n = r.number
        thread = Thread(index, n(1, MAX_ID), n(2), n(3), n(4), n(5), n(6), n(7))
        if len(r.fields) >= 10 and r.fields[8] != "-":
            thread.start_module = n(8, MAX_ID)
            if not _HEX.match(r.fields[9]):
                raise ProfileError(f"{r.where}: 'thread' line: field 11 '{r.fields[9][:40]}' "
                                   f"is not a hexadecimal address")
            thread.start_address = int(r.fields[9], 16)
        if len(r.fields) > 11:
            thread.cpu_ns = n(11)
        self.threads[index] = thread

    def _node(self, r: Record) -> None:
        r.need(11)
        thread, node_id, kind = r.number(0, MAX_ID), r.number(1, MAX_ID), r.text(3)
        parent = r.optional_number(2, MAX_ID)
        module = r.optional_number(4, MAX_ID)
        address: Optional[int] = None
        op = ""
        if kind in CODE_KINDS:
            address = r.hex_number(5)
        elif kind not in (ROOT,) + PSEUDO_KINDS:
            op = r.text(5)          # mpi: the operation; a kind from a newer minor version
        node = Node(node_id, parent, kind, module, address, op, r.number(6), r.number(7),
                    r.number(8), r.number(9), r.number(10))
        if len(r.fields) > 11:
            node.entries = r.number(11)
        if len(r.fields) > 12:
            node.kernel_ns = r.number(12)
        if len(r.fields) > 13:
            node.offcpu_ns = r.number(13)
            if node.offcpu_ns > node.sample_ns:
                raise ProfileError(f"{r.where}: 'node' line: field 15 '{node.offcpu_ns}' "
                                   f"(offcpu_ns) is larger than sample_ns (field 9, "
                                   f"{node.sample_ns})")
        nodes = self.nodes.setdefault(thread, {})
        if node_id in nodes:
            raise ProfileError(f"{r.where}: node {node_id} of thread {thread} listed twice")
        nodes[node_id] = (node, r.where)

    def _pcomm(self, r: Record) -> None:
        r.need(6)
        self.pcomms.append((r.number(0, MAX_ID), r.number(1, MAX_ID),
                            PathComm(r.text(2), r.number(3), r.number(4), r.number(5)),
                            r.where))

    def finish(self, rank: int, complete: bool) -> RankCallPaths:
        """Links and checks the lines read.  complete: the file has its `end` line (otherwise
        a tree is cut at the first node that breaks a rule instead of raising)."""
        for thread_index, nodes in sorted(self.nodes.items()):
            if thread_index not in self.threads:
                node, where = min(nodes.values(), key=lambda nw: nw[0].id)
                raise ProfileError(f"{where}: node {node.id} of thread {thread_index}, which "
                                   f"has no 'thread' line")
        for thread_index, nodes in sorted(self.nodes.items()):
            self.threads[thread_index].nodes = self._link(thread_index, nodes, complete)
        for thread_index, node_id, path_comm, where in self.pcomms:
            node = self._named_node("pcomm", thread_index, node_id, where, complete)
            if node is None:
                continue
            if node.kind != MPI:
                raise ProfileError(f"{where}: 'pcomm' line names node {node_id} of thread "
                                   f"{thread_index}, a '{node.kind}' node (expected 'mpi')")
            node.comms.append(path_comm)
        for thread_index, node_id, stats, where in self.hnodes:
            node = self._named_node("hnode", thread_index, node_id, where, complete)
            if node is not None:
                node.heap = stats
        for thread_index, walks, where in self.walks:
            if thread_index not in self.threads:
                raise ProfileError(f"{where}: 'walks' line names thread {thread_index}, which "
                                   f"has no 'thread' line")
            self.threads[thread_index].walks = walks
        if self.heap is not None:
            self.heap.timeline = self.points
        self._finish_kernel()
        return RankCallPaths(rank, self.sampler, self.unwind, self.modules,
                             dict(sorted(self.threads.items())), self.traversal, self.heap,
                             self.kernel)

    def _named_node(self, line: str, thread_index: int, node_id: int, where: str,
                    complete: bool) -> Optional[Node]:
        """The node a `pcomm` or `hnode` line names; None when a file cut short lost it."""
        thread = self.threads.get(thread_index)
        if thread is None or node_id >= len(thread.nodes):
            if not complete:
                return None
            raise ProfileError(f"{where}: '{line}' line names node {node_id} of thread "
                               f"{thread_index}, which does not exist")
        return thread.nodes[node_id]

    def _link(self, thread_index: int, nodes: dict[int, tuple[Node, str]],
              complete: bool) -> list[Node]:
        linked: list[Node] = []
        depth: list[int] = []
        for node_id in range(len(nodes)):
            if node_id not in nodes:
                if not complete:
                    break
                raise ProfileError(f"{self.name}: thread {thread_index}: node ids are not dense "
                                   f"(no node {node_id}, highest id {max(nodes)})")
            node, where = nodes[node_id]
            problem = self._problem(node)
            level = depth[node.parent] + 1 if node.parent is not None and not problem else 0
            if level > MAX_DEPTH:
                problem = f"deeper than {MAX_DEPTH} levels"
            if problem:
                if not complete:
                    break
                raise ProfileError(f"{where}: node {node.id} of thread {thread_index}: {problem}")
            linked.append(node)
            depth.append(level)
        return linked

    def _problem(self, node: Node) -> Optional[str]:
        if node.id == 0:
            if node.kind != ROOT or node.parent is not None:
                return "node 0 must be the root (kind 'root', parent '-')"
        elif node.kind == ROOT:
            return "only node 0 may be the root"
        elif node.parent is None:
            return "only node 0 may have no parent"
        elif node.parent >= node.id:
            return f"parent {node.parent} is not smaller than the node's id"
        if node.module is not None and node.module not in self.modules:
            return f"unknown module id {node.module}"
        return None
