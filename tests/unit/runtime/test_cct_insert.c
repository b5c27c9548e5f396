/* Unit tests of the calling context tree's insertion (core: ps_cct_child, ps_cct_insert_path)
 * on a thread record made here, with a tree small enough to fill: exact node ids, parents and
 * counts for known paths, the prefix reuse of the previous path, the walker's shared-prefix
 * hint, and the tree-full fallback (the deepest node reached, counted).  (MPI's
 * per-communicator table beside the tree: test_paths_pcomm.c.)
 * Node ids are given out in insertion order from 1 (0 is the root).
 */
#include <stdint.h>
#include <stdlib.h>

#include "cct.h"
#include "check.h"

static ps_thread_t *new_thread(uint32_t max_nodes)
{
    ps_thread_t *t = ps_map_zeroed(sizeof *t);
    t->nodes = calloc(max_nodes, sizeof *t->nodes);
    t->max_nodes = max_nodes;
    uint32_t slots = 1; /* a power of two, at least twice the nodes (as the runtime's) */
    while (slots < max_nodes * 2) slots *= 2;
    t->hash = calloc(slots, sizeof *t->hash);
    t->hash_mask = slots - 1;
    t->nnodes = 1; /* the root */
    if (!t->nodes || !t->hash) abort();
    return t;
}

#define CHECK_NODE(t, id, kind_, key_, parent_)                                           \
    do {                                                                                  \
        CHECK_INT((t)->nodes[id].kind, (kind_));                                          \
        CHECK_INT((t)->nodes[id].key, (key_));                                            \
        CHECK_INT((t)->nodes[id].parent, (parent_));                                      \
    } while (0)

static void test_child(void)
{
    ps_thread_t *t = new_thread(64);
    CHECK_INT(ps_cct_child(t, 0, PS_NODE_CALL, 0xa0), 1);
    CHECK_INT(ps_cct_child(t, 0, PS_NODE_CALL, 0xa0), 1); /* found, not added */
    CHECK_INT(ps_cct_child(t, 0, PS_NODE_FN, 0xa0), 2);   /* same key, another kind */
    CHECK_INT(ps_cct_child(t, 1, PS_NODE_CALL, 0xa0), 3); /* same key, another parent */
    CHECK_INT(ps_cct_child(t, 0, PS_NODE_MPI, 0), 4);
    CHECK_INT(t->nnodes, 5);
    CHECK_NODE(t, 3, PS_NODE_CALL, 0xa0, 1);
    CHECK_NODE(t, 4, PS_NODE_MPI, 0, 0);
    /* 63 distinct children of the root fill 64 nodes: all found again afterwards */
    for (uintptr_t k = 0; k < 59; k++) CHECK_INT(ps_cct_child(t, 0, PS_NODE_PC, 0x1000 + k), 5 + k);
    CHECK_INT(t->nnodes, 64);
    for (uintptr_t k = 0; k < 59; k++) CHECK_INT(ps_cct_child(t, 0, PS_NODE_PC, 0x1000 + k), 5 + k);
    CHECK_INT(t->tree_full, 0);
    /* one more: the tree is full, 0 and counted */
    CHECK_INT(ps_cct_child(t, 0, PS_NODE_PC, 0x2000), 0);
    CHECK_INT(t->tree_full, 1);
    CHECK_INT(t->nnodes, 64);
}

static void test_insert_path(void)
{
    ps_thread_t *t = new_thread(64);
    /* frames innermost first: a sample in function 0x30 called from 0x20, called from 0x10:
     * call sites 0x10 (1, below the root), 0x20 (2); leaf FN 0x30 (3) */
    uintptr_t p1[] = {0x30, 0x20, 0x10};
    CHECK_INT(ps_cct_insert_path(t, 0, p1, 3, PS_NODE_FN), 3);
    CHECK_INT(t->nnodes, 4);
    CHECK_NODE(t, 1, PS_NODE_CALL, 0x10, 0);
    CHECK_NODE(t, 2, PS_NODE_CALL, 0x20, 1);
    CHECK_NODE(t, 3, PS_NODE_FN, 0x30, 2);
    CHECK_INT(t->last_n, 2); /* the call-site chain kept for the next path */
    CHECK_INT(t->last_nodes[0], 1);
    CHECK_INT(t->last_nodes[1], 2);
    /* the same path again: no node added */
    CHECK_INT(ps_cct_insert_path(t, 0, p1, 3, PS_NODE_FN), 3);
    CHECK_INT(t->nnodes, 4);
    /* another leaf under the same call sites: one node (4) */
    uintptr_t p2[] = {0x31, 0x20, 0x10};
    CHECK_INT(ps_cct_insert_path(t, 0, p2, 3, PS_NODE_FN), 4);
    CHECK_NODE(t, 4, PS_NODE_FN, 0x31, 2);
    /* an MPI call from call site 0x21 in 0x10's callee: leaf MPI key 7 -> 0x21 (5), MPI (6) */
    uintptr_t p3[] = {7, 0x21, 0x10};
    CHECK_INT(ps_cct_insert_path(t, 0, p3, 3, PS_NODE_MPI), 6);
    CHECK_NODE(t, 5, PS_NODE_CALL, 0x21, 1);
    CHECK_NODE(t, 6, PS_NODE_MPI, 7, 5);
    /* leaf kind CALL: every frame is a call site (0x40 below 0x21: 7) */
    uintptr_t p4[] = {0x40, 0x21, 0x10};
    CHECK_INT(ps_cct_insert_path(t, 0, p4, 3, PS_NODE_CALL), 7);
    CHECK_NODE(t, 7, PS_NODE_CALL, 0x40, 5);
    CHECK_INT(t->last_n, 3);
    /* a single frame: the leaf alone, below the root (8) */
    uintptr_t p5[] = {0x50};
    CHECK_INT(ps_cct_insert_path(t, 0, p5, 1, PS_NODE_PC), 8);
    CHECK_NODE(t, 8, PS_NODE_PC, 0x50, 0);
    CHECK_INT(t->last_n, 0);
    /* below another node (the [failed unwind] node of an incomplete walk): no prefix reuse,
     * the previous path from the root is kept.  [failed unwind] = 9; 0x10 below it = 10,
     * 0x20 = 11, leaf 0x30 = 12 */
    uint32_t failed = ps_cct_child(t, 0, PS_NODE_FAILED, 0);
    CHECK_INT(failed, 9);
    t->last_n = 2;
    t->last_keys[0] = 0x10;
    t->last_keys[1] = 0x20;
    t->last_nodes[0] = 1;
    t->last_nodes[1] = 2;
    CHECK_INT(ps_cct_insert_path(t, failed, p1, 3, PS_NODE_FN), 12);
    CHECK_NODE(t, 10, PS_NODE_CALL, 0x10, 9);
    CHECK_NODE(t, 11, PS_NODE_CALL, 0x20, 10);
    CHECK_NODE(t, 12, PS_NODE_FN, 0x30, 11);
    CHECK_INT(t->last_n, 2);
    CHECK_INT(t->last_nodes[1], 2);
    CHECK_INT(t->nnodes, 13);
}

