/* A long-running MPI program for the live view and the control channel (issue 13:
 * tests/e2e/test_top.py, tests/e2e/test_probe_cli.py), watched while it runs.
 *
 *   Each iteration: top_hot_spin computes for about 20 ms (the hot function `pathscope top`
 *   must show), top_probe_target is called PROBE_CALLS times (a function with a real
 *   prologue, for `pathscope probe --add top_probe_target`), then one MPI_Allreduce on
 *   MPI_COMM_WORLD carries rank 0's decision to stop.
 *   Rank 0 stops when the file STOPFILE exists or after MAX_SECONDS (a safety net: a test that
 *   dies must not leave the job running).
 *
 * Usage: top_phases STOPFILE [MAX_SECONDS (default 120)]
 * Prints "iterations N" on rank 0 at the end. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define PROBE_CALLS 10

static volatile double sink;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) void top_hot_spin(double seconds)
{
    double end = now() + seconds, x = 1.0;
    while (now() < end)
        for (int i = 0; i < 10000; i++)
            x = x * 1.0000001 + 1e-9;
    sink = x;
}

__attribute__((noinline)) double top_probe_target(int n)
{
    double s = 0;
    for (int i = 1; i <= n; i++)
        s += 1.0 / i;
    sink = s;
    return s;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: top_phases STOPFILE [MAX_SECONDS]\n");
        return 2;
    }
    double max_seconds = argc > 2 ? atof(argv[2]) : 120;
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double start = now();
    long iterations = 0;
    for (int stop = 0; !stop; iterations++) {
        top_hot_spin(0.02);
        for (int i = 0; i < PROBE_CALLS; i++)
            top_probe_target(100 + i);
        int mine = rank == 0 && (access(argv[1], F_OK) == 0 || now() - start > max_seconds);
        MPI_Allreduce(&mine, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("iterations %ld\n", iterations);
    MPI_Finalize();
    return 0;
}
