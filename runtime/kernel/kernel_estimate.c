/* Kernel time: what no report carried, spread over the reported paths (issue 16).
 *
 * Attribution is sampled by time (kernel.h): per thread and system call, the calls made after
 * its last report are in the exact table (ksys) but on no path.  When the rank file is
 * written, the trees frozen, each (thread, system call) whose reports reached at least one
 * path gets that rest spread over those paths' syscall nodes in proportion: the calls by
 * their calls, the time by their time.  A loop from one site thus gets its exact count; with
 * several sites the rest is less than one period of the thread's time in the call, so no
 * path is off by more than that.  Done here, in the process, so that the rank file, the
 * in-job reduction (tree.tsv) and every reader see the same numbers.
 *
 * Kept out of the estimates, under [kernel: no call path]: threads and system calls that no
 * report reached a path for, and (eBPF) the calls of reports that reached none (pathscope's
 * own calls, a thread inside pathscope: kernel.c's dropped table).
 *
 * Idempotent: the rank file may be written again (the heap's rewrite at exit, a signal after
 * MPI_Finalize); each write first takes back the estimates of the previous one (kept per
 * thread, kernel_thread_t.est) and recomputes them from the tables of the moment.
 *
 * Runs inside the rank file's writer, which may be a fatal-signal handler: [signal-safe] --
 * static tables, memory from ps_map_zeroed, no stdio.  One writer at a time (ending.c).
 */
#include <string.h>
#include <sys/mman.h>

#include "source.h"
#include "kernel.h"
#include "kernel_thread.h"

_Static_assert(PS_KLIBC_N <= PS_NR_SYSCALLS, "libc functions share the syscall slots");

/* One system call (eBPF: its number) or libc function (libc: its id) of the thread at hand. */
typedef struct {
    uint64_t total_count, total_time;   /* the thread's exact table */
    uint64_t path_count, path_time;     /* on its syscall nodes: what reports carried */
    uint64_t rest_count, rest_time;     /* to spread */
    uint64_t seen_count, seen_time;     /* path values of the nodes spread over so far */
    uint32_t nodes;                     /* its syscall nodes */
    int touched;
} slot_t;

static slot_t slots[PS_NR_SYSCALLS];
static uint16_t touched[PS_NR_SYSCALLS];
static int ntouched;

static slot_t *slot_of(uintptr_t key)
{
    uintptr_t i = key;
    if (ps_kernel_source == PS_KSRC_LIBC) {
        if (key < PS_KLIBC_KEY || key >= PS_KLIBC_KEY + PS_KLIBC_N) return NULL;
        i = key - PS_KLIBC_KEY;
    }
    if (i >= PS_NR_SYSCALLS) return NULL;
    if (!slots[i].touched) {
        slots[i].touched = 1;
        touched[ntouched++] = (uint16_t)i;
    }
    return &slots[i];
}

static void slots_clear(void)
{
    for (int k = 0; k < ntouched; k++) memset(&slots[touched[k]], 0, sizeof slots[0]);
    ntouched = 0;
}

/* The part of rest that falls on a node whose value brings the running sum from `before` to
 * `after` (of `whole`): consecutive differences of floor(rest * sum / whole), so the parts
 * add up to rest exactly and each is within one of its exact proportion. */
static uint64_t share(uint64_t rest, uint64_t before, uint64_t after, uint64_t whole)
{
    return (uint64_t)((unsigned __int128)rest * after / whole -
                      (unsigned __int128)rest * before / whole);
}

/* The previous write's estimates taken back: the nodes hold what reports carried. */
static void estimates_undo(ps_thread_t *t)
{
    kernel_thread_t *kt = kernel_of(t);
    for (uint32_t i = 0; i < kt->est_n; i++) {
        ps_node_t *n = &t->nodes[kt->est[i].node];
        n->visits -= kt->est[i].count;
        n->kernel_time -= kt->est[i].time;
    }
    kt->est_n = 0;
}

