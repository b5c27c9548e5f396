/* MPI_THREAD_MULTIPLE: 2 ranks x 4 threads; thread t of rank 0 sends 1000 messages of
 * (t+1) x 8 bytes to thread t of rank 1 on its own duplicate of MPI_COMM_WORLD (W_d1..W_d4),
 * all threads at once. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 4
#define MESSAGES 1000
static MPI_Comm comms[THREADS];
static int rank;

static void *worker(void *arg)
{
    int t = (int)(long)arg;
    double buf[THREADS];
    for (int i = 0; i < MESSAGES; i++) {
        if (rank == 0) MPI_Send(buf, t + 1, MPI_DOUBLE, 1, t, comms[t]);
        else MPI_Recv(buf, THREADS, MPI_DOUBLE, 0, t, comms[t], MPI_STATUS_IGNORE);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided != MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "threads: MPI_THREAD_MULTIPLE not provided\n");
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int t = 0; t < THREADS; t++) MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)(long)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++) MPI_Comm_free(&comms[t]);
    MPI_Finalize();
    return 0;
}
