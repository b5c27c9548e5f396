"""MPI_THREAD_MULTIPLE: four threads per rank communicating at once, exact counts."""
from pathscope.reader import load_profile


def test_thread_multiple_exact_counts(mpi, tmp_path):
    out = tmp_path / "prof"
    mpi.run(2, [mpi.prog("threads")], out, timeout=240)
    prof = load_profile(out)
    for t in range(4):
        name = f"W_d{t + 1}"
        for op in ("MPI_Send", "MPI_Recv"):
            s = prof.ops[(name, op)]
            assert (s.calls, s.bytes, s.nranks) == (1000, 1000 * (t + 1) * 8, 1), (name, op)
        c = prof.comms[name]
        assert (c.sent_msgs, c.recv_msgs) == (1000, 1000)
