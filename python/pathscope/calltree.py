"""The call paths of a run merged into one tree, and the time split of Scalasca's hybrid
profiles (Szebenyi et al., Table I: Time = Failed unwind + Not unwound + Execution, with MPI
inside Execution).

    tree = build_tree(profile)                   # every thread of every rank
    tree = build_tree(profile, rank=1, thread=0)  # one world rank, one thread index
    node.incl_time[r], tree.stats(node.incl_time)

Rules kept here:
- Threads merge by the sequence of frame identities from the root (pathscope.symbols.Frame),
  never by names: two call sites of one function stay two nodes.
- A merged node keeps its exclusive metrics per rank (summed over the rank's threads), so
  every value has a sum and per-rank min/mean/max with the ranks at min and max; a rank
  without the node counts as 0; on ties the lowest rank is named.
- Time is sample_ns + mpi_ns; inclusive = the node plus its subtree.  Off-CPU time is part
  of sample_ns (format 2.4): on-CPU time = sample_ns - offcpu_ns.
Nothing here prints or exits.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce
from operator import attrgetter
from typing import Callable, Iterator, Mapping, Optional, Sequence

from pathscope import ranges
from pathscope.cct import FAILED, MPI, NOT_UNWOUND, Node
from pathscope.errors import ProfileError
from pathscope.merge import RULES
from pathscope.metrics import COLUMN_COUNT, COLUMNS, METRICS, STORED
from pathscope.reader import Profile
from pathscope.sources import SOURCES
from pathscope.symbols import ROOT_FRAME, Frame, frame_of

# the stored metrics' columns in MergedNode.by_rank, by name (pathscope.metrics)
VISITS, SAMPLE_NS, SAMPLES, MPI_NS, BYTES = (COLUMNS[name] for name in (
    "visits", "sample_ns", "samples", "mpi_ns", "bytes"))
ALLOCS, ALLOC_BYTES, FREES, FREED_BYTES, PEAK_BYTES = (COLUMNS[name] for name in (
    "allocs", "alloc_bytes", "frees", "freed_bytes", "peak_bytes"))
ENTRIES, SYSCALLS, KERNEL_NS, OFFCPU_NS = (COLUMNS[name] for name in (
    "entries", "syscalls", "kernel_ns", "offcpu_ns"))
METRIC_COUNT = COLUMN_COUNT
# [(a part of a CCT node, None: the node itself; [(by_rank column, the value's getter)])]
_Readers = list[tuple[Optional[str], list[tuple[int, Callable[[object], int]]]]]


def _node_readers() -> tuple[dict[str, _Readers], _Readers]:
    """What a CCT node feeds into by_rank: the stored metrics of its kind when some are
    read only from that kind (metrics.Metric.kind), else every metric without a kind,
    grouped by the part of the node they read (a node without the part adds nothing)."""
    by_kind: dict[str, dict[Optional[str], list[tuple[int, Callable[[object], int]]]]] = {}
    for m in STORED:
        part, _, name = (m.field or "").rpartition(".")
        by_kind.setdefault(m.kind or "", {}).setdefault(part or None, []).append(
            (m.column or 0, attrgetter(name)))
    readers = {kind: list(parts.items()) for kind, parts in by_kind.items()}
    return readers, readers.pop("", [])


_READ_BY_KIND, _READ_OTHER_KINDS = _node_readers()


def no_call_paths_message(profile: Profile) -> str:
    return (f"no call-path data in {profile.path} (profile format 1.x or sampling and "
            f"unwinding were off)")


@dataclass
class MergedNode:
    frame: Frame
    parent: Optional["MergedNode"]
    children: dict[Frame, "MergedNode"] = field(default_factory=dict)
    by_rank: dict[int, list[int]] = field(default_factory=dict)   # rank -> exclusive metrics
    comms: dict[str, list[int]] = field(default_factory=dict)     # comm -> calls, ns, bytes
    incl_time: dict[int, int] = field(default_factory=dict)       # rank -> inclusive time
    incl_mpi: dict[int, int] = field(default_factory=dict)        # rank -> inclusive MPI time
    incl_offcpu: dict[int, int] = field(default_factory=dict)     # rank -> inclusive off-CPU
    incl_samples: int = 0         # samples of the subtree, all ranks (its sampled time's basis)

    def child(self, frame: Frame) -> "MergedNode":
        node = self.children.get(frame)
        if node is None:
            node = self.children[frame] = MergedNode(frame, self)
        return node

    def add(self, rank: int, node: Node) -> None:
        values = self.by_rank.setdefault(rank, [0] * METRIC_COUNT)
        for part, reads in _READ_BY_KIND.get(node.kind, _READ_OTHER_KINDS):
            source = node if part is None else getattr(node, part)
            if source is not None:
                for column, read in reads:
                    value = read(source)
                    if value:
                        values[column] += value
        if node.kind in _READ_BY_KIND:
            return                  # a leaf with metrics of its own (a system call)
        for part in node.comms:
            into = self.comms.setdefault(part.comm, [0, 0, 0])
            into[0] += part.calls
            into[1] += part.time_ns
            into[2] += part.bytes

    def total(self, metric: int) -> int:
        """An exclusive metric summed over ranks."""
        return sum(values[metric] for values in self.by_rank.values())

    def value(self, metric: str) -> int:
        """A metric of the registry by name (stored or derived), exclusive, over all ranks."""
        return METRICS[metric].value(lambda name: self.total(COLUMNS[name]))

    @property
    def time_ns(self) -> int:
        """Exclusive time over all ranks."""
        return self.value("time")

    @property
    def incl_time_ns(self) -> int:
        return sum(self.incl_time.values())

    @property
    def incl_mpi_ns(self) -> int:
        return sum(self.incl_mpi.values())

    @property
    def incl_offcpu_ns(self) -> int:
        return sum(self.incl_offcpu.values())

    def walk(self) -> Iterator["MergedNode"]:
        """This node and its subtree, parents before children."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(list(node.children.values())))

    def path(self) -> list[Frame]:
        """The frames from the root's child down to this node."""
        frames = []
        node: Optional[MergedNode] = self
        while node is not None and node.parent is not None:
            frames.append(node.frame)
            node = node.parent
        return frames[::-1]


