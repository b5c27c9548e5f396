"""Probes added and removed while programs run (issue 13), under load: an MPI job (both MPIs)
probed between FIFO-gated phases with `pathscope probe --job`, and eight threads calling a
function while its probe is added and removed 1,000 times over the control socket.

Truth: the programs print their own calls (tests/programs/probe_phases_mpi.c,
probe_storm.c); the rank files' `probe`, `node` and `pnode` lines (docs/format.md, "Probed
functions") are read with test_probe.Probes."""
import os
import queue
import re
import subprocess
import threading
import time

import pytest

from conftest import MPI_ENV, ROOT
from pathscope.modules import mapped_modules
from pathscope.probes import pid_target, resolver_input, run_resolver
from pathscope.control import send_request
from test_paths import PATHSCOPE, PY_ENV, folded, rank_records
from test_probe import Probes, _read_code, program_values

RANKS = 2
SLEEP_MS = 10


class Lines:
    """A process's stdout, read line by line by a thread: waits with a timeout."""

    def __init__(self, stream):
        self.queue = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            self.queue.put(line)
        self.queue.put(None)

    def wait(self, predicate, what, timeout=120):
        """The first line (from now on) for which predicate holds."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"timed out waiting for {what}; seen: {self.seen}"
            try:
                line = self.queue.get(timeout=left)
            except queue.Empty:
                continue
            assert line is not None, f"output ended before {what}; seen: {self.seen}"
            self.seen.append(line)
            if predicate(line):
                return line

    def phase_done(self, phase, ranks):
        """Every rank's line of a finished phase: {rank: values}"""
        done = {}
        while len(done) < ranks:
            line = self.wait(lambda l: f" phase={phase} " in l, f"phase {phase} of {ranks} ranks")
            (v,) = program_values(line, "probe_phases_mpi")
            done[v["rank"]] = v
        return done


