/* The unwinder's per-thread state (core/source.h: thread_size), mapped with the thread and
 * reached by its slot (unwind_of): the rule and function range caches, the thunk stack, the
 * previous walk kept for reuse, the traversal modes' counters and the thread's stack bounds.
 * Read and written by the thread itself -- in its MPI wrappers, allocations and signal
 * handlers, so [signal-safe]: preallocated, no locks -- and read by the rank-file writer; a
 * thread that cancels another sets the other's restore request (thunk.c).
 *
 * What the walker and the tree insertion share (walk_seq, walk_same_outer, last_keys_seq,
 * last_n, last_nodes: which outermost frames a walk shares with the previous path) is core's,
 * in ps_thread_t (core/cct.h), as is the buffer walks write into (scratch). */
#ifndef PS_UNWIND_THREAD_H
#define PS_UNWIND_THREAD_H
#include <stdint.h>
#include "source.h"

#define PS_RANGE_CACHE 4096  /* function ranges cached per thread */
#define PS_RULE_CACHE 4096   /* unwind rules cached per thread (power of 2) */

/* Thunk stack (thunk.c): return-address slots of live frames redirected to jump thunks;
 * e[i] is the i-th redirected frame from the outermost one.  Two kinds of entries: a
 * traversal thunk's (thunk mode, traversal.c) and a hooked thunk's (a probed function's exit,
 * ps_unwind_redirect), whose return calls the exit hook first.  Layout read by assembly. */
typedef struct {
    uint32_t top;        /* e[0..top) may be live */
    uint32_t suspended;  /* no new thunks: 1 an exception or thread exit is unwinding,
                          * 2 for good (the thread switches stacks: swapcontext) */
    struct {
        uintptr_t slot;  /* the stack slot */
        uintptr_t ra;    /* the return address it held (a thunk's after a tail call) */
    } e[PS_MAX_DEPTH];
    uint8_t hooked[PS_MAX_DEPTH];  /* e[i] is a hooked thunk's entry */
    /* e[0..i] are the slots of consecutive frames from the outermost one: a thunk-mode walk
     * may stop at thunk i and take the rest of its path from e[] */
    uint8_t chained[PS_MAX_DEPTH];
    /* seq[i]: pushes when e[i] was written (a count of entries ever pushed): an entry whose
     * seq is unchanged and whose slot still holds its thunk is the same frame's, live since
     * (the probes' entry fast path, ps_unwind_redirect_fast) */
    uint64_t seq[PS_MAX_DEPTH];
    uint64_t pushes;
    /* the last commit's innermost frame: a redirect of its callee's slot (chain_next) while
     * top is still chain_top continues the chain */
    uintptr_t chain_next;
    uint32_t chain_top;
    uint32_t restored_top; /* e[0..restored_top) were put back, not returned through: their
                            * frames may still be live (the same activation if met again) */
    /* installation waiting for the tree update (traversal.c: ps_unwind_commit) */
    uint32_t pend_base, npend;
    uint8_t pend_chained;  /* the walk reached the root or a chained thunk */
    uintptr_t pend_next;   /* the slot after the last pending one, 0: the chain breaks */
    uint64_t pend_seq;
    struct {
        uintptr_t slot, ra;
        uint32_t outer;  /* the position of the caller's frame from the root (last_nodes) */
    } pend[PS_MAX_DEPTH];
} ps_thunks_t;

/* The thread's thunk stack, for the thunks' assembly (thunk.c); set at thread start. */
extern __thread ps_thunks_t *ps_thunk_self __attribute__((tls_model("initial-exec")));

typedef struct {
    ps_thread_t *thread;           /* whose state this is: the walker reaches the walk link
                                    * (core/cct.h) through it, so it is handed u alone */
    unsigned walk_check_countdown; /* walks until the next check against a full walk */
    volatile int thunk_restore_request; /* set by pthread_cancel (thunk.c), cleared when done */
    int thunk_hit, thunk_owner;    /* the last walk met thunk e[thunk_hit] (its innermost) in
                                    * frame thunk_owner's slot */
    int thunk_stopped;             /* ... and stopped at a chained one, copying thunk_copied
                                    * return addresses from the thunk stack */
    int thunk_copied;
    uint32_t walk_from_thunk;      /* i+1: ps_unwind_from started at thunk e[i]'s slot; 0 */
    int walk_crossed_signal;       /* the last walk stepped through a signal frame (walk.c) */
    uint64_t walk_prev_seq;        /* the walk kept for reuse */
    uint64_t thunk_errors;         /* a thunk whose entry did not match its slot (walk stopped) */
    uint64_t thunk_restores;       /* thunk stacks restored (exceptions, thread exits, ...) */
    ps_thunks_t thunks;
    uintptr_t stack_lo, stack_hi; /* the thread's stack: walks never read outside it */
    uint64_t rules[PS_RULE_CACHE * 2]; /* unwind rules by address (rules.c) */
    unsigned unwind_generation; /* module changes seen when the caches were filled */
    /* the previous walk, for exact reuse (walk.c): two record buffers, swapped */
    uint64_t walk_buf[2][PS_MAX_DEPTH * 6];
    uint64_t *walk_prev, *walk_cur;
    int walk_prev_n, walk_prev_complete;
    unsigned walk_prev_generation;
    uint64_t walk_reused;      /* walks that reused the previous one */
    uint64_t walks, walk_checks, walk_agree; /* walks; of them, repeated as full walks; agreeing */
    uint64_t walks_since_full, walk_last_ticks; /* heuristic mode's drift control */
    uintptr_t check_buf[PS_MAX_DEPTH];          /* the checking full walk's output */
    int nranges;               /* function ranges seen by samples (rules.c) */
    struct { uintptr_t start, end; } ranges[PS_RANGE_CACHE];
} unwind_thread_t;

static inline unwind_thread_t *unwind_of(const ps_thread_t *t) /* [signal-safe] */
{
    return ps_thread_state(t, PS_SRC_unwind);
}
#endif
