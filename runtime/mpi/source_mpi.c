/* MPI as a source (core/source.h): the PMPI wrappers, their call paths and statistics. */
#include <stdlib.h>

#include "source.h"
#include "../python/pyframes.h"
#include "mpi_internal.h"
#include "mpi_thread.h"

static const char *const options[] = {"mpi", "poll_timing", "unwind", "comm_keep", NULL};

void ps_mpi_write(ps_fmt_t *f, ps_section sec, ps_thread_t *t); /* mpi_out.c */
const char *ps_mpi_key_name(uintptr_t key, char buf[24]);        /* mpi_out.c */
void ps_mpi_summary(ps_rank_summary_t *s);                       /* mpi_out.c */

static const ps_node_kind_t kinds[] = {
    {.kind = PS_NODE_MPI, .name = "mpi", .key_name = ps_mpi_key_name}, {.kind = -1}};

/* PATHSCOPE_UNWIND's groups (read again at MPI_Init). */
static const char *mpi_configure(const ps_start_t *st)
{
    (void)st;
    ps_paths_configure();
    ps_comm_keep = atoi(ps_options.comm_keep);
    return NULL;
}

/* The per-communicator breakdown of the thread's MPI nodes (paths.c: ps_mpi_pcomm).  With
 * Python frames an MPI call has a path per Python line on the way to it: a test suite's
 * thousands of tests on hundreds of communicators need more (mapped without reserve: only the
 * entries used cost memory). */
#define PS_MAX_PCOMM (1u << 14)
#define PS_MAX_PCOMM_PYTHON (1u << 17)

static int mpi_thread_init(ps_thread_t *t, void *state)
{
    (void)t;
    mpi_thread_t *m = state;
    uint32_t cap = ps_py_on ? PS_MAX_PCOMM_PYTHON : PS_MAX_PCOMM;
    m->pcomm = ps_map_zeroed(sizeof(ps_pcomm_t) * cap);
    if (!m->pcomm) return -1;
    m->pcomm_mask = cap - 1;
    return 0;
}

/* After MPI_Finalize's rank file, the writer released: every rank merges its records into
 * profile.tsv (reduce.c, collectives on MPI_COMM_WORLD's duplicate). */
static void mpi_end(ps_end_how how, ps_end_phase phase)
{
    if (how == PS_END_FINALIZE && phase == PS_END_DONE) ps_reduce_and_write();
}

void ps_mpi_publish(ps_fmt_t *f); /* mpi_live.c */

const ps_source_t ps_source_mpi = {
    .name = "mpi",
    .options = options,
    .configure = mpi_configure,
    .thread_size = sizeof(mpi_thread_t),
    .thread_init = mpi_thread_init,
    .end = mpi_end,
    .write = ps_mpi_write,
    .publish = ps_mpi_publish,
    .kinds = kinds,
    .summary = ps_mpi_summary,
};
