"""The exportable tables of a profile, independent of the file format.

A Table is a list of column names and rows of plain values: int, float (seconds), str, None
(unknown) and, for `hist`, a dict {bin: count} (docs/format.md, Histograms).  Text fields keep
the profile's spelling, including `-` for "none".

Tables:
  comm-ops  one row per (communicator, operation), without the `*` totals
  ops       the `*` rows: per operation, totals over all communicators of each rank
  comms     one row per communicator
  ranks     one row per rank of MPI_COMM_WORLD (status `missing` when it has no rank file)
  heap-timeline  heap profiling: one row per timeline point of each rank (live bytes over time)
  heap-ranks     heap profiling: one row per rank with its totals, peak and leaks
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from pathscope import ranges
from pathscope.reader import TOTAL_COMM, UNDEFINED_RANK, OpStat, Profile


@dataclass
class Table:
    columns: list[str]
    rows: list[dict[str, Any]]


def seconds(ns: float) -> float:
    return round(ns / 1e9, 9)


TIME_COLUMNS = ["time_min_s", "time_mean_s", "time_max_s", "rank_min", "rank_max", "nranks",
                "time_sum_s", "hist"]
COMM_OPS_COLUMNS = ["comm", "size", "op", "calls", "bytes"] + TIME_COLUMNS
OPS_COLUMNS = ["op", "calls", "bytes"] + TIME_COLUMNS
COMMS_COLUMNS = ["name", "size", "remote_size", "parent", "creator", "freed", "members", "hosts",
                 "topology", "sent_msgs", "sent_bytes", "recv_msgs", "recv_bytes"]
RANKS_COLUMNS = ["rank", "host", "status", "wall_s", "mpi_s", "mpi_fraction", "pid"]


def _stat_values(stat: OpStat) -> dict[str, Any]:
    return {"calls": stat.calls, "bytes": stat.bytes,
            "time_min_s": seconds(stat.time_min_ns), "time_mean_s": seconds(stat.time_mean_ns),
            "time_max_s": seconds(stat.time_max_ns), "rank_min": stat.rank_min,
            "rank_max": stat.rank_max, "nranks": stat.nranks,
            "time_sum_s": seconds(stat.time_sum_ns), "hist": dict(sorted(stat.hist.items()))}


def comm_ops_table(profile: Profile) -> Table:
    rows = []
    for (comm, op), stat in profile.ops.items():
        if comm == TOTAL_COMM:
            continue
        described = profile.comms.get(comm)
        row = {"comm": comm, "size": described.size if described else None, "op": op}
        row.update(_stat_values(stat))
        rows.append(row)
    return Table(COMM_OPS_COLUMNS, rows)


def ops_table(profile: Profile) -> Table:
    rows = []
    for stat in profile.op_totals():
        row = {"op": stat.op}
        row.update(_stat_values(stat))
        rows.append(row)
    return Table(OPS_COLUMNS, rows)


def comms_table(profile: Profile) -> Table:
    rows = []
    for comm in profile.comms.values():
        hosts = [profile.host_of(r) for r in comm.members_list if r != UNDEFINED_RANK]
        rows.append({"name": comm.name, "size": comm.size, "remote_size": comm.remote_size,
                     "parent": comm.parent, "creator": comm.creator, "freed": comm.freed,
                     "members": comm.members,
                     "hosts": ranges.compress_hosts(h for h in hosts if h),
                     "topology": comm.topology, "sent_msgs": comm.sent_msgs,
                     "sent_bytes": comm.sent_bytes, "recv_msgs": comm.recv_msgs,
                     "recv_bytes": comm.recv_bytes})
    return Table(COMMS_COLUMNS, rows)


def ranks_table(profile: Profile) -> Table:
    rows = []
    for info in profile.ranks:
        known = info.status != "missing" or info.wall_ns > 0
        rows.append({"rank": info.rank, "host": info.host or None, "status": info.status,
                     "wall_s": seconds(info.wall_ns) if known else None,
                     "mpi_s": seconds(info.mpi_ns) if known else None,
                     "mpi_fraction": round(info.mpi_ns / info.wall_ns, 6) if info.wall_ns else None,
                     "pid": info.pid})
    return Table(RANKS_COLUMNS, rows)


HEAP_TIMELINE_COLUMNS = ["rank", "time_s", "live_bytes", "max_bytes"]
HEAP_RANKS_COLUMNS = ["rank", "traversal", "allocs", "alloc_bytes", "frees", "freed_bytes",
                      "peak_bytes", "peak_time_s", "leaked_bytes", "untracked_allocs",
                      "foreign_frees"]


def _heap_ranks(profile: Profile):
    return [(rank, paths.heap) for rank, paths in sorted(profile.callpaths.items())
            if paths.heap is not None]


def heap_timeline_table(profile: Profile) -> Table:
    rows = []
    for rank, heap in _heap_ranks(profile):
        for point in heap.timeline:
            rows.append({"rank": rank, "time_s": seconds(point.time_ns),
                         "live_bytes": point.live_bytes, "max_bytes": point.max_bytes})
    return Table(HEAP_TIMELINE_COLUMNS, rows)


def heap_ranks_table(profile: Profile) -> Table:
    rows = []
    for rank, heap in _heap_ranks(profile):
        rows.append({"rank": rank, "traversal": heap.traversal, "allocs": heap.allocs,
                     "alloc_bytes": heap.alloc_bytes, "frees": heap.frees,
                     "freed_bytes": heap.freed_bytes, "peak_bytes": heap.peak_bytes,
                     "peak_time_s": seconds(heap.peak_ns), "leaked_bytes": heap.live_bytes,
                     "untracked_allocs": heap.untracked_allocs,
                     "foreign_frees": heap.foreign_frees})
    return Table(HEAP_RANKS_COLUMNS, rows)


TABLES: dict[str, Callable[[Profile], Table]] = {
    "comm-ops": comm_ops_table, "ops": ops_table, "comms": comms_table, "ranks": ranks_table,
    "heap-timeline": heap_timeline_table, "heap-ranks": heap_ranks_table}


def build_table(profile: Profile, name: str) -> Table:
    if name not in TABLES:
        raise ValueError(f"unknown table {name!r} (known: {', '.join(TABLES)})")
    return TABLES[name](profile)
