"""Heap profiling (PATHSCOPE_HEAP, format 2.1): a rank's `heap` line, its timeline (`hpoint`
lines) and the heap metrics of call-path nodes (`hnode` lines), docs/format.md.

    summary = profile.callpaths[0].heap            # HeapSummary, or None without heap profiling
    node.heap.leaked_bytes                         # HeapStats of a node, or None
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional

from pathscope.cct import HEAP, MAX_ID, RankCallPaths, named_node
from pathscope.sources.base import CALL_PATHS, Metric, Section, Source, Table, TableSpec
from pathscope.tsv import Record
from pathscope.units import seconds

if TYPE_CHECKING:
    from pathscope.frames import ProfileFrames
    from pathscope.reader import Profile


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


class HeapParser:
    """The heap lines of one rank file; finish() puts each `hnode` on its node."""

    def __init__(self, name: str, world: int):
        self.heap: Optional[HeapSummary] = None
        self.points: list[HeapPoint] = []
        self.hnodes: list[tuple[int, int, HeapStats, str]] = []

    def handlers(self) -> dict[str, Callable[[Record], None]]:
        return {"heap": self._heap, "hnode": self._hnode, "hpoint": self._hpoint}

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

    def finish(self, rank_paths: RankCallPaths, complete: bool) -> Optional[HeapSummary]:
        for thread_index, node_id, stats, where in self.hnodes:
            node = named_node(rank_paths, "hnode", thread_index, node_id, where, complete)
            if node is not None:
                node.heap = stats
        if self.heap is not None:
            self.heap.timeline = self.points
        return self.heap


# ---- export tables ----------------------------------------------------------------------------

HEAP_TIMELINE_COLUMNS = ["rank", "time_s", "live_bytes", "max_bytes"]
HEAP_RANKS_COLUMNS = ["rank", "traversal", "allocs", "alloc_bytes", "frees", "freed_bytes",
                      "peak_bytes", "peak_time_s", "leaked_bytes", "untracked_allocs",
                      "foreign_frees"]


def _heap_ranks(profile: Profile):
    return [(rank, paths.heap) for rank, paths in sorted(profile.callpaths.items())
            if paths.heap is not None]


def heap_timeline_table(profile: Profile) -> Table:
    """Heap profiling: one row per timeline point of each rank (live bytes over time)."""
    rows = []
    for rank, heap in _heap_ranks(profile):
        for point in heap.timeline:
            rows.append({"rank": rank, "time_s": seconds(point.time_ns),
                         "live_bytes": point.live_bytes, "max_bytes": point.max_bytes})
    return Table(HEAP_TIMELINE_COLUMNS, rows)


def heap_ranks_table(profile: Profile) -> Table:
    """Heap profiling: one row per rank with its totals, peak and leaks."""
    rows = []
    for rank, heap in _heap_ranks(profile):
        rows.append({"rank": rank, "traversal": heap.traversal, "allocs": heap.allocs,
                     "alloc_bytes": heap.alloc_bytes, "frees": heap.frees,
                     "freed_bytes": heap.freed_bytes, "peak_bytes": heap.peak_bytes,
                     "peak_time_s": seconds(heap.peak_ns), "leaked_bytes": heap.live_bytes,
                     "untracked_allocs": heap.untracked_allocs,
                     "foreign_frees": heap.foreign_frees})
    return Table(HEAP_RANKS_COLUMNS, rows)


TABLES = (
    TableSpec("heap-timeline", "", HEAP_TIMELINE_COLUMNS, heap_timeline_table, 50),
    TableSpec("heap-ranks", "", HEAP_RANKS_COLUMNS, heap_ranks_table, 51),
)

METRICS = (
    # heap profiling (HeapStats): blocks allocated on the path, freed, live at the peak
    Metric("allocs", "heap", "count", field="heap.allocs", column=5),
    Metric("alloc_bytes", "heap", "bytes", field="heap.alloc_bytes", column=6,
           exports=(CALL_PATHS,), order=90),
    Metric("frees", "heap", "count", field="heap.frees", column=7),
    Metric("freed_bytes", "heap", "bytes", field="heap.freed_bytes", column=8),
    Metric("peak_bytes", "heap", "bytes", field="heap.peak_bytes", column=9,
           exports=(CALL_PATHS,), order=120),
    # heap profiling (--heap): the allocating call paths, the allocator function innermost
    Metric("alloc_count", "heap", "count", formula=lambda v: v("allocs"),
           exports=(CALL_PATHS,), order=80),
    Metric("free_count", "heap", "count", formula=lambda v: v("frees"),
           exports=(CALL_PATHS,), order=100),
    Metric("leaked_bytes", "heap", "bytes",
           formula=lambda v: v("alloc_bytes") - v("freed_bytes"), exports=(CALL_PATHS,),
           order=110),
)



# ---- report ------------------------------------------------------------------------------------

def report_sections(frames: "ProfileFrames") -> list[str]:
    """The report's heap section: totals per rank, the top allocating and leaking paths, the
    timelines ([] without heap profiling)."""
    from pathscope.report import heap as heap_report   # the analysis imports the sources
    return heap_report.sections(frames)


SOURCE = Source("heap", HeapParser, metrics=METRICS, tables=TABLES,
                sections=(Section(40, report_sections),), node_kinds=(HEAP,))
