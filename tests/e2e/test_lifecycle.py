"""How runs start and end (tests/programs/lifecycle.c): every rank's data survives finalize
orderings, MPI_Abort, crashes and signals from the launcher, and the report says which
ranks did not complete."""
import signal
import subprocess
import time

import pytest

from conftest import ROOT
from pathscope.reader import load_profile
from profile_files import rank_text


def rank_lines(out, rank, key):
    text = rank_text(out, rank)
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
    if mode == "normal":  # after a barrier rank r sleeps r x 150 ms: MPI_Finalize entries
        # (start + wall time) are 0.45 s apart.  (Wall times alone also hold the ranks'
        # different load times, which an oversubscribed start spreads by 0.1 s and more.)
        ends = [int(rank_lines(out, r, "start_unix_ns")[0][0]) +
                int(rank_lines(out, r, "wall_ns")[0][0]) for r in range(4)]
        assert ends == sorted(ends) and 0.4e9 < ends[3] - ends[0] < 2e9


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


# What each launcher returns when a rank calls MPI_Abort(MPI_COMM_WORLD, 7) or dies of
# SIGSEGV, measured without pathscope (Open MPI 4.1 reports 128 + the signal, MPICH's hydra
# the signal number); pathscope must not change it.
EXIT_STATUS = {("openmpi", "abort"): 7, ("mpich", "abort"): 7,
               ("openmpi", "segv"): 139, ("mpich", "segv"): 11}


@pytest.mark.parametrize("mode,culprit,status,line", [
    ("abort", 1, "abort 7", "rank 1: called MPI_Abort (error code 7)"),
    ("segv", 2, "signal 11", "rank 2: killed by signal 11 (SIGSEGV)")])
def test_abort_and_crash_keep_every_rank(mpi, tmp_path, mode, culprit, status, line):
    """The culprit asks the other ranks of its node to write their files with a signal that
    does not stop them (status ended-by-rank R), waits for them, then ends the job as it
    would without pathscope: the launcher's exit status is the same with and without it."""
    bare = mpi.run(4, [mpi.prog("lifecycle"), mode], mode="none", check=False)
    assert bare.returncode == EXIT_STATUS[(mpi.name, mode)], bare.stderr
    out = tmp_path / "prof"
    p = mpi.run(4, [mpi.prog("lifecycle"), mode], out, check=False)
    assert p.returncode == bare.returncode, p.stderr
    st = statuses(out)
    assert st[culprit] == status
    assert all(s == f"ended-by-rank {culprit}" for r, s in enumerate(st) if r != culprit), st
    prof = load_profile(out)
    check_traffic(prof, complete=False)
    assert dict(prof.incomplete_ranks)[culprit] == status
    report = subprocess.run([str(ROOT / "bin" / "pathscope"), "report", str(out)],
                            capture_output=True, text=True)
    assert report.returncode == 0
    assert line in report.stdout

    # --no-signals: no fatal-signal handlers (a crashing rank writes nothing), but MPI_Abort
    # is a call, not a signal: it still gets every rank's file, and the same exit status.
    # The crashed rank ends without a file: the others, watching it (output/peers.c), write
    # theirs -- all of them under Open MPI (mpirun stops them a second later), any number
    # under MPICH, whose hydra SIGKILLs them within milliseconds
    quiet = tmp_path / "nosig"
    p = mpi.run(4, [mpi.prog("lifecycle"), mode], quiet, check=False,
                pathscope_args=["--no-signals"])
    assert p.returncode == bare.returncode, p.stderr
    if mode == "abort":
        assert statuses(quiet) == st
    else:
        written = {int(f.name[5:11]): rank_lines(quiet, int(f.name[5:11]), "status")[0][0]
                   for f in (quiet / "ranks").glob("rank-*.tsv")}
        others = {r: f"ended-by-rank {culprit}" for r in range(4) if r != culprit}
        if mpi.name == "openmpi":
            assert written == others
        else:
            assert written.items() <= others.items()


def test_abort_keeps_application_request_signal_handler(mpi, tmp_path):
    """An application that handles pathscope's request signal (SIGRTMAX-3) itself still
    gets its own deliveries of it (only a peer's request, from a peer's pid with the job's
    cookie, is pathscope's); the requests still work; an application that ignores it keeps
    it ignored; a stray one without a handler still kills the process exactly as without
    pathscope."""
    argv = [mpi.prog("lifecycle"), "abort_apphandler"]
    bare = mpi.run(3, argv, mode="none", check=False)
    out = tmp_path / "prof"
    p = mpi.run(3, argv, out, check=False)
    assert bare.returncode == p.returncode == 7, p.stderr
    for run in (bare, p):
        assert sorted(l for l in run.stdout.splitlines() if l.startswith("lifecycle:")) == [
            f"lifecycle: rank {r} handler saw 1 signal(s), value 42" for r in range(3)]
    assert [rank_lines(out, r, "status")[0][0] for r in range(3)] == [
        "ended-by-rank 1", "abort 7", "ended-by-rank 1"]

    # ignored by the application: stays ignored, and those ranks are not asked
    argv = [mpi.prog("lifecycle"), "ignored_rtsig"]
    bare = mpi.run(3, argv, mode="none", check=False)
    p = mpi.run(3, argv, tmp_path / "ignored", check=False)
    assert bare.returncode == p.returncode == 7, p.stderr
    for run in (bare, p):
        assert sorted(l for l in run.stdout.splitlines() if l.startswith("lifecycle:")) == [
            f"lifecycle: rank {r} ignored it" for r in range(3)]
    assert rank_lines(tmp_path / "ignored", 1, "status") == [["abort 7"]]
    for r in (0, 2):  # stopped by the launcher: SIGTERM (Open MPI) or SIGKILL (MPICH: no file)
        f = tmp_path / "ignored" / "ranks" / f"rank-{r:06d}.tsv"
        assert not f.exists() or rank_lines(tmp_path / "ignored", r, "status") == [["signal 15"]]

    argv = [mpi.prog("lifecycle"), "stray_rtsig"]
    bare = mpi.run(2, argv, mode="none", check=False)
    p = mpi.run(2, argv, tmp_path / "stray", check=False)
    # 128 + SIGRTMAX-3 from Open MPI, the signal number from MPICH
    assert bare.returncode == {"openmpi": 128 + signal.SIGRTMAX - 3,
                               "mpich": signal.SIGRTMAX - 3}[mpi.name], bare.stderr
    assert p.returncode == bare.returncode, p.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_launcher(mpi, tmp_path, sig):
    out = tmp_path / "prof"
    p = mpi.popen(4, [mpi.prog("lifecycle"), "hang"], out)
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
