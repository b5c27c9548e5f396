/* The per-rank file, ranks/rank-NNNNNN.tsv (docs/format.md).  Written by every rank at
 * MPI_Finalize, and also from fatal-signal handlers, MPI_Abort and exit without finalize, so
 * everything reachable from ps_write_rank_file() is async-signal-safe: no malloc, no stdio,
 * only open/write/rename and our own formatting into a static buffer. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <stdio.h>
#include <unistd.h>

#include "../mpi/mpi_internal.h"

static char rank_buf[1 << 16];
static char host_name[256];

static void put_path_rank(char *dst, size_t cap, int rank, const char *suffix);
static void put_path(char *dst, size_t cap, const char *suffix)
{
    put_path_rank(dst, cap, ps_world_rank < 0 ? 0 : ps_world_rank, suffix);
}

static void put_path_rank(char *dst, size_t cap, int rank, const char *suffix)
{
    ps_fmt_t f = {dst, 0, cap - 1, -1, 0};
    ps_fmt_str(&f, ps_outdir);
    ps_fmt_str(&f, "/ranks/rank-");
    char digits[24];
    ps_fmt_t d = {digits, 0, sizeof digits - 1, -1, 0};
    ps_fmt_u64(&d, (uint64_t)rank);
    for (size_t i = d.len; i < 6; i++) ps_fmt_char(&f, '0');
    digits[d.len] = 0;
    ps_fmt_str(&f, digits);
    ps_fmt_str(&f, suffix);
    dst[f.len] = 0;
}

static void kv(ps_fmt_t *f, const char *key, uint64_t v)
{
    ps_fmt_str(f, key);
    ps_fmt_char(f, '\t');
    ps_fmt_u64(f, v);
    ps_fmt_char(f, '\n');
}

void ps_rank_file_host(void) { gethostname(host_name, sizeof host_name - 1); }

uint64_t ps_rank_mpi_ticks(void)
{
    uint64_t t = 0;
    for (int c = 0; c < ps_ncomms; c++)
        for (int op = 0; op < PS_NUM_OPS; op++)
            if (ps_comms[c]->ops[op]) t += ps_comms[c]->ops[op]->ticks;
    return t;
}

void ps_write_rank_body(ps_fmt_t *f, const char *status)
{
    ps_fmt_str(f, "pathscope-rank\t" PS_FORMAT_VERSION "\n");
    kv(f, "rank", (uint64_t)ps_world_rank);
    kv(f, "size", (uint64_t)ps_world_size);
    ps_fmt_str(f, "status\t"); ps_fmt_tsv(f, status); ps_fmt_char(f, '\n');
    ps_fmt_str(f, "host\t"); ps_fmt_tsv(f, host_name); ps_fmt_char(f, '\n');
    kv(f, "pid", (uint64_t)getpid());
    ps_fmt_str(f, "program\t"); ps_fmt_tsv(f, ps_program_name()); ps_fmt_char(f, '\n');
    ps_fmt_str(f, "command\t");
    ps_fmt_tsv(f, ps_options.command[0] ? ps_options.command : ps_program_name());
    ps_fmt_char(f, '\n');
    ps_fmt_str(f, "tool_version\t" PS_VERSION "\n");
    extern char ps_mpi_library[];
    ps_fmt_str(f, "mpi_library\t"); ps_fmt_tsv(f, ps_mpi_library[0] ? ps_mpi_library : "-"); ps_fmt_char(f, '\n');
    kv(f, "start_unix_ns", ps_start_realtime_ns);
    kv(f, "wall_ns", ps_wall_ns());
    kv(f, "mpi_ns", ps_ticks_to_ns(ps_rank_mpi_ticks()));
    kv(f, "thread_multiple", (uint64_t)ps_threaded);
    kv(f, "counter_unknown_requests", atomic_load(&ps_counters.unknown_requests));
    kv(f, "counter_request_table_full", atomic_load(&ps_counters.request_table_full));
    kv(f, "counter_comm_table_full", atomic_load(&ps_counters.comm_table_full));
    kv(f, "counter_unknown_comms", atomic_load(&ps_counters.unknown_comms));
    kv(f, "counter_alloc_failures", atomic_load(&ps_counters.alloc_failures));
    kv(f, "counter_write_errors", atomic_load(&ps_counters.write_errors));
    kv(f, "counter_sampler_failures", atomic_load(&ps_counters.sampler_failures));
    kv(f, "counter_unwind_unavailable", atomic_load(&ps_counters.unwind_unavailable));
    void ps_write_paths(ps_fmt_t *f);
    ps_write_paths(f);
    for (int c = 0; c < ps_ncomms; c++) {
        ps_comm_t *cm = ps_comms[c];
        ps_fmt_str(f, "comm\t");
        ps_fmt_tsv(f, cm->name); ps_fmt_char(f, '\t');
        ps_fmt_i64(f, cm->size); ps_fmt_char(f, '\t');
        ps_fmt_i64(f, cm->remote_size); ps_fmt_char(f, '\t');
        ps_fmt_i64(f, cm->my_rank); ps_fmt_char(f, '\t');
        ps_fmt_tsv(f, cm->parent_id >= 0 ? ps_comms[cm->parent_id]->name : "-"); ps_fmt_char(f, '\t');
        ps_fmt_str(f, cm->creator_op >= 0 ? ps_op_names[cm->creator_op] : "-"); ps_fmt_char(f, '\t');
        ps_fmt_i64(f, cm->freed); ps_fmt_char(f, '\t');
        if (cm->members) {
            ps_fmt_ranges(f, cm->members, cm->size);
            if (cm->is_inter) { ps_fmt_char(f, '|'); ps_fmt_ranges(f, cm->members + cm->size, cm->remote_size); }
        } else {
            ps_fmt_char(f, '-');
        }
        ps_fmt_char(f, '\t');
        ps_fmt_tsv(f, cm->topo[0] ? cm->topo : "-");
        ps_fmt_char(f, '\t');
        ps_fmt_u64(f, cm->sent_msgs); ps_fmt_char(f, '\t');
        ps_fmt_u64(f, cm->sent_bytes); ps_fmt_char(f, '\t');
        ps_fmt_u64(f, cm->recv_msgs); ps_fmt_char(f, '\t');
        ps_fmt_u64(f, cm->recv_bytes); ps_fmt_char(f, '\t');
        /* (2.3) requests freed while outstanding, requests that ended with an error */
        ps_fmt_u64(f, cm->freed_sends); ps_fmt_char(f, '\t');
        ps_fmt_u64(f, cm->freed_recvs); ps_fmt_char(f, '\t');
        ps_fmt_u64(f, cm->freed_recv_capacity); ps_fmt_char(f, '\t');
        ps_fmt_u64(f, cm->failed_requests); ps_fmt_char(f, '\n');
    }
    for (int c = 0; c < ps_ncomms; c++) {
        ps_comm_t *cm = ps_comms[c];
        for (int op = 0; op < PS_NUM_OPS; op++) {
            ps_stat_t *s = cm->ops[op];
            if (!s) continue;
            ps_fmt_str(f, "op\t");
            ps_fmt_tsv(f, cm->name); ps_fmt_char(f, '\t');
            ps_fmt_str(f, ps_op_names[op]); ps_fmt_char(f, '\t');
            ps_fmt_u64(f, s->calls); ps_fmt_char(f, '\t');
            ps_fmt_u64(f, s->bytes); ps_fmt_char(f, '\t');
            ps_fmt_u64(f, ps_ticks_to_ns(s->ticks)); ps_fmt_char(f, '\t');
            int first = 1;
            for (int b = 0; b < PS_HIST_BINS; b++) {
                if (!s->hist[b]) continue;
                if (!first) ps_fmt_char(f, ',');
                ps_fmt_u64(f, (uint64_t)b); ps_fmt_char(f, ':'); ps_fmt_u64(f, s->hist[b]);
                first = 0;
            }
            if (first) ps_fmt_char(f, '-');
            ps_fmt_char(f, '\n');
        }
    }
    ps_fmt_str(f, "end\n");
}

