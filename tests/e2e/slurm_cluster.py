"""A private one-node Slurm cluster for the tests (Debian's slurm-wlm): munged, slurmctld and
slurmd started as children of the test process, with their configuration, key, sockets, state
and logs in one temporary directory, on free TCP ports, and stopped by pid.

Every process of the cluster carries MARK=<its directory> in its environment (the daemons from
start(), the jobs from env(), which the client commands srun, sbatch, ... pass on to them) or
holds a file of that directory open (slurmstepd): stop() finds what is left running by that."""
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

MARK = "PS_TEST_SLURM_DIR"
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("srun", "sbatch", "scancel", "scontrol", "sinfo", "squeue")
KILL_WAIT = 2      # seconds between a job's SIGTERM and its SIGKILL (slurm.conf KillWait)
FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
# a job's launch environment: an outer Slurm job's variables would steer srun and sbatch there
_OUTER = re.compile(r"^(SLURM_|SBATCH_|SRUN_|SALLOC_)")


class SlurmError(Exception):
    pass


def missing_programs() -> list[str]:
    return [p for p in DAEMONS + CLIENTS if shutil.which(p) is None]


def _free_ports(n: int) -> list[int]:
    """n distinct TCP ports free now (held open together so that they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _node_line(node: str) -> str:
    """This machine as slurmd sees it (`slurmd -C`: CPUs, sockets, cores, threads, memory),
    under the name node."""
    p = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=30)
    first = p.stdout.splitlines()[0] if p.stdout else ""
    if p.returncode != 0 or not first.startswith("NodeName="):
        raise SlurmError(f"slurmd -C failed ({p.returncode}): {p.stdout}{p.stderr}")
    return f"NodeName={node} NodeAddr=127.0.0.1 " + first.split(" ", 1)[1]


class SlurmCluster:
    def __init__(self, base: Path):
        self.base = base
        self.conf = base / "slurm.conf"
        self.munge_socket = base / "munge" / "munge.socket"
        self.node = socket.gethostname().split(".")[0]  # slurmctld runs where SlurmctldHost says
        self.procs: dict[str, subprocess.Popen] = {}

    # ---- start ---------------------------------------------------------------------------

    def start(self, timeout: float = 60):
        """Starts munged, slurmctld and slurmd and waits until the node is idle."""
        # munged wants its socket's directory searchable by everyone, and every directory
        # above it not writable by others (or sticky, as /tmp)
        self.base.chmod(0o755)
        for d in ("munge", "state", "spool", "log"):
            (self.base / d).mkdir(mode=0o755)
        key = self.base / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._spawn("munged", ["munged", "--foreground", f"--socket={self.munge_socket}",
                               f"--key-file={key}", f"--pid-file={self.base}/munge/munged.pid",
                               f"--seed-file={self.base}/munge/munged.seed"])
        self._wait(lambda: self.munge_socket.exists(), timeout, "munged's socket")
        self._write_conf()
        self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", self.node])
        self._wait(lambda: self.node_state() == "idle", timeout, f"node {self.node} idle")

    def _write_conf(self):
        ctld_port, slurmd_port = _free_ports(2)
        b = self.base
        lines = [
            "ClusterName=pathscope-test",
            f"SlurmctldHost={self.node}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={b}/state",
            f"SlurmdSpoolDir={b}/spool",
            f"SlurmctldPidFile={b}/slurmctld.pid",
            f"SlurmdPidFile={b}/slurmd.pid",
            f"SlurmctldLogFile={b}/log/slurmctld.log",
            f"SlurmdLogFile={b}/log/slurmd.log",
            # a process tree from /proc: no cgroup hierarchy needed (containers, VMs)
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MailProg=/bin/true",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "MpiDefault=none",
            "ReturnToService=2",
            f"KillWait={KILL_WAIT}",
            "InactiveLimit=0",
            "MinJobAge=300",  # finished jobs stay visible to scontrol for 5 minutes
            _node_line(self.node),
            # FORCE: jobs share the CPUs (4 ranks on 2 cores, and several jobs at once)
            f"PartitionName=test Nodes={self.node} Default=YES MaxTime=INFINITE State=UP "
            "OverSubscribe=FORCE:8",
        ]
        self.conf.write_text("\n".join(lines) + "\n")

    def _spawn(self, name: str, argv: list[str]):
        log = open(self.base / "log" / f"{name}.out", "wb")
        with log:
            self.procs[name] = subprocess.Popen(argv, env=self._daemon_env(),
                                                stdin=subprocess.DEVNULL, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True)

    def _daemon_env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not _OUTER.match(k)}
        env.update({"SLURM_CONF": str(self.conf), MARK: str(self.base)})
        return env

    def _wait(self, ready, timeout: float, what: str):
        end = time.monotonic() + timeout
        while not ready():
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise SlurmError(f"{name} exited ({p.returncode}) while waiting for {what}\n"
                                     + self.logs())
            if time.monotonic() > end:
                raise SlurmError(f"no {what} after {timeout:.0f} s\n" + self.logs())
            time.sleep(0.1)

    def logs(self) -> str:
        out = []
        for f in sorted((self.base / "log").glob("*")):
            text = f.read_text(errors="replace")
            out.append(f"---- {f.name} (last lines)\n" + "\n".join(text.splitlines()[-30:]))
        return "\n".join(out)

    # ---- use -----------------------------------------------------------------------------

    def env(self, extra: dict = None) -> dict:
        """The environment for client commands (and so for the jobs they start)."""
        env = self._daemon_env()
        env.update(extra or {})
        return env

    def run(self, argv, env: dict = None, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([str(a) for a in argv], env=self.env(env), capture_output=True,
                              text=True, timeout=timeout)

    def node_state(self) -> str:
        p = self.run(["sinfo", "-h", "-n", self.node, "-o", "%T"], timeout=30)
        return p.stdout.strip() if p.returncode == 0 else ""

    def sbatch(self, script: Path, args=(), env: dict = None) -> int:
        p = self.run(["sbatch", "--parsable", *args, script], env=env, timeout=30)
        if p.returncode != 0:
            raise SlurmError(f"sbatch failed ({p.returncode}): {p.stderr}")
        return int(p.stdout.strip().split(";")[0])

    def job(self, job_id: int) -> dict:
        """The job's fields as scontrol shows them (JobState, ExitCode, StartTime, ...)."""
        p = self.run(["scontrol", "-o", "show", "job", str(job_id)], timeout=30)
        if p.returncode != 0:
            raise SlurmError(f"scontrol show job {job_id} failed: {p.stderr}")
        return dict(t.partition("=")[::2] for t in p.stdout.split())

    def wait_job(self, job_id: int, timeout: float) -> dict:
        """Waits until the job has ended; its fields."""
        end = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job["JobState"] in FINAL_STATES:
                return job
            if time.monotonic() > end:
                raise SlurmError(f"job {job_id} still {job['JobState']} after {timeout:.0f} s")
            time.sleep(0.1)

    # ---- stop ----------------------------------------------------------------------------

    def stop(self) -> list[str]:
        """Cancels every job, waits for them to end, stops the daemons (SIGTERM, then SIGKILL
        after 10 s) and then kills whatever of the cluster still runs.  Returns what had to be
        killed that way (command lines): empty when everything ended by itself."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            ids = self.run(["squeue", "-h", "-o", "%i"], timeout=30).stdout.split()
            if ids:
                self.run(["scancel", *ids], timeout=30)
            end = time.monotonic() + 10 + KILL_WAIT
            while ids and time.monotonic() < end:
                ids = self.run(["squeue", "-h", "-o", "%i"], timeout=30).stdout.split()
                time.sleep(0.2)
        for name in reversed(DAEMONS):
            p = self.procs.get(name)
            if p is None or p.poll() is not None:
                continue
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        # a job step's processes end a moment after the job does
        end = time.monotonic() + 5
        while self.leftovers() and time.monotonic() < end:
            time.sleep(0.1)
        killed = []
        for pid, cmd in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(f"{pid} {cmd}")
            except ProcessLookupError:
                pass
        return killed

    def leftovers(self) -> list[tuple[int, str]]:
        """Processes (other than this one) of this cluster: with its MARK in their environment
        (its daemons and jobs), or holding a file of its directory open (slurmstepd, which
        slurmd starts with an environment of its own, keeps slurmd's log open)."""
        mark = f"{MARK}={self.base}".encode()
        found = []
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == os.getpid():
                continue
            try:
                ours = mark in (d / "environ").read_bytes().split(b"\0") or self._holds_file(d)
                if not ours:
                    continue
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue  # gone meanwhile, or a kernel thread
            found.append((int(d.name), cmd.strip()))
        return found

    def _holds_file(self, proc: Path) -> bool:
        prefix = f"{self.base}/"
        for fd in (proc / "fd").iterdir():
            try:
                if os.readlink(fd).startswith(prefix):
                    return True
            except OSError:
                pass
        return False
