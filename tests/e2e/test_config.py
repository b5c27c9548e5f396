"""Configuration is validated before the application computes anything: one clear line, exit
status 2, and the program never runs."""
import subprocess

from conftest import ROOT
from profile_files import check_rank_layout

PS = str(ROOT / "bin" / "pathscope")


def run_env(mpi, env, tmp_path):
    """The environment form, one process, no launcher: the runtime validates at load time."""
    import os
    e = dict(os.environ, LD_PRELOAD=str(mpi.lib), **env)
    return subprocess.run([str(mpi.prog("lifecycle")), "normal"], env=e, capture_output=True,
                          text=True, cwd=tmp_path, timeout=60)


def test_unknown_variable(mpi, tmp_path):
    p = run_env(mpi, {"PATHSCOPE_OUTPT": "x"}, tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip() == ("pathscope: unknown option PATHSCOPE_OUTPT (known: PATHSCOPE_OUTPUT, "
                                "PATHSCOPE_FORCE, PATHSCOPE_MPI, PATHSCOPE_SIGNALS, PATHSCOPE_POLL_TIMING, PATHSCOPE_COMM_KEEP, PATHSCOPE_PER_RANK, PATHSCOPE_PATHS, "
                                "PATHSCOPE_SAMPLE_RATE, PATHSCOPE_SAMPLE_CLOCK, PATHSCOPE_SAMPLE_TIMER, PATHSCOPE_UNWIND, "
                                "PATHSCOPE_HEAP, PATHSCOPE_TRAVERSAL, PATHSCOPE_TRAVERSAL_CHECK, PATHSCOPE_PYTHON_FRAMES, "
                                "PATHSCOPE_KERNEL, PATHSCOPE_KERNEL_PERIOD, PATHSCOPE_PROBE, PATHSCOPE_PROBE_METRICS, PATHSCOPE_QUIET, PATHSCOPE_PID, "
                                "PATHSCOPE_COMMAND, PATHSCOPE_CONTROL, PATHSCOPE_LIVE)")


def test_bad_value(mpi, tmp_path):
    p = run_env(mpi, {"PATHSCOPE_MPI": "yes"}, tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip() == "pathscope: invalid value 'yes' for PATHSCOPE_MPI (accepted: on|off)"


def test_unwritable_output(mpi, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    p = run_env(mpi, {"PATHSCOPE_OUTPUT": str(blocker / "sub")}, tmp_path)
    assert p.returncode == 2
    assert p.stderr.startswith(f"pathscope: cannot write to output directory '{blocker}/sub': ")
    assert p.stdout == ""


def test_cli_rejects_before_launch(mpi, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    p = mpi.run(2, [mpi.prog("lifecycle")], blocker / "sub", check=False)
    assert p.returncode != 0
    assert f"pathscope: cannot write to output directory '{blocker}/sub'" in p.stderr


def test_default_directory_agreed_by_all_ranks(mpi, tmp_path):
    """Without -o, rank 0 picks pathscope-<program>-<timestamp> and every rank writes there."""
    import os
    e = dict(os.environ)
    cmd = mpi.launcher + ["-np", "3", PS, "run", "--", str(mpi.prog("lifecycle")), "normal"]
    p = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env=dict(e, OMPI_MCA_rmaps_base_oversubscribe="1"))
    assert p.returncode == 0, p.stderr
    dirs = [d for d in tmp_path.iterdir() if d.name.startswith("pathscope-lifecycle-")]
    assert len(dirs) == 1
    check_rank_layout(dirs[0], 3)
    assert (dirs[0] / "profile.tsv").exists()
