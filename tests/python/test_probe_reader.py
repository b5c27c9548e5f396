"""Format 2.6 (issue 13): probed functions read from the rank files (`probes`, `probe`,
`probe-refused`, `pnode`), merged across ranks whose probe ids and module ids differ, their
metrics in the exports, the `probes` and `probe-refusals` tables and the report's section;
malformed probe lines make the rank unreadable.

The profile is written by hand: two ranks, one thread each, metrics `cpu` (times in ms):

    main (call site app.c:10) > gather (call sites gather.c:41 and :42) > [wait_one]
    main (call site app.c:12) > [fact]            outermost calls
    main:12 > fact (call site fact.c:5) > [fact]  nested calls (recursion)

                     rank 0: calls incl excl cpu      rank 1: calls incl excl cpu
    wait_one @41             10    200  200   5               10    220  220   6
    wait_one @42             10     10   10   1               10     11   11   2
    fact (outer)              3     30   12  29                3     40   16  39
    fact (nested)             6     18   18  17                6     24   24  23

wait_one at 0x401400 (48 bytes), fact at 0x401600 (64 bytes): probes 1 and 2 on rank 0,
2 and 1 on rank 1, which also lists its modules in another order and has a third probe
(`idle`, removed, never called).  So wait_one: 40 calls, 441 ms; the call site at line 41
takes 420 ms, 20 times the 21 ms of line 42.  fact: 18 calls of which 6 outermost, 70 ms
inclusive (the nested 42 ms are inside it), 70 ms exclusive (28 + 42), 68 ms CPU.
"""
import io
import json

import pytest

from pathscope.calltree import build_tree
from pathscope.cli import main
from pathscope.export import export_call_paths
from pathscope.export.tables import build_table
from pathscope.frames import ProfileFrames
from pathscope.metrics import COLUMNS
from pathscope.reader import load_profile
from pathscope.report import render
from pathscope.sources.probe import PROBE_REFUSALS_COLUMNS, PROBES_COLUMNS
from pathscope.symbolize import resolve_symbols
from pathscope.sources.probe import probed_functions
from pathscope.symbols import Frame, frame_of
from pathscope_samples import HYBRID, rank_rows, read_rows, with_run, write_profile, write_rows

RUN = "0123456789abcdef0123456789abcdef"
MS = 1_000_000
APP, LIBC = "/opt/app/bin/app", "/lib/x86_64-linux-gnu/libc.so.6"
SYMBOLS = ("pathscope-symbols\t2.0\n"
           f"module\t0\t{APP}\tab12\tok\nmodule\t1\t{LIBC}\t-\tok\n"
           "frame\t0\t0x401010\tcall\t0\tmain\t/src/app.c\t10\n"
           "frame\t0\t0x401018\tcall\t0\tmain\t/src/app.c\t12\n"
           "frame\t0\t0x401520\tcall\t0\tgather\t/src/gather.c\t41\n"
           "frame\t0\t0x401530\tcall\t0\tgather\t/src/gather.c\t42\n"
           "frame\t0\t0x401620\tcall\t0\tfact\t/src/fact.c\t5\nend\n")
# per rank: (calls, incl, excl, cpu) in ms of wait_one @41, @42, fact outer, fact nested
VALUES = {0: [(10, 200, 200, 5), (10, 10, 10, 1), (3, 30, 12, 29), (6, 18, 18, 17)],
          1: [(10, 220, 220, 6), (10, 11, 11, 2), (3, 40, 16, 39), (6, 24, 24, 23)]}
# per rank: lost exits, untimed calls, exception exits, open calls of the same four nodes
PROBLEMS = {0: [(0, 0, 0, 0)] * 4,
            1: [(0, 0, 1, 0), (0, 2, 0, 0), (1, 0, 0, 0), (0, 0, 0, 0)]}
REFUSED_HELPER = ("helper", "{app}", "0x401800", "too-short",
                  "'helper' in app: 4 bytes, the jump needs 5")


