/* Sampling as a source (core/source.h): the per-thread timers, samples and the sampler line. */
#include "source.h"

static const char *const options[] = {"sample_rate", "sample_clock", "sample_timer", NULL};

const ps_source_t ps_source_sample = {
    .name = "sample",
    .options = options,
};
