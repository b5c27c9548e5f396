"""pathscope diff and pathscope.hatchet on real runs: tests/programs/paths_mpi.c on 2 ranks
(Open MPI), BASE as it is and NEW with compute_b running 4x its iterations (SLOW=300).

compute_b's sampled time grows by about 3x its BASE time on each rank, far more than any
other path moves between two runs on this (shared) machine: it is the first row, the only
path above --fail-above 50, and --fail-above 1000 passes.  The MPI paths are exact: the same
calls and bytes in both runs."""
import csv
import io
import json
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, _mpi

PATHSCOPE = ROOT / "bin" / "pathscope"
SCALE = "10"                    # compute_b: 1e8 iterations in BASE, 4e8 in NEW


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    openmpi = _mpi("openmpi")
    d = tmp_path_factory.mktemp("diff")
    base, new = d / "base", d / "new"
    openmpi.run(2, [openmpi.prog("paths_mpi"), SCALE, "0"], base,
                env={"PATHSCOPE_PER_RANK": "all"})
    openmpi.run(2, [openmpi.prog("paths_mpi"), SCALE, "300"], new,
                env={"PATHSCOPE_PER_RANK": "all"})
    return base, new


def diff(*args):
    return subprocess.run([str(PATHSCOPE), "diff", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_the_slowed_function_comes_first(runs):
    base, new = runs
    p = diff(base, new, "--csv")
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    first = rows[0]
    assert first["path"].endswith(" > main > compute_b") and (first["comm"], first["op"]) == (
        "", "")
    assert int(first["delta_time_ns"]) > 0
    assert 150.0 < float(first["time_pct"]) < 600.0          # 4x the iterations: +300%
    # the MPI operations made the same calls with the same bytes
    mpi = {(r["path"].rsplit(" > ", 1)[-1], r["comm"], r["op"]): r for r in rows if r["op"]}
    for caller, calls in (("exchange_x", 60), ("exchange_y", 140)):
        r = mpi[(caller, "W", "MPI_Allreduce")]
        assert (int(r["base_calls"]), int(r["new_calls"]), int(r["delta_calls"])) == (
            calls, calls, 0)
        assert int(r["base_bytes"]) == int(r["new_bytes"]) == calls * 64    # 8 doubles a call
    # backwards: compute_b got faster by the same amount
    back = json.loads(diff(new, base, "--json").stdout)
    assert back["rows"][0]["path"][-1] == "compute_b"
    assert back["rows"][0]["delta_time_ns"] == -int(first["delta_time_ns"])


def test_fail_above_gates(runs):
    base, new = runs
    p = diff(base, new, "--fail-above", "50")
    assert p.returncode == 4
    named = [line for line in p.stderr.splitlines() if line.startswith("pathscope: regression: ")]
    assert any(" > main > compute_b: time " in line for line in named), p.stderr
    assert p.stderr.splitlines()[-1] == (f"pathscope: {len(named)} regression(s) above 50% "
                                         f"(exit status 4)")
    first_row = p.stdout.splitlines()[4:6]              # (the path wraps onto a second line)
    assert "+" in first_row[0] and "compute_b" in first_row[1], p.stdout
    p = diff(base, new, "--fail-above", "1000", "--floor", "20")
    assert (p.returncode, p.stderr) == (0, "")
    p = diff(new, base, "--fail-above", "50", "--floor", "20")
    assert (p.returncode, p.stderr) == (0, "")


def test_reduced_profiles(runs, tmp_path):
    """tree.tsv alone (the run's per-rank files left out): the same rows."""
    base, new = runs
    reduced = tmp_path / "new"
    shutil.copytree(new, reduced, ignore=shutil.ignore_patterns("ranks", "ranks.tsv"))
    full = list(csv.DictReader(io.StringIO(diff(base, new, "--csv").stdout)))
    p = diff(base, reduced, "--csv")
    assert p.returncode == 0, p.stderr
    assert list(csv.DictReader(io.StringIO(p.stdout))) == full
    same = list(csv.DictReader(io.StringIO(diff(new, reduced, "--csv").stdout)))
    assert all(r["delta_time_ns"] == r["delta_bytes"] == r["delta_calls"] == "0" for r in same)


def test_hatchet_on_the_runs(runs):
    """tests/python/hatchet_checks.py's real-run test in .venv-hatchet."""
    sys.path.insert(0, str(ROOT / "tests" / "python"))
    from test_hatchet import run_checks
    out = run_checks("-k", "real_run", env={"PATHSCOPE_HATCHET_RUNS": ":".join(map(str, runs))})
    assert "1 passed" in out
