"""tree.tsv (format 2.9), the call trees reduced inside the job: the reader's parse and checks
(exact messages), the statistics of a hand-written file worked out by hand (the lowest rank on
ties, a rank without a node counting as 0, the sketch), the tree built from it with and
without the runtime threads, the report and exports of a profile that has tree.tsv only
(`--per-rank none`), the refusal of a view of one rank, and pathscope.reduced.differences
against the rank files of a synthetic run (bench/synth_profile.py)."""
import io
import json
import sys
from pathlib import Path

import pytest

from pathscope.calltree import (INCL_OFFCPU, INCL_TIME, KERNEL_NS, MPI_NS, SAMPLE_NS,
                                SYSCALLS, VISITS, build_tree, reduced_time_split)
from pathscope.cli import main
from pathscope.errors import FormatVersionError
from pathscope.export import export_call_paths
from pathscope.reader import load_profile
from pathscope.reduced import differences
from pathscope.report import render
from pathscope.stats import Stats
from pathscope.treefile import parse_stats
from pathscope.tsv import Record
from pathscope.symbols import Frame, SymbolTable
from pathscope_samples import tsv_text

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import synth_profile  # noqa: E402

RUN = "0123456789abcdef0123456789abcdef"
SOLVER = "/opt/solver/bin/solver"
LIBMPI = "/usr/lib/libmpi.so.40"
# Four ranks.  Per rank (0, 1, 2, 3):
#   fn 0x401100 under main: sample_ns 300 100 300 0, samples 3 1 3 0, offcpu_ns 0 50 0 0
#   MPI_Allreduce under main: visits 10 each, mpi_ns 500 200 200 800, bytes 80 each (all on W)
#   [not unwound]: sample_ns 5 each
#   incl_time of main: 800 300 500 800; of the root: 805 305 505 805
# The runtime root (a progress thread of libmpi) has main's frame too (0x401025: both roots
# merge there with the runtime threads) and below it fn libmpi 0x2000: sample_ns 10 each, and
# the system call write: 2 calls and 200 ns each.  The ksys scalars say write had 3 calls and
# 250 ns per rank (the residue: 1 and 50 per rank, known only as sums), read 3 0 1 2 calls and
# 300 0 100 200 ns (no node: the residue is the scalar, exactly).
TREE = [
    ("pathscope-tree", "2.9"), ("run", RUN), ("ranks", 4),
    ("columns", "visits", "sample_ns", "samples", "mpi_ns", "bytes", "offcpu_ns", "syscalls",
     "kernel_ns", "incl_time", "incl_mpi", "incl_offcpu", "future_column"),
    ("module", 0, SOLVER, "a1b2"), ("module", 1, LIBMPI, "-"),
    ("string", "program", 4, "solver"), ("string", "mpi_library", 4, "Open MPI v4.1.4"),
    ("warning", "sampler-fallback", 2, 3, "thread 2 sampled with POSIX timers"),
    ("scalar", "thread.elapsed_ns", "2420,305,1,805,0,4,9:2;10:2"),
    ("scalar", "thread.count", "4,1,0,1,0,4,1:4"),
    ("scalar", "thread.nodes", "24,6,0,6,0,4,3:4"),
    ("scalar", "thread.samples_kept", "7,0,3,3,0,3,1:1;2:2"),
    ("scalar", "runtime.count", "4,1,0,1,0,4,1:4"),
    ("scalar", "runtime.elapsed_ns", "40,10,0,10,0,4,4:4"),
    ("scalar", "counter_tree_full", "3,0,0,3,2,1,2:1"),
    ("scalar", "ksys.calls.write", "12,3,0,3,0,4,2:4"),
    ("scalar", "ksys.ns.write", "1000,250,0,250,0,4,8:4"),
    ("scalar", "ksys.calls.read", "6,0,1,3,0,3,1:1;2:2"),
    ("scalar", "ksys.ns.read", "600,0,1,300,0,3,7:1;8:1;9:1"),
    ("node", 0, "-", "root", "-", "-", "app", "incl_time=2420,305,1,805,0,4,9:2;10:2",
     "incl_mpi=1700,200,1,800,3,4,8:2;9:1;10:1", "incl_offcpu=50,0,0,50,1,1,6:1"),
    ("node", 1, 0, "call", 0, "0x401025", "-", "incl_time=2400,300,1,800,0,4,9:2;10:2",
     "incl_mpi=1700,200,1,800,3,4,8:2;9:1;10:1", "incl_offcpu=50,0,0,50,1,1,6:1"),
    ("node", 2, 1, "fn", 0, "0x401100", "-", "sample_ns=700,0,3,300,0,3,7:1;9:2",
     "samples=7,0,3,3,0,3,1:1;2:2", "offcpu_ns=50,0,0,50,1,1,6:1",
     "incl_time=700,0,3,300,0,3,7:1;9:2", "incl_offcpu=50,0,0,50,1,1,6:1"),
    ("node", 3, 1, "mpi", "-", "-", "MPI_Allreduce", "visits=40,10,0,10,0,4,4:4",
     "mpi_ns=1700,200,1,800,3,4,8:2;9:1;10:1", "bytes=320,80,0,80,0,4,7:4",
     "incl_time=1700,200,1,800,3,4,8:2;9:1;10:1", "incl_mpi=1700,200,1,800,3,4,8:2;9:1;10:1"),
    ("node", 4, 3, "pcomm", "-", "-", "W", "visits=40,10,0,10,0,4,4:4",
     "mpi_ns=1700,200,1,800,3,4,8:2;9:1;10:1", "bytes=320,80,0,80,0,4,7:4"),
    ("node", 5, 0, "not_unwound", "-", "-", "-", "sample_ns=20,5,0,5,0,4,3:4",
     "incl_time=20,5,0,5,0,4,3:4"),
    ("node", 6, "-", "root", "-", "-", "runtime", "incl_time=40,10,0,10,0,4,4:4"),
    ("node", 7, 6, "call", 0, "0x401025", "-", "incl_time=40,10,0,10,0,4,4:4"),
    ("node", 8, 7, "fn", 1, "0x2000", "-", "sample_ns=40,10,0,10,0,4,4:4",
     "incl_time=40,10,0,10,0,4,4:4", "future_column=1,0,1,1,0,1,1:1"),
    ("node", 9, 7, "syscall", "-", "-", "write", "syscalls=8,2,0,2,0,4,2:4",
     "kernel_ns=800,200,0,200,0,4,8:4"),
    ("future-line", "ignored"),
    ("end",),
]
# TREE as format 2.14 writes it: `=V` where every rank has V, NONZERO left out where every
# rank has a value, only the bins below MAX's (COUNT alone for the bin after the one before, the
# first after MIN's when MIN > 0), and `@COLUMN` for an earlier column's statistics on the line.
TREE_2_14 = [
    ("pathscope-tree", "2.14"), *TREE[1:9],
    ("scalar", "thread.elapsed_ns", "2420,305,1,805,0,,2"),     # bins 9:2, 10 (MAX's): 2
    ("scalar", "thread.count", "=1"),
    ("scalar", "thread.nodes", "=6"),
    ("scalar", "thread.samples_kept", "7,0,3,3,0,3,1:1"),      # MIN 0: the first bin named
    ("scalar", "runtime.count", "=1"),
    ("scalar", "runtime.elapsed_ns", "=10"),
    ("scalar", "counter_tree_full", "3,0,0,3,2,1,"),           # one bin: MAX's
    ("scalar", "ksys.calls.write", "=3"),
    ("scalar", "ksys.ns.write", "=250"),
    ("scalar", "ksys.calls.read", "6,0,1,3,0,3,1:1"),
    ("scalar", "ksys.ns.read", "600,0,1,300,0,3,7:1;1"),      # bins 7:1, 8:1, 9: the rest
    ("node", 0, "-", "root", "-", "-", "app", "incl_time=2420,305,1,805,0,,2",
     "incl_mpi=1700,200,1,800,3,,2;1", "incl_offcpu=50,0,0,50,1,1,"),
    ("node", 1, 0, "call", 0, "0x401025", "-", "incl_time=2400,300,1,800,0,,2",
     "incl_mpi=1700,200,1,800,3,,2;1", "incl_offcpu=50,0,0,50,1,1,"),
    ("node", 2, 1, "fn", 0, "0x401100", "-", "sample_ns=700,0,3,300,0,3,7:1",
     "samples=7,0,3,3,0,3,1:1", "offcpu_ns=50,0,0,50,1,1,", "incl_time=@sample_ns",
     "incl_offcpu=@offcpu_ns"),
    ("node", 3, 1, "mpi", "-", "-", "MPI_Allreduce", "visits==10",
     "mpi_ns=1700,200,1,800,3,,2;1", "bytes==80", "incl_time=@mpi_ns", "incl_mpi=@mpi_ns"),
    ("node", 4, 3, "pcomm", "-", "-", "W", "visits==10", "mpi_ns=1700,200,1,800,3,,2;1",
     "bytes==80"),
    ("node", 5, 0, "not_unwound", "-", "-", "-", "sample_ns==5", "incl_time==5"),
    ("node", 6, "-", "root", "-", "-", "runtime", "incl_time==10"),
    ("node", 7, 6, "call", 0, "0x401025", "-", "incl_time==10"),
    ("node", 8, 7, "fn", 1, "0x2000", "-", "sample_ns==10", "incl_time==10",
     "future_column=1,0,1,1,0,1,"),
    ("node", 9, 7, "syscall", "-", "-", "write", "syscalls==2", "kernel_ns==200"),
    *TREE[-2:],
]
MAIN = Frame("call", SOLVER, "a1b2", 0x401025)
COMPUTE = Frame("fn", SOLVER, "a1b2", 0x401100)
PROGRESS = Frame("fn", LIBMPI, "", 0x2000)


