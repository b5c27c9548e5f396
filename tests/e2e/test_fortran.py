"""Fortran truth: exact calls and bytes per (communicator, operation) for the Fortran programs
tests/programs/fortran_counts.f90 (use mpi), fortran_mpifh.f90 (include 'mpif.h') and
fortran_f08.f90 (use mpi_f08) on 4 ranks, both MPIs.  The three programs make the same calls,
so they share one table.

Open MPI's Fortran bindings call the C PMPI_ functions directly (only the Fortran wrappers,
runtime/mpi/gen_fortran.py and fortran_support.c, can see the calls); MPICH's call the C MPI_
functions (the Fortran wrapper records, the C wrapper it reaches must not count again), except
its mpi_f08 procedures without a choice buffer, which call PMPI_.  Exact counts catch both
misses and double counting.
"""
import shutil
import subprocess

import pytest

from pathscope.reader import load_profile

PROGRAMS = ["fortran_counts", "fortran_mpifh", "fortran_f08"]

# (communicator, operation) -> (calls summed over ranks, bytes summed over ranks); the section
# letters are those of the comment at the top of fortran_counts.f90.
EXPECTED = {
    # A 20 x (400 or 200) with MPI_STATUS_IGNORE, + 2 x 24 with a status.  The receives are
    # posted for 400 B: 6048 proves the bytes come from the status even for STATUS_IGNORE.
    ("W", "MPI_Send"): (22, 6048),
    ("W", "MPI_Recv"): (22, 6048),
    # B 12 x 64 (posted for 128), 4 x 4, 8 x 8; receives counted at completion
    ("W", "MPI_Isend"): (24, 848),
    ("W", "MPI_Irecv"): (24, 848),
    ("W", "MPI_Waitall"): (16, 0),           # B 4 + C 12 (receives first: always on W)
    # C persistent: 3 rounds x 4 ranks x 16 B
    ("W", "MPI_Send_init"): (4, 0),
    ("W", "MPI_Recv_init"): (4, 192),
    ("W", "MPI_Startall"): (12, 192),
    ("W", "MPI_Request_free"): (8, 0),
    # D collectives: Allreduce 4 x 80 (in place), Allgather 4 x 20 (in place, sendcount 0),
    # Bcast 3 x 100, one Barrier (the other one is inside MPI_PCONTROL(0) .. (1))
    ("W", "MPI_Allreduce"): (4, 320),
    ("W", "MPI_Allgather"): (4, 80),
    ("W", "MPI_Bcast"): (4, 300),
    ("W", "MPI_Barrier"): (4, 0),
    ("W", "MPI_Comm_split"): (4, 0),
    ("W", "MPI_Comm_dup"): (4, 0),
    ("W", "MPI_Cart_create"): (4, 0),
    ("W", "MPI_Comm_rank"): (4, 0),
    ("W", "MPI_Comm_size"): (4, 0),
    # E one in-place Allreduce of 4 B on each new communicator, Sendrecv 6 INTEGER both ways
    ("W_s1.0", "MPI_Allreduce"): (2, 8),
    ("W_s1.2", "MPI_Allreduce"): (2, 8),
    ("W_d2", "MPI_Allreduce"): (4, 16),
    ("W_a3", "MPI_Allreduce"): (4, 16),
    ("W_a3", "MPI_Sendrecv"): (4, 192),
    ("W_s1.0", "MPI_Comm_free"): (2, 0),
    ("W_s1.2", "MPI_Comm_free"): (2, 0),
    ("W_d2", "MPI_Comm_free"): (4, 0),
    ("W_a3", "MPI_Comm_free"): (4, 0),
    ("-", "MPI_Pcontrol"): (4, 0),           # MPI_PCONTROL(0) itself is not recorded
    ("-", "MPI_Wtime"): (8, 0),
    ("-", "MPI_Get_count"): (2, 0),
    # B: a send that completed at once may share its request handle with other sends (Open
    # MPI's ompi_request_empty, MPICH's builtin requests): still every wait finds its request
    ("W", "MPI_Wait"): (8, 0),
    ("W", "MPI_Waitany"): (16, 0),
}

COMMS = {
    # name: (size, parent, creator, members, topology, sent_msgs, sent_bytes)
    "W": (4, "-", "-", "0-3", "-", 58, 7088),
    "W_s1.0": (2, "W", "MPI_Comm_split", "0-1", "-", 0, 0),
    "W_s1.2": (2, "W", "MPI_Comm_split", "2-3", "-", 0, 0),
    "W_d2": (4, "W", "MPI_Comm_dup", "0-3", "-", 0, 0),
    "W_a3": (4, "W", "MPI_Cart_create", "0-3", "cart ndims=2 dims=2x2 periods=1,0 reorder=0",
             4, 96),
}


