"""`pathscope run`: everything checked and prepared before the program starts.

One `pathscope run` runs per rank (under mpirun, mpiexec or srun), so everything here must be
safe to run concurrently on the same output directory, and cheap.  The final step replaces
this process with the program (os.execve), so the launcher sees the program's own exit status
and signals.  Nothing here prints or exits: problems are LaunchError / OptionError.
"""
from __future__ import annotations

import errno
import os
import shlex
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from pathscope.errors import LaunchError
from pathscope.home import (HOME_VARIABLE, MPI_FLAVOURS, SYMBOLIZER_VARIABLE, build_hint,
                            runtime_library_path)
from pathscope.options import Option, check_value, validate_environment

LIBRARY_VARIABLE = "PATHSCOPE_LIB"
HEAP_SHIM_NAME = "libpathscope-heap.so"  # preloaded with the runtime for PATHSCOPE_HEAP=on
KERNEL_SHIM_NAME = "libpathscope-kernel.so"  # ... for PATHSCOPE_KERNEL other than off
# Variables the CLI reads itself; the runtime would reject them, so the program never sees them.
CLI_VARIABLES = (HOME_VARIABLE, LIBRARY_VARIABLE, SYMBOLIZER_VARIABLE)
DEFAULT_MPI = "openmpi"
_LDD_SIGNATURES = (("libmpi.so.40", "openmpi"), ("libmpich.so", "mpich"),
                   ("libmpi.so.12", "mpich"))
# Open MPI variables that users set themselves (configuration, not a sign of an Open MPI launch)
_OMPI_USER_PREFIXES = ("OMPI_MCA_", "OMPI_ALLOW_RUN_AS_ROOT")


@dataclass(frozen=True)
class LaunchPlan:
    executable: str               # resolved path of the program
    argv: list[str]               # argv as given (argv[0] as typed)
    env: dict[str, str]           # the program's complete environment


def resolve_program(name: str, path_variable: Optional[str] = None) -> str:
    """The executable that execvp would run for name, or LaunchError."""
    if "/" in name:
        candidate = Path(name)
        if not candidate.exists() or candidate.is_dir():
            raise LaunchError(f"program not found: {name}")
        if not os.access(candidate, os.X_OK):
            raise LaunchError(f"program is not executable: {name}")
        return str(candidate)
    found = shutil.which(name, path=path_variable)
    if not found:
        raise LaunchError(f"program not found: {name}")
    return found


# The longest name the runtime creates under a profile directory (runtime/output/outdir.c):
# the directory's absolute path, '/', and this must fit in PATH_MAX with its NUL.
LONGEST_OUTPUT_NAME = "spawned-4194304/ranks/.rank-2147483647.tsv.0123456789abcdef"
PATH_MAX = 4096
OUTPUT_PATH_MAX = PATH_MAX - 2 - len(LONGEST_OUTPUT_NAME)