def profile_rows(nranks=4, run=RUN):
    rows = [("pathscope-profile", "2.9"), ("run", run), ("tool_version", "0.9.0"),
            ("program", "solver"), ("command", "solver"), ("mpi_library", "Open MPI v4.1.4"),
            ("nranks", nranks), ("start_unix_ns", 1700000000000000000)]
    rows += [("rank", r, f"node{r}", 1000, 400) for r in range(nranks)]
    return rows + [("end",)]


def write_reduced(d: Path, tree=TREE) -> Path:
    d.mkdir()
    (d / "profile.tsv").write_text(tsv_text(profile_rows()))
    (d / "tree.tsv").write_text(tsv_text(tree))
    return d


@pytest.fixture
def reduced(tmp_path):
    return load_profile(write_reduced(tmp_path / "prof"))


def test_a_profile_with_tree_tsv_only_is_whole(reduced):
    assert reduced.problems() == [] and reduced.reduced_only() and reduced.has_call_paths()
    assert [info.status for info in reduced.ranks] == ["complete"] * 4
    assert reduced.tree.strings["program"] == [(4, "solver")]
    assert reduced.tree.warnings == [("sampler-fallback", 2, 3,
                                      "thread 2 sampled with POSIX timers")]


def test_statistics_as_written(reduced):
    tree = build_tree(reduced, runtime_threads=False)
    compute = tree.root.children[MAIN].children[COMPUTE]
    # ranks 0 and 2 both have the maximum: the lower is named; rank 3 has nothing: min 0
    assert tree.stat(compute, SAMPLE_NS) == Stats(700, 4, 0, 3, 300, 0, 3, ((7, 1), (9, 2)))
    assert tree.stat(compute, SAMPLE_NS).mean == 175.0
    allreduce = tree.root.children[MAIN].children[Frame("mpi", name="MPI_Allreduce")]
    assert tree.stat(allreduce, MPI_NS) == Stats(1700, 4, 200, 1, 800, 3, 4,
                                                 ((8, 2), (9, 1), (10, 1)))
    assert (allreduce.total(VISITS), allreduce.comms) == (40, {"W": [40, 1700, 320]})
    assert tree.stat(allreduce, VISITS).sketch == ((4, 4),)
    assert tree.stat(tree.root, INCL_OFFCPU) == Stats(50, 4, 0, 0, 50, 1, 1, ((6, 1),))
    # a column a node does not have is 0 on every rank
    assert tree.stat(compute, MPI_NS) == Stats(0, 4, 0, 0, 0, 0, 0, ())
    assert (tree.root.incl_time_ns, tree.root.incl_mpi_ns, tree.root.incl_samples) == (
        2420, 1700, 7)
    assert (tree.runtime_threads, tree.runtime_elapsed, tree.thread_count()) == (4, 40, 4)
    assert PROGRESS not in tree.root.children[MAIN].children