def check(prof):
    for key, (calls, nbytes) in EXPECTED.items():
        assert key in prof.ops, f"missing {key}"
        op = prof.ops[key]
        assert (op.calls, op.bytes) == (calls, nbytes), f"{key}: {(op.calls, op.bytes)}"
    # message sizes from the statuses: 24 B (bin 5), 200 B (bin 8), 400 B (bin 9)
    assert prof.ops[("W", "MPI_Recv")].hist == {5: 2, 8: 10, 9: 10}
    assert prof.ops[("W", "MPI_Irecv")].hist == {3: 4, 4: 8, 7: 12}
    names = {n for n in prof.comms if n != "-" and not n.startswith("S.")}
    assert names == set(COMMS)
    for name, (size, parent, creator, members, topo, msgs, nbytes) in COMMS.items():
        c = prof.comms[name]
        assert (c.size, c.remote_size, c.parent, c.creator, c.members, c.topology) == \
            (size, 0, parent, creator, members, topo), name
        assert (c.sent_msgs, c.sent_bytes, c.recv_msgs, c.recv_bytes) == \
            (msgs, nbytes, msgs, nbytes), name
        assert c.freed == (0 if name == "W" else 1), name
    # every call was made on a communicator pathscope saw being created, every completed
    # request was found (Fortran handles converted before the call, 1-based indices)
    for info in prof.ranks:
        assert info.status == "complete"
        assert info.counters.get("unknown_comms") == 0, info
        assert info.counters.get("unknown_requests") == 0, info
    # the per-rank totals over all communicators: nothing was counted twice elsewhere
    assert prof.ops[("*", "MPI_Send")].calls == 22
    assert prof.ops[("*", "MPI_Allreduce")].calls == 16
    assert not prof.missing_ranks and not prof.incomplete_ranks


@pytest.mark.parametrize("program", PROGRAMS)
def test_fortran_counts(mpi, tmp_path, program):
    if not mpi.prog(program).exists():
        pytest.skip(f"{program} not built (no Fortran compiler?)")
    out = tmp_path / "prof"
    mpi.run(4, [mpi.prog(program)], out)
    prof = load_profile(out)
    assert prof.source == "profile"
    check(prof)


def test_fortran_env_mode(mpi, tmp_path):
    """LD_PRELOAD without the CLI: the same numbers."""
    if not mpi.prog("fortran_counts").exists():
        pytest.skip("fortran_counts not built")
    out = tmp_path / "prof"
    mpi.run(4, [mpi.prog("fortran_counts")], out, mode="env")
    check(load_profile(out))


def test_fortran_manglings_exported(mpi):
    """Every Fortran wrapper is exported under the four manglings (and mpi_f08's name)."""
    nm = shutil.which("nm")
    if not nm:
        pytest.skip("nm not available")
    text = subprocess.run([nm, "-D", "--defined-only", str(mpi.lib)], capture_output=True,
                          text=True, check=True).stdout
    syms = {line.split()[-1] for line in text.splitlines() if line.strip()}
    for base in ("send", "recv", "allreduce", "comm_split", "cart_create", "waitall", "init",
                 "finalize", "pcontrol", "wtime"):
        for sym in (f"mpi_{base}_", f"mpi_{base}__", f"mpi_{base}", f"MPI_{base.upper()}"):
            assert sym in syms, sym
    for base in ("comm_split", "waitall", "init", "finalize"):
        assert f"mpi_{base}_f08_" in syms
    # the library's own profiling entry points are never defined by pathscope
    assert not any(s.startswith(("pmpi_", "PMPI_")) for s in syms)


def test_fortran_abort(mpi, tmp_path):
    """MPI_ABORT from Fortran: the aborting rank's file is written first, with its data."""
    if not mpi.prog("fortran_abort").exists():
        pytest.skip("fortran_abort not built")
    out = tmp_path / "prof"
    p = mpi.run(2, [mpi.prog("fortran_abort")], out, check=False, timeout=60)
    assert p.returncode == 7  # the application's error code, as without pathscope
    prof = load_profile(out)
    assert prof.source == "ranks"
    status = {r.rank: r.status for r in prof.ranks}
    assert status[0] == "abort 7"
    # rank 1 was asked to write its file, unless it was still inside MPI_Init (rank 0 does not
    # wait for it to receive): then the launcher's SIGTERM got it written
    assert status[1] in ("ended-by-rank 0", "signal 15"), status
    assert (prof.ops[("W", "MPI_Send")].calls, prof.ops[("W", "MPI_Send")].bytes) == (1, 40)
