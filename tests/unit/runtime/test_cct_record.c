/* Unit tests of the one recording call (core/record.h): ps_tree_claim/ps_tree_release and
 * ps_cct_record on a thread record made here, with the path given (PS_FROM_FRAMES: the frames
 * already in t->scratch, as a walk would leave them) instead of walked: the leaf of a kind
 * with a key below the call sites, the incomplete walk below [failed unwind] (counted), the
 * leaf cache, the tree-full fallback, the trims' answers, and a sample's function leaf.
 * Node ids are given out in insertion order from 1 (0 is the root).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cct.h"
#include "record.h"
#include "unwind_thread.h"
#include "check.h"

/* A thread record with a slot of its own (from the last one down, clear of any thread the
 * runtime registered) holding the unwinder's state, as registration would give it. */
static ps_thread_t *new_thread(uint32_t max_nodes)
{
    static int slots_used;
    ps_thread_t *t = ps_map_zeroed(sizeof *t);
    t->index = PS_MAX_THREADS - 1 - slots_used++;
    unwind_thread_t *u = ps_map_zeroed(sizeof *u);
    if (!u) abort();
    u->thread = t;
    ps_thread_states[PS_SRC_unwind][t->index] = u;
    t->nodes = calloc(max_nodes, sizeof *t->nodes);
    t->max_nodes = max_nodes;
    uint32_t slots = 1;
    while (slots < max_nodes * 2) slots *= 2;
    t->hash = calloc(slots, sizeof *t->hash);
    t->hash_mask = slots - 1;
    t->nnodes = 1; /* the root */
    if (!t->nodes || !t->hash) abort();
    t->failed_node = ps_cct_child(t, 0, PS_NODE_FAILED, 0); /* 1, as at registration */
    return t;
}

/* The path frames[0..n) (innermost first) as the walk's output. */
static ps_from_t given(ps_thread_t *t, const uintptr_t *frames, int n, int complete)
{
    memcpy(t->scratch, frames, sizeof *frames * (size_t)n);
    return (ps_from_t){.how = PS_FROM_FRAMES, .n = n, .complete = complete};
}

#define CHECK_NODE(t, id, kind_, key_, parent_)                                           \
    do {                                                                                  \
        CHECK_INT((t)->nodes[id].kind, (kind_));                                          \
        CHECK_INT((t)->nodes[id].key, (key_));                                            \
        CHECK_INT((t)->nodes[id].parent, (parent_));                                      \
    } while (0)

static void test_claim(void)
{
    ps_thread_t *t = new_thread(8);
    CHECK_INT(ps_tree_claim(t, 0), 1);
    CHECK_INT(t->busy, 1);
    CHECK_INT(ps_tree_claim(t, 0), 0); /* already inside an update: refused, still busy */
    CHECK_INT(t->busy, 1);
    ps_tree_release(t);
    CHECK_INT(t->busy, 0);
    t->end_ticks = 5; /* a closed thread: only PS_CLAIM_OPEN refuses it */
    CHECK_INT(ps_tree_claim(t, PS_CLAIM_OPEN), 0);
    CHECK_INT(t->busy, 0);
    CHECK_INT(ps_tree_claim(t, 0), 1);
    ps_tree_release(t);
    t->end_ticks = 0;
    ps_cct_frozen = 1; /* the writer reads the trees */
    CHECK_INT(ps_tree_claim(t, 0), 0);
    CHECK_INT(t->busy, 0);
    ps_cct_frozen = 0;
}

