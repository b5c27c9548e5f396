"""An mpi4py program whose MPI calls come from Python threads (tests/e2e/test_pyframes.py):
the main thread, three threads started one after another (each gets a new thread state, so
the interpreter's count of thread states moves between them), two threads at once on
communicators of their own, and a generator (its frames live in the generator object, not on
the thread's frame stack).  The lines the test expects are marked `# at:NAME`."""
import threading
from array import array

from mpi4py import MPI

comm = MPI.COMM_WORLD
send = array("d", [1.0] * 4)
recv = array("d", [0.0] * 4)


def reduce_on(c):
    c.Allreduce(send, recv, op=MPI.SUM)  # at:reduce


def in_main():
    for _ in range(5):
        reduce_on(comm)  # at:in_main


def one_after_another(k):
    for _ in range(k):
        reduce_on(comm)  # at:after


def side_by_side(c, k):
    for _ in range(k):
        reduce_on(c)  # at:side


def produce(c):
    for i in range(3):
        reduce_on(c)  # at:produce
        yield i


def consume(c):
    return sum(produce(c))  # at:consume


def start(target, *args):
    t = threading.Thread(target=target, args=args)
    t.start()
    return t


def main():
    in_main()  # at:main_in_main
    for k in (2, 3, 4):
        start(one_after_another, k).join()
    mine = [comm.Dup() for _ in range(2)]
    both = [start(side_by_side, mine[0], 6), start(side_by_side, mine[1], 6)]
    for t in both:
        t.join()
    start(consume, comm).join()
    for c in mine:
        c.Free()
    print("threads done", flush=True)


main()  # at:module
