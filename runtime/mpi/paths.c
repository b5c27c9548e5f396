/* Call paths of MPI calls: every recorded MPI call (ps_record) lands on a node of the
 * calling thread's tree -- the MPI operation below the call path that reached it -- with its
 * time, bytes and a per-communicator breakdown.  Operations of groups set to `count`
 * (PATHSCOPE_UNWIND) land below [not unwound] without a walk.  The MPI time also feeds the
 * hybrid accounting (sample.c: "Weights").
 *
 * Runs inside the wrappers, never in a signal handler, but a sample may arrive while it runs:
 * the wrappers' re-entry flag makes the handler ignore it.  The per-communicator entry is
 * updated under ps_lock() (taken only under MPI_THREAD_MULTIPLE), because folding a freed
 * communicator moves every thread's entries of it (fold.c); a new entry is noted on its
 * communicator's record there, which may allocate. */
#include <stdatomic.h>
#include <string.h>

#include "mpi_internal.h"
#include "mpi_thread.h"
#include "wrap.h"
#include "../core/cct.h"
#include "../core/record.h"
#include "../unwind/unwind.h"

static unsigned char group_counted[PS_NUM_UNWIND_GROUPS]; /* 1: count only */

/* PATHSCOPE_UNWIND, already validated at load time: "group=mode,..." ("all" = every group). */
void ps_paths_configure(void)
{
    static const char *defaults = "env=count,topo=count,poll=count";
    for (int pass = 0; pass < 2; pass++) {
        const char *p = pass ? ps_options.unwind : defaults;
        while (p && *p) {
            const char *comma = strchr(p, ',');
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            const char *eq = memchr(p, '=', len);
            if (eq) {
                size_t glen = (size_t)(eq - p);
                int counted = strncmp(eq + 1, "count", len - glen - 1) == 0;
                for (int g = 0; g < PS_NUM_UNWIND_GROUPS; g++)
                    if ((glen == 3 && strncmp(p, "all", 3) == 0) ||
                        (strlen(ps_unwind_group_names[g]) == glen &&
                         strncmp(p, ps_unwind_group_names[g], glen) == 0))
                        group_counted[g] = (unsigned char)counted;
            }
            p = comma ? comma + 1 : NULL;
        }
    }
}

int ps_paths_group_counted(int group) { return group_counted[group]; }

static uint32_t counted_op_node(ps_thread_t *t, int op)
{
    mpi_thread_t *m = mpi_of(t);
    uint32_t node = op < PS_OP_NODE_CACHE ? m->op_node[op] : 0;
    if (!node) {
        node = ps_cct_child(t, t->not_unwound_node, PS_NODE_MPI, (uintptr_t)op);
        if (!node) return t->not_unwound_node;
        if (op < PS_OP_NODE_CACHE) m->op_node[op] = node;
    }
    return node;
}

/* Open addressing over (node, comm), with the tree's hash (salt 7); a quarter of the slots
 * is kept free for probing.  Entries are removed (backward shift) only when a freed
 * communicator's entries move to its folded row (fold.c). */
static inline uint32_t pcomm_home(const mpi_thread_t *m, uint32_t node, int comm)
{
    return ps_cct_hash(node, 7, (uintptr_t)(uint32_t)comm) & m->pcomm_mask;
}

ps_pcomm_t *ps_mpi_pcomm(mpi_thread_t *m, uint32_t node, int comm, int *added)
{
    uint32_t i = pcomm_home(m, node, comm);
    for (uint32_t probes = 0; probes <= m->pcomm_mask; probes++) {
        ps_pcomm_t *p = &m->pcomm[i];
        if (p->node == node && p->comm == comm) return p;
        if (!p->node) {
            if (m->npcomm >= m->pcomm_mask / 4 * 3) return NULL;
            m->npcomm++;
            p->node = node;
            p->comm = comm;
            if (added) *added = 1;
            return p;
        }
        i = (i + 1) & m->pcomm_mask;
    }
    return NULL;
}

ps_pcomm_t *ps_mpi_pcomm_find(mpi_thread_t *m, uint32_t node, int comm)
{
    uint32_t i = pcomm_home(m, node, comm);
    for (uint32_t probes = 0; probes <= m->pcomm_mask; probes++) {
        ps_pcomm_t *p = &m->pcomm[i];
        if (p->node == node && p->comm == comm) return p;
        if (!p->node) return NULL;
        i = (i + 1) & m->pcomm_mask;
    }
    return NULL;
}

