/* Cost of call-path unwinding at an MPI call, by stack depth (bench/unwind.py).
 *
 *   unwind_depth DEPTH ITERATIONS
 *
 * Calls MPI_Comm_rank ITERATIONS times from a recursion DEPTH frames deep (noinline,
 * no tail calls: each level is one real frame), in CHUNKS timed chunks; rank 0 prints
 *   unwind depth=D iterations=N ns_per_call=MEDIAN_CHUNK
 * MPI_Comm_rank is the cheapest MPI call, so the difference between runs with
 * PATHSCOPE_UNWIND=env=path (a walk at every call) and env=count (no walk) is the walk and
 * the tree update alone.  The binary knows nothing about pathscope. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHUNKS 51

static volatile int sink;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

__attribute__((noinline)) static void calls(long n)
{
    int r;
    for (long i = 0; i < n; i++) {
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
        sink = r;
    }
}

__attribute__((noinline)) static void descend(int depth, long n)
{
    if (depth <= 1) calls(n);
    else descend(depth - 1, n);
    __asm__ __volatile__("" ::: "memory"); /* no tail call: every level keeps its frame */
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int depth = argc > 1 ? atoi(argv[1]) : 30;
    long iterations = argc > 2 ? atol(argv[2]) : 1000000;
    /* main, descend x (depth - 1), calls: the MPI call is made depth + 1 frames below main */
    descend(depth, iterations / 10); /* warm the caches */
    double per_chunk[CHUNKS];
    long chunk = iterations / CHUNKS;
    for (int c = 0; c < CHUNKS; c++) {
        double t0 = now_ns();
        descend(depth, chunk);
        per_chunk[c] = (now_ns() - t0) / (double)chunk;
    }
    qsort(per_chunk, CHUNKS, sizeof per_chunk[0], cmp);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        printf("unwind depth=%d iterations=%ld ns_per_call=%.2f\n", depth, chunk * CHUNKS,
               per_chunk[CHUNKS / 2]);
    MPI_Finalize();
    return 0;
}
