"""Collective volumes: tests/programs/collectives.c on 4 ranks (p = 4).  Each expected byte
count is the sum over ranks of the per-rank contributions defined in runtime/mpi/volume.c."""
from pathscope.reader import load_profile

EXPECTED = {
    ("W", "MPI_Bcast"): (4, 120),            # 10 ints from root 1: (p-1) x 40
    ("W", "MPI_Gather"): (8, 320),           # 5 doubles: p x 40, twice (second in place at root)
    ("W", "MPI_Scatter"): (4, 48),           # 3 ints: p x 12
    ("W", "MPI_Gatherv"): (4, 40),           # rank r sends r+1 ints: (1+2+3+4) x 4
    ("W", "MPI_Scatterv"): (4, 40),          # rank r receives r+1 ints
    ("W", "MPI_Allgather"): (8, 64),         # 2 ints: p x 8, twice (second in place)
    ("W", "MPI_Allgatherv"): (4, 80),        # rank r contributes r+1 doubles
    ("W", "MPI_Alltoall"): (4, 128),         # 2 ints to each of p: p x p x 8
    ("W", "MPI_Alltoallv"): (4, 160),        # j+1 ints to rank j: p x 40
    ("W", "MPI_Alltoallw"): (4, 160),
    ("W", "MPI_Reduce"): (4, 96),            # 6 ints: p x 24
    ("W", "MPI_Allreduce"): (8, 80),         # 1 double + 3 ints in place: p x (8 + 12)
    ("W", "MPI_Reduce_scatter_block"): (4, 128),  # recvcount 2 ints: p x (p x 8)
    ("W", "MPI_Reduce_scatter"): (4, 160),   # recvcounts 1..4 ints: p x 40
    ("W", "MPI_Scan"): (4, 48),              # 4 ints: (p-1) x 16
    ("W", "MPI_Exscan"): (4, 48),
    ("W", "MPI_Barrier"): (4, 0),
    ("W", "MPI_Iallreduce"): (4, 32),        # counted at the post
    ("W", "MPI_Ibcast"): (4, 24),            # 1 double from root 0: (p-1) x 8
    ("W", "MPI_Put"): (4, 80),               # one-sided, via the window's communicator
    ("W", "MPI_Get"): (4, 48),
    ("W", "MPI_Accumulate"): (4, 32),
    ("W", "MPI_Win_fence"): (16, 0),
    ("W", "MPI_Win_create"): (4, 0),
    ("W", "MPI_Win_free"): (4, 0),
    ("W_a1", "MPI_Neighbor_allgather"): (4, 64),   # 4 neighbours x 4 B per rank
    ("W_a1", "MPI_Neighbor_alltoall"): (4, 64),
    ("W_a1", "MPI_Neighbor_alltoallv"): (4, 192),  # (n-1) x sum of 4 blocks of 4 B = 48 per rank
    ("W_a1", "MPI_Neighbor_alltoallw"): (4, 192),
    ("W_s2.0", "MPI_Bcast"): (2, 32),        # 4 doubles on a 2-rank communicator: 1 x 32
    ("W_s2.1", "MPI_Bcast"): (2, 32),
}
PERSISTENT = {                                  # MPI-4 only (MPICH 4 here)
    ("W", "MPI_Allreduce_init"): (4, 0),
    ("W", "MPI_Start"): (12, 96),            # 3 starts x 2 ints x p
    ("W", "MPI_Wait"): (20, 0),              # 8 for the nonblocking ones + 12
}


def test_collective_volumes(mpi, tmp_path):
    out = tmp_path / "prof"
    mpi.run(4, [mpi.prog("collectives")], out)
    prof = load_profile(out)
    expected = dict(EXPECTED)
    if mpi.name == "mpich":
        expected.update(PERSISTENT)
    else:
        expected[("W", "MPI_Wait")] = (8, 0)
    for key, want in expected.items():
        got = prof.ops[key]
        assert (got.calls, got.bytes) == want, key
    # Bcast histogram: the root's 0 bytes in bin 0, the others' 40 B in bin 6 (32..63)
    assert prof.ops[("W", "MPI_Bcast")].hist == {0: 1, 6: 3}
    # classic view: per-operation totals over all communicators
    assert prof.ops[("*", "MPI_Bcast")].calls == 8
    assert prof.ops[("*", "MPI_Bcast")].bytes == 120 + 64
