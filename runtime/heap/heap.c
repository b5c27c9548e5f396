/* Heap profiling by call path: see heap.h for the two libraries and docs/format.md ("Heap")
 * for what is written.
 *
 * Header, not table.  To charge a free to the call path of its allocation we need, per live
 * block, its size and its tree node.  A global address table would cost a hash update under
 * a lock (or a lock-free table that must grow) on every malloc and free, from every thread.
 * A 16-byte header in front of the block costs two stores and is found from the pointer:
 *
 *     base (from the real allocator)      p (returned)
 *     | ...alignment padding... | header |  user data ...
 *     header = { size (48 bits) | offset p - base in 16-byte units (16 bits),
 *                node (32 bits), thread index (16 bits), magic (16 bits) }
 *
 * The magic sits in the header's top 16 bits, where a block of glibc's allocator (that never
 * went through us) has the top of its chunk size field: zero for any chunk under 256 TiB.
 * Our magic has its top bit set and depends on the address, so a foreign pointer -- one that
 * was allocated before the shim was resolved, or by code that calls the allocator below us
 * -- is recognised and passed through to the real free untouched (counted).
 *
 * Live bytes at the peak, per call path, without a snapshot at every peak.  The rank's live
 * total is one atomic counter; each time it reaches a new maximum the peak generation is
 * bumped.  A node's live bytes at the latest peak are its live bytes before its first update
 * after that peak -- so each node keeps (peak_live, stamp) and, before every update, copies
 * its live bytes into peak_live when its stamp is older than the current generation.  A node
 * not updated since the last peak still holds its peak value as its live value.  Exact for a
 * single thread; with several threads updating at the same instant, within those updates.
 *
 * Safety: no locks except a try-lock on the timeline (skipped when taken), no allocation,
 * nothing that can call malloc (a thread-local depth guard sends nested calls, e.g. from a
 * signal handler that interrupted us, to the real allocator as untracked).  A sample that
 * lands while we update the tree sees the thread busy and is dropped like any other. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <unistd.h>

#include "heap.h"
#include "heap_thread.h"
#include "../core/cct.h"
#include "../core/record.h"
#include "../unwind/unwind.h"

const char *const ps_heap_function_names[PS_HEAP_NFUNCTIONS] = {
    "malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign", "valloc",
    "pvalloc", "reallocarray"};

typedef struct {
    uint64_t size_off;
    uint32_t node;
    uint16_t thread;
    uint16_t magic;
} hdr_t;
_Static_assert(sizeof(hdr_t) == 16, "the header keeps glibc's 16-byte alignment");

#define SIZE_MASK ((1ull << 48) - 1)
#define NO_THREAD 0xFFFFu
#define MAX_ALIGN (1ull << 19) /* larger alignments: passed through, untracked */

int ps_heap_on;
static ps_heap_real_t real;
static int attached;
static volatile int recording; /* ps_heap_start .. the final rank file */
static __thread int depth __attribute__((tls_model("initial-exec")));
static __thread unsigned clock_countdown __attribute__((tls_model("initial-exec")));
#define CLOCK_EVERY 32 /* events of a thread between two clock reads (rdtsc costs ~20 ns in a VM) */
static _Atomic uint64_t heap_clock; /* the latest clock read of any thread */

/* rank totals */
static _Atomic int64_t live_bytes; /* (updated through shared_add) */
static _Atomic uint64_t peak_bytes, peak_ticks, peak_gen = 1;
static uint64_t start_ticks;
ps_heap_stats_t ps_heap_stats;

/* timeline: a point when 10 ms (doubling when the buffer fills) passed since the last one */
#define TL_MAX 8192
static ps_heap_point_t timeline[TL_MAX];
static int tl_n;
static uint64_t tl_interval;
static _Atomic uint64_t tl_next;
static _Atomic int64_t tl_window_max;
static atomic_flag tl_lock = ATOMIC_FLAG_INIT;