def test_the_runtime_root_merges_into_the_app_root(reduced):
    tree = build_tree(reduced)
    main_node = tree.root.children[MAIN]
    assert set(main_node.children) == {COMPUTE, Frame("mpi", name="MPI_Allreduce"), PROGRESS,
                                       Frame("syscall", name="write")}
    # main is on both roots' paths: its sum is exact, its per-rank extremes are not known
    assert tree.stat(main_node, INCL_TIME) == Stats(2440, 4)
    assert tree.stat(main_node.children[PROGRESS], INCL_TIME) == Stats(
        40, 4, 10, 0, 10, 0, 4, ((4, 4),))


def test_time_split_of_a_reduced_tree(reduced):
    split = reduced_time_split(build_tree(reduced, runtime_threads=False))
    assert split.time == Stats(2420, 4, 305, 1, 805, 0, 4, ((9, 2), (10, 2)))
    assert split.not_unwound == Stats(20, 4, 5, 0, 5, 0, 4, ((3, 4),))
    assert split.failed == Stats.zero(4)
    # execution = the root minus [not unwound]: per rank unknown from the two statistics
    assert split.execution == Stats(2400, 4)
    assert split.execution_mpi == Stats(1700, 4, 200, 1, 800, 3, 4, ((8, 2), (9, 1), (10, 1)))
    assert split.unaccounted == {"all ranks": (0, 24)}


