"""The call paths of a run merged into one tree, and the time split of Scalasca's hybrid
profiles (Szebenyi et al., Table I: Time = Failed unwind + Not unwound + Execution, with MPI
inside Execution).

    tree = build_tree(profile)                   # every thread of every rank
    tree = build_tree(profile, rank=1, thread=0)  # one world rank, one thread index
    node.total(MPI_NS), node.incl_time_ns         # sums over the ranks
    tree.stat(node, INCL_TIME), tree.stat(node, MPI_NS)   # pathscope.stats.Stats

Two kinds of tree, one API (total, value, incl_*_ns, incl_samples, comms, tree.stat,
tree.vector); the statistics of sums over nodes and the time split are pandas
aggregations over them (pathscope.frames.ProfileFrames.group_stats, time_split):
- from the rank files: the threads' CCTs merged here; a node keeps its exclusive metrics per
  rank (summed over the rank's threads) and its statistics are computed from them;
- from tree.tsv (format 2.9, `--per-rank none` or not): the job merged them; a node holds the
  statistics read from the file (ReducedNode), nothing of one thread, and each rank's value
  only for the heaviest paths of `--per-rank summary` (its `rankvec` lines; tree.vector):
  sums and differences of those paths are then exact per rank too.
Rules kept here:
- Threads merge by the sequence of frame identities from the root (pathscope.symbols.Frame),
  never by names: two call sites of one function stay two nodes.  merge_call_sites then
  gives the tree by function, where the sibling call sites of one function (by its names)
  are one node whose values are their sums (what the report and the HTML show by default).
- Every value has a sum and per-rank min/mean/max with the ranks at min and max, nonzero and
  the sketch (pathscope.stats); a rank without the node counts as 0; on ties the lowest rank.
- Time is sample_ns + mpi_ns; inclusive = the node plus its subtree.  Off-CPU time is part
  of sample_ns (format 2.4): on-CPU time = sample_ns - offcpu_ns.
- The MPI library's own threads (cct.RUNTIME_MODULES) are left out with runtime_threads=False.
  With runtime_threads=True a rank-file tree merges them into the one root like any thread;
  a reduced tree does the same with tree.tsv's `runtime` root, so both give the same paths
  and sums; a node on both roots' paths (`start_thread`, `clone3`) then has an exact sum
  but no per-rank extremes (pathscope.stats: a sum of two per-rank values).
Nothing here prints or exits.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Callable, Hashable, Iterator, Mapping, Optional, Sequence, Union

from pathscope import ranges
from pathscope.cct import (CODE_KINDS, FAILED, MPI, NOT_UNWOUND, OFFCPU_FORMAT, ROOT, Module,
                           Node, RankCallPaths, Thread)
from pathscope.errors import ProfileError
from pathscope.metrics import COLUMN_COUNT, COLUMNS, METRICS, STORED
from pathscope.progress import Steps
from pathscope.reader import Profile
from pathscope.sources import SOURCES
from pathscope.stats import Stats
from pathscope.symbols import ROOT_FRAME, Frame, SymbolTable, frame_of
from pathscope.treefile import APP_ROOT, INCLUSIVE, PCOMM, RUNTIME_ROOT, ReducedTree, TreeNode
from pathscope.tsv import version_at_least

# the stored metrics' columns in MergedNode.by_rank, by name (pathscope.metrics)
VISITS, SAMPLE_NS, SAMPLES, MPI_NS, BYTES = (COLUMNS[name] for name in (
    "visits", "sample_ns", "samples", "mpi_ns", "bytes"))
ALLOCS, ALLOC_BYTES, FREES, FREED_BYTES, PEAK_BYTES = (COLUMNS[name] for name in (
    "allocs", "alloc_bytes", "frees", "freed_bytes", "peak_bytes"))
ENTRIES, SYSCALLS, KERNEL_NS, OFFCPU_NS = (COLUMNS[name] for name in (
    "entries", "syscalls", "kernel_ns", "offcpu_ns"))
METRIC_COUNT = COLUMN_COUNT
# the inclusive values per rank, by their tree.tsv column names: keys of tree.stat beside the
# stored metrics' columns
INCL_TIME, INCL_MPI, INCL_OFFCPU = INCLUSIVE
Key = Union[int, str]         # a stored metric's column, or one of INCLUSIVE
Vectors = dict[str, list[int]]   # tree.tsv column name -> each rank's value, rank 0 first
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
    # merge_call_sites: the nodes of the original tree this one holds, heaviest first (empty:
    # a node of the original tree, its own only site)
    sites: list["MergedNode"] = field(default_factory=list)

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

    def per_rank(self, key: Key) -> Mapping[int, int]:
        """A value per rank (the ranks without it absent)."""
        if isinstance(key, str):
            return {INCL_TIME: self.incl_time, INCL_MPI: self.incl_mpi,
                    INCL_OFFCPU: self.incl_offcpu}[key]
        return {r: values[key] for r, values in self.by_rank.items() if values[key]}

    def stat(self, key: Key, ranks: Sequence[int]) -> Stats:
        """A value's statistics over the population ranks."""
        return Stats.of_ranks(self.per_rank(key), ranks)

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


