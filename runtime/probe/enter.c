/* The handlers of probed calls: entry (from the patched function's stub, enter.S) and exit
 * (from the hooked thunk its return slot was redirected to, unwind/thunk.c).
 *
 * Entry: the call path through the unwinder (a walk from the caller's frame, with reuse), a
 * `probe` leaf below it counting the call, then the return slot redirected; its index on the
 * thunk stack is the index of the call's record on the thread's active stack.  The wall clock
 * is read last at entry and first at exit, so the handlers' own cost stays outside the
 * measured interval.
 *
 * Exclusive time: at the exit of a call, its inclusive time minus the inclusive time of the
 * probed calls made inside it and minus the MPI time measured inside it that those did not
 * already hold; exact for nesting, recursion and MPI below, from two counters per record.
 *
 * The fast path (ps_probe_enter_fast, called by the stub before it saves any vector state): a
 * call from the same return-address slot and return address as the probe's last entry on this
 * thread, whose caller's own slot still holds the thunk entry put there at that entry
 * (unwind.h: ps_unwind_anchor), is made from the same activation of the same caller: the same
 * path, the same node, no walk.  Otherwise the stub saves everything and takes the slow path
 * (probe_enter), which walks, records, and sets the anchor for next time.
 *
 * This file is compiled for the general registers only (-mgeneral-regs-only, CMakeLists.txt):
 * the fast path and the exit run with only the general registers saved (enter.S, the hooked
 * thunks of unwind/thunk.c), so they must not touch the x87 or vector state nor call anything
 * that may (the cpu and rusage counters are raw system calls, not libc's wrappers).
 *
 * Everything here is [signal-safe]: the thread's preallocated state only.  Calls made while
 * the thread is inside pathscope (a walk, a sample, a tree update), by threads pathscope does
 * not know, or while the trees are frozen pass straight through, counted. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>

#include "probe_internal.h"
#include "probe_thread.h"
#include "record.h"
#include "../unwind/unwind.h"

_Atomic uint64_t ps_probe_passed;

/* The thread's MPI time so far: total + since, which a sample moves from one to the other. */
static inline uint64_t mpi_total(const ps_thread_t *t)
{
    for (;;) {
        uint64_t before = *(volatile const uint64_t *)&t->time.mpi_ticks_total;
        uint64_t since = *(volatile const uint64_t *)&t->time.mpi_ticks_since;
        if (*(volatile const uint64_t *)&t->time.mpi_ticks_total == before) return before + since;
    }
}

static probe_node_t *node_metrics(const ps_thread_t *t, probe_thread_t *pt)
{
    /* (the thread's first probed call: mapped once, never freed, like the tree) */
    if (!pt->nodes) pt->nodes = ps_map_zeroed(sizeof(probe_node_t) * t->max_nodes);
    return pt->nodes;
}

/* A system call with two arguments, without libc (whose wrappers are not compiled for the
 * general registers only). */
static inline long raw_syscall2(long nr, long a, long b)
{
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b) : "rcx", "r11", "memory");
    return ret;
}

/* The counters of metrics cpu and rusage, read at entry and exit. */
static inline void counters(probe_act_t *a)
{
    if (ps_probe_metrics == PROBE_CPU) {
        struct timespec ts = {0, 0};
        raw_syscall2(SYS_clock_gettime, CLOCK_THREAD_CPUTIME_ID, (long)&ts);
        a->cpu0 = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        a->minflt0 = a->majflt0 = a->vcsw0 = a->ivcsw0 = 0; /* (not measured: no deltas) */
    } else {
        struct rusage ru;
        __builtin_memset(&ru, 0, sizeof ru); /* (rep stos: general registers only) */
        raw_syscall2(SYS_getrusage, RUSAGE_THREAD, (long)&ru);
        a->cpu0 = ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
                  ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
        a->minflt0 = (uint64_t)ru.ru_minflt;
        a->majflt0 = (uint64_t)ru.ru_majflt;
        a->vcsw0 = (uint64_t)ru.ru_nvcsw;
        a->ivcsw0 = (uint64_t)ru.ru_nivcsw;
    }
}