def rank_file(rank, version="2.6"):
    app, libc = (0, 1) if rank == 0 else (1, 0)         # rank 1 numbers its modules otherwise
    wait_id, fact_id = (1, 2) if rank == 0 else (2, 1)
    modules = sorted([("module", app, APP, "ab12"), ("module", libc, LIBC, "-")],
                     key=lambda m: m[1])
    # added, removed, refused, traps, windows, longest window, scans, passed through, lost
    counters = ((2, 0, 1, 3, 2, 1_200_000, 0, 5, 0) if rank == 0 else
                (3, 1, 2, 1, 3, 2_500_000, 1, 0, 1))
    probes = [("probes", "cpu", "procmem", "on", *counters, "-"),
              ("probe", wait_id, app, "0x401400", 48, "active", 1000, "-", "wait_one",
               "wait_one", "/src/gather.c", 30),
              ("probe", fact_id, app, "0x401600", 64, "active", 1000, "-", "/^fact$/", "fact",
               "/src/fact.c", 3),
              ("probe-refused",) + tuple(f.format(app=app) for f in REFUSED_HELPER)]
    if rank == 1:
        probes += [("probe", 3, app, "0x401700", 16, "removed", 5000, 90000, "idle", "idle",
                    "-", 0),
                   ("probe-refused", "libfoo.so:bar", "-", "-", "not-mapped",
                    "libfoo.so is not loaded")]

    def node(index, parent, kind, address, visits=0, sample_ms=0):
        module = app if kind == "call" else "-"
        return ("node", 0, index, "-" if parent is None else parent, kind, module, address,
                visits, sample_ms * MS, 0, 0, 0, 0, 0, 0)

    calls = [v[0] for v in VALUES[rank]]
    nodes = [node(0, None, "root", "-"), node(1, 0, "call", "0x401010"),
             node(2, 1, "call", "0x401520"), node(3, 2, "probe", wait_id, calls[0]),
             node(4, 1, "call", "0x401530"), node(5, 4, "probe", wait_id, calls[1]),
             node(6, 0, "call", "0x401018"), node(7, 6, "probe", fact_id, calls[2]),
             node(8, 6, "call", "0x401620"), node(9, 8, "probe", fact_id, calls[3]),
             node(10, 0, "not_unwound", "-", sample_ms=1000)]
    pnodes = [("pnode", 0, node_id, incl * MS, excl * MS, cpu * MS, "-", "-", "-", "-",
               *PROBLEMS[rank][i])
              for i, (node_id, (_, incl, excl, cpu)) in enumerate(zip((3, 5, 7, 9),
                                                                       VALUES[rank]))]
    thread = ("thread", 0, 4100 + rank, 1000 * MS, 0, 0, 0, 0, len(nodes), "-", "-", 0,
              900 * MS)
    extra = [("sampler", "posix-cpu-timer", 100, "cpu"), *modules, *probes, thread, *nodes,
             *pnodes]
    rows = rank_rows(rank, 2, "complete", f"node{rank}", 1000 * MS, 0,
                     comms=[("W", 2, 0, rank, "-", "-", 0, "0-1", "-", 0, 0, 0, 0)],
                     extra=extra, program="app")
    return with_run(rows, RUN, version)


def write_run(directory):
    d = write_profile(directory, None, {0: rank_file(0), 1: rank_file(1)})
    (d / "symbols.tsv").write_text(SYMBOLS)
    return d


@pytest.fixture
def run_dir(tmp_path):
    return write_run(tmp_path / "prof")


def folded(profile, metric):
    out = io.StringIO()
    export_call_paths(profile, "folded", out, resolve_symbols(profile), metric)
    return out.getvalue()


def section(text, heading):
    return (heading + text.split(f"\n\n{heading}")[1].split("\n\n")[0]).splitlines()


def probe_leaves(tree):
    return {(n.frame.name, tuple(f.address for f in n.path()[:-1])): n
            for n in tree.root.walk() if n.frame.kind == "probe"}


# ---- reader -------------------------------------------------------------------------------

def test_lines_read(run_dir):
    p = load_profile(run_dir)
    assert p.incomplete_ranks == [] and p.meta["format_version"] == "2.6"
    summary = p.callpaths[1].probes
    assert (summary.metrics, summary.writer, summary.exit_timing, summary.added,
            summary.removed, summary.refused, summary.traps, summary.windows,
            summary.longest_window_ns, summary.scans_repeated, summary.passed_through,
            summary.exits_lost, summary.hardware_counters) == (
        "cpu", "procmem", "on", 3, 1, 2, 1, 3, 2_500_000, 1, 0, 1, "")
    idle = summary.probes[3]
    assert (idle.name, idle.module, idle.build_id, idle.address, idle.size, idle.state,
            idle.added_ns, idle.removed_ns, idle.file, idle.line) == (
        "idle", APP, "ab12", 0x401700, 16, "removed", 5000, 90000, "", 0)
    refusal = summary.refusals[1]
    assert (refusal.spec, refusal.module_id, refusal.module, refusal.address, refusal.reason,
            refusal.text) == ("libfoo.so:bar", None, "", None, "not-mapped",
                              "libfoo.so is not loaded")
    stats = p.callpaths[1].threads[0].nodes[5].probe
    assert (stats.incl_ns, stats.excl_ns, stats.cpu_ns, stats.rusage, stats.untimed_calls) == (
        11 * MS, 11 * MS, 2 * MS, None, 2)


