/* Heap profiling by call path (PATHSCOPE_HEAP=on, `pathscope run --heap`).
 *
 * Two libraries: libpathscope-heap.so, preloaded before libpathscope.so, defines malloc and
 * its family and nothing else; it finds the real allocator with dlsym(RTLD_NEXT) (serving
 * the allocations dlsym itself makes from a static arena) and hands every call to the
 * functions below, in libpathscope.so.  Without --heap the application's allocator is not
 * touched at all.
 *
 * Every block we hand out carries a 16-byte header just before it (heap.c: layout, and why
 * a header rather than an address table).  A pointer without our header -- allocated before
 * the shim was resolved, or by code that bypasses malloc -- is passed through untouched and
 * counted.
 */
#ifndef PS_HEAP_H
#define PS_HEAP_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The allocator functions, in the order of their leaf names in the tree (node kind heap). */
enum {
    PS_HEAP_MALLOC, PS_HEAP_CALLOC, PS_HEAP_REALLOC, PS_HEAP_POSIX_MEMALIGN,
    PS_HEAP_ALIGNED_ALLOC, PS_HEAP_MEMALIGN, PS_HEAP_VALLOC, PS_HEAP_PVALLOC,
    PS_HEAP_REALLOCARRAY, PS_HEAP_NFUNCTIONS
};
extern const char *const ps_heap_function_names[PS_HEAP_NFUNCTIONS];

typedef struct {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void *(*memalign)(size_t, size_t);
    size_t (*usable_size)(void *);
} ps_heap_real_t;

typedef struct ps_heap_node {  /* per tree node, beside the tree (heap_thread.h: heap_thread_t.nodes) */
    _Atomic uint64_t allocs, alloc_bytes; /* stored by the owning thread only */
    _Atomic uint64_t frees, freed_bytes;  /* of blocks allocated here, by any thread */
    _Atomic uint64_t peak_live, stamp;    /* live bytes at the latest rank peak (heap.c) */
} ps_heap_node_t;

typedef struct {
    uint64_t ticks; /* since recording started */
    uint64_t live;  /* live bytes then */
    uint64_t max;   /* the most live bytes since the previous point */
} ps_heap_point_t;

typedef struct {
    _Atomic uint64_t untracked_allocs; /* before start-up, inside pathscope, after the end */
    _Atomic uint64_t untracked_frees;  /* of such blocks */
    _Atomic uint64_t foreign_frees;    /* free/realloc of a pointer we never handed out */
} ps_heap_stats_t;
extern ps_heap_stats_t ps_heap_stats;

/* Called by the shim (exported: pathscope_*). */
void pathscope_heap_attach(const ps_heap_real_t *real, uintptr_t shim_code); /* any address in it */
/* caller: the application frame's pc (a return address), sp and rbp: the walk starts there */
void *pathscope_heap_alloc(int fn, size_t size, size_t align, int zero, const uintptr_t *caller);
void pathscope_heap_free(void *p);
void *pathscope_heap_realloc(int fn, void *p, size_t size, const uintptr_t *caller);
size_t pathscope_heap_usable_size(void *p);

/* In libpathscope.so */
extern int ps_heap_on;                /* the shim is attached and PATHSCOPE_HEAP=on */
void ps_heap_start(void);             /* end of start-up: recording begins */
void ps_heap_resume(void);            /* after the rank file at MPI_Finalize: record until exit */
void ps_heap_stop(void);              /* the final rank file is being written */
int ps_heap_attached(void);
/* for the writer [signal-safe] */
void ps_heap_totals(uint64_t *peak, uint64_t *peak_at, uint64_t *gen, int64_t *live);
int ps_heap_timeline(const ps_heap_point_t **points);
uint64_t ps_heap_node_peak(ps_heap_node_t *h);
#endif
