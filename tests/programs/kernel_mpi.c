/* Known system calls on every rank (tests/e2e/test_kernel.py): N getppid() from do_getppid
 * and N write()s of 64 bytes to /dev/null from do_writes, then a barrier.  With "abort",
 * rank 1 calls MPI_Abort after its calls (the collector must still end). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) void do_writes(int fd, long n)
{
    static const char buf[64];
    for (long i = 0; i < n; i++)
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) abort();
}

__attribute__((noinline)) long do_getppid(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++) s += getppid();
    return s;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long n = argc > 1 ? atol(argv[1]) : 1000;
    int fd = open("/dev/null", O_WRONLY);
    do_writes(fd, n);
    long s = do_getppid(n);
    close(fd);
    printf("truth rank=%d tid=%d ok=%d\n", rank, (int)gettid(), s > 0);
    fflush(stdout);
    if (argc > 2 && strcmp(argv[2], "abort") == 0 && rank == 1) MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
