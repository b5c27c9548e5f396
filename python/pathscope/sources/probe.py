"""Probed functions (PATHSCOPE_PROBE, `pathscope probe`; format 2.6): a rank's `probes` line,
its probes (`probe`), the refusals (`probe-refused`) and the per-call-path metrics of `probe`
nodes (`pnode` lines), docs/format.md "Probed functions".

    summary = profile.callpaths[0].probes          # ProbeSummary, or None without probes
    node.probe.incl_ns                             # ProbeStats of a `probe` node, or None
    functions = probed_functions(profile, tree)    # per function, its call paths merged

Rules kept here:
- Probe ids are per process, so finish() renames every `probe` node to its function: module,
  address and name (pathscope.symbols.frame_of keys the merged tree on them).  The same
  function probed on every rank is then one leaf per call path, whatever its id on each rank.
- A `pnode` line names a `probe` node once; exclusive ns <= inclusive ns; a `probe` node names
  a probe of its file; a `probe` line names a module of its file.  Anything else is a
  ProfileError naming file and line (the rank is unreadable).
- Recursion: a call of a function made inside another call of the same function (a frame of
  the function above its path, or a probe leaf of it) is *nested*: its inclusive and CPU
  time are inside the outer call's and are not added again to the function's totals; its
  calls and exclusive time are its own and are.
Nothing here prints or exits.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from pathscope.cct import CALL, CODE_KINDS, MAX_ID, PROBE, RankCallPaths, named_node
from pathscope.errors import ProfileError
from pathscope.sources.base import CALL_PATHS, Metric, Section, Source, Table, TableSpec
from pathscope.tsv import Record
from pathscope.units import seconds

if TYPE_CHECKING:
    from pathscope.calltree import CallTree, MergedNode
    from pathscope.frames import ProfileFrames
    from pathscope.reader import Profile
    from pathscope.symbols import Frame, SymbolTable

PROBE_FORMAT = (2, 6)
STATES = ("active", "disabled", "removed", "unloaded")
_KEY = re.compile(r"^[a-z0-9-]{1,64}$")
_PROBE_ID = re.compile(r"^[0-9]{1,10}$")     # a `probe` node's address field, ASCII only
_STATE = re.compile(r"^(" + "|".join(STATES) + r")$")

FunctionKey = tuple[str, str, int]      # module path, build id, ELF virtual address


@dataclass
class ProbeStats:
    """The metrics of one `probe` node (a `pnode` line): its calls' times and what went
    wrong with them; visits (the calls) stay on the node."""
    incl_ns: int
    excl_ns: int                  # minus probed callees' inclusive time and MPI time below
    cpu_ns: Optional[int]         # thread CPU time; None with metrics `time`
    rusage: Optional[tuple[int, int, int, int]]  # minor, major faults, voluntary, involuntary
                                  # switches; None unless metrics `rusage`
    lost_exits: int               # the frame vanished (longjmp, a stack switch): untimed
    untimed_calls: int            # exit timing off, or the thunk stack full
    exception_exits: int          # left by an exception (timed up to the catch)
    open_calls: int               # still running when the file was written (timed up to then)


@dataclass
class ProbeInfo:
    """A `probe` line: one probed function of the process."""
    id: int
    module_id: int
    address: int                  # ELF virtual address in the module
    size: int
    state: str                    # STATES
    added_ns: int                 # since recording started
    removed_ns: Optional[int]
    spec: str                     # the SPEC it came from
    name: str                     # demangled, as the resolver gave it
    file: str                     # "" if unknown
    line: int                     # 0 if unknown
    module: str = ""              # the module's path and build id (set by finish())
    build_id: str = ""

    @property
    def key(self) -> FunctionKey:
        return (self.module, self.build_id, self.address)


@dataclass
class ProbeRefusal:
    """A `probe-refused` line: a function a SPEC matched that was not probed."""
    spec: str
    module_id: Optional[int]
    address: Optional[int]
    reason: str                   # a key: too-short, jump-into-patch, ...
    text: str                     # the reason for a person
    module: str = ""              # the module's path (set by finish()), "" if none


@dataclass
class ProbeSummary:
    """A rank's probes: the `probes` line, its `probe` and `probe-refused` lines."""
    metrics: str                  # time | cpu | rusage
    writer: str                   # procmem | mprotect | "" (nothing patched)
    exit_timing: str              # "on", or why exits are not timed (calls per path only)
    added: int
    removed: int
    refused: int
    traps: int                    # threads that met an int3 in a patch window
    windows: int
    longest_window_ns: int
    scans_repeated: int
    passed_through: int           # calls from inside pathscope or unknown threads: not counted
    exits_lost: int
    hardware_counters: str        # "" : none (this runtime does not link PAPI)
    fast_entries: Optional[int] = None  # calls the entry's fast path recorded (format 2.7)
    probes: dict[int, ProbeInfo] = field(default_factory=dict)     # by id
    refusals: list[ProbeRefusal] = field(default_factory=list)

    @property
    def timed(self) -> bool:
        return self.exit_timing == "on"

    @property
    def measures_cpu(self) -> bool:
        return self.metrics != "time"


