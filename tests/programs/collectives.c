/* Collective, neighbourhood and one-sided operations with known volumes (4 ranks).  The
 * expected per-communicator bytes, from the lower-bound rules of runtime/mpi/volume.c, are in
 * tests/e2e/test_collectives.py. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 4) MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Comm W = MPI_COMM_WORLD;
    int ia[64], ib[64], counts[4], displs[4], rcounts[4], rdispls[4];
    double da[64], db[64];
    MPI_Datatype types[4] = {MPI_INT, MPI_INT, MPI_INT, MPI_INT};
    for (int i = 0; i < 64; i++) { ia[i] = i; ib[i] = 0; da[i] = i; db[i] = 0; }

    MPI_Bcast(ia, 10, MPI_INT, 1, W);
    MPI_Gather(da, 5, MPI_DOUBLE, db, 5, MPI_DOUBLE, 0, W);
    if (rank == 2) MPI_Gather(MPI_IN_PLACE, 5, MPI_DOUBLE, db, 5, MPI_DOUBLE, 2, W);
    else MPI_Gather(da, 5, MPI_DOUBLE, db, 5, MPI_DOUBLE, 2, W);
    MPI_Scatter(ia, 3, MPI_INT, ib, 3, MPI_INT, 0, W);
    for (int j = 0; j < 4; j++) { counts[j] = j + 1; displs[j] = j * 5; }
    MPI_Gatherv(ia, rank + 1, MPI_INT, ib, counts, displs, MPI_INT, 0, W);
    MPI_Scatterv(ia, counts, displs, MPI_INT, ib, rank + 1, MPI_INT, 3, W);
    MPI_Allgather(ia, 2, MPI_INT, ib, 2, MPI_INT, W);
    MPI_Allgather(MPI_IN_PLACE, 2, MPI_INT, ib, 2, MPI_INT, W);
    for (int j = 0; j < 4; j++) { counts[j] = j + 1; displs[j] = j * 5; }
    MPI_Allgatherv(da, rank + 1, MPI_DOUBLE, db, counts, displs, MPI_DOUBLE, W);
    MPI_Alltoall(ia, 2, MPI_INT, ib, 2, MPI_INT, W);
    for (int j = 0; j < 4; j++) {
        counts[j] = j + 1;        /* to rank j: j+1 ints */
        displs[j] = j * 5;
        rcounts[j] = rank + 1;    /* from rank j: what j sends to me */
        rdispls[j] = j * 5;
    }
    MPI_Alltoallv(ia, counts, displs, MPI_INT, ib, rcounts, rdispls, MPI_INT, W);
    int bdispls[4], brdispls[4];
    for (int j = 0; j < 4; j++) { bdispls[j] = displs[j] * 4; brdispls[j] = rdispls[j] * 4; }
    MPI_Alltoallw(ia, counts, bdispls, types, ib, rcounts, brdispls, types, W);
    MPI_Reduce(ia, ib, 6, MPI_INT, MPI_SUM, 0, W);
    MPI_Allreduce(da, db, 1, MPI_DOUBLE, MPI_SUM, W);
    MPI_Allreduce(MPI_IN_PLACE, ib, 3, MPI_INT, MPI_SUM, W);
    MPI_Reduce_scatter_block(ia, ib, 2, MPI_INT, MPI_SUM, W);
    int rs[4] = {1, 2, 3, 4};
    MPI_Reduce_scatter(ia, ib, rs, MPI_INT, MPI_SUM, W);
    MPI_Scan(ia, ib, 4, MPI_INT, MPI_SUM, W);
    MPI_Exscan(ia, ib, 4, MPI_INT, MPI_SUM, W);
    MPI_Barrier(W);
    {
        MPI_Request r;
        MPI_Iallreduce(ia, ib, 2, MPI_INT, MPI_SUM, W, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        MPI_Ibcast(da, 1, MPI_DOUBLE, 0, W, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }

    /* neighbourhood collectives on a non-periodic 2x2 grid: 4 neighbours each (some are
     * MPI_PROC_NULL, which the lower bound counts like the standard's buffers do) */
    MPI_Comm cart;
    int dims[2] = {2, 2}, periods[2] = {0, 0};
    MPI_Cart_create(W, 2, dims, periods, 0, &cart);
    MPI_Neighbor_allgather(ia, 1, MPI_INT, ib, 1, MPI_INT, cart);
    MPI_Neighbor_alltoall(ia, 1, MPI_INT, ib, 1, MPI_INT, cart);
    {
        int c4[4] = {1, 1, 1, 1}, d4[4] = {0, 1, 2, 3}, bd4[4] = {0, 4, 8, 12};
        MPI_Neighbor_alltoallv(ia, c4, d4, MPI_INT, ib, c4, d4, MPI_INT, cart);
        MPI_Aint ad4[4] = {0, 4, 8, 12};
        (void)bd4;
        MPI_Neighbor_alltoallw(ia, c4, ad4, types, ib, c4, ad4, types, cart);
    }

    /* one-sided on the world: attributed to W through the window */
    MPI_Win win;
    int winbuf[100];
    memset(winbuf, 0, sizeof winbuf);
    MPI_Win_create(winbuf, sizeof winbuf, sizeof(int), MPI_INFO_NULL, W, &win);
    MPI_Win_fence(0, win);
    MPI_Put(ia, 5, MPI_INT, (rank + 1) % 4, 0, 5, MPI_INT, win);
    MPI_Win_fence(0, win);
    MPI_Get(ib, 3, MPI_INT, (rank + 1) % 4, 10, 3, MPI_INT, win);
    MPI_Win_fence(0, win);
    MPI_Accumulate(ia, 2, MPI_INT, (rank + 2) % 4, 20, 2, MPI_INT, MPI_SUM, win);
    MPI_Win_fence(0, win);
    MPI_Win_free(&win);

#if MPI_VERSION >= 4
    /* persistent collective: bytes at each start */
    {
        MPI_Request r;
        MPI_Allreduce_init(ia, ib, 2, MPI_INT, MPI_SUM, W, MPI_INFO_NULL, &r);
        for (int i = 0; i < 3; i++) {
            MPI_Start(&r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
        MPI_Request_free(&r);
    }
#endif

    /* a sub-communicator: Bcast of 4 doubles from its rank 0 */
    MPI_Comm parity;
    MPI_Comm_split(W, rank % 2, rank, &parity);
    MPI_Bcast(da, 4, MPI_DOUBLE, 0, parity);

    MPI_Comm_free(&parity);
    MPI_Comm_free(&cart);
    MPI_Finalize();
    return 0;
}