def test_probe_nodes_are_renamed_to_their_function(run_dir):
    """Rank 1's probe ids and module ids differ from rank 0's: its nodes carry the function's
    module, address and name, so both ranks' frames are equal."""
    p = load_profile(run_dir)
    frames = {frame_of(p.callpaths[r].threads[0].nodes[3], p.callpaths[r].modules)
              for r in (0, 1)}
    assert frames == {Frame("probe", APP, "ab12", 0x401400, "wait_one")}


def test_merged_values_of_two_ranks(run_dir):
    tree = build_tree(load_profile(run_dir))
    leaves = probe_leaves(tree)
    assert sorted(leaves) == [("fact", (0x401018,)), ("fact", (0x401018, 0x401620)),
                              ("wait_one", (0x401010, 0x401520)),
                              ("wait_one", (0x401010, 0x401530))]
    columns = [COLUMNS[m] for m in ("probe_calls", "probe_time", "probe_self_time",
                                    "probe_cpu_time", "probe_lost_exits",
                                    "probe_untimed_calls", "probe_exception_exits")]
    by_rank = {key: {r: [v[c] for c in columns] for r, v in n.by_rank.items()}
               for key, n in leaves.items()}
    assert by_rank[("wait_one", (0x401010, 0x401520))] == {
        0: [10, 200 * MS, 200 * MS, 5 * MS, 0, 0, 0], 1: [10, 220 * MS, 220 * MS, 6 * MS, 0, 0, 1]}
    assert by_rank[("fact", (0x401018,))] == {
        0: [3, 30 * MS, 12 * MS, 29 * MS, 0, 0, 0], 1: [3, 40 * MS, 16 * MS, 39 * MS, 1, 0, 0]}
    # a probe node feeds only the probe metrics (its calls are not MPI visits)
    node = leaves[("wait_one", (0x401010, 0x401530))]
    assert node.total(COLUMNS["visits"]) == 0 and node.total(COLUMNS["probe_calls"]) == 20


def test_recursion_totals_count_outermost_calls(run_dir):
    p = load_profile(run_dir)
    functions = {f.info.name: f for f in probed_functions(p, build_tree(p))}
    fact = functions["fact"]
    assert [(p.node.total(COLUMNS["probe_calls"]), p.nested) for p in fact.paths] == [
        (6, False), (12, True)]
    incl, excl, cpu = (COLUMNS[m] for m in ("probe_time", "probe_self_time", "probe_cpu_time"))
    assert (fact.total(incl, True), fact.total(excl), fact.total(cpu, True)) == (
        70 * MS, 70 * MS, 68 * MS)
    frames = ProfileFrames(p)
    fact = {f.info.name: f for f in probed_functions(p, frames.tree)}["fact"]
    (stats,) = frames.group_stats("probe_time", [
        [frames.node_id(path.node) for path in fact.outermost()]]).itertuples()
    assert (stats.min, stats.min_rank, stats.max, stats.max_rank) == (30 * MS, 0, 40 * MS, 1)
    assert (functions["idle"].ranks, functions["idle"].paths) == ([1], [])
    assert [p.nested for p in functions["wait_one"].paths] == [False, False]


# ---- exports ------------------------------------------------------------------------------

def test_folded_probe_metrics(run_dir):
    p = load_profile(run_dir)
    # both call sites of gather have the same names: one folded line (the tables keep them)
    assert folded(p, "probe_calls") == ("main;fact 6\nmain;fact;fact 12\n"
                                        "main;gather;wait_one 40\n")
    assert folded(p, "probe_time") == ("main;fact 70000\nmain;fact;fact 42000\n"
                                       "main;gather;wait_one 441000\n")
    assert folded(p, "probe_self_time") == ("main;fact 28000\nmain;fact;fact 42000\n"
                                            "main;gather;wait_one 441000\n")
    assert folded(p, "probe_cpu_time") == ("main;fact 68000\nmain;fact;fact 40000\n"
                                           "main;gather;wait_one 14000\n")
    # the probe metrics hold nothing else; the time metrics nothing of the probes
    assert folded(p, "time") == "[not unwound] 2000000\n"