/* A new entry's record on the active stack (i: its thunk's index), and the probe's clock last. */
static inline void open_call(ps_thread_t *t, probe_thread_t *pt, int i, uint32_t id, uint32_t node)
{
    probe_act_t *a = &pt->act[i];
    a->id = id;
    a->node = node;
    a->prev = pt->cur;
    a->child_incl = a->child_mpi = 0;
    a->mpi0 = mpi_total(t);
    if (ps_probe_metrics != PROBE_TIME) counters(a);
    a->open = 1;
    pt->cur = (uint32_t)i + 1;
}

/* From the stub with the general registers saved only: 1 if the call was recorded here, 0 for
 * the slow path (which then counts it). */
int ps_probe_enter_fast(uint32_t id, uintptr_t *slot)
{
    ps_thread_t *t = ps_self;
    if (!t) return 0;
    probe_thread_t *pt = probe_of(t);
    const probe_fast_t *f = &pt->fast[id % PROBE_FAST];
    if (f->id1 != id + 1 || f->slot != (uintptr_t)slot || f->ra != *slot || pt->inside ||
        !ps_tree_claim(t, PS_CLAIM_OPEN))
        return 0;
    int i = ps_unwind_redirect_fast(t, slot, f->anchor, f->aslot, f->seq);
    if (i < 0) {
        ps_tree_release(t);
        return 0;
    }
    t->nodes[f->node].visits++;
    pt->fast_entries++;
    open_call(t, pt, i, id, f->node);
    ps_tree_release(t);
    pt->act[i].t0 = ps_now();
    return 1;
}

static void probe_enter(uint32_t id, uintptr_t *slot, uintptr_t rbp)
{
    ps_thread_t *t = ps_self;
    probe_thread_t *pt = t ? probe_of(t) : NULL;
    if (!pt || pt->inside || !ps_tree_claim(t, PS_CLAIM_OPEN)) {
        atomic_fetch_add_explicit(&ps_probe_passed, 1, memory_order_relaxed);
        return;
    }
    pt->inside = 1;
    probe_node_t *nodes = node_metrics(t, pt);
    if (!nodes) {
        pt->inside = 0;
        ps_tree_release(t);
        atomic_fetch_add_explicit(&ps_probe_passed, 1, memory_order_relaxed);
        return;
    }
    uintptr_t ra = *slot;
    ps_from_t from = {.how = PS_FROM_FRAME, .ra = ra, .sp = (uintptr_t)(slot + 1), .rbp = rbp};
    uint32_t node = 0;
    if (ps_cct_record(t, &from, PS_NODE_PROBE, id, &pt->cache[id % 64], &node) < 0) {
        pt->inside = 0; /* (a trim's answer: nothing recorded) */
        ps_tree_release(t);
        atomic_fetch_add_explicit(&ps_probe_passed, 1, memory_order_relaxed);
        return;
    }
    t->nodes[node].visits++;
    /* the fast path's anchor (with exit timing: the thunks are usable): the caller's own slot,
     * with the thunk entry just below this call's */
    probe_fast_t *f = &pt->fast[id % PROBE_FAST];
    f->id1 = 0;
    uintptr_t aslot = ps_probe_timed ? ps_unwind_caller_slot(t, ra, (uintptr_t)(slot + 1), rbp) : 0;
    uint64_t seq = 0;
    int anchor = aslot ? ps_unwind_anchor(t, slot, aslot, &seq) : -1;
    int i = ps_probe_timed ? ps_unwind_redirect(t, slot) : -1;
    if (anchor >= 0 && i == anchor + 1 && !ps_py_in_eval(ra)) {
        f->slot = (uintptr_t)slot;
        f->ra = ra;
        f->aslot = aslot;
        f->seq = seq;
        f->node = node;
        f->anchor = (uint32_t)anchor;
        f->id1 = id + 1;
    }
    if (i < 0) {
        nodes[node].untimed++;
        pt->inside = 0;
        ps_tree_release(t);
        return;
    }
    open_call(t, pt, i, id, node);
    pt->inside = 0;
    ps_tree_release(t);
    pt->act[i].t0 = ps_now();
}

/* The call of record a ends at t1 (ticks): its times go to its node and to the next outer
 * open call. */
