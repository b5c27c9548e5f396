/* Sampling as a source (core/source.h): the per-thread timers, samples and the sampler line. */
#include <string.h>

#include "source.h"
#include "sample.h"
#include "sample_thread.h"

static const char *const options[] = {"sample_rate", "sample_clock", "sample_timer", NULL};

void ps_sample_write(ps_fmt_t *f, ps_section sec, ps_thread_t *t);         /* sample_out.c */
void ps_sample_thread_cols(const ps_thread_t *t, ps_thread_cols_t *cols); /* sample_out.c */

/* The options that cannot go together, then (call paths on) the sampler's set-up. */
static const char *sample_configure(const ps_start_t *st)
{
    (void)st;
    if (strcmp(ps_options.sample_timer, "perf") == 0 && strcmp(ps_options.sample_clock, "wall") == 0)
        return "PATHSCOPE_SAMPLE_TIMER=perf samples CPU time: it cannot be combined with "
               "PATHSCOPE_SAMPLE_CLOCK=wall (wall time is sampled by a POSIX timer)";
    if (ps_paths_on) ps_sample_init();
    return NULL;
}

/* A registered thread samples from now on; at its end it stops. */
static void sample_thread_start(ps_thread_t *t, void *state)
{
    (void)state;
    ps_sample_thread_start(t);
}

static void sample_thread_exit(ps_thread_t *t, void *state)
{
    (void)state;
    ps_sample_thread_stop(t);
}

/* Exec (core/threads.c): the calling thread's sampler stops and SIGPROF is ignored for a
 * moment, which discards a pending one; if the exec fails, both come back.  t: the calling
 * thread, NULL if never registered. */
static struct sigaction exec_saved_action;
static int exec_ignoring; /* before_exec set SIG_IGN */

static void sample_before_exec(ps_thread_t *t)
{
    /* (a vfork child shares our memory: our samplers are not its to stop; a SIGPROF that the
     * application owns is left alone) */
    if (!ps_sample_rate || !ps_sample_in_own_process() || !ps_sigprof_ours_flag()) return;
    if (t) ps_sample_thread_stop(t);
    struct sigaction ignore;
    memset(&ignore, 0, sizeof ignore);
    ignore.sa_handler = SIG_IGN;
    exec_ignoring = ps_sigprof_real_sigaction(PS_SAMPLE_SIGNAL, &ignore, &exec_saved_action) == 0;
}

static void sample_exec_failed(ps_thread_t *t)
{
    if (exec_ignoring) {
        exec_ignoring = 0;
        ps_sigprof_real_sigaction(PS_SAMPLE_SIGNAL, &exec_saved_action, NULL);
        if (t && !t->end_ticks) ps_sample_thread_start(t);
    }
}

/* A normal end (not Abort, a signal or a peer's request): closing samples, then the samplers
 * stop (ps_threads_close_all waits at most 50 ms). */
static void sample_end(ps_end_how how, ps_end_phase phase)
{
    if (phase == PS_END_BEGIN &&
        (how == PS_END_FINALIZE || how == PS_END_EXIT || how == PS_END_EXIT_NOMPI))
        ps_threads_close_all();
}

void ps_sample_publish(ps_fmt_t *f); /* sample_live.c */

const ps_source_t ps_source_sample = {
    .name = "sample",
    .options = options,
    .configure = sample_configure,
    .thread_size = sizeof(sample_thread_t),
    .thread_start = sample_thread_start,
    .thread_exit = sample_thread_exit,
    .before_exec = sample_before_exec,
    .exec_failed = sample_exec_failed,
    .fork_child = ps_sample_forget_after_fork,
    .end = sample_end,
    .write = ps_sample_write,
    .publish = ps_sample_publish,
    .thread_cols = ps_sample_thread_cols,
};
