"""The text report (`pathscope report DIR`): header, ranks, summary, the call-path sections
(pathscope.report.calltree: time split, call tree, hot path; only for profiles with call
paths), communicators ranked by time, and the point-to-point consistency check.

Pure formatting: takes a Profile (and the names of its frames), returns a str.  Problems with the run (missing or unfinished
ranks, runtime counters, send/receive mismatches) are printed in full, never summarised away.
"""
from __future__ import annotations

import signal
import time
from typing import Optional, Sequence

from pathscope import ranges
from pathscope.reader import (NO_COMM, PROFILE_FILE, REASON_BEFORE_INIT, REASON_EMPTY,
                              REASON_NO_END, STATUS_MISSING, STATUS_UNREADABLE, TOTAL_COMM,
                              UNDEFINED_RANK, UNREADABLE_PREFIX, Comm, OpStat, Profile)
from pathscope.report import calltree, walks
from pathscope.report.layout import INDENT
from pathscope.report.layout import table as _table
from pathscope.sources import SOURCES
from pathscope.sources.base import Section
from pathscope.symbolize import resolve_symbols
from pathscope.symbols import SymbolTable
from pathscope.units import format_bytes, format_percent, format_time, hist_bin_label

TOP_OPERATIONS = 10
MEMBERS_SHOWN = 60          # characters of a member list shown before eliding
NAMES_SHOWN = 12            # communicator names listed for "no recorded calls"
PARTIAL_FILE = "partial"   # a missing rank whose ranks/rank-N.tsv.tmp exists
DETAILS_SHOWN = 10          # unreadable ranks and stray files listed one by one
_CONTROL = {c: f"\\x{c:02x}" for c in range(32) if c != 10}
_CONTROL[127] = "\\x7f"


def render(profile: Profile, symbols: Optional[SymbolTable] = None) -> str:
    """symbols: the names of the call-path frames; by default resolved now (symbols.tsv, or
    the symbolizer: pathscope.symbolize.resolve_symbols)."""
    if symbols is None:
        symbols = resolve_symbols(profile)
    blocks = [block for section in SECTIONS for block in section.render(profile, symbols)]
    text = "\n\n".join(s.rstrip("\n") for s in blocks) + "\n"
    # recorded text (host names, commands, file names) never reaches the terminal as control
    # characters: a profile may come from someone else
    return text.translate(_CONTROL)


# ---- helpers ----------------------------------------------------------------------------------

def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _one_line(text: str) -> str:
    """Recorded text (e.g. MPICH's library version holds a TAB) on one report line."""
    return " ".join(text.split())


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


def describe_status(status: str, with_profile: bool = False) -> str:
    """A rank's status (or incompleteness reason) in words; with_profile: profile.tsv was read
    (every rank reached MPI_Finalize)."""
    kind, _, arg = status.partition(" ")
    if status == STATUS_MISSING:
        if with_profile:
            return (f"missing: no rank file, although {PROFILE_FILE} shows MPI_Finalize "
                    f"reached (removed, or written to another node's file system)")
        return "missing: no rank file (never initialised MPI under pathscope, or killed by SIGKILL)"
    if status == PARTIAL_FILE:
        return "missing: killed while writing its rank file (its temporary file was left behind)"
    if status == REASON_NO_END:
        return "incomplete: rank file cut short (no end line)"
    if status == REASON_EMPTY:
        return "incomplete: rank file empty or cut short before its first lines"
    if status == REASON_BEFORE_INIT:
        return "ended without calling MPI_Init: no MPI data"
    if status.startswith(UNREADABLE_PREFIX):
        return f"unreadable, left out: {status[len(UNREADABLE_PREFIX):]}"
    if kind == "abort":
        return f"called MPI_Abort (error code {arg})"
    if kind == "ended-by-rank" and arg.isdigit():
        return f"stopped when rank {arg} ended the job (its data up to then was written)"
    number, _, detail = arg.partition(" ")
    if kind == "signal" and number.isdigit() and len(number) < 4:
        text = f"killed by signal {number} ({_signal_name(int(number))})"
        if detail == "before-init":
            text += " before MPI_Init returned: no MPI data"
        elif with_profile:      # profile.tsv: every rank was through MPI_Finalize's reduction
            text += " after MPI_Finalize"
        return text
    if status == "exit-without-finalize":
        return "exited without calling MPI_Finalize"
    return f"status '{status}'"