@dataclass
class RankStats:
    total: int
    min: int
    min_rank: int
    mean: float
    max: int
    max_rank: int


def rank_stats(values: Mapping[int, int], ranks: Sequence[int]) -> RankStats:
    """Sum, min, mean and max over ranks (a rank without a value counts as 0); the lowest
    rank on ties (pathscope.merge's rules, as profile.tsv's op lines)."""
    if not ranks:
        return RankStats(0, 0, 0, 0.0, 0, 0)
    per_rank = [(values.get(r, 0), r) for r in sorted(ranks)]
    low = reduce(RULES["min_lowest_rank"], per_rank)
    high = reduce(RULES["max_lowest_rank"], per_rank)
    total = sum(v for v, _ in per_rank)
    return RankStats(total, low[0], low[1], total / len(per_rank), high[0], high[1])


@dataclass
class CallTree:
    root: MergedNode
    ranks: list[int]              # the ranks merged: the population of the per-rank stats
    threads: list[tuple[int, int]]  # (rank, thread index) merged
    elapsed: dict[int, int]       # rank -> sum of its merged threads' elapsed_ns
    nodes: dict[int, int]         # rank -> number of CCT nodes merged (the 1 ns tolerances)
    runtime_threads: list[tuple[int, int]] = field(default_factory=list)  # left out
    runtime_elapsed: int = 0      # their summed elapsed time
    knows_offcpu: bool = False    # every rank merged has off-CPU time (format 2.4 and later)

    def stats(self, values: Mapping[int, int]) -> RankStats:
        return rank_stats(values, self.ranks)

    def pseudo(self, kind: str) -> Optional[MergedNode]:
        """The root's `[failed unwind]` or `[not unwound]` child, if any."""
        return self.root.children.get(Frame(kind))


def check_selection(profile: Profile, rank: Optional[int] = None,
                    thread: Optional[int] = None) -> list[int]:
    """The ranks to merge for rank / thread (None: all); ProfileError when the profile has no
    call paths, or rank or thread are not in it."""
    if not profile.has_call_paths():
        raise ProfileError(no_call_paths_message(profile))
    with_paths = sorted(r for r, paths in profile.callpaths.items() if paths.threads)
    chosen = with_paths
    if rank is not None:
        if rank not in with_paths:
            if 0 <= rank < profile.nranks:
                raise ProfileError(f"no call-path data for rank {rank} (ranks with call "
                                   f"paths: {ranges.compress(with_paths)})")
            raise ProfileError(f"no rank {rank} in this profile (ranks "
                               f"{ranges.compress(range(profile.nranks))})")
        chosen = [rank]
    if thread is not None:
        present = sorted({t for r in chosen for t in profile.callpaths[r].threads})
        if thread not in present:
            where = f" of rank {rank}" if rank is not None else ""
            raise ProfileError(f"no thread {thread}{where} in this profile (threads "
                               f"{ranges.compress(present)})")
        chosen = [r for r in chosen if thread in profile.callpaths[r].threads]
    return chosen


