/* Unit test of the end-of-run reduction's arithmetic (output/reduce.c), on 3 ranks (ctest:
 * mpirun -np 3).  Its merge functions (merge_op, merge_comm) are static, so the test goes
 * through the smallest entry that is not: ps_reduce_and_write, which reduces every rank's
 * records over a binomial tree and has rank 0 write profile.tsv.  Each rank fills the MPI
 * source's records with known numbers (clock ticks = ns: the TSC is switched off), then rank 0
 * compares every `comm` and `op` line of profile.tsv with lines derived by hand below
 * (docs/format.md: calls and bytes add up, times give sum, min and max with the lowest rank
 * on ties, histograms add up, communicators merge by name, `*` is each rank's total per
 * operation).  PATHSCOPE_OUTPUT (set by ctest) is the profile directory.
 */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "mpi_internal.h"

void ps_reduce_and_write(void);

static int rank;

/* Each rank's records:
 *   W, MPI_Send: rank 0 one call of 300 ticks; rank 1 two of 50; rank 2 three of 40, 30, 30;
 *     10 bytes each (histogram bin 4: [8, 16))
 *   S.<r>, MPI_Barrier: one call of 7 x (r + 1) ticks, no bytes counted
 *   W, MPI_Bcast: rank 2 only, one call of 1000 ticks, 4096 bytes (bin 13: [4096, 8192))
 *   W, MPI_Comm_dup: the dup below, 0 ticks on every rank
 *   W's point-to-point counters: sent r + 1 messages of 100 (r + 1) bytes, received 2
 *     messages of 5 bytes, r freed sends, 1 freed receive of capacity 8, a failed request on
 *     rank 2; freed on ranks 0 and 1 only
 *   W_d1 (the dup: M = 1, as every rank counts only W): freed on every rank
 *   W_c*.0: two MPI_Comm_create of W folded (format 2.8): members 0,1 and 0,2 */
static void fill(void)
{
    static const uint64_t send_ticks[3][3] = {{300}, {50, 50}, {40, 30, 30}};
    for (int i = 0; i <= rank; i++) ps_record(1, PS_OP_MPI_Send, send_ticks[rank][i], 10, 1);
    ps_record(2, PS_OP_MPI_Barrier, 7 * (uint64_t)(rank + 1), 0, 0);
    if (rank == 2) ps_record(1, PS_OP_MPI_Bcast, 1000, 4096, 1);
    MPI_Comm dup;
    PMPI_Comm_dup(MPI_COMM_WORLD, &dup);
    ps_on_comm_create(PS_OP_MPI_Comm_dup, 0, MPI_COMM_WORLD, dup, 'd', 0, 1, NULL);
    ps_comm_forget(dup);
    PMPI_Comm_free(&dup);
    /* two MPI_Comm_create of W, groups {0, 1} then {0, 2}, freed and folded into one row
     * W_c*.0: rank 0 was in both, ranks 1 and 2 in one each */
    ps_comm_keep = 0;
    MPI_Group world, pair;
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    for (int other = 1; other <= 2; other++) {
        int members[2] = {0, other};
        PMPI_Group_incl(world, 2, members, &pair);
        MPI_Comm cc;
        PMPI_Comm_create(MPI_COMM_WORLD, pair, &cc);
        ps_on_comm_create(PS_OP_MPI_Comm_create, 0, MPI_COMM_WORLD, cc, 'c', 1, 1, NULL);
        if (cc != MPI_COMM_NULL) {
            ps_comm_forget(cc);
            PMPI_Comm_free(&cc);
        }
        PMPI_Group_free(&pair);
    }
    PMPI_Group_free(&world);
    ps_comm_keep = 256;
    ps_comm_t *w = ps_comms[1];
    w->sent_msgs = (uint64_t)rank + 1;
    w->sent_bytes = 100 * ((uint64_t)rank + 1);
    w->recv_msgs = 2;
    w->recv_bytes = 5;
    w->freed_sends = (uint64_t)rank;
    w->freed_recvs = 1;
    w->freed_recv_capacity = 8;
    w->failed_requests = rank == 2;
    w->freed = rank != 2;
}

