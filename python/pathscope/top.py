"""`pathscope top`: the live view of a job's processes on this node, from their live
segments (pathscope.live): one snapshot aggregated over the ranks, as JSON, text or the
Textual UI (pathscope.topui).

    view = LiveView(selection)         # DIR, PID or every process of this user
    snap = view.snapshot()             # reads the segments again, symbolizes new frames
    print(json.dumps(snap.to_json()))

Rules kept here:
- A segment is stale when its process is gone, when the pid now belongs to another process
  (start time differs), or when it was not published for STALE_INTERVALS intervals ("not
  updating"); stale and ended processes are listed, never aggregated.
- Aggregates are over the ranks of the snapshot that are neither stale nor ended: per row the
  sum, and the minimum, mean and maximum per rank with the ranks holding the minimum and the
  maximum (a rank without the row counts 0; ties go to the lowest rank).
- Rows are keyed by what is the same across ranks: a hot path by its frames' (module path,
  build id, address), an MPI row by (communicator, operation), a probe by its name, a system
  call by its name.  Module ids differ per process and are never compared.
- Frames are named by the symbolizer in its normal mode, once per distinct address; a
  symbolizer that fails leaves module+offset names and a note.
- clean_stale removes, in this user's D only, files named <pid>-<starttime>.live/.sock whose
  process is gone or whose pid belongs to another process now.
Nothing here prints or exits.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

from pathscope.control import find_target
from pathscope.errors import LiveError, SymbolizerError
from pathscope.live import (STALE_INTERVALS, Frames, Segment, list_entries, open_private_dir,
                            private_dir_path, process_start_time, read_segment)
from pathscope.symbolize import find_symbolizer, run_symbolizer
from pathscope.symbols import Frame, SymbolTable, unresolved_name

JSON_SCHEMA = "pathscope-top/1"
HOT_ROWS = 64


# ---- which segments -------------------------------------------------------------------------

@dataclass(frozen=True)
class Selection:
    """What top shows: the job writing to outdir, the job of process pid, or (both None)
    the only job of this user on this node."""
    outdir: Optional[str] = None
    pid: Optional[int] = None


def stale_reason(segment: Segment, now_ns: int) -> Optional[str]:
    h = segment.header
    start = process_start_time(h.pid)
    if start is None:
        return "process gone"
    if start != h.start_time:
        return "pid reused"
    if h.state != 2 and h.interval_ms and \
            now_ns - h.published_unix_ns > STALE_INTERVALS * h.interval_ms * 1_000_000:
        return "not updating"
    return None


def read_all(uid: int) -> tuple[list[Segment], list[str]]:
    """Every segment of uid's D, and a note per file that could not be read."""
    if not os.path.lexists(private_dir_path(uid)):
        return [], []
    dir_fd = open_private_dir(uid)
    segments, notes = [], []
    try:
        for entry, _process, kind in list_entries(dir_fd):
            if kind != "live":
                continue
            try:
                segments.append(read_segment(dir_fd, entry, uid, private_dir_path(uid)))
            except LiveError as e:
                notes.append(str(e))
    finally:
        os.close(dir_fd)
    return segments, notes


def select(segments: list[Segment], selection: Selection,
           uid: Optional[int] = None) -> tuple[str, list[Segment]]:
    """The job's output directory and its segments (read from uid's D, by default ours);
    LiveError if there is none (or, with no selection, several jobs)."""
    shown = private_dir_path(os.geteuid() if uid is None else uid)
    outdir = selection.outdir
    if selection.pid is not None:
        mine = [s for s in segments if s.header.pid == selection.pid]
        if not mine:
            raise LiveError(f"process {selection.pid} has no live segment in {shown} (not "
                            f"started under pathscope, PATHSCOPE_LIVE=0, or another user's)")
        outdir = mine[0].header.outdir
    if outdir is None:
        jobs = sorted({s.header.outdir for s in segments})
        if not jobs:
            raise LiveError(f"no pathscope process on this node (no live segment in {shown})")
        if len(jobs) > 1:
            raise LiveError(f"{len(jobs)} jobs on this node, name one (pathscope top DIR): "
                            f"{', '.join(jobs)}")
        outdir = jobs[0]
    chosen = [s for s in segments if s.header.outdir == outdir]
    if not chosen:
        raise LiveError(f"no process of job {outdir} on this node (no live segment in "
                        f"{shown} names it)")
    return outdir, sorted(chosen, key=lambda s: (s.header.rank, s.header.pid))


