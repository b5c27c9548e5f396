/* Unit test of the call trees' reduction (output/treemerge.c) without MPI: four ranks' rank-file
 * texts, written here with known values, are encoded, merged pairwise as the binomial tree does
 * ((0,1), (2,3), then both), and the tree.tsv lines are compared with values worked out by hand
 * (docs/format.md, "tree.tsv": sum, min and max with the lowest rank on ties, a rank without
 * the node counts as 0, threads of a rank add up, power-of-two sketch).
 *
 *   rank 0: main thread: main (call 0x1000) > work (fn 0x2000) 100 ns sampled, 30 off-CPU;
 *           main > MPI_Send, 1 call, 5 ns, 8 bytes on W
 *   rank 1: same paths; work 0 ns (the node is there, with 0); MPI_Send 2 calls, 7 ns, 16 B,
 *           split over two communicators (W 1 call 3 ns 8 B, W_s0 1 call 4 ns 8 B);
 *           warning sigprof-taken (count 2)
 *   rank 2: two application threads, each with work: 150 + 50 ns; MPI_Send 1 call 7 ns (thread
 *           0) 8 B; one runtime thread started in libmpi, 40 ns in progress (fn 0x9000)
 *   rank 3: work 100 ns, no MPI_Send; warning sigprof-taken (count 1, another text)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pathscope.h"

static char texts[4][4096];

static void rank_text(int r)
{
    static const char *head =
        "pathscope-rank\t2.9\nrun\t0123456789abcdef0123456789abcdef\nrank\t%d\nsize\t4\n"
        "status\tcomplete\nprogram\tapp\nwall_ns\t%d\ncounter_tree_full\t0\n"
        "module\t0\t/bin/app\tabcd\nmodule\t1\t/usr/lib/libmpi.so.40\tef01\n";
    char *p = texts[r];
    p += sprintf(p, head, r, 1000 + r);
    if (r == 1) p += sprintf(p, "warning\tsigprof-taken\t2\t100\ttext of rank 1\n");
    if (r == 3) p += sprintf(p, "warning\tsigprof-taken\t1\t50\ttext of rank 3\n");
    p += sprintf(p, "thread\t0\t10%d\t500\t0\t0\t0\t0\t4\t-\t-\t0\t0\n", r);
    p += sprintf(p, "node\t0\t0\t-\troot\t-\t-\t0\t0\t0\t0\t0\t0\t0\t0\n"
                    "node\t0\t1\t0\tcall\t0\t0x1000\t0\t0\t0\t0\t0\t0\t0\t0\n");
    static const int work[4] = {100, 0, 150, 100}, off[4] = {30, 0, 0, 0};
    p += sprintf(p, "node\t0\t2\t1\tfn\t0\t0x2000\t0\t%d\t1\t0\t0\t0\t0\t%d\n", work[r], off[r]);
    if (r == 0) p += sprintf(p, "node\t0\t3\t1\tmpi\t-\tMPI_Send\t1\t0\t0\t5\t8\t0\t0\t0\n"
                                "pcomm\t0\t3\tW\t1\t5\t8\n");
    if (r == 1) p += sprintf(p, "node\t0\t3\t1\tmpi\t-\tMPI_Send\t2\t0\t0\t7\t16\t0\t0\t0\n"
                                "pcomm\t0\t3\tW\t1\t3\t8\npcomm\t0\t3\tW_s0\t1\t4\t8\n");
    if (r == 2) {
        p += sprintf(p, "node\t0\t3\t1\tmpi\t-\tMPI_Send\t1\t0\t0\t7\t8\t0\t0\t0\n"
                        "pcomm\t0\t3\tW\t1\t7\t8\n");
        p += sprintf(p, "thread\t1\t110\t300\t0\t0\t0\t0\t3\t0\t0x3000\t0\t0\n"
                        "node\t1\t0\t-\troot\t-\t-\t0\t0\t0\t0\t0\t0\t0\t0\n"
                        "node\t1\t1\t0\tcall\t0\t0x1000\t0\t0\t0\t0\t0\t0\t0\t0\n"
                        "node\t1\t2\t1\tfn\t0\t0x2000\t0\t50\t1\t0\t0\t0\t0\t0\n");
        p += sprintf(p, "thread\t2\t111\t40\t0\t0\t0\t0\t2\t1\t0x8000\t0\t0\n"
                        "node\t2\t0\t-\troot\t-\t-\t0\t0\t0\t0\t0\t0\t0\t0\n"
                        "node\t2\t1\t0\tfn\t1\t0x9000\t0\t40\t1\t0\t0\t0\t0\t0\n");
    }
    sprintf(p, "end\n");
}

/* the line of out that starts with prefix (NUL-terminated copy), or "" */
static const char *line_of(const char *out, const char *prefix)
{
    static char line[1024];
    size_t n = strlen(prefix);
    for (const char *p = out; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len >= n && memcmp(p, prefix, n) == 0 && len < sizeof line) {
            memcpy(line, p, len);
            line[len] = 0;
            return line;
        }
        p += len + (nl != NULL);
    }
    return "";
}

