/* MPI's section of the live segment (core/source.h: publish; live/live.h): the 128
 * (communicator, operation) pairs with the most time, from the per-communicator tables read
 * without the lock (a record pointer once set stays; a name is copied bounded).  A freed
 * communicator folding meanwhile (fold.c) moves its statistics to its row: a pair whose
 * table is gone by the time it is written is left out of this round. */
#include <string.h>

#include "source.h"
#include "mpi_internal.h"
#include "live.h"

static ps_comm_t *comm_at(int c) { return __atomic_load_n(&ps_comms[c], __ATOMIC_ACQUIRE); }

static ps_stat_t *stat_at(ps_comm_t *cm, int op) { return __atomic_load_n(&cm->ops[op], __ATOMIC_ACQUIRE); }

void ps_mpi_publish(ps_fmt_t *f)
{
    ps_live_item_t items[PS_LIVE_MPI_MAX];
    ps_live_top_t top = {items, 0, PS_LIVE_MPI_MAX};
    int ncomms = __atomic_load_n(&ps_ncomms, __ATOMIC_ACQUIRE);
    for (int c = 0; c < ncomms && c < PS_MAX_COMMS; c++) {
        ps_comm_t *cm = comm_at(c);
        for (int op = 0; cm && op < PS_NUM_OPS; op++) {
            ps_stat_t *s = stat_at(cm, op);
            if (s && ps_live_load64(&s->calls))
                ps_live_top_add(&top, ps_live_load64(&s->ticks), (uint64_t)c, (uint64_t)op);
        }
    }
    ps_live_top_sort(&top);
    char name[PS_NAME_MAX];
    for (int k = 0; k < top.n; k++) {
        ps_comm_t *cm = comm_at((int)items[k].a);
        ps_stat_t *s = stat_at(cm, (int)items[k].b);
        if (!s) continue;
        memcpy(name, cm->name, sizeof name);
        name[sizeof name - 1] = 0;
        ps_fmt_str(f, "mpi\t");
        ps_fmt_tsv(f, name); ps_fmt_tab(f);
        ps_fmt_str(f, ps_op_names[items[k].b]); ps_fmt_tab(f);
        ps_fmt_u64(f, ps_live_load64(&s->calls)); ps_fmt_tab(f);
        ps_fmt_u64(f, ps_live_ns(ps_live_load64(&s->ticks))); ps_fmt_tab(f);
        ps_fmt_u64(f, ps_live_load64(&s->bytes)); ps_fmt_char(f, '\n');
    }
}