# ---- aggregation ----------------------------------------------------------------------------

@dataclass
class Stat:
    """One value over the ranks."""
    sum: int = 0
    min: int = 0
    mean: float = 0.0
    max: int = 0
    min_rank: int = -1
    max_rank: int = -1

    def to_json(self) -> dict[str, Any]:
        return {"sum": self.sum, "min": self.min, "mean": self.mean, "max": self.max,
                "min_rank": self.min_rank, "max_rank": self.max_rank}


def aggregate(values: dict[int, int], ranks: list[int]) -> Stat:
    """values by rank (missing ranks count 0) over ranks (sorted, distinct)."""
    if not ranks:
        return Stat()
    full = [(values.get(r, 0), r) for r in ranks]
    low = min(full, key=lambda vr: (vr[0], vr[1]))
    high = max(full, key=lambda vr: (vr[0], -vr[1]))
    total = sum(v for v, _ in full)
    return Stat(total, low[0], total / len(ranks), high[0], low[1], high[1])


RowKey = tuple[Any, ...]


def aggregate_rows(per_rank: dict[int, dict[RowKey, tuple[int, ...]]], ranks: list[int],
                   width: int) -> dict[RowKey, list[Stat]]:
    """Each row's `width` metrics aggregated over ranks."""
    keys: list[RowKey] = []
    for rows in per_rank.values():
        keys.extend(k for k in rows if k not in keys)
    out = {}
    for key in keys:
        out[key] = [aggregate({r: rows[key][i] for r, rows in per_rank.items() if key in rows},
                              ranks) for i in range(width)]
    return out


def _add(rows: dict[RowKey, tuple[int, ...]], key: RowKey, values: Iterable[int]) -> None:
    old = rows.get(key)
    new = tuple(values)
    rows[key] = new if old is None else tuple(a + b for a, b in zip(old, new))


FrameKey = tuple[str, str, int, str]        # module path, build id, address, kind


def frame_keys(segment: Segment, frames: Frames, leaf_kind: str) -> tuple[FrameKey, ...]:
    """The process-independent identity of frames (innermost first): the innermost gets
    leaf_kind (`pc` for a sampled leaf), the others are return addresses (`call`)."""
    out = []
    for i, (module_id, address) in enumerate(frames):
        path, build_id = segment.data.modules.get(module_id, ("", "")) \
            if module_id is not None else ("", "")
        out.append((path, build_id, address, leaf_kind if i == 0 else "call"))
    return tuple(out)


def rank_of(segment: Segment) -> int:
    """The rank a segment is counted as: its MPI rank, else its pid (not an MPI process)."""
    return segment.header.rank if segment.header.rank >= 0 else segment.header.pid


def tables(segments: list[Segment]) -> dict[str, dict[int, dict[RowKey, tuple[int, ...]]]]:
    """Each view's rows per rank, before aggregation."""
    out: dict[str, dict[int, dict[RowKey, tuple[int, ...]]]] = {
        "hot": {}, "mpi": {}, "probes": {}, "probe_paths": {}, "heap": {}, "syscalls": {}}
    for s in segments:
        r = rank_of(s)
        mine = {name: out[name].setdefault(r, {}) for name in out}
        for ns, offcpu, samples, frames in s.data.hot:
            _add(mine["hot"], frame_keys(s, frames, "pc"), (ns, offcpu, samples))
        for comm, op, calls, ns, nbytes in s.data.mpi:
            _add(mine["mpi"], (comm, op), (calls, ns, nbytes))
        names = {}
        for pid_id, state, calls, incl, excl, name in s.data.probes:
            names[pid_id] = name
            _add(mine["probes"], (name, state), (calls, incl, excl))
        for pid_id, calls, incl, excl, frames in s.data.ppaths:
            key = (names.get(pid_id, f"probe {pid_id}"), frame_keys(s, frames, "call"))
            _add(mine["probe_paths"], key, (calls, incl, excl))
        if s.data.heap is not None:
            _add(mine["heap"], ("heap",), s.data.heap)
        for name, calls, ns in s.data.syscalls:
            _add(mine["syscalls"], (name,), (calls, ns))
    return out


