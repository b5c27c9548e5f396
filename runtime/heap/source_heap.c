/* Heap profiling as a source (core/source.h): allocator calls recorded at their call paths. */
#include "source.h"

static const char *const options[] = {"heap", NULL};

void ps_heap_write(ps_fmt_t *f, ps_section sec, ps_thread_t *t); /* heap_out.c */
const char *ps_heap_key_name(uintptr_t key, char buf[24]);        /* heap_out.c */

static const ps_node_kind_t kinds[] = {
    {.kind = PS_NODE_HEAP, .name = "heap", .key_name = ps_heap_key_name}, {.kind = -1}};

const ps_source_t ps_source_heap = {
    .name = "heap",
    .options = options,
    .write = ps_heap_write,
    .kinds = kinds,
};
