/* Threads and their calling context trees (CCT).
 *
 * Every thread that pathscope sees gets one ps_thread_t, created outside signal handlers
 * (library load, our pthread_create trampoline, or the first MPI call of a thread we did not
 * start) from memory mapped once; it is never freed, so the end of the run can write it.
 *
 * Contract: everything declared [signal-safe] may run in the sampling handler and in the
 * MPI wrappers: no malloc, no locks, no stdio, only the thread's own preallocated storage.
 * A thread's tree is written only by that thread; the writer at the end freezes the trees
 * (ps_cct_frozen) and waits for in-flight updates (busy) before reading them.
 */
#ifndef PS_CCT_H
#define PS_CCT_H
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include "pathscope.h"
#include "timeline.h"

#define PS_MAX_DEPTH 256      /* frames kept per path; deeper stacks count as failed */
#define PS_MAX_THREADS 4096
#define PS_RANGE_CACHE 4096  /* function ranges cached per thread */
#define PS_RULE_CACHE 4096   /* unwind rules cached per thread (power of 2) */

typedef enum {
    PS_NODE_ROOT = 0,
    PS_NODE_CALL,        /* a return address (call site) */
    PS_NODE_FN,          /* innermost frame of a sample: function entry address */
    PS_NODE_PC,          /* innermost frame of a sample, function unknown: the pc */
    PS_NODE_MPI,         /* an MPI operation; key = op number */
    PS_NODE_FAILED,      /* [failed unwind] */
    PS_NODE_NOT_UNWOUND, /* [not unwound] */
    PS_NODE_HEAP,        /* an allocator function (heap/heap.h); key = its number */
    PS_NODE_SYSCALL,     /* a system call or libc function (kernel/kernel.h); key = its number */
} ps_node_kind;

typedef struct {
    uintptr_t key;
    uint32_t parent;
    uint32_t kind;
    uint64_t visits, bytes;          /* MPI nodes */
    uint64_t mpi_ticks;              /* MPI nodes */
    uint64_t sample_ticks, samples;  /* FN, PC, FAILED, NOT_UNWOUND: on-CPU time (sampled) */
    uint64_t offcpu_ticks;           /* ... and off-CPU time placed here (sample.c) */
    uint64_t entries;                /* CALL: calls made here, a lower bound (thunk mode) */
    uint64_t kernel_time;            /* SYSCALL: time in the call (visits: its calls); ns from
                                      * eBPF, ticks from the libc wrappers (kernel/kernel.c) */
} ps_node_t;

/* The leaf a source found last time below a parent for a key (core/record.h). */
typedef struct {
    uint32_t parent, leaf; /* leaf 0: nothing cached */
    uintptr_t key;
} ps_leaf_cache_t;

/* Thunk stack (unwind/thunk.c): return-address slots of live frames redirected to jump thunks;
 * e[i] is the i-th redirected frame from the outermost one.  Layout read by assembly. */
typedef struct {
    uint32_t top;        /* e[0..top) may be live */
    uint32_t suspended;  /* no new thunks: 1 an exception or thread exit is unwinding,
                          * 2 for good (the thread switches stacks: swapcontext) */
    struct {
        uintptr_t slot;  /* the stack slot */
        uintptr_t ra;    /* the return address it held */
    } e[PS_MAX_DEPTH];
    uint32_t restored_top; /* e[0..restored_top) were put back, not returned through: their
                            * frames may still be live (the same activation if met again) */
    /* installation waiting for the tree update (unwind/traversal.c: ps_unwind_commit) */
    uint32_t pend_base, npend;
    uint64_t pend_seq;
    struct {
        uintptr_t slot, ra;
        uint32_t outer;  /* the position of the caller's frame from the root (last_nodes) */
    } pend[PS_MAX_DEPTH];
} ps_thunks_t;

