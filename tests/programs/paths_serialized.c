/* Counted MPI calls from two threads under MPI_THREAD_SERIALIZED (tests/e2e/test_paths.py):
 * the main thread calls MPI_Comm_rank 1000 times and MPI_Comm_size 7 times, a second thread
 * (joined before the main thread continues: serialized) calls MPI_Comm_rank 300 times and
 * MPI_Allreduce once.  Each thread's tree must hold exactly its own calls. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

static void *worker(void *arg)
{
    int r;
    for (int i = 0; i < 300; i++) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    double v = 1.0;
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return arg;
}

int main(int argc, char **argv)
{
    int provided, r, n;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    if (provided < MPI_THREAD_SERIALIZED) {
        fprintf(stderr, "paths_serialized: MPI_THREAD_SERIALIZED not provided\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    for (int i = 0; i < 1000; i++) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    for (int i = 0; i < 7; i++) MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Finalize();
    return 0;
}
