/* Sampling's section of the live segment (core/source.h: publish; live/live.h): the 64
 * heaviest sampled leaves over every thread, by on- plus off-CPU time, each with its 8
 * innermost frames.  Read from the trees without their locks (live.h's contract): a node id
 * is used only below the nnodes read first, and a parent only when it is older (smaller)
 * than its child, so a path always ends. */
#include "source.h"
#include "live.h"

static int is_leaf(uint32_t kind) { return kind == PS_NODE_FN || kind == PS_NODE_PC; }

static void collect(ps_live_top_t *top)
{
    int n = atomic_load(&ps_nthreads);
    for (int i = 0; i < n && i < PS_MAX_THREADS; i++) {
        ps_thread_t *t = __atomic_load_n(&ps_threads[i], __ATOMIC_ACQUIRE);
        if (!t || !t->nodes) continue;
        uint32_t nn = __atomic_load_n(&t->nnodes, __ATOMIC_ACQUIRE);
        for (uint32_t id = 1; id < nn && id < t->max_nodes; id++) {
            const ps_node_t *node = &t->nodes[id];
            if (!is_leaf(ps_live_load32(&node->kind))) continue;
            uint64_t w = ps_live_load64(&node->sample_ticks) + ps_live_load64(&node->offcpu_ticks);
            if (w) ps_live_top_add(top, w, (uint64_t)i, id);
        }
    }
}

static void write_frames(ps_fmt_t *f, const ps_thread_t *t, uint32_t id)
{
    for (int depth = 0; depth < PS_LIVE_FRAMES && id; depth++) {
        const ps_node_t *node = &t->nodes[id];
        uint32_t kind = ps_live_load32(&node->kind);
        if (kind != PS_NODE_CALL && !is_leaf(kind)) break; /* an MPI node, the root */
        if (depth) ps_fmt_char(f, ';');
        ps_live_frame(f, (uintptr_t)ps_live_load64(&node->key));
        uint32_t parent = ps_live_load32(&node->parent);
        id = parent < id ? parent : 0;
    }
}

void ps_sample_publish(ps_fmt_t *f)
{
    ps_live_item_t items[PS_LIVE_HOT_MAX];
    ps_live_top_t top = {items, 0, PS_LIVE_HOT_MAX};
    collect(&top);
    ps_live_top_sort(&top);
    for (int k = 0; k < top.n; k++) {
        const ps_thread_t *t = ps_threads[items[k].a];
        const ps_node_t *node = &t->nodes[items[k].b];
        ps_fmt_str(f, "hot\t");
        ps_fmt_u64(f, ps_live_ns(ps_live_load64(&node->sample_ticks))); ps_fmt_tab(f);
        ps_fmt_u64(f, ps_live_ns(ps_live_load64(&node->offcpu_ticks))); ps_fmt_tab(f);
        ps_fmt_u64(f, ps_live_load64(&node->samples)); ps_fmt_tab(f);
        write_frames(f, t, (uint32_t)items[k].b);
        ps_fmt_char(f, '\n');
    }
}
