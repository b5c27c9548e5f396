"""The rank vectors of `--per-rank summary` (tree.tsv's `rankvec` lines) in the analysis: the
report's section "Ranks of the heaviest paths" (exact lines worked out by hand), the exact
per-rank values they give sums and differences of paths (the time split's Execution, the
runtime threads' root merged into the application's), and `export --table rankvec`."""
import io
import json
import math

import pandas as pd
import pytest

from pathscope.calltree import INCL_TIME, VISITS, build_tree, reduced_time_split
from pathscope.cli import main
from pathscope.errors import ProfileError
from pathscope.frames import ProfileFrames
from pathscope.export import export
from pathscope.reader import load_profile
from pathscope.report import render
from pathscope.stats import Stats
from pathscope.symbols import Frame, SourceLine, SymbolTable
from pathscope_samples import tsv_text

RUN = "0123456789abcdef0123456789abcdef"
SOLVER = "/opt/solver/bin/solver"
LIBMPI = "/usr/lib/libmpi.so.40"
START = Frame("call", SOLVER, "a1b2", 0x401000)
MAIN = Frame("call", SOLVER, "a1b2", 0x401025)
COMPUTE = Frame("fn", SOLVER, "a1b2", 0x401100)
SOLVE = Frame("call", SOLVER, "a1b2", 0x401200)
SYMBOLS = SymbolTable(addresses={
    START.address_key: [SourceLine("_start", None, None)],
    MAIN.address_key: [SourceLine("main", "solver.c", 12)],
    COMPUTE.address_key: [SourceLine("compute", "solver.c", 30)],
    SOLVE.address_key: [SourceLine("solve", "solver.c", 40)]})
# Four ranks; per rank (0, 1, 2, 3):
#   _start > main > compute: sample_ns 400 600 500 1400
#   _start > main > solve > MPI_Allreduce: visits 1 2 1 2, mpi_ns 600 400 500 100, bytes 4 8 4 8
#   _start > main > MPI_Barrier: visits 1 each, mpi_ns 100 each
#   [not unwound]: sample_ns 5 each
#   the runtime root > fn libmpi 0x2000: sample_ns 10 each
# Every node has a `rankvec` line per column except the runtime's fn (rankvec=False).
NODES = [  # id, parent, kind, module, address, name, {column: per rank}, rankvec
    (0, "-", "root", "-", "-", "app", {"incl_time": [1105, 1105, 1105, 1605],
                                       "incl_mpi": [700, 500, 600, 200]}, True),
    (1, 0, "call", 0, "0x401000", "-", {"incl_time": [1100, 1100, 1100, 1600],
                                        "incl_mpi": [700, 500, 600, 200]}, True),
    (2, 1, "call", 0, "0x401025", "-", {"incl_time": [1100, 1100, 1100, 1600],
                                        "incl_mpi": [700, 500, 600, 200]}, True),
    (3, 2, "fn", 0, "0x401100", "-", {"sample_ns": [400, 600, 500, 1400],
                                      "incl_time": [400, 600, 500, 1400]}, True),
    (4, 2, "call", 0, "0x401200", "-", {"incl_time": [600, 400, 500, 100],
                                        "incl_mpi": [600, 400, 500, 100]}, True),
    (5, 4, "mpi", "-", "-", "MPI_Allreduce", {
        "visits": [1, 2, 1, 2], "mpi_ns": [600, 400, 500, 100], "bytes": [4, 8, 4, 8],
        "incl_time": [600, 400, 500, 100], "incl_mpi": [600, 400, 500, 100]}, True),
    (6, 2, "mpi", "-", "-", "MPI_Barrier", {
        "visits": [1, 1, 1, 1], "mpi_ns": [100] * 4, "incl_time": [100] * 4,
        "incl_mpi": [100] * 4}, True),
    (7, 0, "not_unwound", "-", "-", "-", {"sample_ns": [5] * 4, "incl_time": [5] * 4}, True),
    (8, "-", "root", "-", "-", "runtime", {"incl_time": [10] * 4}, True),
    (9, 8, "fn", 1, "0x2000", "-", {"sample_ns": [10] * 4, "incl_time": [10] * 4}, False),
]


