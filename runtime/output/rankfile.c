/* The per-rank file, ranks/rank-NNNNNN.tsv (docs/format.md).  Written by every rank at
 * MPI_Finalize, and also from fatal-signal handlers, MPI_Abort and exit without finalize, so
 * everything reachable from ps_write_rank_file() is async-signal-safe: no malloc, no stdio,
 * only raw system calls and our own formatting into a static buffer.  The file is created and
 * renamed relative to the profile directory's descriptors (output/outdir.c). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <stdio.h>
#include <unistd.h>

#include "../core/pathscope.h"
#include "../core/source.h"

/* ---- the text kept for the reduction of the call trees (mpi/treereduce.c) -----------------
 * At MPI_Finalize the rank file is written into a memory file first: the reduction reads it,
 * --per-rank all writes it into ranks.tsv (mpi/ranksfile.c), and it reaches ranks/ only when
 * those could not be done, or when a signal or a peer's request comes before they are (it is
 * then the rank's record).  Every other ending (crash, abort, exit without finalize) writes
 * ranks/ directly, as ever. */
static struct {
    ps_ownfd_t own;       /* the memory file (moved out of the application's way) */
    char *map;
    size_t len;
    int on_disk;          /* written from it: ranks/rank-NNNNNN.tsv (or directly), ranks.tsv */
    int superseded;       /* reduced into tree.tsv, --per-rank none: no rank file at all */
} text = {{-1, 0, 0, 0}, NULL, 0, 0, 0};

static int text_to_file(void);

static char rank_buf[1 << 16];
static char host_name[256];