def test_report_of_a_reduced_profile(reduced):
    text = render(reduced)
    assert ("  source       profile.tsv and tree.tsv (reduced inside the job at MPI_Finalize; no "
            "rank files: per-rank data not kept)") in text.splitlines()
    split = text.split("Time split")[1].split("\n\n")[0].splitlines()
    assert split[0] == " (call paths of 4 threads on 4 ranks; per rank: min, mean, max)"
    assert split[2].split() == ["Time", "2.42", "µs", "100.0%", "305", "ns", "(1)", "605",
                                "ns", "805", "ns", "(0)"]
    assert split[5].split() == ["Execution", "2.40", "µs", "99.2%", "-", "600", "ns", "-"]
    assert ("  not shown  4 threads of the MPI library's runtime (progress, PMIx, event loops; "
            "40 ns elapsed, mostly waiting): export --format folded includes them") in split
    assert ("  reduced    the call tree was merged in the job (tree.tsv): per-rank detail "
            "(sampler, unwinding modes, threads) is not kept") in split
    assert "  warning: thread 2 sampled with POSIX timers (2 ranks, 3 times)" in text
    assert "  WARNING: counter tree_full = 3 (1 rank; max 3 on rank 2)" in text


def test_the_kernel_residue_of_a_reduced_tree(reduced):
    for runtime_threads in (False, True):      # the residue counts the nodes of both roots
        tree = build_tree(reduced, runtime_threads=runtime_threads)
        residue = tree.root.children[Frame("kernel_unattributed")]
        write, read = (residue.children[Frame("syscall", name=n)] for n in ("write", "read"))
        assert (tree.stat(write, SYSCALLS), tree.stat(write, KERNEL_NS)) == (
            Stats(4, 4), Stats(200, 4))
        assert tree.stat(read, SYSCALLS) == Stats(6, 4, 0, 1, 3, 0, 3, ((1, 1), (2, 2)))
        assert tree.stat(read, KERNEL_NS) == Stats(600, 4, 0, 1, 300, 0, 3,
                                                   ((7, 1), (8, 1), (9, 1)))


