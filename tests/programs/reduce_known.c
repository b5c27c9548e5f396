/* A program of known structure for the in-job reduction of the call trees
 * (tests/e2e/test_reduce.py): every rank makes MPI calls whose counts depend on its rank, on
 * several communicators, from two call sites, and one helper thread allocates known blocks.
 *
 * Per world rank r of p:
 *   row = split of MPI_COMM_WORLD by r % 2, col = split by r % 4, dupw = a dup of world (a
 *     fixed number of communicators, whatever p: the distinct paths do not grow with p);
 *   in row_phase: r % 2 + 1 MPI_Allreduce of one int on row (the same on all its ranks);
 *   in col_phase: 2 MPI_Bcast of r % 4 + 1 ints from col's rank 0 (the same count on every
 *     rank of col);
 *   in ring: one MPI_Sendrecv on world to r + 1, from r - 1, of 8 (r + 1) bytes sent;
 *   one MPI_Barrier on dupw from main, and one more from ring;
 *   the helper thread (helper_thread > alloc_blocks): r + 1 malloc of 1000 bytes, all freed
 *     before MPI_Finalize.
 * Argument (optional): seconds to sleep before MPI_Finalize (the tests change the profile
 * directory meanwhile); rank 0 then prints "ready" once every rank is past MPI_Init.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static MPI_Comm row, col, dupw;
static int rank, size;

__attribute__((noinline)) static void row_phase(void)
{
    for (int i = 0; i < rank % 2 + 1; i++) {
        int x = rank, y = 0;
        MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, row);
    }
}

__attribute__((noinline)) static void col_phase(void)
{
    int n = rank % 4 + 1, buf[8] = {0};
    for (int i = 0; i < 2; i++) MPI_Bcast(buf, n, MPI_INT, 0, col);
}

__attribute__((noinline)) static void ring(void)
{
    char out[8 * 1024] = {0}, in[8 * 1024];
    int bytes = 8 * (rank + 1), right = (rank + 1) % size, left = (rank + size - 1) % size;
    int in_bytes = 8 * (left + 1);
    MPI_Sendrecv(out, bytes, MPI_BYTE, right, 7, in, in_bytes, MPI_BYTE, left, 7, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Barrier(dupw);
}

static void *blocks[1024];

__attribute__((noinline)) static void alloc_blocks(int n)
{
    for (int i = 0; i < n; i++) blocks[i] = malloc(1000);
}

__attribute__((noinline)) static void *helper_thread(void *arg)
{
    alloc_blocks(rank + 1);
    return arg;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &row);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 4, rank, &col);
    MPI_Comm_dup(MPI_COMM_WORLD, &dupw);
    if (argc > 1 && rank == 0) {
        printf("ready\n");
        fflush(stdout);
    }
    pthread_t t;
    pthread_create(&t, NULL, helper_thread, NULL);
    pthread_join(t, NULL);
    row_phase();
    col_phase();
    ring();
    MPI_Barrier(dupw);
    for (int i = 0; i < rank + 1; i++) free(blocks[i]);
    if (argc > 1) sleep((unsigned)atoi(argv[1]));
    MPI_Comm_free(&dupw);
    MPI_Comm_free(&col);
    MPI_Comm_free(&row);
    MPI_Finalize();
    return 0;
}
