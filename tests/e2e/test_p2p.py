"""Point-to-point truth: exact calls and bytes per (communicator, operation) for
tests/programs/p2p_counts.c on 4 ranks, both MPIs, both launch forms."""
import pytest

from pathscope.reader import load_profile
from profile_files import rank_text

# (communicator, operation) -> (calls summed over ranks, bytes summed over ranks)
EXPECTED = {
    ("W", "MPI_Send"): (17, 4833),          # A 12x400 B, D 4 to PROC_NULL, G 33 B
    ("W", "MPI_Recv"): (20, 4864),          # A 12x400, D 4 from PROC_NULL, F 10+20+30, I 4
    ("W", "MPI_Isend"): (22, 1132),         # B 20x56, H 8, I 4
    ("W", "MPI_Irecv"): (21, 1128),         # B 20x56, H 8 (bytes counted at completion)
    ("W", "MPI_Waitall"): (32, 0),          # B 20, E 12
    ("W", "MPI_Sendrecv"): (8, 192),        # C 8 x (12 out + 12 in)
    ("W", "MPI_Send_init"): (4, 0),
    ("W", "MPI_Recv_init"): (4, 192),       # 12 completions x 16 B
    ("W", "MPI_Startall"): (12, 192),       # 12 starts x 16 B sent
    ("W", "MPI_Request_free"): (9, 0),      # E 8, I 1
    ("W", "MPI_Ssend"): (3, 60),
    ("W", "MPI_Probe"): (3, 0),
    ("W", "MPI_Mprobe"): (1, 0),
    ("W", "MPI_Mrecv"): (1, 33),
    ("W", "MPI_Waitany"): (1, 0),
    ("W", "MPI_Comm_split"): (4, 0),
    ("W_s1.0", "MPI_Send"): (2, 8),
    ("W_s1.0", "MPI_Recv"): (2, 8),
    ("W_s1.2", "MPI_Send"): (2, 8),
    ("W_s1.2", "MPI_Recv"): (2, 8),
    ("W_d2", "MPI_Barrier"): (4, 0),        # created while paused, still named
    ("W_d2", "MPI_Comm_free"): (4, 0),
    ("W", "MPI_Iprobe"): (1000, 0),         # L: polls are counted exactly, timed 1 in 16
}


def check(prof):
    for key, (calls, nbytes) in EXPECTED.items():
        assert key in prof.ops, f"missing {key}"
        op = prof.ops[key]
        assert (op.calls, op.bytes) == (calls, nbytes), f"{key}: {(op.calls, op.bytes)}"
    # paused section: no Comm_dup or extra Sendrecv recorded on W
    assert ("W", "MPI_Comm_dup") not in prof.ops
    assert prof.ops[("W", "MPI_Test")].calls >= 1
    # sampled poll timing: some of the 1000 polls were timed (all 1000 missed: p = 1e-28)
    assert prof.ops[("W", "MPI_Iprobe")].time_sum_ns > 0
    assert prof.ops[("W", "MPI_Send")].hist == {9: 12, 0: 4, 6: 1}
    w = prof.comms["W"]
    assert (w.sent_msgs, w.sent_bytes, w.recv_msgs, w.recv_bytes) == (58, 6313, 58, 6313)
    for name in ("W_s1.0", "W_s1.2"):
        c = prof.comms[name]
        assert (c.size, c.freed, c.sent_msgs, c.sent_bytes) == (2, 1, 2, 8)
        assert c.parent == "W" and c.creator == "MPI_Comm_split"
    assert prof.comms["W_s1.0"].members == "0-1"
    assert prof.comms["W_s1.2"].members == "2-3"
    assert prof.comms["W_d2"].members == "0-3"
    # per-rank totals over all communicators (the '*' rows) match the sums
    assert prof.ops[("*", "MPI_Send")].calls == 17 + 2 + 2
    assert not prof.missing_ranks and not prof.incomplete_ranks


def assert_no_problems(out):
    for r in range(4):
        for line in rank_text(out, r).splitlines():
            if line.startswith("counter_"):
                assert line.endswith("\t0"), (r, line)


@pytest.mark.parametrize("mode", ["cli", "env"])
def test_p2p_counts(mpi, tmp_path, mode):
    out = tmp_path / "prof"
    mpi.run(4, [mpi.prog("p2p_counts")], out, mode=mode)
    prof = load_profile(out)
    assert prof.source == "profile"
    check(prof)
    assert_no_problems(out)


def test_p2p_counts_from_rank_files(mpi, tmp_path):
    """The rank files alone give the same totals (the reader merges them)."""
    out = tmp_path / "prof"
    mpi.run(4, [mpi.prog("p2p_counts")], out)
    (out / "profile.tsv").unlink()
    prof = load_profile(out)
    assert prof.source == "ranks"
    check(prof)


def test_link_time_mode(mpi, tmp_path):
    """-lpathscope at link time, no LD_PRELOAD: same numbers."""
    out = tmp_path / "prof"
    mpi.run(4, [mpi.prog("p2p_counts_linked")], mode="none", env={"PATHSCOPE_OUTPUT": str(out)})
    check(load_profile(out))