/* Room for n estimates of thread t (kept from one write to the next). */
static int estimates_room(kernel_thread_t *kt, uint32_t n)
{
    if (n <= kt->est_cap) return 0;
    ps_kest_t *room = ps_map_zeroed(n * sizeof *room);
    if (!room) return -1;
    if (kt->est) munmap(kt->est, kt->est_cap * sizeof *kt->est);
    kt->est = room;
    kt->est_cap = n;
    return 0;
}

/* A slot's rest: its table minus what reports carried to a path or (eBPF: dropped) to none;
 * nothing when no report reached a path (it stays under [kernel: no call path]).  Returns
 * the nodes that get a part. */
static uint32_t slot_rest(slot_t *s, const ps_kdrop_t *dropped)
{
    uint64_t off_count = s->path_count + (dropped ? dropped->count : 0);
    uint64_t off_time = s->path_time + (dropped ? dropped->ns : 0);
    if (!s->path_count) return 0;
    s->rest_count = s->total_count > off_count ? s->total_count - off_count : 0;
    s->rest_time = s->total_time > off_time ? s->total_time - off_time : 0;
    return s->rest_count || s->rest_time ? s->nodes : 0;
}

/* Thread t, its table in the slots (total_*): sums its syscall nodes, works out each slot's
 * rest and spreads it. */
static void estimate_thread(ps_thread_t *t)
{
    kernel_thread_t *kt = kernel_of(t);
    for (uint32_t id = 1; id < t->nnodes; id++) {
        ps_node_t *n = &t->nodes[id];
        slot_t *s = n->kind == PS_NODE_SYSCALL ? slot_of(n->key) : NULL;
        if (!s) continue;
        s->path_count += n->visits;
        s->path_time += n->kernel_time;
        s->nodes++;
    }
    uint32_t need = 0;
    for (int k = 0; k < ntouched; k++)
        need += slot_rest(&slots[touched[k]], kt->dropped ? &kt->dropped[touched[k]] : NULL);
    if (!need || estimates_room(kt, need)) return;
    for (uint32_t id = 1; id < t->nnodes; id++) {
        ps_node_t *n = &t->nodes[id];
        slot_t *s = n->kind == PS_NODE_SYSCALL ? slot_of(n->key) : NULL;
        if (!s || !(s->rest_count || s->rest_time)) continue;
        uint64_t count = share(s->rest_count, s->seen_count, s->seen_count + n->visits,
                               s->path_count);
        /* time by time; by calls where the reports carried none */
        uint64_t time = s->path_time ? share(s->rest_time, s->seen_time,
                                             s->seen_time + n->kernel_time, s->path_time)
                                     : share(s->rest_time, s->seen_count,
                                             s->seen_count + n->visits, s->path_count);
        s->seen_count += n->visits;
        s->seen_time += n->kernel_time;
        if (!count && !time) continue;
        n->visits += count;
        n->kernel_time += time;
        kt->est[kt->est_n++] = (ps_kest_t){id, count, time};
    }
}

/* The threads by tid (open addressing, filled once per write): the snapshot names threads
 * by tid, and a scan of every thread record per tid costs milliseconds at 800 threads.  Only
 * the first tid_mask + 1 slots are used (twice the threads, a power of two): a small process
 * touches a few of its pages. */
static struct { int tid; ps_thread_t *t; } by_tid[2 * PS_MAX_THREADS];
static unsigned tid_mask;

static void tid_index_fill(int nthreads)
{
    for (tid_mask = 15; tid_mask + 1 < 2u * (unsigned)nthreads;) tid_mask = tid_mask * 2 + 1;
    memset(by_tid, 0, (tid_mask + 1) * sizeof by_tid[0]);
    for (int i = 0; i < nthreads; i++) {
        ps_thread_t *t = ps_threads[i];
        if (!t || !t->tid) continue;
        unsigned h = (unsigned)t->tid * 2654435761u & tid_mask;
        while (by_tid[h].tid && by_tid[h].tid != t->tid) h = (h + 1) & tid_mask;
        if (!by_tid[h].tid) by_tid[h].tid = t->tid, by_tid[h].t = t; /* (a reused tid: the first) */
    }
}

