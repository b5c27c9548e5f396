/* The probe source's part of the rank file (docs/format.md, "Probed functions"): the `probes`
 * line with its `probe` and `probe-refused` lines, each thread's `pnode` lines, the names of
 * probe nodes; and its lines of the live segment.  The rank-file writer may run in a
 * fatal-signal handler: [signal-safe], no malloc. */
#include <stdatomic.h>
#include <string.h>

#include "probe_internal.h"
#include "probe_thread.h"

static void module_field(ps_fmt_t *f, uintptr_t addr)
{
    int m = addr ? ps_paths_module_of(addr) : -1;
    if (m < 0) ps_fmt_char(f, '-');
    else ps_fmt_u64(f, (uint64_t)m);
}

/* Lost exits of every thread (the `probes` line's total). */
static uint64_t lost_exits(int nthreads)
{
    uint64_t lost = 0;
    for (int i = 0; i < nthreads; i++) {
        ps_thread_t *t = ps_threads[i];
        const probe_node_t *pn = t ? probe_of(t)->nodes : NULL;
        for (uint32_t k = 0; pn && k < t->nnodes; k++) lost += pn[k].lost;
    }
    return lost;
}

static uint64_t fast_entries(int nthreads)
{
    uint64_t n = 0;
    for (int i = 0; i < nthreads; i++) {
        ps_thread_t *t = ps_threads[i];
        if (t) n += probe_of(t)->fast_entries;
    }
    return n;
}

static void write_rank(ps_fmt_t *f)
{
    static const char *const metrics[] = {"time", "cpu", "rusage"};
    ps_patch_stats_t st;
    ps_patch_stats(&st);
    ps_fmt_str(f, "probes\t");
    ps_fmt_str(f, metrics[ps_probe_metrics]); ps_fmt_tab(f);
    ps_fmt_str(f, st.writer && ps_probe_added ? st.writer : "-"); ps_fmt_tab(f);
    ps_fmt_tsv(f, ps_probe_timed ? "on" : ps_probe_untimed_why); ps_fmt_tab(f);
    ps_fmt_u64(f, ps_probe_added); ps_fmt_tab(f);
    ps_fmt_u64(f, ps_probe_removed); ps_fmt_tab(f);
    ps_fmt_u64(f, ps_probe_refused); ps_fmt_tab(f);
    ps_fmt_u64(f, st.traps); ps_fmt_tab(f);
    ps_fmt_u64(f, st.windows); ps_fmt_tab(f);
    ps_fmt_u64(f, st.longest_window_ns); ps_fmt_tab(f);
    ps_fmt_u64(f, st.scan_waits); ps_fmt_tab(f);
    ps_fmt_u64(f, atomic_load(&ps_probe_passed)); ps_fmt_tab(f);
    ps_fmt_u64(f, lost_exits(ps_write_nthreads())); ps_fmt_tab(f);
    ps_fmt_str(f, "-\t");
    ps_fmt_u64(f, fast_entries(ps_write_nthreads())); ps_fmt_char(f, '\n');
    uint32_t count = ps_probe_count;
    /* (times from the main thread's registration: recording's start) */
    uint64_t start = ps_threads[0] ? ps_threads[0]->start_ticks : 0;
    for (uint32_t id = 1; id < count; id++) {
        const probe_t *p = &ps_probe_table[id];
        if (p->state == PROBE_FREE) continue;
        ps_fmt_str(f, "probe\t");
        ps_fmt_u64(f, id); ps_fmt_tab(f);
        module_field(f, p->addr); ps_fmt_tab(f);
        ps_fmt_hex(f, p->vaddr); ps_fmt_tab(f);
        ps_fmt_u64(f, p->size); ps_fmt_tab(f);
        ps_fmt_str(f, ps_probe_state_names[p->state]); ps_fmt_tab(f);
        ps_fmt_u64(f, p->added > start ? ps_ticks_to_ns(p->added - start) : 0);
        ps_fmt_tab(f);
        if (p->removed) ps_fmt_u64(f, ps_ticks_to_ns(p->removed - start));
        else ps_fmt_char(f, '-');
        ps_fmt_tab(f);
        ps_fmt_tsv(f, p->spec); ps_fmt_tab(f);
        ps_fmt_tsv(f, p->name); ps_fmt_tab(f);
        ps_fmt_tsv(f, p->file[0] ? p->file : "-"); ps_fmt_tab(f);
        ps_fmt_u64(f, (uint64_t)(p->line > 0 ? p->line : 0)); ps_fmt_char(f, '\n');
    }
    for (uint32_t i = 0; i < ps_probe_nrefusals; i++) {
        const probe_refusal_t *r = &ps_probe_refusals[i];
        ps_fmt_str(f, "probe-refused\t");
        ps_fmt_tsv(f, r->spec); ps_fmt_tab(f);
        module_field(f, r->addr); ps_fmt_tab(f);
        if (r->addr) ps_fmt_hex(f, r->vaddr);
        else ps_fmt_char(f, '-');
        ps_fmt_tab(f);
        ps_fmt_str(f, r->key); ps_fmt_tab(f);
        ps_fmt_tsv(f, r->text); ps_fmt_char(f, '\n');
    }
}

