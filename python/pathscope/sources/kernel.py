"""Kernel time (PATHSCOPE_KERNEL, format 2.2): a rank's `kernel` line and its tables (`ksys`,
`kthread`, `kos`, `kend` lines), docs/format.md.  The time itself is on `syscall` nodes.

    kernel = profile.callpaths[0].kernel          # KernelSummary, or None without --kernel
    kernel.total_ns(); kernel.complete
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from pathscope.cct import RankCallPaths
from pathscope.errors import ProfileError
from pathscope.sources.base import Source
from pathscope.tsv import Record


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

    def handlers(self) -> dict[str, Callable[[Record], None]]:
        return {"kernel": self._kernel, "ksys": self._kline, "kthread": self._kline,
                "kos": self._kline, "kend": self._kline}

    def _kernel(self, r: Record) -> None:
        r.need(7)
        self.kernel = KernelSummary(r.text(0), r.number(1), r.text(2), r.number(3), r.number(4),
                                    r.number(5), "" if r.text(6) == "-" else r.text(6))

    def _kline(self, r: Record) -> None:
        self.kernel_lines.append(r)

    def finish(self, rank_paths: RankCallPaths, complete: bool) -> Optional[KernelSummary]:
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
        return k


SOURCE = Source("kernel", KernelParser)
