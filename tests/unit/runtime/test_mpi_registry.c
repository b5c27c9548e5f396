/* Unit tests of the MPI source's communicator registry and naming (mpi: ps_registry_init,
 * ps_comm_lookup/forget, the window/file and request tables, ps_record; ps_on_comm_create &
 * co. and the mpisee names, docs/format.md "Communicator names").  Runs on 3 ranks (ctest
 * starts it with mpirun -np 3).  The program makes its communicators with PMPI_* (the
 * runtime's MPI_* wrappers are linked in but never called), then calls the runtime's hooks as
 * the wrappers would, with the expected names derived by hand below.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mpi_internal.h"

static int rank;

static const char *name_of(MPI_Comm comm) { return ps_comms[ps_comm_lookup(comm)]->name; }

static void test_init_and_lookup(void)
{
    char self[16];
    snprintf(self, sizeof self, "S.%d", rank);
    ps_registry_init();
    /* ids: 0 "-" (no communicator), 1 W, 2 S.<rank>; W counted (1), SELF not */
    CHECK_INT(ps_ncomms, 3);
    CHECK_STR(ps_comms[0]->name, "-");
    CHECK_INT(ps_comm_lookup(MPI_COMM_WORLD), 1);
    CHECK_INT(ps_comm_lookup(MPI_COMM_SELF), 2);
    CHECK_INT(ps_comm_lookup(MPI_COMM_NULL), PS_COMM_NONE);
    CHECK_STR(ps_comms[1]->name, "W");
    CHECK_STR(ps_comms[2]->name, self);
    CHECK_INT(ps_comm_counter, 1);
    ps_comm_t *w = ps_comms[1];
    CHECK_INT(w->size, 3);
    CHECK_INT(w->my_rank, rank);
    CHECK_INT(w->is_inter, 0);
    CHECK_INT(w->parent_id, -1);
    CHECK(w->members && w->members[0] == 0 && w->members[1] == 1 && w->members[2] == 2);
    CHECK_INT(ps_comms[2]->size, 1);
    CHECK(ps_comms[2]->members && ps_comms[2]->members[0] == rank);

    /* a communicator made behind our back: registered at its first use as "?<rank>.<k>" (k:
     * the rank's unknown communicators so far), counted once; the same id on the next lookup */
    MPI_Comm hidden;
    PMPI_Comm_dup(MPI_COMM_WORLD, &hidden);
    char want[16];
    snprintf(want, sizeof want, "?%d.0", rank);
    CHECK_INT(ps_comm_lookup(hidden), 3);
    CHECK_INT(ps_comm_lookup(hidden), 3);
    CHECK_STR(ps_comms[3]->name, want);
    CHECK_INT(ps_counters.unknown_comms, 1);
    CHECK_INT(ps_comm_counter, 1); /* (not one it saw created: not counted) */
    /* freed: it folds (fold.c) into the row "?<rank>.*", made in a new slot (4), and its own
     * slot is free for the next communicator; rank 0, its lowest member, counts it */
    ps_comm_forget(hidden);
    CHECK_INT(ps_ncomms, 5);
    CHECK_INT(ps_comms[3]->state, PS_SLOT_FREE);
    ps_comm_t *row = ps_comms[4];
    snprintf(want, sizeof want, "?%d.*", rank);
    CHECK_STR(row->name, want);
    CHECK_INT(row->state, PS_SLOT_ROW);
    CHECK_INT(row->freed, 1);
    CHECK_INT(row->memberships, 1);
    CHECK_INT(row->folded, rank == 0);
    CHECK_INT(row->size, 3);
    PMPI_Comm_free(&hidden);
}

