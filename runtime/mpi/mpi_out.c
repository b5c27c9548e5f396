/* MPI's part of the rank file (docs/format.md): the head's mpi_library and mpi_ns, the
 * `unwind` group lines, each thread's `pcomm` lines, the `comm` and `op` lines after the call
 * paths, and the names of MPI nodes; before any path is written, the main thread's counted
 * calls join its tree (paths.c).  Reached from the rank-file writer through the descriptor
 * (source_mpi.c), which may run in a fatal-signal handler: [signal-safe], no malloc. */
#include "source.h"
#include "mpi_internal.h"
#include "mpi_thread.h"

int ps_paths_group_counted(int group); /* paths.c */
void ps_paths_complete_counted(void); /* paths.c */
extern char ps_mpi_library[];         /* lifecycle_mpi.c */


/* The rank's time in MPI calls (every communicator and operation), in ticks. [signal-safe] */
uint64_t ps_rank_mpi_ticks(void)
{
    uint64_t t = 0;
    for (int c = 0; c < ps_ncomms; c++)
        for (int op = 0; op < PS_NUM_OPS; op++)
            if (ps_comms[c]->ops[op]) t += ps_comms[c]->ops[op]->ticks;
    return t;
}

static void write_unwind_groups(ps_fmt_t *f)
{
    for (int g = 0; g < PS_NUM_UNWIND_GROUPS; g++) {
        ps_fmt_str(f, "unwind\t");
        ps_fmt_str(f, ps_unwind_group_names[g]); ps_fmt_tab(f);
        ps_fmt_str(f, ps_paths_group_counted(g) ? "count\n" : "path\n");
    }
}

/* A thread's per-communicator breakdown of its MPI nodes, after its node lines. */
static void write_pcomms(ps_fmt_t *f, const ps_thread_t *t)
{
    const mpi_thread_t *m = mpi_of(t);
    for (uint32_t i = 0; i <= m->pcomm_mask; i++) {
        ps_pcomm_t *p = &m->pcomm[i];
        if (!p->node) continue;
        ps_fmt_str(f, "pcomm\t");
        ps_fmt_u64(f, (uint64_t)t->index); ps_fmt_tab(f);
        ps_fmt_u64(f, p->node); ps_fmt_tab(f);
        ps_fmt_tsv(f, p->comm >= 0 && p->comm < ps_ncomms ? ps_comms[p->comm]->name : "-"); ps_fmt_tab(f);
        ps_fmt_u64(f, p->calls); ps_fmt_tab(f);
        ps_fmt_u64(f, ps_ticks_to_ns(p->ticks)); ps_fmt_tab(f);
        ps_fmt_u64(f, p->bytes); ps_fmt_char(f, '\n');
    }
}

/* A folded row's my_rank: this rank's place in the union of its members (fold.c). */
static int row_rank(const ps_comm_t *cm)
{
    for (int i = 0; cm->members && i < cm->size; i++)
        if (cm->members[i] == ps_world_rank) return i;
    return 0;
}

