"""pathscope under a real Slurm (Debian's slurm-wlm, a private one-node cluster started by the
`slurm` fixture: tests/e2e/slurm_cluster.py), both MPIs: `srun` with the CLI and with the
environment form, `sbatch` running `srun` and running the MPI's own `mpirun`, an MPI_Abort,
jobs cancelled with `scancel` (SIGTERM, then SIGKILL after KillWait), `pathscope probe` and
`pathscope top` reaching a running job through `srun --overlap`, and jobs killed by Slurm at
their time limit.

srun's MPI plugin per MPI (`srun --mpi=list` here: pmix, pmi2, none, cray_shasta): Open MPI 4.1
takes its ranks from PMIx (`--mpi=pmix`); MPICH 4.0 speaks PMI-1/PMI-2 (`--mpi=pmi2`).

Slurm's smallest time limit is one minute and slurmctld looks for jobs past it every 30 s, so
a job with --time=1 ends 60 to 90 s after it starts.  The time-limit jobs are therefore
submitted by the first test of this module and checked by its last, the others running
meanwhile (the whole module takes about that long)."""
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import ROOT, _mpi
from pathscope.reader import load_profile
from slurm_cluster import KILL_WAIT, SlurmCluster, SlurmError, missing_programs
import test_p2p
from profile_files import has_rank_text, rank_text

PLUGIN = {"openmpi": "pmix", "mpich": "pmi2"}
MPIRUN = {"openmpi": ["mpirun.openmpi", "--allow-run-as-root"], "mpich": ["mpirun.mpich"]}
PATHSCOPE = str(ROOT / "bin" / "pathscope")
# 4 ranks on this machine's 2 cores: --overcommit lets a job have more tasks than CPUs
SRUN = ["srun", "-n", "4", "--overcommit"]
SBATCH = ["-n", "4", "--overcommit"]
MPIS = ["openmpi", "mpich"]


@pytest.fixture(scope="session")
def slurm():
    if os.geteuid() != 0:
        pytest.skip("the Slurm tests run slurmctld and slurmd, which need root")
    missing = missing_programs()
    if missing:
        pytest.skip(f"Slurm is not installed (missing {', '.join(missing)}): "
                    "make test-deps installs slurmctld, slurmd, slurm-client and munge")
    cluster = SlurmCluster(Path(tempfile.mkdtemp(prefix="pathscope-slurm-")))
    try:
        cluster.start()
    except SlurmError as e:
        cluster.stop()
        pytest.fail(f"the test's Slurm cluster did not start: {e}")
    yield cluster
    killed = cluster.stop()
    if killed:
        pytest.fail("processes of the test's Slurm cluster were still running after its jobs "
                    "and daemons ended (killed): " + "; ".join(killed))
    shutil.rmtree(cluster.base, ignore_errors=True)


def batch_script(path: Path, *commands) -> Path:
    path.write_text("#!/bin/bash\nset -e\n" + "".join(
        " ".join(str(a) for a in c) + "\n" for c in commands))
    return path


def pathscope_run(out, *argv):
    return [PATHSCOPE, "run", "-o", out, "--", *argv]


def wait_for_line(path: Path, line: str, job_id, slurm, timeout=60):
    """Waits until the job's output file has line (the job still running)."""
    end = time.monotonic() + timeout
    while not (path.exists() and line in path.read_text().splitlines()):
        state = slurm.job(job_id)["JobState"]
        assert state in ("PENDING", "RUNNING"), (state, path.read_text() if path.exists() else "")
        assert time.monotonic() < end, f"no '{line}' from job {job_id} after {timeout} s"
        time.sleep(0.1)


def statuses(out, nranks=4):
    """Each rank file's status, None for a rank without a file."""
    found = []
    for r in range(nranks):
        lines = rank_text(out, r).splitlines() if has_rank_text(out, r) else []
        found.append(next((l.split("\t")[1] for l in lines if l.startswith("status\t")), None))
    return found