static void test_names(void)
{
    /* Comm_split of W by rank parity: {0, 2} and {1}.  Every rank counts 1 communicator (W),
     * so M = 1; multi: L = the lowest W rank among the members -> W_s1.0 on ranks 0 and 2,
     * W_s1.1 on rank 1.  Counts after: 2 everywhere. */
    MPI_Comm half;
    PMPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    ps_on_comm_create(PS_OP_MPI_Comm_split, 0, MPI_COMM_WORLD, half, 's', 1, 1, NULL);
    CHECK_STR(name_of(half), rank % 2 ? "W_s1.1" : "W_s1.0");
    CHECK_INT(ps_comm_lookup(half), 3); /* the slot the unknown one left */
    CHECK_INT(ps_comm_counter, 2);
    ps_comm_t *h = ps_comms[ps_comm_lookup(half)];
    CHECK_INT(h->parent_id, 1);
    CHECK_INT(h->creator_op, PS_OP_MPI_Comm_split);
    CHECK_INT(h->size, rank % 2 ? 1 : 2);
    CHECK_STR(h->topo, "");
    CHECK_INT(ps_comms[1]->creations, 1);

    /* a dup of the even half only (ranks 0 and 2: M over {0, 2} = 2, no L): W_s1.0_d2;
     * their counts become 3, rank 1's stays 2 */
    MPI_Comm even_dup = MPI_COMM_NULL;
    if (rank % 2 == 0) {
        PMPI_Comm_dup(half, &even_dup);
        ps_on_comm_create(PS_OP_MPI_Comm_dup, 0, half, even_dup, 'd', 0, 1, NULL);
        CHECK_STR(name_of(even_dup), "W_s1.0_d2");
        CHECK_INT(ps_comm_counter, 3);
    }
    /* a dup of W: M = the largest count over W = 3 (ranks 0 and 2), the same name on all */
    MPI_Comm wdup;
    PMPI_Comm_dup(MPI_COMM_WORLD, &wdup);
    ps_on_comm_create(PS_OP_MPI_Comm_dup, 0, MPI_COMM_WORLD, wdup, 'd', 0, 1, NULL);
    CHECK_STR(name_of(wdup), "W_d3");
    CHECK_INT(ps_comm_counter, rank % 2 ? 3 : 4);

    /* Comm_create_group of {1, 2} (collective over the group only): M over the new
     * communicator = max(3 on rank 1, 4 on rank 2) = 4; L = its lowest rank in W = 1 */
    MPI_Group wg, g12;
    int r12[] = {1, 2};
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    PMPI_Group_incl(wg, 2, r12, &g12);
    if (rank != 0) {
        MPI_Comm cg;
        PMPI_Comm_create_group(MPI_COMM_WORLD, g12, 7, &cg);
        ps_on_comm_create(PS_OP_MPI_Comm_create_group, 0, MPI_COMM_WORLD, cg, 'g', 1, 0, NULL);
        CHECK_STR(name_of(cg), "W_g4.1");
        PMPI_Comm_free(&cg);
    }
    /* Comm_create over W where rank 0 gets MPI_COMM_NULL: it takes part in M (over W: 5 on
     * rank 2) and registers nothing; ranks 1, 2 name theirs W_c5.1 */
    MPI_Comm cc;
    int before = ps_ncomms;
    PMPI_Comm_create(MPI_COMM_WORLD, g12, &cc);
    ps_on_comm_create(PS_OP_MPI_Comm_create, 0, MPI_COMM_WORLD, cc, 'c', 1, 1, NULL);
    if (rank == 0) {
        CHECK(cc == MPI_COMM_NULL);
        CHECK_INT(ps_ncomms, before);
    } else {
        CHECK_STR(name_of(cc), "W_c5.1");
        PMPI_Comm_free(&cc);
    }
    PMPI_Group_free(&g12);
    PMPI_Group_free(&wg);
    /* counts now: rank 0: 4, rank 1: 5, rank 2: 6 */
    CHECK_INT(ps_comm_counter, rank == 0 ? 4 : rank == 1 ? 5 : 6);

    /* Cart_create 3x1 of W, periodic in the first dimension: M = 6, the topology recorded */
    MPI_Comm cart;
    int dims[] = {3, 1}, periods[] = {1, 0};
    PMPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
    ps_on_cart_create(PS_OP_MPI_Cart_create, 0, MPI_COMM_WORLD, 2, dims, periods, 0, cart);
    CHECK_STR(name_of(cart), "W_a6");
    CHECK_STR(ps_comms[ps_comm_lookup(cart)]->topo, "cart ndims=2 dims=3x1 periods=1,0 reorder=0");
    PMPI_Comm_free(&cart);
    /* counts: 5, 6, 7 */

    /* Intercomm_create between the halves ({0, 2} and {1}), leaders their rank 0, peer W:
     * named after the peer communicator W; M over both groups = 7; L = the lowest W rank of
     * either group = 0 -> W_n7.0 on every rank, parent W */
    MPI_Comm inter;
    PMPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 99, &inter);
    ps_on_intercomm_create(PS_OP_MPI_Intercomm_create, 0, half, 0, MPI_COMM_WORLD, inter);
    CHECK_STR(name_of(inter), "W_n7.0");
    ps_comm_t *ic = ps_comms[ps_comm_lookup(inter)];
    CHECK_INT(ic->parent_id, 1);
    CHECK_INT(ic->is_inter, 1);
    CHECK_INT(ic->size, rank % 2 ? 1 : 2);
    CHECK_INT(ic->remote_size, rank % 2 ? 2 : 1);
    PMPI_Comm_free(&inter);

    if (even_dup != MPI_COMM_NULL) PMPI_Comm_free(&even_dup);
    PMPI_Comm_free(&wdup);
    PMPI_Comm_free(&half);
}

/* Handles the runtime never dereferences: windows and files are only keys. */
#define FAKE_WIN(v) ((MPI_Win)(uintptr_t)(v))

