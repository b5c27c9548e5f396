/* The sampler's per-thread state (core/source.h: thread_size), mapped with the thread and
 * reached by its slot: by the thread's own handler, by the end of the run (closing samples,
 * stopping the samplers) and by the rank-file writer. */
#ifndef PS_SAMPLE_THREAD_H
#define PS_SAMPLE_THREAD_H
#include <stdint.h>
#include "source.h"

typedef struct {
    uint64_t skipped_cpu_ns;   /* CPU time of dropped samples' intervals since the last kept one */
    volatile int close_requested; /* end of the run: take a closing sample */
    volatile int close_done;      /* ... taken */
    uint64_t samples_kept, samples_in_mpi, samples_other;
    void *_Atomic sampler_page; /* the mapping that keeps the thread's perf event, or NULL */
    _Atomic int has_timer;     /* or a POSIX timer (its kernel id) */
    int timer_id;
    /* PATHSCOPE_SAMPLE_TIMER=auto (sample.c: "Choosing the timer"), all handler-only */
    uint64_t mode_check_ticks, mode_check_switches; /* the last look at the switch rate */
    uint64_t slow_check_ticks, slow_check_preempted; /* ... and at preemptions, over longer */
    uint64_t samples_perf, samples_posix, samples_wall, timer_changes;
    uint64_t offcpu_reports, offcpu_reports_in_mpi; /* the collector's off-CPU reports: placed, inside MPI */
} sample_thread_t;

static inline sample_thread_t *sample_of(const ps_thread_t *t) /* [signal-safe] */
{
    return ps_thread_state(t, PS_SRC_sample);
}
#endif
