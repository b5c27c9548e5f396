/* A thread's timeline (timeline.h): kept samples' weights and the closing of a thread. */
#include "cct.h"
#include "timeline.h"

uint64_t ps_time_mpi_within(ps_time_t *tm, uint64_t wall)
{
    uint64_t mpi = tm->mpi_ticks_since;
    /* (the total stays the measured sum, never decreasing: the probes take the MPI time
     * below a probed call from it, probe/enter.c) */
    tm->mpi_ticks_total += mpi;
    tm->mpi_ticks_since = 0;
    if (mpi > wall) {
        tm->mpi_ticks_excess += mpi - wall;
        mpi = wall;
    }
    return mpi;
}

void ps_time_charge(ps_time_t *tm, uint64_t now, uint64_t cpu_ns, uint64_t skipped_cpu_ns,
                    int offcpu_from_wall, uint64_t *on, uint64_t *off)
{
    double per_ns = ps_ticks_per_ns();
    uint64_t oncpu_ns = cpu_ns > tm->last_cpu_ns ? cpu_ns - tm->last_cpu_ns : 0;
    double span_cpu = (double)(oncpu_ns + skipped_cpu_ns) * per_ns;
    tm->last_cpu_ns = cpu_ns > tm->last_cpu_ns ? cpu_ns : tm->last_cpu_ns;
    /* since the previous kept sample: wall, MPI (never more than wall: the guard) */
    uint64_t wall_ticks = now > tm->last_ticks ? now - tm->last_ticks : 0;
    double wall = (double)wall_ticks;
    double mpi = (double)ps_time_mpi_within(tm, wall_ticks);
    double offcpu = wall > span_cpu && offcpu_from_wall ? (wall - span_cpu) * (wall - mpi) / wall : 0.0;
    *on = (uint64_t)((double)oncpu_ns * per_ns);
    *off = (uint64_t)offcpu;
    tm->oncpu_total += *on;
    tm->offcpu_total += *off;
    if (now > tm->last_ticks) tm->last_ticks = now;
}

/* The end of a thread's timeline (sample.c, "Weights"): its non-MPI time is exactly its
 * elapsed time minus its MPI time.  The on-CPU time sampled is an unbiased estimate of the
 * part of it spent on a CPU, and stays as it is unless it exceeds the non-MPI time (sampling
 * noise on a thread that hardly ever left the CPU): then it is scaled down to it.  The rest is
 * off-CPU time: it fills the off-CPU time seen at kept samples (scaled down if that saw more),
 * and what no sample saw -- the time after the last kept sample, blocked time that no later
 * sample showed -- goes to [not unwound].  So per thread, on-CPU + off-CPU + MPI time = elapsed
 * time exactly.  The scales are applied when the tree is written. */
void ps_thread_close(ps_thread_t *t, uint64_t now)
{
    if (!t || t->end_ticks) return;
    if (now < t->time.last_ticks) now = t->time.last_ticks; /* (a clock read on another CPU) */
    ps_time_mpi_within(&t->time, now - t->time.last_ticks);
    t->time.last_ticks = now;
    t->end_ticks = now;
    /* the nodes' MPI times (measured, so summing to mpi_ticks_total + mpi_ticks_excess) are
     * written scaled to the MPI time the guard kept */
    uint64_t measured = t->time.mpi_ticks_total, kept = measured - t->time.mpi_ticks_excess;
    t->time.mpi_scale = measured ? (double)kept / (double)measured : 1.0;
    uint64_t cpu = ps_thread_cpu_ns(t->tid); /* (0: the thread is gone) */
    t->end_cpu_ns = cpu > t->time.last_cpu_ns ? cpu : t->time.last_cpu_ns;
    uint64_t elapsed = now - t->start_ticks;
    uint64_t non_mpi = elapsed > kept ? elapsed - kept : 0;
    t->time.oncpu_scale = t->time.offcpu_scale = 1.0;
    if (t->time.oncpu_total > non_mpi) {
        t->time.oncpu_scale = (double)non_mpi / (double)t->time.oncpu_total;
        t->time.offcpu_scale = 0.0;
        return;
    }
    uint64_t offcpu = non_mpi - t->time.oncpu_total;
    if (t->time.offcpu_total >= offcpu) {
        if (t->time.offcpu_total) t->time.offcpu_scale = (double)offcpu / (double)t->time.offcpu_total;
        return;
    }
    t->nodes[t->not_unwound_node].offcpu_ticks += offcpu - t->time.offcpu_total;
    t->time.offcpu_total = offcpu;
}
