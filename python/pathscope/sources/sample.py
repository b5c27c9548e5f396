"""Sampling: a rank's `sampler` line (docs/format.md, "Call paths").  The samples themselves
are on the nodes (sample_ns, samples, offcpu_ns) and the threads (samples_kept, cpu_ns), which
the core reads (pathscope.cct).

    sampler = profile.callpaths[0].sampler         # Sampler, or None (no sampler line)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from pathscope.cct import RankCallPaths
from pathscope.sources.base import Source
from pathscope.tsv import Record


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


class SamplerParser:
    """The `sampler` line of one rank file (the last one counts)."""

    def __init__(self, name: str, world: int):
        self.sampler: Optional[Sampler] = None

    def handlers(self) -> dict[str, Callable[[Record], None]]:
        return {"sampler": self._sampler}

    def _sampler(self, r: Record) -> None:
        r.need(3)
        counts = [r.number(i) if len(r.fields) > i else 0 for i in range(3, 7)]
        offcpu = [r.text(7) if len(r.fields) > 7 else "samples",
                  *(r.number(i) if len(r.fields) > i else 0 for i in (8, 9))]
        self.sampler = Sampler(r.text(0), r.number(1), r.text(2), *counts, *offcpu)

    def finish(self, rank_paths: RankCallPaths, complete: bool) -> Optional[Sampler]:
        return self.sampler


SOURCE = Source("sample", SamplerParser)
