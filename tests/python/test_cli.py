"""The command line through bin/pathscope (a real process: `run` replaces itself with the
program, so it cannot run inside pytest): exact error lines, exit status 2, and the
environment `run` gives the program."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PATHSCOPE = ROOT / "bin" / "pathscope"
LAUNCH_VARIABLES = ("OMPI_", "PMI_", "PMIX_", "HYDRA_", "SLURM_", "PATHSCOPE_")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCH_VARIABLES)}
    env.pop("LD_PRELOAD", None)
    env.update(extra)
    return env


def pathscope(*args, env=None, cwd=None):
    return subprocess.run([str(PATHSCOPE), *map(str, args)], capture_output=True, text=True,
                          env=env or clean_env(), cwd=cwd, timeout=60)


def env_lines(stdout):
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)


def fake_library(tmp_path):
    lib = tmp_path / "fake" / "libpathscope.so"
    lib.parent.mkdir()
    lib.write_text("")     # ld.so warns that it cannot be preloaded and runs the program
    return lib


def test_run_sets_environment_with_library_override(tmp_path):
    lib = fake_library(tmp_path)
    p = pathscope("run", "-o", "out", "--quiet", "--no-signals", "--no-mpi", "--",
                  "/usr/bin/env", env=clean_env(PATHSCOPE_LIB=str(lib),
                                                LD_PRELOAD="/x/other.so"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    env = env_lines(p.stdout)
    assert env["LD_PRELOAD"] == f"{lib}:/x/other.so"
    assert env["PATHSCOPE_OUTPUT"] == str(tmp_path / "out")
    assert env["PATHSCOPE_COMMAND"] == "/usr/bin/env"
    assert (env["PATHSCOPE_QUIET"], env["PATHSCOPE_SIGNALS"], env["PATHSCOPE_MPI"]) == (
        "on", "off", "off")
    # the CLI's own variables never reach the program (the runtime would reject them)
    assert "PATHSCOPE_LIB" not in env and "PATHSCOPE_HOME" not in env
    # the runtime creates the output directory at load time (here a fake one: nothing)
    assert not (tmp_path / "out").exists()


def test_run_with_built_runtime(tmp_path):
    """The real library preloaded into a non-MPI program: it loads, validates and stays quiet."""
    lib = ROOT / "build" / "openmpi" / "libpathscope.so"
    if not lib.exists():
        pytest.skip("make build MPI=openmpi first")
    p = pathscope("run", "-o", "prof", "--", "/usr/bin/env", "A=b c", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    env = env_lines(p.stdout)
    assert env["LD_PRELOAD"] == str(lib)
    assert "libpathscope.so" in env["LD_PRELOAD"]
    assert Path(env["PATHSCOPE_OUTPUT"]).is_absolute()
    assert env["PATHSCOPE_OUTPUT"] == str(tmp_path / "prof")
    assert env["PATHSCOPE_COMMAND"] == "/usr/bin/env 'A=b c'"
    assert env["A"] == "b c"


def test_run_without_output_sets_no_directory(tmp_path):
    lib = fake_library(tmp_path)
    p = pathscope("run", "--", "env", env=clean_env(PATHSCOPE_LIB=str(lib)), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "PATHSCOPE_OUTPUT" not in env_lines(p.stdout)


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_run_mpi_choice(tmp_path, mpi):
    if not (ROOT / "build" / mpi / "libpathscope.so").exists():
        pytest.skip(f"make build MPI={mpi} first")
    p = pathscope("run", "--mpi", mpi, "--", "/usr/bin/env", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert env_lines(p.stdout)["LD_PRELOAD"] == str(ROOT / "build" / mpi / "libpathscope.so")


@pytest.mark.parametrize("mpi, launcher", [
    ("openmpi", ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe"]),
    ("mpich", ["mpirun.mpich"]),
])
def test_run_detects_the_launcher(tmp_path, mpi, launcher):
    """--mpi auto under each MPI's own launcher, for a program that links no MPI."""
    if not (ROOT / "build" / mpi / "libpathscope.so").exists() or not shutil.which(launcher[0]):
        pytest.skip(f"make build MPI={mpi} first")
    p = subprocess.run(launcher + ["-np", "1", str(PATHSCOPE), "run", "--", "/usr/bin/env"],
                       capture_output=True, text=True, env=clean_env(), cwd=tmp_path, timeout=60)
    assert p.returncode == 0, p.stderr
    assert env_lines(p.stdout)["LD_PRELOAD"] == str(ROOT / "build" / mpi / "libpathscope.so")


