/* MPI's per-thread state (core/source.h: thread_size), mapped with the thread and reached by
 * its slot: by the thread's wrappers (paths.c: ps_path_record), by its samples inside untimed
 * MPI calls, and at the end by the counted calls' completion and the rank-file writer. */
#ifndef PS_MPI_THREAD_H
#define PS_MPI_THREAD_H
#include <stdint.h>
#include "source.h"

#define PS_OP_NODE_CACHE 1024 /* operations with a cached [not unwound] node */

typedef struct {              /* one (MPI node, communicator) of the thread's tree */
    uint32_t node;            /* 0 = empty slot */
    int32_t comm;
    uint64_t calls, ticks, bytes;
} ps_pcomm_t;

typedef struct {
    ps_pcomm_t *pcomm;        /* per-communicator breakdown of the MPI nodes (open addressing,
                               * mapped at the thread's registration: source_mpi.c) */
    uint32_t pcomm_mask, npcomm;
    uint32_t op_node[PS_OP_NODE_CACHE]; /* [not unwound] -> operation nodes, by op number */
} mpi_thread_t;

static inline mpi_thread_t *mpi_of(const ps_thread_t *t) /* [signal-safe] */
{
    return ps_thread_state(t, PS_SRC_mpi);
}

/* The entry of (node, comm) in the thread's table, added if new (*added set, if given); NULL
 * if full (paths.c).  [signal-safe] */
ps_pcomm_t *ps_mpi_pcomm(mpi_thread_t *m, uint32_t node, int comm, int *added);
/* The entry of (node, comm), or NULL; and its removal (fold.c moves a freed communicator's
 * entries to its row). */
ps_pcomm_t *ps_mpi_pcomm_find(mpi_thread_t *m, uint32_t node, int comm);
void ps_mpi_pcomm_remove(mpi_thread_t *m, ps_pcomm_t *p);
#endif
