/* Request accounting with exact expected counts (2 ranks; tests/e2e/test_requests.py holds the
 * numbers).  Rank 0 sends, rank 1 receives, in sections whose counts are written beside them:
 *   A  requests released by MPI_Request_free while outstanding: receives whose messages arrive
 *      unseen (freed_recvs, with their posted capacity), a fire-and-forget send (freed_sends),
 *      requests to and from MPI_PROC_NULL (nothing), and a receive seen complete by
 *      MPI_Request_get_status before it is freed (counted exactly)
 *   B  waits and tests on a persistent receive that was never started (an empty status:
 *      nothing moved, nothing counted), alone and mixed with MPI_REQUEST_NULL
 *   C  persistent sends and receives started several times (MPI_Start, MPI_Startall), waited
 *      for with MPI_Waitall over a mix of active, inactive and null requests, MPI_Waitsome and
 *      MPI_Testany; waits on them once completed; a persistent receive and a persistent send
 *      freed while active
 *   D  (MPI 4 only) partitioned send and receive, a persistent collective, MPI_Isendrecv
 *   E  calls that fail: truncated receives on a duplicate of MPI_COMM_WORLD with
 *      MPI_ERRORS_RETURN (MPI_ERR_IN_STATUS from MPI_Waitall, an error from MPI_Wait)
 * Rank 1 prints what the application sees of B and E (flags, indices, return codes, statuses):
 * the test compares it with a run without pathscope. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int rank;

static const char *kind_of(int code)
{
    if (code == MPI_SUCCESS) return "success";
    if (code == MPI_ERR_IN_STATUS) return "err-in-status";
    if (code == MPI_ERR_PENDING) return "pending";
    int cls = -1;
    MPI_Error_class(code, &cls);
    return cls == MPI_ERR_TRUNCATE ? "truncate" : "other-error";
}

static int handler_calls;

/* the error handler of section E: counts its calls (it must run exactly as without pathscope) */
static void on_error(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    (void)code;
    handler_calls++;
}

static void show_status(const char *what, const MPI_Status *st, int with_error)
{
    if (rank != 1) return;
    if (st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG)
        printf("%s: empty status", what);
    else
        printf("%s: source %d tag %d", what, st->MPI_SOURCE, st->MPI_TAG);
    if (with_error) printf(" error %s", kind_of(st->MPI_ERROR));
    printf("\n");
}

