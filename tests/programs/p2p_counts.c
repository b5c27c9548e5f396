/* Point-to-point test program with hand-countable traffic (4 ranks).  The expected calls and
 * bytes per (communicator, operation) are written out in tests/e2e/test_p2p.py; each section
 * below says what it adds.  Every receive posts a buffer larger than the message, so received
 * bytes must come from the status. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 4) {
        if (rank == 0) fprintf(stderr, "p2p_counts needs 4 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    int right = (rank + 1) % 4, left = (rank + 3) % 4, partner = rank ^ 1;
    int ibuf[1000];
    double dbuf[100], dsend[100];
    unsigned char bytes[256];
    memset(ibuf, 0, sizeof ibuf);
    memset(dsend, 0, sizeof dsend);
    memset(bytes, 7, sizeof bytes);

    /* A: blocking ring, 3 rounds: Send 100 ints (400 B), Recv into 1000 ints, status ignored */
    for (int round = 0; round < 3; round++) {
        if (rank % 2 == 0) {
            MPI_Send(ibuf, 100, MPI_INT, right, 1, MPI_COMM_WORLD);
            MPI_Recv(ibuf + 100, 1000 - 100, MPI_INT, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(ibuf + 100, 1000 - 100, MPI_INT, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(ibuf, 100, MPI_INT, right, 1, MPI_COMM_WORLD);
        }
    }

    /* B: nonblocking ring, 5 rounds: 7 doubles (56 B), posted receive of 100 */
    for (int round = 0; round < 5; round++) {
        MPI_Request r[2];
        MPI_Irecv(dbuf, 100, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &r[0]);
        MPI_Isend(dsend, 7, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &r[1]);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    }

    /* C: Sendrecv with the partner, 2 rounds: 3 ints out (12 B), 3 ints in */
    for (int round = 0; round < 2; round++)
        MPI_Sendrecv(ibuf, 3, MPI_INT, partner, 3, ibuf + 10, 10, MPI_INT, partner, 3,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    /* D: MPI_PROC_NULL moves nothing */
    MPI_Send(ibuf, 50, MPI_INT, MPI_PROC_NULL, 4, MPI_COMM_WORLD);
    MPI_Recv(ibuf, 50, MPI_INT, MPI_PROC_NULL, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    /* E: persistent pair exchange, 3 rounds of 2 doubles (16 B), then freed */
    {
        MPI_Request r[2];
        MPI_Send_init(dsend, 2, MPI_DOUBLE, partner, 5, MPI_COMM_WORLD, &r[0]);
        MPI_Recv_init(dbuf, 100, MPI_DOUBLE, partner, 5, MPI_COMM_WORLD, &r[1]);
        for (int round = 0; round < 3; round++) {
            MPI_Startall(2, r);
            MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        }
        MPI_Request_free(&r[0]);
        MPI_Request_free(&r[1]);
    }

    /* F: rank r>0 Ssends r*10 bytes to rank 0, which probes (ANY_SOURCE) and receives */
    if (rank == 0) {
        for (int i = 1; i < 4; i++) {
            MPI_Status st;
            int n;
            MPI_Probe(MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_BYTE, &n);
            MPI_Recv(bytes, 256, MPI_BYTE, st.MPI_SOURCE, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    } else {
        MPI_Ssend(bytes, rank * 10, MPI_BYTE, 0, 6, MPI_COMM_WORLD);
    }

    /* G: matched probe: rank 3 sends 33 bytes to rank 2 */
    if (rank == 3) MPI_Send(bytes, 33, MPI_BYTE, 2, 7, MPI_COMM_WORLD);
    if (rank == 2) {
        MPI_Message msg;
        MPI_Mprobe(3, 7, MPI_COMM_WORLD, &msg, MPI_STATUS_IGNORE);
        MPI_Mrecv(bytes, 256, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    }

    /* H: rank 0 Isends 8 bytes to rank 1 and polls with MPI_Test; rank 1 uses MPI_Waitany */
    if (rank == 0) {
        MPI_Request r;
        int flag = 0;
        MPI_Isend(bytes, 8, MPI_BYTE, 1, 8, MPI_COMM_WORLD, &r);
        while (!flag) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    }
    if (rank == 1) {
        MPI_Request r;
        int idx;
        MPI_Irecv(bytes, 256, MPI_BYTE, 0, 8, MPI_COMM_WORLD, &r);
        MPI_Waitany(1, &r, &idx, MPI_STATUS_IGNORE);
    }

    /* I: fire and forget: rank 2 Isends 4 bytes to rank 3 and frees the request */
    if (rank == 2) {
        MPI_Request r;
        MPI_Isend(bytes, 4, MPI_BYTE, 3, 9, MPI_COMM_WORLD, &r);
        MPI_Request_free(&r);
    }
    if (rank == 3) MPI_Recv(bytes, 256, MPI_BYTE, 2, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    /* J: pairs {0,1} and {2,3}: one int each way on the split communicator */
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &pair);
    {
        int prank;
        MPI_Comm_rank(pair, &prank);
        if (prank == 0) {
            MPI_Send(ibuf, 1, MPI_INT, 1, 10, pair);
            MPI_Recv(ibuf, 10, MPI_INT, 1, 10, pair, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(ibuf, 10, MPI_INT, 0, 10, pair, MPI_STATUS_IGNORE);
            MPI_Send(ibuf, 1, MPI_INT, 0, 10, pair);
        }
    }

    /* K: paused: nothing here is recorded, but the duplicate is still named */
    MPI_Comm dup;
    MPI_Pcontrol(0);
    for (int i = 0; i < 5; i++)
        MPI_Sendrecv(bytes, 100, MPI_BYTE, partner, 11, bytes + 100, 100, MPI_BYTE, partner, 11,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Pcontrol(1);
    MPI_Barrier(dup);

    /* L: polls: 1000 MPI_Iprobe by rank 0 that find nothing (timed 1 in 16, counted all) */
    if (rank == 0)
        for (int i = 0; i < 1000; i++) {
            int flag;
            MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        }

    MPI_Comm_free(&dup);
    MPI_Comm_free(&pair);
    MPI_Finalize();
    return 0;
}
