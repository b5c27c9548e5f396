/* Passive-target one-sided communication (2 ranks), with computation and sleeps between the
 * calls.  Rank 0 is the origin: ITER times an exclusive lock of rank 1's window, a large
 * MPI_Put, computation, MPI_Get, MPI_Win_flush, a sleep, MPI_Accumulate, MPI_Win_unlock;
 * then MPI_Win_lock_all, MPI_Put, MPI_Win_flush_all, a sleep, MPI_Get, MPI_Win_flush_local,
 * MPI_Win_unlock_all.  Rank 1, the target, makes no one-sided call in that time: it polls
 * with MPI_Test (and, every 64th poll, MPI_Iprobe) until rank 0's final message, so its
 * polls do the progress of rank 0's operations, some of them long among many short ones:
 * the case where sampled poll timing (times 16) could hold more MPI time than the thread's
 * elapsed time.  tests/e2e/test_rma_time.py checks the time and the exact counts. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define BIG 65536 /* doubles put per iteration: 512 KiB */

static volatile double sink;

static void compute(double seconds)
{
    struct timespec a, b;
    double x = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        for (int i = 0; i < 2000; i++) x += i * 1e-9;
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec) < seconds);
    sink = x;
}

int main(int argc, char **argv)
{
    int rank, size, iterations = argc > 1 ? atoi(argv[1]) : 30;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "rma_passive needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    double *base;
    MPI_Win win;
    MPI_Win_allocate(BIG * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &base,
                     &win);
    for (int i = 0; i < BIG; i++) base[i] = rank;
    static double buf[BIG];
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        for (int it = 0; it < iterations; it++) {
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
            MPI_Put(buf, BIG, MPI_DOUBLE, 1, 0, BIG, MPI_DOUBLE, win);
            compute(0.001);
            MPI_Get(buf, 1000, MPI_DOUBLE, 1, 1000, 1000, MPI_DOUBLE, win);
            MPI_Win_flush(1, win);
            usleep(1000);
            MPI_Accumulate(buf, 1000, MPI_DOUBLE, 1, 2000, 1000, MPI_DOUBLE, MPI_SUM, win);
            MPI_Win_unlock(1, win);
            compute(0.001);
            MPI_Win_lock_all(0, win);
            MPI_Put(buf, 50, MPI_DOUBLE, 1, 3000, 50, MPI_DOUBLE, win);
            MPI_Win_flush_all(win);
            usleep(500);
            MPI_Get(buf, 50, MPI_DOUBLE, 1, 4000, 50, MPI_DOUBLE, win);
            MPI_Win_flush_local(1, win);
            MPI_Win_unlock_all(win);
        }
        int done = 1;
        MPI_Send(&done, 1, MPI_INT, 1, 1, MPI_COMM_WORLD);
    } else {
        int done = 0, flag = 0;
        long polls = 0;
        MPI_Request r;
        MPI_Irecv(&done, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &r);
        while (!flag) {
            if (++polls % 64 == 0) {
                int probed;
                MPI_Iprobe(0, 2, MPI_COMM_WORLD, &probed, MPI_STATUS_IGNORE);
            }
            MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        }
        printf("target polled %s\n", polls > 1 ? "more than once" : "once");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
