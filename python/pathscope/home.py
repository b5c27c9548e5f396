"""Where pathscope's files are: the repository root and the runtime libraries in it.

The root is $PATHSCOPE_HOME (set by bin/pathscope) or, failing that, two levels above this
package (<root>/python/pathscope)."""
import os
from pathlib import Path

HOME_VARIABLE = "PATHSCOPE_HOME"
MPI_FLAVOURS = ("openmpi", "mpich")


def repo_root() -> Path:
    home = os.environ.get(HOME_VARIABLE)
    if home:
        return Path(home).resolve()
    return Path(__file__).resolve().parents[2]


def options_def_path() -> Path:
    return repo_root() / "runtime" / "core" / "options.def"


def runtime_library_path(mpi: str) -> Path:
    """The preload library built by `make build MPI=<mpi>` (may not exist)."""
    return repo_root() / "build" / mpi / "libpathscope.so"
