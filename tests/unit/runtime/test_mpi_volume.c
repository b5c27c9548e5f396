/* Unit tests of the collective volume rules (mpi: ps_vol_*, every rule), on 3 ranks (ctest:
 * mpirun -np 3).  Each case gives this rank's contribution in bytes, worked out by hand from
 * the rule's comment in the runtime (the mpisee paper's appendix): p = 3, MPI_INT 4 bytes,
 * MPI_DOUBLE 8, MPI_SHORT 2.  The rules only query the communicator (size, rank, topology),
 * so the collectives themselves are never called.
 */
#include <stdint.h>

#include "check.h"
#include "mpi_internal.h"

static int rank;

static void test_rooted(void)
{
    MPI_Comm w = MPI_COMM_WORLD;
    /* Bcast of 5 ints from root 1: the root 0, the others receive 20 */
    CHECK_INT(ps_vol_bcast(5, MPI_INT, 1, w), rank == 1 ? 0 : 20);
    /* Gather: every rank its m = 3 ints = 12 (the receive side, 7 doubles, is the root's
     * buffer per rank and does not count) */
    int sbuf[4];
    CHECK_INT(ps_vol_gather(sbuf, 3, MPI_INT, 7, MPI_DOUBLE, 0, w), 12);
    /* ... in place: the root's block is recvcount x recvtype = 56; MPI_IN_PLACE elsewhere is
     * not in place (only the root may pass it): the send side, 12 */
    CHECK_INT(ps_vol_gather(MPI_IN_PLACE, 3, MPI_INT, 7, MPI_DOUBLE, 0, w), rank == 0 ? 56 : 12);
    /* Scatter: the m received, 7 doubles = 56; the root in place: sendcount 3 ints = 12 */
    int rbuf[4];
    CHECK_INT(ps_vol_scatter(3, MPI_INT, rbuf, 7, MPI_DOUBLE, 2, w), 56);
    CHECK_INT(ps_vol_scatter(3, MPI_INT, MPI_IN_PLACE, 7, MPI_DOUBLE, 2, w), rank == 2 ? 12 : 56);
    /* Gatherv: m_i = scount x stype = 2 shorts = 4; the root in place: recvcounts[root] x
     * recvtype: recvcounts {1, 2, 3} of ints, root 1 -> 2 x 4 = 8.  int and MPI_Count arrays */
    int rc[] = {1, 2, 3};
    MPI_Count rcl[] = {1, 2, 3};
    CHECK_INT(ps_vol_gatherv(sbuf, 2, MPI_SHORT, rc, MPI_INT, 1, w, 0), 4);
    CHECK_INT(ps_vol_gatherv(MPI_IN_PLACE, 2, MPI_SHORT, rc, MPI_INT, 1, w, 0), rank == 1 ? 8 : 4);
    CHECK_INT(ps_vol_gatherv(MPI_IN_PLACE, 2, MPI_SHORT, rcl, MPI_INT, 1, w, 1), rank == 1 ? 8 : 4);
    /* Scatterv: the m_i received = rcount x rtype = 5 doubles = 40; the root (0) in place:
     * sendcounts[0] x sendtype = 1 int = 4 */
    CHECK_INT(ps_vol_scatterv(rc, MPI_INT, rbuf, 5, MPI_DOUBLE, 0, w, 0), 40);
    CHECK_INT(ps_vol_scatterv(rc, MPI_INT, MPI_IN_PLACE, 5, MPI_DOUBLE, 0, w, 0), rank == 0 ? 4 : 40);
    CHECK_INT(ps_vol_scatterv(rcl, MPI_INT, MPI_IN_PLACE, 5, MPI_DOUBLE, 0, w, 1), rank == 0 ? 4 : 40);
    /* Reduce / Allreduce: m = 6 doubles = 48 on every rank */
    CHECK_INT(ps_vol_reduce(6, MPI_DOUBLE, w), 48);
}

