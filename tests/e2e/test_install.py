"""pathscope without the checkout (issue 12, "a conventional build"): an installed prefix
(`cmake --install build/<mpi> --prefix P`, both MPIs into one P) whose bin/pathscope profiles and
reports a real MPI run on its own, and `pip install .`, whose pathscope command finds the
runtime of such a prefix through PATHSCOPE_HOME and says in one line what to do without one.

Everything runs from a directory outside the checkout with neither PYTHONPATH nor any
PATHSCOPE_* variable set."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MPI_ENV, MPI_LAUNCHERS, ROOT
from profile_files import rank_text

MPIS = ("openmpi", "mpich")
MPI_LIBRARY = {"openmpi": "libmpi.so.40", "mpich": "libmpich.so.12"}


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PATHSCOPE_") and k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(extra)
    return env


def run(argv, cwd, env=None, timeout=120):
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env or clean_env(),
                          capture_output=True, text=True, timeout=timeout)


def needed(path):
    """The DT_NEEDED entries of an ELF file."""
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^]]+)\]", out)


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """build/openmpi (and build/mpich, if built) installed into one prefix, which is then moved
    elsewhere: nothing in it may depend on where it was installed.  (prefix, MPIs in it)"""
    if not (ROOT / "build" / "openmpi" / "libpathscope.so").exists():
        pytest.skip("openmpi build missing: run make build MPI=openmpi")
    mpis = [m for m in MPIS if (ROOT / "build" / m / "libpathscope.so").exists()]
    base = tmp_path_factory.mktemp("install")
    staged = base / "staged"
    for mpi in mpis:
        done = run(["cmake", "--install", ROOT / "build" / mpi, "--prefix", staged], cwd=base)
        assert done.returncode == 0, done.stdout + done.stderr
    moved = base / "moved"
    staged.rename(moved)
    return moved, mpis


def test_prefix_holds_the_runtime_the_cli_and_nothing_else(prefix):
    p, mpis = prefix
    built = {name for name in ("pathscope-symbolize", "pathscope-kcollect")
             if (ROOT / "build" / "openmpi" / name).exists()}
    want = {"bin/pathscope", "share/pathscope/options.def"}
    want |= {f"bin/{name}" for name in built}
    for mpi in mpis:
        want |= {f"lib/pathscope/{mpi}/{name}" for name in
                 ("libpathscope.so", "libpathscope-heap.so", "libpathscope-kernel.so",
                  "pathscope-run")}
        # the collector and the resolver next to the library, where the runtime starts them
        want |= {f"lib/pathscope/{mpi}/{name}" for name in built}
    python = ROOT / "python"
    want |= {f"share/pathscope/python/{f.relative_to(python)}"
             for f in python.rglob("*.py") if "__pycache__" not in f.parts}
    have = {str(f.relative_to(p)) for f in p.rglob("*") if f.is_file() or f.is_symlink()}
    assert have == want
    assert (p / "share/pathscope/options.def").read_bytes() == \
        (ROOT / "runtime/core/options.def").read_bytes()
    for name in ["bin/pathscope"] + [f"bin/{n}" for n in built]:
        assert os.access(p / name, os.X_OK), name


def test_only_the_runtime_links_mpi(prefix):
    """The symbolizer, the collector, the launcher and the shims are not MPI programs: no MPI library in
    their DT_NEEDED; libpathscope.so of each MPI needs that MPI's library."""
    p, mpis = prefix
    for mpi in mpis:
        lib = p / "lib" / "pathscope" / mpi
        assert MPI_LIBRARY[mpi] in needed(lib / "libpathscope.so")
        others = [lib / "libpathscope-heap.so", lib / "libpathscope-kernel.so",
                  lib / "pathscope-run",
                  *(f for f in (lib / "pathscope-kcollect", p / "bin" / "pathscope-kcollect",
                                p / "bin" / "pathscope-symbolize") if f.exists())]
        for f in others:
            assert not [n for n in needed(f) if "mpi" in n], (f, needed(f))