def test_speedscope_probe_time(run_dir, capsys):
    assert main(["export", str(run_dir), "--format", "speedscope", "--metric",
                 "probe_time"]) == 0
    prof = json.loads(capsys.readouterr().out)["profiles"][0]
    assert (prof["name"], prof["unit"], prof["endValue"], prof["weights"]) == (
        "app: probe_time (all ranks, all threads)", "microseconds", 553000,
        [70000, 42000, 441000])


@pytest.mark.parametrize("metric", ["probe_calls", "probe_time", "probe_self_time",
                                    "probe_cpu_time"])
def test_older_profiles_refuse_the_probe_metrics(capsys, metric):
    assert main(["export", str(HYBRID), "--format", "folded", "--metric", metric]) == 2
    assert capsys.readouterr() == ("", f"pathscope: metric {metric} needs profile format 2.6 "
                                       f"or later: this profile (format 2.0) does not record "
                                       f"probed functions\n")


def test_probes_table(run_dir, capsys):
    assert main(["export", str(run_dir), "--table", "probes"]) == 0
    assert capsys.readouterr().out == (
        ",".join(PROBES_COLUMNS) + "\n"
        "wait_one,/opt/app/bin/app,ab12,0x401400,/src/gather.c,30,main;gather,/src/gather.c:41,"
        "0,20,0.42,0.42,0.011,0.2,0.21,0.22,0,1,2,0,0,1,0\n"
        "wait_one,/opt/app/bin/app,ab12,0x401400,/src/gather.c,30,main;gather,/src/gather.c:42,"
        "0,20,0.021,0.021,0.003,0.01,0.0105,0.011,0,1,2,0,2,0,0\n"
        "fact,/opt/app/bin/app,ab12,0x401600,/src/fact.c,3,main,/src/app.c:12,"
        "0,6,0.07,0.028,0.068,0.03,0.035,0.04,0,1,2,1,0,0,0\n"
        "fact,/opt/app/bin/app,ab12,0x401600,/src/fact.c,3,main;fact,/src/fact.c:5,"
        "1,12,0.042,0.042,0.04,0.018,0.021,0.024,0,1,2,0,0,0,0\n"
        "idle,/opt/app/bin/app,ab12,0x401700,,,,,,0,,,,,,,,,,,,,\n")
    assert PROBES_COLUMNS == [
        "probe", "module", "build_id", "address", "file", "line", "path", "call_site",
        "nested", "calls", "incl_s", "excl_s", "cpu_s", "incl_min_s", "incl_mean_s",
        "incl_max_s", "rank_min", "rank_max", "nranks", "lost_exits", "untimed_calls",
        "exception_exits", "open_calls"]


def test_probe_refusals_table(run_dir, capsys):
    assert main(["export", str(run_dir), "--table", "probe-refusals", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"spec": "helper", "module": APP, "address": "0x401800", "reason": "too-short",
         "text": "'helper' in app: 4 bytes, the jump needs 5", "ranks": "0-1"},
        {"spec": "libfoo.so:bar", "module": None, "address": None, "reason": "not-mapped",
         "text": "libfoo.so is not loaded", "ranks": "1"}]
    assert PROBE_REFUSALS_COLUMNS == ["spec", "module", "address", "reason", "text", "ranks"]


def test_a_profile_without_probes_has_empty_tables():
    p = load_profile(HYBRID)
    assert [build_table(p, t).rows for t in ("probes", "probe-refusals")] == [[], []]


# ---- report -------------------------------------------------------------------------------

