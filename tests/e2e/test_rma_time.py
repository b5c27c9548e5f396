"""Passive-target one-sided communication (tests/programs/rma_passive.c, 2 ranks, both MPIs):
the call tree of every thread holds exactly its elapsed time (the report's own check), the MPI
time on the tree's nodes is the per-operation MPI time, and the one-sided calls and bytes are
exact.  The target polls (MPI_Test, MPI_Iprobe) while the origin's operations progress in its
polls: before polls' scaled time was bounded (wrap.h: ps_poll_estimate), a few long polls
times 16 put up to 0.75 s more MPI time in its tree than it had lived."""
from pathscope.reader import load_profile
from pathscope.report import render
from profile_files import rank_text

ITERATIONS = 30
BIG = 65536 * 8

# (communicator, operation) -> (calls, bytes), all made by rank 0 on the window of W
EXPECTED = {
    ("W", "MPI_Win_lock"): (ITERATIONS, 0),
    ("W", "MPI_Win_unlock"): (ITERATIONS, 0),
    ("W", "MPI_Win_lock_all"): (ITERATIONS, 0),
    ("W", "MPI_Win_unlock_all"): (ITERATIONS, 0),
    ("W", "MPI_Win_flush"): (ITERATIONS, 0),
    ("W", "MPI_Win_flush_all"): (ITERATIONS, 0),
    ("W", "MPI_Win_flush_local"): (ITERATIONS, 0),
    ("W", "MPI_Put"): (2 * ITERATIONS, ITERATIONS * (BIG + 50 * 8)),
    ("W", "MPI_Get"): (2 * ITERATIONS, ITERATIONS * (1000 * 8 + 50 * 8)),
    ("W", "MPI_Accumulate"): (ITERATIONS, ITERATIONS * 1000 * 8),
    ("W", "MPI_Win_allocate"): (2, 0),
    ("W", "MPI_Win_free"): (2, 0),
}


def rank_records(out, rank):
    text = rank_text(out, rank)
    return [line.split("\t") for line in text.splitlines()]


def test_passive_rma_time(mpi, tmp_path):
    out = tmp_path / "prof"
    run = mpi.run(2, [mpi.prog("rma_passive"), str(ITERATIONS)], out)
    assert run.stdout == "target polled more than once\n"
    for rank in (0, 1):
        records = rank_records(out, rank)
        # every thread: sampled time + MPI time = elapsed time (1 ns rounding per node)
        elapsed = {r[1]: int(r[3]) for r in records if r[0] == "thread"}
        held = {t: 0 for t in elapsed}
        nodes = {t: 0 for t in elapsed}
        for r in records:
            if r[0] == "node":
                held[r[1]] += int(r[8]) + int(r[10])
                nodes[r[1]] += 1
        for t in elapsed:
            assert abs(held[t] - elapsed[t]) <= nodes[t], (rank, t, held[t], elapsed[t])
        # MPI time, calls and bytes per operation: the tree's MPI nodes = the op lines (bytes
        # of nonblocking receives arrive at completion, on the op line only: not compared)
        ops: dict = {}
        for r in records:
            if r[0] == "op":
                calls, nbytes, ns, lines = ops.get(r[2], (0, 0, 0, 0))
                ops[r[2]] = (calls + int(r[3]), nbytes + int(r[4]), ns + int(r[5]), lines + 1)
        tree: dict = {}
        for r in records:
            if r[0] == "node" and r[4] == "mpi":
                calls, nbytes, ns, n = tree.get(r[6], (0, 0, 0, 0))
                tree[r[6]] = (calls + int(r[7]), nbytes + int(r[11]), ns + int(r[10]), n + 1)
        assert sorted(tree) == sorted(ops), rank
        for op, (calls, nbytes, ns, lines) in ops.items():
            t_calls, t_bytes, t_ns, n = tree[op]
            assert t_calls == calls, (rank, op)
            assert t_bytes == nbytes or op == "MPI_Irecv", (rank, op)
            assert abs(t_ns - ns) <= n + lines, (rank, op, t_ns, ns)
    prof = load_profile(out)
    for key, want in EXPECTED.items():
        op = prof.ops.get(key)
        assert op is not None, f"missing {key}"
        assert (op.calls, op.bytes) == want, f"{key}: {(op.calls, op.bytes)} != {want}"
    assert prof.ops[("W", "MPI_Test")].calls >= 2
    assert "the call tree holds" not in render(prof)