def _check_output_entry(shown: str, path: Path) -> bool:
    """The runtime's rules for an existing output directory (or its ranks/): not a link, a
    directory, owned by us or root, not writable by others unless sticky.  False: absent."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise LaunchError(f"cannot write to output directory '{shown}': "
                          f"{e.strerror or e}") from e
    if stat.S_ISLNK(st.st_mode):
        raise LaunchError(f"output location '{shown}' is a symbolic link (pathscope does not "
                          f"follow links in the output directory)")
    if not stat.S_ISDIR(st.st_mode):
        raise LaunchError(f"output location '{shown}' exists and is not a directory")
    if st.st_uid not in (os.geteuid(), 0):
        raise LaunchError(f"output directory '{shown}' belongs to another user (uid {st.st_uid}):"
                          f" pathscope writes only into directories owned by you or root")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        raise LaunchError(f"output directory '{shown}' is writable by others (mode "
                          f"0{stat.S_IMODE(st.st_mode):o}) without the sticky bit: remove their "
                          f"write permission (chmod go-w) or choose another directory")
    return True


def prepare_output_directory(directory: str) -> Path:
    """Pre-checks DIR and returns it as an absolute path (links not resolved: the runtime
    refuses an output location that is a link, and must see it).

    The runtime library is the one authority over the output directory: at load time, before
    the program starts, it creates DIR and DIR/ranks, applies these same rules, refuses a
    directory holding another run's profile (or deletes it with --force) and exits with one
    line.  Nothing is created here, so a rejected option or a refused directory leaves nothing
    behind; the checks are repeated only so that the common mistakes are reported in the
    user's own spelling of DIR, word for word as the runtime would."""
    absolute = Path(os.getcwd(), directory)
    if len(os.fsencode(str(absolute))) > OUTPUT_PATH_MAX:
        raise LaunchError(f"output directory path too long: {len(os.fsencode(str(absolute)))} "
                          f"bytes as an absolute path, at most {OUTPUT_PATH_MAX} (every file "
                          f"pathscope writes under it must fit in PATH_MAX, {PATH_MAX})")
    if any(len(os.fsencode(part)) > 255 for part in absolute.parts):
        raise LaunchError(f"cannot write to output directory '{directory}': "
                          f"{os.strerror(errno.ENAMETOOLONG)}")
    if _check_output_entry(directory, absolute):
        _check_output_entry(f"{directory.rstrip('/') or '/'}/ranks".replace("//", "/"),
                            absolute / "ranks")
        return absolute
    # the nearest existing ancestor must be a directory we can create entries in
    parent = absolute.parent
    while True:
        try:
            st = os.stat(parent)
            break
        except FileNotFoundError:
            parent = parent.parent
        except OSError as e:
            raise LaunchError(f"cannot write to output directory '{directory}': "
                              f"{e.strerror or e}") from e
    if not stat.S_ISDIR(st.st_mode):
        raise LaunchError(f"cannot write to output directory '{directory}': "
                          f"{os.strerror(errno.ENOTDIR)}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise LaunchError(f"cannot write to output directory '{directory}': "
                          f"{os.strerror(errno.EACCES)}")
    return absolute


