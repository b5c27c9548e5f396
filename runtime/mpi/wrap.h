/* Entry and exit of every MPI wrapper: the fast path is two loads and a store. */
#ifndef PS_WRAP_H
#define PS_WRAP_H
#include "mpi_internal.h"

int ps_wrap_enter_slow(void); /* lifecycle_mpi.c: MPI initialised behind our back? */

__attribute__((always_inline)) static inline int ps_wrap_enter(void)
{
    if (__builtin_expect(ps_state != PS_RUN_MPI, 0) && !ps_wrap_enter_slow()) return 0;
    if (ps_in_wrapper) return 0;
    ps_in_wrapper = 1;
    return 1;
}

__attribute__((always_inline)) static inline void ps_wrap_leave(void) { ps_in_wrapper = 0; }

/* Polls (MPI_Test, Testany, Testsome, Testall, Iprobe, Improbe) are timed one call in
 * ps_poll_sample, chosen at random, and the measured time is scaled by ps_poll_sample; their
 * calls are always counted exactly.  Applications poll millions of times a second between
 * cache-missing work, and a TSC read waits for those misses (docs/benchmarks.md), so timing
 * every poll can double such a loop.  PATHSCOPE_POLL_TIMING=every times them all. */
extern int ps_poll_sample; /* 1 or PS_POLL_SAMPLE */
/* The time of a timed poll [t0, t1] scaled to the polls it stands for, but never more than
 * the thread's time since its last sample that no measured MPI call holds yet (paths.c): the
 * polls it stands for ran in that time.  The scaled estimate is unbiased, but poll durations
 * are heavy-tailed (a poll that progresses a large one-sided operation, or is descheduled on
 * a loaded node, takes milliseconds among polls of 100 ns): unbounded, one such poll times 16
 * could hold more MPI time than the thread's elapsed time. */
uint64_t ps_poll_estimate(uint64_t t0, uint64_t t1);
#define PS_POLL_SAMPLE 16
extern __thread uint32_t ps_poll_rng __attribute__((tls_model("initial-exec")));

__attribute__((always_inline)) static inline int ps_poll_timed(void)
{
    if (ps_poll_sample == 1) return 1;
    uint32_t x = ps_poll_rng;
    if (__builtin_expect(x == 0, 0)) x = 0x9e3779b9u ^ (uint32_t)(uintptr_t)&ps_poll_rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    ps_poll_rng = x;
    return (x & (PS_POLL_SAMPLE - 1)) == 0;
}
#endif