def _vector(stats: Mapping[str, Stats], vectors: Optional[Vectors], name: str,
            ranks: int) -> Optional[list[int]]:
    """Each rank's value of a column of a node with these statistics and rank vectors: a
    column the node does not have is 0 on every rank; None when not known."""
    if vectors is None:
        return None
    if name in vectors:
        return vectors[name]
    return None if name in stats else [0] * ranks


class ReducedNode(MergedNode):
    """A node of tree.tsv: its values' statistics over the ranks, as the job merged them
    (by column name: the stored metrics and INCLUSIVE), and, for the paths of its `rankvec`
    lines (`--per-rank summary`), each rank's value; nothing of one thread."""

    def __init__(self, frame: Frame, parent: Optional[MergedNode],
                 stats: Optional[dict[str, Stats]] = None, vectors: Optional[Vectors] = None):
        super().__init__(frame, parent)
        self.stats: dict[str, Stats] = stats if stats is not None else {}
        # column name -> each rank's value (rank 0 first); None: not kept for this path
        self.vectors = vectors
        # communicator -> column name -> statistics (the `pcomm` children)
        self.comm_stats: dict[str, dict[str, Stats]] = {}

    def child(self, frame: Frame) -> "MergedNode":
        node = self.children.get(frame)
        if node is None:
            node = self.children[frame] = ReducedNode(frame, self)
        return node

    def merge(self, stats: Mapping[str, Stats], vectors: Optional[Vectors], ranks: int) -> None:
        """Adds another node's values (the runtime threads' root merged into the app's): the
        rank vectors add up when both nodes have them, and then give exact statistics."""
        merged: Optional[Vectors] = {}
        for name in set(self.stats) | set(stats):
            mine = _vector(self.stats, self.vectors, name, ranks)
            theirs = _vector(stats, vectors, name, ranks)
            if mine is None or theirs is None:
                merged = None
                break
            merged[name] = [a + b for a, b in zip(mine, theirs)]
        for name, value in stats.items():
            mine = self.stats.get(name)
            self.stats[name] = value if mine is None else Stats.combine((mine, value), ranks)
        self.vectors = merged
        for name, values in (merged or {}).items():
            if not self.stats[name].known:
                self.stats[name] = Stats.of_vector(values)

    def vector(self, key: Key, ranks: int) -> Optional[list[int]]:
        """Each rank's value of key (rank 0 first), when tree.tsv keeps it for this path."""
        return _vector(self.stats, self.vectors, _column_name(key), ranks)

    def total(self, metric: int) -> int:
        value = self.stats.get(STORED[metric].name)
        return value.sum if value is not None else 0

    @property
    def incl_time_ns(self) -> int:
        return self._sum(INCL_TIME)

    @property
    def incl_mpi_ns(self) -> int:
        return self._sum(INCL_MPI)

    @property
    def incl_offcpu_ns(self) -> int:
        return self._sum(INCL_OFFCPU)

    def _sum(self, name: str) -> int:
        value = self.stats.get(name)
        return value.sum if value is not None else 0

    def per_rank(self, key: Key) -> Mapping[int, int]:
        name = _column_name(key)
        if self.vectors is None or (name in self.stats and name not in self.vectors):
            raise ProfileError("per-rank values are not kept in tree.tsv")
        return {r: v for r, v in enumerate(self.vectors.get(name, ())) if v}

    def stat(self, key: Key, ranks: Sequence[int]) -> Stats:
        value = self.stats.get(_column_name(key))
        return value if value is not None else Stats.zero(len(ranks))


