"""An mpi4py program with a known Python call structure (tests/e2e/test_pyframes.py): one
function reaches comm.Allreduce from two Python callers, from a recursive function and from a
ctypes callback that the C library's qsort calls; then a busy loop.  The lines the test
expects are marked `# at:NAME`.  argv: seconds of the main thread's CPU time for the busy loop."""
import ctypes
import sys
import time
from array import array

from mpi4py import MPI

comm = MPI.COMM_WORLD
send = array("d", [1.0] * 4)
recv = array("d", [0.0] * 4)
compares = 0


def reduce_once():
    comm.Allreduce(send, recv, op=MPI.SUM)  # at:reduce


def caller_a():
    for _ in range(3):
        reduce_once()  # at:caller_a


def caller_b():
    reduce_once()  # at:caller_b


def recurse(depth):
    if depth == 0:
        reduce_once()  # at:recurse_leaf
        return
    recurse(depth - 1)  # at:recurse


def compare(a, b):
    global compares
    compares += 1
    reduce_once()  # at:compare
    return 0


COMPARE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def through_c():
    items = (ctypes.c_int * 2)(2, 1)
    libc = ctypes.CDLL(None)
    libc.qsort(items, 2, ctypes.sizeof(ctypes.c_int), COMPARE(compare))  # at:qsort


def busy(seconds):
    # (this thread's CPU time: the MPI library's threads spend CPU time of the process too)
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:  # at:busy
        x += 1
    return x


def main():
    caller_a()  # at:main_a
    caller_b()  # at:main_b
    recurse(2)  # at:main_recurse
    through_c()  # at:main_c
    busy(float(sys.argv[1]))  # at:main_busy
    print(f"compares {compares}", flush=True)


main()  # at:module
