"""Reads a profile directory (docs/format.md, formats 1.x and 2.x) into plain dataclasses.

    profile = load_profile("pathscope-stencil-20250101-120000")
    profile.ops[("W", "MPI_Send")].calls
    profile.comms["W_a2"].members_list
    profile.callpaths[0].threads[0].nodes      # format 2.x: each rank's CCTs (pathscope.cct)
    profile.problems()                         # why the profile is partial, or []

Rules this module keeps (the contract is docs/format.md; these are its reader-side duties,
listed there under "How readers check a profile"):
- One run: the files of the run of profile.tsv if it names one, else of the run most rank
  files name (ties: the newest by start_unix_ns).  Files of another run, or without a run
  line among files that have one, are stray: named (Profile.stray_files), never merged.  A
  profile whose files have no run line at all (format 2.2 and older) is read as one run.
- Never through a symbolic link, never a file that is not regular, never more than the
  limits of pathscope.tsv (line and file sizes) nor more than MAX_WORLD_SIZE ranks.
- profile.tsv is used when present, of the run and readable; otherwise the rank files are
  merged exactly as the in-job reduction (runtime/output/reduce.c) does (source "ranks"),
  and Profile.notes says why profile.tsv was not used.
- The rank files are always read too: they say which ranks are missing, were cut short
  (empty, no `end` line) or ended with a status other than `complete`.  A rank file that
  breaks a rule is *unreadable*: that rank is reported with the message (file and line) and
  its data left out; the other ranks are still read.
- A rank's text is its file ranks/rank-NNNNNN.tsv or (format 2.10) its section of ranks.tsv;
  the file of the run wins (a heap run rewrites it at exit).  Sections are read one at a
  time by offset (never the whole ranks.tsv), with the same rules and bounds as a rank file;
  messages call them "DIR/ranks.tsv (rank R)", their lines "DIR/ranks.tsv (rank R, line N)".
  A ranks.tsv whose head breaks a rule is not used (Profile.notes says why); one of another
  run, a link or not a regular file is stray.
- A newer major format version is refused (FormatVersionError); unknown line types and
  trailing fields (newer minor versions) are ignored.  1.x files simply have no call paths.
- Call paths come from the rank files only (profile.tsv has none); pathscope.cct checks them,
  and each measurement source's lines are read by its module of pathscope.sources.
Nothing here prints or exits.
"""
from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO, Callable, Iterable, Mapping, Optional, Sequence, Union

from pathscope import ranges
from pathscope.cct import CallPathParser, RankCallPaths
from pathscope.errors import FormatVersionError, ProfileError
from pathscope.progress import Steps
from pathscope.sources import SOURCES
# Comm, UNDEFINED_RANK, TOTAL_COMM, NO_COMM: importable from here too (they were defined here)
from pathscope.sources.mpi import (NO_COMM, TOTAL_COMM, UNDEFINED_RANK, Comm,  # noqa: F401
                                   MpiParser, RankComm, check_members, folded_fields,
                                   freed_fields)
# parse_hist, unescape, READER_MAJOR, MAX_WORLD_SIZE: importable from here too (they were
# defined here)
from pathscope.treefile import TREE_FILE, ReducedTree, read_tree_tsv
from pathscope import tsv as tsv_rules
from pathscope.tsv import (MAX_WORLD_SIZE, READ_FLAGS,  # noqa: F401
                           READER_MAJOR, CutShort, Record, RefusedFile, open_directory,
                           open_in_directory, open_region, parse_hist, read_records, unescape,
                           version_at_least)

PROFILE_FILE = "profile.tsv"
RANKS_DIR = "ranks"
RANKS_FILE = "ranks.tsv"           # (format 2.10) the rank texts of --per-rank all, one file
PROFILE_MAGIC = "pathscope-profile"
RANK_MAGIC = "pathscope-rank"
RANKS_MAGIC = "pathscope-ranks"
MAX_RANKS_HEAD_BYTES = 64 << 20    # ranks.tsv up to its data line: an index of MAX_WORLD_SIZE
                                   # ranks takes at most 50 MiB
STATUS_COMPLETE = "complete"
STATUS_MISSING = "missing"
STATUS_UNREADABLE = "unreadable"   # a rank file that breaks a rule: its data is left out
REASON_NO_END = "no end line"
REASON_EMPTY = "empty"
REASON_BEFORE_INIT = "before MPI_Init"  # ended without calling MPI_Init in an MPI run
UNREADABLE_PREFIX = "unreadable: "      # incomplete_ranks reason: this prefix + the message
NO_MPI = "-"                       # mpi_library of a process that never called MPI_Init
MAX_MEMBERS_TOTAL = 1 << 24        # communicator members expanded over a whole profile
RUN_FORMAT = (2, 3)                # the format that added the run line (line 2)
_NO_COUNTERS: Mapping[str, int] = MappingProxyType({})   # shared by the ranks without a file

RUN_ID = re.compile(r"^[0-9a-f]{32}$")
WARNING_KEY = re.compile(r"^[a-z0-9-]{1,64}$")
_RANK_FILE = re.compile(r"^rank-([0-9]{6,7})\.tsv$")
# a rank's temporary (runtime/output/outdir.c: ".rank-NNNNNN.tsv.<16 hex>"; before format 2.3
# "rank-NNNNNN.tsv.tmp"): left behind, the rank was killed while writing its file
_PARTIAL_RANK_FILE = re.compile(r"^(?:rank-([0-9]{6,7})\.tsv\.tmp|\.rank-([0-9]{6,7})\.tsv\.[0-9a-f]{16})$")
_RANK_META = ("command", "tool_version", "mpi_library")   # also in profile.tsv
_RANK_TEXT = ("status", "host", "program") + _RANK_META    # a rank file's one-field lines
_RANK_NUMBERS = ("pid", "start_unix_ns", "wall_ns", "mpi_ns", "thread_multiple")
# the lines at the top of a rank file (and profile.tsv's nranks), before the lines of the
# sources and the call paths
_HEAD_KINDS = frozenset(("run", "rank", "size", "nranks") + _RANK_TEXT + _RANK_NUMBERS)


# ---- the data model -----------------------------------------------------------------------

@dataclass
class RankWarning:
    """A `warning` line: a problem the runtime met in this rank (docs/format.md, 2.3)."""
    key: str                      # stable identifier, [a-z0-9-]
    count: int                    # times it happened
    first_ns: int                 # first time, ns since the run's start
    text: str                     # one sentence, the first one given


@dataclass
class WarningGroup:
    """Warnings of one key and text over the ranks that had them."""
    key: str
    text: str
    ranks: list[int]
    count: int                    # summed over the ranks
    first_ns: int                 # the earliest