/* "rank-000003.tsv" (at least 6 digits) */
static void rank_file_name(char *dst, size_t cap, int rank)
{
    ps_fmt_t f = {dst, 0, cap - 1, -1, 0};
    char digits[24];
    ps_fmt_t d = {digits, 0, sizeof digits - 1, -1, 0};
    ps_fmt_u64(&d, (uint64_t)(rank < 0 ? 0 : rank));
    digits[d.len] = 0;
    ps_fmt_str(&f, "rank-");
    for (size_t i = d.len; i < 6; i++) ps_fmt_char(&f, '0');
    ps_fmt_str(&f, digits);
    ps_fmt_str(&f, ".tsv");
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

void ps_write_rank_body(ps_fmt_t *f, const char *status)
{
    ps_fmt_str(f, "pathscope-rank\t" PS_FORMAT_VERSION "\n");
    ps_fmt_str(f, "run\t");
    ps_fmt_str(f, ps_run_id);
    ps_fmt_char(f, '\n');
    ps_fmt_flush(f); /* the run line first: a temporary always says whose it is */
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
    ps_rank_summary_t sum = {"-", 0};
    for (int s = 0; s < PS_NSOURCES; s++)
        if (ps_sources[s]->summary) ps_sources[s]->summary(&sum);
    ps_fmt_str(f, "mpi_library\t"); ps_fmt_tsv(f, sum.library); ps_fmt_char(f, '\n');
    kv(f, "start_unix_ns", ps_start_realtime_ns);
    uint64_t wall = ps_wall_ns();
    kv(f, "wall_ns", wall);
    kv(f, "mpi_ns", sum.mpi_ns);
    /* (its statistics over the ranks, in tree.tsv, give the extremes of the share exactly) */
    kv(f, "mpi_share_ppm", wall ? (uint64_t)((unsigned __int128)sum.mpi_ns * 1000000u / wall) : 0);
    kv(f, "thread_multiple", (uint64_t)ps_threaded);
    kv(f, "counter_unknown_requests", atomic_load(&ps_counters.unknown_requests));
    kv(f, "counter_request_table_full", atomic_load(&ps_counters.request_table_full));
    kv(f, "counter_comm_table_full", atomic_load(&ps_counters.comm_table_full));
    kv(f, "counter_unknown_comms", atomic_load(&ps_counters.unknown_comms));
    kv(f, "counter_alloc_failures", atomic_load(&ps_counters.alloc_failures));
    kv(f, "counter_write_errors", atomic_load(&ps_counters.write_errors));
    kv(f, "counter_sampler_failures", atomic_load(&ps_counters.sampler_failures));
    kv(f, "counter_unwind_unavailable", atomic_load(&ps_counters.unwind_unavailable));
    ps_warn_write(f);
    void ps_write_paths(ps_fmt_t *f);
    ps_write_paths(f);
    ps_sources_write(f, PS_SEC_TAIL, NULL);
    ps_fmt_str(f, "end\n");
}

void ps_write_rank_file(const char *status)
{
    static char name[32];
    static ps_outfile_t out;
    /* (the heap's rewrite at exit, a signal after MPI_Finalize: the run's data is in tree.tsv) */
    if (!ps_outdir[0] || text.superseded) return;
    if (ps_rank_text_pending()) { /* (MPI_Finalize's text, not yet in the reduced files) */
        text_to_file();
        return;
    }
    rank_file_name(name, sizeof name, ps_world_rank);
    /* Before the file exists (kernel: the collector's tables, whose problems are warnings
     * of this file; our own writes to it are not the application's system calls). */
    ps_sources_write(NULL, PS_SEC_PREPARE, NULL);
    int fd = ps_outfile_begin(&out, PS_FILE_RANK, name);
    if (fd < 0) return;
    ps_fmt_t f = {rank_buf, 0, sizeof rank_buf, fd, 0};
    ps_write_rank_body(&f, status);
    ps_fmt_flush(&f);
    ps_outfile_end(&out, f.failed);
}

int ps_per_rank_all(void) { return strcmp(ps_options.per_rank, "all") == 0; }

int ps_rank_text_pending(void) { return text.map && !text.on_disk && !text.superseded; }

const char *ps_rank_text(size_t *len)
{
    *len = text.len;
    return text.map;
}

static int text_to_file(void)
{
    static char name[32];
    static ps_outfile_t out;
    if (text.on_disk || !text.map || !ps_outdir[0]) return 0;
    rank_file_name(name, sizeof name, ps_world_rank);
    int fd = ps_outfile_begin(&out, PS_FILE_RANK, name);
    if (fd < 0) return ps_outfile_error(PS_FILE_RANK);
    ps_fmt_t f = {text.map, text.len, text.len, fd, 0};   /* (the whole text, to flush) */
    ps_fmt_flush(&f);
    text.on_disk = 1;
    return ps_outfile_end(&out, f.failed);
}

static void text_release(void)
{
    if (text.map) munmap(text.map, text.len);
    text.map = NULL;
    text.len = 0;
    if (ps_fd_owned(&text.own)) ps_sys_close(text.own.fd);
    text.own.fd = -1;
}

int ps_rank_text_done(int reduced, int collected)
{
    int error = 0;
    /* (a signal's ending or a peer's request may write the text meanwhile: one at a time) */
    int claimed = ps_final_writer_claim(1);
    if (collected) text.on_disk = 1; /* (not superseded: the heap's rewrite at exit goes to ranks/) */
    else if (!reduced || ps_per_rank_all()) error = text_to_file();
    else text.superseded = 1;
    text_release();
    if (claimed) ps_final_writer_release();
    return error;
}

/* The final rank file at MPI_Finalize: into a memory file, for the reduction and ranks.tsv.
 * Without a memory file, straight to ranks/ (the reduction then has nothing to merge, and
 * every rank keeps its file). */
void ps_write_rank_file_final(const char *status)
{
    if (!ps_outdir[0]) return;
    int fd = (int)syscall(SYS_memfd_create, "pathscope-rank", MFD_CLOEXEC);
    if (fd >= 0) fd = ps_fd_adopt(fd, &text.own);
    if (fd < 0) {
        ps_write_rank_file(status);
        text.on_disk = 1;
        return;
    }
    ps_sources_write(NULL, PS_SEC_PREPARE, NULL);
    ps_fmt_t f = {rank_buf, 0, sizeof rank_buf, fd, 0};
    ps_write_rank_body(&f, status);
    ps_fmt_flush(&f);
    off_t len = lseek(fd, 0, SEEK_END);
    void *map = f.failed || len <= 0 ? MAP_FAILED
                                     : mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        text_release();
        ps_write_rank_file(status);
        text.on_disk = 1;
        return;
    }
    text.map = map;
    text.len = (size_t)len;
}

/* Whether world rank `rank` has written its file since this run started (output/peers.c
 * waits for the other ranks of the node with it). [signal-safe] */
int ps_rank_file_written_this_run(int rank)
{
    static char name[32];
    struct stat st;
    rank_file_name(name, sizeof name, rank);
    int ranks = ps_outdir_ranks_fd();
    time_t start_s = (time_t)(ps_start_realtime_ns / 1000000000ull);
    return ranks >= 0 && syscall(SYS_newfstatat, ranks, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           st.st_mtim.tv_sec >= start_s;
}
