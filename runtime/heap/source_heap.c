/* Heap profiling as a source (core/source.h): allocator calls recorded at their call paths. */
#include "source.h"

static const char *const options[] = {"heap", NULL};
static const ps_node_kind_t kinds[] = {{.kind = PS_NODE_HEAP, .name = "heap"}, {.kind = -1}};

const ps_source_t ps_source_heap = {
    .name = "heap",
    .options = options,
    .kinds = kinds,
};
