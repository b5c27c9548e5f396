/* The per-thread caches filled from the unwind tables: the rule cache (the rule at an
 * address, computed on a miss of rule_at, unwind_internal.h) and the function range cache
 * (ps_unwind_function_start, for samples).  Both live in the thread's unwind_thread_t
 * (unwind_thread.h) and are dropped when the modules change (thread_caches_check).
 * [signal-safe]
 */
#include <stdint.h>
#include <string.h>

#include "unwind_internal.h"

/* Computes the rule at pc into e (a miss of rule_at); "cannot unwind here" is cached too. */
const rule_entry_t *ps_unwind_rule_compute(rule_entry_t *e, uintptr_t pc)
{
    static const rule_entry_t none = {0, 0, NO_SAVE, RULE_NONE, 0};
    if (ps_thunk_unframed(pc)) {
        *e = (rule_entry_t){pc, 0, NO_SAVE, RULE_RETURNED, 0};
        return e;
    }
    int known = 0;
    const uint8_t *hdr = ps_unwind_code_lookup(pc, &known);
    if (known < 0) return &none; /* inconclusive: do not cache */
    e->pc = pc;
    e->kind = RULE_NONE;
    e->rbp_off = NO_SAVE;
    e->cfa_off = 0;
    e->flags = 0;
    fde_t f;
    cfa_state_t st;
    if (!hdr || !ps_unwind_fde_find(hdr, pc, &f) || !ps_unwind_cfa_run(&f, pc, &st)) return e;
    if (st.ra_undefined) {
        e->kind = RULE_END;
        return e;
    }
    if (!st.ra_off_ok) return e;
    if (st.rbp_saved) {
        if (st.rbp_off < -32768 || st.rbp_off > 32767) return e;
        e->rbp_off = (int16_t)st.rbp_off;
        if (st.rbp_from_rbp) e->flags |= RULE_RBP_FROM_RBP;
    }
    if (st.cfa_reg == -1) {
        e->kind = RULE_EXPR;
        return e;
    }
    if ((st.cfa_reg != DW_RSP && st.cfa_reg != DW_RBP) || st.cfa_off < 0 || st.cfa_off > INT32_MAX)
        return e;
    e->kind = st.cfa_reg == DW_RSP ? RULE_RSP : RULE_RBP;
    e->cfa_off = (int32_t)st.cfa_off;
    return e;
}

/* Function entries come from the FDE covering pc (pc_begin), cached per thread in a sorted
 * range table so that a function is searched once. */
uintptr_t ps_unwind_function_start(ps_thread_t *t, uintptr_t pc)
{
    unwind_thread_t *u = unwind_of(t);
    thread_caches_check(u);
    int lo = 0, hi = u->nranges;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (u->ranges[mid].end <= pc) lo = mid + 1;
        else hi = mid;
    }
    if (lo < u->nranges && u->ranges[lo].start <= pc && pc < u->ranges[lo].end)
        return u->ranges[lo].start;
    int known = 0;
    const uint8_t *hdr = ps_unwind_code_lookup(pc, &known);
    fde_t f;
    if (!hdr || !ps_unwind_fde_find(hdr, pc, &f)) return 0;
    if (u->nranges < PS_RANGE_CACHE) {
        memmove(&u->ranges[lo + 1], &u->ranges[lo], sizeof u->ranges[0] * (size_t)(u->nranges - lo));
        u->ranges[lo].start = f.pc_begin;
        u->ranges[lo].end = f.pc_end;
        u->nranges++;
    }
    return f.pc_begin;
}
