"""Heap profiling (PATHSCOPE_HEAP, format 2.1): a rank's `heap` line, its timeline (`hpoint`
lines) and the heap metrics of call-path nodes (`hnode` lines), docs/format.md.

    summary = profile.callpaths[0].heap            # HeapSummary, or None without heap profiling
    node.heap.leaked_bytes                         # HeapStats of a node, or None
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from pathscope.cct import MAX_ID, RankCallPaths, named_node
from pathscope.sources.base import Source
from pathscope.tsv import Record


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


SOURCE = Source("heap", HeapParser)