def report(out) -> str:
    p = subprocess.run([PATHSCOPE, "report", str(out)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


# ---- p2p_counts (tests/programs/p2p_counts.c) per rank ----------------------------------------

def p2p_calls_per_rank():
    """(comm, op) -> calls for each of the 4 ranks, from the program's sections (A to L);
    MPI_Test is left out: rank 0 polls until its Isend completes."""
    split = ["W_s1.0", "W_s1.0", "W_s1.2", "W_s1.2"]
    truth = []
    for r in range(4):
        calls = {("-", "MPI_Init"): 1, ("-", "MPI_Pcontrol"): 1,
                 ("W", "MPI_Comm_rank"): 1, ("W", "MPI_Comm_size"): 1,
                 ("W", "MPI_Send"): 4, ("W", "MPI_Recv"): 4,           # A 3, D 1
                 ("W", "MPI_Irecv"): 5, ("W", "MPI_Isend"): 5,         # B
                 ("W", "MPI_Waitall"): 8,                               # B 5, E 3
                 ("W", "MPI_Sendrecv"): 2,                              # C
                 ("W", "MPI_Send_init"): 1, ("W", "MPI_Recv_init"): 1,
                 ("W", "MPI_Startall"): 3, ("W", "MPI_Request_free"): 2,  # E
                 ("W", "MPI_Comm_split"): 1,                            # J
                 (split[r], "MPI_Comm_rank"): 1, (split[r], "MPI_Send"): 1,
                 (split[r], "MPI_Recv"): 1, (split[r], "MPI_Comm_free"): 1,
                 ("W_d2", "MPI_Barrier"): 1, ("W_d2", "MPI_Comm_free"): 1}  # K
        truth.append(calls)
    extra = {0: {("-", "MPI_Get_count"): 3, ("W", "MPI_Probe"): 3, ("W", "MPI_Recv"): 3,  # F
                 ("W", "MPI_Isend"): 1,                                                 # H
                 ("W", "MPI_Iprobe"): 1000},                                            # L
             1: {("W", "MPI_Ssend"): 1, ("W", "MPI_Irecv"): 1, ("W", "MPI_Waitany"): 1},
             2: {("W", "MPI_Ssend"): 1, ("W", "MPI_Mprobe"): 1, ("W", "MPI_Mrecv"): 1,
                 ("W", "MPI_Isend"): 1, ("W", "MPI_Request_free"): 1},
             3: {("W", "MPI_Ssend"): 1, ("W", "MPI_Send"): 1, ("W", "MPI_Recv"): 1}}
    for r, more in extra.items():
        for key, n in more.items():
            truth[r][key] = truth[r].get(key, 0) + n
    return truth


def rank_calls(out, rank):
    calls = {}
    for line in rank_text(out, rank).splitlines():
        f = line.split("\t")
        if f[0] == "op" and f[2] != "MPI_Test":
            calls[(f[1], f[2])] = int(f[3])
    return calls


def check_p2p(out):
    """The whole profile of p2p_counts on 4 ranks: test_p2p's totals, and every rank's calls."""
    prof = load_profile(out)
    assert prof.source == "profile" and prof.nranks == 4
    test_p2p.check(prof)
    test_p2p.assert_no_problems(out)
    truth = p2p_calls_per_rank()
    for r in range(4):
        assert rank_calls(out, r) == truth[r], f"rank {r}"
    assert statuses(out) == ["complete"] * 4
    assert "did not complete" not in report(out)


# ---- the tests ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def time_limit_jobs(slurm, tmp_path_factory):
    """One job per MPI with --time=1 whose 4 ranks hang after their known traffic
    (lifecycle hang: Bcast of 4 ints from rank 0, Barrier): {mpi: (job id, outdir, log)}."""
    base = tmp_path_factory.mktemp("time-limit")
    jobs = {}
    for name in MPIS:
        mpi = _mpi(name)
        out, log = base / f"{name}-prof", base / f"{name}.out"
        script = batch_script(base / f"{name}.sh", ["srun", f"--mpi={PLUGIN[name]}"] +
                              pathscope_run(out, mpi.prog("lifecycle"), "hang"))
        jobs[name] = (slurm.sbatch(script, SBATCH + ["--time=1", "-o", log]), out, log)
    return jobs


def test_time_limit_jobs_start(slurm, time_limit_jobs):
    for job_id, out, log in time_limit_jobs.values():
        wait_for_line(log, "lifecycle: hanging", job_id, slurm)
        assert slurm.job(job_id)["TimeLimit"] == "00:01:00"


@pytest.mark.parametrize("name", MPIS)
def test_srun_cli(slurm, name, tmp_path):
    mpi = _mpi(name)
    out = tmp_path / "prof"
    p = slurm.run(SRUN + [f"--mpi={PLUGIN[name]}"] + pathscope_run(out, mpi.prog("p2p_counts")))
    assert p.returncode == 0, p.stderr
    assert [l for l in p.stderr.splitlines() if l.startswith("pathscope")] == [
        f"pathscope: profile written to {out} (view: pathscope report {out})"]
    check_p2p(out)
    # one srun is one job step: its ranks share the run id (runtime/core/runid.c)
    assert load_profile(out).run_id


def test_srun_wrong_plugin_is_said(slurm, tmp_path):
    """MPICH under --mpi=none: srun starts two processes, MPI makes each a world of one; each
    says so (the rank files of the two collide: the profile alone would look like a complete
    one-rank job)."""
    mpi = _mpi("mpich")
    out = tmp_path / "prof"
    p = slurm.run(["srun", "-n", "2", "--overcommit", "--mpi=none"] +
                  pathscope_run(out, mpi.prog("lifecycle"), "normal"))
    said = [l for l in p.stderr.splitlines() if "MPI_COMM_WORLD has" in l]
    assert said and set(said) == {
        "pathscope: rank 0: the launcher started 2 processes but MPI_COMM_WORLD has 1: the MPI "
        "library did not join them into one job (under srun: a --mpi plugin this MPI does not "
        "use, see the user guide, Under Slurm), so each profiles as a job of its own and their "
        "rank files collide"}, p.stderr


@pytest.mark.parametrize("name", MPIS)
def test_srun_environment_form(slurm, name, tmp_path):
    mpi = _mpi(name)
    out = tmp_path / "prof"
    p = slurm.run(SRUN + [f"--mpi={PLUGIN[name]}", mpi.prog("p2p_counts")],
                  env={"LD_PRELOAD": str(mpi.lib), "PATHSCOPE_OUTPUT": str(out)})
    assert p.returncode == 0, p.stderr
    check_p2p(out)


@pytest.mark.parametrize("name", MPIS)
@pytest.mark.parametrize("launcher", ["srun", "mpirun"])
def test_sbatch(slurm, name, launcher, tmp_path):
    """A batch job whose script starts the ranks with srun, or with the MPI's mpirun (which
    takes the number of ranks from the allocation), then reports.  With srun, a second srun
    into the same directory is another run (another job step): refused, the first kept."""
    mpi = _mpi(name)
    out, log = tmp_path / "prof", tmp_path / "job.out"
    start = ["srun", f"--mpi={PLUGIN[name]}"] if launcher == "srun" else MPIRUN[name]
    run = start + pathscope_run(out, mpi.prog("p2p_counts"))
    again = [run + ["||", "echo", "second srun: $?"]] if launcher == "srun" else []
    script = batch_script(tmp_path / "job.sh", run, *again,
                          [PATHSCOPE, "report", out, "|", "head", "-1"])
    job = slurm.wait_job(slurm.sbatch(script, SBATCH + ["-o", log]), timeout=120)
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), log.read_text()
    lines = log.read_text().splitlines()
    assert lines.count(f"pathscope: profile written to {out} (view: pathscope report {out})") == 1
    assert lines[-1] == f"pathscope report: {out}"
    if launcher == "srun":
        assert lines[-2] == "second srun: 2"
        # (format 2.10: the rank texts in ranks.tsv, or where MPI-IO failed, 4 rank files)
        texts = "ranks.tsv" if (out / "ranks.tsv").exists() else "4 rank files"
        assert lines.count(f"pathscope: output directory '{out}' holds another run's profile "
                           f"(profile.tsv, tree.tsv, {texts}): choose another directory, or add "
                           "--force (PATHSCOPE_FORCE=on) to delete those files first") == 4
    check_p2p(out)


@pytest.mark.parametrize("name", MPIS)
def test_srun_abort(slurm, name, tmp_path):
    """Rank 1 calls MPI_Abort(7): the other ranks write their files before Slurm kills the
    step, and srun ends exactly as without pathscope (Open MPI: 7; MPICH: its ranks are
    SIGKILLed, 137)."""
    mpi = _mpi(name)
    argv = [mpi.prog("lifecycle"), "abort"]
    srun = SRUN + [f"--mpi={PLUGIN[name]}"]
    bare = slurm.run(srun + argv)
    out = tmp_path / "prof"
    p = slurm.run(srun + pathscope_run(out, *argv))
    assert bare.returncode == p.returncode == {"openmpi": 7, "mpich": 137}[name], p.stderr
    assert statuses(out) == ["ended-by-rank 1", "abort 7", "ended-by-rank 1", "ended-by-rank 1"]
    assert ("    ranks 0,2-3: stopped when rank 1 ended the job (its data up to then was written)\n"
            "    rank 1: called MPI_Abort (error code 7)\n") in report(out)


def check_hang_traffic(prof, ranks):
    """lifecycle's known traffic before it hangs, from the ranks that wrote a file: one Bcast
    of 16 B from rank 0 (counted as received: 16 B on every other rank) and one Barrier."""
    n = len(ranks)
    bcast = prof.ops[("W", "MPI_Bcast")]
    assert (bcast.calls, bcast.bytes, bcast.nranks) == (n, 16 * (n - (0 in ranks)), n)
    assert prof.ops[("W", "MPI_Barrier")].calls == n


@pytest.mark.parametrize("name", MPIS)
def test_probe_and_top_through_srun_overlap_then_scancel(slurm, name, tmp_path):
    """While a batch job runs: `pathscope probe --job` and `pathscope top` started inside its
    allocation (srun --overlap --jobid, one task on its node, as the user guide shows) reach
    its 4 ranks.  Then scancel: Slurm sends SIGTERM (SIGKILL KillWait later), every rank writes
    its file on SIGTERM and dies of it."""
    mpi = _mpi(name)
    out, log = tmp_path / "prof", tmp_path / "job.out"
    script = batch_script(tmp_path / "job.sh", ["srun", f"--mpi={PLUGIN[name]}"] +
                          pathscope_run(out, mpi.prog("lifecycle"), "hang"))
    job_id = slurm.sbatch(script, SBATCH + ["-o", log])
    wait_for_line(log, "lifecycle: hanging", job_id, slurm)
    inside = ["srun", "--overlap", f"--jobid={job_id}", "-N", "1", "--ntasks-per-node=1"]
    # the ranks publish their live view every second: the one after the barrier is awaited
    want = {("W", "MPI_Bcast"): (4, 48), ("W", "MPI_Barrier"): (4, 0)}
    deadline = time.monotonic() + 20
    while True:
        p = slurm.run(inside + [PATHSCOPE, "top", out, "--once", "--format", "json"])
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        seen = {(row["comm"], row["op"]): (row["calls"]["sum"], row["bytes"]["sum"])
                for row in doc["mpi"]}
        if (doc["ranks"], {k: seen.get(k) for k in want}) == ([0, 1, 2, 3], want):
            break
        assert time.monotonic() < deadline, p.stdout
        time.sleep(0.3)
    p = slurm.run(inside + [PATHSCOPE, "probe", "--job", out, "--list"])
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert [l.split(" (pid")[0] for l in lines[0::2]] == [f"rank {r}" for r in range(4)], p.stdout
    assert lines[1::2] == ["  no probes"] * 4, p.stdout

    cancelled = time.monotonic()
    assert slurm.run(["scancel", job_id]).returncode == 0
    job = slurm.wait_job(job_id, timeout=60)
    assert job["JobState"] == "CANCELLED"
    assert time.monotonic() - cancelled < KILL_WAIT + 30
    assert statuses(out) == ["signal 15"] * 4
    prof = load_profile(out)
    assert prof.source == "ranks" and [r for r, _ in prof.incomplete_ranks] == [0, 1, 2, 3]
    check_hang_traffic(prof, range(4))
    assert "    ranks 0-3: killed by signal 15 (SIGTERM)\n" in report(out)


@pytest.mark.parametrize("name", MPIS)
def test_scancel_sigterm_survived_then_sigkill(slurm, name, tmp_path):
    """A program that outlives SIGTERM (lifecycle hang_term: ranks 0-2 handle it and go on,
    rank 3 ignores it) is SIGKILLed KillWait seconds later.  Ranks 0-2 wrote their files on
    SIGTERM (pathscope's handler runs before the program's): they are kept; rank 3 replaced
    pathscope's handler, so SIGKILL leaves it without a file, and the reader and the report
    say so."""
    mpi = _mpi(name)
    out, log = tmp_path / "prof", tmp_path / "job.out"
    script = batch_script(tmp_path / "job.sh", ["srun", f"--mpi={PLUGIN[name]}"] +
                          pathscope_run(out, mpi.prog("lifecycle"), "hang_term"))
    job_id = slurm.sbatch(script, SBATCH + ["-o", log])
    wait_for_line(log, "lifecycle: hanging", job_id, slurm)
    cancelled = time.monotonic()
    assert slurm.run(["scancel", job_id]).returncode == 0
    job = slurm.wait_job(job_id, timeout=60)
    took = time.monotonic() - cancelled
    assert job["JobState"] == "CANCELLED"
    # the SIGKILL ended it, and within bounds (Slurm's own bookkeeping, on a loaded machine)
    assert KILL_WAIT < took < KILL_WAIT + 30, took
    assert statuses(out) == ["signal 15"] * 3 + [None]
    prof = load_profile(out)
    assert prof.missing_ranks == [3]
    assert [r for r, _ in prof.incomplete_ranks] == [0, 1, 2]
    check_hang_traffic(prof, range(3))
    text = report(out)
    assert "    ranks 0-2: killed by signal 15 (SIGTERM)\n" in text
    assert ("    rank 3: missing: no rank file (never initialised MPI under pathscope, or "
            "killed by SIGKILL)\n") in text


@pytest.mark.parametrize("name", MPIS)
def test_time_limit(slurm, time_limit_jobs, name):
    """Slurm ends the job at its time limit (1 minute): SIGTERM to every rank, each writes its
    file; the reader and the report say the ranks were killed by SIGTERM."""
    job_id, out, log = time_limit_jobs[name]
    job = slurm.wait_job(job_id, timeout=150)
    assert job["JobState"] == "TIMEOUT"
    text = log.read_text()
    assert f"*** JOB {job_id} ON {slurm.node} CANCELLED AT " in text and "DUE TO TIME LIMIT" in text
    assert statuses(out) == ["signal 15"] * 4
    prof = load_profile(out)
    assert prof.source == "ranks" and not prof.missing_ranks
    assert [r for r, _ in prof.incomplete_ranks] == [0, 1, 2, 3]
    check_hang_traffic(prof, range(4))
    assert "    ranks 0-3: killed by signal 15 (SIGTERM)\n" in report(out)