# ---- names of frames ------------------------------------------------------------------------

class FrameNames:
    """Names of frames, asked of the symbolizer once per distinct address (kept between
    snapshots)."""

    def __init__(self, ask: Optional[Callable[[dict[tuple[str, str], set[tuple[int, str]]]],
                                              SymbolTable]] = None):
        self.table = SymbolTable()
        self.asked: set[FrameKey] = set()
        self.notes: list[str] = []
        self._ask = ask or self._symbolizer

    @staticmethod
    def _symbolizer(needed: dict[tuple[str, str], set[tuple[int, str]]]) -> SymbolTable:
        return run_symbolizer(find_symbolizer(), needed)[0]

    def learn(self, keys: Iterable[FrameKey]) -> None:
        new = {k for k in keys if k not in self.asked and k[0]}
        if not new:
            return
        needed: dict[tuple[str, str], set[tuple[int, str]]] = {}
        for path, build_id, address, kind in sorted(new):
            needed.setdefault((path, build_id), set()).add((address, kind))
        self.asked |= new
        try:
            answer = self._ask(needed)
        except SymbolizerError as e:
            note = f"symbols: {e}; frames shown as module+offset"
            if note not in self.notes:
                self.notes.append(note)
            return
        self.table.modules.update(answer.modules)
        self.table.addresses.update(answer.addresses)

    def names(self, key: FrameKey) -> list[str]:
        """The function of the frame, then the functions inlined into it at that address,
        outermost first."""
        frame = Frame(key[3], key[0], key[1], key[2])
        return self.table.names(frame) if key[0] else [unresolved_name(frame)]

    def where(self, key: FrameKey) -> str:
        lines = self.table.lines(Frame(key[3], key[0], key[1], key[2]))
        if not lines or not lines[-1].file:
            return ""
        return f"{lines[-1].file}:{lines[-1].line or 0}"


# ---- the snapshot ---------------------------------------------------------------------------

@dataclass
class ProcessRow:
    segment: Segment
    stale: Optional[str]

    def to_json(self) -> dict[str, Any]:
        h, d = self.segment.header, self.segment.data
        return {"pid": h.pid, "start_time": h.start_time, "rank": h.rank, "size": h.size, "host": h.host,
                "program": h.program, "run_id": h.run_id, "state": h.state_name,
                "stale": self.stale, "publishes": h.publishes,
                "published_unix_ns": h.published_unix_ns, "interval_ms": h.interval_ms,
                "publisher_cpu_total_ns": h.publisher_cpu_total_ns,
                "elapsed_ns": d.elapsed_ns,
                "threads": [{"index": t[0], "tid": t[1], "elapsed_ns": t[2], "cpu_ns": t[3]}
                            for t in d.threads],
                "probe_ids": {name: probe_id for probe_id, _s, _c, _i, _e, name in d.probes}}


