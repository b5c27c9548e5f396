/* Heap profiling's per-thread state (core/source.h: thread_size), mapped with the thread and
 * reached by its slot: by the thread itself when it allocates, by any thread that frees one
 * of its blocks, by the rank-file writer. */
#ifndef PS_HEAP_THREAD_H
#define PS_HEAP_THREAD_H
#include "source.h"
#include "heap.h"

typedef struct {
    ps_heap_node_t *nodes; /* heap metrics beside the tree's nodes (by node id), or NULL
                            * before the thread's first allocation (heap.c: heap_nodes) */
    ps_leaf_cache_t leaf;  /* the last allocator leaf, its parent and function */
} heap_thread_t;

static inline heap_thread_t *heap_of(const ps_thread_t *t) /* [signal-safe] */
{
    return ps_thread_state(t, PS_SRC_heap);
}
#endif