@pytest.mark.parametrize("metric, lines", [
    ("mpi_time", ["solver+0x401025;MPI_Allreduce 2"]),      # 1700 ns: 2 µs
    ("time", ["solver+0x401025;MPI_Allreduce 2", "solver+0x401025;solver+0x401100 1"]),
    ("syscall_count", ["[kernel: no call path];read 6", "[kernel: no call path];write 4",
                       "solver+0x401025;write 8"]),
])
def test_folded_export_of_a_reduced_profile(reduced, metric, lines):
    out = io.StringIO()
    export_call_paths(reduced, "folded", out, SymbolTable(), metric=metric)
    assert out.getvalue().splitlines() == lines


@pytest.mark.parametrize("flags", [["--rank", "0"], ["--thread", "0"]])
def test_one_rank_or_thread_is_refused(reduced, capsys, flags):
    assert main(["export", str(reduced.path), "--format", "folded", *flags]) == 2
    assert capsys.readouterr().err == (
        f"pathscope: a view of one rank or thread needs per-rank call paths, which "
        f"{reduced.path} does not keep (tree.tsv holds the ranks merged: per-rank data not "
        f"kept); rerun with --per-rank all\n")


def replaced(kind_and_id, row, tree=TREE):
    """tree with the line that starts with kind_and_id replaced by row (its line number)."""
    rows = list(tree)
    i = next(i for i, r in enumerate(rows) if tuple(r[:len(kind_and_id)]) == kind_and_id)
    rows[i] = row
    return rows, i + 1


@pytest.mark.parametrize("where, row, message", [
    (("node", 2), ("node", 2, 1, "fn", 0, "0x401100", "-", "sample_ns=700,0,3,300,0,3"),
     "'node' line: field 8 (sample_ns): statistics '700,0,3,300,0,3' have 6 fields, "
     "expected 7 (SUM,MIN,MIN_RANK,MAX,MAX_RANK,NONZERO,SKETCH)"),
    (("node", 2), ("node", 2, 1, "fn", 0, "0x401100", "-", "sample_ns=700,0,3,900,0,3,7:1;9:2"),
     "'node' line: field 8 (sample_ns): MAX 900 is larger than SUM 700"),
    (("node", 2), ("node", 2, 1, "fn", 0, "0x401100", "-", "sample_ns=700,0,4,300,0,3,7:1;9:2"),
     "'node' line: field 8 (sample_ns): MIN_RANK 4 is not one of the 4 ranks"),
    (("node", 2), ("node", 2, 1, "fn", 0, "0x401100", "-", "sample_ns=700,0,3,300,0,3,7:1;9:1"),
     "'node' line: field 8 (sample_ns): the sketch counts 2 ranks, NONZERO is 3"),
    (("node", 2), ("node", 2, 1, "fn", 0, "0x401100", "-", "sample_ns=700,100,3,300,0,3,7:1;9:2"),
     "'node' line: field 8 (sample_ns): MIN 100 while 1 ranks have 0"),
    (("node", 2), ("node", 2, 1, "fn", 0, "0x401100", "-", "sample_ns=700,0,3,300,0,3,7:1;8:2"),
     "'node' line: field 8 (sample_ns): MAX 300 is not in the sketch's highest bin 8"),
    (("node", 2), ("node", 2, 1, "fn", 0, "0x401100", "-", "sample_ns=700,0,3,300,0,3,7:1;65:2"),
     "'node' line: field 8 (sample_ns): sketch bin 65 is not 1 to 64"),
    (("node", 2), ("node", 2, 1, "fn", 0, "0x401100", "-", "sample_ns=-7,0,3,300,0,3,-"),
     "'node' line: field 8 (sample_ns): '-7' is negative"),
    (("node", 2), ("node", 2, 1, "fn", 0, "0x401100", "-", "heat=1,1,0,1,0,4,1:4"),
     "'node' line: field 8 column 'heat' is not on the 'columns' line"),
    (("node", 2), ("node", 2, 1, "fn", 0, "0x401100", "-", "sample_ns"),
     "'node' line: field 8 'sample_ns' is not NAME=STATISTICS"),
    (("node", 2), ("node", 3, 1, "fn", 0, "0x401100", "-"),
     "'node' line: field 2 node id 3 out of order (expected 2: ids are dense from 0, in file "
     "order)"),
    (("node", 2), ("node", 2, 2, "fn", 0, "0x401100", "-"),
     "'node' line: field 3 parent 2 does not come before node 2"),
    (("node", 2), ("node", 2, 1, "fn", 9, "0x401100", "-"),
     "'node' line: field 5 names module 9, which has no 'module' line"),
    (("node", 2), ("node", 2, "-", "fn", 0, "0x401100", "-"),
     "'node' line: field 3 '-': a 'fn' node needs a parent"),
    (("node", 4), ("node", 4, 2, "pcomm", "-", "-", "W"),
     "'node' line: field 3 a 'pcomm' node's parent 2 is not an 'mpi' node"),
    (("scalar", "thread.count"), ("scalar", "thread.count", "4,1,0,1,0,5,1:4"),
     "'scalar' line: field 3 (thread.count): NONZERO 5 is more than the 4 ranks"),
    (("ranks",), ("ranks", 0), "'ranks' line: 0 ranks"),
])
def test_a_tree_tsv_that_breaks_a_rule_is_not_used(tmp_path, where, row, message):
    rows, line = replaced(where, row)
    profile = load_profile(write_reduced(tmp_path / "prof", rows))
    name = f"{tmp_path / 'prof' / 'tree.tsv'}"
    assert profile.notes == [f"tree.tsv not used: {name}:{line}: {message}"]
    assert profile.tree is None and not profile.has_call_paths()
    assert profile.problems() == ["ranks 0-3 missing (no rank file)"]


