/* The traversal modes around the walker (full, reuse, heuristic, thunk) and the periodic
 * check of a walk against a full one; thunk installation after a walk (ps_unwind_commit);
 * the entry points: from pathscope's caller, from a given frame, from a signal context.
 * [signal-safe]
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#include "unwind_internal.h"

/* ---- traversal modes ------------------------------------------------------------------------
 * full       every walk from scratch
 * reuse      exact reuse of the previous walk (walk.c): no false positive by construction
 * heuristic  Perks et al.: a frame with the previous walk's (return address, stack pointer)
 *            plus a "second match" of the next return address in its slot is trusted for
 *            the rest; against drift, every HEURISTIC_FULL_EVERY-th walk and every walk after
 *            a gap of HEURISTIC_GAP_NS without one is a full walk (which the next may reuse)
 * Every ps_traversal_check-th walk of a thread is repeated as a full walk and compared: the
 * agreement rate is written with the thread (docs/format.md). */
int ps_traversal_mode = PS_TRAVERSAL_REUSE;
unsigned ps_traversal_check = 1000;
const char *const ps_traversal_names[] = {"full", "reuse", "heuristic", "thunk"};
const char *ps_traversal_requested;

#define HEURISTIC_FULL_EVERY 64
#define HEURISTIC_GAP_NS 10000000.0
static uint64_t heuristic_gap_ticks;

/* After a complete walk of n frames in thunk mode: the slots of the frames walked afresh are
 * to get thunks, outermost first, from the frame inside the thunk met (or the outermost
 * frame) down to the first frame of the application (our own innermost frames return right
 * away; the innermost frame of a sample is at an arbitrary instruction, maybe reading its
 * own return address: left alone).  They are noted here and installed by ps_unwind_commit()
 * once the caller has put the path into the tree, so that each new entry -- a call that
 * started since the last walk -- can count one entry on its call-site node.  The thunk met is
 * the innermost one of either kind (a probed function's exit too, thunk.c); the new entries
 * are chained (later walks may stop at them) if the walk stopped at a chained thunk or reached
 * the root without meeting any. */
static void thunks_prepare(ps_thread_t *t, unwind_thread_t *u, int n, int sync)
{
    ps_thunks_t *th = &u->thunks;
    th->npend = 0;
    /* a walk through a signal frame installs nothing: the frame the signal interrupted may be
     * about to read its own return address, as a sample's interrupted frame may */
    if (th->suspended || u->walk_crossed_signal) return;
    const frame_rec_t *cur = (const frame_rec_t *)u->walk_cur;
    /* a walk from inside a thunk's code (a sample, or the exit hook it calls) installs
     * nothing: the thunk still uses its entry e[i], which a commit would take */
    for (int k = 0; k < n && ps_unwind_in_self(cur[k].pc); k++)
        if (ps_thunk_running(cur[k].pc)) return;
    int owner, index;
    if (u->thunk_hit >= 0) {
        owner = u->thunk_owner;  /* frames 0 .. owner-1 have fresh slots */
        index = u->thunk_hit + 1;
        th->pend_chained = u->thunk_stopped && th->chained[u->thunk_hit];
    } else {
        owner = n - 1;           /* the outermost frame has no slot */
        index = 0;
        th->pend_chained = 1;
    }
    int first = sync ? 0 : 1;
    while (first < owner && ps_unwind_in_self(cur[first].pc)) first++;
    /* a walk from a sibling call's slot (ps_unwind_from): that slot's entries stay, and the
     * frames outside it that have no thunk cannot go above them (stack order): left alone */
    if (index < (int)u->walk_from_thunk) {
        index = (int)u->walk_from_thunk;
        owner = first;
    }
    th->pend_base = (uint32_t)index;
    th->pend_seq = t->walk_seq;
    /* the slot of frame first's callee: a redirect there continues the chain */
    th->pend_next = first <= owner && owner - first <= PS_MAX_DEPTH - index ? cur[first].sp - 8 : 0;
    for (int k = owner - 1; k >= first && index < PS_MAX_DEPTH; k--, index++) {
        uint32_t i = th->npend++;
        th->pend[i].slot = cur[k + 1].sp - 8;
        th->pend[i].ra = cur[k + 1].pc;
        th->pend[i].outer = (uint32_t)(n - 2 - k); /* frame k+1's position from the root */
    }
}

