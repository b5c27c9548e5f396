"""`pathscope top` against real running jobs (issue 13): tests/programs/top_phases.c under
`pathscope run`, read through the live segments the runtime publishes (runtime/live); the
terminal test drives the Textual screen in tmux and adds a probe through it (the resolver and
the probe source)."""
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import MPI_ENV, ROOT
from test_paths import PY_ENV, cli

PROGRAM = "top_phases"
D = f"/dev/shm/pathscope-{os.geteuid()}"
WAIT_S = 60


class LiveJob:
    """top_phases running on np ranks under `pathscope run`, until stop()."""

    def __init__(self, mpi, tmp_path, np=2, max_seconds=120):
        self.out = tmp_path / "prof"
        self.stop_file = tmp_path / "stop"
        env = dict(PY_ENV, **MPI_ENV[mpi.name])
        cmd = list(mpi.launcher) + ["-np", str(np), str(ROOT / "bin" / "pathscope"), "run",
                                    "-o", str(self.out), "--", str(mpi.prog(PROGRAM)),
                                    str(self.stop_file), str(max_seconds)]
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.np = np

    def snapshot(self, check=True):
        p = cli("top", self.out, "--once", "--format", "json", check=check)
        return json.loads(p.stdout) if p.returncode == 0 else None

    def wait_running(self):
        """The first snapshot with every rank published and a hot path."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the job ended early: {self.proc.communicate()}")
            doc = self.snapshot(check=False) if self.out.exists() else None
            if doc and len(doc["ranks"]) == self.np and doc["hot"] and \
                    all(p["publishes"] > 1 for p in doc["processes"]):
                return doc
            time.sleep(0.5)
        raise AssertionError(f"no complete live snapshot of {self.out} within {WAIT_S} s")

    def stop(self, check=True):
        self.stop_file.touch()
        try:
            out, err = self.proc.communicate(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        if check:
            assert self.proc.returncode == 0, err
        return out


@pytest.fixture
def job(openmpi, tmp_path):
    j = LiveJob(openmpi, tmp_path)
    yield j
    if j.proc.poll() is None:
        j.stop(check=False)


def test_once_json_shows_the_running_job(job):
    doc = job.wait_running()
    outdir = str(job.out.resolve())
    assert doc["schema"] == "pathscope-top/1" and doc["outdir"] == outdir
    assert doc["ranks"] == [0, 1]
    procs = sorted(doc["processes"], key=lambda p: p["rank"])
    assert [(p["rank"], p["size"], p["state"], p["stale"]) for p in procs] == \
        [(0, 2, "running", None), (1, 2, "running", None)]
    assert all(p["program"].endswith(PROGRAM) and p["interval_ms"] == 1000 for p in procs)
    assert all(os.path.exists(f"/proc/{p['pid']}") for p in procs)
    top = doc["hot"][0]
    assert top["frames"][0]["name"] == "top_hot_spin"
    assert top["sample_ns"]["sum"] == top["sample_ns"]["min"] + top["sample_ns"]["max"]
    allreduce = [r for r in doc["mpi"] if (r["comm"], r["op"]) == ("W", "MPI_Allreduce")]
    assert len(allreduce) == 1 and allreduce[0]["calls"]["min"] >= 1
    assert {allreduce[0]["calls"]["min_rank"], allreduce[0]["calls"]["max_rank"]} <= {0, 1}
    text = cli("top", job.out, "--once").stdout
    assert text.startswith(f"pathscope top: job {outdir}, 2 rank(s) aggregated, "
                           f"2 process(es)\n")
    assert "top_hot_spin" in text
    job.stop()
    # every ending removes the files: the job is no longer there
    p = cli("top", job.out, "--once", check=False)
    assert p.returncode == 2
    assert p.stderr == (f"pathscope: no process of job {outdir} on this node (no live segment "
                        f"in {D} names it)\n")
    left = [e for e in os.listdir(D) if any(e.startswith(f"{q['pid']}-") for q in procs)]
    assert left == []


def _tmux(socket, *args):
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True,
                          timeout=30)


def _wait_screen(socket, pattern, timeout=WAIT_S):
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux(socket, "capture-pane", "-p", "-t", "top").stdout
        if re.search(pattern, screen):
            return screen
        time.sleep(0.5)
    raise AssertionError(f"'{pattern}' not on the screen within {timeout} s:\n{screen}")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux missing: scripts/setup.sh")
def test_terminal_ui_shows_the_hot_function_and_adds_a_probe(job):
    doc = job.wait_running()
    pid = min(doc["processes"], key=lambda p: p["rank"])["pid"]
    socket = f"pathscope-test-{os.getpid()}"
    command = f"{ROOT / 'bin' / 'pathscope'} top {pid}"
    started = _tmux(socket, "new-session", "-d", "-s", "top", "-x", "200", "-y", "50", command)
    assert started.returncode == 0, started.stderr
    try:
        _wait_screen(socket, r"top_hot_spin")
        _tmux(socket, "send-keys", "-t", "top", "a")
        time.sleep(1)
        _tmux(socket, "send-keys", "-t", "top", "-l", "top_probe_target")
        _tmux(socket, "send-keys", "-t", "top", "Enter")
        _wait_screen(socket, r"added probe \d+: top_probe_target")
        _tmux(socket, "send-keys", "-t", "top", "3")
        screen = _wait_screen(socket, r"top_probe_target\s+active\s+[1-9]")
        assert "[3] PROBES" in screen
        _tmux(socket, "send-keys", "-t", "top", "r")
        _wait_screen(socket, r"removed probe \d+: top_probe_target")
        _tmux(socket, "send-keys", "-t", "top", "q")
        deadline = time.monotonic() + 10
        while _tmux(socket, "has-session", "-t", "top").returncode == 0:
            assert time.monotonic() < deadline, "q did not end pathscope top"
            time.sleep(0.2)
    finally:
        _tmux(socket, "kill-server")


def test_clean_removes_the_files_of_a_killed_process(openmpi, tmp_path):
    job = LiveJob(openmpi, tmp_path, np=1)
    doc = job.wait_running()
    victim = doc["processes"][0]
    name = f"{victim['pid']}-{victim['start_time']}"
    assert sorted(e for e in os.listdir(D) if e.startswith(name + ".")) == \
        [f"{name}.live", f"{name}.sock"]
    os.kill(victim["pid"], 9)
    job.stop(check=False)
    after = job.snapshot()
    assert after["processes"][0]["stale"] == "process gone" and after["ranks"] == []
    p = cli("probe", "--job", job.out, "--list", check=False)
    assert (p.returncode, p.stderr) == (2, f"pathscope: job {job.out.resolve()}: its 1 "
                                           f"process(es) on this node have ended (pathscope "
                                           f"top --clean removes their files)\n")
    removed = cli("top", "--clean").stdout.splitlines()
    assert f"removed {D}/{name}.live" in removed and f"removed {D}/{name}.sock" in removed
    assert not [e for e in os.listdir(D) if e.startswith(name + ".")]
    p = cli("top", job.out, "--once", check=False)
    assert p.returncode == 2 and "no process of job" in p.stderr