def test_installed_cli_profiles_and_reports_a_real_run(prefix, tmp_path):
    p, _ = prefix
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = clean_env(**MPI_ENV["openmpi"])
    # (--per-rank all: the rank texts are read below; the environment here is a clean one)
    done = run(MPI_LAUNCHERS["openmpi"] + ["-np", "2", p / "bin" / "pathscope", "run", "-o", "prof",
                                           "--per-rank", "all", "--", ROOT / "build" / "openmpi" / "stencil", "16", "4"],
               cwd=elsewhere, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"pathscope: profile written to {elsewhere}/prof" in done.stderr
    # the prefix's runtime was preloaded, not the checkout's
    rank0 = rank_text(elsewhere / "prof", 0)
    assert re.search(rf"^module\t\d+\t{re.escape(str(p))}/lib/pathscope/openmpi/libpathscope\.so\t",
                     rank0, re.M)
    assert f"{ROOT}/build/openmpi/libpathscope.so" not in rank0
    report = run([p / "bin" / "pathscope", "report", "prof"], cwd=elsewhere)
    assert report.returncode == 0, report.stderr
    assert report.stdout.startswith("pathscope report: prof\n")
    assert re.search(r"^  \d+\. W  size 2, members 0-1, ", report.stdout, re.M), report.stdout
    if (p / "bin" / "pathscope-symbolize").exists():   # names from the prefix's symbolizer
        assert "pathscope-symbolize not found" not in report.stdout
        assert (elsewhere / "prof" / "symbols.tsv").is_file()


def test_installed_run_starts_no_python(prefix, tmp_path):
    """bin/pathscope of the prefix hands `run` to lib/pathscope/<mpi>/pathscope-run: with a
    python3 first on PATH that only exits 99, a good command line runs the program (status 0)
    and a bad one is handed to that python3 (99)."""
    p, _ = prefix
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\nexit 99\n")
    (fake / "python3").chmod(0o755)
    env = clean_env(PATH=f"{fake}:/usr/bin:/bin")
    done = run([p / "bin" / "pathscope", "run", "-o", "prof", "--mpi", "openmpi", "--",
                "/bin/sh", "-c", 'echo "$LD_PRELOAD"'], cwd=tmp_path, env=env)
    assert (done.returncode, done.stdout) == (0, f"{p}/lib/pathscope/openmpi/libpathscope.so\n")
    done = run([p / "bin" / "pathscope", "run", "--bogus", "--", "true"], cwd=tmp_path, env=env)
    assert done.returncode == 99


def test_pip_install_gives_the_pathscope_command(prefix, tmp_path):
    """`pip install .` of the project (a copy of its Python files, so that setuptools' scratch
    files stay out of the checkout) into a fresh virtual environment: offline, with Debian's
    setuptools (--system-site-packages --no-build-isolation)."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "python", project / "python",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    venv = tmp_path / "venv"
    done = run([sys.executable, "-m", "venv", "--system-site-packages", venv], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps",
                "--no-build-isolation", "--disable-pip-version-check", project], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    command = venv / "bin" / "pathscope"
    where = run([venv / "bin" / "python", "-c", "import pathscope; print(pathscope.__file__)"],
                cwd=elsewhere)
    assert Path(where.stdout.strip()).is_relative_to(venv / "lib"), where.stdout
    helped = run([command, "--help"], cwd=elsewhere)
    assert (helped.returncode, helped.stderr) == (0, "")
    assert helped.stdout.startswith("usage: pathscope ")
    # without a runtime: one line that says what to do
    alone = run([command, "run", "--", "true"], cwd=elsewhere)
    assert (alone.returncode, alone.stdout) == (2, "")
    assert alone.stderr == (
        "pathscope: no pathscope runtime found (this pathscope is neither in a checkout nor in "
        "an installed prefix): install one with `cmake --install build/<mpi> --prefix PREFIX` "
        "from a checkout after `make build`, then set PATHSCOPE_HOME=PREFIX\n")
    # with PATHSCOPE_HOME naming an installed prefix: that prefix's runtime
    p, _ = prefix
    home = clean_env(PATHSCOPE_HOME=str(p))
    ran = run([command, "run", "--mpi", "openmpi", "-o", "prof", "--per-rank", "all", "--",
               ROOT / "build" / "openmpi" / "heap_calls"], cwd=elsewhere, env=home)
    assert ran.returncode == 0, ran.stderr
    rank0 = rank_text(elsewhere / "prof", 0)
    assert f"\t{p}/lib/pathscope/openmpi/libpathscope.so\t" in rank0
