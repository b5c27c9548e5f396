"""`pathscope probe` (issue 13): its error paths with their exact messages, and adding,
listing and removing a probe in a running job (tests/programs/top_phases.c) through the
runtime's control socket, the resolver (`pathscope-symbolize --resolve`) and the probe
source."""
import json
import os
import re
import subprocess
import time

import pytest

from conftest import ROOT
from pathscope.modules import mapped_modules
from pathscope.probes import resolver_input
from test_paths import PY_ENV, cli
from test_top import D, LiveJob

PROBED = "top_probe_target"


def _error(*args):
    p = cli(*args, check=False)
    assert p.stdout == ""
    return p.returncode, p.stderr


def test_no_such_process():
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert _error("probe", gone.pid, "--list") == (2, f"pathscope: no process {gone.pid}\n")


def test_process_not_started_under_pathscope():
    plain = subprocess.Popen(["sleep", "60"])
    try:
        with open(f"/proc/{plain.pid}/stat") as f:
            start = f.read().rsplit(")", 1)[1].split()[19]
        assert _error("probe", plain.pid, "--add", PROBED) == (
            2, f"pathscope: process {plain.pid} was not started under pathscope (no control "
               f"socket {D}/{plain.pid}-{start}.sock)\n")
    finally:
        plain.kill()
        plain.wait()


def test_another_users_process_is_refused(attacker):
    mine = subprocess.Popen(["sleep", "60"])
    try:
        env = dict(PY_ENV, PYTHONPATH=str(ROOT / "python"))
        p = attacker.run(["/usr/bin/python3", "-m", "pathscope", "probe", mine.pid, "--list"],
                         env=env, cwd="/")
        assert (p.returncode, p.stdout) == (2, "")
        assert p.stderr == (f"pathscope: process {mine.pid} belongs to uid {os.geteuid()}: "
                            f"permission denied (only its owner or root may control it)\n")
    finally:
        mine.kill()
        mine.wait()


def test_job_without_processes(tmp_path):
    assert _error("probe", "--job", tmp_path, "--list") == (
        2, f"pathscope: no process of job {tmp_path.resolve()} on this node (no live segment "
           f"in {D} names it)\n")
    assert _error("probe", "--job", tmp_path / "none", "--list") == (
        2, f"pathscope: no such directory {tmp_path / 'none'}\n")


def test_usage_errors():
    p = cli("probe", "--list", check=False)
    assert (p.returncode, p.stderr) == (2, "pathscope probe: name one process (PID) or one "
                                           "job (--job DIR) (try 'pathscope probe --help')\n")
    p = cli("probe", "1", check=False)
    assert (p.returncode, p.stderr) == (2, "pathscope probe: one of --add SPEC, --remove "
                                           "SPEC|ID, --list (try 'pathscope probe --help')\n")
    for args, message in [(["--format", "json"], "--format applies to --once"),
                          (["--clean", "--once"], "--clean takes no other argument"),
                          (["x", "--job", "y"], "name DIR, PID or --job DIR, not two of them")]:
        p = cli("top", *args, check=False)
        assert (p.returncode, p.stderr) == (2, f"pathscope top: {message} (try 'pathscope "
                                               f"top --help')\n")


@pytest.fixture
def job(openmpi, tmp_path):
    j = LiveJob(openmpi, tmp_path)
    j.wait_running()
    yield j
    if j.proc.poll() is None:
        j.stop(check=False)


def _rank0(job):
    return min(job.snapshot()["processes"], key=lambda p: p["rank"])["pid"]


def test_spec_matching_nothing_is_one_error_and_contacts_no_process(job):
    pid = _rank0(job)
    spec = "no_such_function_anywhere"
    modules = mapped_modules(pid)
    resolver = ROOT / "build" / "openmpi" / "pathscope-symbolize"
    said = subprocess.run([resolver, "--resolve"], capture_output=True, text=True, check=True,
                          input="".join(line + "\n" for line in resolver_input(modules, [spec])))
    reasons = [line.split("\t")[2] for line in said.stdout.splitlines()
               if line.startswith("nomatch\t")]
    assert len(reasons) == 1 and spec in reasons[0]
    assert _error("probe", pid, "--add", spec) == (2, f"pathscope: {reasons[0]}\n")
    assert _error("probe", "--job", job.out, "--add", spec) == (2, f"pathscope: {reasons[0]}\n")
    assert cli("probe", pid, "--list").stdout == "no probes\n"


def test_add_list_remove_in_one_process_and_in_the_job(job):
    pid = _rank0(job)
    added = cli("probe", pid, "--add", PROBED).stdout
    m = re.fullmatch(rf"added probe (\d+): {PROBED} \[top_phases\] \S*top_phases\.c:\d+\n",
                     added)
    assert m, added
    probe_id = m.group(1)
    time.sleep(2.5)          # a few iterations: 10 calls each
    listed = cli("probe", pid, "--list").stdout.splitlines()
    assert listed[0].split() == ["id", "state", "calls", "incl", "excl", "name", "module",
                                 "file:line"]
    row = listed[1].split()
    assert (row[0], row[1]) == (probe_id, "active") and int(row[2]) >= 10
    assert cli("probe", pid, "--remove", probe_id).stdout == \
        f"removed probe {probe_id}: {PROBED}\n"
    # the job: rank 1 gets its first probe, rank 0 its second (ids are never reused)
    out = cli("probe", "--job", job.out, "--add", PROBED).stdout.splitlines()
    assert len(out) == 4 and out[0].startswith("rank 0 (pid ") and out[2].startswith("rank 1 ")
    assert re.fullmatch(rf"  added probe {int(probe_id) + 1}: {PROBED} .*", out[1])
    assert re.fullmatch(rf"  added probe \d+: {PROBED} .*", out[3])
    removed = cli("probe", "--job", job.out, "--remove", PROBED).stdout.splitlines()
    assert [line.split(":")[0].strip()[:13] for line in removed[1::2]] == ["removed probe"] * 2
    job.stop()


def test_root_reaches_another_users_process(attacker, shared_scratch, openmpi):
    """Root probes and watches a process of another user: the socket and segment are in that
    user's directory."""
    stop = shared_scratch / "stop"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(shared_scratch)}
    theirs = attacker.popen([ROOT / "bin" / "pathscope", "run", "-o", shared_scratch / "prof",
                             "--", openmpi.prog("top_phases"), stop, 60], env=env, cwd="/",
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # setpriv, bin/pathscope and `pathscope run` exec: the program keeps the pid
        pid = theirs.pid
        their_dir = f"/dev/shm/pathscope-{attacker.uid}"
        deadline = time.monotonic() + 60
        while not (os.path.isdir(their_dir) and
                   any(e.startswith(f"{pid}-") and e.endswith(".live")
                       for e in os.listdir(their_dir))):
            assert time.monotonic() < deadline and theirs.poll() is None, theirs.communicate()
            time.sleep(0.5)
        doc = json.loads(cli("top", pid, "--once", "--format", "json").stdout)
        assert [p["pid"] for p in doc["processes"]] == [pid]
        assert doc["outdir"] == str(shared_scratch / "prof")
        assert cli("probe", pid, "--list").stdout == "no probes\n"
    finally:
        stop.touch()
        theirs.communicate(timeout=60)
