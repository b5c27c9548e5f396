/* Calling context trees: see cct.h for the contract (the threads: threads.c).
 *
 * A tree is an array of nodes plus an open-addressing hash of (parent, kind, key) -> node,
 * both mapped once per thread (MAP_NORESERVE: only touched pages cost memory).  The path of
 * the previous insertion is kept, so the common case -- the same call chain as last time, or
 * one sharing a long prefix with it -- compares addresses instead of hashing every frame. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cct.h"
#include "../python/pyframes.h"

volatile int ps_cct_frozen;

void ps_threads_freeze(void)
{
    ps_cct_frozen = 1;
    atomic_thread_fence(memory_order_seq_cst); /* pairs with ps_tree_fence (sample.c, paths.c) */
    if (ps_membarrier_ok && syscall(SYS_membarrier, 1 << 3 /* PRIVATE_EXPEDITED */, 0, 0) != 0)
        ps_membarrier_ok = 0; /* (threads that fenced weakly meanwhile: see the wait below) */
    int n = atomic_load(&ps_nthreads);
    for (int i = 0; i < n; i++) {
        ps_thread_t *t = ps_threads[i];
        if (!t || t == ps_self) continue;
        /* an update in flight on another thread takes nanoseconds; never wait long */
        for (int spin = 0; spin < 1000000 && t->busy; spin++) __asm__ __volatile__("pause");
    }
}

uint32_t ps_cct_child(ps_thread_t *t, uint32_t parent, int kind, uintptr_t key)
{
    uint32_t i = ps_cct_hash(parent, kind, key) & t->hash_mask;
    for (;;) {
        uint32_t id = t->hash[i];
        if (!id) break;
        ps_node_t *n = &t->nodes[id];
        if (n->key == key && n->parent == parent && n->kind == (uint32_t)kind) return id;
        i = (i + 1) & t->hash_mask;
    }
    if (t->nnodes >= t->max_nodes) {
        t->tree_full++;
        return 0; /* caller keeps the deepest node it has */
    }
    uint32_t id = t->nnodes;
    ps_node_t *n = &t->nodes[id];
    n->key = key;
    n->parent = parent;
    n->kind = (uint32_t)kind;
    atomic_signal_fence(memory_order_seq_cst); /* a writer in a signal handler sees whole nodes */
    t->nnodes = id + 1;
    t->hash[i] = id;
    return id;
}

uint32_t ps_cct_insert_path(ps_thread_t *t, uint32_t parent, const uintptr_t *frames, int n,
                            int leaf_kind)
{
    /* call-site chain: frames[n-1] (outermost) .. frames[calls_end] */
    int chain = leaf_kind == PS_NODE_CALL ? n : n - 1;
    uint32_t node = parent;
    int j = 0;
    if (parent == 0) {
        /* reuse the prefix shared with the previous path from the root; when that path came
         * from the previous walk, the walker may already know how many outermost frames the
         * two share (exact reuse, thunks) */
        int limit = chain < t->last_n ? chain : t->last_n;
        if (t->last_keys_seq + 1 == t->walk_seq && t->walk_same_outer > 0)
            j = t->walk_same_outer < limit ? t->walk_same_outer : limit;
        while (j < limit && t->last_keys[j] == frames[n - 1 - j]) j++;
        if (j) node = t->last_nodes[j - 1];
        t->last_keys_seq = t->walk_seq;
    }
    for (; j < chain; j++) {
        /* a call site, or a Python frame the walk's splice put there (python/pyframes.h) */
        uintptr_t f = frames[n - 1 - j];
        uint32_t child = f & PS_PY_TAG ? ps_cct_child(t, node, PS_NODE_PY, f & ~PS_PY_TAG)
                                       : ps_cct_child(t, node, PS_NODE_CALL, f);
        if (!child) {
            if (parent == 0) t->last_n = j; /* positions j.. still hold the previous path */
            return node;
        }
        node = child;
        if (parent == 0) {
            t->last_keys[j] = frames[n - 1 - j];
            t->last_nodes[j] = node;
        }
    }
    if (parent == 0) t->last_n = chain;
    if (chain < n) {
        uint32_t leaf = ps_cct_child(t, node, leaf_kind, frames[0]);
        if (leaf) node = leaf;
    }
    return node;
}
