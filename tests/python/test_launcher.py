"""pathscope-run (runtime/launch): `pathscope run` without Python in the ranks.

Three truths: (1) every command line the launcher starts gives the program byte for byte the
environment, arguments and exit status the Python CLI gives it; (2) every command line Python
refuses (and --help) is refused by the launcher too, which hands it to Python, so bin/pathscope
prints what `python -m pathscope run` prints; (3) under real mpirun of both MPIs no process
execs Python between the launcher and the program.

"The launcher alone" runs build/<mpi>/pathscope-run with an interpreter that does not exist:
it then either starts the program itself or fails with "cannot start the Python CLI"."""
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pathscope.cli import build_parser
from pathscope.options import load_options

ROOT = Path(__file__).resolve().parents[2]
PATHSCOPE = ROOT / "bin" / "pathscope"
LAUNCHERS = [ROOT / "build" / mpi / "pathscope-run" for mpi in ("openmpi", "mpich")]
NO_PYTHON = "/nonexistent/python-must-not-start"
HANDED_OVER = f"pathscope: cannot start the Python CLI {NO_PYTHON}: No such file or directory"
LAUNCH_VARIABLES = ("OMPI_", "PMI_", "PMIX_", "HYDRA_", "SLURM_", "PATHSCOPE_")
SHIMS = ("libpathscope.so", "libpathscope-heap.so", "libpathscope-kernel.so")


@pytest.fixture(scope="module")
def launcher():
    found = next((p for p in LAUNCHERS if p.exists()), None)
    if found is None:
        pytest.skip("make build first (build/<mpi>/pathscope-run)")
    return found


def clean_env(home, **extra):
    """The environment bin/pathscope gives both implementations (LC_ALL set: Python's locale
    coercion adds LC_CTYPE to a C-locale environment, which the launcher does not)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCH_VARIABLES)}
    env.pop("LD_PRELOAD", None)
    env.update(PYTHONPATH=str(ROOT / "python"), PATHSCOPE_HOME=str(home), LC_ALL="C.UTF-8")
    env.update(extra)
    return env


@pytest.fixture
def home(tmp_path):
    """A checkout with empty runtime libraries for both MPIs (ld.so says it cannot preload
    them and runs the program), so that each choice of library is visible in LD_PRELOAD."""
    home = tmp_path / "home"
    (home / "runtime" / "core").mkdir(parents=True)
    shutil.copy(ROOT / "runtime" / "core" / "options.def", home / "runtime" / "core")
    for mpi in ("openmpi", "mpich"):
        (home / "build" / mpi).mkdir(parents=True)
        for name in SHIMS:
            (home / "build" / mpi / name).write_text("")
    work = tmp_path / "work"
    work.mkdir()
    return home


def by_launcher(launcher, args, env, cwd, python=NO_PYTHON):
    return subprocess.run([str(launcher), python, *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=60)


def by_python(args, env, cwd):
    return subprocess.run([sys.executable, "-m", "pathscope", "run", *args],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=60)


def outcome(p):
    return p.returncode, p.stdout, p.stderr


def program_environment(stdout):
    return dict(entry.split("=", 1) for entry in stdout.split("\0") if "=" in entry)


# ---- (1) what the launcher starts, Python starts the same way -------------------------------

ENV0 = ["/usr/bin/env", "-0"]


def valid_flag_values():
    """Every flag of the Python `run` parser with a value it accepts: [(flag, value or None)]."""
    options = {f"option_{o.field}": o for o in load_options(ROOT / "runtime" / "core" /
                                                            "options.def")}
    flags = []
    for action in build_parser(list(options.values()))[1]["run"]._actions:
        if not action.option_strings or action.dest == "help":
            continue
        if action.nargs == 0:
            value = None
        elif action.choices:
            value = list(action.choices)[-1]
        else:
            option = options[action.dest]
            value = {"int": option.accepted.split("|")[-1].split("-")[0],
                     "list": "p2p=path,coll=count", "path": "x y"}[option.kind]
        flags += [(name, value) for name in action.option_strings]
    return flags


def test_every_flag_starts_the_program_without_python(launcher, home, tmp_path):
    """Each spelling of each flag of the Python parser (so a flag added to cli.py or
    options.def that the launcher does not know fails here), alone, as --flag VALUE and as
    --flag=VALUE (-o DIR, -oDIR): the program runs and sees the flag's variable."""
    env = clean_env(home)
    by_env = {f"--{o.field.replace('_', '-')}": o.env for o in load_options(home / "runtime" /
                                                                              "core" /
                                                                              "options.def")}
    by_env.update({"-o": "PATHSCOPE_OUTPUT", "--output": "PATHSCOPE_OUTPUT",
                   "--live-interval": "PATHSCOPE_LIVE"})
    for flag, value in valid_flag_values():
        joined = f"{flag}={value}" if flag.startswith("--") else f"{flag}{value}"
        spellings = [[flag]] if value is None else [[flag, value], [joined]]
        for spelling in spellings:
            p = by_launcher(launcher, [*spelling, "--", *ENV0], env, tmp_path / "work")
            assert p.returncode == 0, (spelling, p.stderr)
            seen = program_environment(p.stdout)
            variable = by_env.get(flag.replace("--no-", "--"))
            if flag == "--mpi":
                assert seen["LD_PRELOAD"] == f"{home}/build/{value}/libpathscope.so"
            elif flag in ("-o", "--output"):
                assert seen[variable] == str(tmp_path / "work" / value)
            else:
                assert seen[variable] == (value or ("off" if "--no-" in flag else "on"))