typedef struct ps_thread {
    /* Every field has one owner, in blocks: core (the thread, its time accounting, its tree),
     * then each source in sources.def order.  A source's block leaves for its own per-thread
     * state (core/source.h: thread_size) when the source moves to the recording call. */

    /* ---- core: the thread ---- */
    volatile int busy;         /* inside a tree update (ps_tree_enter) */
    int index;                 /* 0 = first registered (the main thread) */
    int tid;
    volatile int exited;       /* its start routine returned or it called pthread_exit */
    uintptr_t pthread;         /* pthread_self() of the thread */
    uintptr_t start_routine;   /* the function pthread_create started (0: the main thread) */
    uint64_t start_ticks, end_ticks; /* end_ticks 0 while the thread runs */
    uint64_t start_cpu_ns, end_cpu_ns; /* the thread's CPU clock at registration and at its end */

    /* ---- core: the timeline (timeline.h): MPI adds measured time, samples charge,
     * ps_thread_close closes ---- */
    ps_time_t time;

    /* ---- core: the tree ---- */
    ps_node_t *nodes;
    uint32_t nnodes, max_nodes;
    uint32_t *hash;            /* node ids by (parent, kind, key); 0 = empty */
    uint32_t hash_mask;
    uint32_t failed_node, not_unwound_node;
    uint64_t unwind_failures, tree_full;
    /* what the insertion of a walk's path may skip (unwind/traversal.c: walk_mode; cct.c) */
    uint64_t walk_seq;             /* walks whose output was used, this one included */
    uint64_t last_keys_seq;        /* the walk whose path last_keys holds */
    int walk_same_outer;           /* outermost frames known equal to walk walk_seq - 1's */
    /* the previous path from the root: reused while it is a prefix of the next one */
    int last_n;
    uintptr_t last_keys[PS_MAX_DEPTH];
    uint32_t last_nodes[PS_MAX_DEPTH];
    uintptr_t scratch[PS_MAX_DEPTH + 64]; /* unwinder output */

    /* ---- unwind (unwind/: rules.c, walk.c, traversal.c, thunk.c) ---- */
    unsigned walk_check_countdown; /* walks until the next check against a full walk */
    volatile int thunk_restore_request; /* set by pthread_cancel (thunk.c), cleared when done */
    int thunk_hit, thunk_owner;    /* the last walk met thunk e[thunk_hit] in frame thunk_owner's slot */
    uint64_t walk_prev_seq;        /* the walk kept for reuse */
    uint64_t thunk_errors;         /* a thunk whose entry did not match its slot (walk stopped) */
    uint64_t thunk_restores;       /* thunk stacks restored (exceptions, thread exits, ...) */
    ps_thunks_t thunks;
    uintptr_t stack_lo, stack_hi; /* the thread's stack: walks never read outside it */
    uint64_t rules[PS_RULE_CACHE * 2]; /* unwind rules by address (unwind/rules.c) */
    unsigned unwind_generation; /* module changes seen when the caches were filled */
    /* the previous walk, for exact reuse (unwind/walk.c): two record buffers, swapped */
    uint64_t walk_buf[2][PS_MAX_DEPTH * 6];
    uint64_t *walk_prev, *walk_cur;
    int walk_prev_n, walk_prev_complete;
    unsigned walk_prev_generation;
    uint64_t walk_reused;      /* walks that reused the previous one */
    uint64_t walks, walk_checks, walk_agree; /* walks; of them, repeated as full walks; agreeing */
    uint64_t walks_since_full, walk_last_ticks; /* heuristic mode's drift control */
    uintptr_t check_buf[PS_MAX_DEPTH];          /* the checking full walk's output */
    int nranges;               /* function ranges seen by samples (unwind/rules.c) */
    struct { uintptr_t start, end; } ranges[PS_RANGE_CACHE];

    /* ---- sample: its own state (sample/sample_thread.h: sample_thread_t, by slot) ---- */

    /* ---- heap: its own state (heap/heap_thread.h: heap_thread_t, by slot) ---- */

    /* ---- kernel: its own state (kernel/kernel_thread.h: kernel_thread_t, by slot) ---- */

    /* ---- mpi: its own state (mpi/mpi_thread.h: mpi_thread_t, by slot) ---- */
} ps_thread_t;

