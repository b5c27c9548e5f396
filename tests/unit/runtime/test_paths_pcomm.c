/* Unit tests of MPI's per-communicator table beside the call tree (mpi/paths.c:
 * ps_mpi_pcomm) on a thread state made here, small enough to fill: entries found again,
 * distinct per (node, communicator), and the table full once three quarters are used; the
 * removal folding uses (ps_mpi_pcomm_remove) keeps every other entry findable.
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
    int added = 0;
    ps_pcomm_t *a = ps_mpi_pcomm(m, 3, 1, &added);
    CHECK(a != NULL);
    CHECK_INT(added, 1);
    added = 0;
    CHECK(ps_mpi_pcomm(m, 3, 1, &added) == a);
    CHECK_INT(added, 0);
    ps_pcomm_t *b = ps_mpi_pcomm(m, 3, 2, NULL), *c = ps_mpi_pcomm(m, 4, 1, NULL);
    CHECK(b != NULL && b != a);
    CHECK(c != NULL && c != a && c != b);
    CHECK_INT(m->npcomm, 3);
    CHECK(ps_mpi_pcomm(m, 5, 1, NULL) == NULL);
    CHECK(ps_mpi_pcomm(m, 4, 1, NULL) == c); /* the ones in the table are still found */
    CHECK_INT(a->node, 3);
    CHECK_INT(a->comm, 1);
    CHECK_INT(b->comm, 2);
    CHECK_INT(c->node, 4);
}

/* Many entries in a small table (32 slots, 21 usable), so that probe chains cross each other and wrap: removing
 * any of them leaves the others found with their values, and frees its place. */
static void test_pcomm_remove(void)
{
    for (uint32_t gone = 0; gone < 12; gone++) {
        mpi_thread_t *m = new_state(32);
        for (uint32_t k = 0; k < 12; k++) {
            ps_pcomm_t *p = ps_mpi_pcomm(m, 1 + k % 3, (int)k, NULL);
            CHECK(p != NULL);
            if (p) p->calls = 100 + k;
        }
        ps_pcomm_t *p = ps_mpi_pcomm_find(m, 1 + gone % 3, (int)gone);
        CHECK(p != NULL);
        if (!p) continue;
        ps_mpi_pcomm_remove(m, p);
        CHECK_INT(m->npcomm, 11);
        CHECK(ps_mpi_pcomm_find(m, 1 + gone % 3, (int)gone) == NULL);
        for (uint32_t k = 0; k < 12; k++) {
            if (k == gone) continue;
            ps_pcomm_t *q = ps_mpi_pcomm_find(m, 1 + k % 3, (int)k);
            CHECK(q != NULL);
            if (q) CHECK_INT(q->calls, 100 + k);
        }
        CHECK(ps_mpi_pcomm(m, 9, 99, NULL) != NULL); /* the place is free again */
        free(m->pcomm);
        free(m);
    }
}

int main(void)
{
    test_pcomm();
    test_pcomm_remove();
    if (failures) fprintf(stderr, "test_paths_pcomm: %d failures\n", failures);
    return failures != 0;
}
