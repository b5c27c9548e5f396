/* The live component as a source (core/source.h): it records nothing; it owns the control
 * channel and the live segment (control.c, publish.c) and starts, stops and cleans them up at
 * the process's start, its endings, exec and fork.  Registered last, so that every other
 * source is started before a request can reach it. */
#include <string.h>
#include <unistd.h>

#include "source.h"
#include "live.h"

static const char *const options[] = {"control", "live", NULL};

void ps_live_start(void);        /* control.c */
int ps_live_stop(void);
void ps_live_stop_signal(void);
void ps_live_fork_child(void);


static int stopped_for_exec;

/* The processes pathscope profiles: the one it was started for (each rank, under a launcher:
 * `pathscope run` and the environment form start every rank as a first process), not the
 * launcher, not a command the program or a script runs (a shell from system() inherits the
 * launcher's rank variables); a process that becomes a rank later starts in rank_start. */
static const char *live_start(const ps_start_t *st)
{
    if (st->first_process && !ps_process_is_launcher())
        ps_live_start();
    return NULL;
}

static void live_rank_start(void)
{
    if (!ps_process_is_launcher()) ps_live_start(); /* (nothing if it runs already) */
}

/* Every ending removes the files.  A fatal signal and a peer's request (the job is ending:
 * the launcher kills this process next, often with no handler run) only that and the stop
 * flag [signal-safe]; the others also stop the thread, before the rank file is written, so
 * no request runs meanwhile. */
static void live_end(ps_end_how how, ps_end_phase phase)
{
    if (phase != PS_END_BEGIN) return;
    if (how == PS_END_SIGNAL || how == PS_END_PEER) ps_live_stop_signal();
    else (void)ps_live_stop();
}

/* An exec keeps the pid and start time but not the thread: the files go first (the new
 * program's pathscope makes its own); a failed exec makes them again. */
static void live_before_exec(ps_thread_t *t)
{
    (void)t;
    stopped_for_exec = ps_live_stop(); /* (0 in a vfork child: the files are its parent's) */
}

static void live_exec_failed(ps_thread_t *t)
{
    (void)t;
    if (stopped_for_exec) ps_live_start();
    stopped_for_exec = 0;
}

const ps_source_t ps_source_live = {
    .name = "live",
    .options = options,
    .start = live_start,
    .rank_start = live_rank_start,
    .before_exec = live_before_exec,
    .exec_failed = live_exec_failed,
    .fork_child = ps_live_fork_child,
    .end = live_end,
};
