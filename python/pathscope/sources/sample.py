"""Sampling: a rank's `sampler` line (docs/format.md, "Call paths").  The samples themselves
are on the nodes (sample_ns, samples, offcpu_ns) and the threads (samples_kept, cpu_ns), which
the core reads (pathscope.cct).

    sampler = profile.callpaths[0].sampler         # Sampler, or None (no sampler line)

Also the sampled-time metrics and the sampler's lines of the report's time split.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from pathscope.cct import OFFCPU_FORMAT, RankCallPaths
from pathscope.sources.base import CALL_PATHS, Metric, Source
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


_SPLIT = dict(needs_format=OFFCPU_FORMAT,
              needs_what="split sampled time into on-CPU and off-CPU time")

METRICS = (
    Metric("sample_ns", "sample", "ns", field="sample_ns", column=1),
    Metric("samples", "sample", "count", field="samples", column=2),
    # the part of sample_ns off the CPU (format 2.4; 0 before)
    Metric("offcpu_ns", "sample", "ns", field="offcpu_ns", column=13),
    # sampled time (outside MPI) split: the thread running, and off the CPU (in the run
    # queue or blocked); time = oncpu_time + offcpu_time + mpi_time
    Metric("oncpu_time", "sample", "ns", formula=lambda v: v("sample_ns") - v("offcpu_ns"),
           exports=(CALL_PATHS,), order=30, **_SPLIT),
    Metric("offcpu_time", "sample", "ns", formula=lambda v: v("offcpu_ns"),
           exports=(CALL_PATHS,), order=40, **_SPLIT),
)


# ---- report ------------------------------------------------------------------------------------

def describe_sampler(sampler: Optional[Sampler]) -> str:
    """A rank's sampler in the report's time split: `auto, 200 Hz, cpu clock` ("-": none)."""
    return f"{sampler.source}, {sampler.rate_hz} Hz, {sampler.clock} clock" if sampler else "-"


def scheduler_placed(samplers: list[Optional[Sampler]]) -> list[Sampler]:
    """The samplers whose off-CPU time the kernel collector's reports placed (--kernel)."""
    return [s for s in samplers if s and s.offcpu_from == "scheduler"]


def sampler_lines(samplers: list[Optional[Sampler]], indent: str) -> list[str]:
    """The time split's `timers` and `off CPU` lines over the ranks shown (a rank without a
    sampler line: None); [] when there is nothing to say."""
    timers = [s for s in samplers if s]
    lines = []
    by = {"perf events": sum(s.by_perf for s in timers),
          "POSIX CPU-time timers": sum(s.by_posix for s in timers),
          "wall-clock timers": sum(s.by_wall for s in timers)}
    if sum(by.values()):
        changes = sum(s.changes for s in timers)
        lines.append(f"{indent}timers     " + ", ".join(f"{n} signals from {k}" for k, n in by.items() if n)
                     + (f"; {changes} timer changes (auto: a thread switched more than 5,000 "
                        f"times a second is sampled by the POSIX timer)" if changes else ""))
    reported = scheduler_placed(samplers)
    if reported:
        placed, inside = sum(s.offcpu_reports for s in reported), sum(s.offcpu_in_mpi for s in reported)
        lines.append(f"{indent}off CPU    from the scheduler (--kernel) on {len(reported)} of "
                     f"{len(samplers)} ranks: {placed} reports placed where the thread "
                     f"stopped, {inside} inside MPI (its time is measured)")
    return lines


SOURCE = Source("sample", SamplerParser, metrics=METRICS)