static ps_thread_t *thread_by_tid(uint64_t tid)
{
    if (!tid || tid > 0x7fffffff) return NULL;
    for (unsigned h = (unsigned)tid * 2654435761u & tid_mask; by_tid[h].tid; h = (h + 1) & tid_mask)
        if ((uint64_t)by_tid[h].tid == tid) return by_tid[h].t;
    return NULL;
}

static uint64_t decimal(const char **p)
{
    uint64_t v = 0;
    for (; **p >= '0' && **p <= '9'; (*p)++) v = v * 10 + (uint64_t)(**p - '0');
    return v;
}

/* eBPF: the snapshot's ksys lines ("ksys TID NAME COUNT NS", checked, grouped by thread),
 * thread by thread. */
static void estimate_from_snapshot(const char *buf, size_t len, int nthreads)
{
    tid_index_fill(nthreads);
    const char *p = buf, *end = buf + len;
    uint64_t tid = 0;
    ps_thread_t *t = NULL;
    while (p < end && strncmp(p, "ksys\t", 5) == 0) {
        p += 5;
        uint64_t line_tid = decimal(&p);
        const char *name = ++p;
        while (*p != '\t') p++;
        int nr = ps_kernel_syscall_number(name, (size_t)(p - name));
        p++;
        uint64_t count = decimal(&p);
        p++;
        uint64_t ns = decimal(&p);
        p++; /* '\n' */
        if (line_tid != tid) {
            if (t && t->nodes) estimate_thread(t);
            slots_clear();
            tid = line_tid;
            t = thread_by_tid(tid);
        }
        if (nr >= 0) {
            slot_t *s = slot_of((uintptr_t)nr);
            s->total_count = count;
            s->total_time = ns;
        }
    }
    if (t && t->nodes) estimate_thread(t);
    slots_clear();
}

void ps_kernel_estimate(void)
{
    if (ps_kernel_source == PS_KSRC_OFF) return;
    int nthreads = ps_write_nthreads();
    for (int i = 0; i < nthreads; i++)
        if (ps_threads[i] && ps_threads[i]->nodes) estimates_undo(ps_threads[i]);
    if (ps_kernel_source == PS_KSRC_EBPF) {
        size_t len;
        const char *lines = ps_kernel_snapshot(&len);
        if (lines) estimate_from_snapshot(lines, len, nthreads);
        return;
    }
    for (int i = 0; i < nthreads; i++) {
        ps_thread_t *t = ps_threads[i];
        const ps_kstat_t *k = t ? kernel_of(t)->kstat : NULL;
        if (!k || !t->nodes) continue;
        for (int id = 0; id < PS_KLIBC_N; id++) {
            if (!k[id].count) continue;
            slot_t *s = slot_of(PS_KLIBC_KEY + (uintptr_t)id);
            s->total_count = k[id].count;
            s->total_time = k[id].ticks;
        }
        estimate_thread(t);
        slots_clear();
    }
}

void ps_kernel_write_estimates(ps_fmt_t *f, ps_thread_t *t)
{
    const kernel_thread_t *kt = kernel_of(t);
    for (uint32_t i = 0; i < kt->est_n; i++) {
        const ps_kest_t *e = &kt->est[i];
        uint64_t ns = ps_kernel_source == PS_KSRC_LIBC ? ps_ticks_to_ns(e->time) : e->time;
        ps_fmt_line_u64(f, "knode", (const uint64_t[]){(uint64_t)t->index, e->node, e->count,
                                                       ns}, 4);
    }
}
