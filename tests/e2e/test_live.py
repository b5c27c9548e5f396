"""The control channel and the live segment (runtime/live/, /work/notes/live-contract.md): the
files in /dev/shm/pathscope-<uid>/ while a program runs and at each of its endings, requests
over the socket, who may connect, a squatted directory, and the segment read with its
seqlock.  tests/programs/live_phases.c is driven phase by phase on its stdin."""
import os
import shutil
import signal
import socket
import stat
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import ROOT
from profile_files import has_rank_text, rank_text

UID = os.geteuid()
OTHER_UID = 54321          # a uid nobody uses here: its own private directory
HEADER = struct.Struct("<8sIIQQQIIIIQiiIIII40s64s256s1024s128sQ")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATHSCOPE_")}
    env.update(extra)
    return env


def shm_dir(uid=UID):
    return Path(f"/dev/shm/pathscope-{uid}")


def start_time(pid):
    stat_text = Path(f"/proc/{pid}/stat").read_text()
    return int(stat_text[stat_text.rindex(")") + 2:].split()[19])


class Phases:
    """live_phases under the runtime (LD_PRELOAD), one command at a time."""

    def __init__(self, mpi, outdir, env=None, preexec=None):
        self.outdir = outdir
        self.proc = subprocess.Popen(
            [str(mpi.prog("live_phases"))], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
            env=clean_env(**{"LD_PRELOAD": str(mpi.lib), "PATHSCOPE_OUTPUT": str(outdir),
                             **(env or {})}),
            preexec_fn=preexec)
        line = self.proc.stdout.readline()
        assert line == f"ready {self.proc.pid}\n", self.proc.stderr.read()
        self.pid = self.proc.pid
        self.name = f"{self.pid}-{start_time(self.pid)}"

    def do(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        if command in ("exec", "execraw", "abort", "exit"):
            return None
        return self.proc.stdout.readline()

    def wait(self):
        self.proc.stdin.close()
        return self.proc.wait(timeout=60)

    def sock(self, uid=UID):
        return shm_dir(uid) / f"{self.name}.sock"

    def segment(self, uid=UID):
        return shm_dir(uid) / f"{self.name}.live"

    def kill(self):
        """Ends it at EOF on its stdin (SIGKILL would leave its files behind)."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def phases(openmpi, tmp_path):
    started = []

    def start(**kwargs):
        p = Phases(openmpi, tmp_path / "prof", **kwargs)
        started.append(p)
        return p
    yield start
    for p in started:
        p.kill()


def request(path, text):
    """One request: the lines, then EOF; the answer's lines."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(path))
        s.sendall(text.encode())
        s.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data.decode().splitlines()


def read_segment(path):
    """The header fields and the data, copied under the seqlock."""
    with open(path, "rb") as f:
        for _ in range(100):
            f.seek(0)
            raw = f.read()
            seq = struct.unpack_from("<Q", raw, 16)[0]
            f.seek(16)
            again = struct.unpack("<Q", f.read(8))[0]
            if seq % 2 == 0 and seq == again:
                break
            time.sleep(0.001)
        else:
            raise AssertionError("segment busy")
    (magic, version, header_size, seq, publishes, published_ns, interval, state, uid, pid,
     start, rank, size, data_offset, data_capacity, data_len, cpu_us, run_id, host, program,
     outdir, sock, cpu_total) = HEADER.unpack_from(raw, 0)
    text = lambda b: b.split(b"\0", 1)[0].decode()
    return dict(magic=magic, version=version, header_size=header_size, seq=seq,
                publishes=publishes, published_ns=published_ns, interval=interval, state=state,
                uid=uid, pid=pid, start_time=start, rank=rank, size=size,
                data_offset=data_offset, data_capacity=data_capacity, cpu_us=cpu_us,
                run_id=text(run_id), host=text(host), program=text(program),
                outdir=text(outdir), socket=text(sock), cpu_total=cpu_total,
                data=raw[data_offset:data_offset + data_len].decode().splitlines())


def published_after(path, timeout=10.0):
    """The segment once it has been published twice after this call: the second publish began
    after whatever the program did before it, however late the control thread got a CPU."""
    start = read_segment(path)["publishes"]
    deadline = time.monotonic() + timeout
    while (h := read_segment(path))["publishes"] < start + 2:
        assert time.monotonic() < deadline, f"no publish in {timeout} s ({h['publishes']})"
        time.sleep(0.02)
    return h


def sections(lines):
    """{source name: [its lines split on TAB]}"""
    found, current = {}, None
    for line in lines:
        fields = line.split("\t")
        if fields[0] == "source":
            current = found.setdefault(fields[1], [])
        else:
            current.append(fields)
    return found


def mode_of(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def assert_gone(p, uid=UID):
    assert not os.path.lexists(p.sock(uid)) and not os.path.lexists(p.segment(uid))


# ---- the files and the endings ----------------------------------------------------------------

def test_files_while_running_and_gone_after_exit(phases):
    p = phases()
    assert stat.S_ISDIR(os.lstat(shm_dir()).st_mode) and mode_of(shm_dir()) == 0o700
    assert stat.S_ISSOCK(os.lstat(p.sock()).st_mode) and mode_of(p.sock()) == 0o600
    assert stat.S_ISREG(os.lstat(p.segment()).st_mode) and mode_of(p.segment()) == 0o600
    assert os.path.getsize(p.segment()) == 256 * 1024
    assert p.do("exit") is None
    assert p.wait() == 0
    assert_gone(p)
    assert has_rank_text(p.outdir, 0)


def test_gone_after_sigterm(phases):
    p = phases()
    assert p.sock().exists()
    p.proc.send_signal(signal.SIGTERM)
    assert p.proc.wait(timeout=30) == -signal.SIGTERM
    assert_gone(p)
    assert "status\tsignal 15" in (p.outdir / "ranks" / "rank-000000.tsv").read_text()


def test_gone_after_abort(phases):
    p = phases()
    assert p.segment().exists()
    p.do("abort")
    assert p.proc.wait(timeout=30) == -signal.SIGABRT
    assert_gone(p)


def test_exec_removes_and_failed_exec_remakes(phases):
    """Before an exec both files go; an exec that fails makes them again (answering); after
    a real exec (here to a program without pathscope) they stay gone while it runs."""
    p = phases()
    assert p.do("execfail") == "ok\n"
    assert p.sock().exists() and p.segment().exists()
    assert request(p.sock(), "live info\n")[0] == f"pid {p.pid}"
    p.do("exec")
    deadline = time.time() + 10
    while Path(f"/proc/{p.pid}/exe").resolve().name != "sleep" and time.time() < deadline:
        time.sleep(0.02)
    assert Path(f"/proc/{p.pid}/exe").resolve().name == "sleep"
    assert_gone(p)


def test_exec_without_cleanup_replaces_stale_files(phases):
    """An exec through the raw system call skips the cleanup: the new program finds a socket
    nobody listens on and a segment under its own name (same pid and start time); it
    replaces both, with no warning."""
    p = phases()
    old_sock, old_seg = os.lstat(p.sock()).st_ino, os.lstat(p.segment()).st_ino
    p.do("execraw")
    assert p.proc.stdout.readline() == f"ready {p.pid}\n"
    assert os.lstat(p.sock()).st_ino != old_sock and os.lstat(p.segment()).st_ino != old_seg
    assert request(p.sock(), "live info\n")[0] == f"pid {p.pid}"
    assert read_segment(p.segment())["pid"] == p.pid
    p.do("exit")
    assert p.wait() == 0
    assert_gone(p)
    assert "warning\t" not in rank_text(p.outdir, 0)


def test_fork_child_leaves_the_parents_files(phases):
    p = phases()
    assert p.do("fork") == "ok\n"
    assert p.sock().exists() and p.segment().exists()
    assert request(p.sock(), "live info\n")[0] == f"pid {p.pid}"
    assert not list(shm_dir().glob(f"{p.pid + 1}-*"))


def test_no_files_when_off(phases):
    p = phases(env=dict(PATHSCOPE_CONTROL="off", PATHSCOPE_LIVE="0"))
    assert not list(shm_dir().glob(f"{p.pid}-*"))
    q = phases(env=dict(PATHSCOPE_CONTROL="off"))
    assert not q.sock().exists() and q.segment().exists()
    assert read_segment(q.segment())["socket"] == ""


@pytest.mark.parametrize("flags,sock,segment", [
    (["--no-control"], False, True), (["--live-interval", "0"], True, False),
    (["--no-control", "--live-interval", "0"], False, False), ([], True, True)])
def test_cli_flags(openmpi, tmp_path, flags, sock, segment):
    proc = subprocess.Popen(
        [str(ROOT / "bin" / "pathscope"), "run", "-o", str(tmp_path / "prof")] + flags +
        ["--", str(openmpi.prog("live_phases"))], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=clean_env())
    try:
        ready = proc.stdout.readline()
        name = f"{proc.pid}-{start_time(proc.pid)}"
        assert ready == f"ready {proc.pid}\n"
        assert (shm_dir() / f"{name}.sock").exists() == sock
        assert (shm_dir() / f"{name}.live").exists() == segment
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0


# ---- requests ---------------------------------------------------------------------------------

def test_live_info_and_errors(phases):
    p = phases()
    assert request(p.sock(), "live info\n") == [
        f"pid {p.pid}", "rank -1", f"outdir {p.outdir}", "program live_phases", "end"]
    assert request(p.sock(), "live info") == [  # (no final newline: EOF ends the line)
        f"pid {p.pid}", "rank -1", f"outdir {p.outdir}", "program live_phases", "end"]
    assert request(p.sock(), "bogus thing\n") == ["error unknown request 'bogus'", "end"]
    assert request(p.sock(), "probe list\n") == ["end"]  # (the probe source: no probes yet)
    assert request(p.sock(), "nosuch list\n") == ["error unknown request 'nosuch'", "end"]
    assert request(p.sock(), "live tables\n") == ["error unknown live request 'tables'", "end"]
    assert request(p.sock(), "") == ["error empty request", "end"]
    assert request(p.sock(), "live " + "x" * 4100 + "\n") == ["error line over 4096 bytes", "end"]
    assert request(p.sock(), "live info\n" + "x\n" * 4096) == ["error request over 4096 lines",
                                                               "end"]
    big = ("y" * 4000 + "\n") * 263
    assert request(p.sock(), "live info\n" + big) == ["error request over 1048576 bytes", "end"]


def test_request_deadline(phases):
    """A client that never ends its request gets the timeout line after 2 s."""
    p = phases()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(p.sock()))
        s.sendall(b"live info\n")
        t0 = time.monotonic()
        data = b""
        while chunk := s.recv(4096):
            data += chunk
        waited = time.monotonic() - t0
    assert data == b"error request timed out\nend\n"
    assert 1.5 < waited < 5


@pytest.mark.skipif(UID != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_other_uid_is_denied(phases):
    """A client of another uid (given the right to open the socket file, so that it reaches the
    server at all) gets one line and nothing else."""
    p = phases()
    client = ("import socket,sys\n"
              "s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b'live info\\n')\n"
              "s.shutdown(socket.SHUT_WR); sys.stdout.write(s.makefile().read())\n")
    r = subprocess.run(["setpriv", f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}",
                        "--clear-groups", "--inh-caps=+dac_override",
                        "--ambient-caps=+dac_override", "python3", "-c", client, str(p.sock())],
                       capture_output=True, text=True, timeout=30)
    assert (r.returncode, r.stdout) == (0, "error permission denied\n"), r.stderr


# ---- a squatted directory ---------------------------------------------------------------------

@pytest.fixture
def other_user_run(openmpi):
    """Runs live_phases as OTHER_UID (its private directory prepared by the test first)."""
    if UID != 0:
        pytest.skip("needs root to run the program as another uid")
    work = Path(tempfile.mkdtemp(prefix="pathscope-live-", dir="/tmp"))
    os.chown(work, OTHER_UID, OTHER_UID)
    squat = shm_dir(OTHER_UID)

    def run(prepare):
        prepare(squat, work)
        def become():
            os.setgid(OTHER_UID)
            os.setgroups([])
            os.setuid(OTHER_UID)
        p = Phases(openmpi, work / "prof", preexec=become)
        found = sorted(x.name for x in squat.iterdir()) if squat.is_dir() else None
        p.do("exit")
        assert p.wait() == 0, p.proc.stderr.read()
        rank_file = rank_text(work / "prof", 0)
        return p, found, rank_file

    yield run
    if os.path.islink(squat) or squat.is_file():
        squat.unlink()
    elif squat.exists():
        shutil.rmtree(squat)
    shutil.rmtree(work)


def warning_keys(rank_file):
    return [line.split("\t")[1] for line in rank_file.splitlines() if line.startswith("warning\t")]


def test_symlink_directory_is_refused(other_user_run):
    def prepare(squat, work):
        target = work / "elsewhere"
        target.mkdir(mode=0o700)
        os.chown(target, OTHER_UID, OTHER_UID)
        squat.symlink_to(target)
    p, found, rank_file = other_user_run(prepare)
    assert os.listdir(p.outdir.parent / "elsewhere") == []      # never followed
    assert warning_keys(rank_file) == ["control-dir"]
    assert ("warning\tcontrol-dir\t1\t" in rank_file and rank_file.split("warning\tcontrol-dir\t1\t")
            [1].split("\t", 1)[1].startswith("control channel and live view off: "
                                             "/dev/shm/pathscope-<uid> is not a directory of ours"))


@pytest.mark.parametrize("mode,owner", [(0o755, OTHER_UID), (0o700, 0)])
def test_wrong_mode_or_owner_is_refused(other_user_run, mode, owner):
    def prepare(squat, work):
        squat.mkdir()
        os.chmod(squat, mode)
        os.chown(squat, owner, owner)
    p, found, rank_file = other_user_run(prepare)
    assert found in ([], None)
    assert warning_keys(rank_file) == ["control-dir"]


def test_own_directory_is_used(other_user_run):
    p, found, rank_file = other_user_run(lambda squat, work: None)
    assert found == [f"{p.name}.live", f"{p.name}.sock"]
    assert warning_keys(rank_file) == []
    assert mode_of(shm_dir(OTHER_UID)) == 0o700


# ---- the segment -------------------------------------------------------------------------------

def test_segment_header_and_sample_data(phases):
    p = phases(env=dict(PATHSCOPE_LIVE="100", PATHSCOPE_SAMPLE_RATE="1000"))
    first = read_segment(p.segment())
    assert p.do("busy 1500") == "ok\n"
    published_after(p.segment())            # idle now: a publish after the busy phase
    cpu = int(Path(f"/proc/{p.pid}/task/{p.pid}/schedstat").read_text().split()[0])
    h = read_segment(p.segment())
    assert (h["magic"], h["version"], h["header_size"]) == (b"PSLIVE1\0", 1, 4096)
    assert (h["pid"], h["uid"], h["start_time"]) == (p.pid, UID, start_time(p.pid))
    assert (h["rank"], h["state"], h["interval"]) == (-1, 0, 100)
    assert (h["data_offset"], h["data_capacity"]) == (4096, 256 * 1024 - 4096)
    assert (h["outdir"], h["program"], h["socket"]) == (str(p.outdir), "live_phases",
                                                        f"{p.name}.sock")
    assert h["host"] == socket.gethostname() and len(h["run_id"]) == 32
    assert h["seq"] % 2 == 0 and h["publishes"] >= first["publishes"] + 10
    assert h["cpu_total"] > 0
    s = sections(h["data"])
    assert list(s) == ["live", "sample", "heap", "kernel", "mpi", "probe"]
    core = s["live"]
    assert core[0][0] == "elapsed" and int(core[0][1]) > 1_400_000_000
    threads = [f for f in core if f[0] == "thread"]
    assert [(t[1], t[2]) for t in threads] == [("0", str(p.pid))]
    # the main thread's CPU time since its registration at load: what the kernel says, less
    # what the loader and the constructor took before
    assert cpu - 50_000_000 < int(threads[0][4]) <= cpu
    modules = {f[1]: f[2] for f in core if f[0] == "module"}
    assert modules["0"] == str(p.proc.args[0])
    hot = s["sample"]
    assert hot and all(f[0] == "hot" and len(f) == 5 for f in hot)
    assert len(hot) <= 64 and len(hot[0][4].split(";")) <= 8
    # the heaviest leaf is the busy loop in the program (module 0): most of its CPU time
    assert int(hot[0][1]) > cpu // 2 and int(hot[0][3]) > cpu // 2_000_000
    nm = subprocess.run(["nm", str(p.proc.args[0])], capture_output=True, text=True).stdout
    entry = int(next(line.split()[0] for line in nm.splitlines() if line.endswith(" live_hot_loop")), 16)
    assert hot[0][4].split(";")[0] == f"0:{entry:#x}"     # a leaf is its function's entry
    weights = [int(f[1]) + int(f[2]) for f in hot]
    assert weights == sorted(weights, reverse=True)
    p.do("exit")
    assert p.wait() == 0


def test_segment_ends_with_state_ended(phases):
    """A reader that keeps the segment mapped sees the last header: state ended."""
    import mmap
    p = phases(env=dict(PATHSCOPE_LIVE="100"))
    with open(p.segment(), "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    p.do("exit")
    assert p.wait() == 0
    state = struct.unpack_from("<I", m, 44)[0]
    m.close()
    assert state == 2


def test_heap_line(openmpi, tmp_path):
    heap_lib = openmpi.build / "libpathscope-heap.so"
    p = Phases(openmpi, tmp_path / "prof",
               env=dict(PATHSCOPE_HEAP="on", PATHSCOPE_LIVE="100",
                        LD_PRELOAD=f"{heap_lib}:{openmpi.lib}"))
    try:
        p.do("busy 300")
        heap = sections(read_segment(p.segment())["data"])["heap"]
        assert len(heap) == 1 and heap[0][0] == "heap" and len(heap[0]) == 5
        live, peak, allocs, frees = map(int, heap[0][1:])
        assert peak >= live and allocs >= frees and allocs > 0
    finally:
        p.kill()


def test_kernel_lines(openmpi, tmp_path):
    """libc kernel time: the exact call count of the program's usleep calls."""
    kernel_lib = openmpi.build / "libpathscope-kernel.so"
    p = Phases(openmpi, tmp_path / "prof",
               env=dict(PATHSCOPE_KERNEL="libc", PATHSCOPE_LIVE="100",
                        LD_PRELOAD=f"{kernel_lib}:{openmpi.lib}"))
    try:
        assert p.do("nap 25") == "ok\n"
        sys_lines = sections(published_after(p.segment())["data"])["kernel"]
        assert all(f[0] == "sys" and len(f) == 4 for f in sys_lines) and len(sys_lines) <= 32
        usleep = [f for f in sys_lines if f[1] == "usleep"]
        assert usleep and int(usleep[0][2]) == 25 and int(usleep[0][3]) >= 25_000_000
    finally:
        p.kill()


# ---- MPI ----------------------------------------------------------------------------------------

def test_mpi_ranks_publish(mpi, tmp_path):
    stop = tmp_path / "stop"
    proc = subprocess.Popen(
        list(mpi.launcher) + ["-np", "2", str(ROOT / "bin" / "pathscope"), "run", "-o",
                              str(tmp_path / "prof"), "--live-interval", "100", "--",
                              str(mpi.prog("live_mpi")), str(stop)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = {}
        deadline = time.time() + 60
        while len(seen) < 2 and time.time() < deadline:
            for seg in shm_dir().glob("*.live"):
                try:
                    h = read_segment(seg)
                except (OSError, AssertionError):
                    continue
                if h["outdir"] == str(tmp_path / "prof") and h["rank"] >= 0:
                    mpi_lines = sections(h["data"]).get("mpi", [])
                    if any(f[2] == "MPI_Allreduce" for f in mpi_lines):
                        seen[h["rank"]] = (h, mpi_lines)
            time.sleep(0.1)
        assert sorted(seen) == [0, 1]
        for rank, (h, mpi_lines) in seen.items():
            assert h["size"] == 2
            allreduce = [f for f in mpi_lines if f[2] == "MPI_Allreduce"]
            assert allreduce[0][1] == "W" and int(allreduce[0][3]) > 0
            assert int(allreduce[0][5]) == 4 * int(allreduce[0][3])   # one int per call
            assert request(shm_dir() / h["socket"], "live info\n")[1] == f"rank {rank}"
    finally:
        stop.touch()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert not [s for s in shm_dir().glob("*.live")
                if read_segment(s)["outdir"] == str(tmp_path / "prof")]