def build_tree(profile: Profile, rank: Optional[int] = None,
               thread: Optional[int] = None, runtime_threads: bool = True) -> CallTree:
    """Merges the CCTs of the chosen threads (all by default; without the MPI library's own
    threads when runtime_threads is False -- they are counted in tree.runtime_threads).
    ProfileError when the profile has no call paths, or rank / thread are not in it."""
    ranks = check_selection(profile, rank, thread)
    root = MergedNode(ROOT_FRAME, None)
    tree = CallTree(root, ranks, [], {r: 0 for r in ranks}, {r: 0 for r in ranks})
    tree.knows_offcpu = all(profile.callpaths[r].knows_offcpu() for r in ranks)
    for r in ranks:
        paths = profile.callpaths[r]
        for index, cct in paths.threads.items():
            if thread is not None and index != thread:
                continue
            if not runtime_threads and cct.runtime_thread(paths.modules):
                tree.runtime_threads.append((r, index))
                tree.runtime_elapsed += cct.elapsed_ns
                continue
            tree.threads.append((r, index))
            tree.elapsed[r] += cct.elapsed_ns
            tree.nodes[r] += len(cct.nodes)
            merged: list[MergedNode] = []
            for node in cct.nodes:          # by id: a parent comes before its children
                target = root if node.parent is None else merged[node.parent].child(
                    frame_of(node, paths.modules))
                target.add(r, node)
                merged.append(target)
        for source in SOURCES:
            if source.tree_hook is not None:
                source.tree_hook(root, r, paths, thread)
    _add_inclusive(root)
    return tree


def _add_inclusive(root: MergedNode) -> None:
    for node in reversed(list(root.walk())):    # children before parents
        for r, values in node.by_rank.items():
            node.incl_time[r] = node.incl_time.get(r, 0) + values[SAMPLE_NS] + values[MPI_NS]
            node.incl_mpi[r] = node.incl_mpi.get(r, 0) + values[MPI_NS]
            node.incl_offcpu[r] = node.incl_offcpu.get(r, 0) + values[OFFCPU_NS]
            node.incl_samples += values[SAMPLES]
        parent = node.parent
        if parent is not None:
            for into, values_of in ((parent.incl_time, node.incl_time),
                                    (parent.incl_mpi, node.incl_mpi),
                                    (parent.incl_offcpu, node.incl_offcpu)):
                for r, value in values_of.items():
                    into[r] = into.get(r, 0) + value
            parent.incl_samples += node.incl_samples


@dataclass
class TimeSplit:
    """Table I of the hybrid-profiling paper, per rank (each a dict rank -> ns)."""
    time: dict[int, int]          # sum of the threads' elapsed_ns
    failed: dict[int, int]        # the `[failed unwind]` subtree
    failed_mpi: dict[int, int]
    not_unwound: dict[int, int]   # the `[not unwound]` subtree
    not_unwound_mpi: dict[int, int]   # MPI calls of groups that are counted, not unwound
    execution: dict[int, int]     # everything else in the tree
    execution_mpi: dict[int, int]
    unaccounted: dict[int, int]   # time - tree time: within ±nodes ns for a correct run
    execution_offcpu: dict[int, int] = field(default_factory=dict)  # outside MPI, off the
                                  # CPU (run queue, blocked); all 0 before format 2.4
    offcpu: dict[int, int] = field(default_factory=dict)   # the whole tree's off-CPU time
    mpi: dict[int, int] = field(default_factory=dict)      # the whole tree's MPI time

    def execution_oncpu(self, rank: int) -> int:
        """The execution's time outside MPI that the thread spent running."""
        return (self.execution[rank] - self.execution_mpi[rank]
                - self.execution_offcpu.get(rank, 0))

    def offcpu_share(self) -> Optional[float]:
        """Off-CPU time over the time outside MPI, summed over ranks and threads (None when
        there is no time outside MPI)."""
        outside_mpi = sum(self.time.values()) - sum(self.mpi.values())
        return sum(self.offcpu.values()) / outside_mpi if outside_mpi > 0 else None


def time_split(tree: CallTree) -> TimeSplit:
    """Every dict has every rank of the tree (0 where a rank has none of it)."""
    def subtree(kind: str, mpi: bool) -> dict[int, int]:
        node = tree.pseudo(kind)
        values = (node.incl_mpi if mpi else node.incl_time) if node else {}
        return {r: values.get(r, 0) for r in tree.ranks}

    def offcpu_of(node: Optional[MergedNode], rank: int) -> int:
        return node.incl_offcpu.get(rank, 0) if node is not None else 0

    split = TimeSplit(dict(tree.elapsed), subtree(FAILED, False), subtree(FAILED, True),
                      subtree(NOT_UNWOUND, False), subtree(NOT_UNWOUND, True), {}, {}, {})
    for r in tree.ranks:
        tree_time = tree.root.incl_time.get(r, 0)
        split.execution[r] = tree_time - split.failed[r] - split.not_unwound[r]
        split.execution_mpi[r] = (tree.root.incl_mpi.get(r, 0) - split.failed_mpi[r]
                                  - split.not_unwound_mpi[r])
        split.unaccounted[r] = split.time[r] - tree_time
        split.offcpu[r] = offcpu_of(tree.root, r)
        split.mpi[r] = tree.root.incl_mpi.get(r, 0)
        split.execution_offcpu[r] = (split.offcpu[r] - offcpu_of(tree.pseudo(FAILED), r)
                                     - offcpu_of(tree.pseudo(NOT_UNWOUND), r))
    return split


def is_mpi(node: MergedNode) -> bool:
    return node.frame.kind == MPI
