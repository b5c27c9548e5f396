"""Request accounting counts exactly what completed (tests/programs/request_accounting.c, 2
ranks, both MPIs): receives released by MPI_Request_free while outstanding, waits and tests on
inactive persistent requests, persistent requests started many times, completion calls over
mixes of active, inactive and null requests, calls that fail.  The application sees the same
flags, indices, return codes and statuses with and without pathscope."""
from pathscope.reader import load_profile
from pathscope.report import render
from profile_files import rank_text

# (communicator, operation) -> (calls summed over ranks, bytes summed over ranks)
EXPECTED = {
    ("W", "MPI_Irecv"): (5, 24),            # A1 3 freed, A2 1 from PROC_NULL, A4 1 (24 B seen)
    ("W", "MPI_Isend"): (2, 8),             # A2 to PROC_NULL, A3 8 B
    ("W", "MPI_Ssend"): (4, 136),           # A1 3 x 40 B, C3 16 B
    ("W", "MPI_Send"): (1, 24),             # A4
    ("W", "MPI_Recv"): (2, 32),             # A3 8 B, C3 24 B
    ("W", "MPI_Recv_init"): (6, 252),       # B 1 never started; C1 4 x 40 B, C2 4 x 20 B + 12 B
    ("W", "MPI_Send_init"): (4, 0),
    ("W", "MPI_Start"): (12, 196),          # C1 8 (4 x 40 B sent), C2 2 (12 B), C3 2 (24 B)
    ("W", "MPI_Startall"): (4, 80),         # C2 2 x (12 + 28 B)
    ("W", "MPI_Wait"): (12, 0),             # B 1, C1 8 + 2 inactive, C2 1
    ("W", "MPI_Test"): (3, 0),              # B 1, C1 2 inactive
    ("W", "MPI_Waitall"): (5, 0),
    ("W", "MPI_Testall"): (1, 0),
    ("W", "MPI_Waitany"): (1, 0),
    ("W", "MPI_Testany"): (2, 0),
    ("W", "MPI_Waitsome"): (2, 0),
    ("W", "MPI_Testsome"): (1, 0),
    ("W", "MPI_Request_free"): (17, 0),
    ("W_d1", "MPI_Irecv"): (5, 24),         # E: only those that completed without error
    ("W_d1", "MPI_Ssend"): (4, 104),
    ("W_d1", "MPI_Send"): (1, 40),
    ("W_d1", "MPI_Waitall"): (2, 0),
    ("W_d1", "MPI_Wait"): (1, 0),
}
# MPI 4 (MPICH): section D, partitioned communication and a persistent broadcast
EXPECTED_MPI4 = {
    ("W", "MPI_Psend_init"): (1, 0),
    ("W", "MPI_Precv_init"): (1, 64),       # 2 x 32 B
    ("W", "MPI_Bcast_init"): (2, 0),
    ("W", "MPI_Start"): (22, 452),          # + 4 partitioned (2 x 32 B) + 6 broadcast (3 x 64 B)
    ("W", "MPI_Request_free"): (21, 0),     # + 2 partitioned, 2 broadcast
    ("W", "MPI_Isendrecv"): (2, 64),        # 2 x 16 B at the posts + 2 x 16 B received
    ("W", "MPI_Wait"): (26, 0),             # + 4 partitioned, 8 broadcast, 2 Isendrecv
    ("W_d1", "MPI_Wait"): (3, 0),           # MPICH leaves the second receives pending
}
# W: sent msgs, sent bytes, received msgs, received bytes, freed sends, freed receives,
# their posted capacity
COMM_W = (16, 444, 12, 308, 2, 4, 1280)
COMM_W_MPI4 = (20, 540, 16, 404, 2, 4, 1280)


def comm_tuple(c):
    return (c.sent_msgs, c.sent_bytes, c.recv_msgs, c.recv_bytes, c.freed_sends, c.freed_recvs,
            c.freed_recv_capacity)


def test_request_accounting(mpi, tmp_path):
    prog = [mpi.prog("request_accounting")]
    plain = mpi.run(2, prog, mode="none")
    out = tmp_path / "prof"
    run = mpi.run(2, prog, out)
    # what the application sees: identical
    assert run.stdout == plain.stdout
    assert "B wait: empty status\n" in run.stdout and "E wait: truncate, request null\n" in run.stdout
    assert "E error handler calls: 3\n" in run.stdout

    prof = load_profile(out)
    mpi4 = mpi.name == "mpich"
    expected = {**EXPECTED, **(EXPECTED_MPI4 if mpi4 else {})}
    for key, want in expected.items():
        op = prof.ops.get(key)
        assert op is not None, f"missing {key}"
        assert (op.calls, op.bytes) == want, f"{key}: {(op.calls, op.bytes)} != {want}"
    # A4: polled until complete, so at least one call; the receive it saw is counted exactly
    assert prof.ops[("W", "MPI_Request_get_status")].calls >= 1
    assert prof.ops[("W", "MPI_Irecv")].hist == {5: 1}
    # no receive of 0 bytes was invented by a wait on an inactive request (B, C1)
    assert prof.ops[("W", "MPI_Recv_init")].hist == {4: 3, 5: 2, 6: 4}
    assert comm_tuple(prof.comms["W"]) == (COMM_W_MPI4 if mpi4 else COMM_W)
    assert comm_tuple(prof.comms["W_d1"]) == (5, 144, 2, 24, 0, 0, 0)
    # the failed requests (E) are the program's, not problems of pathscope: no counter
    assert prof.comms["W_d1"].failed_requests == 3 and prof.comms["W"].failed_requests == 0
    for info in prof.ranks:
        assert all(v == 0 for v in info.counters.values()), info

    # the report accounts for the freed receives instead of claiming a mismatch on W
    consistency = render(prof).split("\nConsistency")[1].splitlines()
    sent, sbytes, msgs, rbytes, _, freed, capacity = COMM_W_MPI4 if mpi4 else COMM_W
    assert consistency[1:] == [
        "  MISMATCH comm W_d1: sent 5 msgs/144 B, received 2 msgs/24 B",
        f"  OK: comm W: sent {sent} msgs/{sbytes} B = received {msgs} msgs/{rbytes} B + {freed} "
        f"receives freed by MPI_Request_free before completing ({capacity} B posted), whose "
        f"{sbytes - rbytes} B arrived unseen",
        "  OK: the other 1 intracommunicator",   # (-; each rank's unused S.r is not listed)
        "  note: on W_d1, 3 requests of the program ended with an error (e.g. a truncated "
        "receive): no message is counted for them"]


    # the rank files carry the freed counts per rank; merged they give profile.tsv's
    lines = {r: [line.split("\t") for line in
                 rank_text(out, r).splitlines()
                 if line.startswith("comm\tW\t")][0] for r in (0, 1)}
    # ... freed_sends freed_recvs capacity failed_requests, folded memberships (2.8)
    assert lines[0][-6:] == ["2", "0", "0", "0", "0", "0"]
    assert lines[1][-6:] == ["0", "4", "1280", "0", "0", "0"]
    (out / "profile.tsv").unlink()
    merged = load_profile(out)
    assert merged.source == "ranks"
    assert comm_tuple(merged.comms["W"]) == comm_tuple(prof.comms["W"])
