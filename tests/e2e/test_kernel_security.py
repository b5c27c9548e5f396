"""The kernel-time collector among hostile local users (issue 10).

Root's processes find their collector at /run/pathscope/pathscope-kernel-0[-job-ID] (a socket
file only root can create or connect to); other users' at an abstract name anybody could bind.
Whoever listens, the process checks the listener's credentials before it sends anything, and
bounds every answer in size and time (runtime/kernel/protocol.h).  Here a real second user
(the `attacker` fixture) and fake collectors (system Python, bound where root's process looks):

  - an attacker squatting the abstract name root's collector used to have: ignored;
  - a collector socket held by another uid (inject, silent, drip, flood): refused before a
    byte is sent, one warning, the libc fallback, no delay; with --kernel ebpf an error;
  - a collector with root's credentials that misbehaves: every answer bounded by its
    deadline (10 s to register, 5 s for the tables), every line checked, nothing injected;
  - connections to root's real collector that never register (another user's, refused at
    once; root's own, closed after 2 s): they neither disturb root's runs nor keep the
    collector's node-wide programs attached after root's last process ended.

Each test uses its own batch-job suffix (SLURM_JOB_ID), so it meets only its own collector.
"""
import json
import os
import re
import select
import socket
import subprocess
import time
from pathlib import Path

import pytest

from test_paths import PATHSCOPE, PY_ENV, rank_records
from profile_files import rank_text_size

N = 1000
SOCKET_DIR = Path("/run/pathscope")
REGISTER_S, SNAPSHOT_S = 10, 5     # protocol.h: PS_KREGISTER_MS, PS_KSNAPSHOT_MS
SLACK_S = 8                        # "a few seconds over normal", on a loaded shared machine
JOB_VARS = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID", "JOB_ID")

# A fake collector: system Python only (the attacker cannot read the checkout).
#   argv: BEHAVIOUR ADDRESS LISTEN_UID LISTEN_GID PHASE
#   ADDRESS "@name" is abstract, anything else a socket file; LISTEN_UID/GID "-" keeps ours,
#   else the process takes them between bind() and listen() (the listener's credentials are
#   those of listen()).  PHASE: where the behaviour starts: "connect" (at once), "register"
#   (instead of the answer to register) or "snapshot" (register is answered "ok signals").
#   Prints "listening", then per connection "received N BYTES" at its end.
FAKE = r'''
import os, socket, sys, threading, time
behaviour, address, uid, gid, phase = sys.argv[1:6]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + address[1:] if address.startswith("@") else address)
if uid != "-":
    os.setgroups([]); os.setresgid(int(gid), int(gid), int(gid)); os.setresuid(int(uid), int(uid), int(uid))
s.listen(16)
print("listening", flush=True)

def inject(pid):
    lines = [
        f"ksys\t1\tread\t1\t1",                     # not a thread of the process
        f"ksys\t{pid}\twrite\t7\t700",              # valid
        f"ksys\t{pid}\tevil\t1\t1",                 # no such system call
        f"ksys\t{pid}\tsyscall_9999\t1\t1",         # no such number
        f"ksys\t{pid}\tgetppid\t5\t500",            # valid
        f"ksys\t{pid}\tgetppid\t5\t500",            # repeated
        f"ksys\t{pid}\tgetuid\t-5\t1",              # signed
        f"ksys\t{pid}\tgetuid\t1\t100000000000000", # 1e14 ns: longer than the process lived
        f"ksys\t{pid}\tgetuid\t1\t1\textra",        # a field too many
        "x" * 10000,                                # over 256 bytes
        "hello",                                    # no known kind
        f"kthread\t{pid}\t1\t2\t3\t4",              # valid
        f"kthread\t{pid}\t1\t2\t3\t4",              # repeated
        f"ksys\t{pid}\tgetuid\t1\t1",               # after the kthread lines
        "kend\t0\t0",                               # valid: the end
        f"ksys\t{pid}\tgetuid\t99\t99",             # after the end: never read
    ]
    return "".join(l + "\n" for l in lines).encode()

def act(c, pid):
    if behaviour == "inject" and phase == "connect":
        c.sendall(b"ok signals\n" + inject(pid))
    if behaviour == "inject":
        return inject(pid)
    if behaviour == "silent":
        return None
    if behaviour == "drip":
        while True:
            c.sendall(b"k")
            time.sleep(1)
    if behaviour == "flood":
        block = (f"ksys\t{pid}\tgetppid\t1\t1\n" * 40000).encode()
        while True:
            c.sendall(block)

def serve(c):
    pid = c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    pid = int.from_bytes(pid[:4], "little")
    got = b""
    try:
        if phase == "connect":
            act(c, pid)
        while True:
            data = c.recv(65536)
            if not data:
                break
            got += data
            if phase == "register" and got.startswith(b"register"):
                act(c, pid)
            if phase == "snapshot" and b"register" in data:
                c.sendall(b"ok signals\n")
            if phase == "snapshot" and b"snapshot\n" in data:
                tables = act(c, pid)
                if tables:
                    c.sendall(tables)
    except OSError:
        pass
    print("received", len(got), repr(got[:200]), flush=True)

while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'''


