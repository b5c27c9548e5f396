/* The live segment (docs/format.md, "Live segment and control channel"): a file in
 * the private directory, mapped shared, rewritten once per interval by the control thread
 * under a seqlock, read by `pathscope top` without ever blocking us.
 *
 * Only the control thread writes it (and the thread that stopped the control thread, for the
 * last header); the application's threads never touch it.  The file descriptor is closed as
 * soon as it is mapped: the mapping keeps the file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "live.h"
#include "live_internal.h"
#include "source.h"

#define SEGMENT_SIZE (256u * 1024u)
#define HEADER_SIZE 4096u
#define COST_LIMIT_NS 1000000u   /* a publish over 1 ms of CPU doubles the interval */
#define INTERVAL_MAX_MS 60000u

typedef struct {
    char magic[8];
    uint32_t layout_version, header_size;
    uint64_t seq, publishes, published_unix_ns;
    uint32_t interval_ms, state, uid, pid;
    uint64_t start_time;
    int32_t rank, size;
    uint32_t data_offset, data_capacity, data_len, publisher_cpu_us;
    char run_id[40];
    char host[64];
    char program[256];
    char outdir[1024];
    char socket[128];
    uint64_t publisher_cpu_total_ns;
} live_header_t;

_Static_assert(offsetof(live_header_t, seq) == 16, "layout");
_Static_assert(offsetof(live_header_t, interval_ms) == 40, "layout");
_Static_assert(offsetof(live_header_t, start_time) == 56, "layout");
_Static_assert(offsetof(live_header_t, rank) == 64, "layout");
_Static_assert(offsetof(live_header_t, data_offset) == 72, "layout");
_Static_assert(offsetof(live_header_t, publisher_cpu_us) == 84, "layout");
_Static_assert(offsetof(live_header_t, run_id) == 88, "layout");
_Static_assert(offsetof(live_header_t, host) == 128, "layout");
_Static_assert(offsetof(live_header_t, program) == 192, "layout");
_Static_assert(offsetof(live_header_t, outdir) == 448, "layout");
_Static_assert(offsetof(live_header_t, socket) == 1472, "layout");
_Static_assert(offsetof(live_header_t, publisher_cpu_total_ns) == 1600, "layout");
_Static_assert(sizeof(live_header_t) <= HEADER_SIZE, "layout");

static live_header_t *header; /* the mapping, NULL when there is none */
static double ticks_per_ns = 1.0;

uint64_t ps_live_ns(uint64_t ticks) { return (uint64_t)((double)ticks / ticks_per_ns); }

static void copy_field(char *dst, size_t cap, const char *src)
{
    size_t n = 0;
    while (n + 1 < cap && src[n]) n++;
    memcpy(dst, src, n);
    memset(dst + n, 0, cap - n);
}