void ps_mpi_pcomm_remove(mpi_thread_t *m, ps_pcomm_t *p)
{
    uint32_t mask = m->pcomm_mask, i = (uint32_t)(p - m->pcomm);
    *p = (ps_pcomm_t){0};
    m->npcomm--;
    for (uint32_t j = (i + 1) & mask; m->pcomm[j].node; j = (j + 1) & mask) {
        uint32_t home = pcomm_home(m, m->pcomm[j].node, m->pcomm[j].comm);
        /* move entry j into the hole when its home is not in (i, j] cyclically */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            m->pcomm[i] = m->pcomm[j];
            m->pcomm[j] = (ps_pcomm_t){0};
            i = j;
        }
    }
}

/* The trim of an untimed sample's path: the frames outside our wrapper, cut through the
 * last of pathscope's own frames; none (not below our wrapper after all): PS_TRIM_NO_PATH.
 * [signal-safe] */
static int trim_below_wrapper(uintptr_t *frames, int n, void *arg)
{
    (void)arg;
    int last_self = -1;
    for (int i = 0; i < n; i++)
        if (ps_unwind_in_self(frames[i])) last_self = i;
    if (last_self < 0) return PS_TRIM_NO_PATH;
    n -= last_self + 1;
    memmove(frames, frames + last_self + 1, sizeof *frames * (size_t)n);
    return n;
}

/* A sample inside an untimed MPI call: the operation's node, below its call path when the
 * group is unwound (the walk from the signal context, our own frames cut off; an incomplete
 * walk below [failed unwind]; no thunk commit).  [signal-safe, tree claimed] */
uint32_t ps_untimed_sample_node(ps_thread_t *t, int op, void *context)
{
    if (op < 0 || op >= PS_NUM_OPS) return t->not_unwound_node;
    if (group_counted[ps_op_unwind_group[op]]) return counted_op_node(t, op);
    ps_from_t from = {.how = PS_FROM_CONTEXT, .flags = PS_FROM_NO_COMMIT, .context = context,
                      .trim = trim_below_wrapper};
    uint32_t node;
    if (ps_cct_record(t, &from, PS_NODE_MPI, (uintptr_t)op, NULL, &node) < 0)
        return counted_op_node(t, op);
    return node;
}

/* wrap.h.  Called inside the wrapper (ps_in_wrapper set), so no sample of this thread
 * changes the accounting fields meanwhile.  Keeps an invariant of the hybrid accounting
 * (sample.c): the MPI time measured since the last kept sample never exceeds the wall time
 * since then, so a thread's MPI time never exceeds its elapsed time. */
uint64_t ps_poll_estimate(uint64_t t0, uint64_t t1)
{
    uint64_t dt = t1 - t0, estimate = dt * (uint64_t)ps_poll_sample;
    ps_thread_t *t = ps_self;
    if (ps_poll_sample == 1 || !t || t->end_ticks) return estimate;
    int64_t room = ps_time_poll_room(&t->time, t1);
    if (room < (int64_t)dt) return dt; /* the measured poll itself always counts */
    return estimate < (uint64_t)room ? estimate : (uint64_t)room;
}

