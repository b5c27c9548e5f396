"""Probes added while a real application runs (issue 13): LAMMPS (Debian's `lmp`, Open MPI,
4 ranks on 2 cores), paused between two `run` commands by a shell command that waits on a
FIFO; `pathscope probe --job DIR --add` probes the pair force computation and the neighbour
list build of every rank during the pause.  Truth: the counts LAMMPS implies for the second
run (bench/probe.py's measurement with uprobes: per rank and `run`, PairLJCut::compute is
called steps + 1 times and Neighbor::build "Neighbor list builds" + 1 times: once more in the
run's setup)."""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_paths import PATHSCOPE, PY_ENV, rank_records

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import apps  # noqa: E402

FIRST, SECOND = 30, 60
SPECS = "LAMMPS_NS::PairLJCut::compute,LAMMPS_NS::Neighbor::build"


def wait_for(predicate, what, timeout=120):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def probe_counts(out, rank):
    """{probe name: calls} of one rank file"""
    names, calls = {}, {}
    for r in rank_records(out, rank):
        if r[0] == "probe":
            names[r[1]] = r[9]
        elif r[0] == "node" and r[4] == "probe":
            calls[r[6]] = calls.get(r[6], 0) + int(r[7])
    return {names[i]: c for i, c in calls.items()}


def test_lammps_probes_added_while_running(openmpi, tmp_path):
    if shutil.which("lmp") is None or not apps.MELT.is_file():
        pytest.skip("lmp or its examples not installed (Debian packages lammps, lammps-examples)")
    text = apps.lammps_input(FIRST).replace(
        f"run\t\t{FIRST}", f"run\t\t{FIRST}\nshell\t\ttouch paused\nshell\t\tcat gate.fifo\n"
                           f"run\t\t{SECOND}")
    (tmp_path / "in.melt").write_text(text)
    os.mkfifo(tmp_path / "gate.fifo")
    out = tmp_path / "prof"
    env = dict(PY_ENV, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    job = subprocess.Popen(openmpi.launcher + ["-np", "4", str(ROOT / "bin" / "pathscope"), "run",
                                               "-o", str(out), "--", "lmp", "-in", "in.melt",
                                               "-log", "log.lammps", "-screen", "none"],
                           cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: (tmp_path / "paused").exists() or job.poll() is not None, "the pause")
        assert job.poll() is None, job.communicate()[0]
        p = subprocess.run(PATHSCOPE + ["probe", "--job", str(out), "--add", SPECS],
                           capture_output=True, text=True, env=PY_ENV, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        assert p.stdout.count("added probe") == 8, p.stdout
        with open(tmp_path / "gate.fifo", "w") as gate:
            gate.write("go\n")
        output, _ = job.communicate(timeout=300)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode == 0, output
    builds = [int(n) for n in re.findall(r"Neighbor list builds = (\d+)",
                                         (tmp_path / "log.lammps").read_text())]
    assert len(builds) == 2, builds
    for rank in range(4):
        counts = probe_counts(out, rank)
        assert counts == {"LAMMPS_NS::PairLJCut::compute(int, int)": SECOND + 1,
                          "LAMMPS_NS::Neighbor::build(int)": builds[1] + 1}, (rank, counts)