def test_the_compact_statistics_of_2_14_read_as_the_full_ones(tmp_path):
    old = load_profile(write_reduced(tmp_path / "old")).tree
    new = load_profile(write_reduced(tmp_path / "new", TREE_2_14)).tree
    assert (old.version, new.version) == ("2.9", "2.14")
    assert new.scalars == old.scalars and len(new.scalars) == 11
    assert [n.stats for n in new.nodes] == [n.stats for n in old.nodes]
    assert new.nodes[3].stats["incl_mpi"] == Stats(1700, 4, 200, 1, 800, 3, 4,
                                                   ((8, 2), (9, 1), (10, 1)))
    assert new.scalars["ksys.ns.read"] == Stats(600, 4, 0, 1, 300, 0, 3,
                                                ((7, 1), (8, 1), (9, 1)))
    assert new.scalars["thread.count"] == Stats(4, 4, 1, 0, 1, 0, 4, ((1, 4),))


def test_stats_text_is_the_2_14_form():
    """What the runtime writes for the same values (tests/unit/runtime/test_tree_merge.c)."""
    cases = [([305, 305, 805, 805], "2220,305,0,805,2,,2"),
             ([0, 1, 2, 3], "6,0,0,3,3,3,1:1"),
             ([7, 7, 7, 7], "=7"), ([0, 0, 0, 0], "=0"),
             ([0, 5, 0, 5], "10,0,0,5,1,2,"),
             ([1, 2, 200, 3000, 3000], "6203,1,0,3000,3,,1;1;8:1"),
             ([0, 1, 100, 2 ** 40], f"{2 ** 40 + 101},0,0,{2 ** 40},3,3,1:1;7:1")]
    for values, text in cases:
        assert Stats.of_vector(values).text() == text, values
        assert parse_stats(Record("scalar", [text], "here"), 0, "v", text, len(values)) == Stats.of_vector(values)


