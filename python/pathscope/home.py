"""Where pathscope's files are: the repository root, the runtime libraries and the symbolizer.

The root is $PATHSCOPE_HOME (set by bin/pathscope) or, failing that, two levels above this
package (<root>/python/pathscope)."""
import os
from pathlib import Path
from typing import Optional

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


SYMBOLIZER_VARIABLE = "PATHSCOPE_SYMBOLIZER"
SYMBOLIZER_NAME = "pathscope-symbolize"


def symbolizer_path() -> Optional[Path]:
    """The symbolizer executable: $PATHSCOPE_SYMBOLIZER (as given, even if it does not exist:
    the caller says so), else the first existing build/<mpi>/pathscope-symbolize of
    MPI_FLAVOURS, else None."""
    chosen = os.environ.get(SYMBOLIZER_VARIABLE)
    if chosen:
        return Path(chosen)
    for mpi in MPI_FLAVOURS:
        candidate = repo_root() / "build" / mpi / SYMBOLIZER_NAME
        if candidate.is_file():
            return candidate
    return None
