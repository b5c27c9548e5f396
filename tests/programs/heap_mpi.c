/* Heap profiling of an MPI program (tests/e2e/test_heap.py): the MPI library's allocations
 * land below MPI_Init; heap profiling goes on after MPI_Finalize until the process exits, so
 * a block freed after MPI_Finalize is no leak and one allocated after it and never freed is.
 * A child forked after MPI_Finalize does not touch the profile. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEPT 4096
#define LATE 777

__attribute__((noinline)) void *keep_across_finalize(void) { return malloc(KEPT); }

__attribute__((noinline)) void leak_after_finalize(void)
{
    void *volatile p = malloc(LATE);
    (void)p;
}

__attribute__((noinline)) void per_rank(int rank)
{
    for (int i = 0; i <= rank; i++) {
        void *volatile p = calloc(100, 1);
        free(p);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    void *kept = keep_across_finalize();
    per_rank(rank);
    double x = rank, sum;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    free(kept);
    leak_after_finalize();
    /* a child forked after MPI_Finalize ends normally: it must not rewrite our rank file */
    pid_t child = fork();
    if (child == 0) exit(0);
    waitpid(child, NULL, 0);
    printf("truth rank=%d kept=%d late=%d per_rank=%d\n", rank, KEPT, LATE, rank + 1);
    return 0;
}