def _optional_text(r: Record, i: int) -> str:
    text = r.text(i)
    return "" if text == "-" else text


class ProbeParser:
    """The probe lines of one rank file; finish() checks them against the modules and the
    trees, puts each `pnode` on its node and renames the `probe` nodes."""

    def __init__(self, name: str, world: int):
        self.name = name
        self.summary: Optional[ProbeSummary] = None
        self.lines: list[Record] = []             # probe, probe-refused: need the summary
        self.pnodes: list[tuple[int, int, ProbeStats, str]] = []

    def handlers(self) -> dict[str, Callable[[Record], None]]:
        return {"probes": self._probes, "probe": self.lines.append,
                "probe-refused": self.lines.append, "pnode": self._pnode}

    def _probes(self, r: Record) -> None:
        r.need(13)
        if self.summary is not None:
            raise ProfileError(f"{r.where}: a second 'probes' line")
        n = r.number
        self.summary = ProbeSummary(
            r.word(0, _KEY, "a metrics choice"), _optional_text(r, 1), r.text(2),
            *(n(i) for i in range(3, 12)), _optional_text(r, 12),
            n(13) if len(r.fields) > 13 else None)

    def _pnode(self, r: Record) -> None:
        r.need(13)
        n = r.number
        incl, excl = n(2), n(3)
        if excl > incl:
            raise ProfileError(f"{r.where}: 'pnode' line: field 5 '{excl}' (exclusive ns) is "
                               f"larger than inclusive ns (field 4, {incl})")
        rusage: Optional[tuple[int, int, int, int]] = None     # `-`: metrics not `rusage`
        if r.fields[5] != "-":
            rusage = (n(5), n(6), n(7), n(8))
        for i in range(6, 9):
            r.optional_number(i)
        stats = ProbeStats(incl, excl, r.optional_number(4), rusage, n(9), n(10), n(11), n(12))
        self.pnodes.append((n(0, MAX_ID), n(1, MAX_ID), stats, r.where))

    def finish(self, rank_paths: RankCallPaths, complete: bool) -> Optional[ProbeSummary]:
        for r in self.lines:
            if self.summary is None:
                raise ProfileError(f"{r.where}: '{r.kind}' line without a 'probes' line")
            if r.kind == "probe":
                self._probe(r, rank_paths)
            else:
                self._refusal(r, rank_paths)
        self._put_pnodes(rank_paths, complete)
        self._rename_nodes(rank_paths)
        return self.summary

    def _module(self, r: Record, i: int, rank_paths: RankCallPaths) -> tuple[str, str]:
        module_id = r.number(i, MAX_ID)
        module = rank_paths.modules.get(module_id)
        if module is None:
            raise ProfileError(f"{r.where}: '{r.kind}' line names module {module_id}, which "
                               f"has no 'module' line")
        return module.path, module.build_id

    def _probe(self, r: Record, rank_paths: RankCallPaths) -> None:
        r.need(11)
        assert self.summary is not None
        probe_id = r.number(0, MAX_ID)
        if probe_id == 0:
            raise ProfileError(f"{r.where}: 'probe' line: field 2 '0' is not a probe id "
                               f"(1, 2, ...)")
        if probe_id in self.summary.probes:
            raise ProfileError(f"{r.where}: probe {probe_id} listed twice")
        path, build_id = self._module(r, 1, rank_paths)
        state = r.word(4, _STATE, f"a probe state ({', '.join(STATES)})")
        self.summary.probes[probe_id] = ProbeInfo(
            probe_id, r.number(1), r.hex_number(2), r.number(3), state, r.number(5),
            r.optional_number(6), r.text(7), r.text(8), _optional_text(r, 9),
            r.number(10, MAX_ID), path, build_id)

    def _refusal(self, r: Record, rank_paths: RankCallPaths) -> None:
        r.need(5)
        assert self.summary is not None
        module_id = r.optional_number(1, MAX_ID)
        path = self._module(r, 1, rank_paths)[0] if module_id is not None else ""
        address = None if r.fields[2] == "-" else r.hex_number(2)
        self.summary.refusals.append(ProbeRefusal(
            r.text(0), module_id, address, r.word(3, _KEY, "a reason key"), r.text(4), path))

    def _put_pnodes(self, rank_paths: RankCallPaths, complete: bool) -> None:
        for thread_index, node_id, stats, where in self.pnodes:
            if self.summary is None:
                raise ProfileError(f"{where}: 'pnode' line without a 'probes' line")
            node = named_node(rank_paths, "pnode", thread_index, node_id, where, complete)
            if node is None:
                continue
            if node.kind != PROBE:
                raise ProfileError(f"{where}: 'pnode' line names node {node_id} of thread "
                                   f"{thread_index}, a '{node.kind}' node (expected 'probe')")
            if node.probe is not None:
                raise ProfileError(f"{where}: a second 'pnode' line for node {node_id} of "
                                   f"thread {thread_index}")
            node.probe = stats

    def _rename_nodes(self, rank_paths: RankCallPaths) -> None:
        """Each `probe` node keyed by its function rather than by the per-process id."""
        probes = self.summary.probes if self.summary is not None else {}
        for thread in rank_paths.threads.values():
            for node in thread.nodes:
                if node.kind != PROBE:
                    continue
                info = probes.get(int(node.op)) if _PROBE_ID.match(node.op) else None
                if info is None:
                    raise ProfileError(f"{self.name}: thread {thread.index}: node {node.id} "
                                       f"names probe '{node.op[:40]}', which has no 'probe' "
                                       f"line")
                node.module, node.address, node.op = info.module_id, info.address, info.name