PROBED_SECTION = [
    "Probed functions (3 functions on 2 ranks; metrics: cpu)",
    "  wait_one (app, gather.c:30): 40 calls, 441 ms inclusive, 441 ms exclusive, 14.0 ms CPU",
    "    calls  inclusive  share  exclusive      CPU   min (rank)     mean   max (rank)  path",
    "       20     420 ms  95.2%     420 ms  11.0 ms   200 ms (0)   210 ms   220 ms (1)  "
    "main > gather:41",
    "       20    21.0 ms   4.8%    21.0 ms  3.00 ms  10.0 ms (0)  10.5 ms  11.0 ms (1)  "
    "main > gather:42",
    "    2 call paths: the largest takes 20.0× the inclusive time of the smallest; all of "
    "them per rank: min 210 ms (0), mean 220 ms, max 231 ms (1)",
    "    2 untimed calls, 1 exit by an exception",
    "  fact (app, fact.c:3): 18 calls (6 outermost), 70.0 ms inclusive, 70.0 ms exclusive, "
    "68.0 ms CPU",
    "    calls  inclusive   share  exclusive      CPU   min (rank)     mean   max (rank)  path",
    "        6    70.0 ms  100.0%    28.0 ms  68.0 ms  30.0 ms (0)  35.0 ms  40.0 ms (1)  main:12",
    "       12    42.0 ms       -    42.0 ms  40.0 ms  18.0 ms (0)  21.0 ms  24.0 ms (1)  "
    "main > fact:5 (nested)",
    "    1 exit lost",
    "  idle (app; rank 1 only): removed, never called",
    "  refused 'helper' (app at 0x401800): too-short: 'helper' in app: 4 bytes, the jump "
    "needs 5 (ranks 0-1)",
    "  refused 'libfoo.so:bar': not-mapped: libfoo.so is not loaded (rank 1)",
    "  4 traps in patch windows; longest patch window 2.50 ms (rank 1); 1 exit lost; 5 calls "
    "passed through (made inside pathscope or by a thread it does not know)",
    "  hardware counters: none (no PAPI in this build)"]


def test_report_section(run_dir):
    text = render(load_profile(run_dir))
    assert section(text, "Probed functions") == PROBED_SECTION
    # after the call-path sections, before the communicators
    assert text.index("\n\nHot path") < text.index("\n\nProbed functions") < text.index(
        "\n\nCommunicators ranked")


def test_report_without_cpu_time_or_timed_exits(tmp_path):
    d = write_run(tmp_path / "prof")
    for rank in (0, 1):
        path = d / "ranks" / f"rank-{rank:06d}.tsv"
        rows = read_rows(path)
        for row in rows:
            if row[0] == "probes":
                row[1], row[3] = "time", "refused: CET shadow stack"
                row[5:13] = ["0"] * 8
            if row[0] == "pnode":
                row[5] = "-"
        write_rows(path, rows)
    p = load_profile(d)
    lines = section(render(p), "Probed functions")
    assert lines[0] == "Probed functions (3 functions on 2 ranks; metrics: time)"
    assert lines[1] == ("  wait_one (app, gather.c:30): 40 calls, 441 ms inclusive, 441 ms "
                        "exclusive")
    assert lines[3] == ("       20     420 ms  95.2%     420 ms    -   200 ms (0)   210 ms   "
                        "220 ms (1)  main > gather:41")
    assert lines[-2:] == [
        "  exits not timed on ranks 0-1 (refused: CET shadow stack): calls are counted per "
        "path, without times",
        "  hardware counters: none (no PAPI in this build)"]
    # no CPU time: absent from the exports, not zeros
    assert folded(p, "probe_cpu_time") == ""
    assert {row["cpu_s"] for row in build_table(p, "probes").rows} == {None}


def test_no_section_without_probes():
    assert "Probed functions" not in render(load_profile(HYBRID))


# ---- malformed lines: the rank is unreadable ----------------------------------------------

def _line_of(rows, kind, *head):
    return next(i for i, r in enumerate(rows) if r[0] == kind and r[1:1 + len(head)] ==
                list(head))


