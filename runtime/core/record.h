/* The one recording call: every source that puts something on a call path (an MPI call, a
 * sample, an allocation, a system call) goes through it.
 *
 *     if (!ps_tree_claim(t, flags)) return;          busy first, then "frozen?"
 *     ps_cct_record(t, &from, leaf_kind, key, cache, &node)
 *         walk (from the caller, a frame or a signal context) -> trim -> failure count and
 *         parent -> insert the call sites -> leaf of (kind, key) or the function's leaf
 *         -> thunk commit
 *     ... the source adds its metrics to t->nodes[node] (or its side table) ...
 *     ps_tree_release(t);
 *
 * Everything is static inline: the MPI wrappers and the allocator record in nanoseconds, and
 * with the call inlined the compiler drops what a caller does not use (its `from` is a
 * constant).  The walk starts in the caller's frame: ps_unwind_caller skips pathscope's own
 * frames, so inlining changes nothing in the paths.  [signal-safe]: t->scratch only, no
 * allocation, no locks.
 */
#ifndef PS_RECORD_H
#define PS_RECORD_H
#include <stdatomic.h>
#include <stdint.h>
#include "cct.h"
#include "../unwind/unwind.h"
#include "../python/pyframes.h"

/* Where the walk starts. */
enum {
    PS_FROM_CALLER,  /* pathscope's caller (the MPI wrapper's caller, an allocation without
                      * the shim's frame) */
    PS_FROM_FRAME,   /* a frame given by return address, stack pointer and rbp (the shims' caller) */
    PS_FROM_CONTEXT, /* a signal's interrupted context (samples, the collector's signals) */
    PS_FROM_FRAMES,  /* no walk: t->scratch[0..n) already holds the path (unit tests) */
};
enum { PS_FROM_NO_COMMIT = 1 }; /* flags: no thunk commit (untimed MPI samples, as ever) */
/* A trim's answers besides a frame count, and ps_cct_record's: */
enum {
    PS_TRIM_DROP = -1,    /* pathscope's own call: nothing recorded, no counter touched */
    PS_TRIM_NO_PATH = -2, /* the caller records without a path (its own node) */
};

typedef struct ps_from {
    int how;                /* PS_FROM_* */
    unsigned flags;         /* PS_FROM_NO_COMMIT */
    uintptr_t ra, sp, rbp;  /* PS_FROM_FRAME (core/caller.h) */
    void *context;          /* PS_FROM_CONTEXT: the handler's ucontext */
    int n, complete;        /* PS_FROM_FRAMES */
    /* Optional, [signal-safe]: edits frames (innermost first) in place and returns their new
     * count, or PS_TRIM_DROP / PS_TRIM_NO_PATH. */
    int (*trim)(uintptr_t *frames, int n, void *arg);
    void *trim_arg;
} ps_from_t;

#define PS_LEAF_FUNCTION (-1) /* leaf_kind: frames[0]'s function (PS_NODE_FN), or its pc
                               * (PS_NODE_PC) when the function is unknown: a sample's leaf */
#define PS_CLAIM_OPEN 1       /* ps_tree_claim: also refuse a closed thread (end_ticks set) */

/* Claims the thread's tree for an update from this context: refused (0) when the thread is
 * already inside an update (a handler interrupted it), when the trees are frozen (the end of
 * the run is reading them) or, with PS_CLAIM_OPEN, when the thread's timeline is closed.
 * busy is set before the frozen check, with a full barrier between (cct.h: ps_tree_fence).
 * [signal-safe] */
static inline int ps_tree_claim(ps_thread_t *t, unsigned flags)
{
    if (t->busy) return 0;
    t->busy = 1;
    ps_tree_fence(); /* pairs with ps_threads_freeze */
    if (ps_cct_frozen || ((flags & PS_CLAIM_OPEN) && t->end_ticks)) {
        t->busy = 0;
        return 0;
    }
    return 1;
}

static inline void ps_tree_release(ps_thread_t *t) /* [signal-safe] */
{
    atomic_signal_fence(memory_order_seq_cst);
    t->busy = 0;
}

/* The function leaf of a sample below the walked path (record.c). [signal-safe] */
uint32_t ps_cct_function_leaf(ps_thread_t *t, int n, int complete);

/* Tree claimed.  Records the path of `from` with a leaf of kind leaf_kind and key (through
 * cache when given: the node found last time for the same parent and key), or the function
 * leaf (PS_LEAF_FUNCTION, key unused).  Returns 0 and *node: the leaf, or the deepest node
 * reached when the tree is full; or a trim's PS_TRIM_* answer, before any counter.
 *  - an incomplete walk counts in unwind_failures and hangs below [failed unwind];
 *  - no frame: the leaf goes below the root or [failed unwind] (a function leaf: on
 *    [failed unwind] itself);
 *  - the thunks of the walk are committed after the insertion (unless PS_FROM_NO_COMMIT; a
 *    function leaf only when there was a frame). */
static inline int ps_cct_record(ps_thread_t *t, const ps_from_t *from, int leaf_kind, uintptr_t key,
                                ps_leaf_cache_t *cache, uint32_t *node)
{
    int complete = 0, n;
    switch (from->how) {
    case PS_FROM_CALLER: n = ps_unwind_caller(t->scratch, PS_MAX_DEPTH, &complete); break;
    case PS_FROM_FRAME:
        n = ps_unwind_from(from->ra, from->sp, from->rbp, t->scratch, PS_MAX_DEPTH, &complete);
        break;
    case PS_FROM_CONTEXT: n = ps_unwind_signal(from->context, t->scratch, PS_MAX_DEPTH, &complete); break;
    default:
        n = from->n;
        complete = from->complete;
        break;
    }
    if (from->trim) {
        n = from->trim(t->scratch, n, from->trim_arg);
        if (n < 0) return n;
    }
    if (ps_py_on) n = ps_py_splice(t, t->scratch, n);
    if (leaf_kind == PS_LEAF_FUNCTION) {
        *node = ps_cct_function_leaf(t, n, complete);
        if (n > 0 && !(from->flags & PS_FROM_NO_COMMIT)) ps_unwind_commit(t);
        return 0;
    }
    if (!complete) t->unwind_failures++;
    uint32_t parent = complete ? 0 : t->failed_node;
    uint32_t at = n > 0 ? ps_cct_insert_path(t, parent, t->scratch, n, PS_NODE_CALL) : parent;
    uint32_t leaf;
    if (cache && cache->leaf && cache->parent == at && cache->key == key) {
        leaf = cache->leaf; /* the same path as last time */
    } else {
        leaf = ps_cct_child(t, at, leaf_kind, key);
        if (cache) {
            cache->parent = at;
            cache->key = key;
            cache->leaf = leaf;
        }
    }
    *node = leaf ? leaf : at; /* (tree full: on the deepest node we have) */
    if (!(from->flags & PS_FROM_NO_COMMIT)) ps_unwind_commit(t);
    return 0;
}
#endif