def _hosts(profile: Profile, world_ranks: Sequence[int]) -> str:
    names = [profile.host_of(r) for r in world_ranks if r != UNDEFINED_RANK]
    return ranges.compress_hosts(n for n in names if n)


def _time_with_rank(ns: float, rank: int) -> str:
    return f"{format_time(ns)} ({rank})"


def _hist_summary(hist: dict[int, int]) -> str:
    """The most common message-size bin, its share, and how many other bins were used."""
    total = sum(hist.values())
    if not total:
        return "-"
    top = max(sorted(hist), key=lambda b: hist[b])
    text = f"{hist_bin_label(top)} {format_percent(hist[top] / total)}"
    others = len([b for b in hist if hist[b]]) - 1
    if others:
        text += f" +{others} bin{'s' if others > 1 else ''}"
    return text


def _op_row(stat: OpStat, mpi_total_ns: int) -> list[str]:
    if stat.calls and not stat.time_sum_ns:
        # local queries (MPI_Comm_rank, MPI_Wtime, ...) are counted, not timed (format.md)
        return [stat.op, str(stat.calls), format_bytes(stat.bytes), "not timed", "-", "-",
                str(stat.nranks), "-", _hist_summary(stat.hist)]
    share = format_percent(stat.time_sum_ns / mpi_total_ns) if mpi_total_ns else "-"
    return [stat.op, str(stat.calls), format_bytes(stat.bytes), format_time(stat.time_mean_ns),
            _time_with_rank(stat.time_min_ns, stat.rank_min),
            _time_with_rank(stat.time_max_ns, stat.rank_max), str(stat.nranks), share,
            _hist_summary(stat.hist)]


OP_HEADERS = ["operation", "calls", "bytes", "mean/rank", "min (rank)", "max (rank)", "ranks",
              "%MPI", "message sizes (most common)"]
OP_ALIGN = "lrrrrrrrl"


# ---- sections ---------------------------------------------------------------------------------

def _header(profile: Profile) -> str:
    meta = profile.meta
    absent = "(not recorded: no profile.tsv)"
    hosts = sorted({r.host for r in profile.ranks if r.host})
    started = "-"
    if "start_unix_ns" in meta:
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                time.gmtime(int(meta["start_unix_ns"]) / 1e9))
    source = _source(profile)
    version = str(meta.get("format_version", "?"))
    if "tool_version" in meta:
        version += f", written by pathscope {meta['tool_version']}"
    rows: list[tuple[str, object]] = [
        ("program", meta.get("program", "-")),
        *([("run", profile.run_id)] if profile.run_id else []),
        ("command", meta.get("command", absent)),
        ("MPI library", meta.get("mpi_library", absent)),
        ("ranks", f"{profile.nranks} on {_plural(len(hosts), 'host')}: "
                  f"{ranges.compress_hosts(hosts)}"),
        ("started", started),
        ("source", source),
        ("format", version),
    ]
    lines = [f"pathscope report: {profile.path}"]
    lines += [f"{INDENT}{k:<12} {_one_line(str(v))}" for k, v in rows]
    return "\n".join(lines)


def _source(profile: Profile) -> str:
    """Where the numbers come from, and why there is no profile.tsv (never contradicting the
    Ranks section: a run whose ranks all reached MPI_Finalize is not said to have stopped)."""
    if profile.source == "profile":
        return f"{PROFILE_FILE} (reduced inside the job at MPI_Finalize)"
    if profile.profile_tsv_unused is not None:
        return f"rank files ({PROFILE_FILE} not used: see Ranks)"
    if profile.never_called_mpi():
        return f"rank files (the program never called MPI_Init: no {PROFILE_FILE})"
    if not profile.missing_ranks and not profile.incomplete_ranks:
        return f"rank files (no {PROFILE_FILE}, although every rank reached MPI_Finalize)"
    return f"rank files (no {PROFILE_FILE}: the run did not reach MPI_Finalize on every rank)"