static void test_leaf(void)
{
    ps_thread_t *t = new_thread(64);
    uint32_t node = 0;
    /* an MPI call (op 7) from call site 0x30, in a function called from 0x20, from 0x10:
     * 0x10 (2), 0x20 (3), 0x30 (4), leaf MPI 7 (5) */
    uintptr_t p1[] = {0x30, 0x20, 0x10};
    ps_from_t f = given(t, p1, 3, 1);
    CHECK_INT(ps_cct_record(t, &f, PS_NODE_MPI, 7, NULL, &node), 0);
    CHECK_INT(node, 5);
    CHECK_NODE(t, 2, PS_NODE_CALL, 0x10, 0);
    CHECK_NODE(t, 4, PS_NODE_CALL, 0x30, 3);
    CHECK_NODE(t, 5, PS_NODE_MPI, 7, 4);
    CHECK_INT(t->unwind_failures, 0);
    /* the same again: found, nothing added */
    f = given(t, p1, 3, 1);
    CHECK_INT(ps_cct_record(t, &f, PS_NODE_MPI, 7, NULL, &node), 0);
    CHECK_INT(node, 5);
    CHECK_INT(t->nnodes, 6);
    /* an incomplete walk: below [failed unwind] (1), counted: 0x20 (6), 0x30 (7), SYSCALL 3 (8) */
    uintptr_t p2[] = {0x30, 0x20};
    f = given(t, p2, 2, 0);
    CHECK_INT(ps_cct_record(t, &f, PS_NODE_SYSCALL, 3, NULL, &node), 0);
    CHECK_INT(node, 8);
    CHECK_NODE(t, 6, PS_NODE_CALL, 0x20, 1);
    CHECK_NODE(t, 8, PS_NODE_SYSCALL, 3, 7);
    CHECK_INT(t->unwind_failures, 1);
    /* no frame, incomplete: the leaf right below [failed unwind] (9), counted */
    f = given(t, p2, 0, 0);
    CHECK_INT(ps_cct_record(t, &f, PS_NODE_HEAP, 2, NULL, &node), 0);
    CHECK_INT(node, 9);
    CHECK_NODE(t, 9, PS_NODE_HEAP, 2, 1);
    CHECK_INT(t->unwind_failures, 2);
    /* no frame, complete (a counted path): below the root (10) */
    f = given(t, p2, 0, 1);
    CHECK_INT(ps_cct_record(t, &f, PS_NODE_HEAP, 2, NULL, &node), 0);
    CHECK_NODE(t, 10, PS_NODE_HEAP, 2, 0);
    CHECK_INT(t->unwind_failures, 2);
}

static void test_cache(void)
{
    ps_thread_t *t = new_thread(64);
    ps_leaf_cache_t cache = {0};
    uint32_t node = 0;
    uintptr_t p1[] = {0x30, 0x20};
    ps_from_t f = given(t, p1, 2, 1);
    /* 0x20 (2), 0x30 (3), HEAP 0 (4): a first call fills the cache, even for key 0 */
    CHECK_INT(ps_cct_record(t, &f, PS_NODE_HEAP, 0, &cache, &node), 0);
    CHECK_INT(node, 4);
    CHECK_INT(cache.parent, 3);
    CHECK_INT(cache.leaf, 4);
    CHECK_INT(cache.key, 0);
    /* the same parent and key: the cached leaf is taken without a look-up (a planted id
     * shows it) */
    cache.leaf = 2;
    f = given(t, p1, 2, 1);
    CHECK_INT(ps_cct_record(t, &f, PS_NODE_HEAP, 0, &cache, &node), 0);
    CHECK_INT(node, 2);
    cache.leaf = 4;
    /* another key below the same parent: looked up (5), cached */
    f = given(t, p1, 2, 1);
    CHECK_INT(ps_cct_record(t, &f, PS_NODE_HEAP, 1, &cache, &node), 0);
    CHECK_INT(node, 5);
    CHECK_NODE(t, 5, PS_NODE_HEAP, 1, 3);
    CHECK_INT(cache.key, 1);
    CHECK_INT(cache.leaf, 5);
    /* another parent, same key: looked up (0x31: 6, leaf 7) */
    uintptr_t p2[] = {0x31, 0x20};
    f = given(t, p2, 2, 1);
    CHECK_INT(ps_cct_record(t, &f, PS_NODE_HEAP, 1, &cache, &node), 0);
    CHECK_INT(node, 7);
    CHECK_INT(cache.parent, 6);
    CHECK_INT(cache.leaf, 7);
}

static void test_tree_full(void)
{
    ps_thread_t *t = new_thread(5); /* the root, [failed unwind] and 3 more */
    ps_leaf_cache_t cache = {0};
    uint32_t node = 0;
    uintptr_t p1[] = {0x30, 0x20};
    ps_from_t f = given(t, p1, 2, 1);
    CHECK_INT(ps_cct_record(t, &f, PS_NODE_HEAP, 3, &cache, &node), 0); /* 2, 3, leaf 4 */
    CHECK_INT(node, 4);
    /* another key: the leaf does not fit, the deepest node (3) takes it; the cache holds no
     * leaf, so the next record looks again (and counts again) */
    f = given(t, p1, 2, 1);
    CHECK_INT(ps_cct_record(t, &f, PS_NODE_HEAP, 4, &cache, &node), 0);
    CHECK_INT(node, 3);
    CHECK_INT(t->tree_full, 1);
    CHECK_INT(cache.leaf, 0);
    f = given(t, p1, 2, 1);
    CHECK_INT(ps_cct_record(t, &f, PS_NODE_HEAP, 4, &cache, &node), 0);
    CHECK_INT(node, 3);
    CHECK_INT(t->tree_full, 2);
    /* a call site that does not fit: the leaf stays on the root (nothing below it fits) */
    uintptr_t p2[] = {0x40};
    f = given(t, p2, 1, 1);
    CHECK_INT(ps_cct_record(t, &f, PS_NODE_MPI, 1, NULL, &node), 0);
    CHECK_INT(node, 0);
    CHECK_INT(t->tree_full, 4);
}

