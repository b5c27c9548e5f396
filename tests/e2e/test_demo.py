"""The demo mini-app (examples/stencil) on a 2x2 grid, N=32, 10 iterations: exact halo and
collective traffic per communicator (formulas in examples/stencil/README.md), no request the
runtime could not match, and a consistent point-to-point balance."""
from pathscope.reader import load_profile
from profile_files import rank_text


def rank_counters(out, nranks):
    counters = {}
    for r in range(nranks):
        for line in rank_text(out, r).splitlines():
            key, _, value = line.partition("\t")
            if key.startswith("counter_"):
                counters[key] = counters.get(key, 0) + int(value)
    return counters


def test_stencil_traffic(mpi, tmp_path):
    out = tmp_path / "prof"
    mpi.run(4, [mpi.prog("stencil"), 32, 10], out)
    prof = load_profile(out)
    want = {
        # halo: 16 B x N x ((rows-1) + (cols-1)) per iteration, 10 iterations, all sent once
        ("W_a2", "MPI_Isend"): (80, 10240),
        ("W_a2", "MPI_Irecv"): (80, 10240),
        ("W_a2", "MPI_Waitall"): (40, 0),
        ("W_a2", "MPI_Allreduce"): (4, 32),       # one monitor step, one double per rank
        ("W_a2_b3.0", "MPI_Reduce"): (2, 256),    # 16 doubles per rank on each row
        ("W_a2_b3.2", "MPI_Reduce"): (2, 256),
        ("W_a2_b4.0", "MPI_Bcast"): (2, 128),     # 16 doubles, the root contributes 0
        ("W_a2_b4.1", "MPI_Bcast"): (2, 128),
        ("W_d1", "MPI_Gather"): (4, 192),         # 6 doubles per rank
    }
    for key, value in want.items():
        assert (prof.ops[key].calls, prof.ops[key].bytes) == value, key
    cart = prof.comms["W_a2"]
    assert cart.topology == "cart ndims=2 dims=2x2 periods=0,0 reorder=1"
    assert (cart.sent_msgs, cart.sent_bytes) == (cart.recv_msgs, cart.recv_bytes) == (80, 10240)
    assert all(v == 0 for v in rank_counters(out, 4).values()), rank_counters(out, 4)
