/* The call trees reduced inside the job (docs/format.md, "tree.tsv"): at MPI_Finalize every
 * rank encodes its rank file's text as a block (output/treemerge.c), the blocks travel up a
 * binomial tree over the private duplicate of MPI_COMM_WORLD (ceil(log2 p) rounds; in round k
 * rank r receives the block of ranks [r + 2^k, min(r + 2^(k+1), p)) from r + 2^k and merges
 * it after its own), and rank 0 writes tree.tsv.  What a rank holds at once: its own block,
 * the one received and the merged one, each the size of the distinct records of its ranks.
 *
 * Every message starts with a header {status, length}; a rank whose encoding failed, or that
 * received a failed header or hit an MPI error, sends status 0 and no data, so rank 0 learns
 * that the reduction is incomplete; it then writes no tree.tsv, and says so to all ranks,
 * which keep their own files (ps_rank_text_done).
 */
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

#define CHUNK (64u << 20) /* bytes per message: far below INT_MAX */

static int send_block(const ps_tblock_t *b, int ok, int to, MPI_Comm comm)
{
    uint64_t head[2] = {(uint64_t)ok, ok ? b->len : 0};
    if (ps_send_idle(head, 2, MPI_UINT64_T, to, 0, comm) != 0) return -1;
    for (size_t off = 0; ok && off < b->len; off += CHUNK) {
        size_t n = b->len - off < CHUNK ? b->len - off : CHUNK;
        if (ps_send_idle(b->data + off, (int)n, MPI_BYTE, to, 1, comm) != 0) return -1;
    }
    return 0;
}

/* Receives the block of [lo, hi) from rank `from`; 0 when it arrived whole and valid. */
static int recv_block(ps_tblock_t *b, int from, uint32_t lo, uint32_t hi, MPI_Comm comm)
{
    uint64_t head[2];
    memset(b, 0, sizeof *b);
    if (ps_recv_idle(head, 2, MPI_UINT64_T, from, 0, comm) != 0 || !head[0])
        return -1;
    b->data = malloc(head[1] ? head[1] : 1);
    if (!b->data) {
        /* (the data is still sent: take each chunk into nothing -- a truncated receive
         * consumes its message -- to stay in step) */
        char sink;
        for (uint64_t off = 0; off < head[1]; off += CHUNK)
            PMPI_Recv(&sink, 0, MPI_BYTE, from, 1, comm, MPI_STATUS_IGNORE);
        return -1;
    }
    b->len = head[1];
    b->lo = lo;
    b->hi = hi;
    for (size_t off = 0; off < b->len; off += CHUNK) {
        size_t n = b->len - off < CHUNK ? b->len - off : CHUNK;
        if (ps_recv_idle(b->data + off, (int)n, MPI_BYTE, from, 1, comm) != 0) return -1;
    }
    return 0;
}

static int write_tree(const ps_tblock_t *all, const ps_treecost_t *cost, const ps_rankvec_t *rv)
{
    static char buf[1 << 16];
    ps_outfile_t out;
    int fd = ps_outfile_begin(&out, PS_FILE_TREE, "tree.tsv");
    if (fd < 0) return ps_outfile_error(PS_FILE_TREE);
    ps_fmt_t f = {buf, 0, sizeof buf, fd, 0};
    ps_tree_write(&f, all, cost, rv);
    ps_fmt_flush(&f);
    return ps_outfile_end(&out, f.failed);
}

/* --per-rank summary, collective: rank 0 names the heaviest paths of the merged block (none
 * when the reduction failed), every rank takes its own values of them from its own block,
 * rank 0 gathers them: rank x width values (width: the paths' columns, at most 64 x 25). */
