/* The end of a short multi-rank run under --heap (bench/stress_heap_exit.sh,
 * tests/e2e/test_heap_exit.py): the collectives of the MPI test-suite programs that crashed
 * while exiting (issue 10), then MPI_Finalize, frees after it, and exit.
 *   heap_exit_stress [threads]
 * Every rank does, on MPI_COMM_WORLD (any size >= 2):
 *   MPI_Reduce_scatter_block (MPI_SUM, 3 ints per rank), MPI_Reduce with MPI_LXOR,
 *   an intercommunicator (even / odd world ranks) with MPI_Gather and MPI_Scatter rooted in
 *   the even group, nonblocking MPI_Ibarrier, MPI_Iallreduce, MPI_Ialltoall, MPI_Igather and
 *   MPI_Iscatter completed with MPI_Waitall, then frees the intercommunicator and the
 *   split communicator, and checks every result (a wrong one exits 3).
 * threads: one extra thread per rank allocates and frees small blocks from before MPI_Init
 * until the process exits (it is never joined: it races MPI_Finalize, the frees after it,
 * atexit handlers and the library destructors).
 * Output: one line per rank, "heap_exit_stress rank R ok", before MPI_Finalize. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *churn(void *arg)
{
    (void)arg;
    void *keep[64] = {0};
    for (unsigned i = 0;; i++) {
        unsigned k = (i * 2654435761u) >> 26; /* 0..63 */
        free(keep[k]);
        keep[k] = malloc(16 + (i % 512));
        if (keep[k]) memset(keep[k], (int)i, 16);
    }
    return NULL;
}

static void check(int ok, const char *what, int rank)
{
    if (ok) return;
    fprintf(stderr, "heap_exit_stress: rank %d: wrong result of %s\n", rank, what);
    exit(3);
}

int main(int argc, char **argv)
{
    int threads = argc > 1 && strcmp(argv[1], "threads") == 0;
    if (threads) {
        pthread_t th;
        pthread_create(&th, NULL, churn, NULL);
        pthread_detach(th);
    }
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        fprintf(stderr, "heap_exit_stress: needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    /* reduce_scatter_block: 3 ints per rank, element j of block b is b*10+j from everyone */
    int *send = malloc(sizeof(int) * 3 * (size_t)size), recv3[3];
    for (int b = 0; b < size; b++)
        for (int j = 0; j < 3; j++) send[3 * b + j] = b * 10 + j;
    MPI_Reduce_scatter_block(send, recv3, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (int j = 0; j < 3; j++) check(recv3[j] == size * (rank * 10 + j), "reduce_scatter_block", rank);
    free(send);

    /* logical xor: true on odd ranks only */
    int mine = rank % 2, lxor = -1;
    MPI_Reduce(&mine, &lxor, 1, MPI_INT, MPI_LXOR, 0, MPI_COMM_WORLD);
    if (rank == 0) check(lxor == (size / 2) % 2, "MPI_LXOR reduce", rank);

    /* intercommunicator: even and odd world ranks; gather to / scatter from even group's 0 */
    MPI_Comm half, inter;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    int hrank, remote;
    MPI_Comm_rank(half, &hrank);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 77, &inter);
    MPI_Comm_remote_size(inter, &remote);
    int *from_odd = rank % 2 ? NULL : malloc(sizeof(int) * (size_t)remote);
    int root = rank % 2 ? 0 : (hrank == 0 ? MPI_ROOT : MPI_PROC_NULL);
    MPI_Gather(&rank, 1, MPI_INT, from_odd, 1, MPI_INT, root, inter);
    if (root == MPI_ROOT)
        for (int i = 0; i < remote; i++) check(from_odd[i] == 2 * i + 1, "intercomm gather", rank);
    int got = -1;
    MPI_Scatter(from_odd, 1, MPI_INT, &got, 1, MPI_INT, root, inter);
    if (rank % 2) check(got == rank, "intercomm scatter", rank);
    free(from_odd);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);

    /* nonblocking collectives, completed together */
    MPI_Request req[5];
    int one = 1, total = 0, *a2a_s = malloc(sizeof(int) * (size_t)size), *a2a_r = malloc(sizeof(int) * (size_t)size);
    int *gathered = malloc(sizeof(int) * (size_t)size), *scat = malloc(sizeof(int) * (size_t)size), part = -1;
    for (int i = 0; i < size; i++) {
        a2a_s[i] = rank * 100 + i;
        scat[i] = 1000 + i;
    }
    MPI_Ibarrier(MPI_COMM_WORLD, &req[0]);
    MPI_Iallreduce(&one, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[1]);
    MPI_Ialltoall(a2a_s, 1, MPI_INT, a2a_r, 1, MPI_INT, MPI_COMM_WORLD, &req[2]);
    MPI_Igather(&rank, 1, MPI_INT, gathered, 1, MPI_INT, 0, MPI_COMM_WORLD, &req[3]);
    MPI_Iscatter(scat, 1, MPI_INT, &part, 1, MPI_INT, 0, MPI_COMM_WORLD, &req[4]);
    MPI_Waitall(5, req, MPI_STATUSES_IGNORE);
    check(total == size, "iallreduce", rank);
    for (int i = 0; i < size; i++) check(a2a_r[i] == i * 100 + rank, "ialltoall", rank);
    if (rank == 0)
        for (int i = 0; i < size; i++) check(gathered[i] == i, "igather", rank);
    check(part == 1000 + rank, "iscatter", rank);

    printf("heap_exit_stress rank %d ok\n", rank);
    fflush(stdout);
    MPI_Finalize();
    free(a2a_s);
    free(a2a_r);
    free(gathered);
    free(scat);
    return 0;
}