static void close_call(ps_thread_t *t, probe_thread_t *pt, probe_act_t *a, uint64_t t1)
{
    probe_node_t *pn = &pt->nodes[a->node];
    uint64_t incl = t1 > a->t0 ? t1 - a->t0 : 0, mpi = mpi_total(t) - a->mpi0;
    uint64_t below = a->child_incl + (mpi > a->child_mpi ? mpi - a->child_mpi : 0);
    pn->incl += incl;
    pn->excl += incl > below ? incl - below : 0;
    if (ps_probe_metrics != PROBE_TIME) {
        probe_act_t now;
        pt->inside = 1;
        counters(&now);
        pt->inside = 0;
        pn->cpu_ns += now.cpu0 - a->cpu0;
        pn->minflt += now.minflt0 - a->minflt0;
        pn->majflt += now.majflt0 - a->majflt0;
        pn->vcsw += now.vcsw0 - a->vcsw0;
        pn->ivcsw += now.ivcsw0 - a->ivcsw0;
    }
    if (a->prev) {
        probe_act_t *outer = &pt->act[a->prev - 1];
        outer->child_incl += incl;
        outer->child_mpi += mpi;
    }
}

void ps_probe_exit(ps_thread_t *t, int index, int how)
{
    uint64_t t1 = ps_now();
    probe_thread_t *pt = t ? probe_of(t) : NULL;
    if (!pt || index < 0 || index >= PS_MAX_DEPTH) return;
    probe_act_t *a = &pt->act[index];
    if (!a->open) return;
    a->open = 0;
    pt->cur = a->prev;
    if (how == PS_EXIT_LOST) {
        pt->nodes[a->node].lost++;
        return;
    }
    if (how == PS_EXIT_UNWOUND) pt->nodes[a->node].exceptions++;
    close_call(t, pt, a, t1);
}

void ps_probe_handlers_init(void)
{
    ps_unwind_set_exit_hook(ps_probe_exit);
    ps_probe_entry_hook = probe_enter;
}

/* A thread that ends inside probed calls (pthread_exit, cancellation: its return slots were
 * put back): they end with it, counted as lost exits with their time up to now. */
void ps_probe_thread_exit(ps_thread_t *t, void *state)
{
    probe_thread_t *pt = state;
    if (!pt->nodes) return;
    uint64_t t1 = ps_now();
    for (int guard = 0; pt->cur && guard < PS_MAX_DEPTH; guard++) {
        probe_act_t *a = &pt->act[pt->cur - 1];
        pt->cur = a->prev;
        if (!a->open) continue;
        a->open = 0;
        pt->nodes[a->node].lost++;
        close_call(t, pt, a, t1);
    }
}

void ps_probe_open_extra(ps_thread_t *t, uint32_t node, uint64_t now, uint64_t *incl,
                         uint64_t *excl, uint64_t *open)
{
    probe_thread_t *pt = probe_of(t);
    *incl = *excl = *open = 0;
    uint32_t cur = pt->cur;
    for (int guard = 0; cur && guard < PS_MAX_DEPTH; guard++) {
        const probe_act_t *a = &pt->act[cur - 1];
        if (a->open && a->node == node && now > a->t0) {
            uint64_t in = now - a->t0;
            *incl += in;
            *excl += in > a->child_incl ? in - a->child_incl : 0;
            (*open)++;
        }
        cur = a->prev;
    }
}

void ps_probe_totals(uint32_t id, uint64_t *calls, uint64_t *incl, uint64_t *excl)
{
    *calls = *incl = *excl = 0;
    int n = atomic_load(&ps_nthreads);
    for (int i = 0; i < n; i++) {
        ps_thread_t *t = ps_threads[i];
        const probe_node_t *pn = t ? probe_of(t)->nodes : NULL;
        if (!pn) continue;
        uint32_t nn = *(volatile uint32_t *)&t->nnodes;
        for (uint32_t k = 0; k < nn; k++) {
            const ps_node_t *nd = &t->nodes[k];
            if (nd->kind != PS_NODE_PROBE || nd->key != id) continue;
            *calls += nd->visits;
            *incl += pn[k].incl;
            *excl += pn[k].excl;
        }
    }
}