void ps_unwind_commit(ps_thread_t *t)
{
    if (!ps_thunks_available) return;
    unwind_thread_t *u = unwind_of(t);
    ps_thunks_t *th = &u->thunks;
    if (th->suspended || th->pend_seq != t->walk_seq) return;
    th->pend_seq = 0;
    int counted = t->last_keys_seq == t->walk_seq; /* last_nodes holds this walk's path */
    uint32_t index = th->pend_base;
    /* entries above the thunk met are stale: frames that vanished without returning (longjmp) */
    ps_thunks_close(u, index, PS_EXIT_LOST);
    th->top = index;
    th->chain_next = th->pend_next;
    for (uint32_t i = 0; i < th->npend; i++, index++) {
        uintptr_t *slot = (uintptr_t *)th->pend[i].slot, ra = th->pend[i].ra;
        if (*slot != ra) { /* (cannot happen: the walk read it) */
            th->chain_next = 0;
            break;
        }
        /* a frame whose thunk was put back and is met again is the same call */
        int again = index < th->restored_top && th->e[index].slot == (uintptr_t)slot &&
                    th->e[index].ra == ra;
        th->e[index].slot = (uintptr_t)slot;
        th->e[index].ra = ra;
        th->hooked[index] = 0;
        th->chained[index] = th->pend_chained;
        th->seq[index] = ++th->pushes;
        th->top = index + 1;
        atomic_signal_fence(memory_order_seq_cst); /* the entry before the slot */
        *slot = ps_thunk_address((int)index);
        uint32_t outer = th->pend[i].outer;
        if (counted && !again && (int)outer < t->last_n) t->nodes[t->last_nodes[outer]].entries++;
    }
    th->chain_top = th->top;
    if (!th->pend_chained) th->chain_next = 0;
    th->restored_top = 0; /* (after a restore there is no thunk: this walk covered them all) */
    if (u->thunk_restore_request) { /* a cancel request came in meanwhile (thunk.c) */
        ps_thunks_end(u, PS_EXIT_UNWOUND);
        u->thunk_restore_request = 0;
    }
}

/* One walk of thread t (u: its state) in the traversal mode, checked now and then. */
static int walk_mode(ps_thread_t *t, unwind_thread_t *u, uintptr_t pc, uintptr_t sp, uintptr_t rbp,
                     int first_exact, uintptr_t *out, int max, int *complete, int sync)
{
    int flags;
    switch (ps_traversal_mode) {
    case PS_TRAVERSAL_FULL: flags = 0; break;
    case PS_TRAVERSAL_THUNK: flags = WALK_THUNK; break;
    case PS_TRAVERSAL_HEURISTIC: {
        uint64_t now = ps_now();
        if (!heuristic_gap_ticks) heuristic_gap_ticks = (uint64_t)(ps_ticks_per_ns() * HEURISTIC_GAP_NS);
        int fresh = ++u->walks_since_full >= HEURISTIC_FULL_EVERY || now - u->walk_last_ticks > heuristic_gap_ticks;
        u->walk_last_ticks = now;
        if (fresh) u->walks_since_full = 0;
        flags = fresh ? WALK_KEEP : WALK_REUSE | WALK_TRUST | WALK_KEEP;
        break;
    }
    default: flags = WALK_REUSE | WALK_KEEP; break;
    }
    t->walk_seq++;
    t->walk_same_outer = 0;
    int n = ps_unwind_walk(u, pc, sp, rbp, first_exact, out, max, complete, flags);
    if (flags == WALK_THUNK) {
        if (u->thunk_stopped) {
            u->walk_reused++;
            t->walk_same_outer = u->thunk_copied; /* those frames have not returned since */
        }
        if (*complete && ps_thunks_available) thunks_prepare(t, u, n, sync);
        if (u->thunk_restore_request) { /* a cancel request came in meanwhile (thunk.c) */
            ps_thunks_end(u, PS_EXIT_UNWOUND);
            u->thunk_restore_request = 0;
        }
    }
    u->walks++;
    if (ps_traversal_check && u->walk_check_countdown-- <= 1) {
        u->walk_check_countdown = ps_traversal_check;
        int c = 0;
        int m = ps_unwind_walk(u, pc, sp, rbp, first_exact, u->check_buf, max, &c, 0);
        u->walk_checks++;
        if (m == n && c == *complete && memcmp(out, u->check_buf, sizeof *out * (size_t)n) == 0)
            u->walk_agree++;
    }
    return n;
}