@dataclass
class Snapshot:
    outdir: str
    time_unix_ns: int
    processes: list[ProcessRow]
    ranks: list[int]                                  # the aggregated ones
    rows: dict[str, dict[RowKey, list[Stat]]]
    names: FrameNames
    notes: list[str] = field(default_factory=list)

    def _frames(self, keys: tuple[FrameKey, ...]) -> list[dict[str, Any]]:
        out = []
        for k in keys:
            names = self.names.names(k)
            out.append({"module": k[0], "build_id": k[1], "address": f"0x{k[2]:x}",
                        "name": names[0], "inlined": names[1:], "where": self.names.where(k)})
        return out

    def to_json(self) -> dict[str, Any]:
        def stats(names: tuple[str, ...], values: list[Stat]) -> dict[str, Any]:
            return {n: v.to_json() for n, v in zip(names, values)}
        rows = self.rows
        heap = rows["heap"].get(("heap",))
        return {
            "schema": JSON_SCHEMA, "outdir": self.outdir, "time_unix_ns": self.time_unix_ns,
            "ranks": self.ranks,
            "processes": [p.to_json() for p in self.processes],
            "hot": [{"frames": self._frames(k), **stats(("sample_ns", "offcpu_ns", "samples"), v)}
                    for k, v in _top(rows["hot"], HOT_ROWS, 0)],
            "mpi": [{"comm": k[0], "op": k[1], **stats(("calls", "ns", "bytes"), v)}
                    for k, v in _top(rows["mpi"], len(rows["mpi"]))],
            "probes": [{"name": k[0], "state": k[1], **stats(("calls", "incl_ns", "excl_ns"), v)}
                       for k, v in _top(rows["probes"], len(rows["probes"]))],
            "probe_paths": [{"name": k[0], "frames": self._frames(k[1]),
                             **stats(("calls", "incl_ns", "excl_ns"), v)}
                            for k, v in _top(rows["probe_paths"], len(rows["probe_paths"]))],
            "heap": stats(("live", "peak", "allocs", "frees"), heap) if heap else None,
            "syscalls": [{"name": k[0], **stats(("calls", "ns"), v)}
                         for k, v in _top(rows["syscalls"], len(rows["syscalls"]))],
            "notes": self.notes + self.names.notes,
        }


def _top(rows: dict[RowKey, list[Stat]], count: int,
         metric: int = 1) -> list[tuple[RowKey, list[Stat]]]:
    """Rows by the sum of their metric `metric` (time), largest first."""
    return sorted(rows.items(), key=lambda kv: (-kv[1][metric].sum, str(kv[0])))[:count]


class LiveView:
    """Snapshots of one selection, with frame names kept between them.  A PID selection is
    read from the directory of the process's owner (root may watch any user's job); the
    others from ours."""

    def __init__(self, selection: Selection, names: Optional[FrameNames] = None):
        self.selection = selection
        self.names = names or FrameNames()
        self.uid = os.geteuid()
        if selection.pid is not None:
            self.uid = find_target(selection.pid).uid

    def snapshot(self) -> Snapshot:
        segments, notes = read_all(self.uid)
        try:
            outdir, chosen = select(segments, self.selection, self.uid)
        except LiveError as e:
            if notes:       # the job's own segment may be among the unreadable ones
                raise LiveError(f"{e}; not read: {'; '.join(notes)}") from None
            raise
        return build_snapshot(outdir, chosen, notes, self.names, time.time_ns())


def build_snapshot(outdir: str, segments: list[Segment], notes: list[str], names: FrameNames,
                   now_ns: int) -> Snapshot:
    processes = [ProcessRow(s, stale_reason(s, now_ns)) for s in segments]
    live = [p.segment for p in processes if p.stale is None and p.segment.header.state != 2]
    ranks = sorted({rank_of(s) for s in live})
    per_view = tables(live)
    widths = {"hot": 3, "mpi": 3, "probes": 3, "probe_paths": 3, "heap": 4, "syscalls": 2}
    rows = {view: aggregate_rows(per_view[view], ranks, widths[view]) for view in widths}
    keys = [k for key in rows["hot"] for k in key]
    keys += [k for key in rows["probe_paths"] for k in key[1]]
    names.learn(keys)
    return Snapshot(outdir, now_ns, processes, ranks, rows, names, notes)


# ---- --clean --------------------------------------------------------------------------------

def clean_stale(uid: int) -> list[str]:
    """Removes uid's files in D whose process is gone; the paths removed."""
    if not os.path.lexists(private_dir_path(uid)):
        return []
    dir_fd = open_private_dir(uid)
    removed = []
    try:
        for entry, process, _kind in list_entries(dir_fd):
            if process_start_time(process.pid) == process.start_time:
                continue
            try:
                os.unlink(entry, dir_fd=dir_fd)
            except FileNotFoundError:
                continue        # its process removed it meanwhile
            removed.append(f"{private_dir_path(uid)}/{entry}")
    finally:
        os.close(dir_fd)
    return removed


# ---- the views (text and the Textual UI) ----------------------------------------------------