static void test_walker_hint(void)
{
    ps_thread_t *t = new_thread(64);
    uintptr_t p1[] = {0x30, 0x20, 0x10};
    CHECK_INT(ps_cct_insert_path(t, 0, p1, 3, PS_NODE_FN), 3);
    /* The walker says the new walk shares its 2 outermost frames with the previous one
     * (walk_seq follows the seq of the last path): the nodes are taken from last_nodes
     * without comparing keys.  Given other keys on purpose, the tree shows that they were
     * trusted: the leaf 0x33 lands below node 2 (call site 0x20), not below new nodes. */
    t->last_keys_seq = 5;
    t->walk_seq = 6;
    t->walk_same_outer = 2;
    uintptr_t p2[] = {0x33, 0x99, 0x98};
    CHECK_INT(ps_cct_insert_path(t, 0, p2, 3, PS_NODE_FN), 4);
    CHECK_NODE(t, 4, PS_NODE_FN, 0x33, 2);
    CHECK_INT(t->last_keys_seq, 6);
    /* not the next walk (seq 8 after 6): the hint is ignored, keys are compared -> 0x98 (5),
     * 0x99 (6), leaf (7) */
    t->walk_seq = 8;
    CHECK_INT(ps_cct_insert_path(t, 0, p2, 3, PS_NODE_FN), 7);
    CHECK_NODE(t, 5, PS_NODE_CALL, 0x98, 0);
    CHECK_NODE(t, 6, PS_NODE_CALL, 0x99, 5);
    CHECK_NODE(t, 7, PS_NODE_FN, 0x33, 6);
    /* a hint longer than the chain is cut to it: 1 call site shared (0x98 = 5) */
    t->last_keys_seq = 9;
    t->walk_seq = 10;
    t->walk_same_outer = 50;
    uintptr_t p3[] = {0x34, 0x98};
    CHECK_INT(ps_cct_insert_path(t, 0, p3, 2, PS_NODE_FN), 8);
    CHECK_NODE(t, 8, PS_NODE_FN, 0x34, 5);
}

static void test_tree_full(void)
{
    /* 6 nodes: the root and 5 more */
    ps_thread_t *t = new_thread(6);
    uintptr_t p1[] = {0x30, 0x20, 0x10};
    CHECK_INT(ps_cct_insert_path(t, 0, p1, 3, PS_NODE_FN), 3); /* nodes 1-3 */
    /* a 4-deep path sharing 0x10: 0x21 (4), 0x31 (5), then 0x41 finds the tree full: the
     * deepest node reached (5) is returned, the leaf is not added, one tree_full */
    uintptr_t p2[] = {0x51, 0x41, 0x31, 0x21, 0x10};
    CHECK_INT(ps_cct_insert_path(t, 0, p2, 5, PS_NODE_FN), 5);
    CHECK_INT(t->nnodes, 6);
    CHECK_INT(t->tree_full, 1);
    CHECK_NODE(t, 4, PS_NODE_CALL, 0x21, 1);
    CHECK_NODE(t, 5, PS_NODE_CALL, 0x31, 4);
    /* the chain kept stops where the tree stopped: 0x10, 0x21, 0x31 */
    CHECK_INT(t->last_n, 3);
    CHECK_INT(t->last_nodes[2], 5);
    /* the call sites all exist but the leaf does not fit: the last call site (2) */
    uintptr_t p3[] = {0x35, 0x20, 0x10};
    CHECK_INT(ps_cct_insert_path(t, 0, p3, 3, PS_NODE_FN), 2);
    CHECK_INT(t->tree_full, 2);
    /* a path that is all in the tree is still found, without a count */
    CHECK_INT(ps_cct_insert_path(t, 0, p1, 3, PS_NODE_FN), 3);
    CHECK_INT(t->tree_full, 2);
    /* full at the first frame: the parent itself (the root) */
    uintptr_t p4[] = {0x60, 0x11};
    CHECK_INT(ps_cct_insert_path(t, 0, p4, 2, PS_NODE_FN), 0);
    CHECK_INT(t->tree_full, 3);
    CHECK_INT(t->last_n, 0);
}

int main(void)
{
    test_child();
    test_insert_path();
    test_walker_hint();
    test_tree_full();
    if (failures) fprintf(stderr, "test_cct_insert: %d failures\n", failures);
    return failures != 0;
}
