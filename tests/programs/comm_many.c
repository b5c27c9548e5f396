/* Many short-lived communicators (issue 14), on 4 ranks: N iterations (argv[1], default
 * 200,001), each creating one communicator into a ring of 198 slots (freeing the slot's
 * previous one first), so that with W and the two of the nested step below at most 201 of
 * the program's communicators are alive at once.  tests/e2e/test_comm_many.py mirrors the
 * loop to know every count:
 *
 *   i % 3 == 0   MPI_Comm_dup(W)                        -> W_d*      members 0-3
 *   i % 3 == 1   MPI_Comm_split(W, rank % 2)            -> W_s*.0    0,2 and W_s*.1  1,3
 *   i % 3 == 2   MPI_Comm_create(W, {0,1,2})            -> W_c*.0    0-2 (rank 3: MPI_COMM_NULL)
 *   i % 10 == 0  one MPI_Allreduce of one int on the new communicator (its members)
 *   i % 60 == 0  (a dup) one MPI_Sendrecv of 2 doubles around the ring of its 4 ranks
 *   i % 300 == 150  nested: tmp = dup(W), sub = split(tmp, rank / 2), one MPI_Allreduce of
 *                one int on sub, both freed -- tmp first on odd ranks, sub first on even
 *                ones, so a parent is folded before and after its child
 *                -> W_d* (tmp), W_d*_s*.0 (0-1) and W_d*_s*.2 (2-3)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define RING 198

static void nested(int rank)
{
    MPI_Comm tmp, sub;
    int one = 1, sum = 0;
    MPI_Comm_dup(MPI_COMM_WORLD, &tmp);
    MPI_Comm_split(tmp, rank / 2, rank, &sub);
    if (rank % 2) MPI_Comm_free(&tmp);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, sub);
    MPI_Comm_free(&sub);
    if (rank % 2 == 0) MPI_Comm_free(&tmp);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 4) {
        if (rank == 0) fprintf(stderr, "comm_many needs 4 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    long n = argc > 1 ? atol(argv[1]) : 200001;
    MPI_Group world, first3;
    int ranks012[3] = {0, 1, 2};
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 3, ranks012, &first3);
    MPI_Comm ring[RING];
    for (int k = 0; k < RING; k++) ring[k] = MPI_COMM_NULL;
    for (long i = 0; i < n; i++) {
        MPI_Comm *c = &ring[i % RING];
        if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
        if (i % 3 == 0) MPI_Comm_dup(MPI_COMM_WORLD, c);
        else if (i % 3 == 1) MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, c);
        else MPI_Comm_create(MPI_COMM_WORLD, first3, c);
        if (i % 10 == 0 && *c != MPI_COMM_NULL) {
            int one = 1, sum = 0;
            MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, *c);
        }
        if (i % 60 == 0) {
            double out[2] = {1, 2}, in[2];
            MPI_Sendrecv(out, 2, MPI_DOUBLE, (rank + 1) % 4, 7, in, 2, MPI_DOUBLE,
                         (rank + 3) % 4, 7, *c, MPI_STATUS_IGNORE);
        }
        if (i % 300 == 150) nested(rank);
    }
    for (int k = 0; k < RING; k++)
        if (ring[k] != MPI_COMM_NULL) MPI_Comm_free(&ring[k]);
    MPI_Group_free(&first3);
    MPI_Group_free(&world);
    MPI_Finalize();
    return 0;
}