def test_run_exit_status_is_the_programs(tmp_path):
    lib = fake_library(tmp_path)
    p = pathscope("run", "--", "sh", "-c", "exit 7", env=clean_env(PATHSCOPE_LIB=str(lib)),
                  cwd=tmp_path)
    assert p.returncode == 7


@pytest.mark.parametrize("args, extra_env, message", [
    (["run", "--bogus", "--", "true"], {},
     "pathscope run: unrecognized arguments: --bogus (try 'pathscope run --help')"),
    (["run", "true"], {},
     "pathscope run: missing '--' before the program (usage: pathscope run [options] -- "
     "PROGRAM [ARGS...]) (try 'pathscope run --help')"),
    (["run"], {},
     "pathscope run: missing '-- PROGRAM' (usage: pathscope run [options] -- PROGRAM "
     "[ARGS...]) (try 'pathscope run --help')"),
    (["run", "--"], {},
     "pathscope run: no program after '--' (usage: pathscope run [options] -- PROGRAM "
     "[ARGS...]) (try 'pathscope run --help')"),
    (["run", "--mpi", "lam", "--", "true"], {},
     "pathscope run: argument --mpi: invalid choice: 'lam' (choose from 'auto', 'openmpi', "
     "'mpich') (try 'pathscope run --help')"),
    (["run", "--", "true"], {"PATHSCOPE_VERBOSE": "1"},
     "pathscope: unknown option PATHSCOPE_VERBOSE (known: PATHSCOPE_OUTPUT, PATHSCOPE_FORCE, "
     "PATHSCOPE_MPI, "
     "PATHSCOPE_SIGNALS, PATHSCOPE_POLL_TIMING, PATHSCOPE_COMM_KEEP, PATHSCOPE_PER_RANK, PATHSCOPE_PATHS, PATHSCOPE_SAMPLE_RATE, "
     "PATHSCOPE_SAMPLE_CLOCK, PATHSCOPE_SAMPLE_TIMER, PATHSCOPE_UNWIND, PATHSCOPE_HEAP, PATHSCOPE_TRAVERSAL, "
     "PATHSCOPE_TRAVERSAL_CHECK, PATHSCOPE_PYTHON_FRAMES, PATHSCOPE_KERNEL, PATHSCOPE_KERNEL_PERIOD, PATHSCOPE_PROBE, PATHSCOPE_PROBE_METRICS, PATHSCOPE_QUIET, "
     "PATHSCOPE_PID, PATHSCOPE_COMMAND, PATHSCOPE_CONTROL, PATHSCOPE_LIVE)"),
    (["run", "--", "true"], {"PATHSCOPE_QUIET": "yes"},
     "pathscope: invalid value 'yes' for PATHSCOPE_QUIET (accepted: on|off)"),
    (["run", "-o", "prof", "--", "no-such-program-xyz"], {},
     "pathscope: program not found: no-such-program-xyz"),
    (["run", "-o", "plain/prof", "--", "true"], {},
     "pathscope: cannot write to output directory 'plain/prof': Not a directory"),
    (["report", "no-such-dir"], {}, "pathscope: profile directory not found: no-such-dir"),
    (["export", "no-such-dir", "--table", "comms", "--format", "json"], {},
     "pathscope: profile directory not found: no-such-dir"),
    (["report"], {},
     "pathscope report: the following arguments are required: DIR "
     "(try 'pathscope report --help')"),
    ([], {}, "pathscope: missing command: run, report, export, diff, sql, symbolize, probe or top "
             "(try 'pathscope --help')"),
])
def test_errors_are_one_line_and_exit_2(tmp_path, args, extra_env, message):
    (tmp_path / "plain").write_text("")
    p = pathscope(*args, env=clean_env(**extra_env), cwd=tmp_path)
    assert (p.returncode, p.stderr, p.stdout) == (2, message + "\n", "")
    assert not (tmp_path / "prof").exists()