def _ranks(profile: Profile) -> str:
    problems: dict[str, list[int]] = {}
    for rank in profile.missing_ranks:
        key = PARTIAL_FILE if rank in profile.partial_rank_files else STATUS_MISSING
        problems.setdefault(key, []).append(rank)
    unreadable: list[tuple[int, str]] = []
    for rank, reason in profile.incomplete_ranks:
        if reason.startswith(UNREADABLE_PREFIX):
            unreadable.append((rank, reason))
        else:
            problems.setdefault(reason, []).append(rank)
    lines = ["Ranks"]
    bad = len({r for rs in problems.values() for r in rs}) + len(unreadable)
    with_profile = profile.source == "profile"
    if not bad:
        if profile.never_called_mpi():
            what = (f"all {profile.nranks} processes" if profile.nranks > 1
                    else "the process")
            lines.append(f"{INDENT}{what} ended normally without calling MPI_Init: no MPI data")
        elif profile.stray_files:
            lines.append(f"{INDENT}{profile.nranks} of {profile.nranks} ranks of this run "
                         f"complete (MPI_Finalize reached)")
        else:
            lines.append(f"{INDENT}all {profile.nranks} ranks complete (MPI_Finalize reached)")
    else:
        lines.append(f"{INDENT}WARNING: {bad} of {profile.nranks} ranks did not complete; "
                     f"their data is partial or absent:")
        for reason, world_ranks in sorted(problems.items(), key=lambda kv: min(kv[1])):
            label = "rank" if len(world_ranks) == 1 else "ranks"
            lines.append(f"{INDENT}  {label} {ranges.compress(sorted(world_ranks))}: "
                         f"{describe_status(reason, with_profile)}")
        for rank, reason in unreadable[:DETAILS_SHOWN]:
            lines.append(f"{INDENT}  rank {rank}: {describe_status(reason)}")
        if len(unreadable) > DETAILS_SHOWN:
            rest = sorted(r for r, _ in unreadable[DETAILS_SHOWN:])
            lines.append(f"{INDENT}  ranks {ranges.compress(rest)}: also unreadable, left out")
    if profile.stray_files:
        count = len(profile.stray_files)
        lines.append(f"{INDENT}WARNING: {_plural(count, 'file')} not merged (of another run, "
                     f"or not read):")
        for stray in profile.stray_files[:DETAILS_SHOWN]:
            lines.append(f"{INDENT}  {stray}")
        if count > DETAILS_SHOWN:
            lines.append(f"{INDENT}  ... and {count - DETAILS_SHOWN} more")
    for note in profile.notes:
        lines.append(f"{INDENT}note: {note}")
    for group in profile.warnings():
        label = "rank" if len(group.ranks) == 1 else "ranks"
        times = f", {group.count} times" if group.count > len(group.ranks) else ""
        lines.append(f"{INDENT}warning: {group.text} ({label} "
                     f"{ranges.compress(sorted(group.ranks))}{times})")
    counters: dict[str, list[tuple[int, int]]] = {}
    for info in profile.ranks:
        for name, value in info.counters.items():
            if value:
                counters.setdefault(name, []).append((info.rank, value))
    for name, hits in sorted(counters.items()):
        lines.append(f"{INDENT}WARNING: counter {name} = {sum(v for _, v in hits)} "
                     f"(ranks {ranges.compress(sorted(r for r, _ in hits))})")
    return "\n".join(lines)


