/* Sampling as a source (core/source.h): the per-thread timers, samples and the sampler line. */
#include "source.h"

static const char *const options[] = {"sample_rate", "sample_clock", "sample_timer", NULL};

void ps_sample_write(ps_fmt_t *f, ps_section sec, ps_thread_t *t);         /* sample_out.c */
void ps_sample_thread_cols(const ps_thread_t *t, ps_thread_cols_t *cols); /* sample_out.c */

const ps_source_t ps_source_sample = {
    .name = "sample",
    .options = options,
    .write = ps_sample_write,
    .thread_cols = ps_sample_thread_cols,
};