void ps_write_rank_file(const char *status)
{
    static char tmp[PS_PATH_MAX + 64], final_path[PS_PATH_MAX + 64];
    if (!ps_outdir[0]) return;
    put_path(tmp, sizeof tmp, ".tsv.tmp");
    put_path(final_path, sizeof final_path, ".tsv");
    int fd = ps_sys_open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        atomic_fetch_add(&ps_counters.write_errors, 1);
        return;
    }
    ps_fmt_t f = {rank_buf, 0, sizeof rank_buf, fd, 0};
    ps_write_rank_body(&f, status);
    ps_fmt_flush(&f);
    if (f.failed) atomic_fetch_add(&ps_counters.write_errors, 1);
    ps_sys_close(fd);
    ps_sys_rename(tmp, final_path);
}

/* ---- peers on this node ------------------------------------------------------------------ */
static int *peer_pid;          /* world rank -> pid, for ranks on this host; 0 elsewhere */

static uint64_t host_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Collective over MPI_COMM_WORLD (called inside MPI_Init). */
void ps_peers_init(void)
{
    uint64_t mine[2] = {(uint64_t)getpid(), host_hash(host_name)};
    uint64_t *all = malloc(sizeof(uint64_t) * 2 * (size_t)ps_world_size);
    peer_pid = calloc((size_t)ps_world_size, sizeof(int));
    if (!all || !peer_pid) {
        free(all);
        free(peer_pid);
        peer_pid = NULL;
        return;
    }
    PMPI_Allgather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int r = 0; r < ps_world_size; r++)
        if (r != ps_world_rank && all[2 * r + 1] == mine[1]) peer_pid[r] = (int)all[2 * r];
    free(all);
}

void ps_notify_peers(int send_signal)
{
    static char path[PS_PATH_MAX + 64];
    static int waiting[1 << 12];
    if (!peer_pid || !ps_outdir[0]) return;
    int n = 0;
    for (int r = 0; r < ps_world_size && n < (int)(sizeof waiting / sizeof *waiting); r++)
        if (peer_pid[r] > 0) {
            waiting[n++] = r;
            if (send_signal) kill(peer_pid[r], SIGTERM);
        }
    /* wait (at most 3 s) until every peer has written its file since this run started, or
     * is gone: a rank that dies early makes the launcher SIGKILL the others */
    time_t start_s = (time_t)(ps_start_realtime_ns / 1000000000ull);
    struct timespec ms = {0, 2000000};
    for (int iter = 0; iter < 1500 && n > 0; iter++) {
        for (int i = 0; i < n;) {
            int r = waiting[i];
            struct stat st;
            put_path_rank(path, sizeof path, r, ".tsv");
            if ((stat(path, &st) == 0 && st.st_mtim.tv_sec >= start_s) || kill(peer_pid[r], 0) != 0)
                waiting[i] = waiting[--n];
            else
                i++;
        }
        if (n) nanosleep(&ms, NULL);
    }
}
