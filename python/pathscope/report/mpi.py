"""The MPI sections of the text report: the summary (MPI time per rank, the top operations),
the communicators ranked by MPI time, and the point-to-point consistency check (each
registered by pathscope.sources.mpi with its place in the report).
"""
from __future__ import annotations

from typing import Optional, Sequence

from pathscope import ranges
from pathscope.reader import (NO_COMM, STATUS_MISSING, STATUS_UNREADABLE, TOTAL_COMM,
                              UNDEFINED_RANK, Comm, OpStat, Profile)
from pathscope.report.layout import INDENT, plural
from pathscope.report.layout import table as _table
from pathscope.units import format_bytes, format_percent, format_time, hist_bin_label

TOP_OPERATIONS = 10
MEMBERS_SHOWN = 60          # characters of a member list shown before eliding
NAMES_SHOWN = 12            # communicator names listed for "no recorded calls"


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
# whose bytes and which numbering the tables show (docs/user-guide.md says the same)
BYTES_NOTE = ("bytes: each rank's own side, summed over the ranks: a point-to-point message "
              "counts at its sender and at its receiver, a collective as each rank's share of "
              "mpisee's volume")
MEMBERS_NOTE = "members: world ranks (MPI_COMM_WORLD's numbering); bytes as in the Summary"


# ---- sections ---------------------------------------------------------------------------------

def summary(profile: Profile) -> str:
    lines = ["Summary"]
    measured = [r for r in profile.ranks
                if r.status not in (STATUS_MISSING, STATUS_UNREADABLE) and r.wall_ns > 0]
    reduced = _reduced_times(profile) if not measured else None
    if reduced:
        lines.extend(reduced)
    elif not measured:
        lines.append(f"{INDENT}no rank recorded its times")
        return "\n".join(lines)
    else:
        lines.extend(_rank_times(measured))
    totals = sorted(profile.op_totals(), key=lambda s: (-s.time_sum_ns, s.op))
    if totals:
        ops_total = sum(s.time_sum_ns for s in totals)
        shown = totals[:TOP_OPERATIONS]
        lines.append("")
        lines.append(f"{INDENT}Top operations over all communicators (time per rank; "
                     f"{len(shown)} of {len(totals)})")
        lines.append(_table(OP_HEADERS, [_op_row(s, ops_total) for s in shown], OP_ALIGN,
                            indent=INDENT * 2))
        lines.append(f"{INDENT * 2}{BYTES_NOTE}")
    return "\n".join(lines)


def _rank_times(measured: list) -> list[str]:
    longest = max(measured, key=lambda r: (r.wall_ns, -r.rank))
    mpi_total = sum(r.mpi_ns for r in measured)
    shares = [(r.mpi_ns / r.wall_ns, r.rank) for r in measured]
    low = min(shares, key=lambda s: (s[0], s[1]))
    high = max(shares, key=lambda s: (s[0], -s[1]))
    mean = sum(s for s, _ in shares) / len(shares)
    return _times_lines(longest.wall_ns, longest.rank, mpi_total, len(measured),
                        (low[0], low[1], mean, high[0], high[1]))


def _reduced_times(profile: Profile) -> Optional[list[str]]:
    """The same lines from tree.tsv's statistics of the ranks' head lines (a profile without
    per-rank times: --per-rank summary or none); None without them."""
    scalars = profile.tree.scalars if profile.tree is not None else {}
    wall, mpi = scalars.get("wall_ns"), scalars.get("mpi_ns")
    if wall is None or mpi is None or not wall.known or not wall.max:
        return None
    share = scalars.get("mpi_share_ppm")    # (format 2.10)
    shares = None
    if share is not None and share.known:
        shares = (share.min / 1e6, share.min_rank, share.mean / 1e6, share.max / 1e6,
                  share.max_rank)
    return _times_lines(wall.max, wall.max_rank, mpi.sum, wall.ranks, shares)


def _times_lines(longest_ns: int, longest_rank: int, mpi_total: int, nranks: int,
                 shares: Optional[tuple]) -> list[str]:
    lines = [f"{INDENT}wall time        {format_time(longest_ns)} (longest rank: {longest_rank})",
             f"{INDENT}MPI time         {format_time(mpi_total)} summed over {nranks} ranks"]
    if shares is not None:
        low, low_rank, mean, high, high_rank = shares
        lines.append(f"{INDENT}MPI share/rank   min {format_percent(low)} (rank {low_rank}), "
                     f"mean {format_percent(mean)}, max {format_percent(high)} (rank "
                     f"{high_rank})")
    return lines


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
    if comm.is_folded:   # docs/user-guide.md, "Folded communicators"
        size = (f"folded: {plural(comm.folded, 'freed communicator')} "
                f"({plural(comm.memberships, 'membership')}) of size {comm.size} or less")
        if comm.is_inter:
            size += f" + remote {comm.remote_size} or less (intercommunicators)"
        members += " together"
    created = "predefined" if comm.creator == "-" else f"created by {comm.creator}"
    if comm.parent != "-":
        created += f" from {comm.parent}"
    details = [created]
    if comm.topology != "-":
        details.append(f"topology {comm.topology}")
    if comm.freed and not comm.is_folded:
        details.append("freed")
    return [f"{INDENT}{index}. {name}  {size}, members {members}, "
            f"hosts {_hosts(profile, comm.members_list)}",
            f"{INDENT}   {'; '.join(details)}",
            f"{INDENT}   MPI time {format_time(time_ns)} summed over ranks{share}"]


def communicators(profile: Profile) -> str:
    lines = ["Communicators ranked by MPI time"]
    names = _comm_names(profile)
    if names:
        lines.append(f"{INDENT}{MEMBERS_NOTE}")
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
        lines.append(f"{INDENT}{plural(len(idle), 'communicator')} without recorded calls: "
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
    return (f"{plural(comm.freed_recvs, 'receive')} freed by MPI_Request_free before "
            f"completing ({comm.freed_recv_capacity} B posted)")


def mismatch_line(comm: Comm) -> str:
    freed = f" + {_freed_receives(comm)}" if comm.freed_recvs else ""
    return (f"MISMATCH comm {comm.name}: sent {comm.sent_msgs} msgs/{comm.sent_bytes} B, "
            f"received {comm.recv_msgs} msgs/{comm.recv_bytes} B{freed}")


def consistency(profile: Profile) -> str:
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
        lines.append(f"{INDENT}OK: all {plural(good, 'intracommunicator')}")
    elif good:
        lines.append(f"{INDENT}OK: the other {plural(good, 'intracommunicator')}")
    inter = [c.name for c in profile.comms.values() if c.is_inter]
    if inter:
        lines.append(f"{INDENT}not checked: {plural(len(inter), 'intercommunicator')} "
                     f"({', '.join(inter[:NAMES_SHOWN])}{', ...' if len(inter) > NAMES_SHOWN else ''})")
    if bad and (profile.missing_ranks or profile.incomplete_ranks):
        lines.append(f"{INDENT}note: some ranks did not complete (see Ranks); their messages "
                     f"in flight can explain a mismatch")
    for comm in bad:
        if comm.failed_requests:
            lines.append(f"{INDENT}note: on {comm.name}, "
                         f"{plural(comm.failed_requests, 'request')} of the program ended with "
                         f"an error (e.g. a truncated receive): no message is counted for them")
    return "\n".join(lines)
