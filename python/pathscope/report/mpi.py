"""The MPI sections of the text report: the summary (MPI time per rank, the top operations),
the communicators ranked by MPI time, and the point-to-point consistency check (each
registered by pathscope.sources.mpi with its place in the report).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import pandas as pd

from pathscope.reader import (NO_COMM, STATUS_MISSING, STATUS_UNREADABLE, TOTAL_COMM, Comm,
                              Profile)
from pathscope.report.layout import INDENT, plural
from pathscope.report.layout import table as _table
from pathscope.units import format_bytes, format_percent, format_time, hist_bin_label

TOP_OPERATIONS = 10
if TYPE_CHECKING:
    from pathscope.frames import ProfileFrames

MEMBERS_SHOWN = 60          # characters of a member list shown before eliding
NAMES_SHOWN = 12            # communicator names listed for "no recorded calls"


def ns(seconds: "pd.Series") -> "pd.Series":
    """A time column of the export tables (seconds to the ns) as int64 ns, exactly."""
    return pd.Series(_ns(seconds), index=seconds.index)


def _ns(seconds: "pd.Series") -> "np.ndarray":
    return np.rint(seconds.to_numpy(dtype=np.float64, na_value=0.0) * 1e9).astype(np.int64)


def _time_with_rank(ns: float, rank: int) -> str:
    return f"{format_time(ns)} ({rank})"


def _hist_summary(hist: Optional[list[dict[str, int]]]) -> str:
    """The most common message-size bin, its share, and how many other bins were used
    (hist: the tables' [{bin, count}], in bin order)."""
    used = [(b["bin"], b["count"]) for b in hist or () if b["count"]]
    total = sum(count for _, count in used)
    if not total:
        return "-"
    top, most = max(used, key=lambda bc: (bc[1], -bc[0]))
    text = f"{hist_bin_label(top)} {format_percent(most / total)}"
    others = len(used) - 1
    if others:
        text += f" +{others} bin{'s' if others > 1 else ''}"
    return text


def op_table(ops: "pd.DataFrame") -> "pd.DataFrame":
    """The rows of the comm-ops or ops table with their times in ns (time_sum, time_min,
    time_max; mean = sum over the ranks that called), the largest time first (numpy-backed
    columns: the report reads every row)."""
    out = pd.DataFrame({c: pd.Series(ops[c].tolist(), dtype=object) for c in ops.columns
                        if c in ("comm", "op", "hist", "rank_min", "rank_max")})
    for c in ("calls", "bytes", "nranks"):
        out[c] = ops[c].to_numpy(dtype=np.int64)
    for c in ("time_sum", "time_min", "time_max"):
        out[c] = _ns(ops[f"{c}_s"])
    nranks = out["nranks"].to_numpy()
    out["mean"] = np.where(nranks > 0, out["time_sum"].to_numpy() / np.maximum(nranks, 1), 0.0)
    return out.sort_values(["time_sum", "op"], ascending=[False, True], kind="stable")


def _op_row(stat: Any, mpi_total_ns: int) -> list[str]:
    """stat: a row of op_table (itertuples)."""
    if stat.calls and not stat.time_sum:
        # local queries (MPI_Comm_rank, MPI_Wtime, ...) are counted, not timed (format.md)
        return [stat.op, str(stat.calls), format_bytes(stat.bytes), "not timed", "-", "-",
                str(stat.nranks), "-", _hist_summary(stat.hist)]
    share = format_percent(stat.time_sum / mpi_total_ns) if mpi_total_ns else "-"
    return [stat.op, str(stat.calls), format_bytes(stat.bytes), format_time(stat.mean),
            _time_with_rank(stat.time_min, stat.rank_min),
            _time_with_rank(stat.time_max, stat.rank_max), str(stat.nranks), share,
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

def summary(frames: "ProfileFrames") -> str:
    profile = frames.profile
    lines = ["Summary"]
    # the ranks with their times, read in chunks (a profile of 2^20 ranks, most missing,
    # keeps its memory bounded)
    measured = pd.concat([
        chunk[chunk["wall_s"].notna() & ~chunk["status"].isin([STATUS_MISSING,
                                                                STATUS_UNREADABLE])]
        for chunk in frames.table_chunks("ranks")])
    reduced = _reduced_times(profile) if measured.empty else None
    if reduced:
        lines.extend(reduced)
    elif measured.empty:
        lines.append(f"{INDENT}no rank recorded its times")
        return "\n".join(lines)
    else:
        lines.extend(_rank_times(measured))
    totals = op_table(frames.ops)
    if len(totals):
        ops_total = int(totals["time_sum"].sum())
        shown = totals.head(TOP_OPERATIONS)
        lines.append("")
        lines.append(f"{INDENT}Top operations over all communicators (time per rank; "
                     f"{len(shown)} of {len(totals)})")
        lines.append(_table(OP_HEADERS, [_op_row(s, ops_total) for s in shown.itertuples()],
                            OP_ALIGN, indent=INDENT * 2))
        lines.append(f"{INDENT * 2}{BYTES_NOTE}")
    return "\n".join(lines)


def _rank_times(measured: "pd.DataFrame") -> list[str]:
    """From the ranks table's rows of the ranks with times (by rank): the longest rank, the
    MPI time over all, each rank's MPI share's min, mean and max (the lowest rank on ties:
    idxmin and idxmax take the first)."""
    times = measured.assign(wall=ns(measured["wall_s"]), mpi=ns(measured["mpi_s"]))
    times = times.sort_values("rank").set_index("rank")
    share = times["mpi"] / times["wall"]
    longest = int(times["wall"].idxmax())
    low, high = int(share.idxmin()), int(share.idxmax())
    return _times_lines(int(times.loc[longest, "wall"]), longest, int(times["mpi"].sum()),
                        len(times), (share[low], low, share.mean(), share[high], high))


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


def _comm_heading(index: int, name: str, comm: Optional[dict[str, Any]],
                  members_count: int, time_ns: int, mpi_total_ns: int) -> list[str]:
    """comm: the communicator's row of the comms table (None: not described);
    members_count: its members (the whole list, where the table's text is cut)."""
    share = f", {format_percent(time_ns / mpi_total_ns)} of all MPI time" if mpi_total_ns else ""
    if name == NO_COMM:
        return [f"{INDENT}{index}. {NO_COMM}  (no communicator: local calls such as MPI_Wtime, "
                f"and calls that returned an error)",
                f"{INDENT}   MPI time {format_time(time_ns)} summed over ranks{share}"]
    if comm is None:
        return [f"{INDENT}{index}. {name}  (not described in the profile)",
                f"{INDENT}   MPI time {format_time(time_ns)} summed over ranks{share}"]
    members = comm["members"]
    if len(members) > MEMBERS_SHOWN:
        members = members[:MEMBERS_SHOWN] + f"... ({members_count} ranks)"
    size = f"size {comm['size']}"
    inter = comm["remote_size"] > 0
    if inter:
        size += f" + remote {comm['remote_size']} (intercommunicator)"
    if comm["memberships"]:   # folded: docs/user-guide.md, "Folded communicators"
        size = (f"folded: {plural(comm['folded'], 'freed communicator')} "
                f"({plural(comm['memberships'], 'membership')}) of size {comm['size']} or less")
        if inter:
            size += f" + remote {comm['remote_size']} or less (intercommunicators)"
        members += " together"
    created = "predefined" if comm["creator"] == "-" else f"created by {comm['creator']}"
    if comm["parent"] != "-":
        created += f" from {comm['parent']}"
    details = [created]
    if comm["topology"] != "-":
        details.append(f"topology {comm['topology']}")
    if comm["freed"] and not comm["memberships"]:
        details.append("freed")
    return [f"{INDENT}{index}. {name}  {size}, members {members}, hosts {comm['hosts']}",
            f"{INDENT}   {'; '.join(details)}",
            f"{INDENT}   MPI time {format_time(time_ns)} summed over ranks{share}"]


def communicators(frames: "ProfileFrames") -> str:
    """From the comms and comm-ops tables: each communicator's MPI time is a groupby sum of
    its operations' times; its operations, largest first, are its rows of comm-ops."""
    lines = ["Communicators ranked by MPI time"]
    comms = frames.comms
    ops = op_table(frames.comm_ops)
    times = ops.groupby("comm", sort=False)["time_sum"].sum()
    names = sorted(set(comms["name"]) | set(ops["comm"]))
    names = [n for n in names if n != TOTAL_COMM]
    if names:
        lines.append(f"{INDENT}{MEMBERS_NOTE}")
    mpi_total = int(times.sum())
    active = sorted(times.index, key=lambda n: (-times[n], n))
    idle = [n for n in names if n not in times.index]
    described = {row["name"]: row for row in comms.to_dict("records")}
    rows_by_comm: dict[str, list[Any]] = {}
    for stat in ops.itertuples():
        rows_by_comm.setdefault(stat.comm, []).append(stat)
    for index, name in enumerate(active, start=1):
        comm = frames.profile.comms.get(name)
        lines.append("")
        lines += _comm_heading(index, name, described.get(name),
                               len(comm.members_list) if comm is not None else 0,
                               int(times[name]), mpi_total)
        lines.append(_table(OP_HEADERS, [_op_row(s, mpi_total) for s in rows_by_comm[name]],
                            OP_ALIGN, indent=INDENT + "   "))
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