def _column_name(key: Key) -> str:
    """A tree.tsv column name: one of INCLUSIVE, or a stored metric's column by name."""
    return key if isinstance(key, str) else STORED[key].name


@dataclass
class CallTree:
    root: MergedNode
    ranks: list[int]              # the ranks merged: the population of the per-rank stats
    threads: list[tuple[int, int]]  # (rank, thread index) merged (none for a reduced tree)
    elapsed: dict[int, int]       # rank -> sum of its merged threads' elapsed_ns
    nodes: dict[int, int]         # rank -> number of CCT nodes merged (the 1 ns tolerances)
    runtime_threads: int = 0      # threads of the MPI library's runtime left out
    runtime_elapsed: int = 0      # their summed elapsed time
    knows_offcpu: bool = False    # every rank merged has off-CPU time (format 2.4 and later)
    reduced: Optional[ReducedTree] = None   # the tree comes from tree.tsv
    with_runtime: bool = True     # the MPI library's threads are merged in

    def stat(self, node: MergedNode, key: Key) -> Stats:
        """A value of node over the tree's ranks (key: a stored metric's column or one of
        INCLUSIVE)."""
        return node.stat(key, self.ranks)

    def vector(self, node: Optional[MergedNode], key: Key) -> Optional[list[int]]:
        """Each rank's value of node (None: 0 everywhere), in the order of self.ranks; None
        when not known (a reduced tree keeps it for the paths of its `rankvec` lines)."""
        if node is None:
            return [0] * len(self.ranks)
        if isinstance(node, ReducedNode):
            return node.vector(key, len(self.ranks))
        values = node.per_rank(key)
        return [values.get(r, 0) for r in self.ranks]

    def thread_count(self) -> int:
        """The threads merged."""
        if self.reduced is not None:
            return self.scalar("thread.count").sum
        return len(self.threads)

    def scalar(self, name: str) -> Stats:
        """A per-rank number of tree.tsv (zero when absent)."""
        assert self.reduced is not None
        return self.reduced.scalars.get(name) or Stats.zero(len(self.ranks))

    def pseudo(self, kind: str) -> Optional[MergedNode]:
        """The root's `[failed unwind]` or `[not unwound]` child, if any."""
        return self.root.children.get(Frame(kind))


def _vector_sum(vectors: Sequence[Optional[list[int]]], ranks: int,
                signs: Sequence[int] = ()) -> Optional[list[int]]:
    """Rank by rank, the sum of the vectors (each times its sign: 1 when not given); None
    when one is not known."""
    total = [0] * ranks
    for i, values in enumerate(vectors):
        if values is None:
            return None
        sign = signs[i] if i < len(signs) else 1
        total = [t + sign * v for t, v in zip(total, values)]
    return total


def per_rank_not_kept_message(profile: Profile) -> str:
    return (f"a view of one rank or thread needs per-rank call paths, which {profile.path} "
            f"does not keep (tree.tsv holds the ranks merged: per-rank data not kept); rerun "
            f"with --per-rank all")


