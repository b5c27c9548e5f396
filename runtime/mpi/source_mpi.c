/* MPI as a source (core/source.h): the PMPI wrappers, their call paths and statistics. */
#include "source.h"
#include "mpi_internal.h"

static const char *const options[] = {"mpi", "poll_timing", "unwind", NULL};
static const ps_node_kind_t kinds[] = {{.kind = PS_NODE_MPI, .name = "mpi"}, {.kind = -1}};

/* PATHSCOPE_UNWIND's groups (read again at MPI_Init). */
static const char *mpi_configure(const ps_start_t *st)
{
    (void)st;
    ps_paths_configure();
    return NULL;
}

const ps_source_t ps_source_mpi = {
    .name = "mpi",
    .options = options,
    .configure = mpi_configure,
    .kinds = kinds,
};
