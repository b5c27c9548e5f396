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
    PS_NODE_PROBE,       /* a call of a probed function (probe/probe.h); key = the probe id */
    PS_NODE_PY,          /* a Python frame (python/pyframes.h); key = its location id */
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

typedef struct ps_thread {
    /* Only what every source shares, all of it core's: the thread, its time accounting, its
     * tree (with the link between a walk and the insertion of its path).  Each source keeps
     * its per-thread state in a struct of its own (core/source.h: thread_size), mapped with
     * this record at registration and reached by the thread's slot (index); the markers at
     * the end name them, in sources.def order. */

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
    /* The walk link: what the insertion of a walk's path may skip.  Written by the walker
     * (unwind/traversal.c: walk_mode; walk.c), read by the insertion (cct.c) and by the thunk
     * commit that follows it (unwind/traversal.c: ps_unwind_commit, with last_n and
     * last_nodes): shared by core and unwind, so core's. */
    uint64_t walk_seq;             /* walks whose output was used, this one included */
    uint64_t last_keys_seq;        /* the walk whose path last_keys holds */
    int walk_same_outer;           /* outermost frames known equal to walk walk_seq - 1's */
    /* the previous path from the root: reused while it is a prefix of the next one */
    int last_n;
    uintptr_t last_keys[PS_MAX_DEPTH];
    uint32_t last_nodes[PS_MAX_DEPTH];
    uintptr_t scratch[PS_MAX_DEPTH + 64]; /* the recording call's path: the walk's output
                                           * (core/record.h) */

    /* ---- unwind: its own state (unwind/unwind_thread.h: unwind_thread_t, by slot) ---- */

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
int ps_process_is_launcher(void);     /* mpirun, orted, srun, ...: never profiled */
/* pathscope's own helper threads (the live component's control thread): never registered,
 * but theirs are this process's system calls all the same (kernel time's snapshot check).
 * The tid is kept after the thread ends.  [signal-safe] */
void ps_own_thread_add(int tid);
int ps_own_thread(int tid);
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
 * others are call sites, or Python frames: PS_PY_TAG | location id, nodes of kind PS_NODE_PY)
 * below parent and returns the leaf's node id. [signal-safe] */
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
