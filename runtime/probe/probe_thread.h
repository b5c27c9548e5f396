/* The probe source's per-thread state (core/source.h: thread_size), mapped with the thread and
 * reached by its slot: written by the thread itself in the entry and exit handlers (enter.c),
 * read by the rank-file writer, the control thread (`probe list`) and the live publisher.
 *
 * The active stack: act[i] belongs to the call whose return slot holds hooked thunk i of the
 * unwinder's thunk stack (unwind.h: ps_unwind_redirect), so an exit finds its entry by the
 * thunk's index without a walk; `prev` chains the open calls from the innermost outwards (in
 * thunk traversal mode the thunk stack also holds frames that are not probed calls). */
#ifndef PS_PROBE_THREAD_H
#define PS_PROBE_THREAD_H
#include <stdint.h>
#include "source.h"

typedef struct {             /* metrics of one probe node, beside the tree (by node id) */
    uint64_t incl, excl;     /* ticks */
    uint64_t cpu_ns;         /* metrics cpu, rusage */
    uint64_t minflt, majflt, vcsw, ivcsw; /* metrics rusage */
    uint64_t lost, untimed, exceptions;
} probe_node_t;

typedef struct {
    uint32_t id, node;
    uint32_t prev;           /* the next outer open call's index + 1, 0: none */
    uint32_t open;
    uint64_t t0, mpi0;       /* wall clock and the thread's MPI time total at entry (ticks) */
    uint64_t child_incl, child_mpi; /* probed callees' inclusive time and its MPI part */
    uint64_t cpu0, minflt0, majflt0, vcsw0, ivcsw0;
} probe_act_t;

/* The entry fast path's memory of a probe's last entry (enter.c): the call from return
 * address ra in slot, whose caller's own slot aslot held thunk entry `anchor` (with seq), went
 * to node.  id + 1 (0: empty). */
typedef struct {
    uintptr_t slot, ra, aslot;
    uint64_t seq;
    uint32_t id1, node, anchor, pad;
} probe_fast_t;
#define PROBE_FAST 64        /* fast-path memories per thread, by probe id % PROBE_FAST */

typedef struct {
    probe_node_t *nodes;     /* mapped at the thread's first probed call */
    uint32_t cur;            /* the innermost open call's index + 1, 0: none */
    uint32_t inside;         /* in a handler: calls from it pass through */
    ps_leaf_cache_t cache[64]; /* probe leaves by (parent, id), id % 64 */
    probe_fast_t fast[PROBE_FAST];
    uint64_t fast_entries;   /* entries that took the fast path */
    probe_act_t act[PS_MAX_DEPTH];
} probe_thread_t;

static inline probe_thread_t *probe_of(const ps_thread_t *t) /* [signal-safe] */
{
    return ps_thread_state(t, PS_SRC_probe);
}
#endif
