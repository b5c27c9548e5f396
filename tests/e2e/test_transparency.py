"""The wrappers change nothing the application sees (both MPIs): Fortran 90 parameterised
datatypes from C (tests/programs/f90_types.c: envelope, contents, sizes, messages, the errors
of parameters no type has), and request accounting through the Fortran bindings
(tests/programs/fortran_requests.f90: freed requests, an inactive persistent request, F90
types), each compared with a run without pathscope: same output, same exit status."""
from pathscope.reader import load_profile

# fortran_requests.f90 on W: (calls, bytes) per operation
FORTRAN_EXPECTED = {
    "MPI_Irecv": (2, 0),          # A: both freed while outstanding
    "MPI_Ssend": (2, 40),
    "MPI_Isend": (1, 8),
    "MPI_Recv": (1, 8),
    "MPI_Recv_init": (1, 12),     # B: one completion of the one start, none of the waits before
    "MPI_Send_init": (1, 0),
    "MPI_Start": (2, 12),
    "MPI_Wait": (3, 0),
    "MPI_Test": (1, 0),
    "MPI_Waitall": (1, 0),
    "MPI_Request_free": (5, 0),
}


def test_f90_types_from_c(mpi, tmp_path):
    prog = [mpi.prog("f90_types")]
    plain = mpi.run(1, prog, mode="none", check=False)
    run = mpi.run(1, prog, tmp_path / "prof", check=False)
    assert (run.returncode, run.stdout) == (plain.returncode, plain.stdout)
    assert plain.returncode == 0
    lines = plain.stdout.splitlines()
    assert len(lines) == 19
    assert lines[2] == ("real 15 undefined: create success, envelope success 2 0 0 f90-real, "
                        "contents success 15 undefined, size 8, message success intact")
    assert lines[-1] == "envelope of MPI_DATATYPE_NULL: MPI_ERR_TYPE"


def test_fortran_requests(mpi, tmp_path):
    prog = [mpi.prog("fortran_requests")]
    plain = mpi.run(2, prog, mode="none")
    out = tmp_path / "prof"
    run = mpi.run(2, prog, out)
    assert run.stdout == plain.stdout
    assert run.stdout.splitlines()[:3] == ["B wait: empty status T", "B test: flag T",
                                           "B waitall: empty status T"]
    prof = load_profile(out)
    for op, want in FORTRAN_EXPECTED.items():
        stat = prof.ops[("W", op)]
        assert (stat.calls, stat.bytes) == want, op
    w = prof.comms["W"]
    assert (w.sent_msgs, w.sent_bytes, w.recv_msgs, w.recv_bytes) == (4, 60, 2, 20)
    assert (w.freed_sends, w.freed_recvs, w.freed_recv_capacity) == (1, 2, 400)