def valid_command_lines(tmp_path, home):
    """(args, extra environment) that start the program."""
    script = tmp_path / "work" / "prog"
    script.write_text("#!/bin/sh\n/usr/bin/env -0\nprintf '%s\\0' \"$@\"\n")
    script.chmod(0o755)
    (tmp_path / "work" / "existing" / "ranks").mkdir(parents=True)
    every = []
    for flag, value in valid_flag_values():
        if flag not in ("--output", "--mpi") and not any(f == flag for f, _ in every):
            every += [(flag, value)]
    every_args = [a for f, v in every for a in ([f] if v is None else [f, v])]
    mpi_program = next(p for p in (ROOT / "build" / mpi / "lifecycle" for mpi in
                                   ("openmpi", "mpich")) if p.exists())
    return [
        (["-o", "out", "--quiet", "--no-signals", "--no-mpi", "--", *ENV0], {}),
        (every_args + ["--", str(script), "a b", "it's", 'say "x"', "\u00e9", "", "x=y,z"], {}),
        (["-oout/./deep//", "--heap", "--kernel", "--", *ENV0], {}),
        (["--output=/tmp/../tmp/x", "--kernel", "libc", "--", "env", "-0"], {}),
        (["-o", "existing", "--", "./prog", "arg"], {}),
        (["-o", "..", "--", *ENV0], {}),
        (["--", "prog"], {"PATH": f"/nonexistent:{tmp_path / 'work'}:/usr/bin"}),
        (["--", *ENV0], {"PATHSCOPE_OUTPUT": "rel/dir", "PATHSCOPE_SAMPLE_RATE": "10",
                         "PATHSCOPE_UNWIND": "", "PATHSCOPE_HEAP": "on"}),
        (["--quiet", "--", *ENV0], {"PATHSCOPE_QUIET": "off", "PATHSCOPE_OUTPUT": ""}),
        (["--", *ENV0], {"LD_PRELOAD": f"/a.so  {home}/build/openmpi/libpathscope.so::/b.so"}),
        (["--", *ENV0], {"OMPI_COMM_WORLD_RANK": "0", "HYDRA_X": "1"}),
        (["--", *ENV0], {"HYDRA_CONTROL_FD": "9", "OMPI_MCA_x": "1"}),
        (["--", *ENV0], {"PMI_RANK": "0"}),
        (["--", *ENV0], {"PMI_FD": "3", "SLURM_PROCID": "0"}),
        (["--", *ENV0], {"OMPI_MCA_btl": "self", "OMPI_ALLOW_RUN_AS_ROOT": "1"}),
        (["--", *ENV0], {"OMPI_FILE_LOCATION": "/x"}),
        (["--", *ENV0], {"PATHSCOPE_LIB": str(home / "build" / "mpich" / "libpathscope.so"),
                         "PATHSCOPE_SYMBOLIZER": "/x"}),
        # --mpi auto from ldd (srun-like: PMI and SLURM, no launcher of either MPI)
        (["--", str(mpi_program), "bogus-mode"], {"PMI_RANK": "0", "SLURM_PROCID": "0"}),
    ]


