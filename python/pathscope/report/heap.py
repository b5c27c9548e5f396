"""The heap and stack-walk sections of the text report.

Heap (only for profiles recorded with PATHSCOPE_HEAP=on): per rank the allocations, bytes,
peak (and when), bytes still live at the end (leaks) and the allocation rate -- the density
of stack walks the run asked for; then the top allocating paths, the paths holding the
memory at the peak, the leaking paths, and a sparkline of live bytes over time per rank.
Stack walks (every profile with call paths): the traversal mode and how often a walk
repeated as a full walk agreed with it.

Display choices (docs/user-guide.md says the same):
- A path is shown by its frames below `main` (all frames when there is no main), the
  innermost PATH_FRAMES of them, joined with ` > `; the allocator function is the last one.
- Path rows are summed over ranks and threads (pathscope.calltree merges by frame identity).
- The sparkline has one character per 1/SPARK_WIDTH of the longest rank's timeline, the
  most live bytes within it, scaled to the largest peak of all ranks.
- A tree merged in the job (tree.tsv only): the `heap.*` scalars' totals and per-rank
  min/mean/max in place of the per-rank table, the same top paths, no timeline (it is per
  rank).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional

from pathscope.calltree import MergedNode
from pathscope.cct import HEAP
from pathscope.reader import Profile
from pathscope.report.calltree import STATS_HEADERS
from pathscope.report.layout import INDENT, MAIN, TOP_PATHS, table
from pathscope.sources.heap import HeapSummary
from pathscope.stats import Stats
from pathscope.symbols import SymbolTable
from pathscope.units import format_bytes, format_percent, format_time

if TYPE_CHECKING:
    from pathscope.frames import ProfileFrames

PATH_FRAMES = 5
SPARK_WIDTH = 60
SPARK_CHARS = "▁▂▃▄▅▆▇█"


def sections(frames: "ProfileFrames") -> list[str]:
    """The heap section of the tables' call tree with every thread (the MPI library's too)."""
    profile = frames.profile
    if profile.reduced_only():
        return _reduced_heap(frames.all_threads())
    out = []
    heaps = {r: p.heap for r, p in sorted(profile.callpaths.items()) if p.heap is not None}
    if heaps:
        # a rank file cut short may keep its heap line but lose its tree
        out.append(_heap(profile, heaps, frames.all_threads() if profile.has_call_paths()
                         else None))
    return out


def _count(n: float) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.2f} G"
    if n >= 1e6:
        return f"{n / 1e6:.2f} M"
    if n >= 1e4:
        return f"{n / 1e3:.1f} k"
    return f"{n:,.0f}"


def path_label(node: MergedNode, symbols: SymbolTable) -> str:
    names: list[str] = []
    for frame in node.path():
        names.extend(symbols.names(frame))
    if MAIN in names:
        names = names[len(names) - names[::-1].index(MAIN) - 1:]
    shown = names[-PATH_FRAMES:]
    return ("... > " if len(shown) < len(names) else "") + " > ".join(shown)


def _elapsed_ns(profile: Profile, rank: int) -> int:
    threads = profile.callpaths[rank].threads
    main = threads.get(0)
    return main.elapsed_ns if main is not None else 0


def _heap(profile: Profile, heaps: dict[int, HeapSummary],
          frames: Optional["ProfileFrames"]) -> str:
    """frames: the tables of the call tree with every thread (None: no call paths)."""
    modes = sorted({h.traversal for h in heaps.values()})
    lines = [f"Heap (allocations by call path on {len(heaps)} rank{'s' if len(heaps) != 1 else ''}; "
             f"stack walks: {', '.join(modes)})"]
    rows = []
    for rank, h in heaps.items():
        elapsed = _elapsed_ns(profile, rank)
        rate = f"{_count(h.allocs / (elapsed / 1e9))}/s" if elapsed else "-"
        rows.append([str(rank), f"{h.allocs:,}", format_bytes(h.alloc_bytes), f"{h.frees:,}",
                     format_bytes(h.peak_bytes), format_time(h.peak_ns),
                     format_bytes(h.live_bytes), rate])
    lines.append(table(["rank", "allocations", "allocated", "frees", "peak", "peak at",
                        "live at end", "allocations/s"], rows, "rrrrrrrr"))
    untracked = sum(h.untracked_allocs for h in heaps.values())
    foreign = sum(h.foreign_frees for h in heaps.values())
    if untracked or foreign:
        lines.append(f"{INDENT}not on a path: {untracked:,} allocations before start-up, inside "
                     f"pathscope or after the end; {foreign:,} frees of blocks pathscope never "
                     f"handed out")
    lines.extend(_top_paths(frames) if frames is not None else [])
    lines.append(_timelines(heaps))
    return "\n".join(lines)


def _top_paths(frames: "ProfileFrames") -> list[str]:
    """The top allocating paths, the paths live at the peak and the leaking paths: the heap
    leaves of the `nodes` table (values summed over the ranks), largest first."""
    tree = frames.tree
    if tree is None or not any(n.frame.kind == HEAP for n in tree.root.walk()):
        return []               # (no table to build: most profiles have no heap)
    nodes = frames.nodes
    leaves = nodes[nodes["kind"] == HEAP].assign(
        leaked=lambda n: n["alloc_bytes"] - n["freed_bytes"],
        live=lambda n: n["allocs"] - n["frees"])
    symbols = frames.symbols

    def top(title: str, value: str, blocks: str) -> Optional[str]:
        chosen = leaves[leaves[value] > 0].sort_values(value, ascending=False, kind="stable")
        if chosen.empty:
            return None
        total = int(chosen[value].sum())
        rows = [[format_bytes(v), format_percent(v / total), f"{n:,}",
                 path_label(frames.merged_node(i), symbols)]
                for i, v, n in zip(chosen["node"].head(TOP_PATHS), chosen[value].head(TOP_PATHS),
                                   chosen[blocks].head(TOP_PATHS))]
        return (f"\n{INDENT}{title} ({min(TOP_PATHS, len(chosen))} of {len(chosen)} paths)\n"
                + table(["bytes", "%", "blocks", "path"], rows, "rrrl", INDENT * 2))

    allocated = top("Top allocating paths", "alloc_bytes", "allocs")
    at_peak = top("Live at the peak", "peak_bytes", "allocs")
    leaked = top("Live at the end (leaks)", "leaked", "live")
    return [part for part in (allocated, at_peak, leaked) if part]


def _reduced_heap(frames: "ProfileFrames") -> list[str]:
    """A tree merged in the job: the `heap.*` scalars per rank, and the top paths."""
    profile, tree = frames.profile, frames.tree
    assert profile.tree is not None and tree is not None
    rows = scalar_rows(profile.tree.scalars, "heap.")
    paths = _top_paths(frames)
    if not rows and not paths:
        return []
    lines = [f"Heap (allocations by call path, merged in the job over {len(tree.ranks)} ranks; "
             f"per rank: min, mean, max)"]
    if rows:
        lines.append(table(["", "total", *STATS_HEADERS], rows, "lrrrr"))
    return ["\n".join(lines + paths)]


def scalar_rows(scalars: Mapping[str, Stats], prefix: str) -> list[list[str]]:
    """One row per tree.tsv scalar of prefix: its name without the prefix, the total and the
    per-rank min, mean and max (bytes, ns or counts by the name's ending)."""
    rows = []
    for name, stats in sorted(scalars.items()):
        if name.startswith(prefix):
            show = (format_bytes if "bytes" in name else format_time if name.endswith("_ns")
                    else (lambda v: f"{v:,.0f}"))
            rows.append([name[len(prefix):], show(stats.sum),
                         f"{show(stats.min or 0)} ({stats.min_rank})", show(stats.mean),
                         f"{show(stats.max or 0)} ({stats.max_rank})"])
    return rows


def sparkline(points: list[tuple[int, int]], end_ns: int, top: int,
              width: int = SPARK_WIDTH) -> str:
    """points: (time_ns, most live bytes since the previous point), in time order."""
    if not points or end_ns <= 0 or top <= 0:
        return ""
    cells = [-1] * width
    for t, value in points:
        i = min(width - 1, t * width // end_ns)
        cells[i] = max(cells[i], value)
    last = 0
    out = []
    for value in cells:
        if value < 0:
            value = last   # no point in this cell: the heap stayed as it was
        last = value
        out.append(SPARK_CHARS[min(len(SPARK_CHARS) - 1, value * len(SPARK_CHARS) // (top + 1))])
    return "".join(out)


def _timelines(heaps: dict[int, HeapSummary]) -> str:
    ends = {r: max([p.time_ns for p in h.timeline] + [h.peak_ns]) for r, h in heaps.items()}
    end = max(ends.values(), default=0)
    top = max((h.peak_bytes for h in heaps.values()), default=0)
    lines = [f"\n{INDENT}Live heap over time (one character = {format_time(end / SPARK_WIDTH)}; "
             f"full height = {format_bytes(top)})"]
    for rank, h in heaps.items():
        points = [(p.time_ns, p.max_bytes) for p in h.timeline] + [(h.peak_ns, h.peak_bytes)]
        points.sort()
        lines.append(f"{INDENT * 2}rank {rank}  {sparkline(points, end, top)}  peak "
                     f"{format_bytes(h.peak_bytes)} at {format_time(h.peak_ns)}")
    return "\n".join(lines)