def tree_rows(nodes=NODES, vectors=True):
    rows = [("pathscope-tree", "2.14"), ("run", RUN), ("ranks", 4),
            ("columns", "visits", "sample_ns", "mpi_ns", "bytes", "incl_time", "incl_mpi",
             "incl_offcpu"),
            ("module", 0, SOLVER, "a1b2"), ("module", 1, LIBMPI, "-"),
            ("string", "program", 4, "solver"),
            ("scalar", "thread.elapsed_ns", Stats.of_vector([1105, 1105, 1105, 1605]).text()),
            ("scalar", "thread.count", Stats.of_vector([1] * 4).text()),
            ("scalar", "thread.nodes", Stats.of_vector([7] * 4).text())]
    for node_id, parent, kind, module, address, name, columns, _ in nodes:
        rows.append(("node", node_id, parent, kind, module, address, name,
                     *(f"{c}={Stats.of_vector(v).text()}" for c, v in columns.items())))
    for node_id, *_, columns, with_vector in nodes:
        if vectors and with_vector:
            rows += [("rankvec", node_id, c, ",".join(map(str, v))) for c, v in columns.items()]
    return rows + [("end",)]


def write_profile(d, tree):
    d.mkdir()
    profile = [("pathscope-profile", "2.9"), ("run", RUN), ("program", "solver"),
               ("nranks", 4), ("start_unix_ns", 1700000000000000000)]
    profile += [("rank", r, f"node{r}", 1000, 400) for r in range(4)]
    (d / "profile.tsv").write_text(tsv_text(profile + [("end",)]))
    (d / "tree.tsv").write_text(tsv_text(tree))
    return load_profile(d)


@pytest.fixture
def summary(tmp_path):
    return write_profile(tmp_path / "prof", tree_rows())


def section(text):
    return text.split("Ranks of the heaviest paths")[1].split("\n\n")[0].splitlines()


def test_the_section_shows_each_rank_s_value_of_the_heaviest_paths(summary):
    assert section(render(summary, symbols=SYMBOLS)) == [
        " (--per-rank summary: each rank's value, 9 paths)",
        "  median, p90: the value of the rank at that place in ascending order; >mean+10%: the "
        "ranks more than 10% above the mean",
        "  ranks: ranks 0-3 left to right, one character each; ▁ to █: from 0 to the row's max "
        "(a share: to 100%), blank: 0",
        # below main: not the root, not _start; not main > solve (all its time in its call)
        "  Time: the 5 paths with the most inclusive time below main",
        "  value        total   min (rank)   median      p90   max (rank)  max/mean  >mean+10%  "
        "ranks  call path",
        # main: 1100 1100 1100 1600 (sorted: the 2nd is the median, the 4th the p90), its MPI
        # time 700 500 600 200: shares 63.6%, 45.5%, 54.5%, 12.5%
        "  time       4.90 µs  1.10 µs (0)  1.10 µs  1.60 µs  1.60 µs (3)      1.31  1: 3       "
        "▆▆▆█   main (solver.c:12)",
        "  MPI share    40.8%    12.5% (3)    45.5%    63.6%    63.6% (0)                       "
        "▆▄▅▁",
        "  time       2.90 µs   400 ns (0)   500 ns  1.40 µs  1.40 µs (3)      1.93  1: 3       "
        "▃▄▃█   main > compute (solver.c:30)",
        # 600 400 500 100: the mean 400, + 10% = 440
        "  time       1.60 µs   100 ns (3)   400 ns   600 ns   600 ns (0)      1.50  2: 0,2     "
        "█▆▇▂   main > solve > MPI_Allreduce (solver.c:40)",
        "  time        400 ns   100 ns (0)   100 ns   100 ns   100 ns (0)      1.00  -          "
        "████   main > MPI_Barrier (solver.c:12)",
        "  time         20 ns     5 ns (0)     5 ns     5 ns     5 ns (0)      1.00  -          "
        "████   [not unwound]",
        # the MPI calls whose counts differ: MPI_Allreduce, not MPI_Barrier
        "  MPI calls whose visits or bytes differ between ranks (1 of 1, by MPI time)",
        "  value   total  min (rank)  median  p90  max (rank)  max/mean  >mean+10%  ranks  "
        "call path",
        "  visits      6       1 (0)       1    2       2 (1)      1.33  2: 1,3     ▄█▄█   "
        "main > solve > MPI_Allreduce (solver.c:40)",
        "  bytes    24 B     4 B (0)     4 B  8 B     8 B (1)      1.33  2: 1,3     ▄█▄█"]