@dataclass
class StrayFile:
    """A file of the profile directory that was not merged, and why."""
    path: str                     # as messages show it (the directory as given + the name)
    reason: str                   # "belongs to another run (run ...)", "is a symbolic link ..."

    def __str__(self) -> str:
        return f"{self.path} {self.reason}"


@dataclass(slots=True)
class RankInfo:
    rank: int
    host: str
    wall_ns: int
    mpi_ns: int
    status: str                   # complete | abort N | signal N | signal N before-init |
                                  # exit-without-finalize | missing (no rank file) |
                                  # unreadable (its file breaks a rule: see problem)
    pid: Optional[int] = None
    thread_multiple: bool = False
    counters: Mapping[str, int] = field(default_factory=dict)  # counter_* lines, prefix
                                  # removed (read-only for ranks without a file)
    has_end: bool = True          # False: the rank file was cut short
    warnings: Sequence[RankWarning] = field(default_factory=list)
    problem: str = ""             # unreadable: the message (file, line, what is wrong);
                                  # empty: "empty"
    mpi_library: Optional[str] = None   # "-" when the process never called MPI_Init


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
                                  # (rank, "no end line") for a file cut short, (rank,
                                  # "empty"), (rank, "unreadable: <message>")
    path: Optional[Path] = None
    partial_rank_files: list[int] = field(default_factory=list)  # rank-N.tsv.tmp left behind
    callpaths: dict[int, RankCallPaths] = field(default_factory=dict)  # by world rank: the
                                  # rank files' call paths (format 2.x; empty threads for 1.x)
    run_id: Optional[str] = None  # the run read (format 2.3); None for older profiles
    stray_files: list[StrayFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)   # e.g. why profile.tsv was not used
    profile_tsv_unused: Optional[str] = None  # profile.tsv exists but was not used: why
    directory_identity: Optional[tuple[int, int]] = None  # (st_dev, st_ino) of the directory
    directory_is_link: bool = False   # the path given was a symbolic link to the directory
    tree: Optional[ReducedTree] = None  # tree.tsv (format 2.9), of the run and readable
    # by world rank: its rank file's own (comm, op) -> (calls, bytes, time_ns); the per-rank
    # detail that `ops` sums (none without rank files)
    rank_ops: dict[int, dict[tuple[str, str], tuple[int, int, int]]] = field(
        default_factory=dict)

    def has_call_paths(self) -> bool:
        """True when some rank unwound something (not for 1.x profiles, nor for runs with the
        sampler off and every MPI group counted), or tree.tsv has a path."""
        return self.reduced_only() or any(paths.has_paths() for paths in self.callpaths.values())

    def reduced_only(self) -> bool:
        """True when the call paths come from tree.tsv alone: no rank file has a thread
        (`--per-rank none`), so nothing can be shown of one rank or thread."""
        return (self.tree is not None and any(n.parent is not None for n in self.tree.nodes)
                and not any(paths.threads for paths in self.callpaths.values()))

    def host_of(self, rank: int) -> Optional[str]:
        if 0 <= rank < len(self.ranks) and self.ranks[rank].rank == rank:
            return self.ranks[rank].host or None
        return None

    def comm_ops(self, comm: str) -> list[OpStat]:
        """The operations on comm, in the order of ops.  Indexed once: the report asks for
        every communicator, and a profile may have tens of thousands of them (issue 14)."""
        index = self.__dict__.get("_ops_by_comm")
        if index is None or index[0] != len(self.ops):
            by_comm: dict[str, list[OpStat]] = {}
            for (c, _), stat in self.ops.items():
                by_comm.setdefault(c, []).append(stat)
            index = (len(self.ops), by_comm)
            self.__dict__["_ops_by_comm"] = index
        return list(index[1].get(comm, ()))

    def op_totals(self) -> list[OpStat]:
        """The per-operation totals over all communicators (the `*` rows)."""
        return self.comm_ops(TOTAL_COMM)

    def never_called_mpi(self) -> bool:
        """True when every rank file read says the process never called MPI_Init (a program
        without MPI, or one that exited before MPI_Init): no profile.tsv is expected."""
        libraries = [r.mpi_library for r in self.ranks if r.status not in
                     (STATUS_MISSING, STATUS_UNREADABLE)]
        return bool(libraries) and all(lib == NO_MPI for lib in libraries)

    def warnings(self) -> list[WarningGroup]:
        """The ranks' warnings grouped by key and text, in order of first appearance."""
        groups: dict[tuple[str, str], WarningGroup] = {}
        for info in self.ranks:
            for w in info.warnings:
                group = groups.get((w.key, w.text))
                if group is None:
                    groups[(w.key, w.text)] = WarningGroup(w.key, w.text, [info.rank], w.count,
                                                           w.first_ns)
                    continue
                if info.rank not in group.ranks:
                    group.ranks.append(info.rank)
                group.count += w.count
                group.first_ns = min(group.first_ns, w.first_ns)
        return sorted(groups.values(), key=lambda g: (g.first_ns, g.key, g.text))

    def problems(self) -> list[str]:
        """Why this profile is partial, one phrase each ([] when it is whole): missing,
        incomplete and unreadable ranks, stray files, and a profile.tsv that was not used
        while some rank did not complete."""
        out = []
        if self.missing_ranks:
            out.append(f"{_ranks_phrase(self.missing_ranks)} missing (no rank file)")
        by_reason: dict[str, list[int]] = {}
        for rank, reason in self.incomplete_ranks:
            key = STATUS_UNREADABLE if reason.startswith(UNREADABLE_PREFIX) else "incomplete"
            by_reason.setdefault(key, []).append(rank)
        for key, found in by_reason.items():
            out.append(f"{_ranks_phrase(sorted(found))} {key}")
        if self.stray_files:
            count = len(self.stray_files)
            out.append(f"{count} stray file{'' if count == 1 else 's'} not merged")
        return out


def _ranks_phrase(found: list[int]) -> str:
    return f"rank{'' if len(found) == 1 else 's'} {ranges.compress(found)}"


# ---- profile.tsv ----------------------------------------------------------------------------

@dataclass
class _ProfileTsv:
    meta: dict[str, Union[str, int]]
    nranks: Optional[int]
    ranks: dict[int, tuple[str, int, int]]   # rank -> host, wall_ns, mpi_ns
    comms: dict[str, Comm]
    ops: dict[tuple[str, str], OpStat]
    has_end: bool
    hosts_only: bool = False      # `host` lines: the ranks' times are tree.tsv's statistics