def test_the_program_gets_what_python_gives_it(launcher, home, tmp_path):
    """The launcher alone and the Python CLI: the same exit status, the same output of the
    program (its whole environment in order, its arguments) and the same stderr."""
    for args, extra in valid_command_lines(tmp_path, home):
        env = clean_env(home, **extra)
        fast = by_launcher(launcher, args, env, tmp_path / "work")
        assert not fast.stderr.startswith(HANDED_OVER), (args, extra, fast.stderr)
        assert outcome(fast) == outcome(by_python(args, env, tmp_path / "work")), (args, extra)


def test_ldd_names_the_mpi_under_srun(launcher, home, tmp_path):
    """Neither launcher's variables set (PMI under Slurm): the MPI library the program links
    decides (ld.so names the library it could not preload), else PMI means MPICH."""
    env = clean_env(home, PMI_RANK="0", SLURM_PROCID="0", PATH="/usr/bin:/bin")
    for mpi in ("openmpi", "mpich"):
        program = ROOT / "build" / mpi / "lifecycle"
        if not program.exists():
            continue
        p = by_launcher(launcher, ["--", str(program), "preinit"], env, tmp_path / "work")
        assert p.returncode == 0, p.stderr
        assert f"object '{home}/build/{mpi}/libpathscope.so' from LD_PRELOAD" in p.stderr
    p = by_launcher(launcher, ["--", "/bin/sh", "-c", 'echo "$LD_PRELOAD"'], env,
                    tmp_path / "work")
    assert p.stdout == f"{home}/build/mpich/libpathscope.so\n"


# ---- (2) what Python refuses, the launcher refuses, and the error line is Python's -----------

