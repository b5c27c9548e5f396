"""The merged call tree (pathscope.calltree) on the hybrid fixture: merging by frame identity,
per-rank values and statistics, the time split, and the choice of ranks and threads."""
import pytest

from pathscope.calltree import BYTES, INCL_TIME, MPI_NS, SAMPLE_NS, VISITS, build_tree
from pathscope.errors import ProfileError
from pathscope.frames import ProfileFrames
from pathscope.reader import load_profile
from pathscope.symbols import Frame, read_symbols
from pathscope.stats import Stats
from pathscope_samples import HYBRID, RANK0, split_rows, write_profile

SOLVER = ("/opt/solver/bin/solver", "a1b2c3d4e5f60718")
LIBC = ("/lib/x86_64-linux-gnu/libc.so.6", "89abcdef01234567")


def code(kind, module, address):
    return Frame(kind, module[0], module[1], address)


MAIN_PATH = [code("call", SOLVER, 0x401025), code("call", LIBC, 0x2724A)]


def node_at(tree, frames):
    node = tree.root
    for frame in frames:
        node = node.children[frame]
    return node


@pytest.fixture(scope="module")
def profile():
    return load_profile(HYBRID)


def test_merged_by_frame_identity_across_module_ids(profile):
    """Rank 1 numbers its modules differently: the paths still merge (by path and build id),
    and the three call sites in main stay three nodes, as does main's own samples (fn)."""
    tree = build_tree(profile)
    libc_main = node_at(tree, MAIN_PATH)
    assert sorted(libc_main.children) == sorted([
        code("call", SOLVER, 0x401345), code("call", SOLVER, 0x401365),
        code("call", SOLVER, 0x401375), code("fn", SOLVER, 0x401300)])
    assert set(libc_main.by_rank) == {0, 1}
    compute = node_at(tree, MAIN_PATH + [code("call", SOLVER, 0x401345),
                                         code("call", SOLVER, 0x401288),
                                         code("fn", SOLVER, 0x401100)])
    assert compute.by_rank == {0: [0, 1_100_000_000, 110, 0, 0] + [0] * 19,
                               1: [0, 1_169_000_000, 117, 0, 0] + [0] * 19}
    assert compute.time_ns == 2_269_000_000
    # the same function sampled under the other threads and [failed unwind]: other nodes
    failed = tree.root.children[Frame("failed")]
    assert failed.children[code("fn", SOLVER, 0x401100)].by_rank == {0: [0, 30_000_000, 3, 0, 0] + [0] * 19}


def test_mpi_leaves_and_communicators(profile):
    tree = build_tree(profile)
    allreduce = node_at(tree, MAIN_PATH + [code("call", SOLVER, 0x401345),
                                           code("call", SOLVER, 0x4012D0),
                                           Frame("mpi", name="MPI_Allreduce")])
    assert (allreduce.total(VISITS), allreduce.total(MPI_NS), allreduce.total(BYTES),
            allreduce.total(SAMPLE_NS)) == (40, 900_000_000, 320, 0)
    assert allreduce.comms == {"W": [20, 750_000_000, 160], "W_d1": [20, 150_000_000, 160]}
    not_unwound = tree.root.children[Frame("not_unwound")]
    assert sorted(f.name for f in not_unwound.children) == ["MPI_Comm_dup", "MPI_Finalize"]


def test_inclusive_values_per_rank(profile):
    tree = build_tree(profile)
    assert tree.ranks == [0, 1]
    assert tree.threads == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert tree.root.incl_time == {0: 3_500_000_000, 1: 3_200_000_001}
    assert tree.root.incl_mpi == {0: 456_000_000, 1: 616_000_000}
    main_41 = node_at(tree, MAIN_PATH + [code("call", SOLVER, 0x401345)])
    assert main_41.incl_time == {0: 1_600_000_000, 1: 1_869_000_000}
    assert main_41.incl_mpi == {0: 300_000_000, 1: 600_000_000}
    assert tree.elapsed == {0: 3_500_000_000, 1: 3_200_000_000}
    assert tree.nodes == {0: 25, 1: 23}


def test_rank_stats_count_missing_ranks_as_zero_and_name_the_lowest_on_ties(profile):
    tree = build_tree(profile)
    recv = node_at(tree, MAIN_PATH + [code("call", SOLVER, 0x401365)])
    stats = tree.stat(recv, INCL_TIME)
    assert (stats.total, stats.min, stats.min_rank, stats.mean, stats.max, stats.max_rank,
            stats.nonzero, stats.sketch) == (150_000_000, 0, 1, 75_000_000, 150_000_000, 0, 1,
                                             ((28, 1),))    # 2^27 <= 150e6 < 2^28
    tie = Stats.of_ranks({0: 5, 1: 5, 2: 3, 3: 3}, [3, 2, 1, 0])
    assert (tie.min_rank, tie.max_rank, tie.mean, tie.sketch) == (2, 0, 4.0, ((2, 2), (3, 2)))
    assert Stats.of_ranks({}, []).total == 0


