"""The MPI wrappers: a rank's communicators and operations (`comm`, `op` lines), how each MPI
function group was recorded (`unwind` lines) and the per-communicator share of `mpi` nodes
(`pcomm` lines), docs/format.md.  Merging the ranks' comm and op lines into the profile's is
pathscope.reader's (the in-job reduction's rules).  Also MPI's metrics, its export tables
(comm-ops, ops, comms, ranks) and its report sections (summary, communicators, consistency:
pathscope.report.mpi).

    rank_paths.unwind                              # {"p2p": "path", "rma": "count", ...}
    node.comms                                     # [PathComm] of an `mpi` node

Rules kept here: a `comm` line's member list holds its size (+ remote size) world ranks of
the run (or MPI_UNDEFINED) and names a communicator once; a `pcomm` line names an `mpi` node
of a thread that has a `thread` line (in a file cut short, a node lost in the cut is dropped).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

from pathscope import ranges
from pathscope.cct import MAX_ID, MPI, RankCallPaths, named_node
from pathscope.errors import ProfileError
from pathscope.merge import add_hist
from pathscope.sources.base import CALL_PATHS, Metric, Section, Source, Table, TableSpec
from pathscope.tsv import MAX_WORLD_SIZE, Record
from pathscope.units import seconds

if TYPE_CHECKING:
    from pathscope.frames import ProfileFrames
    from pathscope.reader import OpStat, Profile

UNDEFINED_RANK = -32766            # MPI_UNDEFINED in a member list
TOTAL_COMM = "*"     # per-operation totals over all communicators of a rank
NO_COMM = "-"        # operations bound to no communicator, and calls that returned an error


@dataclass
class Comm:
    name: str
    size: int
    remote_size: int              # 0 for intracommunicators
    parent: str                   # parent's name, or "-"
    creator: str                  # creating MPI operation, or "-"
    freed: int                    # 1 if every member freed it
    members: str                  # the member list as written (`0-3,6`, `0-1|2-3`, `-`)
    members_list: list[int]       # world ranks: first group, then the second (intercomms:
                                  # the group holding the lowest world rank first)
    topology: str                 # "cart ndims=2 ...", ..., or "-"
    sent_msgs: int
    sent_bytes: int
    recv_msgs: int
    recv_bytes: int
    # (2.3) requests freed by MPI_Request_free while outstanding: the sends are in sent_*
    # already; the receives' messages arrived unseen (not in recv_*), with at most
    # freed_recv_capacity bytes
    freed_sends: int = 0
    freed_recvs: int = 0
    freed_recv_capacity: int = 0
    # (2.3) requests of the application that ended with an error (a truncated receive, ...):
    # no message counted for them
    failed_requests: int = 0
    # (2.8) a folded row (name with '*'): freed communicators of one parent and kind added up.
    # folded: the communicators it stands for (profile: each once; a rank file: those whose
    # lowest world rank is that rank); memberships: of all ranks (a rank file: its own)
    folded: int = 0
    memberships: int = 0

    @property
    def is_inter(self) -> bool:
        return self.remote_size > 0

    @property
    def is_folded(self) -> bool:
        return self.memberships > 0


@dataclass
class RankComm:
    """A rank file's `comm` line: the communicator as this rank saw it."""
    comm: Comm                    # members_list left empty: expanded once, when merged
    my_rank: int


@dataclass
class PathComm:
    """One communicator's share of an `mpi` node (a `pcomm` line)."""
    comm: str
    calls: int
    time_ns: int
    bytes: int


def check_members(record: Record, index: int, size: int, remote_size: int,
                  world: Optional[int]) -> None:
    """A member list: well formed, size (+ remote_size) members unless `-` or cut (`...`),
    each a world rank below world or MPI_UNDEFINED."""
    text = record.fields[index]
    try:
        groups, truncated = ranges.parse(text)
    except ValueError as e:
        raise ProfileError(f"{record.where}: '{record.kind}' line: field {index + 2}: "
                           f"{e}") from None
    if text == "-":
        return
    counts = [ranges.span_count(g) for g in groups]
    expected = [size] + ([remote_size] if len(groups) > 1 else [])
    if len(groups) > 2 or (not truncated and counts != expected):
        raise ProfileError(f"{record.where}: '{record.kind}' line: member list "
                           f"'{_cut(text)}' does not hold size {size}"
                           f"{f' + remote size {remote_size}' if remote_size else ''} ranks")
    for spans in groups:
        for span in spans:
            first, last = span[0], span[-1]
            bad = [r for r in (first, last) if r != UNDEFINED_RANK and
                   (r < 0 or (world is not None and r >= world))]
            if bad or (first < 0 <= last):
                where = f" of {world}" if world is not None else ""
                raise ProfileError(f"{record.where}: '{record.kind}' line: member "
                                   f"{bad[0] if bad else first} is not a world rank{where}")