def _summary(profile: Profile) -> str:
    lines = ["Summary"]
    measured = [r for r in profile.ranks
                if r.status not in (STATUS_MISSING, STATUS_UNREADABLE) and r.wall_ns > 0]
    if not measured:
        lines.append(f"{INDENT}no rank recorded its times")
        return "\n".join(lines)
    longest = max(measured, key=lambda r: (r.wall_ns, -r.rank))
    mpi_total = sum(r.mpi_ns for r in measured)
    shares = [(r.mpi_ns / r.wall_ns, r.rank) for r in measured]
    low = min(shares, key=lambda s: (s[0], s[1]))
    high = max(shares, key=lambda s: (s[0], -s[1]))
    mean = sum(s for s, _ in shares) / len(shares)
    lines.append(f"{INDENT}wall time        {format_time(longest.wall_ns)} "
                 f"(longest rank: {longest.rank})")
    lines.append(f"{INDENT}MPI time         {format_time(mpi_total)} summed over "
                 f"{len(measured)} ranks")
    lines.append(f"{INDENT}MPI share/rank   min {format_percent(low[0])} (rank {low[1]}), "
                 f"mean {format_percent(mean)}, max {format_percent(high[0])} (rank {high[1]})")
    totals = sorted(profile.op_totals(), key=lambda s: (-s.time_sum_ns, s.op))
    if totals:
        ops_total = sum(s.time_sum_ns for s in totals)
        shown = totals[:TOP_OPERATIONS]
        lines.append("")
        lines.append(f"{INDENT}Top operations over all communicators (time per rank; "
                     f"{len(shown)} of {len(totals)})")
        lines.append(_table(OP_HEADERS, [_op_row(s, ops_total) for s in shown], OP_ALIGN,
                            indent=INDENT * 2))
    return "\n".join(lines)


def _comm_names(profile: Profile) -> list[str]:
    names = set(profile.comms) | {c for c, _ in profile.ops}
    names.discard(TOTAL_COMM)
    return sorted(names)


def _comm_heading(index: int, name: str, comm: Optional[Comm], profile: Profile,
                  time_ns: int, mpi_total_ns: int) -> list[str]:
    share = f", {format_percent(time_ns / mpi_total_ns)} of all MPI time" if mpi_total_ns else ""
    if name == NO_COMM:
        return [f"{INDENT}{index}. {NO_COMM}  (no communicator: local calls such as MPI_Wtime, "
                f"and calls that returned an error)",
                f"{INDENT}   MPI time {format_time(time_ns)} summed over ranks{share}"]
    if comm is None:
        return [f"{INDENT}{index}. {name}  (not described in the profile)",
                f"{INDENT}   MPI time {format_time(time_ns)} summed over ranks{share}"]
    members = comm.members
    if len(members) > MEMBERS_SHOWN:
        members = members[:MEMBERS_SHOWN] + f"... ({len(comm.members_list)} ranks)"
    size = f"size {comm.size}"
    if comm.is_inter:
        size += f" + remote {comm.remote_size} (intercommunicator)"
    created = "predefined" if comm.creator == "-" else f"created by {comm.creator}"
    if comm.parent != "-":
        created += f" from {comm.parent}"
    details = [created]
    if comm.topology != "-":
        details.append(f"topology {comm.topology}")
    if comm.freed:
        details.append("freed")
    return [f"{INDENT}{index}. {name}  {size}, members {members}, "
            f"hosts {_hosts(profile, comm.members_list)}",
            f"{INDENT}   {'; '.join(details)}",
            f"{INDENT}   MPI time {format_time(time_ns)} summed over ranks{share}"]


def _communicators(profile: Profile) -> str:
    lines = ["Communicators ranked by MPI time"]
    names = _comm_names(profile)
    times = {n: profile.comm_time_ns(n) for n in names}
    mpi_total = sum(times.values())
    active = [n for n in names if profile.comm_ops(n)]
    idle = [n for n in names if not profile.comm_ops(n)]
    active.sort(key=lambda n: (-times[n], n))
    for index, name in enumerate(active, start=1):
        lines.append("")
        lines += _comm_heading(index, name, profile.comms.get(name), profile, times[name],
                               mpi_total)
        stats = sorted(profile.comm_ops(name), key=lambda s: (-s.time_sum_ns, s.op))
        lines.append(_table(OP_HEADERS, [_op_row(s, mpi_total) for s in stats], OP_ALIGN,
                            indent=INDENT + "   "))
    if idle:
        shown = ", ".join(idle[:NAMES_SHOWN]) + (", ..." if len(idle) > NAMES_SHOWN else "")
        lines.append("")
        lines.append(f"{INDENT}{_plural(len(idle), 'communicator')} without recorded calls: "
                     f"{shown}")
    if not names:
        lines.append(f"{INDENT}no communicators recorded")
    return "\n".join(lines)


