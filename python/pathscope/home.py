"""Where pathscope's files are: the runtime libraries, the symbolizer and the option table.

Two layouts hold them:

- a checkout, after `make build MPI=<mpi>`: <root>/build/<mpi>/libpathscope.so (its shims and
  pathscope-kcollect beside it), <root>/build/<mpi>/pathscope-symbolize and
  <root>/runtime/core/options.def;
- an installed prefix, after `cmake --install build/<mpi> --prefix P` (one per MPI, into the same
  P): P/lib/pathscope/<mpi>/libpathscope.so (its shims and pathscope-kcollect beside it),
  P/bin/pathscope-symbolize and P/share/pathscope/options.def.

Which one, the first that applies:
1. $PATHSCOPE_HOME (bin/pathscope of a checkout and of a prefix set it; set it yourself for a
   `pip install`ed CLI): an installed prefix if it has share/pathscope/, else a checkout;
2. the tree this package lies in: a checkout (<root>/python/pathscope, also `pip install -e`) or
   a prefix (P/share/pathscope/python/pathscope);
3. the Python environment's own prefix (sys.prefix) if the runtime was installed there
   (`cmake --install build/<mpi> --prefix $VIRTUAL_ENV` beside `pip install .`);
otherwise there is none, and what needs one (`pathscope run`) says in one line what to do."""
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from pathscope.errors import LaunchError

HOME_VARIABLE = "PATHSCOPE_HOME"
MPI_FLAVOURS = ("openmpi", "mpich")
SHARE = Path("share", "pathscope")  # of an installed prefix
NO_HOME = ("no pathscope runtime found (this pathscope is neither in a checkout nor in an "
           "installed prefix): install one with `cmake --install build/<mpi> --prefix PREFIX` "
           "from a checkout after `make build`, then set PATHSCOPE_HOME=PREFIX")


@dataclass(frozen=True)
class Home:
    root: Path
    installed: bool      # an installed prefix (else a checkout)


def _is_prefix(root: Path) -> bool:
    return (root / SHARE).is_dir()


def find_home() -> Optional[Home]:
    """The checkout or installed prefix pathscope takes its files from (module docstring)."""
    home = os.environ.get(HOME_VARIABLE)
    if home:
        root = Path(home).resolve()
        return Home(root, _is_prefix(root))
    package = Path(__file__).resolve().parent     # <root>/python/pathscope, P/share/pathscope/...
    up = package.parents
    if len(up) > 1 and (up[1] / "runtime" / "core" / "options.def").is_file():
        return Home(up[1], False)
    if len(up) > 3 and up[1] == up[3] / SHARE and (up[1] / "options.def").is_file():
        return Home(up[3], True)
    environment = Path(sys.prefix)
    if (environment / SHARE / "options.def").is_file():
        return Home(environment, True)
    return None


def require_home() -> Home:
    """find_home(), or LaunchError with NO_HOME."""
    home = find_home()
    if home is None:
        raise LaunchError(NO_HOME)
    return home


def options_def_path() -> Path:
    home = require_home()
    if home.installed:
        return home.root / SHARE / "options.def"
    return home.root / "runtime" / "core" / "options.def"


def runtime_library_path(mpi: str) -> Path:
    """The preload library for mpi (may not exist): build/<mpi>/libpathscope.so of a checkout,
    lib/pathscope/<mpi>/libpathscope.so of an installed prefix."""
    home = require_home()
    if home.installed:
        return home.root / "lib" / "pathscope" / mpi / "libpathscope.so"
    return home.root / "build" / mpi / "libpathscope.so"


def build_hint(mpi: Optional[str] = None) -> str:
    """How to get the runtime files of mpi (or of any MPI) where they are missing: `build it
    with: make build MPI=<mpi>` in a checkout, the install command in a prefix."""
    home = find_home()
    if home is None:
        return NO_HOME
    if home.installed:
        build = f"build/{mpi or '<mpi>'}"
        return (f"install it with: cmake --install {build} --prefix {home.root} (in a checkout, "
                f"after make build{f' MPI={mpi}' if mpi else ''})")
    return f"build it with: make build{f' MPI={mpi}' if mpi else ''}"


SYMBOLIZER_VARIABLE = "PATHSCOPE_SYMBOLIZER"
SYMBOLIZER_NAME = "pathscope-symbolize"


def symbolizer_path() -> Optional[Path]:
    """The symbolizer executable: $PATHSCOPE_SYMBOLIZER (as given, even if it does not exist:
    the caller says so), else bin/pathscope-symbolize of an installed prefix or the first
    existing build/<mpi>/pathscope-symbolize of MPI_FLAVOURS in a checkout, else None."""
    chosen = os.environ.get(SYMBOLIZER_VARIABLE)
    if chosen:
        return Path(chosen)
    home = find_home()
    if home is None:
        return None
    if home.installed:
        candidates = [home.root / "bin" / SYMBOLIZER_NAME]
    else:
        candidates = [home.root / "build" / mpi / SYMBOLIZER_NAME for mpi in MPI_FLAVOURS]
    return next((c for c in candidates if c.is_file()), None)


def symbolizer_hint() -> str:
    """What to do when symbolizer_path() is None."""
    home = find_home()
    if home is None:
        return NO_HOME
    if home.installed:
        return (f"not installed in {home.root}/bin: it is built where libdw-dev is installed; "
                f"{build_hint()}")
    return "run `make build`"
