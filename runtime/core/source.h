/* The door of every measurement source: one descriptor per source (runtime/<folder>/
 * source_<name>.c), listed once in sources.def, iterated by core (source.c).
 *
 * Contract for the hooks:
 *  - configure, start, rank_start, thread_init and thread_start never run in a signal handler
 *    and may allocate;
 *  - write, fork_child, thread_exit, key_name, time_ns, thread_cols, summary, and end when how
 *    is PS_END_SIGNAL or PS_END_PEER, are [signal-safe]: no malloc, no locks, no stdio;
 *  - a NULL hook is skipped.
 * Registry order (sources.def) is the order of every iteration: rank-file sections,
 * configuration-error precedence, thread exit and fork.
 */
#ifndef PS_SOURCE_H
#define PS_SOURCE_H
#include <stddef.h>
#include <stdint.h>
#include "pathscope.h"
#include "cct.h"

/* How the run ends (core/ending.c). */
typedef enum {
    PS_END_FINALIZE, PS_END_ABORT, PS_END_SIGNAL, PS_END_PEER,
    PS_END_EXIT, PS_END_EXIT_NOMPI, PS_END_EXIT_REWRITE,
} ps_end_how;
typedef enum {
    PS_END_BEGIN,    /* nothing blocked yet; may wait (closing samples: at most 50 ms) */
    PS_END_BLOCKED,  /* launch signals blocked, writer not held: stop recording */
    PS_END_HELD,     /* after the rank file, writer still held */
    PS_END_DONE,     /* writer released, signals unblocked: MPI collectives allowed */
} ps_end_phase;

/* Where a source's rank-file lines go; order = docs/format.md order.  FROZEN, HEAD, RANK and
 * THREAD come only with call paths on (the call-path part, output/pathsfile.c). */
typedef enum {
    PS_SEC_PREPARE,  /* before the file exists, f NULL (kernel: fetch the collector's tables) */
    PS_SEC_FROZEN,   /* call paths on: trees frozen, nothing of them written yet, f unused: a
                      * source's last additions to the trees (mpi: counted calls, once) */
    PS_SEC_HEAD,     /* after counter_tree_full: sampler (sample), unwind groups (mpi) */
    PS_SEC_RANK,     /* after the module lines: traversal (unwind), heap/hpoint, kernel/k* */
    PS_SEC_THREAD,   /* per thread, after its node lines: walks (unwind), hnode (heap), pcomm (mpi) */
    PS_SEC_TAIL,     /* after the call paths: comm, op (mpi) */
} ps_section;

typedef struct {             /* what start-up knows (core/lifecycle.c) */
    int first_process;       /* the process pathscope was started for (PATHSCOPE_PID) */
    int launcher_rank;       /* the rank the launcher gave, -1 if none */
    int paths_wanted;        /* call paths asked for (PATHSCOPE_PATHS=on, not a launcher); whether
                              * they work is ps_paths_on, set by unwind's configure */
} ps_start_t;

typedef struct {             /* a node kind a source adds (the leaf of its records) */
    int kind;                /* fixed number: PS_NODE_MPI 4, HEAP 7, SYSCALL 8; unique (unit test) */
    const char *name;        /* rank-file kind: "mpi", "heap", "syscall" */
    const char *(*key_name)(uintptr_t key, char buf[24]);  /* [signal-safe] */
    uint64_t (*time_ns)(const ps_node_t *n);  /* node line's kernel_ns column, NULL: 0 [signal-safe] */
} ps_node_kind_t;

typedef struct {             /* the thread line's source-owned columns */
    uint64_t samples_kept, samples_in_mpi, samples_other, walk_reused;
} ps_thread_cols_t;

typedef struct {             /* the rank file's head values a source owns */
    const char *library;     /* mpi_library ("-"); mpi */
    uint64_t mpi_ns;         /* mpi */
} ps_rank_summary_t;

/* A control request (runtime/live/control.c): its lines, without their newlines; the
 * answer goes back on the connection line by line (each at most 4096 bytes). */
typedef struct ps_request {
    int nlines;
    char **lines;            /* lines[0] is the request ("probe add"), then its data lines */
    int fd;                  /* the connection */
    int failed;              /* an answer could not be sent */
} ps_request_t;
void ps_reply(ps_request_t *rq, const char *line);   /* one answer line (newline added) */

