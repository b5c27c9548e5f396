/* ranks.tsv (docs/format.md): with --per-rank all, the rank files of a job that reached
 * MPI_Finalize written into one file with MPI-IO, instead of one file per rank -- on a
 * parallel file system, 10^4 creations in one directory at the same moment cost more than
 * the data.
 *
 * Rank 0 gathers the lengths of the ranks' texts (the rank files kept in memory files,
 * output/rankfile.c), creates the file under a temporary name the way every profile file is
 * created (O_CREAT|O_EXCL|O_NOFOLLOW relative to the directory's descriptor: MPI-IO opens by
 * path and may follow links, so it never creates anything), writes the head with the index,
 * and hands each rank its offset.
 *
 * One writer per node: the lowest rank of each host opens the file with MPI-IO, collectively
 * with the other nodes' writers (no MPI_MODE_CREATE), receives the texts of its node's ranks
 * one at a time and writes each at its offset.  That is the aggregation ROMIO's collective
 * buffering does by default (one aggregator per node); done here, the ranks of a node wait by
 * tests and sleeps (mpi/idle.c) instead of inside the library's collectives: ROMIO's
 * collective open alone took 11 s at 128 ranks on 2 cores, with every rank spinning.  Rank 0
 * renames the file into place only when every write succeeded; otherwise it removes it and
 * every rank writes its own ranks/rank-NNNNNN.tsv (ps_rank_text_done).
 *
 * Memory beyond a rank's own text: 8 bytes per rank of the job on every rank (the hosts'
 * hashes), on rank 0 16 more and the head (about 30 bytes per rank), on a writer one buffer
 * of at most CHUNK bytes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_internal.h"

#define CHUNK (64u << 20) /* bytes per message and write: far below INT_MAX */
#define TAG_HEAD 11
#define TAG_TEXT 12

/* Every rank: whether all ranks said yes. */
static int all_agree(int yes, MPI_Comm comm)
{
    int all = 0;
    MPI_Request req;
    if (PMPI_Iallreduce(&yes, &all, 1, MPI_INT, MPI_MIN, comm, &req) != MPI_SUCCESS ||
        ps_wait_idle(&req) != 0)
        return 0;
    return all;
}

/* Rank 0: the head (docs/format.md) into a new buffer, and the ranks' absolute offsets. */
static char *make_head(const uint64_t *lens, int size, uint64_t *offsets, size_t *head_len)
{
    size_t cap = 96 + (size_t)size * 64;
    char *head = malloc(cap);
    if (!head) return NULL;
    ps_fmt_t f = {head, 0, cap, -1, 0};
    ps_fmt_str(&f, "pathscope-ranks\t" PS_FORMAT_VERSION "\nrun\t");
    ps_fmt_str(&f, ps_run_id);
    ps_fmt_str(&f, "\nranks\t");
    ps_fmt_u64(&f, (uint64_t)size);
    ps_fmt_char(&f, '\n');
    uint64_t at = 0;
    for (int r = 0; r < size; r++) {
        offsets[r] = at;
        if (!lens[r]) continue;
        ps_fmt_str(&f, "index\t");
        ps_fmt_u64(&f, (uint64_t)r);
        ps_fmt_char(&f, '\t');
        ps_fmt_u64(&f, at);
        ps_fmt_char(&f, '\t');
        ps_fmt_u64(&f, lens[r]);
        ps_fmt_char(&f, '\n');
        at += lens[r];
    }
    ps_fmt_str(&f, "data\n");
    for (int r = 0; r < size; r++) offsets[r] += f.len;
    *head_len = f.len;
    if (f.failed) {
        free(head);
        return NULL;
    }
    return head;
}

/* Rank 0: creates the temporary and writes the head; 0 or -1 (a failure of the file is
 * recorded for the end-of-run report). */
static int begin_file(ps_outfile_t *out, const uint64_t *lens, int size, uint64_t *offsets)
{
    size_t head_len = 0;
    char *head = make_head(lens, size, offsets, &head_len);
    if (!head) return -1;
    int fd = ps_outfile_begin(out, PS_FILE_RANKS, "ranks.tsv");
    int failed = fd < 0;
    if (!failed) {
        ps_fmt_t f = {head, head_len, head_len, fd, 0};   /* (the whole head, to flush) */
        ps_fmt_flush(&f);
        failed = f.failed;
        if (failed) ps_outfile_end(out, errno ? errno : EIO);
    }
    free(head);
    return failed ? -1 : 0;
}

