"""Communicator naming and attribution: tests/programs/comm_create.c on 4 ranks creates one
communicator with every creating operation, in a fixed order.  The expected names follow the
scheme of docs/format.md; the per-rank communicator counts (W counted, SELF not) are:

step  operation                      name               counts after (ranks 0,1,2,3)
 1    dup(W)                         W_d1               2 2 2 2
 2    split(W, rank%2)               W_s2.0, W_s2.1     3 3 3 3
 3    cart_create(W, 2x2)            W_a3               4 4 4 4
 4    cart_sub(rows)                 W_a3_b4.0, .2      5 5 5 5
 5    dup_with_info(parity)          W_s2.0_e5, W_s2.1_e5  6 ...
 6    idup(W)                        W_i6               7
 7    split_type(shared)             W_t7.0             8
 8    create(W, {0,1,2})             W_c8.0             9 9 9 8
 9    create_group({1,3}) by 1 and 3 W_g9.1 (max over the group: 9)   9 10 9 9
10    graph_create                   W_r10              10 11 10 10
11    dist_graph_create_adjacent     W_y11              11 12 11 11
12    dist_graph_create              W_x12              12 13 12 12
13    intercomm_create(parity, peer W) W_n13.0          13 14 13 13
14    intercomm_merge                W_n13.0_m14        14 15 14 14
15    split(W, rank 0 undefined)     W_s15.1            14 16 15 15
"""
from pathscope.reader import load_profile

EXPECTED = {
    # name: (size, remote_size, parent, creator, members, topology)
    "W": (4, 0, "-", "-", "0-3", "-"),
    "W_d1": (4, 0, "W", "MPI_Comm_dup", "0-3", "-"),
    "W_s2.0": (2, 0, "W", "MPI_Comm_split", "0,2", "-"),
    "W_s2.1": (2, 0, "W", "MPI_Comm_split", "1,3", "-"),
    "W_a3": (4, 0, "W", "MPI_Cart_create", "0-3", "cart ndims=2 dims=2x2 periods=1,0 reorder=0"),
    "W_a3_b4.0": (2, 0, "W_a3", "MPI_Cart_sub", "0-1", "-"),
    "W_a3_b4.2": (2, 0, "W_a3", "MPI_Cart_sub", "2-3", "-"),
    "W_s2.0_e5": (2, 0, "W_s2.0", "MPI_Comm_dup_with_info", "0,2", "-"),
    "W_s2.1_e5": (2, 0, "W_s2.1", "MPI_Comm_dup_with_info", "1,3", "-"),
    "W_i6": (4, 0, "W", "MPI_Comm_idup", "0-3", "-"),
    "W_t7.0": (4, 0, "W", "MPI_Comm_split_type", "0-3", "-"),
    "W_c8.0": (3, 0, "W", "MPI_Comm_create", "0-2", "-"),
    "W_g9.1": (2, 0, "W", "MPI_Comm_create_group", "1,3", "-"),
    "W_r10": (4, 0, "W", "MPI_Graph_create", "0-3", "graph nnodes=4 reorder=0"),
    "W_y11": (4, 0, "W", "MPI_Dist_graph_create_adjacent", "0-3", "dist_graph adjacent reorder=0"),
    "W_x12": (4, 0, "W", "MPI_Dist_graph_create", "0-3", "dist_graph reorder=0"),
    "W_n13.0": (2, 2, "W", "MPI_Intercomm_create", "0,2|1,3", "-"),
    "W_n13.0_m14": (4, 0, "W_n13.0", "MPI_Intercomm_merge", "0,2,1,3", "-"),
    "W_s15.1": (3, 0, "W", "MPI_Comm_split", "1-3", "-"),
}


def test_every_creating_operation(mpi, tmp_path):
    out = tmp_path / "prof"
    mpi.run(4, [mpi.prog("comm_create")], out)
    prof = load_profile(out)
    names = {n for n in prof.comms if n not in ("-",) and not n.startswith("S.")}
    assert names == set(EXPECTED)
    for name, (size, rsize, parent, creator, members, topo) in EXPECTED.items():
        c = prof.comms[name]
        assert (c.size, c.remote_size, c.parent, c.creator, c.members, c.topology) == \
            (size, rsize, parent, creator, members, topo), name
        if name != "W":
            assert c.freed == 1, name
        # one Allreduce of one int by every member (intercomm: both groups)
        op = prof.ops[(name, "MPI_Allreduce")] if name != "W" else None
        if op:
            n = size + rsize
            assert (op.calls, op.bytes, op.nranks) == (n, 4 * n, n), name
    # MPI_COMM_SELF: one per rank, named S.<rank>
    for r in range(4):
        assert prof.comms[f"S.{r}"].members == str(r)
        assert prof.ops[(f"S.{r}", "MPI_Allreduce")].calls == 1
    # the creating calls are charged to the parent
    assert prof.ops[("W", "MPI_Comm_split")].calls == 8
    assert prof.ops[("W", "MPI_Comm_create_group")].calls == 2
    assert prof.ops[("W_a3", "MPI_Cart_sub")].calls == 4
    assert prof.ops[("W_s2.0", "MPI_Intercomm_create")].calls == 2
    assert prof.ops[("W_n13.0", "MPI_Intercomm_merge")].calls == 4


def test_spawn_gets_a_name(mpi, tmp_path):
    """MPI_Comm_spawn must not crash and the intercommunicator gets a name; the spawned job
    writes its own profile into a subdirectory."""
    if mpi.name == "mpich":
        import pytest
        pytest.skip("MPICH 4.0.2's hydra fails MPI_Comm_spawn on this machine even without pathscope")
    out = tmp_path / "prof"
    # the environment form: the launcher hands LD_PRELOAD to the spawned job as well
    mpi.run(2, [mpi.prog("spawn")], out, mode="env")
    prof = load_profile(out)
    c = prof.comms["W_p1"]
    assert (c.size, c.remote_size, c.creator, c.members) == (2, 1, "MPI_Comm_spawn", "0-1|-32766")
    assert prof.ops[("W_p1", "MPI_Bcast")].calls == 2
    children = list(out.glob("spawned-*"))
    assert len(children) == 1
    child = load_profile(children[0])
    assert child.nranks == 1
    assert child.comms["P"].remote_size == 2
    assert child.ops[("P", "MPI_Bcast")].calls == 1


def test_create_from_group(mpi, tmp_path):
    """MPI-4 sessions beside MPI_Init: MPI_Comm_create_from_group of the session's world set,
    named under the session (S0; MPICH 4 here, Open MPI 4.1 is MPI-3.1)."""
    if mpi.name != "mpich":
        import pytest
        pytest.skip("MPI-4 sessions need MPICH 4 here")
    out = tmp_path / "prof"
    mpi.run(4, [mpi.prog("sessions")], out)
    prof = load_profile(out)
    c = prof.comms["S0_f1.0"]
    assert (c.size, c.creator, c.members, c.freed) == (4, "MPI_Comm_create_from_group", "0-3", 1)
    assert (prof.ops[("S0_f1.0", "MPI_Allreduce")].calls, prof.ops[("S0_f1.0", "MPI_Allreduce")].bytes) == (4, 16)