def check_selection(profile: Profile, rank: Optional[int] = None,
                    thread: Optional[int] = None) -> list[int]:
    """The ranks to merge for rank / thread (None: all); ProfileError when the profile has no
    call paths, or rank or thread are not in it, or it has tree.tsv only and one is given."""
    if not profile.has_call_paths():
        raise ProfileError(no_call_paths_message(profile))
    if profile.reduced_only():
        if rank is not None or thread is not None:
            raise ProfileError(per_rank_not_kept_message(profile))
        return list(range(profile.tree.ranks)) if profile.tree else []
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
    ProfileError when the profile has no call paths, or rank / thread are not in it.  From
    tree.tsv when no rank file has call paths (profile.reduced_only())."""
    ranks = check_selection(profile, rank, thread)
    if profile.reduced_only():
        # built once per profile: every report section asks, and nothing changes a tree
        built = profile.__dict__.setdefault("_reduced_trees", {})
        if runtime_threads not in built:
            assert profile.tree is not None
            built[runtime_threads] = reduced_tree(profile.tree, runtime_threads)
        return built[runtime_threads]
    tree = merge_rank_threads(profile, ranks, thread,
                              lambda cct, modules: runtime_threads or
                              not cct.runtime_thread(modules))
    tree.with_runtime = runtime_threads
    for r in ranks:
        for source in SOURCES:
            if source.tree_hook is not None:
                source.tree_hook(tree.root, r, profile.callpaths[r], thread)
    _add_inclusive(tree.root)
    return tree


def merge_rank_threads(profile: Profile, ranks: Sequence[int], thread: Optional[int],
                       chosen: Callable[[Thread, dict[int, Module]], bool]) -> CallTree:
    """The CCTs of the threads of ranks (of index thread, if not None) that chosen accepts,
    merged; the others are counted in runtime_threads and runtime_elapsed.  No source hooks,
    no inclusive values yet."""
    root = MergedNode(ROOT_FRAME, None)
    tree = CallTree(root, list(ranks), [], {r: 0 for r in ranks}, {r: 0 for r in ranks})
    tree.knows_offcpu = all(profile.callpaths[r].knows_offcpu() for r in ranks)
    with Steps("merging call trees", len(ranks)) as step:
        for r in ranks:
            step()
            _merge_rank(tree, r, profile.callpaths[r], thread, chosen)
    return tree


def _merge_rank(tree: CallTree, r: int, paths: RankCallPaths, thread: Optional[int],
                chosen: Callable[[Thread, dict[int, Module]], bool]) -> None:
    """merge_rank_threads for one rank."""
    for index, cct in paths.threads.items():
        if thread is not None and index != thread:
            continue
        if not chosen(cct, paths.modules):
            tree.runtime_threads += 1
            tree.runtime_elapsed += cct.elapsed_ns
            continue
        tree.threads.append((r, index))
        tree.elapsed[r] += cct.elapsed_ns
        tree.nodes[r] += len(cct.nodes)
        merged: list[MergedNode] = []
        for node in cct.nodes:          # by id: a parent comes before its children
            target = tree.root if node.parent is None else merged[node.parent].child(
                frame_of(node, paths.modules))
            target.add(r, node)
            merged.append(target)


def reduced_tree(data: ReducedTree, runtime_threads: bool = True) -> CallTree:
    """The tree of tree.tsv (see the module's rules on runtime_threads)."""
    tree = merge_reduced_roots(data, (APP_ROOT, RUNTIME_ROOT) if runtime_threads
                               else (APP_ROOT,))
    tree.with_runtime = runtime_threads
    if not runtime_threads:
        tree.runtime_threads = tree.scalar("runtime.count").sum
        tree.runtime_elapsed = tree.scalar("runtime.elapsed_ns").sum
    for source in SOURCES:
        if source.reduced_hook is not None:
            source.reduced_hook(tree.root, data)
    for merged in reversed(list(tree.root.walk())):   # children before parents
        merged.incl_samples += merged.total(SAMPLES)
        if merged.parent is not None:
            merged.parent.incl_samples += merged.incl_samples
    return tree


def merge_reduced_roots(data: ReducedTree, roots: Sequence[str]) -> CallTree:
    """The subtrees of tree.tsv's roots of those names merged into one root; no source
    hooks, no incl_samples yet."""
    ranks = data.ranks
    root = ReducedNode(ROOT_FRAME, None, {}, {})     # nothing merged yet: 0 on every rank
    tree = CallTree(root, list(range(ranks)), [], {}, {}, reduced=data,
                    knows_offcpu=version_at_least(data.version, *OFFCPU_FORMAT))
    placed: list[Optional[ReducedNode]] = []     # by file node id; None: left out
    for node in data.nodes:
        if node.parent is None:
            keep = node.name in roots
            if keep:
                root.merge(node.stats, data.rank_vectors.get(node.id), ranks)
            placed.append(root if keep else None)
            continue
        parent = placed[node.parent]
        if parent is None or node.kind == PCOMM:
            if parent is not None:
                _add_comm(parent, node, ranks)
            placed.append(None)
            continue
        frame = frame_of_tree_node(node, data)
        child = parent.children.get(frame)
        if child is None:
            child = parent.children[frame] = ReducedNode(frame, parent, dict(node.stats),
                                                         data.rank_vectors.get(node.id))
        else:                       # the same path in the runtime threads' subtree
            assert isinstance(child, ReducedNode)
            child.merge(node.stats, data.rank_vectors.get(node.id), ranks)
        placed.append(child)
    return tree


def frame_of_tree_node(node: TreeNode, data: ReducedTree) -> Frame:
    """The rank files' frame identity (pathscope.symbols.frame_of) of a tree.tsv node."""
    module = data.modules.get(node.module) if node.module is not None else None
    path, build_id = (module.path, module.build_id) if module is not None else ("", "")
    if node.kind in CODE_KINDS:
        return Frame(node.kind, path, build_id, node.address or 0)
    if node.kind in (ROOT, FAILED, NOT_UNWOUND):
        return Frame(node.kind)
    if node.module is None:
        return Frame(node.kind, name=node.name)
    return Frame(node.kind, path, build_id, node.address or 0, node.name)


def _add_comm(mpi_node: ReducedNode, part: TreeNode, ranks: int) -> None:
    """A `pcomm` child: the MPI node's calls, time and bytes on one communicator."""
    sums = mpi_node.comms.setdefault(part.name, [0, 0, 0])
    into = mpi_node.comm_stats.setdefault(part.name, {})
    for i, column in enumerate(("visits", "mpi_ns", "bytes")):
        value = part.stats.get(column)
        if value is not None:
            sums[i] += value.sum
            mine = into.get(column)
            into[column] = value if mine is None else Stats.combine((mine, value), ranks)


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
    """Table I of the hybrid-profiling paper from a reduced tree's statistics over its ranks
    (pathscope.frames.ProfileFrames.time_split tabulates it, and computes it for rank files)."""
    time: Stats                   # the merged threads' elapsed time
    failed: Stats                 # the `[failed unwind]` subtree
    failed_mpi: Stats
    not_unwound: Stats            # the `[not unwound]` subtree
    not_unwound_mpi: Stats        # MPI calls of groups that are counted, not unwound
    execution: Stats              # everything else in the tree
    execution_mpi: Stats
    execution_oncpu: Stats        # outside MPI, running
    execution_offcpu: Stats       # outside MPI, off the CPU (run queue, blocked); 0 before 2.4
    offcpu: Stats                 # the whole tree's off-CPU time
    mpi: Stats                    # the whole tree's MPI time
    # elapsed minus the tree's time, and what is allowed (1 ns per node): "all ranks" (sums)
    unaccounted: dict[str, tuple[int, int]]


def reduced_time_split(tree: CallTree) -> TimeSplit:
    """The rows from tree.tsv's statistics: exact where a row is one node's value or one
    scalar, or a difference of nodes whose rank vectors are kept (`--per-rank summary`);
    else the sum alone where it is a difference of values that are not 0 (Stats.minus)."""
    assert tree.reduced is not None

    def of(node: Optional[MergedNode], key: str) -> Stats:
        return tree.stat(node, key) if node is not None else Stats.zero(len(tree.ranks))

    failed, not_unwound = tree.pseudo(FAILED), tree.pseudo(NOT_UNWOUND)
    ranks = len(tree.ranks)
    # each rank's execution values, when the rank vectors of the three nodes are kept
    exact = {key: _vector_sum([tree.vector(n, key) for n in (tree.root, failed, not_unwound)],
                              ranks, (1, -1, -1)) for key in INCLUSIVE}

    def execution_of(key: str) -> Stats:
        values = exact[key]
        if values is not None:
            return Stats.of_vector(values)
        return of(tree.root, key).minus(of(failed, key)).minus(of(not_unwound, key))

    total, mpi, offcpu = (of(tree.root, k) for k in INCLUSIVE)
    execution, execution_mpi, execution_offcpu = (execution_of(k) for k in INCLUSIVE)
    on_cpu = _vector_sum(list(exact.values()), ranks, (1, -1, -1))
    oncpu = (Stats.of_vector(on_cpu) if on_cpu is not None
             else execution.minus(execution_mpi).minus(execution_offcpu))
    elapsed = tree.scalar("thread.elapsed_ns")
    nodes = tree.scalar("thread.nodes").sum
    if tree.with_runtime:         # the runtime threads' root is merged in
        elapsed = Stats.combine((elapsed, tree.scalar("runtime.elapsed_ns")), len(tree.ranks))
        nodes += tree.scalar("runtime.nodes").sum
    return TimeSplit(elapsed, of(failed, INCL_TIME), of(failed, INCL_MPI),
                     of(not_unwound, INCL_TIME), of(not_unwound, INCL_MPI), execution,
                     execution_mpi, oncpu, execution_offcpu, offcpu, mpi,
                     {"all ranks": (elapsed.sum - total.sum, nodes)})


def function_key(symbols: SymbolTable) -> Callable[[Frame], Hashable]:
    """What makes two sibling frames one function: a code frame's module and names (its
    function and the functions inlined into it, as resolved; an unresolved frame's name
    is its address, so it merges with nothing), any other frame itself."""
    def key(frame: Frame) -> Hashable:
        if frame.kind in CODE_KINDS:
            return (frame.module, tuple(symbols.names(frame)))
        return frame
    return key


def merge_call_sites(tree: CallTree, key: Callable[[Frame], Hashable]) -> CallTree:
    """The tree with the sibling nodes of one key (function_key: one function at several
    call sites, or its sampled lines) merged, level by level from the root: a merged node's
    children are its sites' children, merged the same way.  Sums, per-rank values and the
    statistics stay exact (siblings' subtrees are disjoint; a reduced tree's sums of values
    without rank vectors keep only the sum: Stats.combine).  A merged node's frame is its
    heaviest site's (most inclusive time; the first on ties), node.sites its sites."""
    root = _merged_node([tree.root], None, len(tree.ranks))
    stack = [(root, [tree.root])]
    while stack:
        into, sources = stack.pop()
        for merged in merge_children(sources, key, len(tree.ranks), into, copy_single=True):
            into.children[merged.frame] = merged
            stack.append((merged, merged.sites))
    return replace(tree, root=root)


def merge_children(nodes: Sequence[MergedNode], key: Callable[[Frame], Hashable], ranks: int,
                   parent: Optional[MergedNode] = None,
                   copy_single: bool = False) -> list[MergedNode]:
    """The children of nodes grouped by key, one node per group holding the group's values
    (merge_call_sites' rules) and no children: the sites' children are merged when asked
    for (merge_children(node.sites or [node], ...)), so a view that shows a few levels
    merges only those.  A group of one is that child itself unless copy_single."""
    groups: dict[Hashable, list[MergedNode]] = {}
    for node in nodes:
        for child in node.children.values():
            groups.setdefault(key(child.frame), []).append(child)
    merged = []
    for members in groups.values():
        if len(members) == 1 and not copy_single:
            merged.append(members[0])
            continue
        members.sort(key=lambda n: -n.incl_time_ns)
        merged.append(_merged_node(members, parent, ranks))
    return merged


def _merged_node(members: Sequence[MergedNode], parent: Optional[MergedNode],
                 ranks: int) -> MergedNode:
    """One node holding the values of members (no children yet)."""
    frame = members[0].frame
    if isinstance(members[0], ReducedNode):
        node: MergedNode = ReducedNode(frame, parent, {}, {})
        for m in members:
            assert isinstance(m, ReducedNode) and isinstance(node, ReducedNode)
            node.merge(m.stats, m.vectors, ranks)
            for comm, columns in m.comm_stats.items():
                into = node.comm_stats.setdefault(comm, {})
                for column, value in columns.items():
                    mine = into.get(column)
                    into[column] = value if mine is None else Stats.combine((mine, value), ranks)
    else:
        node = MergedNode(frame, parent)
        for m in members:
            for r, values in m.by_rank.items():
                into_values = node.by_rank.setdefault(r, [0] * METRIC_COUNT)
                for i, v in enumerate(values):
                    into_values[i] += v
            for mine, theirs in ((node.incl_time, m.incl_time), (node.incl_mpi, m.incl_mpi),
                                 (node.incl_offcpu, m.incl_offcpu)):
                for r, v in theirs.items():
                    mine[r] = mine.get(r, 0) + v
    for m in members:
        node.incl_samples += m.incl_samples
        for comm, values in m.comms.items():
            sums = node.comms.setdefault(comm, [0, 0, 0])
            for i, v in enumerate(values):
                sums[i] += v
    node.sites = list(members)
    return node


def is_mpi(node: MergedNode) -> bool:
    return node.frame.kind == MPI