VIEWS = ("hot", "mpi", "probes", "heap", "syscalls", "ranks")
VIEW_TITLES = {"hot": "hot paths", "mpi": "MPI (comm x op)", "probes": "probes",
               "heap": "heap", "syscalls": "system calls", "ranks": "ranks"}


def _at(stat: dict[str, Any], fmt: Callable[[float], str], key: str) -> str:
    return f"{fmt(stat[key])} (r{stat[key + '_rank']})"


def _spread(stat: dict[str, Any], fmt: Callable[[float], str]) -> list[str]:
    return [_at(stat, fmt, "min"), fmt(stat["mean"]), _at(stat, fmt, "max")]


def _path(frames: list[dict[str, Any]]) -> str:
    """`solve [axpy] <- main`: innermost first, inlined functions in brackets."""
    return " <- ".join(f["name"] + (f" [{' > '.join(f['inlined'])}]" if f["inlined"] else "")
                       for f in frames)


def view_rows(doc: dict[str, Any], view: str) -> tuple[list[str], list[list[str]], str]:
    """One view of a snapshot's JSON document: headers, rows (text cells), alignment."""
    from pathscope.units import format_bytes, format_time

    def count(v: float) -> str:
        return f"{v:.0f}" if float(v).is_integer() else f"{v:.1f}"

    spread = ["min (rank)", "mean", "max (rank)"]
    if view == "hot":
        return (["time", *spread, "off-cpu", "samples", "path (innermost first)", "where"],
                [[format_time(r["sample_ns"]["sum"]), *_spread(r["sample_ns"], format_time),
                  format_time(r["offcpu_ns"]["sum"]), count(r["samples"]["sum"]),
                  _path(r["frames"]), r["frames"][0]["where"] if r["frames"] else ""]
                 for r in doc["hot"]], "rrrrrrll")
    if view == "mpi":
        return (["comm", "op", "calls", "time", *spread, "bytes"],
                [[r["comm"], r["op"], count(r["calls"]["sum"]), format_time(r["ns"]["sum"]),
                  *_spread(r["ns"], format_time), format_bytes(r["bytes"]["sum"])]
                 for r in doc["mpi"]], "llrrrrrr")
    if view == "probes":
        return (["name", "state", "calls", "incl", "excl", *spread],
                [[r["name"], r["state"], count(r["calls"]["sum"]),
                  format_time(r["incl_ns"]["sum"]), format_time(r["excl_ns"]["sum"]),
                  *_spread(r["incl_ns"], format_time)] for r in doc["probes"]], "llrrrrrr")
    if view == "heap":
        heap = doc["heap"] or {}
        fmts = {"live": format_bytes, "peak": format_bytes, "allocs": count, "frees": count}
        return (["", "sum", *spread],
                [[k, fmts[k](v["sum"]), *_spread(v, fmts[k])] for k, v in heap.items()],
                "lrrrr")
    if view == "syscalls":
        return (["name", "calls", "time", *spread],
                [[r["name"], count(r["calls"]["sum"]), format_time(r["ns"]["sum"]),
                  *_spread(r["ns"], format_time)] for r in doc["syscalls"]], "lrrrrr")
    return (["rank", "pid", "host", "state", "publishes", "elapsed", "threads", "publisher cpu"],
            [[str(p["rank"]), str(p["pid"]), p["host"], p["stale"] or p["state"],
              str(p["publishes"]), format_time(p["elapsed_ns"]), str(len(p["threads"])),
              format_time(p["publisher_cpu_total_ns"])] for p in doc["processes"]],
            "rrllrrrr")


def render_text(doc: dict[str, Any]) -> str:
    from pathscope.report.layout import table

    out = [f"pathscope top: job {doc['outdir']}, {len(doc['ranks'])} rank(s) aggregated, "
           f"{len(doc['processes'])} process(es)"]
    for view in VIEWS:
        headers, rows, align = view_rows(doc, view)
        out.append("")
        out.append(f"{VIEW_TITLES[view]}:")
        out.append(table(headers, rows, align) if rows else "  (none)")
    out.extend(f"note: {n}" for n in doc["notes"])
    return "\n".join(out) + "\n"
