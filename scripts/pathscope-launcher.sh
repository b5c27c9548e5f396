#!/bin/bash
# (bash, not sh: dash can leave this script's descriptor open in the program it execs; see
# bin/pathscope)
# The pathscope CLI of an installed prefix (`cmake --install build/<mpi> --prefix P` installs
# this as P/bin/pathscope): runs P/share/pathscope/python with Python 3.11 or later (python3 on
# PATH, else /usr/bin/python3).  P is found from this script's own path (links resolved), so the
# prefix can be moved or copied as a whole.  bin/pathscope of a checkout is its own script.
# `pathscope run` goes to the compiled launcher P/lib/pathscope/<mpi>/pathscope-run when one is
# installed, so that no rank of a job starts Python (runtime/launch/run.c).
self=$(PATH=/usr/bin:/bin readlink -f -- "$0") || exit 2  # (the user's PATH may be empty)
prefix=${self%/*/*}
py=$(command -v python3 2>/dev/null) || py=/usr/bin/python3
PYTHONPATH="$prefix/share/pathscope/python${PYTHONPATH:+:$PYTHONPATH}"
PATHSCOPE_HOME=$prefix
export PYTHONPATH PATHSCOPE_HOME
if [ "$1" = run ]; then
  for launcher in "$prefix/lib/pathscope/openmpi/pathscope-run" \
                  "$prefix/lib/pathscope/mpich/pathscope-run"; do
    if [ -x "$launcher" ]; then
      shift
      exec "$launcher" "$py" "$@"
    fi
  done
fi
exec "$py" -m pathscope "$@"