/* The host's hash (FNV-1a): ranks with the same one share a writer.  Two hosts with the same
 * hash only share a writer across the network. */
static uint64_t host_hash(void)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *c = host; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
    return h;
}

/* n bytes at `at`, in writes of at most CHUNK; 0 or -1. */
static int write_at(MPI_File fh, uint64_t at, const char *buf, size_t n)
{
    for (size_t off = 0; off < n; off += CHUNK) {
        int k = (int)(n - off < CHUNK ? n - off : CHUNK), got = -1;
        MPI_Request req;
        MPI_Status st;
        if (PMPI_File_iwrite_at(fh, (MPI_Offset)(at + off), buf + off, k, MPI_BYTE, &req) !=
                MPI_SUCCESS ||
            ps_wait_idle_status(&req, &st) != 0 ||
            PMPI_Get_count(&st, MPI_BYTE, &got) != MPI_SUCCESS || got != k)
            return -1;
    }
    return 0;
}

/* A writer: its node's other ranks' texts, each received whole (its head {offset, length},
 * then chunks) and written, even after a failure (the senders must finish).  0 or -1. */
static int write_node(MPI_File fh, int ok, const uint64_t *hosts, int me, MPI_Comm comm)
{
    char *buf = NULL;
    size_t cap = 0;
    for (int r = me + 1; r < ps_world_size; r++) {
        if (hosts[r] != hosts[me]) continue;
        uint64_t head[2];
        if (ps_recv_idle(head, 2, MPI_UINT64_T, r, TAG_HEAD, comm) != 0) return -1;
        for (uint64_t off = 0; off < head[1]; off += CHUNK) {
            size_t k = head[1] - off < CHUNK ? head[1] - off : CHUNK;
            if (k > cap) {
                free(buf);
                buf = malloc(k);
                cap = buf ? k : 0;
            }
            /* (without a buffer: a receive of 0 bytes still consumes the message) */
            if (ps_recv_idle(buf, buf ? (int)k : 0, MPI_BYTE, r, TAG_TEXT, comm) != 0) {
                free(buf);
                return -1;
            }
            if (!buf || (ok && write_at(fh, head[0] + off, buf, k) != 0)) ok = 0;
        }
    }
    free(buf);
    return ok ? 0 : -1;
}

/* A rank that is not its node's writer: its text to the writer.  0 or -1. */
static int send_text(const char *txt, uint64_t len, uint64_t at, int writer, MPI_Comm comm)
{
    uint64_t head[2] = {at, len};
    if (ps_send_idle(head, 2, MPI_UINT64_T, writer, TAG_HEAD, comm) != 0) return -1;
    for (uint64_t off = 0; off < len; off += CHUNK) {
        int k = (int)(len - off < CHUNK ? len - off : CHUNK);
        if (ps_send_idle(txt + off, k, MPI_BYTE, writer, TAG_TEXT, comm) != 0) return -1;
    }
    return 0;
}

/* Whether rank r is the lowest of its host: a set of the hosts of the ranks below it, as an
 * open-addressing table (hash 0 stands for 1). */
static int *first_of_hosts(const uint64_t *hosts, int *n)
{
    size_t cap = 2;
    while (cap < 2 * (size_t)ps_world_size) cap *= 2;
    uint64_t *seen = calloc(cap, sizeof *seen);
    int *writers = malloc((size_t)ps_world_size * sizeof *writers);
    *n = 0;
    if (!seen || !writers) {
        free(seen);
        free(writers);
        return NULL;
    }
    for (int r = 0; r < ps_world_size; r++) {
        uint64_t h = hosts[r] ? hosts[r] : 1;
        size_t i = h & (cap - 1);
        while (seen[i] && seen[i] != h) i = (i + 1) & (cap - 1);
        if (!seen[i]) {
            seen[i] = h;
            writers[(*n)++] = r;
        }
    }
    free(seen);
    return writers;
}

