"""Programs of the MPI-4 sessions model alone (issue 16): no MPI_Init, no MPI_COMM_WORLD.

tests/programs/sessions_only.c on 4 ranks of MPICH (Open MPI 4.1 has no sessions): one
session, two communicators from its mpi://WORLD group (10 and 4 allreduces of one double), a
split of the first into even and odd ranks (3 broadcasts each).  The run starts at
MPI_Session_init and ends at its MPI_Session_finalize, with the same files as an MPI_Init
program; communicators are named under their session (S0)."""
import subprocess

from conftest import ROOT
from profile_files import rank_text

NP = 4


def lines(path, kind):
    return [line.split("\t")[1:] for line in path.read_text().splitlines()
            if line.split("\t")[0] == kind]


def test_sessions_only_program(mpich, tmp_path):
    prof = tmp_path / "prof"
    p = mpich.run(NP, [mpich.prog("sessions_only")], prof)
    assert sorted(p.stdout.split("\n")[:-1]) == [f"sessions rank={r} size={NP}" for r in range(NP)]
    assert p.stderr.strip().splitlines()[-1] == (
        f"pathscope: profile written to {prof} (view: pathscope report {prof})")
    comms = {f[0]: f for f in lines(prof / "profile.tsv", "comm")}
    # name, size, remote size, parent, creator, freed, members
    assert sorted(comms) == ["-", "S0_f0.0", "S0_f0.0_s2.0", "S0_f0.0_s2.1", "S0_f1.0"]
    assert comms["S0_f0.0"][1:7] == ["4", "0", "-", "MPI_Comm_create_from_group", "1", "0-3"]
    assert comms["S0_f1.0"][1:7] == ["4", "0", "-", "MPI_Comm_create_from_group", "1", "0-3"]
    assert comms["S0_f0.0_s2.0"][1:7] == ["2", "0", "S0_f0.0", "MPI_Comm_split", "1", "0,2"]
    assert comms["S0_f0.0_s2.1"][1:7] == ["2", "0", "S0_f0.0", "MPI_Comm_split", "1", "1,3"]
    ops = {(f[0], f[1]): f for f in lines(prof / "profile.tsv", "op")}
    # calls, bytes, ..., nranks (field 9)
    assert ops[("S0_f0.0", "MPI_Allreduce")][2:4] == [str(10 * NP), str(8 * 10 * NP)]
    assert ops[("S0_f1.0", "MPI_Allreduce")][2:4] == [str(4 * NP), str(8 * 4 * NP)]
    for half in ("S0_f0.0_s2.0", "S0_f0.0_s2.1"):
        assert ops[(half, "MPI_Bcast")][2] == "6"
    assert ops[("-", "MPI_Session_init")][2] == str(NP)
    assert ops[("-", "MPI_Comm_create_from_group")][2] == str(2 * NP)
    assert ops[("-", "MPI_Group_from_session_pset")][2] == str(NP)
    assert ("W", "MPI_Allreduce") not in ops and not any(c.startswith("S.") for c in comms)
    for rank in range(NP):
        text = rank_text(prof, rank)
        assert f"\nrank\t{rank}\n" in text and f"\nsize\t{NP}\n" in text
        assert "\nstatus\tcomplete\n" in text
    # the call paths reach the allreduces through allreduces() and the report reads it all
    r = subprocess.run([str(ROOT / "bin" / "pathscope"), "export", str(prof), "--format",
                        "folded", "--metric", "visits"], capture_output=True, text=True,
                       timeout=120, check=True)
    assert "_start;__libc_start_main;__libc_start_call_main;main;allreduces;MPI_Allreduce " \
           f"{14 * NP}" in r.stdout.splitlines()
    r = subprocess.run([str(ROOT / "bin" / "pathscope"), "report", str(prof)],
                       capture_output=True, text=True, timeout=120, check=True)
    assert "never called MPI_Init" not in r.stdout and "S0_f0.0_s2.0" in r.stdout