def bad_command_lines(tmp_path):
    """(args, extra environment): each refused by `pathscope run` with one line (or answered
    with the help text), nothing created."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "plain").write_text("")
    (work / "notexec").write_text("#!/bin/sh\n")
    (work / "adir").mkdir()
    (work / "open").mkdir()
    (work / "open").chmod(0o777)
    (work / "link").symlink_to(work / "adir")
    (work / "hasranks" / "ranks").mkdir(parents=True)
    (work / "hasranks" / "ranks").chmod(0o777)
    lib = tmp_path / "fake" / "libpathscope.so"
    lib.parent.mkdir()
    lib.write_text("")
    cases = [
        (["--bogus", "--", "true"], {}),
        (["true"], {}),
        ([], {}),
        (["--"], {}),
        (["--help"], {}),
        (["--mpi", "lam", "--", "true"], {}),
        (["-o", "prof", "--", "true"], {"PATHSCOPE_VERBOSE": "1"}),
        (["-o", "prof", "--", "true"], {"PATHSCOPE_SAMPLE_RATE": "\u0663"}),
        (["-o", "prof", "--", "true"], {"PATHSCOPE_UNWIND": "p2p=path,"}),
        (["-o", "prof", "--", "no-such-program-xyz"], {}),
        (["-o", "prof", "--", "./notexec"], {}),
        (["-o", "prof", "--", "./adir"], {}),
        (["-o", "prof", "--", "true"], {"PATH": ""}),
        (["-o", "plain/prof", "--", "true"], {}),
        (["-o", "open", "--", "true"], {}),
        (["-o", "link", "--", "true"], {}),
        (["-o", "hasranks", "--", "true"], {}),
        (["-o", "x" * 256, "--", "true"], {}),
        (["-o", "/".join(["d" * 200] * 21), "--", "true"], {}),
        (["-o", "a", "--output", "b", "--", "true"], {}),
        (["-o", " ", "--", "true"], {}),
        (["-o", "prof", "--quiet=on", "--", "true"], {}),
        (["-o", "prof", "--sample-rate", "-5", "--", "true"], {}),
        (["-o", "prof", "--sample-rate", "--", "true"], {}),
        (["-o", "prof", "--unwind", "p2p=maybe", "--", "true"], {}),
        (["-o", "prof", "--kernel", "bogus", "--", "true"], {}),
        (["-o", "prof", "--live-interval", "5", "--", "true"], {}),
        (["-o", "prof", "stray", "--", "true"], {}),
        (["-o", "prof", "--heap", "--", "true"], {"PATHSCOPE_LIB": str(lib)}),
        (["-o", "prof", "--", "true"], {"PATHSCOPE_LIB": str(tmp_path / "no-such.so")}),
    ]
    if os.geteuid() == 0:
        (work / "theirs").mkdir()
        os.chown(work / "theirs", 4321, 4321)
        cases.append((["-o", "theirs", "--", "true"], {}))
    return cases


def refused_case(launcher, work, args, extra):
    """The launcher alone hands over; bin/pathscope and Python print the same."""
    env = clean_env(ROOT, **extra)
    alone = by_launcher(launcher, args, env, work)
    assert (alone.returncode, alone.stdout) == (2, ""), (args, extra)
    assert alone.stderr.startswith(HANDED_OVER), (args, extra, alone.stderr)
    front = subprocess.run([str(PATHSCOPE), "run", *args], capture_output=True, text=True,
                           env=env, cwd=work, timeout=60)
    assert outcome(front) == outcome(by_python(args, env, work)), (args, extra)
    if "--help" not in args:
        assert front.returncode == 2 and front.stderr.count("\n") == 1, (args, front.stderr)


def test_refused_command_lines_print_what_python_prints(launcher, tmp_path):
    """Each bad command line: the launcher alone starts nothing (it hands over); bin/pathscope
    (launcher, then Python) and `python -m pathscope run` give the same status, stdout and
    stderr, byte for byte; nothing is created.  (Four cases at a time: each starts Python
    twice.)"""
    cases = bad_command_lines(tmp_path)
    work = tmp_path / "work"
    before = sorted(os.listdir(work))
    with ThreadPoolExecutor(4) as pool:
        for done in [pool.submit(refused_case, launcher, work, args, extra)
                     for args, extra in cases]:
            done.result()
    assert sorted(os.listdir(work)) == before


def test_abbreviated_flags_are_handed_to_python(launcher, home, tmp_path):
    """argparse accepts `--quie` for --quiet (allow_abbrev): the launcher leaves that to
    Python, which then starts the program as it always did."""
    env = clean_env(home)
    args = ["--quie", "--", *ENV0]
    assert by_launcher(launcher, args, env, tmp_path / "work").stderr.startswith(HANDED_OVER)
    handed = by_launcher(launcher, args, env, tmp_path / "work", python=sys.executable)
    assert handed.returncode == 0
    assert program_environment(handed.stdout)["PATHSCOPE_QUIET"] == "on"
    assert outcome(handed) == outcome(by_python(args, env, tmp_path / "work"))


# ---- (3) real mpirun: no Python between the launcher and the program ------------------------

MPIRUN = {"openmpi": ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe"],
          "mpich": ["mpirun.mpich"]}


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_no_rank_starts_python_under_mpirun(launcher, tmp_path, mpi):
    """strace -ff over the whole job: every execve of the job, none of a Python; each of the
    4 ranks goes bin/pathscope (sh) -> pathscope-run (the first built, either MPI's: it links
    no MPI) -> the program, and the profile holds the 4 ranks."""
    build = ROOT / "build" / mpi
    if not (build / "lifecycle").exists() or not shutil.which(MPIRUN[mpi][0]):
        pytest.skip(f"make build MPI={mpi} first")
    if not shutil.which("strace"):
        pytest.skip("strace missing (scripts/setup.sh --test installs it)")
    trace = tmp_path / "trace" / "execve"      # -ff: one file per process, execve.<pid>
    trace.parent.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCH_VARIABLES)}
    p = subprocess.run(["strace", "-ff", "-qq", "-e", "trace=execve", "-e", "signal=none",
                        "-o", str(trace), *MPIRUN[mpi], "-np", "4", str(PATHSCOPE), "run",
                        "-o", "prof", "--quiet", "--", str(build / "lifecycle"), "normal"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    # each process's successful execs, in order
    chains = [re.findall(r'^execve\("([^"]+)".* = 0$', f.read_text(), re.M)
              for f in trace.parent.iterdir()]
    assert not [path for paths in chains for path in paths if "python" in Path(path).name]
    ranks = [paths for paths in chains if str(PATHSCOPE) in paths]
    assert len(ranks) == 4
    for paths in ranks:
        assert paths[paths.index(str(PATHSCOPE)):] == [
            str(PATHSCOPE), str(launcher), str(build / "lifecycle")]
    from pathscope.reader import load_profile
    profile = load_profile(str(tmp_path / "prof"))
    assert not profile.problems()
    assert [r.rank for r in profile.ranks] == [0, 1, 2, 3]
