/* Unit tests of MPI's per-communicator table beside the call tree (mpi/paths.c:
 * ps_mpi_pcomm) on a thread state made here, small enough to fill: entries found again,
 * distinct per (node, communicator), and the table full once three quarters are used.
 * (Not an MPI program: no test_mpi_ prefix, no mpirun.)
 */
#include <stdint.h>
#include <stdlib.h>

#include "mpi_thread.h"
#include "check.h"

static mpi_thread_t *new_state(uint32_t slots)
{
    mpi_thread_t *m = calloc(1, sizeof *m);
    if (!m) abort();
    m->pcomm = calloc(slots, sizeof *m->pcomm);
    m->pcomm_mask = slots - 1;
    if (!m->pcomm) abort();
    return m;
}

static void test_pcomm(void)
{
    mpi_thread_t *m = new_state(8);
    /* 8 slots, at most 7 / 4 x 3 = 3 used (a quarter kept free for probing) */
    ps_pcomm_t *a = ps_mpi_pcomm(m, 3, 1);
    CHECK(a != NULL);
    CHECK(ps_mpi_pcomm(m, 3, 1) == a);
    ps_pcomm_t *b = ps_mpi_pcomm(m, 3, 2), *c = ps_mpi_pcomm(m, 4, 1);
    CHECK(b != NULL && b != a);
    CHECK(c != NULL && c != a && c != b);
    CHECK_INT(m->npcomm, 3);
    CHECK(ps_mpi_pcomm(m, 5, 1) == NULL);
    CHECK(ps_mpi_pcomm(m, 4, 1) == c); /* the ones in the table are still found */
    CHECK_INT(a->node, 3);
    CHECK_INT(a->comm, 1);
    CHECK_INT(b->comm, 2);
    CHECK_INT(c->node, 4);
}

int main(void)
{
    test_pcomm();
    if (failures) fprintf(stderr, "test_paths_pcomm: %d failures\n", failures);
    return failures != 0;
}
