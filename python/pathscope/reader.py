"""Reads a profile directory (docs/format.md, formats 1.x and 2.x) into plain dataclasses.

    profile = load_profile("pathscope-stencil-20250101-120000")
    profile.ops[("W", "MPI_Send")].calls
    profile.comms["W_a2"].members_list
    profile.callpaths[0].threads[0].nodes      # format 2.x: each rank's CCTs (pathscope.cct)

Rules this module keeps (the contract is docs/format.md; these are its reader-side duties):
- profile.tsv is used when present (source "profile"); otherwise the rank files are merged
  exactly as the in-job reduction (runtime/output/reduce.c) does (source "ranks").
- The rank files are always read too: they say which ranks are missing, were cut short (no
  `end` line) or ended with a status other than `complete`.
- A newer major format version is refused (FormatVersionError); unknown line types and
  trailing fields (newer minor versions) are ignored.  1.x files simply have no call paths.
- Call paths come from the rank files only (profile.tsv has none); pathscope.cct checks them.
- A file without its `end` line was cut short: its last line may be partial and is dropped
  if it does not parse.  Any other malformed line is a ProfileError naming file and line.
Nothing here prints or exits.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional, Union

from pathscope import ranges
from pathscope.cct import CallPathParser, RankCallPaths
from pathscope.errors import ProfileError
# parse_hist, unescape, READER_MAJOR: importable from here too (they were defined here)
from pathscope.tsv import (READER_MAJOR, Record, parse_hist, parse_records,  # noqa: F401
                           read_file, unescape)

PROFILE_FILE = "profile.tsv"
RANKS_DIR = "ranks"
PROFILE_MAGIC = "pathscope-profile"
RANK_MAGIC = "pathscope-rank"
TOTAL_COMM = "*"     # per-operation totals over all communicators of a rank
NO_COMM = "-"        # operations bound to no communicator, and calls that returned an error
UNDEFINED_RANK = -32766
STATUS_COMPLETE = "complete"
STATUS_MISSING = "missing"
REASON_NO_END = "no end line"

_RANK_FILE = re.compile(r"^rank-(\d+)\.tsv$")
_PARTIAL_RANK_FILE = re.compile(r"^rank-(\d+)\.tsv\.tmp$")
_RANK_META = ("command", "tool_version", "mpi_library")   # also in profile.tsv


# ---- the data model -----------------------------------------------------------------------

@dataclass
class RankInfo:
    rank: int
    host: str
    wall_ns: int
    mpi_ns: int
    status: str                   # complete | abort N | signal N | signal N before-init |
                                  # exit-without-finalize | missing (no rank file)
    pid: Optional[int] = None
    thread_multiple: bool = False
    counters: dict[str, int] = field(default_factory=dict)  # counter_* lines, prefix removed
    has_end: bool = True          # False: the rank file was cut short


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

    @property
    def is_inter(self) -> bool:
        return self.remote_size > 0


@dataclass
class OpStat:
    comm: str
    op: str
    calls: int                    # summed over the nranks ranks
    bytes: int                    # summed over the nranks ranks
    time_sum_ns: int
    time_min_ns: int              # per-rank totals; rank_min / rank_max: lowest rank on ties
    rank_min: int
    time_max_ns: int
    rank_max: int
    nranks: int                   # ranks that called op on comm
    hist: dict[int, int]          # message-size bin -> count (docs/format.md, Histograms)

    @property
    def time_mean_ns(self) -> float:
        return self.time_sum_ns / self.nranks if self.nranks else 0.0


@dataclass
class Profile:
    meta: dict[str, Union[str, int]]       # format_version, tool_version, program, command, mpi_library,
                                  # start_unix_ns (those the source records)
    nranks: int
    source: str                   # "profile" (profile.tsv) or "ranks" (merged rank files)
    ranks: list[RankInfo]         # by rank; ranks without a rank file have status "missing"
    comms: dict[str, Comm]        # by name, sorted
    ops: dict[tuple[str, str], OpStat]  # by (comm, op), sorted; includes the "*" totals
    missing_ranks: list[int]      # no rank file
    incomplete_ranks: list[tuple[int, str]]  # (rank, status) for status != complete, or
                                  # (rank, "no end line") for a file cut short
    path: Optional[Path] = None
    partial_rank_files: list[int] = field(default_factory=list)  # rank-N.tsv.tmp left behind
    callpaths: dict[int, RankCallPaths] = field(default_factory=dict)  # by world rank: the
                                  # rank files' call paths (format 2.x; empty threads for 1.x)

    def has_call_paths(self) -> bool:
        """True when some rank unwound something (not for 1.x profiles, nor for runs with the
        sampler off and every MPI group counted)."""
        return any(paths.has_paths() for paths in self.callpaths.values())

    def host_of(self, rank: int) -> Optional[str]:
        for info in self.ranks:
            if info.rank == rank:
                return info.host or None
        return None

    def comm_ops(self, comm: str) -> list[OpStat]:
        return [s for (c, _), s in self.ops.items() if c == comm]

    def op_totals(self) -> list[OpStat]:
        """The per-operation totals over all communicators (the `*` rows)."""
        return self.comm_ops(TOTAL_COMM)

    def comm_time_ns(self, comm: str) -> int:
        """Time in all operations on comm, summed over ranks."""
        return sum(s.time_sum_ns for s in self.comm_ops(comm))


# ---- profile.tsv ----------------------------------------------------------------------------

@dataclass
class _ProfileTsv:
    meta: dict[str, Union[str, int]]
    nranks: Optional[int]
    ranks: dict[int, tuple[str, int, int]]   # rank -> host, wall_ns, mpi_ns
    comms: dict[str, Comm]
    ops: dict[tuple[str, str], OpStat]
    has_end: bool


def _read_profile_tsv(path: Path) -> _ProfileTsv:
    file = read_file(path, PROFILE_MAGIC)
    result = _ProfileTsv({"format_version": file.version}, None, {}, {}, {}, file.has_end)

    def text_meta(record: Record) -> None:
        record.need(1)
        result.meta[record.kind] = record.text(0)

    def int_meta(record: Record) -> None:
        record.need(1)
        result.meta[record.kind] = record.number(0)

    def nranks(record: Record) -> None:
        record.need(1)
        result.nranks = record.number(0)

    def rank(record: Record) -> None:
        record.need(4)
        result.ranks[record.number(0)] = (record.text(1), record.number(2), record.number(3))

    def comm(record: Record) -> None:
        record.need(12)
        c = record.text
        try:
            members_list = ranges.expand(c(6))
        except ValueError as e:
            raise ProfileError(f"{record.where}: {e}") from None
        name = c(0)
        if name in result.comms:
            raise ProfileError(f"{record.where}: communicator {name} described twice")
        result.comms[name] = Comm(name, record.number(1), record.number(2), c(3), c(4), record.number(5),
                                  c(6), members_list, c(7), record.number(8), record.number(9),
                                  record.number(10), record.number(11), *_freed_fields(record, 12))

    def op(record: Record) -> None:
        record.need(11)
        key = (record.text(0), record.text(1))
        if key in result.ops:
            raise ProfileError(f"{record.where}: operation {key[1]} on {key[0]} listed twice")
        result.ops[key] = OpStat(key[0], key[1], record.number(2), record.number(3), record.number(4),
                                 record.number(5), record.number(6), record.number(7), record.number(8),
                                 record.number(9), record.hist(10))

    handlers: dict[str, Callable[[Record], None]] = {
        k: text_meta for k in ("tool_version", "program", "command", "mpi_library")}
    handlers.update(start_unix_ns=int_meta, nranks=nranks, rank=rank, comm=comm, op=op)
    parse_records(file, handlers)
    return result


# ---- rank files -----------------------------------------------------------------------------

@dataclass
class _RankComm:
    comm: Comm
    my_rank: int


@dataclass
class _RankFile:
    rank: int
    size: Optional[int]
    info: RankInfo
    program: Optional[str]
    start_unix_ns: Optional[int]
    version: str
    comms: list[_RankComm]
    ops: dict[tuple[str, str], tuple[int, int, int, dict[int, int]]]  # calls, bytes, ns, hist
    meta: dict[str, str] = field(default_factory=dict)   # command, tool_version, mpi_library
    callpaths: Optional[RankCallPaths] = None


def _read_rank_file(path: Path, rank_from_name: int) -> _RankFile:
    file = read_file(path, RANK_MAGIC)
    info = RankInfo(rank_from_name, "", 0, 0, "", has_end=file.has_end)
    result = _RankFile(rank_from_name, None, info, None, None, file.version, [], {})
    callpaths = CallPathParser(str(path))

    def rank(record: Record) -> None:
        record.need(1)
        result.rank = info.rank = record.number(0)

    def size(record: Record) -> None:
        record.need(1)
        result.size = record.number(0)

    def text(record: Record) -> None:
        record.need(1)
        value = record.text(0)
        if record.kind == "status":
            info.status = value
        elif record.kind == "host":
            info.host = value
        elif record.kind == "program":
            result.program = value
        else:
            result.meta[record.kind] = value

    def number(record: Record) -> None:
        record.need(1)
        value = record.number(0)
        if record.kind == "pid":
            info.pid = value
        elif record.kind == "wall_ns":
            info.wall_ns = value
        elif record.kind == "mpi_ns":
            info.mpi_ns = value
        elif record.kind == "thread_multiple":
            info.thread_multiple = bool(value)
        elif record.kind == "start_unix_ns":
            result.start_unix_ns = value
        else:
            info.counters[record.kind[len("counter_"):]] = value

    def comm(record: Record) -> None:
        record.need(13)
        c = record.text
        try:
            members_list = ranges.expand(c(7))
        except ValueError as e:
            raise ProfileError(f"{record.where}: {e}") from None
        result.comms.append(_RankComm(
            Comm(c(0), record.number(1), record.number(2), c(4), c(5), record.number(6), c(7),
                 members_list, c(8), record.number(9), record.number(10), record.number(11),
                 record.number(12), *_freed_fields(record, 13)),
            record.number(3)))

    def op(record: Record) -> None:
        record.need(6)
        key = (record.text(0), record.text(1))
        calls, nbytes, ns, hist = record.number(2), record.number(3), record.number(4), record.hist(5)
        if key in result.ops:   # not written by the runtime; add up rather than lose data
            c0, b0, t0, h0 = result.ops[key]
            calls, nbytes, ns = calls + c0, nbytes + b0, ns + t0
            hist = _add_hist(h0, hist)
        result.ops[key] = (calls, nbytes, ns, hist)

    handlers: dict[str, Callable[[Record], None]] = {
        "rank": rank, "size": size, "status": text, "host": text, "program": text,
        "comm": comm, "op": op}
    handlers.update({kind: text for kind in _RANK_META})
    handlers.update(callpaths.handlers())
    for kind in ("pid", "start_unix_ns", "wall_ns", "mpi_ns", "thread_multiple"):
        handlers[kind] = number
    for record in file.records:
        if record.kind.startswith("counter_"):
            handlers[record.kind] = number
    parse_records(file, handlers)
    if not info.status:
        info.status = "unknown"
    result.callpaths = callpaths.finish(result.rank, file.has_end)
    return result


def _freed_fields(record: Record, first: int) -> tuple[int, ...]:
    """The (2.3) trailing fields of a `comm` line: freed sends, freed receives, their posted
    capacity, failed requests; all 0 in files written before 2.3."""
    if len(record.fields) < first + 4:
        return 0, 0, 0, 0
    return tuple(record.number(first + i) for i in range(4))


def _add_hist(a: dict[int, int], b: dict[int, int]) -> dict[int, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def _scan_rank_files(directory: Path) -> tuple[dict[int, Path], list[int]]:
    """(rank -> ranks/rank-N.tsv, ranks with only a rank-N.tsv.tmp)."""
    found: dict[int, Path] = {}
    partial: list[int] = []
    ranks_dir = directory / RANKS_DIR
    if not ranks_dir.is_dir():
        return found, partial
    try:
        entries = sorted(ranks_dir.iterdir())
    except OSError as e:
        raise ProfileError(f"cannot read {ranks_dir}: {e.strerror}") from e
    for entry in entries:
        match = _RANK_FILE.match(entry.name)
        if match:
            found[int(match.group(1))] = entry
            continue
        match = _PARTIAL_RANK_FILE.match(entry.name)
        if match:
            partial.append(int(match.group(1)))
    return found, [r for r in partial if r not in found]


# ---- merging rank files (the in-job reduction, in Python) -------------------------------------

def merge_op(into: OpStat, other: OpStat) -> None:
    """Adds other into into, as reduce.c's merge_op: lowest rank wins ties."""
    into.calls += other.calls
    into.bytes += other.bytes
    into.time_sum_ns += other.time_sum_ns
    if (other.time_min_ns < into.time_min_ns
            or (other.time_min_ns == into.time_min_ns and other.rank_min < into.rank_min)):
        into.time_min_ns, into.rank_min = other.time_min_ns, other.rank_min
    if (other.time_max_ns > into.time_max_ns
            or (other.time_max_ns == into.time_max_ns and other.rank_max < into.rank_max)):
        into.time_max_ns, into.rank_max = other.time_max_ns, other.rank_max
    into.nranks += other.nranks
    into.hist = _add_hist(into.hist, other.hist)


