"""pathscope diff and pathscope.hatchet on real runs: tests/programs/paths_mpi.c on 2 ranks
(Open MPI), BASE as it is and NEW with compute_b running 4x its iterations (SLOW=300).

compute_b's sampled time grows by about 3x its BASE time on each rank: it is the first row,
named by --fail-above 50 and not by --fail-above 1000.  The time of a path that waits in MPI
moves with how the shared machine schedules the two ranks (0.005 s in one run, 0.37 s in the
next), so which of those --fail-above names is checked against the rule worked out from the
--json rows, not assumed.  The MPI paths' calls and bytes are exact: the same in both runs."""
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


def judged(base, new, fail_above, floor):
    """The gate's rule worked out from the --json rows: the paths it must name (by their last
    frame, op and communicator) -- every path holding at least floor % of BASE's total time in
    BASE or NEW whose time grew by more than fail_above %."""
    doc = json.loads(diff(base, new, "--json").stdout)
    least = floor / 100.0 * doc["total"]["base_time_ns"]
    named = []
    for r in doc["rows"]:
        if max(r["base_time_ns"], r["new_time_ns"]) < least or r["delta_time_ns"] <= 0:
            continue
        if r["time_pct"] is None or r["time_pct"] > fail_above:
            named.append(" > ".join(r["path"]) + (f" > {r['op']}" if r["op"] else "")
                         + (f" on {r['comm']}" if r["op"] and r["comm"] else "") + ":")
    total = doc["total"]
    grew = total["delta_time_ns"] > 0 and total["time_pct"] > fail_above
    return named, grew


def gate(base, new, fail_above, floor):
    """Runs --fail-above; checks its exit status and that it named exactly what the rule names.
    Returns the named lines."""
    p = diff(base, new, "--fail-above", str(fail_above), "--floor", str(floor))
    named = [line for line in p.stderr.splitlines() if line.startswith("pathscope: regression: ")]
    want, grew = judged(base, new, fail_above, floor)
    got = [line.removeprefix("pathscope: regression: ") for line in named]
    if grew:
        assert got[0].startswith("total time "), p.stderr
        got = got[1:]
    assert [g[:g.index(": time ") + 1] for g in got] == want, p.stderr
    if named:
        assert p.returncode == 4, p.stderr
        assert p.stderr.splitlines()[-1] == (f"pathscope: {len(named)} regression(s) above "
                                             f"{fail_above:g}% (exit status 4)")
    else:
        assert (p.returncode, p.stderr) == (0, "")
    return named


def test_fail_above_gates(runs):
    """compute_b (+300%) is named at 50% and not at 1,000%; a path that only waits in MPI (its
    time moves with how the shared machine schedules the two ranks) is named exactly when the
    rule says so; backwards, compute_b shrank and is never named."""
    base, new = runs
    named = gate(base, new, 50, 1)
    assert any(" > main > compute_b: time " in line for line in named), named
    p = diff(base, new, "--fail-above", "50")
    first_row = p.stdout.splitlines()[4:6]              # (the path wraps onto a second line)
    assert "+" in first_row[0] and "compute_b" in first_row[1], p.stdout
    assert not any("compute_b" in line for line in gate(base, new, 1000, 20))
    assert not any("compute_b" in line for line in gate(new, base, 50, 20))


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
