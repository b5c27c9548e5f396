"""Call sites of one function merged (pathscope.calltree.merge_call_sites): the report's call
tree and hot path on a LAMMPS-like tree (lammps_like.py: Verlet::run at six sites, 51.4%
down to 1.2%, 97.0% together), `report --call-sites`, pathscope.open's merged_by_function(),
and exact sums and per-rank statistics on the hybrid fixture."""
import pytest

import pathscope
from pathscope.calltree import INCL_TIME, build_tree, function_key, merge_call_sites
from pathscope.cli import main
from pathscope.frames import ProfileFrames
from pathscope.reader import load_profile
from pathscope.report import render
from pathscope.stats import Stats
from pathscope.symbols import read_symbols
from lammps_like import PAIR, VERLET, write_lammps_like
from pathscope_samples import HYBRID


@pytest.fixture(scope="module")
def lammps(tmp_path_factory):
    return write_lammps_like(tmp_path_factory.mktemp("lmp") / "prof")


def section(text, heading):
    return text.split(f"\n{heading}")[1].split("\n\n")[0].splitlines()


def test_hot_path_follows_the_function_total(lammps):
    hot = section(render(load_profile(lammps)), "Hot path")
    assert hot[1:] == [
        "    time  ±       %  min (rank)    mean  max (rank)  max/mean  frame",
        "  2.00 s     100.0%  1.00 s (0)  1.00 s  1.00 s (0)      1.00  [all threads]",
        "  2.00 s     100.0%  1.00 s (0)  1.00 s  1.00 s (0)      1.00  main (lmp.cpp:20,22)",
        "  1.94 s      97.0%  970 ms (0)  970 ms  970 ms (0)      1.00  "
        "LAMMPS_NS::Run::command(int, char**) (run.cpp:180)",
        f"  1.94 s      97.0%  970 ms (0)  970 ms  970 ms (0)      1.00  {VERLET} "
        f"(verlet.cpp:120,130,140,... 6 call sites)",
        f"  1.54 s      76.8%  768 ms (0)  768 ms  768 ms (0)      1.00  {PAIR} "
        f"(pair_lj_cut.cpp:50)"]


def test_call_sites_kept_apart_on_request(lammps, capsys):
    assert main(["report", "--call-sites", str(lammps)]) == 0
    text = capsys.readouterr().out
    assert section(text, "Hot path")[3:] == [
        "  1.94 s      97.0%  970 ms (0)  970 ms  970 ms (0)      1.00  main (lmp.cpp:20)",
        "  1.94 s      97.0%  970 ms (0)  970 ms  970 ms (0)      1.00  "
        "LAMMPS_NS::Run::command(int, char**) (run.cpp:180)",
        f"  1.03 s      51.4%  514 ms (0)  514 ms  514 ms (0)      1.00  {VERLET} (verlet.cpp:120)",
        f"  1.03 s      51.4%  514 ms (0)  514 ms  514 ms (0)      1.00  {PAIR} "
        f"(pair_lj_cut.cpp:50)"]
    sites = [row for row in section(text, "Call tree") if VERLET in row]
    assert [row.split()[2] for row in sites] == ["51.4%", "20.0%", "12.0%", "7.0%", "5.4%",
                                                 "1.2%"]


def test_merged_call_tree_rows(lammps):
    tree = section(render(load_profile(lammps)), "Call tree")
    assert [row.rstrip() for row in tree[2:]] == [
        "   2.00 s     100.0%        -  140 ms                  1.00 s (0)   1.00 s   1.00 s (0)  [all threads]",
        "   2.00 s     100.0%        -  140 ms                  1.00 s (0)   1.00 s   1.00 s (0)    main (lmp.cpp:20,22)",
        "   1.94 s      97.0%        -  140 ms                  970 ms (0)   970 ms   970 ms (0)      LAMMPS_NS::Run::command(int, char**) (run.cpp:180)",
        "   1.94 s      97.0%        -  140 ms                  970 ms (0)   970 ms   970 ms (0)        LAMMPS_NS::Verlet::run(int) (verlet.cpp:120,130,140,... 6 call sites)",
        "   1.54 s      76.8%   1.54 s       -                  768 ms (0)   768 ms   768 ms (0)          LAMMPS_NS::PairLJCut::compute(int, int) (pair_lj_cut.cpp:50)",
        "   240 ms      12.0%   240 ms       -                  120 ms (0)   120 ms   120 ms (0)          LAMMPS_NS::Neighbor::build(int) (neighbor.cpp:10)",
        "   140 ms       7.0%   140 ms  140 ms      20  160 B  70.0 ms (0)  70.0 ms  70.0 ms (0)          MPI_Allreduce",
        "  24.0 ms       1.2%  24.0 ms       -                 12.0 ms (0)  12.0 ms  12.0 ms (0)          LAMMPS_NS::Comm::exchange() (comm.cpp:30)",
        "  60.0 ms       3.0%  60.0 ms       -                 30.0 ms (0)  30.0 ms  30.0 ms (0)      LAMMPS_NS::Output::write(long) (output.cpp:25)",
        "  0 nodes below 1% of the total time hidden (pathscope export --format folded shows every path)"]


