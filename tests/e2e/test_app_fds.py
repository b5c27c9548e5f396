"""The application's file descriptors and SIGPROF are its own (issue 10).

pathscope once kept a perf-event descriptor per thread at a low number and ioctl'ed and closed
it at MPI_Finalize (or at the thread's end): a program that closes its descriptors and opens
its own files then had its log closed under it, and its sampling stopped without a word.  A
program with its own SIGPROF timer got pathscope's samples in its handler.  Programs:
tests/programs/app_fds.c (MPI) and app_fds_serial.c; each run here is compared with the same
program run without pathscope."""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from profile_files import rank_text

PY_ENV = dict(os.environ, PYTHONPATH=str(ROOT / "python"), PATHSCOPE_HOME=str(ROOT))
for _k in [k for k in PY_ENV if k.startswith("PATHSCOPE_") and k not in ("PATHSCOPE_HOME", "PATHSCOPE_PER_RANK")]:
    del PY_ENV[_k]

TAKEN = re.compile(r"the application installed its own SIGPROF handler at (\d+\.\d) s: pathscope "
                   r"stopped sampling there, so its call paths are incomplete from then on")
RESTORED = re.compile(r"the application put pathscope's SIGPROF handler back at (\d+\.\d) s: "
                      r"sampling resumed after (\d+\.\d) s without samples")


def folded_time(out, rank, frame):
    """Sampled time (µs) of the stacks of one rank whose frames include frame."""
    p = subprocess.run([sys.executable, "-m", "pathscope", "export", str(out), "--format", "folded",
                        "--rank", str(rank)], capture_output=True, text=True, env=PY_ENV, timeout=120)
    assert p.returncode == 0, p.stderr
    total = 0
    for line in p.stdout.splitlines():
        stack, _, value = line.rpartition(" ")
        if frame in stack.split(";"):
            total += int(value)
    return total


def warnings_of(out, rank):
    """{key: (count, first_ns, text)} from a rank's warning lines."""
    found = {}
    for line in rank_text(out, rank).splitlines():
        if line.startswith("warning\t"):
            _, key, count, first_ns, text = line.split("\t")
            found[key] = (int(count), int(first_ns), text)
    return found


def tenths(ns):
    """ns in tenths of a second, rounded as the runtime's texts round them."""
    return (ns + 50_000_000) // 100_000_000


def sorted_lines(text):
    return sorted(line for line in text.splitlines() if line.startswith("rank "))


def expected_log(stdout_line):
    """The log of one rank, from its stdout line: the line written before MPI_Finalize on the
    log, then one line after MPI_Finalize on the log and on each copy, in order."""
    m = re.search(r"log on (\d+), copies on (\S+)$", stdout_line)
    log, copies = int(m.group(1)), []
    if m.group(2) != "-":
        for part in m.group(2).split(","):
            lo, _, hi = part.partition("-")
            copies += range(int(lo), int(hi or lo) + 1)
    return (f"before MPI_Finalize on {log}\n" +
            "".join(f"after MPI_Finalize on {fd}\n" for fd in [log] + copies))


@pytest.mark.parametrize("how,mode", [("close", "cli"), ("dup2", "env")])
def test_descriptors_taken_by_the_application(mpi, tmp_path, how, mode):
    """close: every descriptor from 3 to 1023 that is not MPI's is closed after MPI_Init and
    after a thread started, then the log opens on a low number; dup2: the log is copied over
    every descriptor from 3 to 63 that is not MPI's.  The log stays intact after MPI_Finalize,
    the exit status and stdout (lowest free descriptors included) are those of the run
    without pathscope, and both threads kept sampling after their descriptors were gone."""
    plain_logs, logs = tmp_path / "plain", tmp_path / "logs"
    plain_logs.mkdir()
    logs.mkdir()
    plain = mpi.run(2, [mpi.prog("app_fds"), how, plain_logs], mode="none")
    out = tmp_path / "prof"
    if mode == "env" and mpi.name == "mpich":
        launcher_args = ["-genv", "PATHSCOPE_SAMPLE_RATE", "1000"]
    elif mode == "env":
        launcher_args = ["-x", "PATHSCOPE_SAMPLE_RATE=1000"]
    else:
        launcher_args = []
    run = mpi.run(2, [mpi.prog("app_fds"), how, logs], out, mode=mode, launcher_args=launcher_args,
                  pathscope_args=["--sample-rate", "1000"] if mode == "cli" else ())
    assert run.returncode == 0
    assert sorted_lines(run.stdout) == sorted_lines(plain.stdout)
    assert len(sorted_lines(run.stdout)) == 2
    for line in sorted_lines(run.stdout):
        rank = int(line.split()[1])
        assert (logs / f"log-{rank}.txt").read_text() == expected_log(line)
        assert (plain_logs / f"log-{rank}.txt").read_text() == expected_log(line)
        assert folded_time(out, rank, "main_after_fds") > 0
        assert folded_time(out, rank, "worker_after_fds") > 0
        assert warnings_of(out, rank) == {}
    assert "pathscope: rank" not in run.stderr


