/* Consistent communicator names (the mpisee scheme, see docs/format.md for the letters):
 *
 *   name = parent name + '_' + letter + M [+ '.' + L]
 *
 * M is the largest number of communicators that any process of the parent belongs to at the
 * moment of creation (each process counts W and every communicator it joined since); it is
 * obtained by an allreduce over the parent, so it is the same on every member.  L, added for
 * operations that can create several communicators at once, is the lowest rank in the parent
 * of the new communicator's members; it is computed locally by translating group ranks.
 *
 * Exceptions, all documented in docs/format.md: MPI_Comm_create_group is collective over the
 * group only, so M is reduced over the new communicator; MPI_Comm_idup reduces with a
 * nonblocking allreduce started at the call and named when the request completes;
 * intercommunicators from MPI_Intercomm_create are named after the leaders' peer communicator
 * with L = the lowest world rank of either group; communicators to other jobs (spawn, connect,
 * accept, join) are named from the local side only.
 *
 * Our allreduces use PMPI on the user's communicator at the same point of every member's
 * call sequence, so they match across ranks.  Their time is not charged to the user's call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

static int max_over(MPI_Comm comm, int v)
{
    int inter = 0, r1 = v, r2 = v;
    PMPI_Comm_test_inter(comm, &inter);
    PMPI_Allreduce(&v, &r1, 1, MPI_INT, MPI_MAX, comm);
    if (!inter) return r1;
    /* on an intercommunicator the result is the remote group's maximum; a second round
     * returns the remote maximum of those, i.e. our own group's maximum */
    PMPI_Allreduce(&r1, &r2, 1, MPI_INT, MPI_MAX, comm);
    return r1 > r2 ? r1 : r2;
}

static int lowest_parent_rank(MPI_Comm parent, MPI_Comm newcomm)
{
    MPI_Group pg, ng;
    int n = 0, low = -1;
    PMPI_Comm_group(parent, &pg);
    PMPI_Comm_group(newcomm, &ng);
    PMPI_Group_size(ng, &n);
    int *in = malloc(sizeof(int) * (size_t)n), *out = malloc(sizeof(int) * (size_t)n);
    if (in && out) {
        for (int i = 0; i < n; i++) in[i] = i;
        PMPI_Group_translate_ranks(ng, n, in, pg, out);
        for (int i = 0; i < n; i++)
            if (out[i] != MPI_UNDEFINED && (low < 0 || out[i] < low)) low = out[i];
    }
    free(in);
    free(out);
    PMPI_Group_free(&pg);
    PMPI_Group_free(&ng);
    return low;
}

static void compose(char *name, const char *parent, char letter, int max, int low)
{
    if (low >= 0) snprintf(name, PS_NAME_MAX, "%s_%c%d.%d", parent, letter, max, low);
    else snprintf(name, PS_NAME_MAX, "%s_%c%d", parent, letter, max);
}

static int name_and_register(MPI_Comm newcomm, int parent_id, const char *parent_name, int op,
                             char letter, int max, int low, const char *topo)
{
    char name[PS_NAME_MAX];
    compose(name, parent_name, letter, max, low);
    int id = ps_comm_register_named(newcomm, name, (int)strlen(parent_name), parent_id, op, topo);
    ps_comm_counter++;
    return id;
}

void ps_on_comm_create(int op, uint64_t dt, MPI_Comm parent, MPI_Comm newcomm, char letter,
                       int multi, int collective_over_parent, const char *topo)
{
    int pid = ps_comm_lookup(parent);
    ps_record(pid, op, dt, 0, 0);
    ps_comms[pid]->creations++;
    int max;
    if (collective_over_parent) max = max_over(parent, ps_comm_counter);
    else if (newcomm != MPI_COMM_NULL) max = max_over(newcomm, ps_comm_counter);
    else return;
    if (newcomm == MPI_COMM_NULL) return;
    int low = multi ? lowest_parent_rank(parent, newcomm) : -1;
    name_and_register(newcomm, pid, ps_comms[pid]->name, op, letter, max, low, topo);
}

static void append_ints(char *buf, size_t cap, const char *label, int n, const int *v, char sep)
{
    size_t len = strlen(buf);
    len += (size_t)snprintf(buf + len, cap > len ? cap - len : 0, " %s=", label);
    for (int i = 0; i < n && len < cap; i++) {
        if (i) len += (size_t)snprintf(buf + len, cap - len, "%c", sep);
        if (len < cap) len += (size_t)snprintf(buf + len, cap - len, "%d", v[i]);
    }
}

