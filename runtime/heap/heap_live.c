/* Heap profiling's section of the live segment (core/source.h: publish; live/live.h): one
 * line, the rank's live and peak bytes and its allocations and frees so far (summed over the
 * threads' heap nodes, read without locks). */
#include "source.h"
#include "heap.h"
#include "heap_thread.h"
#include "live.h"

void ps_heap_publish(ps_fmt_t *f)
{
    if (!ps_heap_on) return;
    uint64_t peak, peak_at, gen, allocs = 0, frees = 0;
    int64_t live;
    ps_heap_totals(&peak, &peak_at, &gen, &live);
    int n = atomic_load(&ps_nthreads);
    for (int i = 0; i < n && i < PS_MAX_THREADS; i++) {
        ps_thread_t *t = __atomic_load_n(&ps_threads[i], __ATOMIC_ACQUIRE);
        ps_heap_node_t *h = t ? __atomic_load_n(&heap_of(t)->nodes, __ATOMIC_ACQUIRE) : NULL;
        if (!h) continue;
        uint32_t nn = __atomic_load_n(&t->nnodes, __ATOMIC_ACQUIRE);
        for (uint32_t id = 1; id < nn && id < t->max_nodes; id++) {
            allocs += atomic_load_explicit(&h[id].allocs, memory_order_relaxed);
            frees += atomic_load_explicit(&h[id].frees, memory_order_relaxed);
        }
    }
    ps_fmt_line_u64(f, "heap", (const uint64_t[]){live > 0 ? (uint64_t)live : 0, peak, allocs,
                                                   frees}, 4);
}
