/* MPI as a source (core/source.h): the PMPI wrappers, their call paths and statistics. */
#include "source.h"

static const char *const options[] = {"mpi", "poll_timing", "unwind", NULL};
static const ps_node_kind_t kinds[] = {{.kind = PS_NODE_MPI, .name = "mpi"}, {.kind = -1}};

const ps_source_t ps_source_mpi = {
    .name = "mpi",
    .options = options,
    .kinds = kinds,
};
