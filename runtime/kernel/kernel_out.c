/* Kernel time's part of the rank file (docs/format.md, "Kernel time"): the collector's tables
 * fetched before the file exists, the estimates spread once the trees are frozen
 * (kernel_estimate.c), then the kernel, ksys, kthread, kos and kend lines (kernel.c) and each
 * thread's knode lines.  Reached through the descriptor (source_kernel.c), which may run in a
 * fatal-signal handler: [signal-safe]. */
#include "source.h"
#include "kernel.h"

void ps_kernel_write_section(ps_fmt_t *f, ps_section sec, ps_thread_t *t)
{
    /* The tables first (what went wrong with them is a warning of this file), and before the
     * file exists: our own writes to it are not the application's system calls. */
    if (sec == PS_SEC_PREPARE) ps_kernel_fetch();
    else if (sec == PS_SEC_FROZEN) ps_kernel_estimate();
    else if (sec == PS_SEC_RANK) ps_kernel_write(f);
    else if (sec == PS_SEC_THREAD) ps_kernel_write_estimates(f, t);
}
