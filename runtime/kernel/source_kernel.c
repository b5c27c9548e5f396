/* Kernel time as a source (core/source.h): system calls and libc functions at their call paths. */
#include "source.h"

static const char *const options[] = {"kernel", "kernel_period", NULL};

void ps_kernel_write_section(ps_fmt_t *f, ps_section sec, ps_thread_t *t); /* kernel_out.c */
const char *ps_kernel_key_name(uintptr_t key, char buf[24]); /* kernel.c */
uint64_t ps_kernel_node_ns(const ps_node_t *n);              /* kernel.c */

static const ps_node_kind_t kinds[] = {
    {.kind = PS_NODE_SYSCALL, .name = "syscall", .key_name = ps_kernel_key_name,
     .time_ns = ps_kernel_node_ns},
    {.kind = -1}};

const ps_source_t ps_source_kernel = {
    .name = "kernel",
    .options = options,
    .write = ps_kernel_write_section,
    .kinds = kinds,
};