def run_ldd(executable: str) -> str:
    """`ldd executable` output, or "" when ldd fails (scripts, static programs, no ldd)."""
    try:
        done = subprocess.run(["ldd", executable], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout if done.returncode == 0 else ""


def mpi_from_ldd(output: str) -> Optional[str]:
    for signature, mpi in _LDD_SIGNATURES:
        if signature in output:
            return mpi
    return None


def detect_mpi(environ: Mapping[str, str], executable: str,
               ldd: Callable[[str], str] = run_ldd) -> tuple[str, str]:
    """(MPI flavour, why) for --mpi auto.

    1. OMPI_COMM_WORLD_RANK: started by Open MPI's mpirun.
    2. HYDRA_* (MPICH's launcher); PMI_RANK / PMI_FD outside Slurm: MPICH.
    3. Other launch-time OMPI_* variables (not the OMPI_MCA_* / OMPI_ALLOW_RUN_AS_ROOT* a user
       exports): Open MPI.
    4. Otherwise (also under srun, whose PMI variables say nothing about the MPI library): the
       MPI library the program links (ldd), else PMI_* -> MPICH, else Open MPI."""
    if "OMPI_COMM_WORLD_RANK" in environ:
        return "openmpi", "OMPI_COMM_WORLD_RANK is set"
    if any(k.startswith("HYDRA_") for k in environ):
        return "mpich", "HYDRA_* is set"
    under_slurm = "SLURM_PROCID" in environ
    pmi = next((k for k in ("PMI_RANK", "PMI_FD") if k in environ), None)
    if pmi and not under_slurm:
        return "mpich", f"{pmi} is set"
    ompi = sorted(k for k in environ
                  if k.startswith("OMPI_") and not k.startswith(_OMPI_USER_PREFIXES))
    if ompi:
        return "openmpi", f"{ompi[0]} is set"
    linked = mpi_from_ldd(ldd(executable))
    if linked:
        return linked, f"{Path(executable).name} links the {linked} library"
    if pmi:
        return "mpich", f"{pmi} is set"
    return DEFAULT_MPI, "no MPI launcher or library detected; default"


def choose_library(mpi: str, environ: Mapping[str, str], executable: str,
                   ldd: Callable[[str], str] = run_ldd) -> Path:
    """The runtime library to preload: $PATHSCOPE_LIB, else the one of mpi in the checkout
    (build/<mpi>/) or installed prefix (lib/pathscope/<mpi>/) pathscope runs from (home.py)."""
    override = environ.get(LIBRARY_VARIABLE)
    if override:
        path = Path(override)
        if not path.is_file():
            raise LaunchError(f"{LIBRARY_VARIABLE}={override}: no such file")
        return path.resolve()
    why = f"--mpi {mpi}"
    if mpi == "auto":
        mpi, why = detect_mpi(environ, executable, ldd)
    if mpi not in MPI_FLAVOURS:
        raise LaunchError(f"unknown MPI '{mpi}' (known: {', '.join(MPI_FLAVOURS)})")
    path = runtime_library_path(mpi)
    if not path.is_file():
        raise LaunchError(f"runtime library for {mpi} not found: {path} ({why}); "
                          f"{build_hint(mpi)}")
    return path


def prepend_preload(library: Path, current: Optional[str]) -> str:
    entries = (current or "").replace(" ", ":").split(":")
    entries = [e for e in entries if e and e != str(library)]
    return ":".join([str(library)] + entries)


def plan_launch(program_argv: Sequence[str], options: Sequence[Option], environ: Mapping[str, str],
                output: Optional[str], mpi: str, settings: Mapping[str, str],
                ldd: Callable[[str], str] = run_ldd) -> LaunchPlan:
    """Checks everything and builds the program's environment.

    settings: PATHSCOPE_* values chosen by flags (e.g. {"PATHSCOPE_QUIET": "on"}); they
    override the environment.  output: -o DIR, else $PATHSCOPE_OUTPUT, else the runtime's
    default directory in the working directory."""
    if not program_argv:
        raise LaunchError("no program given after '--'")
    # everything is checked before anything is created: the output directory comes last
    validate_environment(environ, options, ignore=CLI_VARIABLES)
    by_env = {o.env: o for o in options}
    for name, value in settings.items():
        if name in by_env:
            check_value(by_env[name], value)
    executable = resolve_program(program_argv[0], environ.get("PATH"))
    env = {k: v for k, v in environ.items() if k not in CLI_VARIABLES}
    output = output or environ.get("PATHSCOPE_OUTPUT") or None
    if output is None and not os.access(".", os.W_OK):
        raise LaunchError("cannot write the profile to the working directory: "
                          f"{os.strerror(13)} (set PATHSCOPE_OUTPUT or pathscope run -o DIR)")
    library = choose_library(mpi, environ, executable, ldd)
    env["LD_PRELOAD"] = prepend_preload(library, environ.get("LD_PRELOAD"))
    env["PATHSCOPE_COMMAND"] = shlex.join(program_argv)
    env.update(settings)
    validate_environment(env, options)
    if env.get("PATHSCOPE_KERNEL", "off") != "off":
        # the libc wrappers go before the C library (they pass through unless eBPF is refused)
        shim = library.parent / KERNEL_SHIM_NAME
        if not shim.is_file():
            raise LaunchError(f"kernel time needs {shim} next to {library.name}; "
                              f"{build_hint()}")
        env["LD_PRELOAD"] = prepend_preload(shim, env["LD_PRELOAD"])
    if env.get("PATHSCOPE_HEAP") == "on":
        # the allocator shim goes first: it must be found before the C library's malloc
        shim = library.parent / HEAP_SHIM_NAME
        if not shim.is_file():
            raise LaunchError(f"heap profiling needs {shim} next to {library.name}; "
                              f"{build_hint()}")
        env["LD_PRELOAD"] = prepend_preload(shim, env["LD_PRELOAD"])
    if output is not None:
        env["PATHSCOPE_OUTPUT"] = str(prepare_output_directory(output))
    return LaunchPlan(executable, list(program_argv), env)


def execute(plan: LaunchPlan) -> None:
    """Replaces this process with the program; returns only by raising LaunchError."""
    try:
        os.execve(plan.executable, plan.argv, plan.env)
    except OSError as e:
        raise LaunchError(f"cannot execute {plan.argv[0]}: {e.strerror}") from e
