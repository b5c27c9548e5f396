#!/usr/bin/env bash
# Installs what the mpi4py transparency test (tests/transparency/test_mpi4py.py) needs, into
# .deps/ (git-ignored).  Idempotent: a second run checks and returns in well under a second.
#
#   Open MPI: Debian's python3-mpi4py (installed by scripts/setup.sh, built against Open MPI),
#             tested with the test/ suite of the matching mpi4py sdist from PyPI.
#   MPICH:    mpi4py 4.x built from its PyPI sdist against MPICH (MPICC=mpicc.mpich) into the
#             venv .deps/venv-mpich; on MPICH 4 (MPI-4) it calls the large-count "_c"
#             functions (MPI_Send_c, ...), so the suite exercises those wrappers too.
#
# Result:
#   .deps/mpi4py-<OPENMPI_VERSION>/test/runtests.py  suite for /usr/bin/python3 (Open MPI)
#   .deps/mpi4py-<MPICH_VERSION>/test/main.py        suite for .deps/venv-mpich/bin/python
#   .deps/venv-mpich/bin/python                      python with mpi4py on MPICH
# Needs no root; if a system package is missing it says what to run and stops.
set -euo pipefail
cd "$(dirname "$0")/.."

OPENMPI_VERSION=3.1.4   # must equal Debian 12's python3-mpi4py
MPICH_VERSION=4.1.2
DEPS=.deps
VENV=$DEPS/venv-mpich
SYSPY=/usr/bin/python3

say() { echo "pathscope: $*" >&2; }
die() { say "$*"; exit 1; }

# --- prerequisites (installed by scripts/setup.sh) -------------------------------------------
missing=()
for p in python3-mpi4py python3-venv python3-dev mpich libmpich-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    die "missing system packages: ${missing[*]}; install them with: sudo apt-get update && sudo apt-get install -y ${missing[*]} (or run: sudo scripts/setup.sh)"
  fi
  die "missing system packages: ${missing[*]}; run scripts/setup.sh first (it installs them)"
fi
have=$("$SYSPY" -c 'import mpi4py; print(mpi4py.__version__)' 2>/dev/null || true)
[ "$have" = "$OPENMPI_VERSION" ] || \
  die "Debian's python3-mpi4py is '$have', expected $OPENMPI_VERSION: update OPENMPI_VERSION in $0"
[ -x .venv/bin/python ] || die "no .venv: run scripts/setup.sh (or make setup) first"
mkdir -p "$DEPS/sdist" || die "cannot create $PWD/$DEPS (not writable by $(id -un)?)"
# Serialised: several builds or test runs may call this at once.
exec 9>"$DEPS/.lock"
flock 9

# --- sdists and their test suites --------------------------------------------------------------
fetch() {  # version -> .deps/sdist/mpi4py-VERSION.tar.gz and .deps/mpi4py-VERSION/
  local v=$1 tgz="$DEPS/sdist/mpi4py-$1.tar.gz"
  if [ ! -f "$tgz" ]; then
    say "downloading the mpi4py $v source distribution from PyPI"
    .venv/bin/python -m pip download -q --disable-pip-version-check --no-binary :all: \
      --no-deps -d "$DEPS/sdist.tmp" "mpi4py==$v" ||
      die "could not download mpi4py==$v (needs access to PyPI)"
    mv "$DEPS/sdist.tmp/mpi4py-$v.tar.gz" "$tgz"
    rm -rf "$DEPS/sdist.tmp"
  fi
  if [ ! -f "$DEPS/mpi4py-$v/test/runtests.py" ]; then
    rm -rf "$DEPS/mpi4py-$v" "$DEPS/extract.tmp"
    mkdir "$DEPS/extract.tmp"
    tar -xzf "$tgz" -C "$DEPS/extract.tmp"
    [ -f "$DEPS/extract.tmp/mpi4py-$v/test/runtests.py" ] || die "$tgz has no test/runtests.py"
    mv "$DEPS/extract.tmp/mpi4py-$v" "$DEPS/mpi4py-$v"
    rm -rf "$DEPS/extract.tmp"
  fi
}
fetch "$OPENMPI_VERSION"
fetch "$MPICH_VERSION"

# --- mpi4py on MPICH ---------------------------------------------------------------------------
stamp="$VENV/.pathscope-mpi4py-$MPICH_VERSION-mpich"
if [ ! -f "$stamp" ] || [ ! -x "$VENV/bin/python" ]; then
  say "building mpi4py $MPICH_VERSION against MPICH into $VENV (takes a few minutes)"
  rm -rf "$VENV"
  "$SYSPY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null ||
    say "(could not upgrade pip in $VENV; going on with the one it has)"
  MPICC=mpicc.mpich "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    --no-binary=mpi4py --no-cache-dir "$DEPS/sdist/mpi4py-$MPICH_VERSION.tar.gz" ||
    die "building mpi4py $MPICH_VERSION against MPICH failed (see the pip output above)"
  so=$("$VENV/bin/python" -c 'import importlib.util as u; print(u.find_spec("mpi4py.MPI").origin)')
  ldd "$so" | grep 'libmpich\.so' >/dev/null || die "mpi4py in $VENV is not linked against MPICH: $so"
  ver=$("$VENV/bin/python" -c 'import mpi4py; print(mpi4py.__version__)')
  [ "$ver" = "$MPICH_VERSION" ] || die "$VENV has mpi4py $ver, expected $MPICH_VERSION"
  touch "$stamp"
fi
say "mpi4py test suites ready: Open MPI $OPENMPI_VERSION (/usr/bin/python3), MPICH $MPICH_VERSION ($VENV)"