# ---- probed functions over a merged tree ------------------------------------------------------

@dataclass
class ProbePath:
    """One call path of a probed function in a merged tree (its probe leaf)."""
    node: MergedNode
    nested: bool                  # inside another call of the same function


@dataclass
class ProbedFunction:
    info: ProbeInfo               # as the lowest rank that probed it describes it
    ranks: list[int]              # the ranks that probed it
    paths: list[ProbePath] = field(default_factory=list)

    def outermost(self) -> list[ProbePath]:
        return [p for p in self.paths if not p.nested]

    def total(self, column: int, outermost_only: bool = False) -> int:
        chosen = self.outermost() if outermost_only else self.paths
        return sum(p.node.total(column) for p in chosen)


def _function_key(frame: Frame) -> FunctionKey:
    return (frame.module, frame.build_id, frame.address)


def _inside(frame: Frame, info: ProbeInfo) -> bool:
    """True when frame is the function of info: a frame of its code, or a probe leaf of it."""
    if frame.kind == PROBE:
        return _function_key(frame) == info.key
    if frame.kind not in CODE_KINDS or (frame.module, frame.build_id) != info.key[:2]:
        return False
    pc = frame.address - 1 if frame.kind == CALL else frame.address   # a return address
    return info.address <= pc < info.address + max(info.size, 1)


