"""The exportable tables of a profile, independent of the file format.

A Table is a list of column names and rows of plain values: int, float (seconds), str, None
(unknown) and, for `hist`, a dict {bin: count} (docs/format.md, Histograms).  Text fields keep
the profile's spelling, including `-` for "none".

TABLES lists every table once (TableSpec: name, --help phrase, columns, builder, order),
the core's here and the measurement sources' from pathscope.sources; each
builder's docstring says what a row is.  `pathscope export --table` and its --help read it.
"""
from __future__ import annotations

from typing import Any, Iterator

from pathscope import ranges
from pathscope.reader import TOTAL_COMM, UNDEFINED_RANK, OpStat, Profile
from pathscope.sources import SOURCES
# Table, TableSpec: importable from here too (they were defined here)
from pathscope.sources.base import Table, TableSpec  # noqa: F401
from pathscope.units import seconds


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
    """One row per (communicator, operation), without the `*` totals."""
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
    """The `*` rows: per operation, totals over all communicators of each rank."""
    rows = []
    for stat in profile.op_totals():
        row = {"op": stat.op}
        row.update(_stat_values(stat))
        rows.append(row)
    return Table(OPS_COLUMNS, rows)


def comms_table(profile: Profile) -> Table:
    """One row per communicator."""
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
    """One row per rank of MPI_COMM_WORLD (status `missing` when it has no rank file,
    `unreadable` when its file breaks a rule of the format)."""
    def rows() -> Iterator[dict[str, Any]]:
        for info in profile.ranks:
            known = info.status != "missing" or info.wall_ns > 0
            yield {"rank": info.rank, "host": info.host or None, "status": info.status,
                   "wall_s": seconds(info.wall_ns) if known else None,
                   "mpi_s": seconds(info.mpi_ns) if known else None,
                   "mpi_fraction": (round(info.mpi_ns / info.wall_ns, 6) if info.wall_ns
                                    else None),
                   "pid": info.pid}
    return Table(RANKS_COLUMNS, rows())


WARNINGS_COLUMNS = ["rank", "key", "count", "first_s", "text"]


def warnings_table(profile: Profile) -> Table:
    """One row per rank and warning key: the problems the runtime reported (format 2.3)."""
    rows = []
    for info in profile.ranks:
        for w in info.warnings:
            rows.append({"rank": info.rank, "key": w.key, "count": w.count,
                         "first_s": seconds(w.first_ns), "text": w.text})
    return Table(WARNINGS_COLUMNS, rows)


THREADS_COLUMNS = ["rank", "thread", "tid", "mpi_runtime", "elapsed_s", "mpi_s", "sampled_s",
                   "oncpu_s", "offcpu_s", "cpu_s", "samples"]


def threads_table(profile: Profile) -> Table:
    """Call paths: one row per rank and thread: elapsed, MPI and sampled time from its tree
    (sampled_s = oncpu_s + offcpu_s; elapsed_s = mpi_s + sampled_s within 1 ns per node), the
    sampled time on and off the CPU, and the thread's exact CPU time.  The split and the CPU
    time are None before format 2.4, cpu_s also when the runtime could not read it."""
    rows = []
    for rank, paths in sorted(profile.callpaths.items()):
        split = paths.knows_offcpu()
        for index, thread in paths.threads.items():
            sampled = sum(n.sample_ns for n in thread.nodes)
            offcpu = sum(n.offcpu_ns for n in thread.nodes)
            rows.append({"rank": rank, "thread": index, "tid": thread.tid,
                         "mpi_runtime": int(thread.runtime_thread(paths.modules)),
                         "elapsed_s": seconds(thread.elapsed_ns),
                         "mpi_s": seconds(sum(n.mpi_ns for n in thread.nodes)),
                         "sampled_s": seconds(sampled),
                         "oncpu_s": seconds(sampled - offcpu) if split else None,
                         "offcpu_s": seconds(offcpu) if split else None,
                         "cpu_s": seconds(thread.cpu_ns) if split and thread.cpu_ns else None,
                         "samples": thread.samples_kept})
    return Table(THREADS_COLUMNS, rows)


# The tables of the core and of the sources not yet in pathscope.sources; with the sources'
# tables, by order (the order of --help and of TABLES).
_CORE = (
    TableSpec("comm-ops", "per communicator and operation", COMM_OPS_COLUMNS, comm_ops_table,
              10),
    TableSpec("ops", "per operation, over all communicators", OPS_COLUMNS, ops_table, 11),
    TableSpec("comms", "communicators", COMMS_COLUMNS, comms_table, 12),
    TableSpec("ranks", "", RANKS_COLUMNS, ranks_table, 20),
    TableSpec("warnings", "the runtime's warnings per rank", WARNINGS_COLUMNS, warnings_table,
              30),
    TableSpec("threads", "per thread: elapsed, MPI, on-CPU, off-CPU and CPU time",
              THREADS_COLUMNS, threads_table, 40),
)
TABLES: dict[str, TableSpec] = {spec.name: spec for spec in sorted(
    _CORE + tuple(t for source in SOURCES for t in source.tables), key=lambda t: t.order)}
DEFAULT_TABLE = "comm-ops"    # `pathscope export` without --table


def tables_help() -> str:
    """The table list of `pathscope export --help`: `name (help), name, ...`."""
    return ", ".join(f"{s.name} ({s.help})" if s.help else s.name for s in TABLES.values())


def build_table(profile: Profile, name: str) -> Table:
    if name not in TABLES:
        raise ValueError(f"unknown table {name!r} (known: {', '.join(TABLES)})")
    return TABLES[name].build(profile)