/* The merged lines (fields as in docs/format.md, tab-separated), sorted by name then op:
 * W/MPI_Send: calls 1 + 2 + 3 = 6, bytes 10 + 20 + 30 = 60, time 300 + 100 + 100 = 500,
 *   min 100 on ranks 1 and 2 -> rank 1, max 300 on rank 0, 3 ranks, bin 4: 6 messages.
 * `*`/MPI_Barrier: per-rank totals 7, 14, 21 -> sum 42, min 7 (rank 0), max 21 (rank 2).
 * W/MPI_Comm_dup: 0 everywhere: min and max both on rank 0 (the lowest of the tie).
 * comm W: 6 messages, 600 bytes sent; 6 received, 15 bytes; 0 + 1 + 2 = 3 freed sends, 3
 *   freed receives of capacity 24, 1 failed request; freed_all = 1 AND 1 AND 0 = 0.
 * comm W_c*.0: the union of the ranks' unions {0,1,2}, {0,1}, {0,2}: 0-2, size 3; 2
 *   communicators (both led by rank 0), 4 memberships; W/MPI_Comm_create: 2 calls x 3 ranks.
 * Every comm line ends with folded and memberships (0 0 but for the row). */
static const char *const want[] = {
    "comm\t-\t0\t0\t-\t-\t0\t-\t-\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0",
    "comm\tS.0\t1\t0\t-\t-\t0\t0\t-\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0",
    "comm\tS.1\t1\t0\t-\t-\t0\t1\t-\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0",
    "comm\tS.2\t1\t0\t-\t-\t0\t2\t-\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0",
    "comm\tW\t3\t0\t-\t-\t0\t0-2\t-\t6\t600\t6\t15\t3\t3\t24\t1\t0\t0",
    "comm\tW_c*.0\t3\t0\tW\tMPI_Comm_create\t1\t0-2\t-\t0\t0\t0\t0\t0\t0\t0\t0\t2\t4",
    "comm\tW_d1\t3\t0\tW\tMPI_Comm_dup\t1\t0-2\t-\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0",
    "op\t*\tMPI_Barrier\t3\t0\t42\t7\t0\t21\t2\t3\t-",
    "op\t*\tMPI_Bcast\t1\t4096\t1000\t1000\t2\t1000\t2\t1\t13:1",
    "op\t*\tMPI_Comm_create\t6\t0\t0\t0\t0\t0\t0\t3\t-",
    "op\t*\tMPI_Comm_dup\t3\t0\t0\t0\t0\t0\t0\t3\t-",
    "op\t*\tMPI_Send\t6\t60\t500\t100\t1\t300\t0\t3\t4:6",
    "op\tS.0\tMPI_Barrier\t1\t0\t7\t7\t0\t7\t0\t1\t-",
    "op\tS.1\tMPI_Barrier\t1\t0\t14\t14\t1\t14\t1\t1\t-",
    "op\tS.2\tMPI_Barrier\t1\t0\t21\t21\t2\t21\t2\t1\t-",
    "op\tW\tMPI_Bcast\t1\t4096\t1000\t1000\t2\t1000\t2\t1\t13:1",
    "op\tW\tMPI_Comm_create\t6\t0\t0\t0\t0\t0\t0\t3\t-",
    "op\tW\tMPI_Comm_dup\t3\t0\t0\t0\t0\t0\t0\t3\t-",
    "op\tW\tMPI_Send\t6\t60\t500\t100\t1\t300\t0\t3\t4:6",
};

static void check_profile(const char *path)
{
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f) return;
    char line[4096];
    size_t n = 0, nwant = sizeof want / sizeof *want;
    int ended = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (strcmp(line, "end") == 0) ended = 1;
        if (strncmp(line, "comm\t", 5) != 0 && strncmp(line, "op\t", 3) != 0) continue;
        if (n < nwant) CHECK_STR(line, want[n]);
        else fprintf(stderr, "unexpected line: %s\n", line), failures++;
        n++;
    }
    fclose(f);
    CHECK_INT(n, nwant);
    CHECK_INT(ended, 1);
}

int main(int argc, char **argv)
{
    PMPI_Init(&argc, &argv);
    int size = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *dir = getenv("PATHSCOPE_OUTPUT");
    if (size != 3 || !dir || !ps_outdir[0]) {
        if (rank == 0) fprintf(stderr, "test_mpi_reduce: needs 3 ranks and PATHSCOPE_OUTPUT\n");
        PMPI_Finalize();
        return PS_SKIP;
    }
    ps_world_rank = rank;
    ps_world_size = size;
    ps_clock_uses_tsc = 0; /* ticks are ns: the numbers above are the file's */
    char path[PS_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/profile.tsv", dir);
    if (rank == 0) unlink(path); /* a previous run's */
    ps_registry_init();
    fill();
    PMPI_Barrier(MPI_COMM_WORLD);
    ps_reduce_and_write();
    if (rank == 0) check_profile(path);
    int all = 0;
    PMPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (failures) fprintf(stderr, "test_mpi_reduce: rank %d: %d failures\n", rank, failures);
    PMPI_Finalize();
    return all != 0;
}