static void test_all(void)
{
    MPI_Comm w = MPI_COMM_WORLD;
    int sbuf[4];
    int rc[] = {1, 2, 3}, sc[] = {4, 0, 1};
    MPI_Count rcl[] = {1, 2, 3}, scl[] = {4, 0, 1};
    /* Allgather: m = 3 ints = 12; in place: recvcount 3 x double = 24 */
    CHECK_INT(ps_vol_allgather(sbuf, 3, MPI_INT, 3, MPI_DOUBLE, w), 12);
    CHECK_INT(ps_vol_allgather(MPI_IN_PLACE, 3, MPI_INT, 3, MPI_DOUBLE, w), 24);
    /* Allgatherv: m_i = 2 ints = 8; in place: recvcounts[rank] doubles = (rank + 1) x 8 */
    CHECK_INT(ps_vol_allgatherv(sbuf, 2, MPI_INT, rc, MPI_DOUBLE, w, 0), 8);
    CHECK_INT(ps_vol_allgatherv(MPI_IN_PLACE, 2, MPI_INT, rc, MPI_DOUBLE, w, 0), 8 * (rank + 1));
    CHECK_INT(ps_vol_allgatherv(MPI_IN_PLACE, 2, MPI_INT, rcl, MPI_DOUBLE, w, 1), 8 * (rank + 1));
    /* Alltoall: p x m = 3 x (2 ints) = 24; in place: 3 x (2 doubles) = 48 */
    CHECK_INT(ps_vol_alltoall(sbuf, 2, MPI_INT, 2, MPI_DOUBLE, w), 24);
    CHECK_INT(ps_vol_alltoall(MPI_IN_PLACE, 2, MPI_INT, 2, MPI_DOUBLE, w), 48);
    /* Alltoallv: sum_j sendcounts[j] x stype = (4 + 0 + 1) x 4 = 20; in place: the receive
     * counts, (1 + 2 + 3) x 8 = 48 */
    CHECK_INT(ps_vol_alltoallv(sbuf, sc, MPI_INT, rc, MPI_DOUBLE, w, 0), 20);
    CHECK_INT(ps_vol_alltoallv(sbuf, scl, MPI_INT, rcl, MPI_DOUBLE, w, 1), 20);
    CHECK_INT(ps_vol_alltoallv(MPI_IN_PLACE, sc, MPI_INT, rc, MPI_DOUBLE, w, 0), 48);
    /* Alltoallw: per-peer types {int, double, short} x {4, 0, 1} = 16 + 0 + 2 = 18; in place
     * with {double, short, int} x {1, 2, 3} = 8 + 4 + 12 = 24 */
    MPI_Datatype st[] = {MPI_INT, MPI_DOUBLE, MPI_SHORT}, rt[] = {MPI_DOUBLE, MPI_SHORT, MPI_INT};
    CHECK_INT(ps_vol_alltoallw(sbuf, sc, st, rc, rt, w, 0), 18);
    CHECK_INT(ps_vol_alltoallw(sbuf, scl, st, rcl, rt, w, 1), 18);
    CHECK_INT(ps_vol_alltoallw(MPI_IN_PLACE, sc, st, rc, rt, w, 0), 24);
    /* Reduce_scatter_block: p x recvcount x size = 3 x 2 x 8 = 48 */
    CHECK_INT(ps_vol_reduce_scatter_block(2, MPI_DOUBLE, w), 48);
    /* Reduce_scatter: sum_j recvcounts[j] x size = 6 x 4 = 24 */
    CHECK_INT(ps_vol_reduce_scatter(rc, MPI_INT, w, 0), 24);
    CHECK_INT(ps_vol_reduce_scatter(rcl, MPI_INT, w, 1), 24);
    /* Scan / Exscan: all but the last rank (2) pass m = 5 ints = 20 on */
    CHECK_INT(ps_vol_scan(5, MPI_INT, w), rank == 2 ? 0 : 20);
    /* nothing to move: MPI_DATATYPE_NULL, count 0, a negative count */
    CHECK_INT(ps_vol_reduce(6, MPI_DATATYPE_NULL, w), 0);
    CHECK_INT(ps_vol_reduce(0, MPI_DOUBLE, w), 0);
    CHECK_INT(ps_vol_bcast(-1, MPI_INT, 1, w), 0);
    /* the Fortran MPI_IN_PLACE sentinel counts as in place too */
    static int f_in_place;
    ps_f_in_place = &f_in_place;
    CHECK_INT(ps_vol_allgather(&f_in_place, 3, MPI_INT, 3, MPI_DOUBLE, w), 24);
    ps_f_in_place = NULL;
    CHECK_INT(ps_vol_allgather(&f_in_place, 3, MPI_INT, 3, MPI_DOUBLE, w), 12);
}

static void test_intercomm(void)
{
    /* the halves {0, 2} and {1} joined by an intercommunicator: in the all-to-all rules a
     * rank addresses the remote group (1 rank from {0, 2}, 2 ranks from {1}); elsewhere p is
     * the local group's size */
    MPI_Comm half, inter;
    PMPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    PMPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 5, &inter);
    int remote = rank % 2 ? 2 : 1, local = rank % 2 ? 1 : 2;
    CHECK_INT(ps_peer_count(inter), remote);
    int sbuf[2];
    int sc[] = {3, 5};
    /* Alltoall: remote x (2 ints) */
    CHECK_INT(ps_vol_alltoall(sbuf, 2, MPI_INT, 2, MPI_INT, inter), remote * 8);
    /* Alltoallv: the first `remote` send counts: {3} -> 12, {3, 5} -> 32 */
    CHECK_INT(ps_vol_alltoallv(sbuf, sc, MPI_INT, sc, MPI_INT, inter, 0), rank % 2 ? 32 : 12);
    /* Reduce_scatter_block: local size x 1 int */
    CHECK_INT(ps_vol_reduce_scatter_block(1, MPI_INT, inter), local * 4);
    PMPI_Comm_free(&inter);
    PMPI_Comm_free(&half);
}

