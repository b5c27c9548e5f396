#!/bin/sh
# The pathscope CLI of an installed prefix (`cmake --install build/<mpi> --prefix P` installs
# this as P/bin/pathscope): runs P/share/pathscope/python with Python 3.11 or later (python3 on
# PATH, else /usr/bin/python3).  P is found from this script's own path (links resolved), so the
# prefix can be moved or copied as a whole.  bin/pathscope of a checkout is its own script.
prefix=$(CDPATH= cd -- "$(dirname -- "$(readlink -f -- "$0")")/.." && pwd) || exit 2
py=$(command -v python3 2>/dev/null) || py=/usr/bin/python3
PYTHONPATH="$prefix/share/pathscope/python${PYTHONPATH:+:$PYTHONPATH}" PATHSCOPE_HOME="$prefix" \
  exec "$py" -m pathscope "$@"