int ps_live_segment_create(int dirfd, const char *name, const char *socket_name,
                           uint64_t start_time, unsigned interval_ms)
{
    int flags = O_CREAT | O_EXCL | O_NOFOLLOW | O_RDWR | O_CLOEXEC;
    int fd = openat(dirfd, name, flags, 0600);
    if (fd < 0 && errno == EEXIST) {
        /* our name (pid and start time) in our private directory: left by this process's
         * previous program, replaced by an exec that bypassed libc's execve (no cleanup) */
        unlinkat(dirfd, name, 0);
        fd = openat(dirfd, name, flags, 0600);
    }
    if (fd < 0) return errno;
    void *p = MAP_FAILED;
    if (ftruncate(fd, SEGMENT_SIZE) == 0)
        p = mmap(NULL, SEGMENT_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int error = p == MAP_FAILED ? errno : 0;
    close(fd);
    if (error) {
        unlinkat(dirfd, name, 0);
        return error;
    }
    header = p; /* (zero-filled by ftruncate) */
    memcpy(header->magic, "PSLIVE1", 8);
    header->layout_version = 1;
    header->header_size = HEADER_SIZE;
    header->interval_ms = interval_ms;
    header->uid = (uint32_t)geteuid();
    header->pid = (uint32_t)getpid();
    header->start_time = start_time;
    header->rank = -1;
    header->data_offset = HEADER_SIZE;
    header->data_capacity = SEGMENT_SIZE - HEADER_SIZE;
    copy_field(header->socket, sizeof header->socket, socket_name);
    gethostname(header->host, sizeof header->host - 1);
    return 0;
}

void ps_live_segment_unmap(void)
{
    if (header) syscall(SYS_munmap, header, SEGMENT_SIZE);
    header = NULL;
}

/* ---- the data ---------------------------------------------------------------------------- */
/* core's lines: the process's time and its threads, then the modules the frames name. */
static void write_core(ps_fmt_t *f)
{
    uint64_t now = ps_clock_monotonic_ns(), now_ticks = ps_now();
    ps_fmt_str(f, "source\tlive\n");
    ps_fmt_line_u64(f, "elapsed", (const uint64_t[]){now - ps_start_ns}, 1);
    int n = atomic_load(&ps_nthreads);
    for (int i = 0; i < n && i < PS_MAX_THREADS; i++) {
        ps_thread_t *t = __atomic_load_n(&ps_threads[i], __ATOMIC_ACQUIRE);
        if (!t) continue;
        uint64_t end = ps_live_load64(&t->end_ticks), end_cpu = ps_live_load64(&t->end_cpu_ns);
        uint64_t elapsed = ps_live_ns((end ? end : now_ticks) - t->start_ticks);
        uint64_t cpu = end_cpu ? end_cpu : ps_thread_cpu_ns(t->tid);
        cpu = cpu > t->start_cpu_ns ? cpu - t->start_cpu_ns : 0;
        ps_fmt_line_u64(f, "thread", (const uint64_t[]){(uint64_t)t->index, (uint64_t)t->tid,
                                                         elapsed, cpu}, 4);
    }
    ps_live_modules_write(f);
}

/* Every source's section: its name, then what its publish hook writes. */
static void write_sources(ps_fmt_t *f)
{
    for (int i = 0; i < PS_NSOURCES; i++) {
        if (!ps_sources[i]->publish) continue;
        ps_fmt_str(f, "source\t");
        ps_fmt_str(f, ps_sources[i]->name);
        ps_fmt_char(f, '\n');
        ps_sources[i]->publish(f);
    }
}

/* The data's length: cut back to the last whole line when the area filled up. */
static uint32_t whole_lines(const ps_fmt_t *f)
{
    size_t len = f->len;
    if (f->failed)
        while (len && f->buf[len - 1] != '\n') len--;
    return (uint32_t)len;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void seq_begin(void)
{
    __atomic_store_n(&header->seq, header->seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

static void seq_end(void)
{
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&header->seq, header->seq + 1, __ATOMIC_RELEASE);
}

static void write_identity(int state)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    header->publishes++;
    header->published_unix_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    header->state = (uint32_t)state;
    header->rank = ps_world_rank;
    header->size = ps_world_size;
    copy_field(header->run_id, sizeof header->run_id, ps_run_id);
    copy_field(header->program, sizeof header->program, ps_program_name());
    const char *outdir = ps_outdir_path();
    copy_field(header->outdir, sizeof header->outdir, outdir[0] == '/' ? outdir : "");
}

unsigned ps_live_publish(int state)
{
    if (!header) return 0;
    uint64_t cpu0 = thread_cpu_ns();
    ticks_per_ns = ps_ticks_per_ns();
    ps_live_modules_refresh();
    seq_begin();
    write_identity(state);
    ps_fmt_t f = {(char *)header + HEADER_SIZE, 0, header->data_capacity, -1, 0};
    write_core(&f);
    write_sources(&f);
    header->data_len = whole_lines(&f);
    seq_end();
    /* the cost of this publish, in the next one's header words (a second short write) */
    uint64_t cost = thread_cpu_ns() - cpu0;
    unsigned interval = header->interval_ms;
    if (cost > COST_LIMIT_NS && interval < INTERVAL_MAX_MS)
        interval = interval * 2 < INTERVAL_MAX_MS ? interval * 2 : INTERVAL_MAX_MS;
    seq_begin();
    header->publisher_cpu_us = (uint32_t)(cost / 1000);
    header->publisher_cpu_total_ns += cost;
    header->interval_ms = interval;
    seq_end();
    return interval;
}
