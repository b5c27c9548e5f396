/* Kernel time as a source (core/source.h): system calls and libc functions at their call paths. */
#include "source.h"

static const char *const options[] = {"kernel", "kernel_period", NULL};
static const ps_node_kind_t kinds[] = {{.kind = PS_NODE_SYSCALL, .name = "syscall"}, {.kind = -1}};

const ps_source_t ps_source_kernel = {
    .name = "kernel",
    .options = options,
    .kinds = kinds,
};