def probed_functions(profile: Profile, tree: Optional[CallTree]) -> list[ProbedFunction]:
    """Every function probed on a rank of the tree (every rank with probes when tree is None),
    with its call paths in the tree (none for a function never called).  A tree merged in
    the job names its functions in tree.tsv's `probe` lines, without their sizes: a nested
    call is told apart only when an outer frame is the function's entry itself."""
    functions: dict[FunctionKey, ProbedFunction] = {}
    reduced = tree.reduced if tree is not None else None
    for probe in reduced.probes.values() if reduced is not None else ():
        module = reduced.modules[probe.module]
        info = ProbeInfo(probe.id, probe.module, probe.address, 0, "active", 0, None, "",
                         probe.name, probe.file, probe.line, module.path, module.build_id)
        functions.setdefault(info.key, ProbedFunction(info, list(tree.ranks)))
    chosen = [] if reduced is not None else tree.ranks if tree is not None else sorted(
        profile.callpaths)
    for rank in chosen:
        summary = profile.callpaths[rank].probes
        for info in summary.probes.values() if summary is not None else ():
            function = functions.setdefault(info.key, ProbedFunction(info, []))
            if rank not in function.ranks:
                function.ranks.append(rank)
    if tree is None:
        return list(functions.values())
    for node in tree.root.walk():
        if node.frame.kind != PROBE:
            continue
        function = functions[_function_key(node.frame)]    # renamed from a probe line
        nested = any(_inside(frame, function.info) for frame in node.path()[:-1])
        function.paths.append(ProbePath(node, nested))
    return list(functions.values())


def call_site(node: MergedNode, symbols: SymbolTable) -> Optional[tuple[str, int]]:
    """The file and line of the call that made a probe leaf's calls (its parent frame), if
    known."""
    parent = node.parent
    lines = symbols.lines(parent.frame) if parent is not None else []
    if lines and lines[-1].file and lines[-1].line:
        return lines[-1].file, lines[-1].line
    return None


# ---- export tables ----------------------------------------------------------------------------

PROBES_COLUMNS = ["probe", "module", "build_id", "address", "file", "line", "path", "call_site",
                  "nested", "calls", "incl_s", "excl_s", "cpu_s", "incl_min_s", "incl_mean_s",
                  "incl_max_s", "rank_min", "rank_max", "nranks", "lost_exits",
                  "untimed_calls", "exception_exits", "open_calls"]
PROBE_REFUSALS_COLUMNS = ["spec", "module", "address", "reason", "text", "ranks"]


def _columns() -> dict[str, int]:
    from pathscope.metrics import COLUMNS   # the analysis imports the sources
    return COLUMNS


def _missing(value: Any) -> bool:
    import pandas as pd   # (the analysis side only: `pathscope run` imports the sources too)
    return bool(pd.isna(value))


def _seconds_or_none(value: Any) -> Optional[float]:
    return None if _missing(value) else seconds(value)


def _int_or_none(value: Any) -> Optional[int]:
    return None if _missing(value) else int(value)


def probes_table(profile: Profile) -> Table:
    """Probed functions: one row per function and call path (a function never called: one
    row without a path), summed over ranks and threads; nested = 1 for calls made inside a
    call of the same function (recursion: their inclusive time is inside the outer call's).
    incl_min_s ... nranks: the path's inclusive time per rank (a rank without it: 0)."""
    from pathscope.calltree import build_tree
    from pathscope.frames import ProfileFrames
    from pathscope.symbolize import resolve_symbols
    tree = build_tree(profile) if profile.has_call_paths() else None
    symbols = resolve_symbols(profile) if tree is not None else None
    cpu_known = any(p.probes.measures_cpu for p in profile.callpaths.values() if p.probes)
    c = _columns()
    functions = [(f, sorted(f.paths, key=lambda p: (p.nested, -p.node.total(c["probe_time"]))))
                 for f in probed_functions(profile, tree)]
    # the inclusive time's statistics over the ranks, a groupby of the tables (one group per
    # path: its node)
    stats = None
    if tree is not None:
        tables = ProfileFrames(profile, symbols, tree=tree)
        stats = tables.group_stats("probe_time", [[tables.node_id(path.node)]
                                                  for _, paths in functions for path in paths])
    rows = []
    k = 0
    for function, paths in functions:
        info = function.info
        base = {"probe": info.name, "module": info.module, "build_id": info.build_id or None,
                "address": f"0x{info.address:x}", "file": info.file or None,
                "line": info.line or None}
        if not paths:
            rows.append({**base, **{k: None for k in PROBES_COLUMNS if k not in base},
                         "calls": 0})
        for path in paths:
            node = path.node
            assert tree is not None and symbols is not None and stats is not None
            st = stats.iloc[k]
            k += 1
            site = call_site(node, symbols)
            names = [name for frame in node.path()[:-1] for name in symbols.names(frame)]
            rows.append({
                **base, "path": ";".join(names), "call_site": f"{site[0]}:{site[1]}"
                if site else None, "nested": int(path.nested),
                "calls": node.total(c["probe_calls"]),
                "incl_s": seconds(node.total(c["probe_time"])),
                "excl_s": seconds(node.total(c["probe_self_time"])),
                "cpu_s": seconds(node.total(c["probe_cpu_time"])) if cpu_known else None,
                "incl_min_s": _seconds_or_none(st["min"]),
                "incl_mean_s": _seconds_or_none(st["mean"]),
                "incl_max_s": _seconds_or_none(st["max"]),
                "rank_min": _int_or_none(st["min_rank"]), "rank_max": _int_or_none(st["max_rank"]),
                "nranks": len(tree.ranks),
                "lost_exits": node.total(c["probe_lost_exits"]),
                "untimed_calls": node.total(c["probe_untimed_calls"]),
                "exception_exits": node.total(c["probe_exception_exits"]),
                "open_calls": node.total(c["probe_open_calls"])})
    return Table(PROBES_COLUMNS, rows)