typedef struct ps_source {
    const char *name;                      /* "unwind", "sample", "heap", "kernel", "mpi" */
    const char *const *options;            /* options.def fields it owns, NULL-terminated */
    /* Load time, registry order.  configure: validate and set up, no thread registered yet;
     * start: after the main thread is registered.  Either returns one error line (core prints
     * it and exits 2) or NULL. */
    const char *(*configure)(const ps_start_t *st);
    const char *(*start)(const ps_start_t *st);
    void (*rank_start)(void);              /* the process became an MPI rank (inside MPI_Init) */
    /* Per-thread state: thread_size bytes, zeroed, mapped at registration, reached by slot. */
    size_t thread_size;
    uint32_t (*tree_nodes)(void);          /* nodes per tree needed (heap: 1<<20 if heap=on) */
    int  (*thread_init)(ps_thread_t *t, void *state);  /* in the thread, before publication;
                                                          -1 fails the registration */
    void (*thread_start)(ps_thread_t *t, void *state); /* after publication (sampler timer) */
    void (*thread_exit)(ps_thread_t *t, void *state);  /* in the thread at its end [signal-safe] */
    void (*before_exec)(ps_thread_t *t);   /* exec interposition (core): sample stops SIGPROF */
    void (*exec_failed)(ps_thread_t *t);
    void (*fork_child)(void);              /* [signal-safe] */
    void (*end)(ps_end_how how, ps_end_phase phase); /* [signal-safe] for SIGNAL and PEER */
    int  (*rewrite_at_exit)(void);         /* 1: the destructor writes the file again (heap) */
    /* Rank file [signal-safe]: t is NULL except for PS_SEC_THREAD. */
    void (*write)(ps_fmt_t *f, ps_section sec, ps_thread_t *t);
    const ps_node_kind_t *kinds;           /* terminated by an entry of kind < 0; or NULL */
    void (*thread_cols)(const ps_thread_t *t, ps_thread_cols_t *cols);  /* [signal-safe] */
    void (*summary)(ps_rank_summary_t *s);                              /* [signal-safe] */
    /* Control requests (runtime/live/control.c): a request whose first word is the source's
     * name ("probe add ...") goes to it whole, in the control thread (never a signal
     * handler; may allocate; one request at a time).  It answers with ps_reply(). */
    void (*command)(ps_request_t *rq);
    /* The live segment (runtime/live/publish.c), in the control thread once per interval:
     * the source's current summary as TAB-separated lines (docs/format.md, "Live segment"),
     * read from the threads' trees without stopping them or taking their locks. */
    void (*publish)(ps_fmt_t *f);
} ps_source_t;

/* The registry (source.c): PS_SRC_<name> in sources.def order. */
enum {
#define PS_SOURCE(name) PS_SRC_##name,
#include "sources.def"
#undef PS_SOURCE
    PS_NSOURCES
};
#define PS_SOURCE(name) extern const ps_source_t ps_source_##name;
#include "sources.def"
#undef PS_SOURCE
extern const ps_source_t *const ps_sources[PS_NSOURCES];
extern const char *const ps_core_options[]; /* options.def fields core owns, NULL-terminated */

/* Per-thread state by slot: ps_thread_states[source][thread index], the source's thread_size
 * bytes (NULL when 0), mapped with the thread and set before it is published.  A source wraps
 * the accessor in a typed one. [signal-safe] */
extern void *ps_thread_states[PS_NSOURCES][PS_MAX_THREADS];
static inline void *ps_thread_state(const ps_thread_t *t, int source)
{
    return ps_thread_states[source][t->index];
}

/* Iteration, registry order.  The first error of configure/start is returned (NULL: none). */
const char *ps_sources_configure(const ps_start_t *st);
const char *ps_sources_start(const ps_start_t *st);
void ps_sources_rank_start(void);
void ps_sources_fork_child(void);                                   /* [signal-safe] */
void ps_sources_end(ps_end_how how, ps_end_phase phase);  /* [signal-safe] for SIGNAL, PEER */
int ps_sources_rewrite_at_exit(void);     /* a source wants the file written again at exit */
void ps_sources_write(ps_fmt_t *f, ps_section sec, ps_thread_t *t); /* [signal-safe] */
/* The threads the call-path part being written covers: ps_threads[0 .. n), n read once when
 * it began (output/pathsfile.c); the write hooks of FROZEN..THREAD use it. [signal-safe] */
int ps_write_nthreads(void);
/* The node kind a source added (NULL: none) and its rank-file name. [signal-safe] */
const ps_node_kind_t *ps_node_kind_of(int kind);
const char *ps_node_kind_name(int kind);   /* NULL if no source adds it */
/* The rank file's module id of a code address (the `module` lines of the call-path part
 * being written), -1 if none. [signal-safe] */
int ps_paths_module_of(uintptr_t addr);
#endif