static inline uint16_t magic_of(const void *p)
{
    uint64_t x = ((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull;
    return (uint16_t)(x >> 48) | 0x8000u;
}

static inline hdr_t *ours(void *p)
{
    hdr_t *h = (hdr_t *)p - 1;
    return h->magic == magic_of(p) ? h : NULL;
}

static uintptr_t shim_code;
void pathscope_heap_attach(const ps_heap_real_t *r, uintptr_t code)
{
    real = *r;
    shim_code = code;
    attached = 1;
}

int ps_heap_attached(void) { return attached; }

void ps_heap_start(void)
{
    if (!attached) return;
    ps_unwind_add_self(shim_code); /* the shim's frames are ours: not in the paths */
    ps_heap_on = 1;
    start_ticks = ps_now();
    atomic_store(&heap_clock, start_ticks);
    tl_interval = (uint64_t)(ps_ticks_per_ns() * 1e7);
    atomic_store(&tl_next, start_ticks + tl_interval);
    recording = 1;
}

void ps_heap_stop(void) { recording = 0; }
void ps_heap_resume(void)
{
    if (ps_heap_on) recording = 1;
}

static ps_heap_node_t *heap_nodes(const ps_thread_t *t, heap_thread_t *ht)
{
    if (!ht->nodes) {
        /* (first allocation of this thread: mapped once, never freed, like the tree) */
        ht->nodes = ps_map_zeroed(sizeof(ps_heap_node_t) * t->max_nodes);
        if (!ht->nodes) atomic_fetch_add(&ps_counters.alloc_failures, 1);
    }
    return ht->nodes;
}

static inline void node_sync(ps_heap_node_t *h)
{
    uint64_t g = atomic_load_explicit(&peak_gen, memory_order_relaxed);
    if (atomic_load_explicit(&h->stamp, memory_order_relaxed) != g) {
        uint64_t live = atomic_load_explicit(&h->alloc_bytes, memory_order_relaxed) -
                        atomic_load_explicit(&h->freed_bytes, memory_order_relaxed);
        atomic_store_explicit(&h->peak_live, live, memory_order_relaxed);
        atomic_store_explicit(&h->stamp, g, memory_order_relaxed);
    }
}

static void timeline_point(uint64_t now, int64_t live)
{
    if (atomic_flag_test_and_set_explicit(&tl_lock, memory_order_acquire)) return;
    if (now >= atomic_load_explicit(&tl_next, memory_order_relaxed)) {
        if (tl_n == TL_MAX) { /* halve the resolution: pairs become one point */
            for (int i = 0; i < TL_MAX / 2; i++) {
                ps_heap_point_t a = timeline[2 * i], b = timeline[2 * i + 1];
                timeline[i] = b;
                if (a.max > b.max) timeline[i].max = a.max;
            }
            tl_n = TL_MAX / 2;
            tl_interval *= 2;
        }
        int64_t wmax = atomic_exchange_explicit(&tl_window_max, live, memory_order_relaxed);
        timeline[tl_n].ticks = now - start_ticks;
        timeline[tl_n].live = (uint64_t)live;
        timeline[tl_n].max = (uint64_t)(wmax > live ? wmax : live);
        tl_n++;
        atomic_store_explicit(&tl_next, now + tl_interval, memory_order_relaxed);
    }
    atomic_flag_clear_explicit(&tl_lock, memory_order_release);
}

/* Counters that other threads may update: a plain read-modify-write while the process has
 * one thread.  glibc's __libc_single_threaded turns false before the first other thread
 * starts (its own helper threads included), and for good, in the thread that creates it:
 * so the switch to atomic updates is ordered. */
static inline uint64_t shared_add(_Atomic uint64_t *v, uint64_t delta)
{
    if (__libc_single_threaded) {
        uint64_t x = atomic_load_explicit(v, memory_order_relaxed) + delta;
        atomic_store_explicit(v, x, memory_order_relaxed);
        return x;
    }
    return atomic_fetch_add_explicit(v, delta, memory_order_relaxed) + delta;
}

/* The rank's live total changed by delta; a new peak bumps the generation.  Times are the
 * latest clock read (every CLOCK_EVERY events of a thread): a peak's time is late by at
 * most that many of its thread's events. */
static inline void live_changed(int64_t delta)
{
    int64_t live = (int64_t)shared_add((_Atomic uint64_t *)&live_bytes, (uint64_t)delta);
    uint64_t now;
    if (__builtin_expect(clock_countdown-- == 0, 0)) {
        clock_countdown = CLOCK_EVERY - 1;
        now = ps_now();
        atomic_store_explicit(&heap_clock, now, memory_order_relaxed);
        if (now >= atomic_load_explicit(&tl_next, memory_order_relaxed)) timeline_point(now, live);
    } else {
        now = atomic_load_explicit(&heap_clock, memory_order_relaxed);
    }
    if (delta > 0) {
        uint64_t pk = atomic_load_explicit(&peak_bytes, memory_order_relaxed);
        while ((uint64_t)live > pk) {
            if (atomic_compare_exchange_weak_explicit(&peak_bytes, &pk, (uint64_t)live,
                                                      memory_order_relaxed, memory_order_relaxed)) {
                atomic_store_explicit(&peak_ticks, now - start_ticks, memory_order_relaxed);
                atomic_fetch_add_explicit(&peak_gen, 1, memory_order_relaxed);
                break;
            }
        }
        if (live > atomic_load_explicit(&tl_window_max, memory_order_relaxed))
            atomic_store_explicit(&tl_window_max, live, memory_order_relaxed);
    }
}

/* Charges a new block to the calling thread's path below the allocator function fn. */
static void record_alloc(hdr_t *h, uint64_t size, int fn, const uintptr_t *caller)
{
    h->thread = NO_THREAD;
    h->node = 0;
    ps_thread_t *t = ps_self;
    /* (pathscope's own allocations are not the application's; a thunk is not our code) */
    int ours = caller && ps_unwind_in_self(caller[0]) && ps_thunk_index(caller[0]) < 0;
    if (!recording || !t || t->busy || depth > 1 || ours) {
        atomic_fetch_add_explicit(&ps_heap_stats.untracked_allocs, 1, memory_order_relaxed);
        return;
    }
    if (!ps_tree_claim(t, 0)) {
        atomic_fetch_add_explicit(&ps_heap_stats.untracked_allocs, 1, memory_order_relaxed);
        return;
    }
    heap_thread_t *ht = heap_of(t);
    if (!heap_nodes(t, ht)) {
        ps_tree_release(t);
        atomic_fetch_add_explicit(&ps_heap_stats.untracked_allocs, 1, memory_order_relaxed);
        return;
    }
    ps_from_t from = {.how = PS_FROM_CALLER};
    if (caller) from = (ps_from_t){.how = PS_FROM_FRAME, .ra = caller[0], .sp = caller[1], .rbp = caller[2]};
    uint32_t node;
    ps_cct_record(t, &from, PS_NODE_HEAP, (uintptr_t)fn, &ht->leaf, &node);
    ps_heap_node_t *hn = &ht->nodes[node];
    node_sync(hn);
    atomic_store_explicit(&hn->allocs, atomic_load_explicit(&hn->allocs, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&hn->alloc_bytes,
                          atomic_load_explicit(&hn->alloc_bytes, memory_order_relaxed) + size,
                          memory_order_relaxed);
    h->node = node;
    h->thread = (uint16_t)t->index;
    ps_tree_release(t);
    live_changed((int64_t)size);
}

/* The block of header h (size bytes) is freed: charged to the node that allocated it. */
static void record_free(const hdr_t *h, uint64_t size)
{
    if (h->thread == NO_THREAD) {
        atomic_fetch_add_explicit(&ps_heap_stats.untracked_frees, 1, memory_order_relaxed);
        return;
    }
    if (!recording) return; /* after the final write: the block stays live (leaked) */
    ps_thread_t *owner = h->thread < atomic_load(&ps_nthreads) ? ps_threads[h->thread] : NULL;
    heap_thread_t *ht = owner ? heap_of(owner) : NULL;
    if (!ht || !ht->nodes || h->node >= owner->max_nodes) {
        atomic_fetch_add_explicit(&ps_heap_stats.untracked_frees, 1, memory_order_relaxed);
        return;
    }
    ps_heap_node_t *hn = &ht->nodes[h->node];
    node_sync(hn);
    shared_add(&hn->frees, 1);
    shared_add(&hn->freed_bytes, size);
    live_changed(-(int64_t)size);
}

void *pathscope_heap_alloc(int fn, size_t size, size_t align, int zero, const uintptr_t *caller)
{
    if (size > SIZE_MASK - MAX_ALIGN) {
        errno = ENOMEM;
        return NULL;
    }
    if (align > MAX_ALIGN) { /* no room for the offset in the header: not ours */
        atomic_fetch_add_explicit(&ps_heap_stats.untracked_allocs, 1, memory_order_relaxed);
        return real.memalign(align, size);
    }
    depth++;
    size_t off = align <= 16 ? 16 : align;
    char *base;
    if (off == 16) base = zero ? real.calloc(1, size + 16) : real.malloc(size + 16);
    else base = real.memalign(align, size + off);
    if (!base) {
        depth--;
        return NULL;
    }
    void *p = base + off;
    hdr_t *h = (hdr_t *)p - 1;
    h->size_off = (uint64_t)size | (uint64_t)(off / 16) << 48;
    h->magic = magic_of(p);
    record_alloc(h, size, fn, caller);
    depth--;
    return p;
}

void pathscope_heap_free(void *p)
{
    if (!p) return;
    hdr_t *h = ours(p);
    if (!h) {
        atomic_fetch_add_explicit(&ps_heap_stats.foreign_frees, 1, memory_order_relaxed);
        real.free(p);
        return;
    }
    depth++;
    uint64_t size = h->size_off & SIZE_MASK, off = (h->size_off >> 48) * 16;
    record_free(h, size);
    h->magic = 0;
    real.free((char *)p - off);
    depth--;
}

void *pathscope_heap_realloc(int fn, void *p, size_t size, const uintptr_t *caller)
{
    if (!p) return pathscope_heap_alloc(fn, size, 0, 0, caller);
    hdr_t *h = ours(p);
    if (!h) { /* foreign: it stays foreign */
        atomic_fetch_add_explicit(&ps_heap_stats.foreign_frees, 1, memory_order_relaxed);
        return real.realloc(p, size);
    }
    if (size == 0) { /* glibc: frees the block and returns NULL */
        pathscope_heap_free(p);
        return NULL;
    }
    if (size > SIZE_MASK - MAX_ALIGN) {
        errno = ENOMEM;
        return NULL;
    }
    uint64_t old_size = h->size_off & SIZE_MASK, off = (h->size_off >> 48) * 16;
    if (off != 16) { /* an aligned block: a new plain block, copied */
        void *q = pathscope_heap_alloc(fn, size, 0, 0, caller);
        if (!q) return NULL;
        memcpy(q, p, old_size < size ? old_size : size);
        pathscope_heap_free(p);
        return q;
    }
    depth++;
    hdr_t old = *h;
    char *base = real.realloc((char *)p - 16, size + 16);
    if (!base) {
        depth--;
        return NULL; /* the old block is untouched */
    }
    record_free(&old, old_size); /* first, so that the peak does not count both */
    void *q = base + 16;
    h = (hdr_t *)q - 1;
    h->size_off = (uint64_t)size | 1ull << 48;
    h->magic = magic_of(q);
    record_alloc(h, size, fn, caller);
    depth--;
    return q;
}

size_t pathscope_heap_usable_size(void *p)
{
    if (!p) return 0;
    hdr_t *h = ours(p);
    if (!h) return real.usable_size(p);
    size_t off = (size_t)(h->size_off >> 48) * 16;
    return real.usable_size((char *)p - off) - off;
}

/* ---- for the writer [signal-safe] ---------------------------------------------------------- */
void ps_heap_totals(uint64_t *peak, uint64_t *peak_at, uint64_t *gen, int64_t *live)
{
    *peak = atomic_load(&peak_bytes);
    *peak_at = atomic_load(&peak_ticks);
    *gen = atomic_load(&peak_gen);
    *live = atomic_load(&live_bytes);
}

/* A copy of the timeline, taken under its lock (recording may go on while the rank file is
 * written at MPI_Finalize; a point is appended in nanoseconds, so the wait is short). */
int ps_heap_timeline(const ps_heap_point_t **points)
{
    static ps_heap_point_t copy[TL_MAX];
    for (int spin = 0; atomic_flag_test_and_set_explicit(&tl_lock, memory_order_acquire); spin++)
        if (spin > 1000000) { /* (a thread stopped inside the lock: a fatal signal) */
            *points = timeline;
            return tl_n;
        }
    int n = tl_n;
    memcpy(copy, timeline, sizeof *copy * (size_t)n);
    atomic_flag_clear_explicit(&tl_lock, memory_order_release);
    *points = copy;
    return n;
}

/* A node's live bytes at the rank's peak (see the top of this file). */
uint64_t ps_heap_node_peak(ps_heap_node_t *h)
{
    if (atomic_load(&h->stamp) == atomic_load(&peak_gen)) return atomic_load(&h->peak_live);
    return atomic_load(&h->alloc_bytes) - atomic_load(&h->freed_bytes);
}