extern __thread ps_thread_t *ps_self __attribute__((tls_model("initial-exec")));
extern ps_thread_t *ps_threads[PS_MAX_THREADS];
extern _Atomic int ps_nthreads;
extern volatile int ps_cct_frozen; /* the end of the run is reading the trees */
extern int ps_paths_on;             /* call paths (unwinding, trees) active in this process */

/* Threads (threads.c).  At load time, before the sources' configure: whether call paths are
 * asked for in this process (PATHSCOPE_PATHS=on, not a launcher); if so the membarrier below
 * is registered. */
int ps_threads_init(void);
ps_thread_t *ps_thread_register(void);  /* not signal-safe (maps memory) */
void *ps_map_zeroed(size_t bytes);      /* anonymous, NORESERVE; NULL on failure [signal-safe] */
/* The CPU-time clock of thread tid, and its value in ns (0 if unknown). [signal-safe] */
clockid_t ps_thread_cpu_clock(int tid);
uint64_t ps_thread_cpu_ns(int tid);

/* The handshake between a thread updating its tree ("busy, then frozen?") and the writer
 * ("frozen, then busy?") needs a full barrier on both sides.  With Linux's membarrier the
 * writer issues it for every thread at once, and the hot side needs only a compiler barrier;
 * without it both sides fence. */
extern int ps_membarrier_ok;
static inline void ps_tree_fence(void)
{
    if (ps_membarrier_ok) atomic_signal_fence(memory_order_seq_cst);
    else atomic_thread_fence(memory_order_seq_cst);
}
static inline ps_thread_t *ps_thread_get(void)
{
    ps_thread_t *t = ps_self;
    return t ? t : ps_thread_register();
}
/* Claims the thread's tree for an update from this context (a sample, a kernel-time signal, a
 * libc wrapper): busy first, then (after a full fence, so that the writer's "frozen, then
 * busy?" and our "busy, then frozen?" cannot both miss each other) check that the trees are
 * not being written.  0: frozen, leave it alone. [signal-safe] */
static inline int ps_tree_enter(ps_thread_t *t)
{
    t->busy = 1;
    ps_tree_fence();
    if (ps_cct_frozen) {
        t->busy = 0;
        return 0;
    }
    return 1;
}

static inline void ps_tree_leave(ps_thread_t *t)
{
    atomic_signal_fence(memory_order_seq_cst);
    t->busy = 0;
}

void ps_thread_close(ps_thread_t *t, uint64_t now); /* end of the thread's timeline (timeline.c) [signal-safe] */
void ps_threads_freeze(void);                       /* before writing [signal-safe] */

/* Inserts a path of frames (innermost first: frames[0] is the leaf, of kind leaf_kind; the
 * others are call sites) below parent and returns the leaf's node id. [signal-safe] */
uint32_t ps_cct_insert_path(ps_thread_t *t, uint32_t parent, const uintptr_t *frames, int n,
                            int leaf_kind);
uint32_t ps_cct_child(ps_thread_t *t, uint32_t parent, int kind, uintptr_t key); /* [signal-safe] */
/* The tree's hash of (parent, kind, key), also for a source's tables beside the tree (mpi's
 * per-communicator table: mpi/paths.c). [signal-safe] */
static inline uint32_t ps_cct_hash(uint32_t parent, int kind, uintptr_t key)
{
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull ^ ((uint64_t)parent << 3 | (uint64_t)kind);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return (uint32_t)(h ^ (h >> 32));
}

/* The hybrid accounting (sample.c): a kept sample of this thread at node: its on-CPU weight
 * and the off-CPU time seen since the previous kept sample. [signal-safe] */
void ps_sample_charge(ps_thread_t *t, uint32_t node, uint64_t now, uint64_t cpu_ns);
#endif