int main(int argc, char **argv)
{
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "request_accounting needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    static int freed_buf[3][100], freed_buf2[20], ints[100], big[64];
    static double dbuf[100], dsend[5];
    MPI_Status st, sts[4]; /* read only where MPI defines them (or after a memset) */
    MPI_Request r, rs[4];
    int flag, index, outcount, indices[4];
    memset(ints, 0, sizeof ints);

    /* A1: three receives of 100 ints (400 B posted) freed at once; rank 0 sends 10 ints to
     * each with MPI_Ssend, which returns only once they matched.  W: sent 3 msgs 120 B (rank
     * 0), freed_recvs 3, capacity 1200 (rank 1), nothing received */
    for (int i = 0; i < 3; i++) {
        if (rank == 1) {
            MPI_Irecv(freed_buf[i], 100, MPI_INT, 0, 10 + i, MPI_COMM_WORLD, &r);
            MPI_Request_free(&r);
        } else {
            MPI_Ssend(ints, 10, MPI_INT, 1, 10 + i, MPI_COMM_WORLD);
        }
    }
    /* A2: to and from MPI_PROC_NULL, freed: no message, nothing freed counted */
    if (rank == 1) MPI_Irecv(ints, 5, MPI_INT, MPI_PROC_NULL, 11, MPI_COMM_WORLD, &r);
    else MPI_Isend(ints, 5, MPI_INT, MPI_PROC_NULL, 11, MPI_COMM_WORLD, &r);
    MPI_Request_free(&r);
    /* A3: fire and forget: rank 0 sends 8 B and frees the request (freed_sends 1); rank 1
     * receives it into 64 ints */
    if (rank == 0) {
        MPI_Isend(ints, 2, MPI_INT, 1, 20, MPI_COMM_WORLD, &r);
        MPI_Request_free(&r);
    } else {
        MPI_Recv(big, 64, MPI_INT, 0, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    /* A4: a receive of 16 ints seen complete by MPI_Request_get_status, then freed: counted
     * as received exactly (24 B, on the MPI_Irecv row) */
    if (rank == 1) {
        MPI_Irecv(big, 16, MPI_INT, 0, 30, MPI_COMM_WORLD, &r);
        flag = 0;
        while (!flag) MPI_Request_get_status(r, &flag, &st);
        MPI_Request_free(&r);
    } else {
        MPI_Send(ints, 6, MPI_INT, 1, 30, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* B: a persistent receive never started, on rank 1 (50 ints posted): every wait and test
     * returns at once, nothing is counted */
    if (rank == 1) {
        MPI_Request p;
        MPI_Recv_init(ints, 50, MPI_INT, 0, 40, MPI_COMM_WORLD, &p);
        MPI_Wait(&p, &st);
        show_status("B wait", &st, 0);
        flag = -1;
        MPI_Test(&p, &flag, &st);
        printf("B test: flag %d\n", flag);
        show_status("B test", &st, 0);
        rs[0] = p; rs[1] = MPI_REQUEST_NULL;
        memset(sts, 0, sizeof sts); /* MPI need not set the error fields when it succeeds */
        MPI_Waitall(2, rs, sts);
        show_status("B waitall 0", &sts[0], 1);
        show_status("B waitall 1", &sts[1], 1);
        rs[0] = MPI_REQUEST_NULL; rs[1] = p;
        flag = -1;
        MPI_Testall(2, rs, &flag, MPI_STATUSES_IGNORE);
        printf("B testall: flag %d, request %s\n", flag, rs[1] == p ? "kept" : "changed");
        rs[0] = p; rs[1] = MPI_REQUEST_NULL;
        MPI_Waitany(2, rs, &index, &st);
        printf("B waitany: index %s\n", index == MPI_UNDEFINED ? "undefined" : "defined");
        flag = -1;
        MPI_Testany(2, rs, &index, &flag, MPI_STATUS_IGNORE);
        printf("B testany: flag %d index %s\n", flag, index == MPI_UNDEFINED ? "undefined" : "defined");
        MPI_Waitsome(2, rs, &outcount, indices, MPI_STATUSES_IGNORE);
        printf("B waitsome: outcount %s\n", outcount == MPI_UNDEFINED ? "undefined" : "defined");
        MPI_Testsome(2, rs, &outcount, indices, sts);
        printf("B testsome: outcount %s\n", outcount == MPI_UNDEFINED ? "undefined" : "defined");
        MPI_Request_free(&p);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* C1: a persistent send of 5 doubles (40 B) and a persistent receive of 100 doubles, both
     * started 4 times (MPI_Start) and waited for; then waited for and tested once more while
     * inactive.  W: sent 4 msgs 160 B (MPI_Start row: 160 B), received 4 msgs 160 B
     * (MPI_Recv_init row) */
    {
        MPI_Request p;
        if (rank == 0) MPI_Send_init(dsend, 5, MPI_DOUBLE, 1, 50, MPI_COMM_WORLD, &p);
        else MPI_Recv_init(dbuf, 100, MPI_DOUBLE, 0, 50, MPI_COMM_WORLD, &p);
        for (int round = 0; round < 4; round++) {
            MPI_Start(&p);
            MPI_Wait(&p, &st);
        }
        MPI_Wait(&p, &st);
        show_status("C1 wait after", &st, 0);
        MPI_Test(&p, &flag, MPI_STATUS_IGNORE);
        MPI_Request_free(&p);
    }
    /* C2: two persistent sends (3 and 7 ints) against two persistent receives of 10 ints,
     * started together twice (MPI_Startall); rank 1 waits with MPI_Waitall over
     * {r1, MPI_REQUEST_NULL, r3 never started, r2}.  W: sent 4 msgs 80 B (MPI_Startall row),
     * received 4 msgs 80 B.  Then once more the first pair only, with MPI_Start: rank 1
     * waits with MPI_Waitsome over {null, r3, r1} and tests MPI_Testany over the same (all
     * inactive now): sent 1 msg 12 B, received 1 msg 12 B */
    {
        MPI_Request p[3];
        if (rank == 0) {
            MPI_Send_init(ints, 3, MPI_INT, 1, 60, MPI_COMM_WORLD, &p[0]);
            MPI_Send_init(ints, 7, MPI_INT, 1, 61, MPI_COMM_WORLD, &p[1]);
            for (int round = 0; round < 2; round++) {
                MPI_Startall(2, p);
                MPI_Waitall(2, p, MPI_STATUSES_IGNORE);
            }
            MPI_Start(&p[0]);
            MPI_Wait(&p[0], MPI_STATUS_IGNORE);
            MPI_Request_free(&p[0]);
            MPI_Request_free(&p[1]);
        } else {
            MPI_Recv_init(big, 10, MPI_INT, 0, 60, MPI_COMM_WORLD, &p[0]);
            MPI_Recv_init(big + 10, 10, MPI_INT, 0, 61, MPI_COMM_WORLD, &p[1]);
            MPI_Recv_init(big + 20, 10, MPI_INT, 0, 62, MPI_COMM_WORLD, &p[2]);
            for (int round = 0; round < 2; round++) {
                MPI_Startall(2, p);
                rs[0] = p[0]; rs[1] = MPI_REQUEST_NULL; rs[2] = p[2]; rs[3] = p[1];
                memset(sts, 0, sizeof sts);
                MPI_Waitall(4, rs, sts);
                show_status("C2 waitall 0", &sts[0], 1);
                show_status("C2 waitall 1", &sts[1], 1);
                show_status("C2 waitall 2", &sts[2], 1);
                show_status("C2 waitall 3", &sts[3], 1);
            }
            MPI_Start(&p[0]);
            rs[0] = MPI_REQUEST_NULL; rs[1] = p[2]; rs[2] = p[0];
            memset(sts, 0, sizeof sts);
            MPI_Waitsome(3, rs, &outcount, indices, sts);
            printf("C2 waitsome: outcount %d index %d\n", outcount, indices[0]);
            show_status("C2 waitsome", &sts[0], 0);
            flag = -1;
            MPI_Testany(3, rs, &index, &flag, &st);
            printf("C2 testany: flag %d index %s\n", flag, index == MPI_UNDEFINED ? "undefined" : "defined");
            for (int i = 0; i < 3; i++) MPI_Request_free(&p[i]);
        }
    }
    /* C3: freed while active: rank 1 starts a persistent receive of 20 ints (80 B posted) and
     * frees it; rank 0 Ssends it 4 ints (freed_recvs 1, capacity 80; sent 1 msg 16 B).  Rank 0
     * starts a persistent send of 6 ints and frees it (freed_sends 1; sent 1 msg 24 B at the
     * start); rank 1 receives it (1 msg 24 B) */
    if (rank == 1) {
        MPI_Request p;
        MPI_Recv_init(freed_buf2, 20, MPI_INT, 0, 70, MPI_COMM_WORLD, &p);
        MPI_Start(&p);
        MPI_Request_free(&p);
        MPI_Recv(big, 64, MPI_INT, 0, 71, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Request p;
        MPI_Ssend(ints, 4, MPI_INT, 1, 70, MPI_COMM_WORLD);
        MPI_Send_init(ints, 6, MPI_INT, 1, 71, MPI_COMM_WORLD, &p);
        MPI_Start(&p);
        MPI_Request_free(&p);
    }
    MPI_Barrier(MPI_COMM_WORLD);

#if MPI_VERSION >= 4
    /* D: partitioned: 4 partitions of 2 ints (32 B), twice: sent 2 msgs 64 B (MPI_Start row),
     * received 2 msgs 64 B (MPI_Precv_init row).  A persistent broadcast of 8 doubles from
     * rank 0, 3 times, then waited for once more while inactive: MPI_Start row + 3 x 64 B
     * (rank 1's share of the volume) */
    {
        MPI_Request p;
        static int part[8];
        if (rank == 0) MPI_Psend_init(part, 4, 2, MPI_INT, 1, 80, MPI_COMM_WORLD, MPI_INFO_NULL, &p);
        else MPI_Precv_init(part, 4, 2, MPI_INT, 0, 80, MPI_COMM_WORLD, MPI_INFO_NULL, &p);
        for (int round = 0; round < 2; round++) {
            MPI_Start(&p);
            if (rank == 0)
                for (int k = 0; k < 4; k++) MPI_Pready(k, p);
            MPI_Wait(&p, MPI_STATUS_IGNORE);
        }
        MPI_Request_free(&p);
        MPI_Bcast_init(dbuf, 8, MPI_DOUBLE, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &p);
        for (int round = 0; round < 3; round++) {
            MPI_Start(&p);
            MPI_Wait(&p, MPI_STATUS_IGNORE);
        }
        MPI_Wait(&p, MPI_STATUS_IGNORE);
        MPI_Request_free(&p);
        /* MPI_Isendrecv with the partner, 4 ints out, room for 10 in: sent 2 msgs 32 B,
         * received 2 msgs 32 B (MPI_Isendrecv row: 32 B at the posts, 32 B at completion).
         * (MPICH 4.0 refuses MPI_Request_free on its requests.) */
        int in[10];
        MPI_Isendrecv(ints, 4, MPI_INT, 1 - rank, 85, in, 10, MPI_INT, 1 - rank, 85,
                      MPI_COMM_WORLD, &p);
        MPI_Wait(&p, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
#endif

    /* E: failures, on a duplicate of MPI_COMM_WORLD whose error handler counts its calls and
     * returns.  Rank 0 sends 10 ints (tag 90), 3 ints (tag 91), 10 ints (tag 92), then 10 and
     * 3 ints again (tags 93, 94): 5 msgs 144 B.  Rank 1 receives the first into 1 int
     * (truncated) and the second into 10 ints with one MPI_Waitall (MPI_ERR_IN_STATUS; MPICH
     * leaves the second pending, Open MPI completes it), the third into 1 int with MPI_Wait
     * (an error), the last two like the first two but with MPI_STATUSES_IGNORE: 2 msgs 24 B
     * received, 3 failed requests */
    MPI_Comm dup;
    MPI_Errhandler counting;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_create_errhandler(on_error, &counting);
    MPI_Comm_set_errhandler(dup, counting);
    /* MPICH raises the errors of MPI_Waitall on MPI_COMM_WORLD */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, counting);
    if (rank == 0) {
        /* Ssend: both messages are matched (and the first truncated) before MPI_Waitall */
        MPI_Ssend(big, 10, MPI_INT, 1, 90, dup);
        MPI_Ssend(big, 3, MPI_INT, 1, 91, dup);
        MPI_Barrier(dup);
        MPI_Send(big, 10, MPI_INT, 1, 92, dup);
        MPI_Ssend(big, 10, MPI_INT, 1, 93, dup);
        MPI_Ssend(big, 3, MPI_INT, 1, 94, dup);
        MPI_Barrier(dup);
    } else {
        int one, ten[10], count = -1;
        MPI_Irecv(&one, 1, MPI_INT, 0, 90, dup, &rs[0]);
        MPI_Irecv(ten, 10, MPI_INT, 0, 91, dup, &rs[1]);
        MPI_Barrier(dup);
        memset(sts, 0, sizeof sts);
        int rc = MPI_Waitall(2, rs, sts);
        printf("E waitall: %s, requests %s %s\n", kind_of(rc),
               rs[0] == MPI_REQUEST_NULL ? "null" : "live", rs[1] == MPI_REQUEST_NULL ? "null" : "live");
        show_status("E waitall 0", &sts[0], 1);
        if (rs[1] != MPI_REQUEST_NULL) {   /* MPICH leaves it pending */
            rc = MPI_Wait(&rs[1], &sts[1]);
            printf("E wait pending: %s\n", kind_of(rc));
        } else {
            show_status("E waitall 1", &sts[1], 1);
        }
        MPI_Get_count(&sts[1], MPI_INT, &count);
        printf("E second receive: %d ints\n", count);
        MPI_Irecv(&one, 1, MPI_INT, 0, 92, dup, &r);
        rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
        printf("E wait: %s, request %s\n", kind_of(rc), r == MPI_REQUEST_NULL ? "null" : "live");
        /* the same failure with MPI_STATUSES_IGNORE (pathscope passes its own statuses) */
        MPI_Irecv(&one, 1, MPI_INT, 0, 93, dup, &rs[0]);
        MPI_Irecv(ten, 10, MPI_INT, 0, 94, dup, &rs[1]);
        MPI_Barrier(dup);
        rc = MPI_Waitall(2, rs, MPI_STATUSES_IGNORE);
        printf("E waitall ignoring statuses: %s, requests %s %s\n", kind_of(rc),
               rs[0] == MPI_REQUEST_NULL ? "null" : "live", rs[1] == MPI_REQUEST_NULL ? "null" : "live");
        if (rs[1] != MPI_REQUEST_NULL) {
            rc = MPI_Wait(&rs[1], MPI_STATUS_IGNORE);
            printf("E wait pending: %s\n", kind_of(rc));
        }
        printf("E error handler calls: %d\n", handler_calls);
    }
    MPI_Comm_free(&dup);
    MPI_Finalize();
    return 0;
}