def _rank_count(record: Record, seen: Optional[int]) -> int:
    """A number of ranks (`nranks`, `size`): given once, 1 to MAX_WORLD_SIZE."""
    record.need(1)
    if seen is not None:
        raise ProfileError(f"{record.where}: '{record.kind}' line given twice")
    count = record.number(0, MAX_WORLD_SIZE)
    if count == 0:
        raise ProfileError(f"{record.where}: '{record.kind}' line: 0 ranks")
    return count


def _run_line(record: Record) -> None:
    """The run line was read with the file's head; another one is a broken rule."""
    if record.line != 2:
        raise ProfileError(f"{record.where}: 'run' line not on line 2")


def _read_profile_tsv(directory_fd: int, name: str) -> _ProfileTsv:
    result = _ProfileTsv({}, None, {}, {}, {}, False)

    def text_meta(record: Record) -> None:
        record.need(1)
        result.meta[record.kind] = record.text(0)

    def start(record: Record) -> None:
        record.need(1)
        result.meta[record.kind] = record.number(0)

    def nranks(record: Record) -> None:
        result.nranks = _rank_count(record, result.nranks)

    def rank(record: Record) -> None:
        record.need(4)
        if result.nranks is None:
            raise ProfileError(f"{record.where}: 'rank' line before the 'nranks' line")
        r = record.number(0)
        if r >= result.nranks:
            raise ProfileError(f"{record.where}: 'rank' line: rank {r} is not below nranks "
                               f"{result.nranks}")
        if r in result.ranks:
            raise ProfileError(f"{record.where}: rank {r} listed twice")
        result.ranks[r] = (record.text(1), record.number(2), record.number(3))

    def host(record: Record) -> None:
        # (format 2.10, --per-rank summary and none: a host and its ranks, no times)
        record.need(2)
        if result.nranks is None:
            raise ProfileError(f"{record.where}: 'host' line before the 'nranks' line")
        try:
            groups, cut = ranges.parse(record.text(1))
        except ValueError as e:
            raise ProfileError(f"{record.where}: 'host' line: {e}") from None
        if cut or len(groups) != 1 or not groups[0]:
            raise ProfileError(f"{record.where}: 'host' line: '{record.text(1)}' is not a "
                               f"list of ranks")
        ranks_: list[int] = []
        for span in groups[0]:
            if span[0] < 0 or span[-1] >= result.nranks:
                raise ProfileError(f"{record.where}: 'host' line: ranks {span[0]}-{span[-1]} "
                                   f"are not below nranks {result.nranks}")
            ranks_.extend(span)
        for r in ranks_:
            if r in result.ranks:
                raise ProfileError(f"{record.where}: rank {r} listed twice")
            result.ranks[r] = (record.text(0), 0, 0)
        result.hosts_only = True

    def comm(record: Record) -> None:
        record.need(12)
        c = record.text
        name_ = c(0)
        if name_ in result.comms:
            raise ProfileError(f"{record.where}: communicator {name_} described twice")
        size, remote = record.number(1, MAX_WORLD_SIZE), record.number(2, MAX_WORLD_SIZE)
        check_members(record, 6, size, remote, result.nranks)
        result.comms[name_] = Comm(name_, size, remote, c(3), c(4), record.number(5, 1), c(6),
                                   [], c(7), record.number(8), record.number(9),
                                   record.number(10), record.number(11),
                                   *freed_fields(record, 12), *folded_fields(record, 16))

    def op(record: Record) -> None:
        record.need(11)
        key = (record.text(0), record.text(1))
        if key in result.ops:
            raise ProfileError(f"{record.where}: operation {key[1]} on {key[0]} listed twice")
        n = record.number
        world_limit = (result.nranks or MAX_WORLD_SIZE) - 1
        stat = OpStat(key[0], key[1], n(2), n(3), n(4), n(5), n(6, world_limit), n(7),
                      n(8, world_limit), n(9, world_limit + 1), record.hist(10))
        if not stat.time_min_ns <= stat.time_max_ns <= stat.time_sum_ns or stat.nranks == 0:
            raise ProfileError(f"{record.where}: 'op' line: times min {stat.time_min_ns}, max "
                               f"{stat.time_max_ns}, sum {stat.time_sum_ns} over "
                               f"{stat.nranks} ranks cannot be")
        result.ops[key] = stat

    handlers: dict[str, Callable[[Record], None]] = {
        k: text_meta for k in ("tool_version", "program", "command", "mpi_library")}
    handlers.update(start_unix_ns=start, nranks=nranks, rank=rank, host=host, comm=comm, op=op,
                    run=_run_line)
    with open_in_directory(directory_fd, PROFILE_FILE, name, PROFILE_MAGIC) as source:
        info = read_records(source, name, PROFILE_MAGIC, handlers)
    result.meta["format_version"] = info.version
    result.has_end = info.has_end
    if not info.has_end:
        raise ProfileError(f"{name} is cut short (no end line)")
    if result.nranks is None:
        raise ProfileError(f"{name} has no 'nranks' line")
    if len(result.ranks) != result.nranks:
        what = "ranks in 'host' lines" if result.hosts_only else "'rank' lines"
        raise ProfileError(f"{name} has {len(result.ranks)} {what} for nranks "
                           f"{result.nranks}")
    return result


# ---- the first lines of a file: its run, rank and size ---------------------------------------

class _HeadDone(Exception):
    """Raised by the head reader at the first line after the head (not an error)."""


@dataclass
class _Head:
    """What the first lines of a rank file or profile.tsv say; read before choosing the run."""
    name: str                     # as messages show the file
    version: str = ""
    run: Optional[str] = None
    rank: Optional[int] = None
    size: Optional[int] = None    # rank files: `size`; profile.tsv: `nranks`
    start_unix_ns: Optional[int] = None
    cut: bool = False             # empty or ended before the run line: run unknown
    error: Optional[ProfileError] = None   # unreadable (FormatVersionError is raised)
    refused: Optional[str] = None          # stray: a link, not a regular file, too large
    source: Optional["_Source"] = None     # where the text is