def _rank_op_records(rank_file: _RankFile) -> Iterable[OpStat]:
    """One rank's records: its own (comm, op) rows plus its `*` per-operation totals."""
    totals: dict[str, tuple[int, int, int, dict[int, int]]] = {}
    r = rank_file.rank
    for (comm, op), (calls, nbytes, ns, hist) in rank_file.ops.items():
        if comm == TOTAL_COMM:
            continue            # rank files carry no totals; never count them twice
        yield OpStat(comm, op, calls, nbytes, ns, ns, r, ns, r, 1, dict(hist))
        c0, b0, t0, h0 = totals.get(op, (0, 0, 0, {}))
        totals[op] = (c0 + calls, b0 + nbytes, t0 + ns, _add_hist(h0, hist))
    for op, (calls, nbytes, ns, hist) in totals.items():
        yield OpStat(TOTAL_COMM, op, calls, nbytes, ns, ns, r, ns, r, 1, hist)


def merge_rank_files(rank_files: Iterable[_RankFile]) -> tuple[dict[str, Comm],
                                                               dict[tuple[str, str], OpStat]]:
    comms: dict[str, Comm] = {}
    ops: dict[tuple[str, str], OpStat] = {}
    for rank_file in rank_files:
        for record in _rank_op_records(rank_file):
            key = (record.comm, record.op)
            if key in ops:
                merge_op(ops[key], record)
            else:
                ops[key] = record
        for rank_comm in rank_file.comms:
            c = rank_comm.comm
            if c.name not in comms:
                comms[c.name] = Comm(c.name, c.size, c.remote_size, c.parent, c.creator, c.freed,
                                     c.members, list(c.members_list), c.topology, c.sent_msgs,
                                     c.sent_bytes, c.recv_msgs, c.recv_bytes, c.freed_sends,
                                     c.freed_recvs, c.freed_recv_capacity, c.failed_requests)
                continue
            into = comms[c.name]
            into.sent_msgs += c.sent_msgs
            into.sent_bytes += c.sent_bytes
            into.recv_msgs += c.recv_msgs
            into.recv_bytes += c.recv_bytes
            into.freed_sends += c.freed_sends
            into.freed_recvs += c.freed_recvs
            into.freed_recv_capacity += c.freed_recv_capacity
            into.failed_requests += c.failed_requests
            into.freed = int(bool(into.freed and c.freed))
    for comm in comms.values():
        _lowest_group_first(comm)
    return dict(sorted(comms.items())), dict(sorted(ops.items()))