int main(void)
{
    ps_tblock_t b[4], low, high, all;
    for (int r = 0; r < 4; r++) {
        rank_text(r);
        CHECK_INT(ps_tree_encode(texts[r], strlen(texts[r]), r, &b[r]), 0);
    }
    CHECK_INT(ps_tree_merge(&b[0], &b[2], &low), -1); /* [0, 1) and [2, 3): not adjacent */
    CHECK_INT(ps_tree_merge(&b[0], &b[1], &low), 0);
    CHECK_INT(ps_tree_merge(&b[2], &b[3], &high), 0);
    CHECK_INT(ps_tree_merge(&low, &high, &all), 0);
    CHECK_INT(all.lo, 0);
    CHECK_INT(all.hi, 4);

    static char out[1 << 16];
    ps_fmt_t f = {out, 0, sizeof out - 1, -1, 0};
    ps_tree_write(&f, &all, NULL, NULL);
    out[f.len] = 0;
    CHECK_INT(f.failed, 0);
    CHECK_STR(line_of(out, "ranks"), "ranks\t4");
    CHECK_STR(line_of(out, "columns"),
              "columns\tvisits\tsample_ns\tsamples\tmpi_ns\tbytes\toffcpu_ns\tincl_time\t"
              "incl_mpi\tincl_offcpu");
    CHECK_STR(line_of(out, "module\t0"), "module\t0\t/bin/app\tabcd");
    CHECK_STR(line_of(out, "module\t1"), "module\t1\t/usr/lib/libmpi.so.40\tef01");
    CHECK_STR(line_of(out, "string\tprogram"), "string\tprogram\t4\tapp");
    /* the lowest rank's text; counts and ranks add up */
    CHECK_STR(line_of(out, "warning"), "warning\tsigprof-taken\t2\t3\ttext of rank 1");
    /* (format 2.14) NONZERO is left out when every rank has a value, the bins are those below
     * MAX's (MAX's holds the rest), a bin right after the one before (or after MIN's) is its
     * count alone, `=V` is V on every rank, `@COL` an earlier column's statistics.
     * 1000..1003: sum 4006, min at 0, max at 3, all in bin 10 ([512, 1024)) */
    CHECK_STR(line_of(out, "scalar\twall_ns"), "scalar\twall_ns\t4006,1000,0,1003,3,,");
    CHECK_STR(line_of(out, "scalar\tthread.count"), "scalar\tthread.count\t5,1,0,2,2,,3");
    CHECK_STR(line_of(out, "scalar\truntime.elapsed_ns"),
              "scalar\truntime.elapsed_ns\t40,0,0,40,2,1,");
    CHECK_STR(line_of(out, "scalar\tcounter_tree_full"),
              "scalar\tcounter_tree_full\t=0");
    /* the application's root: incl_time per rank = work + MPI: 105, 7, 207, 100 */
    CHECK_STR(line_of(out, "node\t0\t"),
              "node\t0\t-\troot\t-\t-\tapp\tincl_time=419,7,1,207,2,,1;7:2\t"
              "incl_mpi=19,0,3,7,1,3,\tincl_offcpu=30,0,1,30,0,1,");
    CHECK_STR(line_of(out, "node\t1\t"),
              "node\t1\t0\tcall\t0\t0x1000\t-\tincl_time=419,7,1,207,2,,1;7:2\t"
              "incl_mpi=19,0,3,7,1,3,\tincl_offcpu=30,0,1,30,0,1,");
    /* children sorted by kind: fn before mpi */
    CHECK_STR(line_of(out, "node\t2\t"),
              "node\t2\t1\tfn\t0\t0x2000\t-\tsample_ns=400,0,1,200,2,3,7:2\t"
              "samples=5,1,0,2,2,,3\toffcpu_ns=30,0,1,30,0,1,\t"
              "incl_time=@sample_ns\tincl_offcpu=@offcpu_ns");
    /* equal maxima (7 on ranks 1 and 2): the lower rank; rank 3 has no node: min 0 there */
    CHECK_STR(line_of(out, "node\t3\t"),
              "node\t3\t1\tmpi\t-\t-\tMPI_Send\tvisits=4,0,3,2,1,3,1:2\t"
              "mpi_ns=19,0,3,7,1,3,\tbytes=32,0,3,16,1,3,4:2\t"
              "incl_time=@mpi_ns\tincl_mpi=@mpi_ns");
    CHECK_STR(line_of(out, "node\t4\t"),
              "node\t4\t3\tpcomm\t-\t-\tW\tvisits=3,0,3,1,0,3,\tmpi_ns=15,0,3,7,2,3,2:1\t"
              "bytes=24,0,3,8,0,3,");
    CHECK_STR(line_of(out, "node\t5\t"),
              "node\t5\t3\tpcomm\t-\t-\tW_s0\tvisits=1,0,0,1,1,1,\tmpi_ns=4,0,0,4,1,1,\t"
              "bytes=8,0,0,8,1,1,");
    /* the runtime's threads: a root of their own */
    CHECK_STR(line_of(out, "node\t6\t"),
              "node\t6\t-\troot\t-\t-\truntime\tincl_time=40,0,0,40,2,1,");
    CHECK_STR(line_of(out, "node\t7\t"),
              "node\t7\t6\tfn\t1\t0x9000\t-\tsample_ns=40,0,0,40,2,1,\t"
              "samples=1,0,0,1,2,1,\tincl_time=@sample_ns");
    CHECK_STR(line_of(out, "node\t8\t"), "");
    CHECK(strstr(out, "\nend\n") != NULL);

    /* a line that breaks the format: refused, nothing allocated is left */
    static const char bad[] = "pathscope-rank\t2.9\nthread\t0\t1\t1\t0\t0\t0\t0\t1\t-\t-\t0\t0\n"
                              "node\t0\t5\t9\tcall\t0\t0x10\t0\t0\t0\t0\t0\t0\t0\t0\nend\n";
    ps_tblock_t none;
    CHECK_INT(ps_tree_encode(bad, sizeof bad - 1, 0, &none), -1);
    for (int r = 0; r < 4; r++) free(b[r].data);
    free(low.data);
    free(high.data);
    free(all.data);
    return failures != 0;
}