def _read_head(source: "_Source", magic: str) -> _Head:
    name = source.name
    head = _Head(name, source=source)

    def run(record: Record) -> None:
        if record.line != 2:
            raise ProfileError(f"{record.where}: 'run' line not on line 2")
        record.need(1)
        head.run = record.word(0, RUN_ID, "a run id (32 lowercase hex digits)")

    def size(record: Record) -> None:
        head.size = _rank_count(record, head.size)

    def rank(record: Record) -> None:
        record.need(1)
        if head.rank is not None:
            raise ProfileError(f"{record.where}: 'rank' line given twice")
        head.rank = record.number(0, MAX_WORLD_SIZE - 1)

    def start(record: Record) -> None:
        record.need(1)
        head.start_unix_ns = record.number(0)

    def other(record: Record) -> None:
        if record.kind not in _HEAD_KINDS:
            raise _HeadDone()

    def line_two(handler: Callable[[Record], None]) -> Callable[[Record], None]:
        """Format 2.3 and later: line 2 is the run line."""
        def checked(record: Record) -> None:
            if (record.line == 2 and record.kind != "run"
                    and version_at_least(head.version, *RUN_FORMAT)):
                raise ProfileError(f"{record.where}: line 2 is not 'run<TAB>RUNID' (format "
                                   f"{head.version} files start with their run line)")
            handler(record)
        return checked

    handlers: dict[str, Callable[[Record], None]] = {"run": run, "start_unix_ns": start}
    if magic == RANK_MAGIC:
        handlers.update(rank=rank, size=size)
    else:
        handlers.update(nranks=size)
    handlers = {kind: line_two(handler) for kind, handler in handlers.items()}

    def on_version(version: str) -> None:
        head.version = version

    try:
        with source.open(magic) as stream:
            try:
                info = read_records(stream, name, magic, handlers, line_two(other),
                                    on_version=on_version, where=source.where)
                if head.run is None and version_at_least(info.version, *RUN_FORMAT):
                    if info.lines > 1:
                        raise ProfileError(f"{name} has no run line")
                    head.cut = True                 # cut short before its run line
            except _HeadDone:
                pass
    except RefusedFile as e:
        head.refused = str(e)[len(name) + 1:]
    except FormatVersionError:
        raise
    except CutShort:
        head.cut = True
    except ProfileError as e:
        head.error = e
    return head


# ---- where a text is: a file, or a rank's section of ranks.tsv -------------------------------

@dataclass
class _Source:
    """A file's text: the file `entry` of the directory fd, or (entry None) a rank's section
    of ranks.tsv, length bytes from offset of the file fd."""
    name: str                     # as messages call it: "prof/ranks/rank-000002.tsv",
                                  # "prof/ranks.tsv (rank 2)"
    fd: int
    entry: Optional[str] = None
    offset: int = 0
    length: int = 0

    @property
    def rank_origin(self) -> str:
        """Who says which rank this text is of."""
        if self.entry is None:
            return "the index of ranks.tsv gives this section to"
        return "the file is named for"

    @property
    def where(self) -> tuple[str, str]:
        """The text around N of line N as messages show it: "prof/ranks/rank-000002.tsv:N",
        "prof/ranks.tsv (rank 2, line N)" (a section's lines count from its first)."""
        if self.entry is None:
            return f"{self.name[:-1]}, line ", ")"
        return f"{self.name}:", ""

    def open(self, magic: str) -> BinaryIO:
        """The text to read; RefusedFile for a section larger than a file of its kind may be
        (the rank file limit), as for a file."""
        if self.entry is None:
            limit = tsv_rules.MAX_FILE_BYTES.get(magic, 256 << 20)
            if self.length > limit:
                raise RefusedFile(f"{self.name} is larger than {limit} bytes (the limit for a "
                                  f"{magic} file; not read)")
            return open_region(self.fd, self.offset, self.length)
        return open_in_directory(self.fd, self.entry, self.name, magic)


# ---- ranks.tsv (format 2.10) ------------------------------------------------------------------

@dataclass
class _RanksTsv:
    """The head of ranks.tsv: its run, world size and where each rank's section is."""
    name: str                     # as messages call it
    fd: int
    run: Optional[str] = None
    ranks: int = 0
    sections: dict[int, tuple[int, int]] = field(default_factory=dict)  # rank -> offset in
                                  # the file, length

    def source(self, rank: int) -> _Source:
        offset, length = self.sections[rank]
        return _Source(f"{self.name} (rank {rank})", self.fd, None, offset, length)