def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def folded_fields(record: Record, first: int) -> tuple[int, int]:
    """The (2.8) trailing fields of a `comm` line: the communicators a folded row stands
    for, and its memberships; 0 0 for a communicator's own line and in older files.  A row
    has memberships, and never fewer than the communicators it counts."""
    if len(record.fields) < first + 2:
        return 0, 0
    folded, memberships = record.number(first), record.number(first + 1)
    if folded > memberships:
        raise ProfileError(f"{record.where}: 'comm' line: {folded} folded communicators in "
                           f"{memberships} memberships cannot be")
    return folded, memberships


def freed_fields(record: Record, first: int) -> tuple[int, ...]:
    """The (2.3) trailing fields of a `comm` line: freed sends, freed receives, their posted
    capacity, failed requests; all 0 in files written before 2.3."""
    if len(record.fields) < first + 4:
        return 0, 0, 0, 0
    return tuple(record.number(first + i) for i in range(4))


class MpiParser:
    """The MPI lines of one rank file.  comms and ops are the rank's, for the reader's merge;
    finish() puts each `pcomm` on its node and returns the `unwind` groups."""

    def __init__(self, name: str, world: int):
        self.world = world
        self.comms: list[RankComm] = []
        # (comm, op) -> calls, bytes, ns, hist
        self.ops: dict[tuple[str, str], tuple[int, int, int, dict[int, int]]] = {}
        self.unwind: dict[str, str] = {}          # MPI function group -> path | count
        self.pcomms: list[tuple[int, int, PathComm, str]] = []
        self.seen_comms: set[str] = set()

    def handlers(self) -> dict[str, Callable[[Record], None]]:
        return {"comm": self._comm, "op": self._op, "unwind": self._unwind,
                "pcomm": self._pcomm}

    def _comm(self, record: Record) -> None:
        record.need(13)
        c = record.text
        size_, remote = record.number(1, MAX_WORLD_SIZE), record.number(2, MAX_WORLD_SIZE)
        check_members(record, 7, size_, remote, self.world)
        name_ = c(0)
        if name_ in self.seen_comms:
            raise ProfileError(f"{record.where}: communicator {name_} described twice")
        self.seen_comms.add(name_)
        self.comms.append(RankComm(
            Comm(name_, size_, remote, c(4), c(5), record.number(6, 1), c(7), [], c(8),
                 record.number(9), record.number(10), record.number(11), record.number(12),
                 *freed_fields(record, 13), *folded_fields(record, 17)),
            record.number(3, MAX_WORLD_SIZE)))

    def _op(self, record: Record) -> None:
        record.need(6)
        key = (record.text(0), record.text(1))
        calls, nbytes, ns, hist = (record.number(2), record.number(3), record.number(4),
                                   record.hist(5))
        if key in self.ops:   # not written by the runtime; add up rather than lose data
            c0, b0, t0, h0 = self.ops[key]
            calls, nbytes, ns = calls + c0, nbytes + b0, ns + t0
            hist = add_hist(h0, hist)
        self.ops[key] = (calls, nbytes, ns, hist)

    def _unwind(self, r: Record) -> None:
        r.need(2)
        self.unwind[r.text(0)] = r.text(1)

    def _pcomm(self, r: Record) -> None:
        r.need(6)
        self.pcomms.append((r.number(0, MAX_ID), r.number(1, MAX_ID),
                            PathComm(r.text(2), r.number(3), r.number(4), r.number(5)),
                            r.where))

    def finish(self, rank_paths: RankCallPaths, complete: bool) -> dict[str, str]:
        for thread_index, node_id, path_comm, where in self.pcomms:
            node = named_node(rank_paths, "pcomm", thread_index, node_id, where, complete)
            if node is None:
                continue
            if node.kind != MPI:
                raise ProfileError(f"{where}: 'pcomm' line names node {node_id} of thread "
                                   f"{thread_index}, a '{node.kind}' node (expected 'mpi')")
            node.comms.append(path_comm)
        return self.unwind


# ---- export tables ----------------------------------------------------------------------------

TIME_COLUMNS = ["time_min_s", "time_mean_s", "time_max_s", "rank_min", "rank_max", "nranks",
                "time_sum_s", "hist"]