def p2p_consistent(comm: Comm) -> bool:
    """Every message sent on an intracommunicator was received.  Receives released by
    MPI_Request_free while outstanding (format 2.3) received their messages unseen: they count
    as messages, and their bytes (not known) are at most their posted capacity."""
    if not comm.freed_recvs:
        return (comm.sent_msgs, comm.sent_bytes) == (comm.recv_msgs, comm.recv_bytes)
    return (comm.sent_msgs == comm.recv_msgs + comm.freed_recvs
            and comm.recv_bytes <= comm.sent_bytes <= comm.recv_bytes + comm.freed_recv_capacity)


def _freed_receives(comm: Comm) -> str:
    return (f"{_plural(comm.freed_recvs, 'receive')} freed by MPI_Request_free before "
            f"completing ({comm.freed_recv_capacity} B posted)")


def mismatch_line(comm: Comm) -> str:
    freed = f" + {_freed_receives(comm)}" if comm.freed_recvs else ""
    return (f"MISMATCH comm {comm.name}: sent {comm.sent_msgs} msgs/{comm.sent_bytes} B, "
            f"received {comm.recv_msgs} msgs/{comm.recv_bytes} B{freed}")


def _consistency(profile: Profile) -> str:
    lines = ["Consistency (point-to-point: sent == received on each intracommunicator)"]
    intra = [c for c in profile.comms.values()
             if not c.is_inter and c.name not in (NO_COMM, TOTAL_COMM) and c.size > 0]
    bad = [c for c in intra if not p2p_consistent(c)]
    for comm in bad:
        lines.append(f"{INDENT}{mismatch_line(comm)}")
    for comm in intra:
        if comm.freed_recvs and comm not in bad:
            lines.append(f"{INDENT}OK: comm {comm.name}: sent {comm.sent_msgs} msgs/"
                         f"{comm.sent_bytes} B = received {comm.recv_msgs} msgs/"
                         f"{comm.recv_bytes} B + {_freed_receives(comm)}, whose "
                         f"{comm.sent_bytes - comm.recv_bytes} B arrived unseen")
    good = len(intra) - len(bad)
    if not bad:
        lines.append(f"{INDENT}OK: all {_plural(good, 'intracommunicator')}")
    elif good:
        lines.append(f"{INDENT}OK: the other {_plural(good, 'intracommunicator')}")
    inter = [c.name for c in profile.comms.values() if c.is_inter]
    if inter:
        lines.append(f"{INDENT}not checked: {_plural(len(inter), 'intercommunicator')} "
                     f"({', '.join(inter[:NAMES_SHOWN])}{', ...' if len(inter) > NAMES_SHOWN else ''})")
    if bad and (profile.missing_ranks or profile.incomplete_ranks):
        lines.append(f"{INDENT}note: some ranks did not complete (see Ranks); their messages "
                     f"in flight can explain a mismatch")
    for comm in bad:
        if comm.failed_requests:
            lines.append(f"{INDENT}note: on {comm.name}, "
                         f"{_plural(comm.failed_requests, 'request')} of the program ended with "
                         f"an error (e.g. a truncated receive): no message is counted for them")
    return "\n".join(lines)


# ---- the report's sections, in order: the core's and the measurement sources' ----------------

_CORE_SECTIONS = (
    Section(0, lambda profile, symbols: [_header(profile)]),
    Section(10, lambda profile, symbols: [_ranks(profile)]),
    Section(20, lambda profile, symbols: [_summary(profile)]),
    Section(30, calltree.sections),
    Section(45, walks.sections),
    Section(60, lambda profile, symbols: [_communicators(profile)]),
    Section(70, lambda profile, symbols: [_consistency(profile)]),
)
SECTIONS = tuple(sorted(_CORE_SECTIONS + tuple(s for source in SOURCES for s in source.sections),
                        key=lambda section: section.order))
