/* The unwinder as a source (core/source.h): a component without records of its own; it owns the
 * per-thread walk state and the traversal/walks lines. */
#include "source.h"

static const char *const options[] = {"traversal", "traversal_check", NULL};

const ps_source_t ps_source_unwind = {
    .name = "unwind",
    .options = options,
};
