"""The call paths of one rank file (docs/format.md, "Call paths (format 2.0)"): the modules,
the traversal, and per thread its calling context tree (CCT).  The lines of each measurement
source (sampler, unwind, pcomm, heap, kernel, ...) are read by its module of pathscope.sources
and kept in RankCallPaths.by_source.

    rank_paths = profile.callpaths[0]
    thread = rank_paths.threads[0]
    thread.nodes[0].kind == "root"; thread.nodes[5].parent == 3

Rules this module keeps (the reader-side duties of the contract):
- Node ids are dense per thread, node 0 is the root, a parent's id is smaller than its
  child's; a node names a module listed in the file; a `node` or `walks` line (or a source's
  line naming a node) names a thread that has a `thread` line.  Anything else is a
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
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from pathscope.errors import ProfileError
from pathscope.tsv import Record, version_at_least

if TYPE_CHECKING:     # the sources import this module (pathscope.sources)
    from pathscope.sources.base import SourceParser
    from pathscope.sources.heap import HeapStats, HeapSummary
    from pathscope.sources.kernel import KernelSummary
    from pathscope.sources.mpi import PathComm
    from pathscope.sources.probe import ProbeStats, ProbeSummary
    from pathscope.sources.sample import Sampler

ROOT = "root"
CALL = "call"
FN = "fn"
PC = "pc"
MPI = "mpi"
FAILED = "failed"
NOT_UNWOUND = "not_unwound"
HEAP = "heap"                       # an allocator function (malloc, calloc, ...): a leaf
SYSCALL = "syscall"                 # a system call or libc function (kernel time): a leaf
PROBE = "probe"                     # calls of a probed function (format 2.6): a leaf
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
    op: str                       # mpi: the operation name; a probe: the function's name
                                  # (pathscope.sources.probe); a newer kind: its address field
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
    probe: Optional[ProbeStats] = None   # probe nodes: the `pnode` line (2.6)
    syscalls_est: int = 0         # syscall nodes: the part of visits that is estimated, and
    kernel_ns_est: int = 0        # of kernel_ns: the `knode` line (2.12)

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
class RankCallPaths:
    rank: int
    modules: dict[int, Module]
    threads: dict[int, Thread]    # by thread index, sorted
    # mode, check every N-th walk, the mode asked for when refused ("" if none) (format 2.1)
    traversal: Optional[tuple[str, int, str]] = None
    # what each measurement source read of this rank, by source name (pathscope.sources):
    # "mpi" the unwind groups, "sample" its Sampler, "heap" its HeapSummary, "kernel" its
    # KernelSummary, "probe" its ProbeSummary; None when the file has none of the source's lines
    by_source: dict[str, Any] = field(default_factory=dict)
    version: str = ""             # the rank file's format version (set by the reader)

    @property
    def sampler(self) -> Optional[Sampler]:
        return self.by_source.get("sample")

    @property
    def unwind(self) -> dict[str, str]:
        """MPI function group -> path | count."""
        return self.by_source.get("mpi") or {}

    @property
    def heap(self) -> Optional[HeapSummary]:
        """PATHSCOPE_HEAP=on (format 2.1)."""
        return self.by_source.get("heap")

    @property
    def kernel(self) -> Optional[KernelSummary]:
        """PATHSCOPE_KERNEL (format 2.2)."""
        return self.by_source.get("kernel")

    @property
    def probes(self) -> Optional[ProbeSummary]:
        """Probed functions (format 2.6)."""
        return self.by_source.get("probe")

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


def named_node(rank_paths: RankCallPaths, line: str, thread_index: int, node_id: int,
               where: str, complete: bool) -> Optional[Node]:
    """The node a source's line (`pcomm`, `hnode`) names; None when a file cut short lost it."""
    thread = rank_paths.threads.get(thread_index)
    if thread is None or node_id >= len(thread.nodes):
        if not complete:
            return None
        raise ProfileError(f"{where}: '{line}' line names node {node_id} of thread "
                           f"{thread_index}, which does not exist")
    return thread.nodes[node_id]


class CallPathParser:
    """Collects the call-path lines of one rank file; finish() checks and links them.  The
    lines of a measurement source go to its parser (pathscope.sources.base), by name."""

    def __init__(self, name: str, sources: Mapping[str, SourceParser]):
        self.name = name
        self.sources = sources
        self.modules: dict[int, Module] = {}
        self.threads: dict[int, Thread] = {}
        self.nodes: dict[int, dict[int, tuple[Node, str]]] = {}   # thread -> id -> node, where
        self.walks: list[tuple[int, Walks, str]] = []
        self.traversal: Optional[tuple[str, int, str]] = None

    def handlers(self) -> dict[str, Callable[[Record], None]]:
        handlers: dict[str, Callable[[Record], None]] = {
            "module": self._module, "thread": self._thread, "node": self._node,
            "traversal": self._traversal, "walks": self._walks}
        for source, parser in self.sources.items():
            for kind, handler in parser.handlers().items():
                if kind in handlers:
                    raise ValueError(f"line kind '{kind}' of source {source} is taken twice")
                handlers[kind] = handler
        return handlers

    def _traversal(self, r: Record) -> None:
        r.need(2)
        requested = r.text(2) if len(r.fields) > 2 and r.fields[2] != "-" else ""
        self.traversal = (r.text(0), r.number(1), requested)

    def _walks(self, r: Record) -> None:
        r.need(5)
        self.walks.append((r.number(0, MAX_ID), Walks(*(r.number(i) for i in range(1, 5))), r.where))

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
        for thread_index, walks, where in self.walks:
            if thread_index not in self.threads:
                raise ProfileError(f"{where}: 'walks' line names thread {thread_index}, which "
                                   f"has no 'thread' line")
            self.threads[thread_index].walks = walks
        rank_paths = RankCallPaths(rank, self.modules, dict(sorted(self.threads.items())),
                                   self.traversal)
        for source, parser in self.sources.items():
            rank_paths.by_source[source] = parser.finish(rank_paths, complete)
        return rank_paths

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