void ps_path_record(int comm_id, int op, uint64_t dt, uint64_t bytes, int count_bytes)
{
    ps_thread_t *t = ps_self;
    if (!t) {
        /* a thread pathscope did not start (not through pthread_create): its tree starts
         * with this call, which began dt ago */
        t = ps_thread_register();
        if (t) {
            t->start_ticks -= dt;
            ps_time_backdate(&t->time, t->start_ticks);
        }
    }
    if (!t || t->busy) return; /* an MPI call from a handler that interrupted our own update */
    if (t->index == 0 && !ps_threaded && group_counted[ps_op_unwind_group[op]]) {
        /* A counted call of the main thread (the common case: MPI_Comm_rank, polls) touches
         * nothing but its time: its calls, time and bytes are what the per-communicator table
         * holds beyond the other records, and are put on [not unwound] when the tree is
         * written (ps_paths_complete_counted).  A timed call runs with ps_in_wrapper == 1, so
         * no sample can interleave with this update; an untimed one has dt == 0. */
        if (dt) ps_time_mpi(&t->time, dt);
        return;
    }
    if (!ps_tree_claim(t, PS_CLAIM_OPEN)) return;
    ps_time_mpi(&t->time, dt);
    uint32_t node;
    if (group_counted[ps_op_unwind_group[op]])
        node = counted_op_node(t, op);
    else
        ps_cct_record(t, &(ps_from_t){.how = PS_FROM_CALLER}, PS_NODE_MPI, (uintptr_t)op, NULL, &node);
    ps_node_t *nd = &t->nodes[node];
    nd->visits++;
    nd->mpi_ticks += dt;
    if (count_bytes) nd->bytes += bytes;
    ps_lock(); /* a communicator freed by another thread folds its entries (fold.c) */
    int added = 0;
    ps_pcomm_t *pc = ps_mpi_pcomm(mpi_of(t), node, comm_id, &added);
    if (pc) {
        pc->calls++;
        pc->ticks += dt;
        if (count_bytes) pc->bytes += bytes;
        if (added) ps_pcomm_note(comm_id, t->index, node);
    } else {
        t->tree_full++;
    }
    ps_unlock();
    ps_tree_release(t);
}

/* At the end (the trees are frozen): the main thread's counted calls, which the hot path left
 * in the per-communicator table only (ps_path_record), go to its [not unwound] op nodes:
 * for every counted operation and communicator, the table's calls, time and bytes minus those
 * of every tree record of that operation and communicator.  One pass over the trees' entries
 * adds those up on the statistics (in_trees), then one pass over the table: linear in
 * communicators x operations + threads x entries (it was their product: seconds at MPI_Finalize
 * with tens of thousands of communicators).  [signal-safe] */
void ps_paths_complete_counted(void)
{
    ps_thread_t *main_thread = ps_threads[0];
    if (!main_thread || ps_threaded) return;
    int nthreads = atomic_load(&ps_nthreads);
    for (int i = 0; i < nthreads; i++) {
        ps_thread_t *t = ps_threads[i];
        if (!t) continue;
        mpi_thread_t *m = mpi_of(t);
        for (uint32_t k = 0; k <= m->pcomm_mask; k++) {
            ps_pcomm_t *pc = &m->pcomm[k];
            if (!pc->node || pc->node >= t->nnodes || pc->comm < 0 || pc->comm >= ps_ncomms) continue;
            ps_node_t *n = &t->nodes[pc->node];
            if (n->kind != PS_NODE_MPI || n->key >= PS_NUM_OPS) continue;
            ps_stat_t *st = ps_comms[pc->comm]->ops[n->key];
            if (!st || !group_counted[ps_op_unwind_group[n->key]]) continue;
            st->in_trees.calls += pc->calls;
            st->in_trees.ticks += pc->ticks;
            st->in_trees.bytes += pc->bytes;
        }
    }
    for (int c = 0; c < ps_ncomms; c++) {
        for (int op = 0; op < PS_NUM_OPS; op++) {
            ps_stat_t *st = ps_comms[c]->ops[op];
            if (!st || !group_counted[ps_op_unwind_group[op]]) continue;
            uint64_t calls = st->calls - (st->in_trees.calls < st->calls ? st->in_trees.calls : st->calls);
            uint64_t ticks = st->ticks - (st->in_trees.ticks < st->ticks ? st->in_trees.ticks : st->ticks);
            uint64_t bytes = st->bytes - (st->in_trees.bytes < st->bytes ? st->in_trees.bytes : st->bytes);
            if (!calls) continue;
            uint32_t node = counted_op_node(main_thread, op);
            ps_node_t *nd = &main_thread->nodes[node];
            ps_pcomm_t *pc = node != main_thread->not_unwound_node
                                 ? ps_mpi_pcomm(mpi_of(main_thread), node, c, NULL) : NULL;
            if (pc) {
                pc->calls += calls;
                pc->ticks += ticks;
                pc->bytes += bytes;
            }
            nd->visits += calls;
            nd->mpi_ticks += ticks;
            nd->bytes += bytes;
        }
    }
}