@pytest.mark.parametrize("kind, head, change, message", [
    ("pnode", ["0", "5"], lambda r: r.__setitem__(4, str(11 * MS + 1)),
     "'pnode' line: field 5 '11000001' (exclusive ns) is larger than inclusive ns "
     "(field 4, 11000000)"),
    ("pnode", ["0", "5"], lambda r: r.__setitem__(2, "4"),
     "'pnode' line names node 4 of thread 0, a 'call' node (expected 'probe')"),
    ("pnode", ["0", "5"], lambda r: r.__setitem__(2, "99"),
     "'pnode' line names node 99 of thread 0, which does not exist"),
    ("pnode", ["0", "5"], lambda r: r.__setitem__(2, "3"),
     "a second 'pnode' line for node 3 of thread 0"),
    ("pnode", ["0", "5"], lambda r: r.pop(),
     "'pnode' line has 12 fields after the type, expected 13"),
    ("pnode", ["0", "5"], lambda r: r.__setitem__(6, "x"),
     "'pnode' line: field 7 'x' is not an integer"),
    ("probe", ["3"], lambda r: r.__setitem__(5, "gone"),
     "'probe' line: field 6 'gone' is not a probe state (active, disabled, removed, "
     "unloaded)"),
    ("probe", ["3"], lambda r: r.__setitem__(2, "7"),
     "'probe' line names module 7, which has no 'module' line"),
    ("probe", ["3"], lambda r: r.__setitem__(1, "2"), "probe 2 listed twice"),
    ("probe", ["3"], lambda r: r.__setitem__(1, "0"),
     "'probe' line: field 2 '0' is not a probe id (1, 2, ...)"),
    ("probe", ["3"], lambda r: r.__setitem__(3, "401700"),
     "'probe' line: field 4 '401700' is not a hexadecimal address (0x...)"),
    ("probe-refused", ["libfoo.so:bar"], lambda r: r.__setitem__(4, "Not Mapped"),
     "'probe-refused' line: field 5 'Not Mapped' is not a reason key"),
    ("probes", [], lambda r: r.__setitem__(7, "-1"), "'probes' line: field 8 '-1' is negative"),
])
def test_malformed_line_makes_the_rank_unreadable(tmp_path, kind, head, change, message):
    d = write_run(tmp_path / "prof")
    path = d / "ranks" / "rank-000001.tsv"
    rows = read_rows(path)
    line = _line_of(rows, kind, *head)
    change(rows[line])
    write_rows(path, rows)
    p = load_profile(d)
    problem = f"{path}:{line + 1}: {message}"
    assert p.incomplete_ranks == [(1, "unreadable: " + problem)]
    assert sorted(p.callpaths) == [0]
    assert f"    rank 1: unreadable, left out: {problem}" in render(p).splitlines()


def test_probe_node_without_its_probe_line(tmp_path):
    d = write_run(tmp_path / "prof")
    path = d / "ranks" / "rank-000001.tsv"
    rows = read_rows(path)
    rows[_line_of(rows, "node", "0", "9")][6] = "9"
    write_rows(path, rows)
    p = load_profile(d)
    assert p.incomplete_ranks == [(1, f"unreadable: {path}: thread 0: node 9 names probe "
                                      f"'9', which has no 'probe' line")]


def test_probe_lines_without_the_probes_line(tmp_path):
    d = write_run(tmp_path / "prof")
    path = d / "ranks" / "rank-000000.tsv"
    rows = read_rows(path)
    del rows[_line_of(rows, "probes")]
    write_rows(path, rows)
    line = _line_of(rows, "probe") + 1
    assert load_profile(d).incomplete_ranks == [
        (0, f"unreadable: {path}:{line}: 'probe' line without a 'probes' line")]


def test_a_second_probes_line(tmp_path):
    d = write_run(tmp_path / "prof")
    path = d / "ranks" / "rank-000000.tsv"
    rows = read_rows(path)
    line = _line_of(rows, "probes")
    rows.insert(line + 1, list(rows[line]))
    write_rows(path, rows)
    assert load_profile(d).incomplete_ranks == [
        (0, f"unreadable: {path}:{line + 2}: a second 'probes' line")]


def test_a_file_cut_short_keeps_its_probes(tmp_path):
    """Cut after the first two pnode lines: the nodes and pnodes before the cut are data."""
    d = write_run(tmp_path / "prof")
    path = d / "ranks" / "rank-000001.tsv"
    rows = read_rows(path)
    write_rows(path, rows[:_line_of(rows, "pnode", "0", "7")])
    p = load_profile(d)
    assert p.incomplete_ranks == [(1, "no end line")]
    nodes = p.callpaths[1].threads[0].nodes
    assert [n.probe is not None for n in nodes if n.kind == "probe"] == [True, True, False,
                                                                        False]


def test_the_user_guide_shows_this_section():
    """docs/user-guide.md's example of the section is this profile's, line for line."""
    from pathlib import Path
    guide = (Path(__file__).resolve().parents[2] / "docs" / "user-guide.md").read_text()
    block = guide.split("\nProbed functions (3 functions", 1)[1].split("\n```", 1)[0]
    assert ("Probed functions (3 functions" + block).splitlines() == PROBED_SECTION


def test_rusage_fields(tmp_path):
    d = write_run(tmp_path / "prof")
    path = d / "ranks" / "rank-000000.tsv"
    rows = read_rows(path)
    rows[_line_of(rows, "pnode", "0", "3")][6:10] = ["12", "1", "40", "3"]
    write_rows(path, rows)
    nodes = load_profile(d).callpaths[0].threads[0].nodes
    assert (nodes[3].probe.rusage, nodes[5].probe.rusage) == ((12, 1, 40, 3), None)