def _job_cli(out, *args):
    p = subprocess.run(PATHSCOPE + ["probe", "--job", str(out), *args], capture_output=True,
                       text=True, env=PY_ENV, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def _open_gate(fifo):
    with open(fifo, "w") as gate:
        gate.write("go\n")


def test_mpi_job_probed_between_phases(mpi, tmp_path):
    """Probes added to every rank after phase 1 and removed after phase 2 count exactly phase
    2's calls, per rank and call site; a function that calls MPI_Allreduce gets its MPI time
    excluded from its exclusive time."""
    fifo = tmp_path / "gate.fifo"
    os.mkfifo(fifo)
    out = tmp_path / "prof"
    env = dict(PY_ENV, **MPI_ENV[mpi.name])
    job = subprocess.Popen(mpi.launcher + ["-np", str(RANKS), str(ROOT / "bin" / "pathscope"),
                                           "run", "-o", str(out), "--",
                                           str(mpi.prog("probe_phases_mpi")), str(fifo), "3",
                                           str(SLEEP_MS)],
                           env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        lines = Lines(job.stdout)
        lines.phase_done(1, RANKS)
        added = _job_cli(out, "--add", "counted,mpi_site")
        assert added.count("added probe") == 2 * RANKS, added
        _open_gate(fifo)
        phase2 = lines.phase_done(2, RANKS)
        removed = _job_cli(out, "--remove", "counted")
        removed += _job_cli(out, "--remove", "mpi_site")
        assert removed.count("removed probe") == 2 * RANKS, removed
        _open_gate(fifo)
        lines.phase_done(3, RANKS)
        assert job.wait(timeout=120) == 0, "".join(lines.seen)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    for rank in range(RANKS):
        truth = phase2[rank]
        assert truth["allreduce_ok"] == 1
        assert (truth["plain"], truth["mpi"]) == (3 + 2 * rank + 2, 12 + 2)
        pr = Probes(out, rank)
        (counted,), (site,) = pr.ids("^counted$"), pr.ids("^mpi_site$")
        assert {pr.probes[i]["state"] for i in (counted, site)} == {"removed"}
        assert sorted(c for _, _, c, _ in pr.paths(counted)) == \
            sorted([truth["plain"], truth["mpi"]]), (rank, pr.paths(counted))
        assert [c for _, _, c, _ in pr.paths(site)] == [truth["mpi"]], (rank, pr.paths(site))
        incl, excl = pr.total(site, "incl"), pr.total(site, "excl")
        # this rank waited SLEEP_MS in about half of its Allreduce calls
        assert incl > (truth["mpi"] // RANKS) * SLEEP_MS * 1e6 * 0.9, (rank, incl)
        assert 0 <= excl < 0.02 * incl, (rank, excl, incl)
        print(f"{mpi.name} rank {rank}: mpi_site excl/incl {excl / incl:.4f}, longest window "
              f"{int(pr.summary[8]) / 1e6:.2f} ms, scan waits {pr.summary[9]}")


STORM = 1000


def storm_pairs(target, request, function, pairs):
    """pairs of `probe add` (request) and `probe remove` of what it added: (the ids added, the
    replies refusing as unsafe-threads); any other answer fails."""
    adds, refused = [], []
    for _ in range(pairs):
        reply = send_request(target, request)
        if reply[0].startswith("refused\t") and reply[0].split("\t")[3] == "unsafe-threads":
            refused.append(reply)
            continue
        assert len(reply) == 1 and reply[0].startswith("ok\tadded\t"), reply
        probe_id = reply[0].split("\t")[2]
        adds.append(probe_id)
        assert send_request(target, [f"probe remove\t{probe_id}"]) == \
            [f"ok\tremoved\t{probe_id}\t{function}"]
    return adds, refused


@pytest.mark.parametrize("function", ["stormed", "stormed_short"])
def test_storm_of_adds_and_removes_with_eight_threads(openmpi, tmp_path, function):
    """Eight threads call the function in a loop while its probe is added and removed 1,000
    times: every request answered, the program's results right, the code the original one
    after the last removal, the probe's calls at most the program's.  stormed: the patch
    displaces one instruction; stormed_short: two, so each add checks that no thread is
    between them (8 threads on a busy 2-core machine: a refusal as unsafe-threads is
    possible, and must stay rare)."""
    out = tmp_path / "prof"
    prog = openmpi.prog("probe_storm")
    short = str(int(function == "stormed_short"))
    job = subprocess.Popen(PATHSCOPE + ["run", "-o", str(out), "--", str(prog), "8", short],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=PY_ENV)
    try:
        lines = Lines(job.stdout)
        pid = int(re.search(r"pid=(\d+)", lines.wait(lambda l: "pid=" in l, "start")).group(1))
        original = _read_code(pid, prog, function)
        target = pid_target(pid).target
        modules = mapped_modules(pid)
        request = ["probe add"] + resolver_input(modules, [function]) + \
            run_resolver(modules, function)
        started = time.monotonic()
        adds, refused = storm_pairs(target, request, function, STORM)
        elapsed = time.monotonic() - started
        assert _read_code(pid, prog, function) == original
        job.stdin.write("stop\n")
        job.stdin.close()
        assert job.wait(timeout=120) == 0, "".join(lines.seen)
        lines.wait(lambda l: l.startswith("probe_storm calls="), "the totals")
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    print(f"\n{STORM} add+remove pairs: {elapsed:.2f} s, {len(refused)} refused "
          f"(unsafe-threads)")
    assert len(refused) <= STORM // 100, refused[:3]
    # ids are never reused; without a refusal they are 1..1000
    assert [int(i) for i in adds] == sorted({int(i) for i in adds})
    assert refused or adds == [str(i) for i in range(1, STORM + 1)]
    (total,) = [v for v in program_values("".join(lines.seen), "probe_storm") if "thread" not in v
                and "calls" in v]
    per_thread = [v for v in program_values("".join(lines.seen), "probe_storm") if "thread" in v]
    assert total["wrong"] == 0 and len(per_thread) == 8
    assert all(v["calls"] > 0 for v in per_thread)
    pr = Probes(out)
    assert sorted(pr.probes, key=int) == adds
    assert {p["state"] for p in pr.probes.values()} == {"removed"}
    calls = sum(pr.calls(i) for i in pr.probes)
    assert 0 < calls <= total["calls"], (calls, total)
    s = pr.summary
    print(f"probes line: traps {s[6]} in {s[7]} windows, longest {int(s[8]) / 1e6:.2f} ms, "
          f"scan waits {s[9]}; probe calls {calls} of {total['calls']}")
    # samples that land in libc's signal return (after a SIGTRAP in a window) are not unwound
    # (the unwinder does not step through __restore_rt); nothing else fails
    failed = folded(out, "oncpu_time")
    failed = {p: v for p, v in failed.items() if p.startswith("[failed unwind]")}
    assert set(failed) <= {"[failed unwind];__restore_rt"}, failed
    threads = [r for r in rank_records(out, 0) if r[0] == "thread"]
    kept, unwind_failures = sum(int(t[4]) for t in threads), sum(int(t[7]) for t in threads)
    print(f"samples kept {kept}, unwind failures {unwind_failures}")
    assert unwind_failures <= 2 + kept // 10, threads


def test_application_sigtrap_handler_installed_during_a_storm(openmpi, tmp_path):
    """The application installs its own SIGTRAP handler (sigaction) after pathscope's patcher
    installed its own, while eight threads call a function whose probe is added and removed:
    sigaction shows the application its handler, its own SIGTRAP (raise, int3) reaches it,
    and the patch windows' traps never do (its count stays 2; a thread moved by it instead
    of the patcher would run half-written code)."""
    out = tmp_path / "prof"
    prog = openmpi.prog("probe_storm")
    job = subprocess.Popen(PATHSCOPE + ["run", "-o", str(out), "--", str(prog), "8", "1"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=PY_ENV)
    function = "stormed_short"
    try:
        lines = Lines(job.stdout)
        pid = int(re.search(r"pid=(\d+)", lines.wait(lambda l: "pid=" in l, "start")).group(1))
        target = pid_target(pid).target
        modules = mapped_modules(pid)
        request = ["probe add"] + resolver_input(modules, [function]) + \
            run_resolver(modules, function)
        storm_pairs(target, request, function, 50)                  # the patcher's handler is installed by the first add
        job.stdin.write("trap\n")
        job.stdin.flush()
        trap = lines.wait(lambda l: l.startswith("probe_storm trap "), "the trap check")
        assert "handled=2 view=1" in trap, trap
        storm_pairs(target, request, function, 300)
        job.stdin.write("stop\n")
        job.stdin.close()
        assert job.wait(timeout=120) == 0, "".join(lines.seen)
        lines.wait(lambda l: l.startswith("probe_storm traps="), "the totals")
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    values = program_values("".join(lines.seen), "probe_storm")
    (total,) = [v for v in values if "calls" in v and "thread" not in v]
    (traps,) = [v["traps"] for v in values if "traps" in v]
    assert total["wrong"] == 0 and traps == 2, (total, traps)
    s = Probes(out).summary
    print(f"\nprobes line: traps {s[6]} in {s[7]} windows")
