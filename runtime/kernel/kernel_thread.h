/* Kernel time's per-thread state (core/source.h: thread_size), mapped with the thread and
 * reached by its slot: by the thread's libc wrappers (kernel.c: pathscope_kernel_call), by
 * the thread's end (its own resource usage) and by the rank-file writer. */
#ifndef PS_KERNEL_THREAD_H
#define PS_KERNEL_THREAD_H
#include <stdint.h>
#include "source.h"
#include "kernel.h"

typedef struct {
    uint64_t utime_ns, stime_ns, minflt, majflt, nvcsw, nivcsw;
    int valid;
} ps_krusage_t;

typedef struct {
    ps_kstat_t *kstat;    /* per libc function (libc source), or NULL before the thread's first
                           * timed call (kernel.c: pathscope_kernel_call) */
    ps_kdrop_t *dropped;  /* per syscall number (eBPF), or NULL before the thread's first
                           * report that reached no path (kernel.c: on_kernel_signal) */
    ps_kest_t *est;       /* the estimates the last rank file added to the thread's syscall
                           * nodes, est_n of est_cap (kernel_estimate.c) */
    uint32_t est_n, est_cap;
    ps_krusage_t rusage;  /* the thread's own getrusage at its end (kernel time on), or what
                           * /proc says of it when the rank file is written */
} kernel_thread_t;

static inline kernel_thread_t *kernel_of(const ps_thread_t *t) /* [signal-safe] */
{
    return ps_thread_state(t, PS_SRC_kernel);
}
#endif