def test_frames_merged_by_function(lammps):
    p = pathscope.open(lammps)
    merged = p.merged_by_function()
    assert list(merged.columns) == list(p.nodes.columns) + ["sites"]
    rows = merged[["node", "parent", "depth", "kind", "name", "line", "incl_time",
                   "sample_ns", "mpi_ns", "sites"]].astype(object).where(merged.notna(), None)
    assert [tuple(r) for r in rows.itertuples(index=False)] == [
        (0, None, 0, "root", "[all threads]", None, 2_000_000_000, 0, 0, 1),
        (1, 0, 1, "call", "main", 20, 2_000_000_000, 0, 0, 2),
        (2, 1, 2, "call", "LAMMPS_NS::Run::command(int, char**)", 180, 1_940_000_000, 0, 0, 1),
        (3, 2, 3, "call", VERLET, 120, 1_940_000_000, 0, 0, 6),
        (4, 3, 4, "fn", PAIR, 50, 1_536_000_000, 1_536_000_000, 0, 3),
        (5, 3, 4, "fn", "LAMMPS_NS::Neighbor::build(int)", 10, 240_000_000, 240_000_000, 0, 1),
        (6, 3, 4, "mpi", "MPI_Allreduce", None, 140_000_000, 0, 140_000_000, 1),
        (7, 3, 4, "fn", "LAMMPS_NS::Comm::exchange()", 30, 24_000_000, 24_000_000, 0, 1),
        (8, 1, 2, "fn", "LAMMPS_NS::Output::write(long)", 25, 60_000_000, 60_000_000, 0, 1)]
    # the tree by call site is still `nodes`: six Verlet::run nodes
    assert (p.nodes["name"] == VERLET).sum() == 6


def test_merged_sums_and_per_rank_statistics_are_exact():
    """The hybrid fixture: main at four sites (lines 41, 30, 45, 46) under libc: one node
    whose per-rank inclusive time is the sum of the sites', with exact extremes."""
    profile = load_profile(HYBRID)
    symbols = read_symbols(HYBRID / "symbols.tsv")
    tree = build_tree(profile, runtime_threads=False)
    merged = merge_call_sites(tree, function_key(symbols))
    libc = next(iter(next(iter(merged.root.children.values())).children.values()))
    (main_node,) = libc.children.values()
    assert [symbols.lines(s.frame)[-1].line for s in main_node.sites] == [41, 30, 45, 46]
    original = next(iter(next(iter(tree.root.children.values())).children.values()))
    assert main_node.incl_time == {
        r: sum(n.incl_time.get(r, 0) for n in original.children.values()) for r in (0, 1)}
    assert main_node.incl_time == {0: 1_944_000_000, 1: 1_979_000_000}
    frames = ProfileFrames(profile, symbols, tree=tree)
    (summed,) = frames.group_stats(INCL_TIME, [[frames.node_id(n) for n in
                                                original.children.values()]]).itertuples()
    s = merged.stat(main_node, INCL_TIME)
    assert (s.sum, s.min, s.min_rank, s.max, s.max_rank) == (
        summed.sum, summed.min, summed.min_rank, summed.max, summed.max_rank)
    assert merged.stat(main_node, INCL_TIME) == Stats.of_ranks(
        {0: 1_944_000_000, 1: 1_979_000_000}, [0, 1])
    # nothing lost: the same total at every level
    assert merged.root.incl_time == tree.root.incl_time
    assert len(list(merged.root.walk())) < len(list(tree.root.walk()))


def test_a_reduced_tree_merges_by_its_statistics(tmp_path):
    """tree.tsv without rank vectors (test_tree_tsv's, four ranks), every sibling one key:
    merging main (incl_time 2440 with the runtime root's 40), [not unwound] (20) and the
    kernel residue (0) keeps the exact sum; the extremes of a sum of two values known only
    by their statistics are not known."""
    from test_tree_tsv import write_reduced

    profile = load_profile(write_reduced(tmp_path / "prof"))
    tree = build_tree(profile)
    merged = merge_call_sites(tree, lambda frame: "one")
    (node,) = merged.root.children.values()
    assert len(node.sites) == 3
    assert merged.stat(node, INCL_TIME) == Stats(2460, 4)
    assert merged.stat(merged.root, INCL_TIME) == tree.stat(tree.root, INCL_TIME)
    (below,) = node.children.values()   # compute, MPI_Allreduce, progress, 3 system calls
    assert len(below.sites) == 6 and below.comms == {"W": [40, 1700, 320]}
    assert merged.stat(below, INCL_TIME).sum == 700 + 1700 + 40
