/* Heap profiling as a source (core/source.h): allocator calls recorded at their call paths.
 * The shim (libpathscope-heap.so) and PATHSCOPE_HEAP must agree; recording starts once the
 * main thread is registered, stops while the final rank file is written and, after
 * MPI_Finalize's file, goes on until the process exits, where the file is written again. */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "source.h"
#include "heap.h"
#include "heap_thread.h"

static const char *const options[] = {"heap", NULL};

void ps_heap_write(ps_fmt_t *f, ps_section sec, ps_thread_t *t); /* heap_out.c */
const char *ps_heap_key_name(uintptr_t key, char buf[24]);        /* heap_out.c */

static const ps_node_kind_t kinds[] = {
    {.kind = PS_NODE_HEAP, .name = "heap", .key_name = ps_heap_key_name}, {.kind = -1}};

static int rewrite_at_exit; /* the rank file is written again at exit */

static const char *heap_configure(const ps_start_t *st)
{
    (void)st;
    void (*shim_init)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "pathscope_heap_shim_init");
    if (shim_init) shim_init(); /* resolves the shim if nothing allocated yet */
    int wanted = ps_option_on(ps_options.heap);
    if (wanted && !ps_heap_attached())
        return "PATHSCOPE_HEAP=on needs libpathscope-heap.so in LD_PRELOAD next to "
               "libpathscope.so (pathscope run --heap sets both)";
    if (!wanted && ps_heap_attached())
        return "libpathscope-heap.so is preloaded but PATHSCOPE_HEAP is not on: set "
               "PATHSCOPE_HEAP=on or remove it from LD_PRELOAD";
    if (wanted && !ps_option_on(ps_options.paths))
        return "PATHSCOPE_HEAP=on needs call paths: PATHSCOPE_PATHS=off cannot be combined "
               "with it";
    return NULL;
}

/* Allocations come from many more paths than MPI calls and samples (an interpreter's, for
 * one): 1,048,576 nodes per tree. */
static uint32_t heap_tree_nodes(void) { return ps_option_on(ps_options.heap) ? 1u << 20 : 0; }

static const char *heap_start(const ps_start_t *st)
{
    (void)st;
    if (ps_option_on(ps_options.heap) && ps_paths_on) ps_heap_start();
    return NULL;
}

/* After the rank file was written at MPI_Finalize: heap profiling goes on until the process
 * exits (frees made after MPI_Finalize are no leaks), where the file is written again. */
static void after_final_write(void)
{
    if (!ps_heap_on) return;
    rewrite_at_exit = 1;
    ps_cct_frozen = 0; /* samplers are stopped and the wrappers pass through: heap only */
    ps_heap_resume();
}

static int heap_rewrite_at_exit(void) { return rewrite_at_exit; }

static void heap_fork_child(void) { rewrite_at_exit = 0; /* (a child forked after MPI_Finalize) */ }

/* The destructor's final files: no allocation is recorded while they are written; after
 * MPI_Finalize's, recording goes on. */
static void heap_end(ps_end_how how, ps_end_phase phase)
{
    if (phase == PS_END_BLOCKED && (how == PS_END_EXIT_REWRITE || how == PS_END_EXIT_NOMPI))
        ps_heap_stop();
    if (phase == PS_END_HELD && how == PS_END_FINALIZE) after_final_write();
}

void ps_heap_publish(ps_fmt_t *f); /* heap_live.c */

const ps_source_t ps_source_heap = {
    .name = "heap",
    .options = options,
    .configure = heap_configure,
    .start = heap_start,
    .thread_size = sizeof(heap_thread_t),
    .tree_nodes = heap_tree_nodes,
    .fork_child = heap_fork_child,
    .end = heap_end,
    .rewrite_at_exit = heap_rewrite_at_exit,
    .write = ps_heap_write,
    .publish = ps_heap_publish,
    .kinds = kinds,
};