@pytest.mark.parametrize("columns, message", [
    (["sample_ns=700,0,3,300,0,3"],
     "field 8 (sample_ns): statistics '700,0,3,300,0,3' have 6 fields, expected "
     "=VALUE or 7 (SUM,MIN,MIN_RANK,MAX,MAX_RANK,NONZERO,BINS)"),
    (["sample_ns=700,0,3,300,0,,7:1"],
     "field 8 (sample_ns): NONZERO left out (every rank) with MIN 0"),
    (["sample_ns=700,0,3,300,0,3,1"],
     "field 8 (sample_ns): sketch '1' does not name its first bin (K:COUNT), as "
     "MIN 0 needs"),
    (["sample_ns=700,0,3,300,0,3,7:1;7:1"],
     "field 8 (sample_ns): sketch bin 7 is below 8"),
    (["sample_ns=700,0,3,300,0,3,9:1"],
     "field 8 (sample_ns): sketch bin 9 is not below MAX's bin 9"),
    (["sample_ns=700,0,3,300,0,3,7:3"],
     "field 8 (sample_ns): the sketch counts 3 ranks below MAX's bin, NONZERO is 3"),
    (["sample_ns=700,0,3,300,0,3,7:0"],
     "field 8 (sample_ns): sketch bin 7 counts no rank"),
    (["sample_ns=700,0,3,300,0,3,0:1"],
     "field 8 (sample_ns): sketch bin 0 is below 1"),
    (["sample_ns==x"],
     "field 8 (sample_ns): 'x' is not an integer"),
    (["incl_time=@sample_ns"],
     "field 8 (incl_time): '@sample_ns' names no column before it on the line"),
    (["sample_ns=700,0,3,300,0,3,7:1", "incl_time=@incl_time"],
     "field 9 (incl_time): '@incl_time' names no column before it on the line"),
    (["sample_ns=700,100,3,300,0,,8:1"],
     "field 8 (sample_ns): MIN 100 is not in the sketch's lowest bin 8"),
])
def test_a_2_14_statistic_that_breaks_a_rule_is_not_used(tmp_path, columns, message):
    """Node 2's columns replaced; the message after "'node' line: "."""
    rows, line = replaced(("node", 2), ("node", 2, 1, "fn", 0, "0x401100", "-", *columns),
                          TREE_2_14)
    profile = load_profile(write_reduced(tmp_path / "prof", rows))
    name = f"{tmp_path / 'prof' / 'tree.tsv'}"
    assert profile.notes == [f"tree.tsv not used: {name}:{line}: 'node' line: {message}"]
    assert profile.tree is None


def test_tree_tsv_cut_short_or_of_another_run_or_newer(tmp_path):
    d = write_reduced(tmp_path / "cut", TREE[:-1])
    assert load_profile(d).notes == [f"tree.tsv not used: {d / 'tree.tsv'} has no 'end' line "
                                     f"(cut short)"]
    rows, _ = replaced(("run",), ("run", "f" * 32))
    profile = load_profile(write_reduced(tmp_path / "other", rows))
    assert [str(s) for s in profile.stray_files] == [
        f"{tmp_path / 'other' / 'tree.tsv'} belongs to another run ({'f' * 32})"]
    rows, _ = replaced(("pathscope-tree",), ("pathscope-tree", "3.0"))
    with pytest.raises(FormatVersionError, match=r"profile format 3.0 is newer"):
        load_profile(write_reduced(tmp_path / "newer", rows))
    d = write_reduced(tmp_path / "link", TREE)
    (d / "tree.tsv").rename(d / "real.tsv")
    (d / "tree.tsv").symlink_to(d / "real.tsv")
    assert [str(s) for s in load_profile(d).stray_files] == [
        f"{d / 'tree.tsv'} is a symbolic link (not followed)"]


