/* Entry and exit of every MPI wrapper: the fast path is two loads and a store. */
#ifndef PS_WRAP_H
#define PS_WRAP_H
#include "mpi_internal.h"

int ps_wrap_enter_slow(void); /* lifecycle_mpi.c: MPI initialised behind our back? */

static inline int ps_wrap_enter(void)
{
    if (__builtin_expect(ps_state != PS_RUN_MPI, 0) && !ps_wrap_enter_slow()) return 0;
    if (ps_in_wrapper) return 0;
    ps_in_wrapper = 1;
    return 1;
}

static inline void ps_wrap_leave(void) { ps_in_wrapper = 0; }
#endif