static void test_handle_maps(void)
{
    /* 60,000 windows (below the map's limit of half its 131,072 slots), every other one
     * forgotten: the backward-shift deletion keeps every remaining key reachable */
    enum { N = 60000 };
    for (int i = 0; i < N; i++) ps_win_register(FAKE_WIN(0x10000 + 16 * (uintptr_t)i), 1 + i % 5);
    for (int i = 0; i < N; i += 2) ps_win_forget(FAKE_WIN(0x10000 + 16 * (uintptr_t)i));
    int wrong = 0;
    for (int i = 0; i < N; i++) {
        int want = i % 2 ? 1 + i % 5 : PS_COMM_NONE;
        if (ps_win_lookup(FAKE_WIN(0x10000 + 16 * (uintptr_t)i)) != want) wrong++;
    }
    CHECK_INT(wrong, 0);
    for (int i = 1; i < N; i += 2) ps_win_forget(FAKE_WIN(0x10000 + 16 * (uintptr_t)i));
    CHECK_INT(ps_win_lookup(FAKE_WIN(0x10010)), PS_COMM_NONE);
    /* re-registering a key updates it */
    ps_win_register(FAKE_WIN(0x99), 2);
    ps_win_register(FAKE_WIN(0x99), 1);
    CHECK_INT(ps_win_lookup(FAKE_WIN(0x99)), 1);
    ps_win_forget(FAKE_WIN(0x99));
}

#define FAKE_REQ(v) ((MPI_Request)(uintptr_t)(v))

static void test_requests(void)
{
    uint64_t gen = ps_req_generation;
    ps_req_add(FAKE_REQ(0x500), 1, PS_OP_MPI_Ibcast, PS_REQ_COLL, 40, NULL);
    CHECK_INT(ps_req_generation, gen + 1);
    ps_req_t *r = ps_req_find(FAKE_REQ(0x500));
    CHECK(r != NULL);
    if (r) {
        CHECK_INT(r->comm_id, 1);
        CHECK_INT(r->op, PS_OP_MPI_Ibcast);
        CHECK_INT(r->kind, PS_REQ_COLL);
        CHECK_INT(r->bytes, 40);
        CHECK_INT(r->refs, 1);
    }
    /* the same handle again (a library's shared handle for operations complete at once):
     * one entry, two references; each removal drops one */
    ps_req_add(FAKE_REQ(0x500), 2, PS_OP_MPI_Ibarrier, PS_REQ_OTHER, 0, NULL);
    r = ps_req_find(FAKE_REQ(0x500));
    CHECK(r && r->refs == 2 && r->comm_id == 1);
    ps_req_remove(FAKE_REQ(0x500));
    CHECK(ps_req_find(FAKE_REQ(0x500)) != NULL);
    ps_req_remove(FAKE_REQ(0x500));
    CHECK(ps_req_find(FAKE_REQ(0x500)) == NULL);
    CHECK_INT(ps_req_generation, gen + 4);
    /* MPI_REQUEST_NULL is never tracked; p2p requests keep their peerless flags */
    ps_req_add(MPI_REQUEST_NULL, 1, PS_OP_MPI_Ibcast, PS_REQ_COLL, 0, NULL);
    CHECK_INT(ps_req_generation, gen + 4);
    ps_req_add_p2p(FAKE_REQ(0x600), 1, PS_OP_MPI_Isend, PS_REQ_SEND, 0, PS_REQ_NO_SEND);
    r = ps_req_find(FAKE_REQ(0x600));
    CHECK(r && r->peerless == PS_REQ_NO_SEND && r->kind == PS_REQ_SEND);
    ps_req_remove(FAKE_REQ(0x600));
    CHECK(ps_req_find(FAKE_REQ(0x600)) == NULL);
}

static void test_record(void)
{
    /* two calls on W: 100 bytes (histogram bin 7: [64, 128)) and 0 bytes (bin 0); a third
     * whose bytes are not counted (count_bytes 0) */
    ps_record(1, PS_OP_MPI_Send, 5, 100, 1);
    ps_record(1, PS_OP_MPI_Send, 7, 0, 1);
    ps_record(1, PS_OP_MPI_Send, 11, 999, 0);
    ps_stat_t *s = ps_comms[1]->ops[PS_OP_MPI_Send];
    CHECK(s != NULL);
    if (s) {
        CHECK_INT(s->calls, 3);
        CHECK_INT(s->ticks, 23);
        CHECK_INT(s->bytes, 100);
        CHECK_INT(s->hist[7], 1);
        CHECK_INT(s->hist[0], 1);
        uint64_t total = 0;
        for (int b = 0; b < PS_HIST_BINS; b++) total += s->hist[b];
        CHECK_INT(total, 2);
    }
    /* paused (MPI_Pcontrol(0)): nothing */
    ps_paused = 1;
    ps_record(1, PS_OP_MPI_Send, 5, 100, 1);
    ps_paused = 0;
    CHECK_INT(s ? s->calls : 0, 3);
}