def test_serial_descriptors_closed_while_a_thread_runs(mpi, tmp_path):
    """A program without MPI closes every descriptor from 3 up while its thread runs and opens
    four files on 3 to 6: they stay usable after the thread ended (pathscope once closed the
    thread's old descriptor number there), the thread kept sampling, and an exec'd child
    inherits the same descriptors as without pathscope."""
    prog = mpi.prog("app_fds_serial")
    (tmp_path / "plain").mkdir()
    (tmp_path / "files").mkdir()
    env = {k: v for k, v in PY_ENV.items() if not k.startswith("PATHSCOPE_")}
    plain = subprocess.run([str(prog), str(tmp_path / "plain")], capture_output=True, text=True,
                           env=env, timeout=60)
    assert plain.returncode == 0, plain.stderr
    out = tmp_path / "prof"
    env.update(LD_PRELOAD=str(mpi.lib), PATHSCOPE_OUTPUT=str(out), PATHSCOPE_SAMPLE_RATE="1000")
    run = subprocess.run([str(prog), str(tmp_path / "files")], capture_output=True, text=True,
                         env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == plain.stdout
    assert run.stdout.startswith("lowest free: start 3, while the thread runs 3; files on 3 4 5 6\n")
    for i in range(4):
        assert (tmp_path / "files" / f"file-{i}.txt").read_text() == f"file {i} on {i + 3}\n"
    assert folded_time(out, 0, "worker_after_close") > 0
    assert warnings_of(out, 0) == {}


def test_application_sigprof_handler(mpi, tmp_path):
    """The program installs its own SIGPROF handler and a 20 ms ITIMER_PROF timer, computes,
    then puts pathscope's handler back.  Its handler sees its own timer's signals only (none
    of pathscope's 1 kHz samples), pathscope samples nothing while the handler is the
    application's and again after, and each rank reports both events once, with their times,
    on stderr and in its rank file."""
    out = tmp_path / "prof"
    run = mpi.run(2, [mpi.prog("app_fds"), "sigprof"], out, pathscope_args=["--sample-rate", "1000"])
    assert run.returncode == 0
    handler = re.findall(r"^rank (\d): SIGPROF handler called (\d+) times in (\d+) ms of CPU time$",
                         run.stderr, re.M)
    assert sorted(r for r, _, _ in handler) == ["0", "1"]
    for _, calls, cpu_ms in handler:
        # one per 20 ms of CPU time; the timer counts the kernel's tick-based CPU time, which
        # may run ahead of the precise clock the program reads, so allow twice that.
        # pathscope's samples, if they reached the handler, would add one per ms.
        assert 1 <= int(calls) <= int(cpu_ms) // 10 + 2, (calls, cpu_ms)
    for rank in (0, 1):
        lines = re.findall(rf"^pathscope: rank {rank}: (.*)$", run.stderr, re.M)
        assert len(lines) == 2, run.stderr
        taken, restored = TAKEN.fullmatch(lines[0]), RESTORED.fullmatch(lines[1])
        assert taken and restored, lines
        warnings = warnings_of(out, rank)
        assert set(warnings) == {"sigprof-taken", "sigprof-restored"}
        count, first_ns, text = warnings["sigprof-taken"]
        assert (count, text) == (1, lines[0])
        # (the text's time is taken a few microseconds before the warning is recorded)
        assert abs(tenths(first_ns) - int(taken.group(1).replace(".", ""))) <= 1
        count, first_ns, text = warnings["sigprof-restored"]
        assert (count, text) == (1, lines[1])
        assert abs(tenths(first_ns) - int(restored.group(1).replace(".", ""))) <= 1
        assert float(restored.group(2)) > 0
        assert folded_time(out, rank, "before_taking") > 0
        assert folded_time(out, rank, "while_taken") == 0
        assert folded_time(out, rank, "after_restoring") > 0