def test_no_section_without_rank_vectors(tmp_path):
    text = render(write_profile(tmp_path / "prof", tree_rows(vectors=False)), symbols=SYMBOLS)
    assert "Ranks of the heaviest paths" not in text
    assert "Hot path" in text


def test_rank_vectors_make_differences_and_sums_of_paths_exact(summary, tmp_path):
    # Execution = the root - [not unwound]: each rank's value from the two vectors
    split = reduced_time_split(build_tree(summary, runtime_threads=False))
    assert split.execution == Stats.of_vector([1100, 1100, 1100, 1600])
    assert split.execution_mpi == Stats.of_vector([700, 500, 600, 200])
    assert split.execution_oncpu == Stats.of_vector([400, 600, 500, 1400])
    text = render(summary, symbols=SYMBOLS).split("Time split")[1].splitlines()
    assert text[5].split() == ["Execution", "4.90", "µs", "99.6%", "1.10", "µs", "(0)", "1.23",
                               "µs", "1.60", "µs", "(3)"]
    # the runtime root merges into the app root: both vectors known, so is the sum per rank
    tree = build_tree(summary)
    assert tree.stat(tree.root, INCL_TIME) == Stats.of_vector([1115, 1115, 1115, 1615])
    assert tree.vector(tree.root, INCL_TIME) == [1115, 1115, 1115, 1615]
    # a node without a rank vector: not known per rank
    progress = tree.root.children[Frame("fn", LIBMPI, "", 0x2000)]
    assert tree.vector(progress, INCL_TIME) is None
    # a column a node with rank vectors does not have is 0 on every rank
    compute = tree.root.children[START].children[MAIN].children[COMPUTE]
    assert tree.vector(compute, VISITS) == [0] * 4
    # sums of paths (a function's several call paths) are exact per rank
    allreduce = compute.parent.children[SOLVE].children[Frame("mpi", name="MPI_Allreduce")]
    frames = ProfileFrames(summary, SYMBOLS, tree=tree)
    exact, combined = frames.group_stats(INCL_TIME, [
        [frames.node_id(compute), frames.node_id(allreduce)],
        [frames.node_id(compute), frames.node_id(progress)]]).itertuples()
    assert (exact.sum, exact.min, exact.min_rank, exact.max, exact.max_rank) == (
        4500, 1000, 0, 1500, 3)
    assert (combined.sum, combined.mean, combined.min, combined.max) == (2940, 735, pd.NA, pd.NA)
    # without the runtime root's vector the merged root is known by its sum alone
    nodes = [n[:7] + (n[7] and n[0] != 8,) for n in NODES]
    other = write_profile(tmp_path / "other", tree_rows(nodes))
    tree = build_tree(other)
    assert (tree.stat(tree.root, INCL_TIME), tree.vector(tree.root, INCL_TIME)) == (
        Stats(4920 + 40, 4), None)


