/* The sampler's part of the rank file (docs/format.md, "Call paths"): the `sampler` line and
 * the thread line's sample counts.  Reached from the rank-file writer through the descriptor
 * (source_sample.c), which may run in a fatal-signal handler: [signal-safe], no malloc. */
#include <string.h>

#include "source.h"
#include "sample.h"
#include "sample_thread.h"


static void write_sampler(ps_fmt_t *f)
{
    int nthreads = ps_write_nthreads();
    ps_fmt_str(f, "sampler\t");
    ps_fmt_str(f, ps_sample_source); ps_fmt_tab(f);
    ps_fmt_u64(f, (uint64_t)ps_sample_rate); ps_fmt_tab(f);
    ps_fmt_str(f, strcmp(ps_options.sample_clock, "wall") == 0 ? "wall" : "cpu");
    /* (2.4) the timer signals taken from perf events, POSIX CPU-time timers and wall-clock
     * timers, and how often a thread changed timers (auto) */
    uint64_t by_perf = 0, by_posix = 0, by_wall = 0, changes = 0, off_reports = 0, off_in_mpi = 0;
    for (int i = 0; i < nthreads; i++)
        if (ps_threads[i]) {
            const sample_thread_t *st = sample_of(ps_threads[i]);
            by_perf += st->samples_perf;
            by_posix += st->samples_posix;
            by_wall += st->samples_wall;
            changes += st->timer_changes;
            off_reports += st->offcpu_reports;
            off_in_mpi += st->offcpu_reports_in_mpi;
        }
    ps_fmt_tab(f); ps_fmt_u64(f, by_perf);
    ps_fmt_tab(f); ps_fmt_u64(f, by_posix);
    ps_fmt_tab(f); ps_fmt_u64(f, by_wall);
    ps_fmt_tab(f); ps_fmt_u64(f, changes);
    /* (2.5) where off-CPU time comes from: the wall-clock evidence at samples, or the kernel
     * collector's scheduler events; the collector's reports placed and those inside MPI */
    ps_fmt_tab(f); ps_fmt_str(f, ps_offcpu_reported ? "scheduler" : "samples");
    ps_fmt_tab(f); ps_fmt_u64(f, off_reports);
    ps_fmt_tab(f); ps_fmt_u64(f, off_in_mpi);
    ps_fmt_char(f, '\n');
}

void ps_sample_write(ps_fmt_t *f, ps_section sec, ps_thread_t *t)
{
    (void)t;
    if (sec == PS_SEC_HEAD) write_sampler(f);
}

void ps_sample_thread_cols(const ps_thread_t *t, ps_thread_cols_t *cols)
{
    const sample_thread_t *st = sample_of(t);
    cols->samples_kept = st->samples_kept;
    cols->samples_in_mpi = st->samples_in_mpi;
    cols->samples_other = st->samples_other;
}