__attribute__((noinline)) int ps_unwind_caller(uintptr_t *out, int max, int *complete)
{
    *complete = 0;
    ps_thread_t *t = ps_self;
    if (!ps_unwind_ok || !t) return 0;
    uintptr_t pc, sp, rbp;
    __asm__ __volatile__("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
                         : "=r"(pc), "=r"(sp), "=r"(rbp));
    int n = walk_mode(t, unwind_of(t), pc, sp, rbp, 1, out, max, complete, 1);
    int skip = 0;
    while (skip < n && ps_unwind_in_self(out[skip])) skip++;
    n -= skip;
    if (n <= 0) {
        *complete = 0;
        return 0;
    }
    if (skip) memmove(out, out + skip, sizeof *out * (size_t)n);
    return n;
}

int ps_unwind_from(uintptr_t ra, uintptr_t sp, uintptr_t rbp, uintptr_t *out, int max, int *complete)
{
    *complete = 0;
    ps_thread_t *t = ps_self;
    if (!ps_unwind_ok || !t) return 0;
    unwind_thread_t *u = unwind_of(t);
    int ti = ps_thunk_index(ra);
    if (ti < 0) return walk_mode(t, u, ra, sp, rbp, 0, out, max, complete, 1);
    /* the allocator (or a probed function) was reached by a sibling call (`return malloc(n)`):
     * it returns through the slot of the function that jumped to it, which holds that
     * function's thunk */
    ps_thunks_t *th = &u->thunks;
    uintptr_t real = (uint32_t)ti < th->top && th->e[ti].slot == sp - 8 ? th->e[ti].ra : 0;
    for (int k = ti; real && ps_thunk_index(real) >= 0; ) { /* (a tail call's entry: the one below) */
        int below = ps_thunk_index(real);
        real = below < k && th->e[below].slot == sp - 8 ? th->e[below].ra : 0;
        k = below;
    }
    if (!real) {
        u->thunk_errors++;
        return 0;
    }
    u->walk_from_thunk = (uint32_t)ti + 1; /* the slot still needs its entries */
    int n = walk_mode(t, u, real, sp, rbp, 0, out, max, complete, 1);
    u->walk_from_thunk = 0;
    return n;
}

int ps_unwind_signal(void *ucontext, uintptr_t *out, int max, int *complete)
{
    *complete = 0;
    ps_thread_t *t = ps_self;
    if (!ps_unwind_ok || !t) return 0;
    const ucontext_t *uc = ucontext;
    return walk_mode(t, unwind_of(t), (uintptr_t)uc->uc_mcontext.gregs[REG_RIP],
                     (uintptr_t)uc->uc_mcontext.gregs[REG_RSP], (uintptr_t)uc->uc_mcontext.gregs[REG_RBP],
                     1, out, max, complete, 0);
}