static int find(const char *name)
{
    for (int i = 0; i < ps_ncomms; i++)
        if (ps_comms[i]->state != PS_SLOT_FREE && strcmp(ps_comms[i]->name, name) == 0) return i;
    return -1;
}

/* A dup of W and a split of it by rank / 2 ({0, 1} and {2}), freed in both orders (fold.c,
 * with every freed communicator folding): the same two rows either way, the split's below
 * the dup's, named after it (round 1: the child's row "W_d<M>_s*.L" is renamed and merged
 * when its parent folds); a record a request still names folds only once the request is
 * gone (round 2); calls move with the records. */
static void test_fold(void)
{
    ps_comm_keep = 0;
    const char *sub_row = rank < 2 ? "W_d*_s*.0" : "W_d*_s*.2";
    for (int round = 0; round < 3; round++) {
        MPI_Comm dup, sub;
        PMPI_Comm_dup(MPI_COMM_WORLD, &dup);
        ps_on_comm_create(PS_OP_MPI_Comm_dup, 0, MPI_COMM_WORLD, dup, 'd', 0, 1, NULL);
        PMPI_Comm_split(dup, rank / 2, rank, &sub);
        ps_on_comm_create(PS_OP_MPI_Comm_split, 0, dup, sub, 's', 1, 1, NULL);
        ps_record(ps_comm_lookup(sub), PS_OP_MPI_Barrier, 10, 0, 0);
        if (round == 0) { /* the parent first: the child moves below its row */
            ps_comm_forget(dup);
            CHECK_INT(ps_comms[ps_comm_lookup(sub)]->parent_id, find("W_d*"));
            ps_comm_forget(sub);
        } else if (round == 1) { /* the child first: its row follows the parent's */
            ps_comm_forget(sub);
            char live_row[PS_NAME_MAX];
            snprintf(live_row, sizeof live_row, "%s_s*.%d", name_of(dup), rank < 2 ? 0 : 2);
            CHECK(find(live_row) >= 0);
            ps_comm_forget(dup);
            CHECK(find(live_row) < 0);
        } else {
            ps_req_add(FAKE_REQ(0x777), ps_comm_lookup(sub), PS_OP_MPI_Ibarrier, PS_REQ_COLL,
                       0, NULL);
            int id = ps_comm_lookup(sub);
            ps_comm_forget(sub);
            CHECK_INT(ps_comms[id]->state, PS_SLOT_COMM); /* the request names it */
            ps_lock();
            ps_req_remove(FAKE_REQ(0x777));
            ps_unlock();
            ps_comm_forget(dup); /* a registration or MPI_Finalize folds the child */
            ps_fold_all();
            CHECK_INT(ps_comms[id]->state, PS_SLOT_FREE);
        }
        PMPI_Comm_free(&sub);
        PMPI_Comm_free(&dup);
    }
    int d = find("W_d*"), s = find(sub_row);
    CHECK(d >= 0 && s >= 0);
    if (d < 0 || s < 0) return;
    CHECK_INT(ps_comms[d]->memberships, 3);
    CHECK_INT(ps_comms[d]->folded, rank == 0 ? 3 : 0);
    CHECK_INT(ps_comms[s]->memberships, 3);
    CHECK_INT(ps_comms[s]->folded, rank == 0 || rank == 2 ? 3 : 0);
    CHECK_INT(ps_comms[s]->parent_id, d);
    CHECK_INT(ps_comms[s]->size, rank < 2 ? 2 : 1);
    CHECK(ps_comms[s]->ops[PS_OP_MPI_Barrier] && ps_comms[s]->ops[PS_OP_MPI_Barrier]->calls == 3);
    CHECK(find("W_d*_s*.0") < 0 || find("W_d*_s*.2") < 0); /* one row of the two per rank */
    ps_comm_keep = 256;
}

int main(int argc, char **argv)
{
    PMPI_Init(&argc, &argv);
    int size = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 3) {
        if (rank == 0) fprintf(stderr, "test_mpi_registry: needs 3 ranks, has %d\n", size);
        PMPI_Finalize();
        return PS_SKIP;
    }
    ps_world_rank = rank;
    ps_world_size = size;
    test_init_and_lookup();
    test_names();
    test_handle_maps();
    test_requests();
    test_record();
    test_fold();
    int all = 0;
    PMPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (failures) fprintf(stderr, "test_mpi_registry: rank %d: %d failures\n", rank, failures);
    PMPI_Finalize();
    return all != 0;
}
