"""Shared test fixtures: real MPI launchers for both MPI libraries, profile loading."""
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

# Most tests hold what a rank recorded to that rank's own text (exact per-rank truths), so
# their runs keep every rank's text (--per-rank all: ranks.tsv).  The default, summary, is
# tested where it is the point (tests/e2e/test_ranks_tsv.py, test_reduce.py), with this
# variable removed or overridden by the flag.
os.environ.setdefault("PATHSCOPE_PER_RANK", "all")

MPI_LAUNCHERS = {
    "openmpi": ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe"],
    "mpich": ["mpirun.mpich"],
}
MPI_ENV = {"openmpi": {"OMPI_MCA_rmaps_base_oversubscribe": "1"}, "mpich": {}}


@dataclass
class Mpi:
    name: str
    build: Path
    launcher: list = field(default_factory=list)

    @property
    def lib(self) -> Path:
        return self.build / "libpathscope.so"

    def prog(self, name: str) -> Path:
        return self.build / name

    def command(self, np, argv, outdir=None, mode="cli", env=None, pathscope_args=(),
                launcher_args=()):
        """The launcher's command line and environment for argv on np ranks under pathscope.
        mode: 'cli' (bin/pathscope run per rank), 'env' (LD_PRELOAD + PATHSCOPE_* variables),
        or 'none' (no pathscope)."""
        e = dict(os.environ)
        e.update(MPI_ENV[self.name])
        e.update(env or {})
        argv = [str(a) for a in argv]
        cmd = list(self.launcher) + list(launcher_args) + ["-np", str(np)]
        if mode == "cli":
            cmd += [str(ROOT / "bin" / "pathscope"), "run"]
            if outdir is not None:
                cmd += ["-o", str(outdir)]
            cmd += list(pathscope_args) + ["--"] + argv
        elif mode == "env":
            if self.name == "openmpi":
                cmd += ["-x", f"LD_PRELOAD={self.lib}"]
                if outdir is not None:
                    cmd += ["-x", f"PATHSCOPE_OUTPUT={outdir}"]
            else:
                cmd += ["-genv", "LD_PRELOAD", str(self.lib)]
                if outdir is not None:
                    cmd += ["-genv", "PATHSCOPE_OUTPUT", str(outdir)]
            cmd += argv
        else:
            cmd += argv
        return cmd, e

    def run(self, np, argv, outdir=None, mode="cli", env=None, timeout=120, check=True,
            pathscope_args=(), launcher_args=()):
        """Runs the command() of argv on np ranks and waits for it."""
        cmd, e = self.command(np, argv, outdir, mode, env, pathscope_args, launcher_args)
        p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
        return p

    def popen(self, np, argv, outdir=None, **kw):
        """Starts the command() of argv on np ranks (a job the test stops or kills);
        stdout and stderr are pipes of text."""
        cmd, e = self.command(np, argv, outdir, **kw)
        return subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)


def _mpi(name):
    build = ROOT / "build" / name
    if not (build / "libpathscope.so").exists():
        pytest.skip(f"{name} build missing: run make build MPI={name}")
    return Mpi(name, build, MPI_LAUNCHERS[name])


@pytest.fixture(params=["openmpi", "mpich"])
def mpi(request):
    return _mpi(request.param)


@pytest.fixture
def openmpi():
    return _mpi("openmpi")


@pytest.fixture
def mpich():
    return _mpi("mpich")


@pytest.fixture(autouse=True)
def no_real_symbolizer_in_unit_tests(request, monkeypatch, tmp_path_factory):
    """The Python unit tests (tests/python) never run the real symbolizer
    (build/<mpi>/pathscope-symbolize may exist, or be being rebuilt): PATHSCOPE_SYMBOLIZER
    names a file that does not exist unless a test sets its own (see test_symbols.py)."""
    if Path(str(request.node.fspath)).parent.name == "python":
        monkeypatch.setenv("PATHSCOPE_SYMBOLIZER",
                           str(tmp_path_factory.getbasetemp() / "no-such-symbolizer"))


# ---- a second, unprivileged local user (issue 10: pathscope runs as root among other users) --
ATTACKER_NAME = "pathscope-attacker"


@dataclass
class Attacker:
    """A real unprivileged local user, created once with useradd.  Commands run as that user
    through setpriv (no capabilities, no supplementary groups).  The checkout may be private,
    so attacker commands should use only system programs (/usr/bin/python3 -c ...)."""
    name: str
    uid: int
    gid: int

    def argv(self, argv):
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--"] + [str(a) for a in argv]

    def run(self, argv, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("timeout", 60)
        return subprocess.run(self.argv(argv), **kw)

    def popen(self, argv, **kw):
        return subprocess.Popen(self.argv(argv), **kw)


@pytest.fixture(scope="session")
def attacker():
    if os.geteuid() != 0:
        pytest.skip("needs root to create a second local user")
    import pwd
    try:
        pw = pwd.getpwnam(ATTACKER_NAME)
    except KeyError:
        # several test processes may get here at once: useradd locks /etc/passwd itself
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        ATTACKER_NAME], capture_output=True)
        pw = pwd.getpwnam(ATTACKER_NAME)
    return Attacker(ATTACKER_NAME, pw.pw_uid, pw.pw_gid)


@pytest.fixture
def shared_scratch():
    """A world-writable sticky directory under /tmp, like a cluster's shared scratch area
    (pytest's tmp_path is private to root, so another user could not reach it)."""
    import shutil
    import tempfile
    d = Path(tempfile.mkdtemp(prefix="pathscope-scratch-", dir="/tmp"))
    os.chmod(d, 0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)