def test_run_library_not_built(tmp_path):
    home = tmp_path / "home"
    shutil.copytree(ROOT / "runtime" / "core", home / "runtime" / "core")
    p = subprocess.run([sys.executable, "-m", "pathscope", "run", "--mpi", "mpich", "--", "true"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60,
                       env=clean_env(PYTHONPATH=str(ROOT / "python"), PATHSCOPE_HOME=str(home)))
    assert p.returncode == 2
    assert p.stderr == (f"pathscope: runtime library for mpich not found: {home}/build/mpich/"
                        f"libpathscope.so (--mpi mpich); build it with: make build MPI=mpich\n")


def test_run_help_lists_every_option():
    p = pathscope("run", "--help")
    assert p.returncode == 0
    for line in (ROOT / "runtime" / "core" / "options.def").read_text().splitlines():
        if line.startswith("PS_OPTION("):
            env = line.split('"')[1]
            assert env in p.stdout
    for flag in ("-o DIR", "--no-mpi", "--no-signals", "--quiet", "--mpi {auto,openmpi,mpich}"):
        assert flag in p.stdout


def test_version():
    p = pathscope("--version")
    assert (p.returncode, p.stdout) == (0, "pathscope 0.1.0\n")


# ---- strictness: one error line, exit 2, nothing created ------------------------------------

RUN_HELP = " (try 'pathscope run --help')"
EXPORT_HELP = " (try 'pathscope export --help')"


@pytest.mark.parametrize("args, extra_env, message", [
    (["run", "-o", "a", "-o", "b", "--", "true"], {},
     "pathscope run: -o/--output given twice" + RUN_HELP),
    (["run", "-o", "a", "--output", "b", "--", "true"], {},
     "pathscope run: -o/--output given twice" + RUN_HELP),
    (["run", "--sample-rate", "100", "--sample-rate", "200", "--", "true"], {},
     "pathscope run: --sample-rate given twice" + RUN_HELP),
    (["run", "-o", "prof", "--quiet", "--quiet", "--", "true"], {},
     "pathscope run: --quiet given twice" + RUN_HELP),
    (["run", "-o", "prof", "--kernel", "--kernel", "libc", "--", "true"], {},
     "pathscope run: --kernel given twice" + RUN_HELP),
    (["run", "--mpi", "mpich", "--mpi", "openmpi", "--", "true"], {},
     "pathscope run: --mpi given twice" + RUN_HELP),
    (["run", "-o", "", "--", "true"], {}, "pathscope run: -o/--output: empty value" + RUN_HELP),
    (["run", "-o", "prof", "--unwind", "", "--", "true"], {},
     "pathscope run: --unwind: empty value" + RUN_HELP),
    (["run", "-o", "prof", "--sample-rate", "abc", "--", "true"], {},
     "pathscope: invalid value 'abc' for PATHSCOPE_SAMPLE_RATE (accepted: 0|10-20000)"),
    (["run", "-o", "prof", "--sample-rate", "-5", "--", "true"], {},
     "pathscope: invalid value '-5' for PATHSCOPE_SAMPLE_RATE (accepted: 0|10-20000)"),
    (["run", "-o", "prof", "--unwind", "p2p=maybe", "--", "true"], {},
     "pathscope: invalid value 'p2p=maybe' for PATHSCOPE_UNWIND (accepted: "
     "env|topo|poll|p2p|coll|rma|io|other|all=path|count)"),
    (["run", "-o", "prof", "--", "true"], {"PATHSCOPE_PID": "abc"},
     "pathscope: invalid value 'abc' for PATHSCOPE_PID (accepted: 1-4194304)"),
    (["run", "-o", "prof", "--", "true"], {"PATHSCOPE_PID": "0"},
     "pathscope: invalid value '0' for PATHSCOPE_PID (accepted: 1-4194304)"),
    (["run", "-o", "prof", "--", "true"], {"PATHSCOPE_SAMPLE_RATE": "\u0663"},
     "pathscope: invalid value '\u0663' for PATHSCOPE_SAMPLE_RATE (accepted: 0|10-20000)"),
    (["report", ""], {}, "pathscope report: DIR: empty value (try 'pathscope report --help')"),
    (["symbolize", " "], {},
     "pathscope symbolize: DIR: empty value (try 'pathscope symbolize --help')"),
    (["export", "d", "--table", "ranks", "--table", "comms"], {},
     "pathscope export: --table given twice" + EXPORT_HELP),
    (["export", "d", "-o", "x", "--output", "y"], {},
     "pathscope export: -o/--output given twice" + EXPORT_HELP),
    (["export", "d", "-o", ""], {}, "pathscope export: -o/--output: empty value" + EXPORT_HELP),
    (["export", "d", "--allow-partial", "--allow-partial"], {},
     "pathscope export: --allow-partial given twice" + EXPORT_HELP),
    (["export", "d", "--format", "folded", "--rank", "abc"], {},
     "pathscope export: argument --rank: invalid non-negative integer value: 'abc'"
     + EXPORT_HELP),
    (["export", "d", "--format", "folded", "--rank", "+1"], {},
     "pathscope export: argument --rank: invalid non-negative integer value: '+1'"
     + EXPORT_HELP),
    (["export", "d", "--metric", "time", "--metric", "bytes", "--format", "folded"], {},
     "pathscope export: --metric given twice" + EXPORT_HELP),
])
def test_strict_command_lines_create_nothing(tmp_path, args, extra_env, message):
    """A repeated flag, an empty value, an invalid value or a malformed variable: one line,
    exit status 2, and nothing created (not even the output directory)."""
    lib = fake_library(tmp_path)
    p = pathscope(*args, env=clean_env(PATHSCOPE_LIB=str(lib), **extra_env), cwd=tmp_path)
    assert (p.returncode, p.stderr, p.stdout) == (2, message + "\n", "")
    assert sorted(os.listdir(tmp_path)) == ["fake"]


def test_run_refused_after_the_options_creates_nothing(tmp_path):
    """Checks that come late (the heap shim next to the library) still come before the
    output directory is created."""
    lib = fake_library(tmp_path)
    p = pathscope("run", "-o", "prof", "--heap", "--", "true",
                  env=clean_env(PATHSCOPE_LIB=str(lib)), cwd=tmp_path)
    assert (p.returncode, p.stderr) == (2, f"pathscope: heap profiling needs "
                                           f"{lib.parent}/libpathscope-heap.so next to "
                                           f"libpathscope.so; build it with: make build\n")
    assert not (tmp_path / "prof").exists()


@pytest.mark.parametrize("value", ["abc", "0", "-1", "", "4194305", "12ab"])
def test_runtime_refuses_a_malformed_pid(tmp_path, value):
    """The environment form: the preloaded runtime checks PATHSCOPE_PID at start-up (it used
    to give no profile and no message)."""
    lib = ROOT / "build" / "openmpi" / "libpathscope.so"
    if not lib.exists():
        pytest.skip("make build MPI=openmpi first")
    p = subprocess.run(["/usr/bin/true"], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path, env=clean_env(LD_PRELOAD=str(lib), PATHSCOPE_PID=value,
                                                   PATHSCOPE_OUTPUT=str(tmp_path / "prof")))
    assert (p.returncode, p.stderr) == (
        2, f"pathscope: invalid value '{value}' for PATHSCOPE_PID (accepted: 1-4194304)\n")
    assert not (tmp_path / "prof").exists()