/* The writers' communicator (only they call this: the others do not wait in it). */
static MPI_Comm writers_comm(const uint64_t *hosts, MPI_Comm comm)
{
    int n = 0, *writers = first_of_hosts(hosts, &n);
    MPI_Comm out = MPI_COMM_NULL;
    MPI_Group all, group;
    if (writers && PMPI_Comm_group(comm, &all) == MPI_SUCCESS) {
        if (PMPI_Group_incl(all, n, writers, &group) == MPI_SUCCESS) {
            PMPI_Comm_create_group(comm, group, TAG_HEAD, &out);
            PMPI_Group_free(&group);
        }
        PMPI_Group_free(&all);
    }
    free(writers);
    return out;
}

/* The section of every rank through its node's writer; 0 or -1 on this rank. */
static int write_sections(const char *path, const char *txt, uint64_t len, uint64_t at,
                          const uint64_t *hosts, MPI_Comm comm)
{
    int me = ps_world_rank, writer = 0;
    while (hosts[writer] != hosts[me]) writer++;   /* (the lowest rank of the host) */
    if (writer != me) return send_text(txt, len, at, writer, comm);
    MPI_Comm writers = writers_comm(hosts, comm);
    MPI_File fh = MPI_FILE_NULL;
    int opened = writers != MPI_COMM_NULL &&
                 PMPI_File_open(writers, path, MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) == MPI_SUCCESS;
    int ok = opened && (!len || write_at(fh, at, txt, len) == 0);
    ok = write_node(fh, ok, hosts, me, comm) == 0 && ok;
    if (opened && PMPI_File_close(&fh) != MPI_SUCCESS) ok = 0;
    if (writers != MPI_COMM_NULL) PMPI_Comm_free(&writers);
    return ok ? 0 : -1;
}

int ps_ranks_file_write(MPI_Comm comm)
{
    int rank = ps_world_rank, size = ps_world_size;
    size_t len = 0;
    const char *txt = ps_rank_text(&len);
    uint64_t mine = txt ? len : 0, at = 0, host = host_hash();
    uint64_t *lens = rank == 0 ? calloc((size_t)size, sizeof *lens) : NULL;
    uint64_t *offsets = rank == 0 ? calloc((size_t)size, sizeof *offsets) : NULL;
    uint64_t *hosts = malloc((size_t)size * sizeof *hosts);
    static ps_outfile_t out;
    /* rank 0 -> all: {started, temporary name} */
    struct { int started; char tmp[sizeof out.tmp]; } go = {0, ""};
    MPI_Request req;
    if (PMPI_Igather(&mine, 1, MPI_UINT64_T, lens, 1, MPI_UINT64_T, 0, comm, &req) ==
            MPI_SUCCESS &&
        ps_wait_idle(&req) == 0 && rank == 0 && lens && offsets &&
        begin_file(&out, lens, size, offsets) == 0) {
        go.started = 1;
        memcpy(go.tmp, out.tmp, sizeof go.tmp);
    }
    free(lens);
    int ok = PMPI_Ibcast(&go, (int)sizeof go, MPI_BYTE, 0, comm, &req) == MPI_SUCCESS &&
             ps_wait_idle(&req) == 0 && go.started;
    ok = ok && PMPI_Iscatter(offsets, 1, MPI_UINT64_T, &at, 1, MPI_UINT64_T, 0, comm, &req) ==
                   MPI_SUCCESS &&
         ps_wait_idle(&req) == 0;
    free(offsets);
    ok = ok && hosts &&
         PMPI_Iallgather(&host, 1, MPI_UINT64_T, hosts, 1, MPI_UINT64_T, comm, &req) ==
             MPI_SUCCESS &&
         ps_wait_idle(&req) == 0;
    char path[PS_PATH_MAX];
    ps_fmt_t p = {path, 0, sizeof path - 1, -1, 0};
    ps_fmt_str(&p, ps_outdir_path());
    ps_fmt_char(&p, '/');
    ps_fmt_str(&p, go.tmp);
    path[p.len] = 0;
    int all = all_agree(ok && !p.failed, comm) &&
              all_agree(write_sections(path, txt, mine, at, hosts, comm) == 0, comm);
    free(hosts);
    if (rank == 0 && go.started) all = ps_outfile_end(&out, all ? 0 : PS_ERR_COLLECTIVE) == 0 && all;
    if (PMPI_Ibcast(&all, 1, MPI_INT, 0, comm, &req) != MPI_SUCCESS || ps_wait_idle(&req) != 0)
        all = 0;
    return all;
}