void ps_on_cart_create(int op, uint64_t dt, MPI_Comm parent, int ndims, const int dims[],
                       const int periods[], int reorder, MPI_Comm newcomm)
{
    char topo[PS_TOPO_MAX];
    snprintf(topo, sizeof topo, "cart ndims=%d", ndims);
    append_ints(topo, sizeof topo, "dims", ndims, dims, 'x');
    append_ints(topo, sizeof topo, "periods", ndims, periods, ',');
    snprintf(topo + strlen(topo), sizeof topo - strlen(topo), " reorder=%d", reorder ? 1 : 0);
    ps_on_comm_create(op, dt, parent, newcomm, 'a', 0, 1, topo);
}

void ps_on_graph_create(int op, uint64_t dt, MPI_Comm parent, int nnodes, int reorder,
                        MPI_Comm newcomm)
{
    char topo[PS_TOPO_MAX];
    snprintf(topo, sizeof topo, "graph nnodes=%d reorder=%d", nnodes, reorder ? 1 : 0);
    ps_on_comm_create(op, dt, parent, newcomm, 'r', 0, 1, topo);
}

void ps_on_dist_graph_create(int op, uint64_t dt, MPI_Comm parent, int reorder, MPI_Comm newcomm,
                             char letter)
{
    char topo[PS_TOPO_MAX];
    snprintf(topo, sizeof topo, "dist_graph%s reorder=%d", letter == 'y' ? " adjacent" : "",
             reorder ? 1 : 0);
    ps_on_comm_create(op, dt, parent, newcomm, letter, 0, 1, topo);
}

void ps_on_intercomm_create(int op, uint64_t dt, MPI_Comm local_comm, int local_leader,
                            MPI_Comm peer_comm, MPI_Comm newcomm)
{
    int lid = ps_comm_lookup(local_comm), rank = 0;
    ps_record(lid, op, dt, 0, 0);
    char peer[PS_NAME_MAX] = "";
    PMPI_Comm_rank(local_comm, &rank);
    if (rank == local_leader) snprintf(peer, sizeof peer, "%s", ps_comms[ps_comm_lookup(peer_comm)]->name);
    PMPI_Bcast(peer, PS_NAME_MAX, MPI_CHAR, local_leader, local_comm);
    int max = max_over(newcomm, ps_comm_counter);
    /* the name derives from the peer communicator, so that is the recorded parent */
    int parent_id = lid;
    for (int i = 0; i < ps_ncomms; i++)
        if (ps_comms[i]->state == PS_SLOT_COMM && strcmp(ps_comms[i]->name, peer) == 0) {
            parent_id = i;
            break;
        }
    int id = name_and_register(newcomm, parent_id, peer, op, 'n', max, -1, "");
    if (id < 0) return;
    ps_comm_t *c = ps_comms[id];
    int low = -1;
    for (int i = 0; c->members && i < c->size + c->remote_size; i++)
        if (c->members[i] >= 0 && (low < 0 || c->members[i] < low)) low = c->members[i];
    compose(c->name, peer, 'n', max, low);
}

typedef struct {
    MPI_Request reduce;   /* MPI_REQUEST_NULL when no reduction is needed */
    char letter;
    int value, max, parent_id, op;
    int id;          /* record reserved for the new communicator, -1 if none */
    MPI_Comm newcomm; /* the handle as returned by the call (both MPIs set it at the call) */
} idup_state_t;

/* The handle is copied at the call: the caller's pointer may be gone when the request completes
 * (e.g. a Fortran binding's temporary). */
void ps_on_comm_idup(int op, uint64_t dt, MPI_Comm parent, MPI_Comm *newcomm, MPI_Request req)
{
    int pid = ps_comm_lookup(parent);
    ps_record(pid, op, dt, 0, 0);
    idup_state_t *st = calloc(1, sizeof *st);
    if (!st) {
        atomic_fetch_add(&ps_counters.alloc_failures, 1);
        return;
    }
    st->value = ps_comm_counter;
    st->parent_id = pid;
    st->op = op;
    st->newcomm = *newcomm;
    st->id = st->newcomm != MPI_COMM_NULL ? ps_comm_reserve(st->newcomm, pid, op) : -1;
    int inter = 0;
    PMPI_Comm_test_inter(parent, &inter);
    ps_comms[pid]->creations++;
    if (inter) {
        /* on an intercommunicator one nonblocking allreduce yields the other group's maximum,
         * so the groups would disagree; name by the parent's creation count instead, which
         * every member of both groups has counted alike ('I', docs/format.md) */
        st->letter = 'I';
        st->max = ps_comms[pid]->creations;
        st->reduce = MPI_REQUEST_NULL;
    } else {
        st->letter = 'i';
        PMPI_Iallreduce(&st->value, &st->max, 1, MPI_INT, MPI_MAX, parent, &st->reduce);
    }
    ps_req_add(req, pid, op, PS_REQ_IDUP, 0, st);
}