COMM_OPS_COLUMNS = ["comm", "size", "op", "calls", "bytes"] + TIME_COLUMNS
OPS_COLUMNS = ["op", "calls", "bytes"] + TIME_COLUMNS
COMMS_COLUMNS = ["name", "size", "remote_size", "parent", "creator", "freed", "members", "hosts",
                 "topology", "sent_msgs", "sent_bytes", "recv_msgs", "recv_bytes", "folded",
                 "memberships"]
RANKS_COLUMNS = ["rank", "host", "status", "wall_s", "mpi_s", "mpi_fraction", "pid"]


def _stat_values(stat: "OpStat") -> dict[str, Any]:
    """An operation counted but not timed (a local query: format.md) has no ranks at the
    extremes of its time: rank_min and rank_max are None."""
    timed = bool(stat.time_sum_ns) or not stat.calls
    return {"calls": stat.calls, "bytes": stat.bytes,
            "time_min_s": seconds(stat.time_min_ns), "time_mean_s": seconds(stat.time_mean_ns),
            "time_max_s": seconds(stat.time_max_ns),
            "rank_min": stat.rank_min if timed else None,
            "rank_max": stat.rank_max if timed else None, "nranks": stat.nranks,
            "time_sum_s": seconds(stat.time_sum_ns), "hist": dict(sorted(stat.hist.items()))}


def comm_ops_table(profile: "Profile") -> Table:
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


def ops_table(profile: "Profile") -> Table:
    """The `*` rows: per operation, totals over all communicators of each rank."""
    rows = []
    for stat in profile.op_totals():
        row = {"op": stat.op}
        row.update(_stat_values(stat))
        rows.append(row)
    return Table(OPS_COLUMNS, rows)


def comms_table(profile: "Profile") -> Table:
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
                     "recv_bytes": comm.recv_bytes, "folded": comm.folded,
                     "memberships": comm.memberships})
    return Table(COMMS_COLUMNS, rows)


def ranks_table(profile: "Profile") -> Table:
    """One row per rank of MPI_COMM_WORLD (status `missing` when it has no rank file,
    `unreadable` when its file breaks a rule of the format)."""
    def rows() -> Iterator[dict[str, Any]]:
        for info in profile.ranks:
            # (0: not known -- a missing rank, or a reduced profile's: tree.tsv has the
            # statistics of the ranks' times, profile.tsv only their hosts)
            known = info.wall_ns > 0
            yield {"rank": info.rank, "host": info.host or None, "status": info.status,
                   "wall_s": seconds(info.wall_ns) if known else None,
                   "mpi_s": seconds(info.mpi_ns) if known else None,
                   "mpi_fraction": (round(info.mpi_ns / info.wall_ns, 6) if info.wall_ns
                                    else None),
                   "pid": info.pid}
    return Table(RANKS_COLUMNS, rows())


TABLES = (
    TableSpec("comm-ops", "per communicator and operation", COMM_OPS_COLUMNS, comm_ops_table,
              10),
    TableSpec("ops", "per operation, over all communicators", OPS_COLUMNS, ops_table, 11),
    TableSpec("comms", "communicators", COMMS_COLUMNS, comms_table, 12),
    TableSpec("ranks", "", RANKS_COLUMNS, ranks_table, 20),
)

METRICS = (
    Metric("visits", "mpi", "count", field="visits", column=0,
           exports=(CALL_PATHS,), order=50),
    Metric("mpi_ns", "mpi", "ns", field="mpi_ns", column=3),
    Metric("bytes", "mpi", "bytes", field="bytes", column=4,
           exports=(CALL_PATHS,), order=60),
    Metric("mpi_time", "mpi", "ns", formula=lambda v: v("mpi_ns"), exports=(CALL_PATHS,),
           order=20),
)


# ---- report ------------------------------------------------------------------------------------

def _summary(frames: "ProfileFrames") -> list[str]:
    from pathscope.report import mpi as mpi_report   # the analysis imports the sources
    return [mpi_report.summary(frames)]


def _communicators(frames: "ProfileFrames") -> list[str]:
    from pathscope.report import mpi as mpi_report
    return [mpi_report.communicators(frames)]


def _consistency(frames: "ProfileFrames") -> list[str]:
    from pathscope.report import mpi as mpi_report
    return [mpi_report.consistency(frames.profile)]


SOURCE = Source("mpi", MpiParser, metrics=METRICS, tables=TABLES,
                sections=(Section(20, _summary), Section(60, _communicators),
                          Section(70, _consistency)), node_kinds=(MPI,))