static void test_neighbourhood(void)
{
    MPI_Comm w = MPI_COMM_WORLD;
    int sc[] = {1, 2, 3, 4};
    MPI_Count scl[] = {1, 2, 3, 4};
    MPI_Datatype st[] = {MPI_INT, MPI_DOUBLE, MPI_SHORT, MPI_INT};
    /* no topology: no neighbours, nothing */
    CHECK_INT(ps_out_degree(w), 0);
    CHECK_INT(ps_vol_neighbor(3, MPI_INT, w), 0);
    /* a 1-dimensional periodic ring of 3: out-degree 2 x 1 = 2.
     *   Neighbor_allgather/alltoall: n x m = 2 x 12 = 24
     *   Neighbor_alltoallv: (n - 1) x sum of the n blocks = 1 x (1 + 2) x 4 = 12
     *   Neighbor_alltoallw: 1 x (1 x 4 + 2 x 8) = 20 */
    MPI_Comm ring;
    int dims1[] = {3}, per1[] = {1};
    PMPI_Cart_create(w, 1, dims1, per1, 0, &ring);
    CHECK_INT(ps_out_degree(ring), 2);
    CHECK_INT(ps_vol_neighbor(3, MPI_INT, ring), 24);
    CHECK_INT(ps_vol_neighbor_v(sc, MPI_INT, ring, 0), 12);
    CHECK_INT(ps_vol_neighbor_v(scl, MPI_INT, ring, 1), 12);
    CHECK_INT(ps_vol_neighbor_w(sc, st, ring, 0), 20);
    CHECK_INT(ps_vol_neighbor_w(scl, st, ring, 1), 20);
    PMPI_Comm_free(&ring);
    /* a 3x1 grid: 2 x ndims = 4 neighbours (the degenerate dimension counts, as MPI's
     * neighbourhood collectives do: MPI_PROC_NULL neighbours included).
     *   n x m = 4 x 12 = 48; (n - 1) x (1 + 2 + 3 + 4) x 4 = 120;
     *   (n - 1) x (4 + 16 + 6 + 16) = 3 x 42 = 126 */
    MPI_Comm grid;
    int dims2[] = {3, 1}, per2[] = {0, 0};
    PMPI_Cart_create(w, 2, dims2, per2, 0, &grid);
    CHECK_INT(ps_out_degree(grid), 4);
    CHECK_INT(ps_vol_neighbor(3, MPI_INT, grid), 48);
    CHECK_INT(ps_vol_neighbor_v(sc, MPI_INT, grid, 0), 120);
    CHECK_INT(ps_vol_neighbor_w(sc, st, grid, 0), 126);
    PMPI_Comm_free(&grid);
    /* a distributed graph where rank r sends to (r + 1) % 3 only: out-degree 1, so the
     * alltoallv rule's (n - 1) factor makes 0; allgather's n x m = 12 */
    MPI_Comm dg;
    int src = (rank + 2) % 3, dst = (rank + 1) % 3;
    PMPI_Dist_graph_create_adjacent(w, 1, &src, MPI_UNWEIGHTED, 1, &dst, MPI_UNWEIGHTED,
                                    MPI_INFO_NULL, 0, &dg);
    CHECK_INT(ps_out_degree(dg), 1);
    CHECK_INT(ps_vol_neighbor(3, MPI_INT, dg), 12);
    CHECK_INT(ps_vol_neighbor_v(sc, MPI_INT, dg, 0), 0);
    CHECK_INT(ps_vol_neighbor_w(sc, st, dg, 0), 0);
    PMPI_Comm_free(&dg);
    /* a graph: node 0 linked to 1 and 2, 1 and 2 to 0: degrees 2, 1, 1 */
    MPI_Comm g;
    int index[] = {2, 3, 4}, edges[] = {1, 2, 0, 0};
    PMPI_Graph_create(w, 3, index, edges, 0, &g);
    CHECK_INT(ps_out_degree(g), rank == 0 ? 2 : 1);
    CHECK_INT(ps_vol_neighbor_v(sc, MPI_INT, g, 0), rank == 0 ? 12 : 0);
    PMPI_Comm_free(&g);
}

int main(int argc, char **argv)
{
    PMPI_Init(&argc, &argv);
    int size = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 3) {
        if (rank == 0) fprintf(stderr, "test_mpi_volume: needs 3 ranks, has %d\n", size);
        PMPI_Finalize();
        return PS_SKIP;
    }
    ps_world_rank = rank;
    ps_world_size = size;
    test_rooted();
    test_all();
    test_intercomm();
    test_neighbourhood();
    int all = 0;
    PMPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (failures) fprintf(stderr, "test_mpi_volume: rank %d: %d failures\n", rank, failures);
    PMPI_Finalize();
    return all != 0;
}
