/* Every communicator-creating operation, in a fixed order on 4 ranks, so that the names are
 * known in advance (tests/e2e/test_comms.py works them out step by step).  Each new
 * communicator carries one MPI_Allreduce of one int, so attribution is visible too. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static void touch(MPI_Comm c)
{
    int one = 1, sum = 0, inter = 0;
    if (c == MPI_COMM_NULL) return;
    MPI_Comm_test_inter(c, &inter);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 4) MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Group world_group;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);

    /* 1 dup */
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    touch(dup);
    /* 2 split: even / odd */
    MPI_Comm parity;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &parity);
    touch(parity);
    /* 3 cart_create 2x2, periodic in dim 0, no reorder */
    MPI_Comm cart;
    int dims[2] = {2, 2}, periods[2] = {1, 0};
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
    touch(cart);
    /* 4 cart_sub keeping dim 1: rows {0,1} and {2,3} */
    MPI_Comm row;
    int remain[2] = {0, 1};
    MPI_Cart_sub(cart, remain, &row);
    touch(row);
    /* 5 dup_with_info of the parity communicators */
    MPI_Comm pdup;
    MPI_Comm_dup_with_info(parity, MPI_INFO_NULL, &pdup);
    touch(pdup);
    /* 6 idup of world, completed by MPI_Wait */
    MPI_Comm idup;
    MPI_Request req;
    MPI_Comm_idup(MPI_COMM_WORLD, &idup, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    touch(idup);
    /* 7 split_type shared: one node, all ranks */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    touch(node);
    /* 8 create with group {0,1,2}: rank 3 gets MPI_COMM_NULL */
    MPI_Group g012;
    int r012[3] = {0, 1, 2};
    MPI_Group_incl(world_group, 3, r012, &g012);
    MPI_Comm created;
    MPI_Comm_create(MPI_COMM_WORLD, g012, &created);
    touch(created);
    /* 9 create_group {1,3}: only ranks 1 and 3 call */
    MPI_Comm grp = MPI_COMM_NULL;
    if (rank == 1 || rank == 3) {
        MPI_Group g13;
        int r13[2] = {1, 3};
        MPI_Group_incl(world_group, 2, r13, &g13);
        MPI_Comm_create_group(MPI_COMM_WORLD, g13, 42, &grp);
        MPI_Group_free(&g13);
        touch(grp);
    }
    /* 10 graph_create: a ring */
    MPI_Comm graph;
    int index[4] = {2, 4, 6, 8}, edges[8] = {1, 3, 0, 2, 1, 3, 0, 2};
    MPI_Graph_create(MPI_COMM_WORLD, 4, index, edges, 0, &graph);
    touch(graph);
    /* 11 dist_graph_create_adjacent: ring */
    MPI_Comm adj;
    int nb[2] = {(rank + 3) % 4, (rank + 1) % 4};
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, nb, MPI_UNWEIGHTED, 2, nb, MPI_UNWEIGHTED,
                                   MPI_INFO_NULL, 0, &adj);
    touch(adj);
    /* 12 dist_graph_create: each rank names its right neighbour */
    MPI_Comm dist;
    int src = rank, deg = 1, dst = (rank + 1) % 4;
    MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &src, &deg, &dst, MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                          &dist);
    touch(dist);
    /* 13 intercomm_create between the parity groups (leaders: world ranks 0 and 1) */
    MPI_Comm inter;
    MPI_Intercomm_create(parity, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 77, &inter);
    touch(inter);
    /* 14 intercomm_merge: odd group high */
    MPI_Comm merged;
    MPI_Intercomm_merge(inter, rank % 2, &merged);
    touch(merged);
    /* 15 split with MPI_UNDEFINED for rank 0 */
    MPI_Comm some;
    MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 1, rank, &some);
    touch(some);
    /* SELF carries traffic too */
    touch(MPI_COMM_SELF);

    /* freeing keeps the data */
    MPI_Comm_free(&dup);
    MPI_Comm_free(&pdup);
    MPI_Comm_free(&idup);
    MPI_Comm_free(&node);
    if (created != MPI_COMM_NULL) MPI_Comm_free(&created);
    if (grp != MPI_COMM_NULL) MPI_Comm_free(&grp);
    MPI_Comm_free(&graph);
    MPI_Comm_free(&adj);
    MPI_Comm_free(&dist);
    MPI_Comm_free(&merged);
    MPI_Comm_free(&inter);
    if (some != MPI_COMM_NULL) MPI_Comm_free(&some);
    MPI_Comm_free(&row);
    MPI_Comm_free(&cart);
    MPI_Comm_free(&parity);
    MPI_Group_free(&g012);
    MPI_Group_free(&world_group);
    MPI_Finalize();
    return 0;
}
