/* Waits that sleep: the end-of-run and start-up collectives of pathscope's own, as nonblocking
 * operations completed by testing with sleeps in between (50 us, doubling up to 1 ms), not by
 * the MPI library's blocking wait.  With more ranks than cores a library that busy-polls
 * (MPICH's ch3/ch4 progress loops) has every waiting rank spin, and the ranks still working
 * -- the sender of the next message of a reduction, a rank still starting -- wait for a CPU
 * among them: the call trees' reduction took 3.8 s at 128 ranks on 2 cores that way, 41 ms
 * with these (bench/reduce.py).  A message arrives at most 1 ms late; only pathscope's own
 * communication waits like this, never the application's. */
#include <time.h>

#include "mpi_internal.h"

int ps_wait_idle(MPI_Request *req) { return ps_wait_idle_status(req, MPI_STATUS_IGNORE); }

int ps_wait_idle_status(MPI_Request *req, MPI_Status *status)
{
    struct timespec pause = {0, 50000};
    for (;;) {
        int done = 0;
        if (PMPI_Test(req, &done, status) != MPI_SUCCESS) return -1;
        if (done) return 0;
        nanosleep(&pause, NULL);
        if (pause.tv_nsec < 1000000) pause.tv_nsec *= 2;
    }
}

int ps_send_idle(const void *buf, int n, MPI_Datatype type, int to, int tag, MPI_Comm comm)
{
    MPI_Request req;
    if (PMPI_Isend(buf, n, type, to, tag, comm, &req) != MPI_SUCCESS) return -1;
    return ps_wait_idle(&req);
}

int ps_recv_idle(void *buf, int n, MPI_Datatype type, int from, int tag, MPI_Comm comm)
{
    MPI_Request req;
    if (PMPI_Irecv(buf, n, type, from, tag, comm, &req) != MPI_SUCCESS) return -1;
    return ps_wait_idle(&req);
}
