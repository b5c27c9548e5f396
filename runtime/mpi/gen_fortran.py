"""Fortran wrappers (emitted by gen_wrappers.py): placeholder replaced below."""


def emit(path, procs, std_procs, stamp):
    with open(path, "w") as f:
        f.write(stamp + '#include "mpi_internal.h"\n')
