"""The text report (`pathscope report DIR`): header, ranks, summary, the call-path sections
(pathscope.report.calltree: time split, call tree, hot path; only for profiles with call
paths), the ranks of the heaviest paths (pathscope.report.rankvec; `--per-rank summary`),
communicators ranked by time, and the point-to-point consistency check.  The core's
sections are here; a measurement source's come from pathscope.sources (the MPI ones:
pathscope.report.mpi), each at its place in SECTIONS.

Pure formatting: takes a Profile (and the names of its frames), returns a str; the sections
read the profile's tables (pathscope.frames.ProfileFrames, the call tree without the MPI
library's threads), where the statistics over the ranks are pandas aggregations.  Problems with the run (missing or unfinished
ranks, runtime counters, send/receive mismatches) are printed in full, never summarised away.
"""
from __future__ import annotations

import signal
import time
from typing import Optional

from pathscope import ranges
from pathscope.frames import ProfileFrames
from pathscope.reader import (PROFILE_FILE, REASON_BEFORE_INIT, REASON_EMPTY, REASON_NO_END,
                              STATUS_MISSING, UNREADABLE_PREFIX, Profile)
from pathscope.report import calltree, rankvec, walks
from pathscope.report.layout import INDENT, plural
from pathscope.sources import SOURCES
from pathscope.sources.base import Section
from pathscope.symbolize import resolve_symbols
from pathscope.symbols import SymbolTable
from pathscope.treefile import TREE_FILE

PARTIAL_FILE = "partial"   # a missing rank whose ranks/rank-N.tsv.tmp exists
DETAILS_SHOWN = 10          # unreadable ranks and stray files listed one by one
_CONTROL = {c: f"\\x{c:02x}" for c in range(32) if c != 10}
_CONTROL[127] = "\\x7f"


def render(profile: Profile, symbols: Optional[SymbolTable] = None,
           call_sites: bool = False) -> str:
    """symbols: the names of the call-path frames; by default resolved now (symbols.tsv, or
    the symbolizer: pathscope.symbolize.resolve_symbols).  call_sites: the call tree keeps a
    function's call sites apart (pathscope.report.calltree)."""
    if symbols is None:
        symbols = resolve_symbols(profile)
    frames = ProfileFrames(profile, symbols, runtime_threads=False)
    blocks = [block for section in SECTIONS for block in (
        calltree.sections(frames, call_sites) if section.render is calltree.sections
        else section.render(frames))]
    text = "\n\n".join(s.rstrip("\n") for s in blocks) + "\n"
    # recorded text (host names, commands, file names) never reaches the terminal as control
    # characters: a profile may come from someone else
    return text.translate(_CONTROL)


# ---- helpers ----------------------------------------------------------------------------------

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
        ("ranks", f"{profile.nranks} on {plural(len(hosts), 'host')}: "
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
    if profile.source == "profile" and profile.reduced_only():
        return (f"{PROFILE_FILE} and {TREE_FILE} (reduced inside the job at MPI_Finalize; "
                f"no rank files: per-rank data not kept)")
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
        lines.append(f"{INDENT}WARNING: {plural(count, 'file')} not merged (of another run, "
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
    if profile.tree is not None and not profile.callpaths:
        lines += _reduced_warnings(profile)
    return "\n".join(lines)


def _reduced_warnings(profile: Profile) -> list[str]:
    """The warnings and counters of tree.tsv (a profile without rank files): how many ranks
    had each, not which."""
    assert profile.tree is not None
    lines = []
    for _key, ranks, count, text in profile.tree.warnings:
        times = f", {count} times" if count > ranks else ""
        lines.append(f"{INDENT}warning: {text} ({plural(ranks, 'rank')}{times})")
    for name, stats in sorted(profile.tree.scalars.items()):
        if name.startswith("counter_") and stats.sum:
            lines.append(f"{INDENT}WARNING: counter {name[len('counter_'):]} = {stats.sum} "
                         f"({plural(stats.nonzero or 0, 'rank')}; max {stats.max} on rank "
                         f"{stats.max_rank})")
    return lines


# ---- the report's sections, in order: the core's and the measurement sources' ----------------

_CORE_SECTIONS = (
    Section(0, lambda frames: [_header(frames.profile)]),
    Section(10, lambda frames: [_ranks(frames.profile)]),
    Section(30, calltree.sections),
    Section(35, rankvec.sections),
    Section(45, walks.sections),
)
SECTIONS = tuple(sorted(_CORE_SECTIONS + tuple(s for source in SOURCES for s in source.sections),
                        key=lambda section: section.order))