def grouped_refusals(profile: Profile) -> list[tuple[ProbeRefusal, list[int]]]:
    """The refusals of all ranks, one per distinct (SPEC, module, address, reason, text),
    with the ranks that had it, in the order first met."""
    groups: dict[tuple[Any, ...], tuple[ProbeRefusal, list[int]]] = {}
    for rank, paths in sorted(profile.callpaths.items()):
        for refusal in paths.probes.refusals if paths.probes is not None else ():
            key = (refusal.spec, refusal.module, refusal.address, refusal.reason, refusal.text)
            groups.setdefault(key, (refusal, []))[1].append(rank)
    return list(groups.values())


def probe_refusals_table(profile: Profile) -> Table:
    """Probed functions: one row per refusal (a function a SPEC matched that was not
    probed), with the ranks that refused it (`0-3,6`)."""
    from pathscope import ranges
    rows = [{"spec": r.spec, "module": r.module or None,
             "address": f"0x{r.address:x}" if r.address is not None else None,
             "reason": r.reason, "text": r.text, "ranks": ranges.compress(ranks)}
            for r, ranks in grouped_refusals(profile)]
    return Table(PROBE_REFUSALS_COLUMNS, rows)


TABLES = (
    TableSpec("probes", "probed functions per call path", PROBES_COLUMNS, probes_table, 70),
    TableSpec("probe-refusals", "", PROBE_REFUSALS_COLUMNS, probe_refusals_table, 71),
)

_PROBED = dict(needs_format=PROBE_FORMAT, needs_what="record probed functions")
METRICS = (
    # probed functions (ProbeStats): per call path of a function, its calls and their time;
    # the probe leaf is the function, below the call site that called it
    Metric("probe_calls", "probe", "count", field="visits", kind=PROBE, column=14,
           exports=(CALL_PATHS,), order=150, **_PROBED),
    Metric("probe_time", "probe", "ns", field="probe.incl_ns", kind=PROBE, column=15,
           exports=(CALL_PATHS,), order=160, **_PROBED),
    Metric("probe_self_time", "probe", "ns", field="probe.excl_ns", kind=PROBE, column=16,
           exports=(CALL_PATHS,), order=170, **_PROBED),
    # thread CPU time in the calls: 0 on paths of ranks recorded with metrics `time`
    Metric("probe_cpu_time", "probe", "ns", field="probe.cpu_ns", kind=PROBE, column=17,
           exports=(CALL_PATHS,), order=180, **_PROBED),
    Metric("probe_lost_exits", "probe", "count", field="probe.lost_exits", kind=PROBE,
           column=18),
    Metric("probe_untimed_calls", "probe", "count", field="probe.untimed_calls", kind=PROBE,
           column=19),
    Metric("probe_exception_exits", "probe", "count", field="probe.exception_exits",
           kind=PROBE, column=20),
    Metric("probe_open_calls", "probe", "count", field="probe.open_calls", kind=PROBE,
           column=21),
)


# ---- report ------------------------------------------------------------------------------------

def report_sections(frames: "ProfileFrames") -> list[str]:
    """The report's section on probed functions ([] without probes)."""
    from pathscope.report import probe as probe_report   # the analysis imports the sources
    return probe_report.sections(frames)


SOURCE = Source("probe", ProbeParser, metrics=METRICS, tables=TABLES,
                sections=(Section(46, report_sections),), node_kinds=(PROBE,))