def test_export_table_rankvec(summary):
    out = io.StringIO()
    export(summary, "rankvec", "csv", out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "node,root,path,column,unit,rank,value"
    # 9 paths: their columns (the runtime root's too), 4 ranks each
    assert len(lines) == 1 + 4 * (2 + 2 + 2 + 2 + 2 + 5 + 4 + 2 + 1)
    assert lines[1:9] == [f"0,app,,incl_time,s,{r},{v}" for r, v in enumerate(
        ["0.000001105", "0.000001105", "0.000001105", "0.000001605"])] + [
        f"0,app,,incl_mpi,s,{r},{v}" for r, v in enumerate(
            ["0.0000007", "0.0000005", "0.0000006", "0.0000002"])]
    path = "solver+0x401000;solver+0x401025;solver+0x401200;MPI_Allreduce"
    allreduce = [line for line in lines if line.startswith("5,")]
    assert allreduce[:12] == (
        [f"5,app,{path},visits,count,{r},{v}" for r, v in enumerate([1, 2, 1, 2])]
        + [f"5,app,{path},mpi_ns,s,{r},{v}"
           for r, v in enumerate(["0.0000006", "0.0000004", "0.0000005", "0.0000001"])]
        + [f"5,app,{path},bytes,bytes,{r},{v}" for r, v in enumerate([4, 8, 4, 8])])
    assert [line for line in lines if line.startswith("8,")] == [
        f"8,runtime,,incl_time,s,{r},0.00000001" for r in range(4)]
    out = io.StringIO()
    export(summary, "rankvec", "json", out)
    rows = json.loads(out.getvalue())
    assert rows[0] == {"node": 0, "root": "app", "path": "", "column": "incl_time",
                       "unit": "s", "rank": 0, "value": 1.105e-06}
    assert [r["value"] for r in rows if r["node"] == 7] == [5e-09] * 8


def test_export_table_rankvec_without_rank_vectors_is_empty(tmp_path, capsys):
    write_profile(tmp_path / "prof", tree_rows(vectors=False))
    assert main(["export", str(tmp_path / "prof"), "--table", "rankvec"]) == 0
    assert capsys.readouterr().out == "node,root,path,column,unit,rank,value\n"


def test_many_ranks_share_a_character_and_long_rank_lists_are_cut(tmp_path):
    """130 ranks: one character per 3 ranks (their largest value); the slow ranks' list is
    cut at 24 characters."""
    ranks = 130
    rising = [r + 1 for r in range(ranks)]          # 1 .. 130 ns
    even = [2 if r % 2 == 0 else 1 for r in range(ranks)]
    main_time = [a + b for a, b in zip(rising, even)]
    nodes = [(0, "-", "root", "-", "-", "app", {"incl_time": main_time}, True),
             (1, 0, "call", 0, "0x401025", "-", {"incl_time": main_time}, True),
             (2, 1, "fn", 0, "0x401100", "-", {"sample_ns": rising, "incl_time": rising}, True),
             (3, 1, "fn", 0, "0x401200", "-", {"sample_ns": even, "incl_time": even}, True)]
    rows = [r for r in tree_rows(nodes) if r[0] not in ("ranks", "scalar")]
    rows.insert(2, ("ranks", ranks))
    d = tmp_path / "prof"
    d.mkdir()
    profile = [("pathscope-profile", "2.9"), ("run", RUN), ("program", "solver"),
               ("nranks", ranks)] + [("rank", r, "node", 1000, 0) for r in range(ranks)]
    (d / "profile.tsv").write_text(tsv_text(profile + [("end",)]))
    (d / "tree.tsv").write_text(tsv_text(rows))
    lines = section(render(load_profile(d), symbols=SYMBOLS))
    assert lines[2] == ("  ranks: ranks 0-129 left to right, one character per 3 ranks (their "
                        "largest value); ▁ to █: from 0 to the row's max (a share: to 100%), "
                        "blank: 0")
    # groups 0-2, 3-5, ..., 126-128, 129: their largest values 3, 6, ..., 129, 130, in
    # eighths of 130 (a value v is in the ⌈8v/130⌉-th)
    spark = "".join("▁▂▃▄▅▆▇█"[math.ceil(8 * v / 130) - 1] for v in [*range(3, 130, 3), 130])
    assert len(spark) == 44
    by_label = {cells[-1]: cells for cells in (line.split() for line in lines[5:])}
    # 1 .. 130: median the 65th, p90 the 117th; the mean 65.5, +10%: above 72.05
    assert by_label["(solver.c:30)"] == ["time", "8.52", "µs", "1", "ns", "(0)", "65", "ns",
                                         "117", "ns", "130", "ns", "(129)", "1.98", "58:",
                                         "72-129", spark, "main", ">", "compute",
                                         "(solver.c:30)"]
    # 2 1 2 1 ...: the even ranks above the mean 1.5, cut after 16; a frame without a name
    # has no file and line
    # (each group of 3 has an even rank but the last, 129: ▄ for 1 of 2)
    assert by_label["solver+0x401200"] == [
        "time", "195", "ns", "1", "ns", "(1)", "1", "ns", "2", "ns", "2", "ns", "(0)", "1.33",
        "65:", "0,2,4,6,8,10,12,14,16,...", "█" * 43 + "▄", "main", ">", "solver+0x401200"]


def test_a_node_without_rank_vectors_has_no_per_rank_values(summary):
    tree = build_tree(summary)
    progress = tree.root.children[Frame("fn", LIBMPI, "", 0x2000)]
    with pytest.raises(ProfileError) as e:
        progress.per_rank(INCL_TIME)
    assert str(e.value) == "per-rank values are not kept in tree.tsv"
    # a node with rank vectors: its values, the ranks with 0 left out
    main_node = tree.root.children[START].children[MAIN]
    assert main_node.per_rank(INCL_TIME) == {0: 1100, 1: 1100, 2: 1100, 3: 1600}