static void write_comms(ps_fmt_t *f)
{
    for (int c = 0; c < ps_ncomms; c++) {
        ps_comm_t *cm = ps_comms[c];
        if (cm->state == PS_SLOT_FREE) continue;
        int row = cm->state == PS_SLOT_ROW;
        ps_fmt_str(f, "comm\t");
        ps_fmt_tsv(f, cm->name); ps_fmt_char(f, '\t');
        ps_fmt_i64(f, cm->size); ps_fmt_char(f, '\t');
        ps_fmt_i64(f, cm->remote_size); ps_fmt_char(f, '\t');
        ps_fmt_i64(f, row ? row_rank(cm) : cm->my_rank); ps_fmt_char(f, '\t');
        ps_fmt_tsv(f, cm->parent_id >= 0 ? ps_comms[cm->parent_id]->name : "-"); ps_fmt_char(f, '\t');
        ps_fmt_str(f, cm->creator_op >= 0 ? ps_op_names[cm->creator_op] : "-"); ps_fmt_char(f, '\t');
        ps_fmt_i64(f, cm->freed); ps_fmt_char(f, '\t');
        if (cm->members) {
            ps_fmt_ranges(f, cm->members, cm->size);
            if (cm->is_inter) { ps_fmt_char(f, '|'); ps_fmt_ranges(f, cm->members + cm->size, cm->remote_size); }
        } else {
            ps_fmt_char(f, '-');
        }
        ps_fmt_char(f, '\t');
        ps_fmt_tsv(f, cm->topo_mixed ? "mixed" : cm->topo[0] ? cm->topo : "-");
        ps_fmt_char(f, '\t');
        ps_fmt_u64(f, cm->sent_msgs); ps_fmt_char(f, '\t');
        ps_fmt_u64(f, cm->sent_bytes); ps_fmt_char(f, '\t');
        ps_fmt_u64(f, cm->recv_msgs); ps_fmt_char(f, '\t');
        ps_fmt_u64(f, cm->recv_bytes); ps_fmt_char(f, '\t');
        /* (2.3) requests freed while outstanding, requests that ended with an error */
        ps_fmt_u64(f, cm->freed_sends); ps_fmt_char(f, '\t');
        ps_fmt_u64(f, cm->freed_recvs); ps_fmt_char(f, '\t');
        ps_fmt_u64(f, cm->freed_recv_capacity); ps_fmt_char(f, '\t');
        ps_fmt_u64(f, cm->failed_requests); ps_fmt_char(f, '\t');
        /* (2.8) a folded row: communicators it stands for that this rank leads, and all this
         * rank's; 0 0 for a communicator's own record */
        ps_fmt_u64(f, cm->folded); ps_fmt_char(f, '\t');
        ps_fmt_u64(f, cm->memberships); ps_fmt_char(f, '\n');
    }
}

static void write_ops(ps_fmt_t *f)
{
    for (int c = 0; c < ps_ncomms; c++) {
        ps_comm_t *cm = ps_comms[c];
        for (int op = 0; op < PS_NUM_OPS; op++) {
            ps_stat_t *s = cm->ops[op];
            if (!s) continue;
            ps_fmt_str(f, "op\t");
            ps_fmt_tsv(f, cm->name); ps_fmt_char(f, '\t');
            ps_fmt_str(f, ps_op_names[op]); ps_fmt_char(f, '\t');
            ps_fmt_u64(f, s->calls); ps_fmt_char(f, '\t');
            ps_fmt_u64(f, s->bytes); ps_fmt_char(f, '\t');
            ps_fmt_u64(f, ps_ticks_to_ns(s->ticks)); ps_fmt_char(f, '\t');
            int first = 1;
            for (int b = 0; b < PS_HIST_BINS; b++) {
                if (!s->hist[b]) continue;
                if (!first) ps_fmt_char(f, ',');
                ps_fmt_u64(f, (uint64_t)b); ps_fmt_char(f, ':'); ps_fmt_u64(f, s->hist[b]);
                first = 0;
            }
            if (first) ps_fmt_char(f, '-');
            ps_fmt_char(f, '\n');
        }
    }
}

void ps_mpi_write(ps_fmt_t *f, ps_section sec, ps_thread_t *t)
{
    static int counted_completed; /* once: a second write must not add them again */
    switch (sec) {
    case PS_SEC_FROZEN:
        if (!counted_completed) {
            counted_completed = 1;
            ps_paths_complete_counted();
        }
        break;
    case PS_SEC_HEAD: write_unwind_groups(f); break;
    case PS_SEC_THREAD: write_pcomms(f, t); break;
    case PS_SEC_TAIL:
        write_comms(f);
        write_ops(f);
        break;
    default: break;
    }
}

const char *ps_mpi_key_name(uintptr_t key, char buf[24])
{
    (void)buf;
    return key < PS_NUM_OPS ? ps_op_names[key] : "MPI_?";
}

void ps_mpi_summary(ps_rank_summary_t *s)
{
    s->library = ps_mpi_library[0] ? ps_mpi_library : "-";
    s->mpi_ns = ps_ticks_to_ns(ps_rank_mpi_ticks());
}
