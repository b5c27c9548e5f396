"""The call paths of a profile as weighted stacks of names, for the flame-graph formats
(export/folded.py, export/speedscope.py), independent of the file format.

    stacks = collect_stacks(profile, symbols, "time", rank=None, thread=None)
    stacks.stacks[0] == (("_start", ...), ("main", "/src/app.c"), ...), 1200

Rules kept here (docs/user-guide.md, Exporting call paths):
- A stack is the names of the frames from the root's child down to a node, outermost first:
  inlined functions expand in place, the pseudo frames are `[failed unwind]` and `[not
  unwound]` and `[kernel: no call path]`, an MPI operation, an allocator function (malloc,
  calloc, ...) or a system call is the innermost frame.  The frames above main stay.
- A stack's value is the node's exclusive metric, summed over the chosen ranks and threads
  and over the nodes that give the same stack (e.g. two call sites in one function).
- Time metrics are in microseconds, rounded half up after summing; stacks whose value is 0
  are left out; stacks are sorted by their names joined with `;`.
- oncpu_time and offcpu_time split the sampled time (time = oncpu_time + offcpu_time +
  mpi_time on every node); profiles older than format 2.4 do not have the split and are
  refused for them (check_metric) rather than exported as zeros.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from pathscope.calltree import (ALLOC_BYTES, ALLOCS, BYTES, ENTRIES, FREED_BYTES, FREES,
                                KERNEL_NS, MPI_NS, OFFCPU_NS, PEAK_BYTES, SAMPLE_NS, SYSCALLS,
                                VISITS, MergedNode, build_tree)
from pathscope.cct import CODE_KINDS, OFFCPU_FORMAT
from pathscope.errors import ProfileError
from pathscope.reader import Profile
from pathscope.symbols import SymbolTable

NS_PER_US = 1000


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str                     # speedscope's unit
    value: Callable[[MergedNode], int]
    time: bool                    # nanoseconds, exported in microseconds
    offcpu: bool = False          # needs the on/off-CPU split of format 2.4


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("time", "microseconds", lambda n: n.total(SAMPLE_NS) + n.total(MPI_NS), True),
    Metric("mpi_time", "microseconds", lambda n: n.total(MPI_NS), True),
    # sampled time (outside MPI) split (format 2.4): the thread running, and off the CPU
    # (in the run queue or blocked); time = oncpu_time + offcpu_time + mpi_time
    Metric("oncpu_time", "microseconds", lambda n: n.total(SAMPLE_NS) - n.total(OFFCPU_NS),
           True, offcpu=True),
    Metric("offcpu_time", "microseconds", lambda n: n.total(OFFCPU_NS), True, offcpu=True),
    Metric("visits", "none", lambda n: n.total(VISITS), False),
    Metric("bytes", "bytes", lambda n: n.total(BYTES), False),
    # thunk mode: calls made at each call site that a walk saw start, a lower bound
    Metric("calls", "none", lambda n: n.total(ENTRIES), False),
    # heap profiling (--heap): the allocating call paths, the allocator function innermost
    Metric("alloc_count", "none", lambda n: n.total(ALLOCS), False),
    Metric("alloc_bytes", "bytes", lambda n: n.total(ALLOC_BYTES), False),
    Metric("free_count", "none", lambda n: n.total(FREES), False),
    Metric("leaked_bytes", "bytes", lambda n: n.total(ALLOC_BYTES) - n.total(FREED_BYTES), False),
    Metric("peak_bytes", "bytes", lambda n: n.total(PEAK_BYTES), False),
    # kernel time (--kernel): the system call (or libc function) innermost, below the path
    # that made it; `[kernel: no call path]` holds what no path got (totals = the tables)
    Metric("syscall_count", "none", lambda n: n.total(SYSCALLS), False),
    Metric("syscall_time", "microseconds", lambda n: n.total(KERNEL_NS), True),
)}


@dataclass(frozen=True)
class StackFrame:
    name: str
    file: Optional[str] = None    # the function's source file, when known


Stack = tuple[StackFrame, ...]


@dataclass
class Stacks:
    metric: Metric
    selection: str                # "all ranks and threads", "rank 1", "rank 1, thread 0", ...
    stacks: list[tuple[Stack, int]]  # sorted by the names joined with ";", values > 0

    @property
    def total(self) -> int:
        return sum(value for _, value in self.stacks)


def _frames(node: MergedNode, symbols: SymbolTable, with_files: bool) -> list[StackFrame]:
    names = symbols.names(node.frame)
    if not with_files or node.frame.kind not in CODE_KINDS:
        return [StackFrame(name) for name in names]
    lines = symbols.lines(node.frame)
    files = [line.file for line in lines] if lines else [None] * len(names)
    return [StackFrame(name, file) for name, file in zip(names, files)]


def stack_text(stack: Stack) -> str:
    return ";".join(frame.name for frame in stack)


def check_metric(profile: Profile, metric: str, ranks: Sequence[int]) -> None:
    """ProfileError when a rank of ranks lacks what metric needs (the on/off-CPU split:
    format 2.4): a clear refusal rather than zeros or the whole sampled time."""
    if not METRICS[metric].offcpu:
        return
    old = sorted({profile.callpaths[r].version for r in ranks
                  if not profile.callpaths[r].knows_offcpu()})
    if old:
        raise ProfileError(f"metric {metric} needs profile format "
                           f"{'.'.join(map(str, OFFCPU_FORMAT))} or later: this profile "
                           f"(format {', '.join(old)}) does not split sampled time into "
                           f"on-CPU and off-CPU time")


def collect_stacks(profile: Profile, symbols: SymbolTable, metric: str,
                   rank: Optional[int] = None, thread: Optional[int] = None,
                   with_files: bool = False) -> Stacks:
    """with_files: frames of one name in different source files stay apart (otherwise a
    stack is its names).  ProfileError when the profile has no call paths or rank / thread
    are not in it."""
    chosen = METRICS[metric]
    tree = build_tree(profile, rank, thread)
    check_metric(profile, metric, tree.ranks)
    sums: dict[Stack, int] = {}
    paths: dict[int, Stack] = {id(tree.root): ()}
    for node in tree.root.walk():
        if node.parent is None:
            continue
        stack = paths[id(node.parent)] + tuple(_frames(node, symbols, with_files))
        paths[id(node)] = stack
        value = chosen.value(node)
        if value:
            sums[stack] = sums.get(stack, 0) + value
    stacks = []
    for stack, value in sums.items():
        if chosen.time:
            value = (value + NS_PER_US // 2) // NS_PER_US
        if value:
            stacks.append((stack, value))
    stacks.sort(key=lambda sv: (stack_text(sv[0]), [f.file or "" for f in sv[0]]))
    parts = [f"rank {rank}" if rank is not None else "all ranks",
             f"thread {thread}" if thread is not None else "all threads"]
    return Stacks(chosen, ", ".join(parts), stacks)
