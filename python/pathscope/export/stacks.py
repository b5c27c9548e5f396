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
from typing import TYPE_CHECKING, Optional, Sequence

import pandas as pd

from pathscope.calltree import MergedNode, build_tree
from pathscope.cct import CODE_KINDS
from pathscope.errors import ProfileError
from pathscope.metrics import CALL_PATH_METRICS
from pathscope.metrics import METRICS as _REGISTRY
from pathscope.metrics import Metric
from pathscope.reader import Profile
from pathscope.symbols import SymbolTable
from pathscope.tsv import version_at_least

if TYPE_CHECKING:
    from pathscope.frames import ProfileFrames

NS_PER_US = 1000
# the metrics of the call-path formats, in --metric order (pathscope.metrics)
METRICS: dict[str, Metric] = {name: _REGISTRY[name] for name in CALL_PATH_METRICS}


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
    """ProfileError when a rank of ranks is older than the format metric needs (the on/off-CPU
    split: 2.4): a clear refusal rather than zeros or the whole sampled time."""
    chosen = METRICS[metric]
    if chosen.needs_format is None:
        return
    versions = ({profile.tree.version} if profile.reduced_only() and profile.tree
                else {profile.callpaths[r].version for r in ranks})
    old = sorted(v for v in versions if not version_at_least(v, *chosen.needs_format))
    if old:
        raise ProfileError(f"metric {metric} needs profile format "
                           f"{'.'.join(map(str, chosen.needs_format))} or later: this profile "
                           f"(format {', '.join(old)}) does not {chosen.needs_what}")


def collect_stacks(profile: Profile, symbols: SymbolTable, metric: str,
                   rank: Optional[int] = None, thread: Optional[int] = None,
                   with_files: bool = False) -> Stacks:
    """with_files: frames of one name in different source files stay apart (otherwise a
    stack is its names).  ProfileError when the profile has no call paths or rank / thread
    are not in it.  The values are the metric's formula over the columns of the chosen
    tree's `nodes` table (pathscope.frames), summed by stack with a pandas groupby."""
    from pathscope.frames import ProfileFrames

    chosen = METRICS[metric]
    tree = build_tree(profile, rank, thread)
    check_metric(profile, metric, tree.ranks)
    tables = ProfileFrames(profile, symbols, tree=tree)
    nodes = tables.nodes
    values = chosen.value(lambda name: nodes[name]).astype("int64")
    stacks = _node_stacks(tables, nodes["parent"].tolist(), symbols, with_files)
    counted = pd.DataFrame({"stack": stacks, "value": values.to_numpy()})
    counted = counted[(counted["value"] != 0) & (nodes["parent"].notna().to_numpy())]
    sums = counted.groupby("stack", sort=False)["value"].sum()
    if chosen.unit == "ns":     # exported in microseconds
        sums = (sums + NS_PER_US // 2) // NS_PER_US
    kept = [(stack, int(value)) for stack, value in sums.items() if value]
    kept.sort(key=lambda sv: (stack_text(sv[0]), [f.file or "" for f in sv[0]]))
    parts = [f"rank {rank}" if rank is not None else "all ranks",
             f"thread {thread}" if thread is not None else "all threads"]
    return Stacks(chosen, ", ".join(parts), kept)


def _node_stacks(tables: "ProfileFrames", parents: list, symbols: SymbolTable,
                 with_files: bool) -> list[Stack]:
    """Each row's stack: its parent's and its own frames (rows are parents first)."""
    stacks: list[Stack] = []
    for i, parent in enumerate(parents):
        if parent is None or parent is pd.NA:
            stacks.append(())
            continue
        stacks.append(stacks[parent] + tuple(_frames(tables.merged_node(i), symbols,
                                                     with_files)))
    return stacks
