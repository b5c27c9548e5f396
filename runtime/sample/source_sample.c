/* Sampling as a source (core/source.h): the per-thread timers, samples and the sampler line. */
#include <string.h>

#include "source.h"
#include "sample.h"

static const char *const options[] = {"sample_rate", "sample_clock", "sample_timer", NULL};

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

const ps_source_t ps_source_sample = {
    .name = "sample",
    .options = options,
    .configure = sample_configure,
    .fork_child = ps_sample_forget_after_fork,
};