def _lowest_group_first(comm: Comm) -> None:
    """An intercommunicator as profile.tsv describes it: the group holding the lowest world
    rank first (rank files write local|remote, which differs between the two sides)."""
    if not comm.is_inter or comm.members.count("|") != 1:
        return
    first, second = comm.members.split("|")
    try:
        a, b = ranges.expand(first), ranges.expand(second)
    except ValueError:
        return
    if b and (not a or min(b) < min(a)):
        comm.members = f"{second}|{first}"
        comm.members_list = b + a
        comm.size, comm.remote_size = len(b), len(a)


# ---- the entry point ------------------------------------------------------------------------

def _profile_directory(path: Path) -> Path:
    if not path.exists():
        raise ProfileError(f"profile directory not found: {path}")
    if path.is_file() and path.name == PROFILE_FILE:
        return path.parent
    if not path.is_dir():
        raise ProfileError(f"not a profile directory: {path}")
    return path


def load_profile(path: Union[str, Path]) -> Profile:
    """Reads the profile directory at path (or its profile.tsv).  Raises ProfileError
    (FormatVersionError for a newer major format) with a one-line message."""
    directory = _profile_directory(Path(path))
    rank_paths, partial = _scan_rank_files(directory)
    profile_path = directory / PROFILE_FILE
    if not profile_path.exists() and not rank_paths:
        raise ProfileError(f"not a pathscope profile directory: {directory} "
                           f"(no {PROFILE_FILE} and no {RANKS_DIR}/rank-*.tsv)")
    rank_files = {}
    for rank_from_name, rank_path in sorted(rank_paths.items()):
        rank_file = _read_rank_file(rank_path, rank_from_name)
        rank_files[rank_file.rank] = rank_file
    rank_files = dict(sorted(rank_files.items()))

    if profile_path.exists():
        tsv = _read_profile_tsv(profile_path)
        source = "profile"
        meta = tsv.meta
        nranks = tsv.nranks if tsv.nranks is not None else (
            max(tsv.ranks) + 1 if tsv.ranks else len(rank_files))
        comms, ops = dict(sorted(tsv.comms.items())), dict(sorted(tsv.ops.items()))
        _complete_truncated_members(comms, rank_files)
        ranks = []
        for r in range(nranks):
            if r in rank_files:
                info = rank_files[r].info
                if r in tsv.ranks:
                    info.host, info.wall_ns, info.mpi_ns = tsv.ranks[r]
            else:
                host, wall, mpi = tsv.ranks.get(r, ("", 0, 0))
                info = RankInfo(r, host, wall, mpi, STATUS_MISSING)
            ranks.append(info)
    else:
        source = "ranks"
        comms, ops = merge_rank_files(rank_files.values())
        sizes = [f.size for f in rank_files.values() if f.size is not None]
        nranks = max(sizes + [max(rank_files) + 1])
        first = next(iter(rank_files.values()))
        meta = {"format_version": first.version}
        if first.program is not None:
            meta["program"] = first.program
        for key in _RANK_META:
            if key in first.meta:
                meta[key] = first.meta[key]
        starts = [f.start_unix_ns for f in rank_files.values() if f.start_unix_ns is not None]
        if starts:
            meta["start_unix_ns"] = (rank_files[0].start_unix_ns
                                     if 0 in rank_files and rank_files[0].start_unix_ns
                                     is not None else min(starts))
        ranks = [rank_files[r].info if r in rank_files else RankInfo(r, "", 0, 0, STATUS_MISSING)
                 for r in range(nranks)]
        ranks += [f.info for r, f in rank_files.items() if r >= nranks]

    missing = [info.rank for info in ranks if info.status == STATUS_MISSING]
    incomplete = []
    for info in ranks:
        if info.status == STATUS_MISSING:
            continue
        if not info.has_end:
            incomplete.append((info.rank, REASON_NO_END))
        elif info.status != STATUS_COMPLETE:
            incomplete.append((info.rank, info.status))
    callpaths = {r: f.callpaths for r, f in rank_files.items() if f.callpaths is not None}
    return Profile(meta, nranks, source, ranks, comms, ops, missing, incomplete, directory,
                   [r for r in partial if r in missing], callpaths)


def _complete_truncated_members(comms: dict[str, Comm], rank_files: dict[int, _RankFile]) -> None:
    """profile.tsv cuts member lists longer than 2,044 characters; the rank files have them
    whole, so take members_list from a rank file of a member where there is one."""
    for comm in comms.values():
        if not comm.members.endswith(ranges.TRUNCATION_MARK):
            continue
        for rank_file in rank_files.values():
            for rank_comm in rank_file.comms:
                if rank_comm.comm.name == comm.name:
                    comm.members_list = list(rank_comm.comm.members_list)
                    break
            else:
                continue
            break