static void optional_u64(ps_fmt_t *f, int present, uint64_t v)
{
    if (present) ps_fmt_u64(f, v);
    else ps_fmt_char(f, '-');
}

static void write_pnodes(ps_fmt_t *f, ps_thread_t *t)
{
    const probe_node_t *pn = probe_of(t)->nodes;
    uint64_t now = ps_now();
    int cpu = ps_probe_metrics != PROBE_TIME, ru = ps_probe_metrics == PROBE_RUSAGE;
    for (uint32_t k = 0; pn && k < t->nnodes; k++) {
        if (t->nodes[k].kind != PS_NODE_PROBE) continue;
        const probe_node_t *p = &pn[k];
        uint64_t xi, xe, open;
        ps_probe_open_extra(t, k, now, &xi, &xe, &open);
        ps_fmt_str(f, "pnode\t");
        ps_fmt_u64(f, (uint64_t)t->index); ps_fmt_tab(f);
        ps_fmt_u64(f, k); ps_fmt_tab(f);
        ps_fmt_u64(f, ps_ticks_to_ns(p->incl + xi)); ps_fmt_tab(f);
        ps_fmt_u64(f, ps_ticks_to_ns(p->excl + xe)); ps_fmt_tab(f);
        optional_u64(f, cpu, p->cpu_ns); ps_fmt_tab(f);
        optional_u64(f, ru, p->minflt); ps_fmt_tab(f);
        optional_u64(f, ru, p->majflt); ps_fmt_tab(f);
        optional_u64(f, ru, p->vcsw); ps_fmt_tab(f);
        optional_u64(f, ru, p->ivcsw); ps_fmt_tab(f);
        ps_fmt_u64(f, p->lost); ps_fmt_tab(f);
        ps_fmt_u64(f, p->untimed); ps_fmt_tab(f);
        ps_fmt_u64(f, p->exceptions); ps_fmt_tab(f);
        ps_fmt_u64(f, open); ps_fmt_char(f, '\n');
    }
}

void ps_probe_write(ps_fmt_t *f, ps_section sec, ps_thread_t *t)
{
    if (ps_probe_count <= 1 && !ps_probe_nrefusals) return; /* nothing was ever probed */
    if (sec == PS_SEC_RANK) write_rank(f);
    else if (sec == PS_SEC_THREAD) write_pnodes(f, t);
}

const char *ps_probe_key_name(uintptr_t key, char buf[24])
{
    ps_fmt_t f = {buf, 0, 23, -1, 0};
    ps_fmt_u64(&f, key);
    buf[f.len] = 0;
    return buf;
}

/* The live segment's probe lines: one per probe with its totals. */
void ps_probe_publish(ps_fmt_t *f)
{
    uint32_t count = ps_probe_count;
    for (uint32_t id = 1; id < count; id++) {
        const probe_t *p = &ps_probe_table[id];
        if (p->state == PROBE_FREE) continue;
        uint64_t calls, incl, excl;
        ps_probe_totals(id, &calls, &incl, &excl);
        ps_fmt_str(f, "probe\t");
        ps_fmt_u64(f, id); ps_fmt_tab(f);
        ps_fmt_str(f, ps_probe_state_names[p->state]); ps_fmt_tab(f);
        ps_fmt_u64(f, calls); ps_fmt_tab(f);
        ps_fmt_u64(f, ps_ticks_to_ns(incl)); ps_fmt_tab(f);
        ps_fmt_u64(f, ps_ticks_to_ns(excl)); ps_fmt_tab(f);
        ps_fmt_tsv(f, p->name); ps_fmt_char(f, '\n');
    }
}
