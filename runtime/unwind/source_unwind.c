/* The unwinder as a source (core/source.h): a component without records of its own; it owns the
 * per-thread walk state and the traversal/walks lines. */
#include "source.h"

static const char *const options[] = {"traversal", "traversal_check", NULL};

void ps_unwind_write(ps_fmt_t *f, ps_section sec, ps_thread_t *t);         /* unwind_out.c */
void ps_unwind_thread_cols(const ps_thread_t *t, ps_thread_cols_t *cols); /* unwind_out.c */

const ps_source_t ps_source_unwind = {
    .name = "unwind",
    .options = options,
    .write = ps_unwind_write,
    .thread_cols = ps_unwind_thread_cols,
};