def by_rank(stats):
    """The two ranks' values of a statistic over ranks 0 and 1 (its extremes say them)."""
    if stats.min_rank == stats.max_rank:
        return {0: stats.min, 1: stats.min}
    return {stats.min_rank: stats.min, stats.max_rank: stats.max}


def test_time_split_is_exact(profile):
    tree = build_tree(profile)
    split = split_rows(profile, tree)
    assert by_rank(split["time"]) == {0: 3_500_000_000, 1: 3_200_000_000}
    assert by_rank(split["failed"]) == {0: 30_000_000, 1: 0}
    assert by_rank(split["failed_mpi"]) == {0: 0, 1: 0}
    assert by_rank(split["not_unwound"]) == {0: 76_000_000, 1: 71_000_001}
    assert by_rank(split["not_unwound_mpi"]) == {0: 6_000_000, 1: 6_000_000}
    assert by_rank(split["execution"]) == {0: 3_394_000_000, 1: 3_129_000_000}
    assert by_rank(split["execution_mpi"]) == {0: 450_000_000, 1: 610_000_000}
    # the parts add up to the threads' elapsed time within 1 ns per node
    assert ProfileFrames(profile, tree=tree).unaccounted() == {"rank 0": (0, 25),
                                                               "rank 1": (-1, 23)}
    assert (split["time"].sum - split["failed"].sum - split["not_unwound"].sum
            - split["execution"].sum) == -1


def test_one_rank_and_one_thread(profile):
    tree = build_tree(profile, rank=1, thread=1)
    assert (tree.ranks, tree.threads, tree.elapsed) == ([1], [(1, 1)], {1: 1_200_000_000})
    assert tree.root.incl_time == {1: 1_200_000_001}
    tree = build_tree(profile, thread=0)
    assert tree.threads == [(0, 0), (1, 0)]
    assert tree.root.incl_time == {0: 2_000_000_000, 1: 2_000_000_000}
    split = split_rows(profile, tree)
    assert by_rank(split["execution"]) == {0: 1_944_000_000, 1: 1_979_000_000}   # 2000 - 30 - 26


@pytest.mark.parametrize("rank, thread, message", [
    (7, None, "no rank 7 in this profile (ranks 0-1)"),
    (-1, None, "no rank -1 in this profile (ranks 0-1)"),
    (None, 2, "no thread 2 in this profile (threads 0-1)"),
    (0, 5, "no thread 5 of rank 0 in this profile (threads 0-1)"),
])
def test_choosing_what_is_not_there(profile, rank, thread, message):
    with pytest.raises(ProfileError) as e:
        build_tree(profile, rank, thread)
    assert str(e.value) == message


def test_rank_without_its_file(tmp_path):
    d = tmp_path / "prof"
    import shutil
    shutil.copytree(HYBRID, d)
    (d / "ranks" / "rank-000000.tsv").unlink()
    with pytest.raises(ProfileError) as e:
        build_tree(load_profile(d), rank=0)
    assert str(e.value) == "no call-path data for rank 0 (ranks with call paths: 1)"


def test_no_call_paths(tmp_path):
    d = write_profile(tmp_path / "prof", None, {0: RANK0})
    with pytest.raises(ProfileError) as e:
        build_tree(load_profile(d))
    assert str(e.value) == (f"no call-path data in {d} (profile format 1.x or sampling and "
                            f"unwinding were off)")


def test_names_of_the_merged_frames(profile):
    symbols = read_symbols(HYBRID / "symbols.tsv")
    tree = build_tree(profile)
    names = {";".join(n for f in node.path() for n in symbols.names(f))
             for node in tree.root.walk() if not node.children}
    assert names == {
        "_start;__libc_start_call_main;main;solve;update;compute",
        "_start;__libc_start_call_main;main;solve;update;compute;libkernels.so+0x1a4f",
        "_start;__libc_start_call_main;main;solve;MPI_Allreduce",
        "_start;__libc_start_call_main;main;MPI_Recv",
        "_start;__libc_start_call_main;main;MPI_Send",
        "_start;__libc_start_call_main;main",
        "[failed unwind];compute",
        "[not unwound];MPI_Finalize", "[not unwound];MPI_Comm_dup",
        "__clone3;start_thread;worker", "__clone3;start_thread;worker;compute"}
