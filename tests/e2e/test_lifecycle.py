"""How runs start and end (tests/programs/lifecycle.c): every rank's data survives finalize
orderings, MPI_Abort, crashes and signals from the launcher, and the report says which
ranks did not complete."""
import os
import signal
import subprocess
import time

import pytest

from conftest import MPI_ENV, ROOT
from pathscope.reader import load_profile


def rank_lines(out, rank, key):
    text = (out / "ranks" / f"rank-{rank:06d}.tsv").read_text()
    return [l.split("\t")[1:] for l in text.splitlines() if l.split("\t")[0] == key]


def statuses(out):
    return [rank_lines(out, r, "status")[0][0] for r in range(4)]


def check_traffic(prof, complete=True):
    """Every mode first does Bcast(4 ints, root 0) and Barrier on W.  When a rank dies right
    after the barrier, others may be killed before their own barrier call returned."""
    assert (prof.ops[("W", "MPI_Bcast")].calls, prof.ops[("W", "MPI_Bcast")].bytes) == (4, 48)
    assert prof.ops[("W", "MPI_Barrier")].calls >= (4 if complete else 1)


@pytest.mark.parametrize("mode", ["normal", "init_thread", "atexit"])
def test_complete_runs(mpi, tmp_path, mode):
    out = tmp_path / "prof"
    mpi.run(4, [mpi.prog("lifecycle"), mode], out)
    prof = load_profile(out)
    assert prof.source == "profile"
    assert statuses(out) == ["complete"] * 4
    assert not prof.missing_ranks and not prof.incomplete_ranks
    check_traffic(prof)
    if mode == "atexit":  # the Allreduce made from the atexit handler is recorded too
        assert prof.ops[("W", "MPI_Allreduce")].calls == 4
    if mode == "init_thread":
        assert rank_lines(out, 0, "thread_multiple")[0][0] == "1"
    if mode == "normal":  # ranks finish 0.45 s apart: wall times differ accordingly
        walls = sorted(r.wall_ns for r in prof.ranks)
        assert walls[-1] - walls[0] > 0.3e9


def test_exit_without_finalize(mpi, tmp_path):
    out = tmp_path / "prof"
    mpi.run(4, [mpi.prog("lifecycle"), "nofinalize"], out, check=False)
    assert not (out / "profile.tsv").exists()
    # Open MPI's launcher terminates the others once one rank exits without MPI_Finalize
    assert set(statuses(out)) <= {"exit-without-finalize", "signal 15"}
    assert "exit-without-finalize" in statuses(out)
    prof = load_profile(out)
    assert prof.source == "ranks"
    assert sorted(r for r, _ in prof.incomplete_ranks) == [0, 1, 2, 3]
    check_traffic(prof, complete=False)


@pytest.mark.parametrize("mode,culprit,status,line", [
    ("abort", 1, "abort 7", "rank 1: called MPI_Abort (error code 7)"),
    ("segv", 2, "signal 11", "rank 2: killed by signal 11 (SIGSEGV)")])
def test_abort_and_crash_keep_every_rank(mpi, tmp_path, mode, culprit, status, line):
    out = tmp_path / "prof"
    p = mpi.run(4, [mpi.prog("lifecycle"), mode], out, check=False)
    assert p.returncode != 0
    st = statuses(out)
    assert st[culprit] == status
    assert all(s == "signal 15" for r, s in enumerate(st) if r != culprit), st
    prof = load_profile(out)
    check_traffic(prof, complete=False)
    assert dict(prof.incomplete_ranks)[culprit] == status
    report = subprocess.run([str(ROOT / "bin" / "pathscope"), "report", str(out)],
                            capture_output=True, text=True)
    assert report.returncode == 0
    assert line in report.stdout


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_launcher(mpi, tmp_path, sig):
    out = tmp_path / "prof"
    env = dict(os.environ, **MPI_ENV[mpi.name])
    cmd = mpi.launcher + ["-np", "4", str(ROOT / "bin" / "pathscope"), "run", "-o", str(out), "--",
                          str(mpi.prog("lifecycle")), "hang"]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "lifecycle: hanging"
        time.sleep(0.5)
        p.send_signal(sig)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    st = statuses(out)
    # Open MPI's mpirun turns SIGINT into SIGTERM for the ranks; MPICH forwards SIGINT
    want = {f"signal {int(sig)}", "signal 15"}
    assert set(st) <= want, st
    prof = load_profile(out)
    check_traffic(prof, complete=False)
    assert len(prof.incomplete_ranks) == 4