/* trims: drop frames up to arg's value; a negative arg is the answer itself */
static int trim_to(uintptr_t *frames, int n, void *arg)
{
    intptr_t drop = (intptr_t)arg;
    if (drop < 0) return (int)drop;
    memmove(frames, frames + drop, sizeof *frames * (size_t)(n - drop));
    return n - (int)drop;
}

static void test_trim(void)
{
    ps_thread_t *t = new_thread(64);
    uint32_t node = 99;
    uintptr_t p1[] = {0x50, 0x40, 0x30};
    /* frames 0x50 and 0x40 cut: 0x30 (2), SYSCALL 1 (3) */
    ps_from_t f = given(t, p1, 3, 1);
    f.trim = trim_to;
    f.trim_arg = (void *)(intptr_t)2;
    CHECK_INT(ps_cct_record(t, &f, PS_NODE_SYSCALL, 1, NULL, &node), 0);
    CHECK_INT(node, 3);
    CHECK_NODE(t, 2, PS_NODE_CALL, 0x30, 0);
    CHECK_NODE(t, 3, PS_NODE_SYSCALL, 1, 2);
    /* every frame cut: the leaf below the root (4) */
    f = given(t, p1, 3, 1);
    f.trim = trim_to;
    f.trim_arg = (void *)(intptr_t)3;
    CHECK_INT(ps_cct_record(t, &f, PS_NODE_SYSCALL, 1, NULL, &node), 0);
    CHECK_NODE(t, node, PS_NODE_SYSCALL, 1, 0);
    /* DROP and NO_PATH are returned before anything: no node, no failure counted even for an
     * incomplete walk, *node untouched */
    uint32_t before = t->nnodes;
    node = 99;
    f = given(t, p1, 3, 0);
    f.trim = trim_to;
    f.trim_arg = (void *)(intptr_t)PS_TRIM_DROP;
    CHECK_INT(ps_cct_record(t, &f, PS_NODE_SYSCALL, 1, NULL, &node), PS_TRIM_DROP);
    f.trim_arg = (void *)(intptr_t)PS_TRIM_NO_PATH;
    CHECK_INT(ps_cct_record(t, &f, PS_NODE_MPI, 1, NULL, &node), PS_TRIM_NO_PATH);
    CHECK_INT(node, 99);
    CHECK_INT(t->nnodes, before);
    CHECK_INT(t->unwind_failures, 0);
}

static void test_function_leaf(void)
{
    ps_thread_t *t = new_thread(64);
    uint32_t node = 0;
    /* a known function [0x300, 0x340) in the thread's range cache (after a first look-up
     * that brings the cache's generation up to date) */
    ps_unwind_function_start(t, 0x1);
    unwind_of(t)->ranges[0].start = 0x300;
    unwind_of(t)->ranges[0].end = 0x340;
    unwind_of(t)->nranges = 1;
    /* a sample at pc 0x310 in it, called from 0x20: 0x20 (2), FN 0x300 (3) */
    uintptr_t p1[] = {0x310, 0x20};
    ps_from_t f = given(t, p1, 2, 1);
    CHECK_INT(ps_cct_record(t, &f, PS_LEAF_FUNCTION, 0, NULL, &node), 0);
    CHECK_INT(node, 3);
    CHECK_NODE(t, 2, PS_NODE_CALL, 0x20, 0);
    CHECK_NODE(t, 3, PS_NODE_FN, 0x300, 2);
    /* a pc in no known function, the walk incomplete: a PC leaf below [failed unwind]
     * (0x20: 4, PC 0x999: 5), counted */
    uintptr_t p2[] = {0x999, 0x20};
    f = given(t, p2, 2, 0);
    CHECK_INT(ps_cct_record(t, &f, PS_LEAF_FUNCTION, 0, NULL, &node), 0);
    CHECK_INT(node, 5);
    CHECK_NODE(t, 4, PS_NODE_CALL, 0x20, 1);
    CHECK_NODE(t, 5, PS_NODE_PC, 0x999, 4);
    CHECK_INT(t->unwind_failures, 1);
    /* no frame: [failed unwind] itself, counted when incomplete */
    f = given(t, p2, 0, 0);
    CHECK_INT(ps_cct_record(t, &f, PS_LEAF_FUNCTION, 0, NULL, &node), 0);
    CHECK_INT(node, t->failed_node);
    CHECK_INT(t->unwind_failures, 2);
}

int main(void)
{
    test_claim();
    test_leaf();
    test_cache();
    test_tree_full();
    test_trim();
    test_function_leaf();
    return failures != 0;
}
