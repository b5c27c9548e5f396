/* A thread's timeline: the hybrid accounting of its elapsed time (sample.c: "Weights").
 *
 * Shared by three parts, so owned by core: MPI adds the time its wrappers measure, samples
 * charge their on-CPU weight and the off-CPU time seen since the previous kept sample, and
 * ps_thread_close (timeline.c) closes the timeline so that on-CPU + off-CPU + MPI time equals
 * the elapsed time exactly.  Wall time is in ticks (ps_now), CPU time in ns.  Everything here
 * is [signal-safe]: it touches only the thread's own fields.
 */
#ifndef PS_TIMELINE_H
#define PS_TIMELINE_H
#include <stdint.h>

typedef struct {
    uint64_t last_ticks;       /* wall clock at the previous kept sample, or the thread's start */
    uint64_t mpi_ticks_since;  /* MPI time measured since then */
    uint64_t mpi_ticks_total;  /* MPI time measured before then (as measured) */
    uint64_t last_cpu_ns;      /* the thread's CPU clock at the previous sample of any kind */
    uint64_t mpi_ticks_excess; /* the part of mpi_ticks_total measured beyond the wall time it
                                * fell in, left out of the timeline (the guard) */
    uint64_t oncpu_total, offcpu_total; /* ticks given to nodes (before the closing scales) */
    double oncpu_scale, offcpu_scale;   /* set by ps_thread_close: the node values written are
                                         * sample_ticks * oncpu_scale + offcpu_ticks * offcpu_scale */
    double mpi_scale;          /* ... and mpi_ticks * mpi_scale: 1 unless the guard cut MPI time */
} ps_time_t;

/* The thread starts (registration) at wall clock now, CPU clock cpu_ns; or, registered late,
 * its start moves back to now. */
static inline void ps_time_start(ps_time_t *tm, uint64_t now, uint64_t cpu_ns)
{
    tm->last_ticks = now;
    tm->last_cpu_ns = cpu_ns;
}
static inline void ps_time_backdate(ps_time_t *tm, uint64_t now) { tm->last_ticks = now; }

/* MPI time measured by a wrapper (mpi/paths.c). */
static inline void ps_time_mpi(ps_time_t *tm, uint64_t dt) { tm->mpi_ticks_since += dt; }

/* The room a poll's estimate may fill at t1: the wall time since the previous kept sample not
 * already taken by measured MPI time (may be negative). */
static inline int64_t ps_time_poll_room(const ps_time_t *tm, uint64_t t1)
{
    return (int64_t)(t1 - tm->last_ticks) - (int64_t)tm->mpi_ticks_since;
}

/* A sample that is not kept: the CPU time since the previous sample (0 if the clock did not
 * advance), which the clock moves past. */
static inline uint64_t ps_time_cpu_skip(ps_time_t *tm, uint64_t cpu_ns)
{
    if (cpu_ns <= tm->last_cpu_ns) return 0;
    uint64_t d = cpu_ns - tm->last_cpu_ns;
    tm->last_cpu_ns = cpu_ns;
    return d;
}

/* A kept sample at wall clock now, CPU clock cpu_ns, after skipped_cpu_ns of dropped
 * samples' CPU time: its on-CPU weight and (offcpu_from_wall: no collector reports) the
 * off-CPU time seen since the previous kept sample, both in ticks; the timeline moves to
 * now. */
void ps_time_charge(ps_time_t *tm, uint64_t now, uint64_t cpu_ns, uint64_t skipped_cpu_ns,
                    int offcpu_from_wall, uint64_t *on, uint64_t *off);

/* The MPI time measured since the previous kept sample, at most the wall time since then
 * (wall: now - last_ticks, 0 if the clock went back): what goes beyond it is an error of
 * measurement (a call timed across a kept sample, a clock read on another CPU) and is kept
 * in mpi_ticks_excess instead, so that a thread's MPI time never exceeds its elapsed time. */
uint64_t ps_time_mpi_within(ps_time_t *tm, uint64_t wall);

/* Off-CPU time placed on a node by a collector report. */
static inline void ps_time_offcpu(ps_time_t *tm, uint64_t ticks) { tm->offcpu_total += ticks; }
#endif