static uint64_t *gather_summary(const ps_tblock_t *merged, const ps_tblock_t *own, int ok,
                                ps_tpath_t *paths, int *npaths, MPI_Comm comm)
{
    MPI_Request req;
    int n = ps_world_rank == 0 && ok ? ps_tree_top_paths(merged, paths, PS_RANKVEC_PATHS) : 0;
    if (PMPI_Ibcast(&n, 1, MPI_INT, 0, comm, &req) != MPI_SUCCESS || ps_wait_idle(&req) != 0 ||
        n <= 0 || n > PS_RANKVEC_PATHS)
        return NULL;
    if (PMPI_Ibcast(paths, (int)(n * sizeof *paths), MPI_BYTE, 0, comm, &req) != MPI_SUCCESS ||
        ps_wait_idle(&req) != 0)
        return NULL;
    size_t width = ps_tree_path_width(paths, n);
    uint64_t mine[PS_RANKVEC_PATHS * PS_TREE_NODE_COLUMNS] = {0};  /* (0: no such path here) */
    uint64_t *all = ps_world_rank == 0 ? calloc(width * (size_t)ps_world_size, sizeof *all) : NULL;
    if (own->data) ps_tree_path_values(own, paths, n, mine);
    int done = PMPI_Igather(mine, (int)width, MPI_UINT64_T, all, (int)width, MPI_UINT64_T, 0,
                            comm, &req) == MPI_SUCCESS &&
               ps_wait_idle(&req) == 0;
    if (!done) {
        free(all);
        return NULL;
    }
    *npaths = n;
    return all;
}

/* 1 when tree.tsv was written (every rank learns it). */
int ps_tree_reduce(MPI_Comm comm)
{
    int rank = ps_world_rank, size = ps_world_size;
    /* (so that the cost measured is the reduction's, not the wait for the last rank to reach
     * MPI_Finalize) */
    MPI_Request req;
    if (PMPI_Ibarrier(comm, &req) == MPI_SUCCESS) ps_wait_idle(&req);
    uint64_t t0 = ps_clock_monotonic_ns();
    ps_treecost_t cost = {0, 0, 0};
    size_t len = 0;
    const char *txt = ps_rank_text(&len);
    /* own: this rank's block; mine: its merged one, own until the first merge (summary keeps
     * own for its values, the other modes free it then) */
    ps_tblock_t own = {0};
    int ok = txt && ps_tree_encode(txt, len, rank, &own) == 0;
    int summary = strcmp(ps_options.per_rank, "summary") == 0;
    ps_tblock_t mine = own;
    for (int mask = 1; mask < size; mask <<= 1) {
        if (rank & mask) {
            send_block(&mine, ok, rank - mask, comm);
            break;
        }
        if (rank + mask >= size) continue;
        uint32_t hi = (uint32_t)(rank + 2 * mask < size ? rank + 2 * mask : size);
        ps_tblock_t theirs, merged;
        int got = recv_block(&theirs, rank + mask, (uint32_t)(rank + mask), hi, comm) == 0;
        cost.rounds++;
        if (ok && got && ps_tree_merge(&mine, &theirs, &merged) == 0) {
            uint64_t held = mine.len + theirs.len + merged.len;
            if (held > cost.peak_bytes) cost.peak_bytes = held;
            if (mine.data != own.data || !summary) free(mine.data);
            mine = merged;
        } else {
            ok = 0;
        }
        free(theirs.data);
    }
    int written = 0;
    cost.ns = ps_clock_monotonic_ns() - t0;
    ps_tpath_t paths[PS_RANKVEC_PATHS];
    ps_rankvec_t rv = {paths, 0, NULL};
    if (summary) rv.values = gather_summary(&mine, &own, ok, paths, &rv.n, comm);
    if (rank == 0 && ok) written = write_tree(&mine, &cost, rv.values ? &rv : NULL) == 0;
    free((void *)rv.values);
    if (summary && own.data != mine.data) free(own.data);
    free(mine.data);
    if (PMPI_Ibcast(&written, 1, MPI_INT, 0, comm, &req) != MPI_SUCCESS || ps_wait_idle(&req) != 0)
        written = 0;
    return written;
}