void ps_idup_complete(ps_req_t *r)
{
    idup_state_t *st = r->idup;
    if (!st) return;
    if (st->reduce != MPI_REQUEST_NULL) PMPI_Wait(&st->reduce, MPI_STATUS_IGNORE);
    if (st->id >= 0) {
        char name[PS_NAME_MAX];
        const char *parent = ps_comms[st->parent_id]->name;
        compose(name, parent, st->letter, st->max, -1);
        ps_comm_finish(st->id, st->newcomm, name, (int)strlen(parent));
        ps_comm_counter++;
    }
    free(st);
    r->idup = NULL;
}

#if MPI_VERSION >= 4
/* ---- sessions (MPI-4) --------------------------------------------------------------------
 * A session is named S<k>, k its place in the order this process initialised its sessions
 * (the members of a communicator agree when they initialise sessions in the same order, as
 * programs do).  A communicator made from a group of a session's process set is named under
 * that session; from another group (an intersection, an inclusion) under the only session
 * open, else under G.  Bounded tables: a group beyond them is G's. */
#define SESSIONS_MAX 16
#define PSET_GROUPS_MAX 64
typedef struct { MPI_Session session; int index; } open_session_t;
typedef struct { MPI_Group group; int index; } pset_group_t;
static open_session_t open_sessions[SESSIONS_MAX];
static int nopen, sessions_opened;
static pset_group_t pset_groups[PSET_GROUPS_MAX];
static int npset_groups;

int ps_session_opened(MPI_Session session)
{
    int index = sessions_opened++;
    if (nopen < SESSIONS_MAX) open_sessions[nopen++] = (open_session_t){session, index};
    return index;
}

void ps_session_closed(MPI_Session session)
{
    for (int i = 0; i < nopen; i++)
        if (open_sessions[i].session == session) {
            open_sessions[i] = open_sessions[--nopen];
            return;
        }
}

static int session_index(MPI_Session session)
{
    for (int i = 0; i < nopen; i++)
        if (open_sessions[i].session == session) return open_sessions[i].index;
    return -1;
}

void ps_on_group_from_pset(int op, uint64_t dt, MPI_Session session, MPI_Group group)
{
    ps_record(PS_COMM_NONE, op, dt, 0, 0);
    int index = session_index(session);
    if (index < 0 || group == MPI_GROUP_NULL) return;
    for (int i = 0; i < npset_groups; i++)
        if (pset_groups[i].group == group) { pset_groups[i].index = index; return; }
    if (npset_groups < PSET_GROUPS_MAX) pset_groups[npset_groups++] = (pset_group_t){group, index};
}

/* "S<k>" for the session of group, or "G" */
static void group_root(MPI_Group group, char *root, size_t cap)
{
    int index = -1;
    for (int i = 0; i < npset_groups && index < 0; i++)
        if (pset_groups[i].group == group) index = pset_groups[i].index;
    if (index < 0 && nopen == 1) index = open_sessions[0].index;
    if (index < 0) snprintf(root, cap, "G");
    else snprintf(root, cap, "S%d", index);
}
#else
static void group_root(MPI_Group group, char *root, size_t cap)
{
    (void)group;
    snprintf(root, cap, "G");
}
#endif

void ps_on_comm_from_group(int op, uint64_t dt, MPI_Group group, MPI_Comm newcomm, char letter)
{
    ps_record(PS_COMM_NONE, op, dt, 0, 0);
    if (newcomm == MPI_COMM_NULL) return;
    char root[16];
    group_root(group, root, sizeof root);
    int max = max_over(newcomm, ps_comm_counter);
    int id = name_and_register(newcomm, PS_COMM_NONE, root, op, letter, max, -1, "");
    if (id < 0) return;
    ps_comm_t *c = ps_comms[id];
    int low = -1;
    for (int i = 0; c->members && i < c->size + c->remote_size; i++)
        if (c->members[i] >= 0 && (low < 0 || c->members[i] < low)) low = c->members[i];
    compose(c->name, root, letter, max, low);
}

void ps_on_comm_dpm(int op, uint64_t dt, MPI_Comm parent, MPI_Comm newcomm, char letter)
{
    int pid = parent == MPI_COMM_NULL ? PS_COMM_NONE : ps_comm_lookup(parent);
    ps_record(pid, op, dt, 0, 0);
    if (newcomm == MPI_COMM_NULL) return;
    int max = parent == MPI_COMM_NULL ? ps_comm_counter : max_over(parent, ps_comm_counter);
    const char *pname = parent == MPI_COMM_NULL ? "J" : ps_comms[pid]->name;
    name_and_register(newcomm, pid, pname, op, letter, max, -1, "");
}