def _open_ranks_tsv(dir_fd: int, name: str) -> int:
    """A descriptor of ranks.tsv for pread.  RefusedFile for a link or a file that is not
    regular (opened without blocking: a FIFO is never waited on)."""
    try:
        fd = os.open(RANKS_FILE, READ_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise RefusedFile(f"{name} is a symbolic link (not followed)") from None
        raise ProfileError(f"cannot read {name}: {e.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RefusedFile(f"{name} is not a regular file (not read)")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_ranks_head(ranks: _RanksTsv) -> None:
    """Reads ranks.tsv up to its data line and checks the index against the file's size
    (docs/format.md, "ranks.tsv").  ProfileError for a broken rule (FormatVersionError for a
    newer major version)."""
    name = ranks.name
    size = os.fstat(ranks.fd).st_size
    placed = {2: ("run", "run<TAB>RUNID"), 3: ("ranks", "ranks<TAB>P")}
    state = {"next": 0, "last": -1, "data": -1}

    def checked(handler: Callable[[Record], None]) -> Callable[[Record], None]:
        """Line 2 is the run line, line 3 the ranks line."""
        def check(record: Record) -> None:
            kind, shown = placed.get(record.line, (record.kind, ""))
            if record.kind != kind:
                raise ProfileError(f"{record.where}: line {record.line} is not '{shown}'")
            handler(record)
        return check

    def run(record: Record) -> None:
        if record.line != 2:
            raise ProfileError(f"{record.where}: 'run' line not on line 2")
        record.need(1)
        ranks.run = record.word(0, RUN_ID, "a run id (32 lowercase hex digits)")

    def world(record: Record) -> None:
        if record.line != 3:
            raise ProfileError(f"{record.where}: 'ranks' line not on line 3")
        ranks.ranks = _rank_count(record, None)

    def index(record: Record) -> None:
        record.need(3)
        rank, offset, length = record.number(0), record.number(1), record.number(2)
        what = f"{record.where}: 'index' line: rank {rank}"
        if rank >= ranks.ranks:
            raise ProfileError(f"{what} is not below ranks {ranks.ranks}")
        if rank <= state["last"]:
            raise ProfileError(f"{what} after rank {state['last']} (the index is in "
                               f"increasing rank order)")
        if offset != state["next"]:
            raise ProfileError(f"{what}: section at offset {offset}, expected "
                               f"{state['next']} (sections follow each other from offset 0)")
        if length == 0:
            raise ProfileError(f"{what}: section of length 0")
        ranks.sections[rank] = (offset, length)
        state["last"], state["next"] = rank, offset + length

    def data(record: Record) -> None:
        state["data"] = stream.tell()
        raise _HeadDone()

    handlers = {"run": run, "ranks": world, "index": index, "data": data}
    with open_region(ranks.fd, 0, min(size, MAX_RANKS_HEAD_BYTES)) as stream:
        try:
            read_records(stream, name, RANKS_MAGIC,
                         {kind: checked(h) for kind, h in handlers.items()},
                         checked(lambda record: None), max_bytes=MAX_RANKS_HEAD_BYTES)
        except _HeadDone:
            pass
    start = state["data"]
    if start < 0:
        if size > MAX_RANKS_HEAD_BYTES:
            raise ProfileError(f"{name} has no 'data' line in its first "
                               f"{MAX_RANKS_HEAD_BYTES} bytes (the limit for its head)")
        raise ProfileError(f"{name} is cut short before its 'data' line")
    end = start + state["next"]
    if size < end:
        raise ProfileError(f"{name} is cut short: {size} bytes, its index ends at byte {end}")
    if size > end:
        raise ProfileError(f"{name} has {size - end} bytes after its last section (byte "
                           f"{end})")
    ranks.sections = {rank: (start + offset, length)
                      for rank, (offset, length) in ranks.sections.items()}


def _read_ranks_tsv(scan: "_Scan", stray: list[StrayFile],
                    notes: list[str]) -> Optional[_RanksTsv]:
    """ranks.tsv when it is there and its head keeps the rules; else None, with a stray file
    (a link, not a regular file) or a note (a broken rule) saying why.  Its descriptor stays
    open in scan for the sections."""
    name = scan.name(RANKS_FILE, in_ranks=False)
    if not scan.has_ranks_tsv:
        return None
    def read() -> _RanksTsv:
        scan.ranks_tsv_fd = _open_ranks_tsv(scan.fd, name)
        ranks = _RanksTsv(name, scan.ranks_tsv_fd)
        _read_ranks_head(ranks)
        return ranks
    return _read_optional(name, RANKS_FILE, read, stray, notes)


def _read_optional(name: str, label: str, read: Callable[[], Any], stray: list[StrayFile],
                   notes: list[str]) -> Any:
    """read() of one of the run's optional files (ranks.tsv, tree.tsv), or None: a file
    refused (a link, not a regular file, too large) is stray, one that breaks a rule is not
    used, with a note saying why; a newer major format refuses the whole profile."""
    try:
        return read()
    except FormatVersionError:
        raise
    except RefusedFile as e:
        stray.append(StrayFile(name, str(e)[len(name) + 1:]))
    except ProfileError as e:
        notes.append(f"{label} not used: {e}")
    return None


# ---- rank files -----------------------------------------------------------------------------

@dataclass
class _RankFile:
    rank: int
    size: Optional[int]
    info: RankInfo
    program: Optional[str]
    start_unix_ns: Optional[int]
    version: str
    comms: list[RankComm]
    ops: dict[tuple[str, str], tuple[int, int, int, dict[int, int]]]  # calls, bytes, ns, hist
    meta: dict[str, str] = field(default_factory=dict)   # command, tool_version, mpi_library
    callpaths: Optional[RankCallPaths] = None


def _read_rank_file(source: "_Source", rank_from_name: int, world: int) -> _RankFile:
    name = source.name
    info = RankInfo(rank_from_name, "", 0, 0, "")
    result = _RankFile(rank_from_name, None, info, None, None, "", [], {})
    parsers = {source.name: source.parser(name, world) for source in SOURCES}
    callpaths = CallPathParser(name, parsers)
    once: set[str] = set()

    def single(record: Record) -> None:
        if record.kind in once:
            raise ProfileError(f"{record.where}: '{record.kind}' line given twice")
        once.add(record.kind)
        record.need(1)

    def rank(record: Record) -> None:
        single(record)
        value = record.number(0)
        if value != rank_from_name:
            raise ProfileError(f"{record.where}: 'rank' line says rank {value}, but "
                               f"{source.rank_origin} rank {rank_from_name}")

    def size(record: Record) -> None:
        single(record)
        result.size = record.number(0, MAX_WORLD_SIZE)
        if result.size != world:
            raise ProfileError(f"{record.where}: 'size' line says {result.size} ranks, the "
                               f"run has {world}")

    def text(record: Record) -> None:
        single(record)
        value = record.text(0)
        if record.kind == "status":
            info.status = value
        elif record.kind == "host":
            info.host = value
        elif record.kind == "program":
            result.program = value
        else:
            result.meta[record.kind] = value
            if record.kind == "mpi_library":
                info.mpi_library = value

    def number(record: Record) -> None:
        single(record)
        if record.kind == "pid":
            info.pid = record.number(0, (1 << 32) - 1)
        elif record.kind == "wall_ns":
            info.wall_ns = record.number(0)
        elif record.kind == "mpi_ns":
            info.mpi_ns = record.number(0)
        elif record.kind == "thread_multiple":
            info.thread_multiple = bool(record.number(0, 1))
        elif record.kind == "start_unix_ns":
            result.start_unix_ns = record.number(0)
        else:
            info.counters[record.kind[len("counter_"):]] = record.number(0)

    def warning(record: Record) -> None:
        record.need(4)
        key = record.word(0, WARNING_KEY, "a warning key ([a-z0-9-], at most 64)")
        if any(w.key == key for w in info.warnings):
            raise ProfileError(f"{record.where}: warning {key} listed twice")
        info.warnings.append(RankWarning(key, record.number(1), record.number(2),
                                         record.text(3)))

    def other(record: Record) -> None:
        if record.kind.startswith("counter_"):
            number(record)

    handlers: dict[str, Callable[[Record], None]] = {
        "rank": rank, "size": size, "warning": warning, "run": _run_line}
    handlers.update({kind: text for kind in _RANK_TEXT})
    handlers.update({kind: number for kind in _RANK_NUMBERS})
    more = callpaths.handlers()
    if handlers.keys() & more.keys():
        raise ValueError(f"line kinds taken twice: {sorted(handlers.keys() & more.keys())}")
    handlers.update(more)
    with source.open(RANK_MAGIC) as stream:
        file = read_records(stream, name, RANK_MAGIC, handlers, other, where=source.where)
    result.version = file.version
    info.has_end = file.has_end
    if not info.status:
        info.status = "unknown"
    result.callpaths = callpaths.finish(result.rank, file.has_end)
    result.callpaths.version = file.version
    mpi = parsers["mpi"]
    assert isinstance(mpi, MpiParser)
    result.comms, result.ops = mpi.comms, mpi.ops
    return result


# ---- merging rank files (the in-job reduction, in Python) -------------------------------------
# The rules are pathscope.merge's (docs/format.md, "Merge rules").  merge_rank_files calls
# merge_op through this module's name: tests replace reader.merge_op.
from pathscope.merge import add_hist as _add_hist  # noqa: E402
from pathscope.merge import lowest_group_first as _lowest_group_first  # noqa: E402
from pathscope.merge import merge_comm, merge_op  # noqa: E402


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


_SELF = re.compile(r"S\.[0-9]+")


def _unused_self(comm: Comm, used: set[str]) -> bool:
    """MPI_COMM_SELF of a rank that made no call on it: not merged (docs/format.md,
    "Communicator names"; the runtime leaves it out of profile.tsv alike)."""
    return (_SELF.fullmatch(comm.name) is not None and comm.name not in used
            and not (comm.sent_msgs or comm.recv_msgs or comm.freed_recvs
                     or comm.failed_requests))


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
        used = {comm for comm, _ in rank_file.ops}
        for rank_comm in rank_file.comms:
            c = rank_comm.comm
            if _unused_self(c, used):
                continue
            if c.name not in comms:
                comms[c.name] = Comm(c.name, c.size, c.remote_size, c.parent, c.creator, c.freed,
                                     c.members, [], c.topology, c.sent_msgs,
                                     c.sent_bytes, c.recv_msgs, c.recv_bytes, c.freed_sends,
                                     c.freed_recvs, c.freed_recv_capacity, c.failed_requests,
                                     c.folded, c.memberships)
                continue
            merge_comm(comms[c.name], c)
    for comm in comms.values():
        _lowest_group_first(comm)
    return dict(sorted(comms.items())), dict(sorted(ops.items()))


def _expand_members(comms: dict[str, Comm], rank_files: dict[int, _RankFile]) -> None:
    """members_list of every communicator, within MAX_MEMBERS_TOTAL over the profile.
    profile.tsv cuts member lists longer than 2,044 characters; the rank files have them
    whole, so a cut list is taken from a rank file of a member where there is one."""
    whole: dict[str, str] = {}
    for comm in comms.values():
        # a folded row's list is a union over the ranks: no single rank file has it whole
        if comm.members.endswith(ranges.TRUNCATION_MARK) and not comm.is_folded:
            whole[comm.name] = ""
    if whole:
        for rank_file in rank_files.values():
            for rank_comm in rank_file.comms:
                if whole.get(rank_comm.comm.name) == "":
                    whole[rank_comm.comm.name] = rank_comm.comm.members
    total = 0
    for comm in comms.values():
        text = whole.get(comm.name) or comm.members
        groups, _ = ranges.parse(text)
        total += sum(ranges.span_count(g) for g in groups)
        if total > MAX_MEMBERS_TOTAL:
            raise ProfileError(f"the communicators of this profile have more than "
                               f"{MAX_MEMBERS_TOTAL} members in total (pathscope reads at "
                               f"most that many)")
        if text is not comm.members and comm.is_inter and text.count("|") == 1:
            # a rank file's local|remote: the group holding the lowest rank first
            copy = Comm(comm.name, 0, 1, "", "", 0, text, [], "", 0, 0, 0, 0)
            _lowest_group_first(copy)
            text = copy.members
        comm.members_list = ranges.expand(text)


# ---- scanning the directory -----------------------------------------------------------------

@dataclass
class _Scan:
    directory: Path
    fd: int
    ranks_fd: Optional[int]
    rank_entries: dict[int, str]            # rank -> entry name in ranks/
    partial: list[int]                      # ranks with only a rank-N.tsv.tmp
    stray: list[StrayFile]
    has_profile: bool
    identity: tuple[int, int]
    is_link: bool
    has_ranks_tsv: bool = False             # ranks.tsv is there (format 2.10)
    ranks_tsv_fd: Optional[int] = None      # open while the sections are read

    def name(self, entry: str, in_ranks: bool = True) -> str:
        return str(self.directory / RANKS_DIR / entry) if in_ranks else str(
            self.directory / entry)


def _profile_directory(path: Path) -> Path:
    if not os.path.lexists(path):
        raise ProfileError(f"profile directory not found: {path}")
    if path.name == PROFILE_FILE and not path.is_dir() and path.parent.is_dir():
        return path.parent
    if not path.is_dir():
        raise ProfileError(f"not a profile directory: {path}")
    return path


def _exists(dir_fd: int, entry: str) -> bool:
    try:
        os.stat(entry, dir_fd=dir_fd, follow_symlinks=False)
        return True
    except OSError:
        return False


def _is_link(dir_fd: int, entry: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(entry, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _scan(directory: Path) -> _Scan:
    is_link = False
    try:
        fd = open_directory(str(directory), follow=False)
    except OSError as e:
        if e.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise ProfileError(f"cannot read {directory}: {e.strerror}") from None
        try:    # the path given is a link to the directory: read it, write nothing there
            fd = open_directory(str(directory), follow=True)
        except OSError as e2:
            raise ProfileError(f"cannot read {directory}: {e2.strerror}") from None
        is_link = True
    st = os.fstat(fd)
    scan = _Scan(directory, fd, None, {}, [], [], False, (st.st_dev, st.st_ino), is_link)
    scan.has_profile = _exists(fd, PROFILE_FILE)
    scan.has_ranks_tsv = _exists(fd, RANKS_FILE)
    try:
        scan.ranks_fd = os.open(RANKS_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW |
                                os.O_CLOEXEC, dir_fd=fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(fd, RANKS_DIR):
            scan.stray.append(StrayFile(str(directory / RANKS_DIR),
                                        "is a symbolic link (not followed)"))
        elif e.errno == errno.ENOTDIR:
            scan.stray.append(StrayFile(str(directory / RANKS_DIR), "is not a directory"))
        elif e.errno != errno.ENOENT:
            raise ProfileError(f"cannot read {directory / RANKS_DIR}: {e.strerror}") from None
        return scan
    try:
        entries = sorted(entry.name for entry in os.scandir(scan.ranks_fd))
    except OSError as e:
        raise ProfileError(f"cannot read {directory / RANKS_DIR}: {e.strerror}") from None
    partial: list[int] = []
    for entry in entries:
        match = _RANK_FILE.match(entry) or _PARTIAL_RANK_FILE.match(entry)
        if not match:
            continue
        rank = int(match.group(1) or match.group(2))
        canonical = f"rank-{rank:06d}.tsv"
        temporary = match.re is _PARTIAL_RANK_FILE
        if not entry.lstrip(".").startswith(canonical) or rank >= MAX_WORLD_SIZE:
            why = (f"is not a name pathscope writes (rank-NNNNNN.tsv, ranks below "
                   f"{MAX_WORLD_SIZE})")
            scan.stray.append(StrayFile(scan.name(entry), why))
        elif temporary:
            partial.append(rank)
        else:
            scan.rank_entries[rank] = entry
    scan.partial = [r for r in partial if r not in scan.rank_entries]
    return scan


# ---- choosing the run -----------------------------------------------------------------------

def _choose_run(profile_head: Optional[_Head], heads: Iterable[_Head]) -> Optional[str]:
    """The run of profile.tsv if it names one, else the run most rank texts name (files and
    sections of ranks.tsv; ties: the newest by start_unix_ns, then the lowest id); None when
    no file names a run."""
    if profile_head is not None and profile_head.run is not None:
        return profile_head.run
    votes: dict[str, list[int]] = {}
    for head in heads:
        if head.run is not None:
            votes.setdefault(head.run, []).append(head.start_unix_ns or 0)
    if not votes:
        return None
    return min(votes, key=lambda run: (-len(votes[run]), -max(votes[run]), run))


def _belongs(head: _Head, run: Optional[str]) -> Optional[str]:
    """Why the file of head is stray for run, or None when it is of the run (or cannot be told:
    empty, cut or unreadable files count as this run's)."""
    if head.refused is not None:
        return head.refused
    if head.cut or head.error is not None or run is None:
        return None
    if head.run is None:
        return f"has no run id (format {head.version}: written before run ids)"
    if head.run != run:
        return f"belongs to another run ({head.run})"
    return None


def _world_size(profile_head: Optional[_Head], heads: dict[int, _Head]) -> Optional[int]:
    """profile.tsv's nranks, else the size most rank files agree on (ties: the smaller, which
    invents fewer missing ranks)."""
    if profile_head is not None and profile_head.size is not None:
        return profile_head.size
    votes: dict[int, int] = {}
    for head in heads.values():
        if head.size is not None:
            votes[head.size] = votes.get(head.size, 0) + 1
    if not votes:
        return None
    return min(votes, key=lambda size: (-votes[size], size))


# ---- the entry point ------------------------------------------------------------------------

def load_profile(path: Union[str, Path]) -> Profile:
    """Reads the profile directory at path (or its profile.tsv).  Raises ProfileError
    (FormatVersionError for a newer major format) with a one-line message when nothing of it
    can be read; a partial profile is returned with its problems (Profile.problems())."""
    directory = _profile_directory(Path(path))
    scan = _scan(directory)
    try:
        return _load(scan)
    finally:
        os.close(scan.fd)
        for fd in (scan.ranks_fd, scan.ranks_tsv_fd):
            if fd is not None:
                os.close(fd)


def _load(scan: _Scan) -> Profile:
    directory = scan.directory
    profile_name = scan.name(PROFILE_FILE, in_ranks=False)
    if not scan.has_profile and not scan.rank_entries and not scan.has_ranks_tsv:
        if scan.stray:
            raise ProfileError(f"not a pathscope profile directory: {directory} (no "
                               f"{PROFILE_FILE} and no readable {RANKS_DIR}/rank-*.tsv: "
                               f"{scan.stray[0]})")
        raise ProfileError(f"not a pathscope profile directory: {directory} "
                           f"(no {PROFILE_FILE} and no {RANKS_DIR}/rank-*.tsv)")
    stray = list(scan.stray)
    notes: list[str] = []
    unused: Optional[str] = None                 # why profile.tsv is not used
    profile_error: Optional[ProfileError] = None  # ... when it breaks a rule

    profile_head = None
    if scan.has_profile:
        profile_head = _read_head(_Source(profile_name, scan.fd, PROFILE_FILE), PROFILE_MAGIC)
    ranks_tsv = _read_ranks_tsv(scan, stray, notes)
    file_heads = {rank: _read_head(_Source(scan.name(entry), scan.ranks_fd, entry), RANK_MAGIC)
                  for rank, entry in sorted(scan.rank_entries.items())}
    section_heads = {rank: _read_head(ranks_tsv.source(rank), RANK_MAGIC)
                     for rank in ranks_tsv.sections} if ranks_tsv is not None else {}
    run = _choose_run(profile_head, [*file_heads.values(), *section_heads.values()])
    if ranks_tsv is not None and run is not None and ranks_tsv.run != run:
        stray.append(StrayFile(ranks_tsv.name, f"belongs to another run ({ranks_tsv.run})"))
        ranks_tsv, section_heads = None, {}

    # profile.tsv: of the run, readable?
    if profile_head is not None:
        why = _belongs(profile_head, run)
        if why is None and (profile_head.error is not None or profile_head.cut):
            profile_error = profile_head.error or ProfileError(f"{profile_name} is empty or "
                                                               f"cut short")
            unused = str(profile_error)
            profile_head = None
        elif why is not None:
            stray.append(StrayFile(profile_name, why))
            unused = f"{profile_name} {why}"
            profile_head = None

    # rank texts: of the run?  A rank's file of the run wins over its section (heap: the
    # file is written again at exit); a section it replaces is not looked at
    heads: dict[int, _Head] = {}
    for rank in sorted(file_heads.keys() | section_heads.keys()):
        for head in (file_heads.get(rank), section_heads.get(rank)):
            if head is None or rank in heads:
                continue
            why = _belongs(head, run)
            if why is not None:
                stray.append(StrayFile(head.name, why))
            else:
                heads[rank] = head
    tsv: Optional[_ProfileTsv] = None
    if profile_head is not None:
        try:
            tsv = _read_profile_tsv(scan.fd, profile_name)
        except FormatVersionError:
            raise
        except ProfileError as e:
            profile_error = e
            unused = str(e)
            profile_head = None
    tree = _read_tree(scan, run, stray, notes)
    world = _world_size(profile_head, heads)
    if world is None and ranks_tsv is not None:
        world = ranks_tsv.ranks
    if world is None:
        world = tree.ranks if tree is not None and not heads else max(heads, default=-1) + 1
    if tree is not None and tree.ranks != world:
        stray.append(StrayFile(tree.name, f"is of a run of {tree.ranks} ranks, not of this "
                                          f"run's {world}"))
        tree = None
    if ranks_tsv is not None and ranks_tsv.ranks != world:
        stray.append(StrayFile(ranks_tsv.name, f"is of a run of {ranks_tsv.ranks} ranks, not "
                                               f"of this run's {world}"))
        heads = {rank: head for rank, head in heads.items()
                 if head.source is None or head.source.entry is not None}
    for rank, head in list(heads.items()):
        if run is None and head.size is not None and head.size != world:
            # no run ids (format 2.2 and older): the size tells runs apart
            stray.append(StrayFile(head.name, f"is of a run of {head.size} "
                                              f"rank{'' if head.size == 1 else 's'}, not of "
                                              f"this run's {world}"))
            del heads[rank]
        elif rank >= world:
            stray.append(StrayFile(head.name, f"is for rank {rank}, outside the run's "
                                              f"{world} ranks"))
            del heads[rank]
    partial = [r for r in scan.partial if r < world and r not in heads]

    # read the rank files of the run
    rank_files: dict[int, _RankFile] = {}
    broken: dict[int, RankInfo] = {}
    with Steps("reading rank files", len(heads)) as step:
        for rank, head in sorted(heads.items()):
            step()
            if head.error is not None:
                broken[rank] = _unreadable(rank, str(head.error))
                continue
            if head.cut:
                broken[rank] = RankInfo(rank, "", 0, 0, "unknown", has_end=False,
                                        problem=REASON_EMPTY)
                continue
            try:
                assert head.source is not None
                rank_files[rank] = _read_rank_file(head.source, rank, world)
            except FormatVersionError:
                raise
            except ProfileError as e:
                broken[rank] = _unreadable(rank, str(e))

    if tsv is None and not rank_files and not broken:
        if profile_error is not None:      # a malformed profile.tsv was all there was
            raise profile_error
        stray.sort(key=lambda f: f.path)
        reasons = [str(f) for f in stray] or notes   # notes: a ranks.tsv not used
        more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
        raise ProfileError(f"nothing of {directory} can be read: {reasons[0]}{more}")
    if tsv is None and unused is not None:
        notes.append(f"{PROFILE_FILE} not used: {unused}")
    # --per-rank none: tree.tsv stands for every rank (it is written only when all of them
    # reached MPI_Finalize); a rank without a text is then not missing.  A ranks.tsv says
    # --per-rank all, even one that could not be used: its ranks are missing
    reduced = tree is not None and not heads and not scan.has_ranks_tsv
    reduced_library = _reduced_string(tree, "mpi_library") if reduced else None

    if tsv is not None:
        source = "profile"
        meta = tsv.meta
        nranks = tsv.nranks or world
        comms, ops = dict(sorted(tsv.comms.items())), dict(sorted(tsv.ops.items()))
        ranks = []
        for r in range(nranks):
            if r in rank_files:
                info = rank_files[r].info
                info.host, info.wall_ns, info.mpi_ns = tsv.ranks[r]
            elif r in broken:
                info = broken[r]
                info.host, info.wall_ns, info.mpi_ns = tsv.ranks[r]
            else:
                host, wall, mpi = tsv.ranks[r]
                info = (RankInfo(r, host, wall, mpi, STATUS_COMPLETE,
                                 mpi_library=reduced_library) if reduced
                        else _missing(r, host, wall, mpi))
            ranks.append(info)
    else:
        source = "ranks"
        nranks = world
        comms, ops = merge_rank_files(rank_files.values())
        meta = _meta_from_rank_files(rank_files, heads)
        ranks = []
        for r in range(nranks):
            if r in rank_files:
                ranks.append(rank_files[r].info)
            elif r in broken:
                ranks.append(broken[r])
            else:
                ranks.append(_missing(r))
    _expand_members(comms, rank_files)

    missing = [info.rank for info in ranks if info.status == STATUS_MISSING]
    any_mpi = any(info.mpi_library not in (None, NO_MPI) for info in ranks)
    incomplete = []
    for info in ranks:
        if info.status == STATUS_MISSING:
            continue
        if info.status == STATUS_UNREADABLE:
            incomplete.append((info.rank, UNREADABLE_PREFIX + info.problem))
        elif info.problem == REASON_EMPTY:
            incomplete.append((info.rank, REASON_EMPTY))
        elif not info.has_end:
            incomplete.append((info.rank, REASON_NO_END))
        elif info.status != STATUS_COMPLETE:
            incomplete.append((info.rank, info.status))
        elif any_mpi and info.mpi_library == NO_MPI:
            incomplete.append((info.rank, REASON_BEFORE_INIT))
    callpaths = {r: f.callpaths for r, f in rank_files.items() if f.callpaths is not None}
    stray.sort(key=lambda f: f.path)
    rank_ops = {r: {key: (calls, nbytes, ns) for key, (calls, nbytes, ns, _) in f.ops.items()
                    if key[0] != TOTAL_COMM} for r, f in rank_files.items()}
    return Profile(meta, nranks, source, ranks, comms, ops, missing, incomplete, directory,
                   partial, callpaths, run, stray, notes, unused, scan.identity, scan.is_link,
                   tree, rank_ops)


def _read_tree(scan: _Scan, run: Optional[str], stray: list[StrayFile],
               notes: list[str]) -> Optional[ReducedTree]:
    """tree.tsv when it is there, of the run and readable; else None, with a stray file (a
    link, not a regular file, another run) or a note (a broken rule) saying why."""
    name = scan.name(TREE_FILE, in_ranks=False)
    try:
        os.stat(TREE_FILE, dir_fd=scan.fd, follow_symlinks=False)
    except OSError:
        return None
    tree = _read_optional(name, TREE_FILE, lambda: read_tree_tsv(scan.fd, name), stray, notes)
    if tree is None:
        return None
    if run is not None and tree.run != run:
        stray.append(StrayFile(name, f"belongs to another run ({tree.run})"))
        return None
    return tree


def _reduced_string(tree: Optional[ReducedTree], key: str) -> Optional[str]:
    """A string of tree.tsv that every rank has alike, else None."""
    values = tree.strings.get(key, []) if tree is not None else []
    return values[0][1] if len(values) == 1 else None


def _missing(rank: int, host: str = "", wall_ns: int = 0, mpi_ns: int = 0) -> RankInfo:
    """A rank without a file: small (a world of a million ranks has a million of these)."""
    return RankInfo(rank, host, wall_ns, mpi_ns, STATUS_MISSING, None, False, _NO_COUNTERS,
                    True, (), "", None)


def _unreadable(rank: int, message: str) -> RankInfo:
    return RankInfo(rank, "", 0, 0, STATUS_UNREADABLE, problem=message)


def _meta_from_rank_files(rank_files: dict[int, _RankFile],
                          heads: dict[int, _Head]) -> dict[str, Union[str, int]]:
    """The header of a profile without profile.tsv: from the lowest rank file read."""
    meta: dict[str, Union[str, int]] = {}
    if rank_files:
        first = next(iter(rank_files.values()))
        meta["format_version"] = first.version
        if first.program is not None:
            meta["program"] = first.program
        for key in _RANK_META:
            if key in first.meta:
                meta[key] = first.meta[key]
    elif heads:
        meta["format_version"] = next(iter(heads.values())).version or "?"
    starts = [f.start_unix_ns for f in rank_files.values() if f.start_unix_ns is not None]
    if starts:
        meta["start_unix_ns"] = (rank_files[0].start_unix_ns
                                 if 0 in rank_files and rank_files[0].start_unix_ns
                                 is not None else min(starts))
    return meta
