/* MPI as a source (core/source.h): the PMPI wrappers, their call paths and statistics. */
#include "source.h"

static const char *const options[] = {"mpi", "poll_timing", "unwind", NULL};

void ps_mpi_write(ps_fmt_t *f, ps_section sec, ps_thread_t *t); /* mpi_out.c */
const char *ps_mpi_key_name(uintptr_t key, char buf[24]);        /* mpi_out.c */
void ps_mpi_summary(ps_rank_summary_t *s);                       /* mpi_out.c */

static const ps_node_kind_t kinds[] = {
    {.kind = PS_NODE_MPI, .name = "mpi", .key_name = ps_mpi_key_name}, {.kind = -1}};

const ps_source_t ps_source_mpi = {
    .name = "mpi",
    .options = options,
    .write = ps_mpi_write,
    .kinds = kinds,
    .summary = ps_mpi_summary,
};