def job_env(job):
    env = {k: v for k, v in PY_ENV.items() if k not in JOB_VARS}
    env["SLURM_JOB_ID"] = job
    return env


def new_job(tag):
    return f"sec-{tag}-{os.getpid()}-{time.monotonic_ns() % 10**9}"


def root_socket(job):
    return SOCKET_DIR / f"pathscope-kernel-0-job-{job}"


def run_victim(prog, out, job, mode="auto", extra_env=None):
    """The profiled program as root: (process, wall seconds)."""
    env = job_env(job)
    env.update(extra_env or {})
    cmd = PATHSCOPE + ["run", "--kernel", mode, "--kernel-period", "0", "-o", str(out), "--",
                       str(prog), str(N)]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    return p, time.monotonic() - t0


def main_tid(stdout):
    (line,) = [l for l in stdout.splitlines() if l.startswith("truth ")]
    return int(re.search(r"\bmain=(\d+)", line).group(1))


def records(out, kind):
    return [r[1:] for r in rank_records(out, 0) if r[0] == kind]


def rank_file_size(out):
    return rank_text_size(out, 0)


def warning_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("pathscope: rank ")]


class Fake:
    """A fake collector process started by this test (killed by pid at the end)."""

    def __init__(self, argv_prefix, behaviour, address, phase, listen_as=None):
        uid, gid = (str(listen_as[0]), str(listen_as[1])) if listen_as else ("-", "-")
        self.proc = subprocess.Popen(
            argv_prefix + ["/usr/bin/python3", "-c", FAKE, behaviour, str(address), uid, gid,
                           phase], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline() == "listening\n", self.proc.stderr.read()
        self.address = address

    @property
    def pid(self):
        return self.proc.pid

    def stop(self, lines=1):
        """Kills it once it has printed that many lines (or waited 5 s for them); returns
        what it printed after "listening"."""
        out = ""
        deadline = time.monotonic() + 5
        while out.count("\n") < lines and time.monotonic() < deadline:
            if select.select([self.proc.stdout], [], [], deadline - time.monotonic())[0]:
                out += self.proc.stdout.readline()
        self.proc.kill()
        out += self.proc.communicate(timeout=30)[0]
        if not str(self.address).startswith("@"):
            Path(self.address).unlink(missing_ok=True)
        return out


@pytest.fixture(scope="module")
def normal_s(tmp_path_factory):
    """A normal eBPF run's wall time (a collector of its own started and ended); skips when
    eBPF cannot run here."""
    build = Path(__file__).resolve().parents[2] / "build" / "openmpi"
    if os.geteuid() != 0:
        pytest.skip("root's collector: needs root")
    if not (build / "pathscope-kcollect").exists():
        pytest.skip("pathscope-kcollect was not built (clang, bpftool, libbpf-dev)")
    out = tmp_path_factory.mktemp("normal") / "prof"
    p, seconds = run_victim(build / "kernel_truth", out, new_job("normal"), mode="ebpf")
    if p.returncode == 2 and "PATHSCOPE_KERNEL=ebpf" in p.stderr:
        pytest.skip(f"the eBPF collector cannot run here: {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    assert records(out, "kernel")[0][0] == "ebpf"
    SOCKET_DIR.mkdir(mode=0o755, exist_ok=True)   # (made by that collector; kept)
    return seconds


# ---- squatting and foreign listeners ----------------------------------------------------------

def test_squatted_abstract_name_is_not_roots(openmpi, attacker, normal_s, tmp_path):
    """The abstract name root's collector had before issue 10, bound first by another user:
    root's process never looks there."""
    job = new_job("squat")
    fake = Fake(attacker.argv([]), "inject", f"@pathscope-kernel-0-job-{job}", "connect")
    try:
        out = tmp_path / "prof"
        p, seconds = run_victim(openmpi.prog("kernel_truth"), out, job)
    finally:
        printed = fake.stop(lines=0)
    assert p.returncode == 0, p.stderr
    assert printed == ""                                   # no connection reached it
    assert records(out, "kernel")[0][0] == "ebpf"
    assert records(out, "warning") == [] and warning_lines(p.stderr) == []
    tid = main_tid(p.stdout)
    (getppid,) = [r for r in records(out, "ksys") if r[0] == str(tid) and r[1] == "getppid"]
    assert getppid[2] == str(N)
    assert seconds < normal_s + SLACK_S


@pytest.mark.parametrize("behaviour", ["inject", "silent", "drip", "flood"])
def test_foreign_listener_is_refused_before_anything_is_sent(openmpi, attacker, normal_s,
                                                             tmp_path, behaviour):
    """Root's socket held by another uid (as if the directory had been left open to others):
    not a byte is sent to it (the registration holds the address of pathscope's handler);
    one warning, the libc tables, no delay, whatever the listener does."""
    job = new_job(behaviour)
    path = root_socket(job)
    fake = Fake([], behaviour, path, "connect", listen_as=(attacker.uid, attacker.gid))
    try:
        out = tmp_path / "prof"
        p, seconds = run_victim(openmpi.prog("kernel_truth"), out, job)
    finally:
        printed = fake.stop()
    assert p.returncode == 0, p.stderr
    assert printed == "received 0 b''\n"
    text = (f"kernel time: the collector socket {path} is held by uid {attacker.uid} "
            f"(pid {fake.pid}), not root: measuring the libc wrappers in the process instead")
    assert warning_lines(p.stderr) == [f"pathscope: rank 0: {text}"]
    assert "eBPF not available" not in p.stderr
    (warning,) = records(out, "warning")
    assert warning[0:2] == ["kernel-collector-peer", "1"] and warning[3] == text
    assert int(warning[2]) < 2e9          # at start, without waiting for the listener
    kernel = records(out, "kernel")[0]
    assert kernel[0] == "libc" and kernel[6] == text[len("kernel time: "):text.index(": measuring")]
    tid = main_tid(p.stdout)
    assert [r[2] for r in records(out, "ksys") if r[:2] == [str(tid), "getppid"]] == [str(N)]
    assert records(out, "kend") == [["0", "0"]]
    assert rank_file_size(out) < 1 << 20
    assert seconds < normal_s + SLACK_S


def test_foreign_listener_with_ebpf_demanded_is_an_error(openmpi, attacker, normal_s, tmp_path):
    job = new_job("demand")
    path = root_socket(job)
    fake = Fake([], "inject", path, "connect", listen_as=(attacker.uid, attacker.gid))
    try:
        p, seconds = run_victim(openmpi.prog("kernel_truth"), tmp_path / "prof", job, mode="ebpf")
    finally:
        printed = fake.stop()
    assert (p.returncode, p.stdout, p.stderr) == (
        2, "", f"pathscope: PATHSCOPE_KERNEL=ebpf: the collector socket {path} is held by uid "
               f"{attacker.uid} (pid {fake.pid}), not root\n")
    assert printed == "received 0 b''\n"
    assert seconds < normal_s + SLACK_S


# ---- a collector with root's credentials that misbehaves: bounded, checked ------------------

def rogue(openmpi, tmp_path, behaviour, phase):
    job = new_job(f"rogue-{behaviour}")
    fake = Fake([], behaviour, root_socket(job), phase)
    try:
        out = tmp_path / "prof"
        p, seconds = run_victim(openmpi.prog("kernel_truth"), out, job)
    finally:
        printed = fake.stop()
    assert p.returncode == 0, p.stderr
    assert rank_file_size(out) < 1 << 20
    return out, p, seconds, fake.pid, printed


def test_rogue_root_collector_injecting_gets_only_valid_lines(openmpi, normal_s, tmp_path):
    out, p, seconds, pid, printed = rogue(openmpi, tmp_path, "inject", "snapshot")
    tid = main_tid(p.stdout)
    assert printed.startswith("received ") and "b'register 62 0 " in printed
    assert records(out, "kernel")[0][0] == "ebpf"
    assert records(out, "ksys") == [[str(tid), "write", "7", "700"],
                                    [str(tid), "getppid", "5", "500"]]
    assert records(out, "kthread") == [[str(tid), "1", "2", "3", "4"]]
    assert records(out, "kend") == [["0", "0"]]
    text = ("kernel time: 11 lines of the collector's snapshot were invalid and dropped (the "
            "first: a thread that is not one of this process's)")
    assert warning_lines(p.stderr) == [f"pathscope: rank 0: {text}"]
    assert [w[0] for w in records(out, "warning")] == ["kernel-snapshot-invalid"]
    assert seconds < normal_s + SLACK_S


NO_TABLES = ("kernel time: the collector's tables did not arrive ({}): no per-thread "
             "system-call tables")


@pytest.mark.parametrize("behaviour", ["silent", "drip"])
def test_rogue_root_collector_stalling_the_tables(openmpi, normal_s, tmp_path, behaviour):
    """No answer, or one byte a second, to the snapshot request at the end: the total
    deadline (5 s) ends it, however the bytes trickle."""
    out, p, seconds, pid, printed = rogue(openmpi, tmp_path, behaviour, "snapshot")
    assert warning_lines(p.stderr) == [
        "pathscope: rank 0: " + NO_TABLES.format("no complete answer within 5 s")]
    assert records(out, "kend") == [["-", "-"]] and records(out, "ksys") == []
    assert SNAPSHOT_S <= seconds < normal_s + SNAPSHOT_S + SLACK_S


def test_rogue_root_collector_dripping_the_registration(openmpi, normal_s, tmp_path):
    """One byte a second instead of an answer to register (a per-byte timeout would wait for
    ever): the registration's deadline (10 s) ends it; the libc tables instead."""
    out, p, seconds, pid, printed = rogue(openmpi, tmp_path, "drip", "register")
    text = (f"kernel time: the collector (uid 0, pid {pid}) did not answer the registration "
            f"within 10 s: measuring the libc wrappers in the process instead")
    assert warning_lines(p.stderr) == [f"pathscope: rank 0: {text}"]
    assert records(out, "kernel")[0][0] == "libc"
    tid = main_tid(p.stdout)
    assert [r[2] for r in records(out, "ksys") if r[:2] == [str(tid), "getppid"]] == [str(N)]
    assert REGISTER_S <= seconds < normal_s + REGISTER_S + SLACK_S


def test_rogue_root_collector_flooding(openmpi, normal_s, tmp_path):
    """Gigabytes for the tables: 64 MiB are read, none kept (no end line), the rank file stays
    small."""
    out, p, seconds, pid, printed = rogue(openmpi, tmp_path, "flood", "snapshot")
    assert warning_lines(p.stderr) == [
        "pathscope: rank 0: " + NO_TABLES.format("more than 64 MiB without an end")]
    assert records(out, "kend") == [["-", "-"]] and records(out, "ksys") == []
    assert rank_file_size(out) < 256 << 10
    assert seconds < normal_s + SLACK_S


# ---- connections to root's real collector that never register -------------------------------

# Connects to ADDRESS, sends a registration or nothing, reads until the collector closes:
# prints {"seconds", "got", "end"} as JSON, then keeps its end open.
CONNECT_AND_HOLD = r'''
import json, socket, sys, time
path, register = sys.argv[1], sys.argv[2] == "register"
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    c.connect(path)
except OSError as e:
    print(json.dumps({"connect": type(e).__name__}), flush=True)
    sys.exit(0)
if register:
    try:
        c.sendall(b"register 0 0\n")
    except OSError:
        pass   # (already closed by the collector)
t0, got, end = time.monotonic(), b"", "eof"
c.settimeout(10)
while True:
    try:
        data = c.recv(4096)
    except OSError as e:
        end = type(e).__name__
        break
    if not data:
        break
    got += data
print(json.dumps({"seconds": time.monotonic() - t0, "got": got.decode(), "end": end}), flush=True)
time.sleep(60)   # (holds its end of the connection)
'''


def prog_ids(pid):
    """The BPF programs a process holds (its descriptors' fdinfo)."""
    ids = set()
    for info in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            ids |= {int(m) for m in re.findall(r"^prog_id:\s+(\d+)", info.read_text(), re.M)}
        except OSError:
            pass
    return ids


def read_result(holder):
    line = holder.stdout.readline()
    assert line.startswith("{"), line + holder.stdout.read()
    return json.loads(line)


def loaded(ids):
    return {i for i in ids
            if subprocess.run(["bpftool", "prog", "show", "id", str(i)],
                              capture_output=True).returncode == 0}


def test_connections_that_never_register_do_not_hold_the_collector(openmpi, attacker, normal_s,
                                                                   tmp_path):
    job = new_job("held")
    path = root_socket(job)
    log = tmp_path / "collector.log"
    holders = []
    # the first process lives until the test ends it (a line through the FIFO), however slow
    # the processes started meanwhile are
    gate = tmp_path / "end.fifo"
    os.mkfifo(gate)
    first = subprocess.Popen(PATHSCOPE + ["run", "--kernel", "ebpf", "-o", str(tmp_path / "p1"),
                                          "--", "/bin/sh", "-c", 'read line < "$0"', str(gate)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict(job_env(job), PS_KCOLLECT_LOG=str(log)))
    try:
        # the collector serving (the process that loaded the programs forks it)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (
                log.exists() and re.search(r"\[(\d+)\] serving", log.read_text())):
            time.sleep(0.02)
        cpid = int(re.search(r"\[(\d+)\] serving", log.read_text()).group(1))
        ids = prog_ids(cpid)
        assert ids, "the collector holds no BPF program"
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        # another user cannot even connect to root's socket ...
        assert json.loads(attacker.run(["/usr/bin/python3", "-c", CONNECT_AND_HOLD, path,
                                        "register"]).stdout) == {"connect": "PermissionError"}
        # ... and where it could (the mode opened up), it is refused at once and not kept
        os.chmod(path, 0o666)
        for argv_prefix, register in ((attacker.argv([]), "register"), (attacker.argv([]), "no"),
                                      ([], "no")):
            holders.append(subprocess.Popen(
                argv_prefix + ["/usr/bin/python3", "-c", CONNECT_AND_HOLD, str(path), register],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        # (the collector answers before it reads: a request that arrived meanwhile is unread,
        # so closing resets the connection after the answer)
        answer = "error permission denied: this collector serves uid 0\n"
        for holder, ends in ((holders[0], ("ConnectionResetError", "eof")), (holders[1], ("eof",))):
            result = read_result(holder)
            assert result["got"] == answer and result["end"] in ends, result
            assert result["seconds"] < 1.0, result
        # root's next process gets its tables meanwhile
        out = tmp_path / "p2"
        p, _ = run_victim(openmpi.prog("kernel_truth"), out, job, mode="ebpf")
        assert p.returncode == 0, p.stderr
        tid = main_tid(p.stdout)
        assert [r[2] for r in records(out, "ksys") if r[:2] == [str(tid), "getppid"]] == [str(N)]
        # root's own connection that never registers: closed after 2 s
        result = read_result(holders[2])
        assert (result["got"], result["end"]) == ("", "eof")
        assert 1.9 <= result["seconds"] < 2.0 + SLACK_S, result
        # the last registered process ends: the collector detaches 0.5 s later, though
        # another user still holds its connections open
        with open(gate, "w") as w:
            w.write("end\n")
        assert first.wait(timeout=60) == 0, first.stderr.read()
        ended = time.monotonic()
        while Path(f"/proc/{cpid}").exists() and time.monotonic() < ended + 10:
            time.sleep(0.02)
        gone_after = time.monotonic() - ended
        assert not Path(f"/proc/{cpid}").exists()
        assert all(h.poll() is None for h in holders[:2])
        assert gone_after < 0.5 + SLACK_S, gone_after
        while loaded(ids) and time.monotonic() < ended + 10:
            time.sleep(0.1)
        assert loaded(ids) == set()
        assert not path.exists()
        text = log.read_text()
        assert len(re.findall(rf"refused pid \d+ uid {attacker.uid}\n", text)) == 2, text
        assert "did not register within 2000 ms" in text
        # by the collector's clock: 0.5 s from the last process's end to its exit
        last_end = re.findall(r"^([\d.]+) .*no longer tracked \(0 tracked\)$", text, re.M)[-1]
        (exiting,) = re.findall(r"^([\d.]+) .*exiting: nobody to serve$", text, re.M)
        assert 0.49 <= float(exiting) - float(last_end) < 2.0, text
    finally:
        for h in holders:
            h.kill()
            h.wait()
        if first.poll() is None:
            first.kill()
        first.communicate()


def test_sockets_left_by_killed_collectors_are_replaced(openmpi, normal_s, tmp_path):
    """A collector killed with SIGKILL leaves its socket file behind: the next collector of
    that name replaces it, and any collector elected removes the others nobody listens on."""
    job = new_job("stale")
    stale = [root_socket(job), root_socket(job + "-other")]
    for path in stale:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(path))
        s.close()                      # (bound, never listened: as after a SIGKILL)
    assert all(p.exists() for p in stale)
    out = tmp_path / "prof"
    p, _ = run_victim(openmpi.prog("kernel_truth"), out, job, mode="ebpf")
    assert p.returncode == 0, p.stderr
    assert records(out, "kernel")[0][0] == "ebpf" and records(out, "kend")[0][0] != "-"
    deadline = time.monotonic() + 10   # (the collector removes its own at its end)
    while any(p.exists() for p in stale) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p for p in stale if p.exists()] == []


def test_application_closing_the_connection_gets_nothing_written(openmpi, normal_s, tmp_path):
    """The program closes every descriptor from 3 up and puts its own log on every number up
    to 999, pathscope's old one included: pathscope never sends there (the log stays empty),
    says so, and fetches the tables over a new connection."""
    out, log = tmp_path / "prof", tmp_path / "app.log"
    env = job_env(new_job("closefds"))
    p = subprocess.run(PATHSCOPE + ["run", "--kernel", "ebpf", "--kernel-period", "0",
                                    "--sample-rate", "0", "-o", str(out), "--",
                                    str(openmpi.prog("kernel_closefds")), str(N), str(log)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert log.stat().st_size == 0
    (line,) = warning_lines(p.stderr)
    assert re.fullmatch(r"pathscope: rank 0: kernel time: the application closed pathscope's "
                        r"connection to the collector \(descriptor (\d+)\): the tables came "
                        r"over a new one", line), line
    assert 3 < int(re.search(r"descriptor (\d+)", line).group(1)) < 1000
    tid = main_tid(p.stdout)
    assert [r[2] for r in records(out, "ksys") if r[:2] == [str(tid), "getppid"]] == [str(N)]
    assert records(out, "kend")[0][0] != "-"
    assert [w[0] for w in records(out, "warning")] == ["kernel-socket-lost"]