def test_differences_finds_none_on_an_exact_reduction_and_names_a_wrong_value(tmp_path):
    d = tmp_path / "synth"
    synth_profile.write_dir(d, ranks=5, paths=120, seed=3, rank_files=True)
    assert differences(d) == []
    rows = (d / "tree.tsv").read_text().splitlines()
    i = next(i for i, line in enumerate(rows) if line.startswith("node\t2\t"))
    fields = rows[i].split("\t")
    j = next(j for j, f in enumerate(fields) if f.startswith("incl_time="))
    stats = fields[j].split(",")
    stats[4] = str((int(stats[4]) + 1) % 5)
    fields[j] = ",".join(stats)
    rows[i] = "\t".join(fields)
    (d / "tree.tsv").write_text("\n".join(rows) + "\n")
    found = differences(d)
    assert len(found) == 1 and ": incl_time: rank files " in found[0]
    assert found[0].endswith(f"tree.tsv {fields[j][len('incl_time='):]}")


def test_the_synthetic_reduced_profile_reports_and_exports(tmp_path, capsys):
    d = tmp_path / "synth"
    synth_profile.write_dir(d, ranks=1000, paths=400, seed=5)
    profile = load_profile(d)
    assert profile.reduced_only() and profile.problems() == []
    assert main(["report", str(d)]) == 0
    out = capsys.readouterr().out
    assert "Call tree (inclusive time" in out and "Hot path" in out
    assert main(["export", str(d), "--format", "speedscope"]) == 0
    speedscope = json.loads(capsys.readouterr().out)
    tree = build_tree(profile)
    total_us = (sum(n.time_ns for n in tree.root.walk()) + 500) // 1000
    assert abs(sum(speedscope["profiles"][0]["weights"]) - total_us) <= len(
        speedscope["profiles"][0]["weights"])


def test_a_pcomm_node_keeps_the_communicator_named_dash(tmp_path):
    rows, _ = replaced(("node", 4), ("node", 4, 3, "pcomm", "-", "-", "-",
                                     "visits=40,10,0,10,0,4,4:4"))
    tree = build_tree(load_profile(write_reduced(tmp_path / "prof", rows)))
    allreduce = tree.root.children[MAIN].children[Frame("mpi", name="MPI_Allreduce")]
    assert allreduce.comms == {"-": [40, 0, 0]}


def test_the_addresses_to_symbolize_come_from_tree_tsv(reduced):
    from pathscope.symbolize import needed_addresses
    assert needed_addresses(reduced) == {
        (SOLVER, "a1b2"): {(0x401025, "call"), (0x401100, "fn")},
        (LIBMPI, ""): {(0x2000, "fn")}}


def test_a_tree_tsv_of_another_number_of_ranks_is_stray(tmp_path):
    rows = [("pathscope-tree", "2.9"), ("run", RUN), ("ranks", 5), ("columns", "visits"),
            ("node", 0, "-", "root", "-", "-", "app"), ("end",)]
    profile = load_profile(write_reduced(tmp_path / "prof", rows))
    assert [str(s) for s in profile.stray_files] == [
        f"{tmp_path / 'prof' / 'tree.tsv'} is of a run of 5 ranks, not of this run's 4"]
    assert profile.tree is None


def test_differences_names_a_missing_rank_file(tmp_path):
    d = tmp_path / "synth"
    synth_profile.write_dir(d, ranks=3, paths=30, seed=4, rank_files=True)
    (d / "ranks" / "rank-000002.tsv").unlink()
    found = differences(d)
    assert found[:2] == ["rank files: rank 2 missing (no rank file)",
                         "ranks: tree.tsv merged 3, rank files with call paths: 2"]


def test_a_tree_tsv_without_call_paths(tmp_path):
    """A run without call paths writes its scalars, strings and warnings only."""
    rows = [("pathscope-tree", "2.9"), ("run", RUN), ("ranks", 4),
            ("reduction", 1000, 2, 100, 300), ("columns",),
            ("scalar", "counter_unknown_comms", "2,0,0,2,1,1,2:1"), ("end",)]
    profile = load_profile(write_reduced(tmp_path / "prof", rows))
    assert profile.problems() == [] and not profile.has_call_paths()
    assert "  WARNING: counter unknown_comms = 2 (1 rank; max 2 on rank 1)" in render(profile)
