/* Syscall names of the kernel headers' __NR_ table (x86_64), shared by the runtime and
 * pathscope-kcollect.  The table itself is generated at build time (gen_sysnames.py). */
#ifndef PS_KERNEL_SYSNAMES_H
#define PS_KERNEL_SYSNAMES_H

#include "protocol.h"

/* NULL for numbers the headers do not name. */
extern const char *const ps_syscall_names[PS_NR_SYSCALLS];

/* The name of syscall nr, or "syscall_<nr>" formatted into buf (then buf is returned).
 * Async-signal-safe. */
const char *ps_syscall_name(unsigned nr, char buf[24]);

#endif
