/* Heap profiling's part of the rank file (docs/format.md, "Heap"): the rank's `heap` totals
 * and `hpoint` timeline, each thread's `hnode` lines, and the names of heap nodes.  Reached
 * from the rank-file writer through the descriptor (source_heap.c), which may run in a
 * fatal-signal handler: [signal-safe], no malloc. */
#include "source.h"
#include "heap.h"
#include "heap_thread.h"
#include "../unwind/unwind.h"


/* The rank's heap totals and timeline (per-path lines: write_hnodes). */
static void write_heap(ps_fmt_t *f, int nthreads)
{
    uint64_t allocs = 0, bytes = 0, frees = 0, freed = 0;
    for (int i = 0; i < nthreads; i++) {
        ps_thread_t *t = ps_threads[i];
        ps_heap_node_t *hn = t ? heap_of(t)->nodes : NULL;
        for (uint32_t id = 0; hn && id < t->nnodes; id++) {
            allocs += atomic_load(&hn[id].allocs);
            bytes += atomic_load(&hn[id].alloc_bytes);
            frees += atomic_load(&hn[id].frees);
            freed += atomic_load(&hn[id].freed_bytes);
        }
    }
    uint64_t peak, peak_at, gen;
    int64_t live;
    ps_heap_totals(&peak, &peak_at, &gen, &live);
    ps_fmt_str(f, "heap\t");
    ps_fmt_str(f, ps_traversal_names[ps_traversal_mode]); ps_fmt_tab(f);
    ps_fmt_u64(f, allocs); ps_fmt_tab(f);
    ps_fmt_u64(f, bytes); ps_fmt_tab(f);
    ps_fmt_u64(f, frees); ps_fmt_tab(f);
    ps_fmt_u64(f, freed); ps_fmt_tab(f);
    ps_fmt_u64(f, peak); ps_fmt_tab(f);
    ps_fmt_u64(f, ps_ticks_to_ns(peak_at)); ps_fmt_tab(f);
    ps_fmt_u64(f, live > 0 ? (uint64_t)live : 0); ps_fmt_tab(f);
    ps_fmt_u64(f, atomic_load(&ps_heap_stats.untracked_allocs)); ps_fmt_tab(f);
    ps_fmt_u64(f, atomic_load(&ps_heap_stats.untracked_frees)); ps_fmt_tab(f);
    ps_fmt_u64(f, atomic_load(&ps_heap_stats.foreign_frees)); ps_fmt_char(f, '\n');
    const ps_heap_point_t *pt;
    int n = ps_heap_timeline(&pt);
    for (int i = 0; i < n; i++) {
        ps_fmt_str(f, "hpoint\t");
        ps_fmt_u64(f, ps_ticks_to_ns(pt[i].ticks)); ps_fmt_tab(f);
        ps_fmt_u64(f, pt[i].live); ps_fmt_tab(f);
        ps_fmt_u64(f, pt[i].max); ps_fmt_char(f, '\n');
    }
}

/* A thread's allocations and frees per node, after its node lines. */
static void write_hnodes(ps_fmt_t *f, ps_thread_t *t)
{
    ps_heap_node_t *hn = heap_of(t)->nodes;
    for (uint32_t id = 0; hn && id < t->nnodes; id++) {
        ps_heap_node_t *h = &hn[id];
        uint64_t allocs = atomic_load(&h->allocs), frees = atomic_load(&h->frees);
        if (!allocs && !frees) continue;
        ps_fmt_str(f, "hnode\t");
        ps_fmt_u64(f, (uint64_t)t->index); ps_fmt_tab(f);
        ps_fmt_u64(f, id); ps_fmt_tab(f);
        ps_fmt_u64(f, allocs); ps_fmt_tab(f);
        ps_fmt_u64(f, atomic_load(&h->alloc_bytes)); ps_fmt_tab(f);
        ps_fmt_u64(f, frees); ps_fmt_tab(f);
        ps_fmt_u64(f, atomic_load(&h->freed_bytes)); ps_fmt_tab(f);
        ps_fmt_u64(f, ps_heap_node_peak(h)); ps_fmt_char(f, '\n');
    }
}

void ps_heap_write(ps_fmt_t *f, ps_section sec, ps_thread_t *t)
{
    if (sec == PS_SEC_RANK && ps_heap_on) write_heap(f, ps_write_nthreads());
    else if (sec == PS_SEC_THREAD) write_hnodes(f, t);
}

const char *ps_heap_key_name(uintptr_t key, char buf[24])
{
    (void)buf;
    return key < PS_HEAP_NFUNCTIONS ? ps_heap_function_names[key] : "alloc?";
}
