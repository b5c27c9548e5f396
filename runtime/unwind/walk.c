/* The walker: from a frame's (pc, sp, rbp) to its callers' return addresses, one rule cache
 * probe and two loads a frame, within the thread's stack bounds (set here at thread start);
 * exact reuse of the previous walk; stops at a thunk in thunk mode.  The traversal modes
 * around it are in traversal.c.  [signal-safe], except ps_unwind_thread_init.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#include "../core/procmaps.h"
#include "unwind_internal.h"

/* ---- walking ------------------------------------------------------------------------------ */
static uintptr_t (*alias_fn)(uintptr_t pc);

void ps_unwind_set_alias(uintptr_t (*fn)(uintptr_t pc)) { alias_fn = fn; }

uintptr_t ps_unwind_alias(uintptr_t pc) { return alias_fn ? alias_fn(pc) : 0; }

/* What the walk outputs for a frame at pc recorded with flags: pc, or the original of a
 * trampoline's. */
static inline uintptr_t frame_output(uintptr_t pc, uintptr_t flags)
{
    uintptr_t original = flags & FRAME_ALIASED ? ps_unwind_alias(pc) : 0;
    return original ? original : pc;
}

/* The return address a slot stands for: a thunk's (a redirected frame's, thunk.c) is its entry's,
 * followed through tail-call entries (whose saved address is the thunk of the entry below);
 * 0 if a thunk's entry does not match the slot. */
static inline uintptr_t slot_return_address(const unwind_thread_t *u, uintptr_t slot, uintptr_t ra)
{
    const ps_thunks_t *th = &u->thunks;
    for (int ti = ps_thunk_index(ra), bound = PS_MAX_DEPTH; ti >= 0; ti = ps_thunk_index(ra)) {
        if ((uint32_t)ti >= th->top || th->e[ti].slot != slot || !bound--) return 0;
        ra = th->e[ti].ra;
    }
    return ra;
}

/* Exact reuse of the previous walk.  A walk is a deterministic function of the starting
 * registers (pc, sp, rbp), the unwind rules (fixed while no module is unloaded) and the stack
 * words it reads: each frame's return-address slot and, where a rule restores rbp, its save
 * slot.  So when a frame of this walk has the same (lookup pc, sp, rbp) as a frame of the
 * previous one, and every slot the previous walk read from there on still holds the value
 * it read then, the rest of the walk is the same -- no guess, no false positive (compare the
 * heuristic of Perks et al., which trusts return address and stack pointer alone).  Checking
 * is one independent load per frame instead of a dependent chain of two; a loop calling MPI
 * repeatedly from the same place pays it for all but the few frames of the wrapper. */
static inline int reuse_previous(const unwind_thread_t *u, int *j, uintptr_t lookup, uintptr_t sp,
                                 uintptr_t rbp, uintptr_t *out, int n, int max, int *complete,
                                 int trust)
{
    const frame_rec_t *prev = (const frame_rec_t *)u->walk_prev;
    int m = u->walk_prev_n;
    while (*j < m && prev[*j].sp < sp) (*j)++;
    if (*j >= m || prev[*j].sp != sp || prev[*j].lookup != lookup) return 0;
    /* rbp matters only if a frame from here on uses it before one restores it from memory
     * (a loop counter kept in rbp by the innermost function would otherwise prevent every
     * match above it) */
    if ((prev[*j].flags & FRAME_NEEDS_RBP) && prev[*j].rbp != rbp) return 0;
    int count = m - *j - 1; /* frames after the matching one */
    if (n + 1 + count > max) return 0;
    /* heuristic mode (trust): the "second match" only -- the next frame's return address is
     * still in its slot; exact mode: every slot the previous walk read */
    int last = trust && *j + 2 < m ? *j + 2 : m;
    for (int k = *j; k + 1 < last; k++) {
        uintptr_t slot = prev[k + 1].sp - 8;
        if (slot_return_address(u, slot, *(const uintptr_t *)slot) != prev[k + 1].pc) return 0;
        /* a restored rbp matters only to a walk that depends on it */
        if (prev[k].rbp_slot && (prev[k + 1].flags & FRAME_NEEDS_RBP) &&
            (prev[k].rbp_slot < sp || *(const uintptr_t *)prev[k].rbp_slot != prev[k + 1].rbp))
            return 0;
    }
    for (int k = 0; k < count; k++) {
        const frame_rec_t *f = &prev[*j + 1 + k];
        out[n + 1 + k] = frame_output(f->pc, f->flags);
    }
    *complete = u->walk_prev_complete;
    return count + 1; /* the matching frame and those after it */
}

/* The walk recorded in walk_cur (n frames), walk number seq, becomes the one the next walk is
 * compared with. */
static void keep_walk(unwind_thread_t *u, int n, int complete, uint64_t seq)
{
    uint64_t *swap = u->walk_prev;
    u->walk_prev = u->walk_cur;
    u->walk_cur = swap;
    u->walk_prev_n = n;
    u->walk_prev_complete = complete;
    u->walk_prev_generation = u->unwind_generation;
    u->walk_prev_seq = seq;
}

/* A signal handler returns to the C library's __restore_rt (`mov $15,%rax; syscall`:
 * rt_sigreturn) with rsp at the ucontext the kernel saved, which holds the interrupted frame's
 * registers; its CFI (an expression for every register) is more than the walker's rules say,
 * so the frame is recognised by its code and stepped here.  The interrupted frame's pc is an
 * instruction, not a return address.  1: *pc, *sp, *rbp are the interrupted frame's. */
static int signal_frame(uintptr_t lo, uintptr_t hi, uintptr_t *pc, uintptr_t *sp, uintptr_t *rbp)
{
    static const unsigned char sigreturn[9] = {0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05};
    unsigned char code[sizeof sigreturn]; /* (read safely: pc may be anything) */
    if (!ps_peek(code, *pc, sizeof code) || memcmp(code, sigreturn, sizeof code) != 0) return 0;
    uintptr_t regs = *sp + offsetof(ucontext_t, uc_mcontext.gregs);
    if (*sp < lo || regs + sizeof(greg_t) * NGREG > hi) return 0;
    const greg_t *g = (const greg_t *)regs;
    uintptr_t nsp = (uintptr_t)g[REG_RSP];
    if (nsp <= *sp || nsp > hi) return 0; /* (on the same stack, above the signal frame) */
    *pc = (uintptr_t)g[REG_RIP];
    *sp = nsp;
    *rbp = (uintptr_t)g[REG_RBP];
    return 1;
}

int ps_unwind_walk(unwind_thread_t *u, uintptr_t pc, uintptr_t sp, uintptr_t rbp, int first_exact,
                   uintptr_t *out, int max, int *complete, int flags)
{
    /* every frame we read lies above the starting stack pointer: below it (down to the
     * rlimit-based bound of the main thread) the stack may not be mapped */
    uintptr_t lo = u->stack_lo > sp ? u->stack_lo : sp, hi = u->stack_hi;
    int n = 0, j = 0, reusable = flags & WALK_REUSE, trust = flags & WALK_TRUST;
    int keepable = 1; /* no CFA expression met: the walk can be compared with the next */
    *complete = 0;
    u->thunk_hit = -1;
    u->thunk_stopped = 0;
    u->walk_crossed_signal = 0;
    thread_caches_check(u);
    if (u->walk_prev_generation != u->unwind_generation) u->walk_prev_n = 0;
    frame_rec_t *cur = (frame_rec_t *)u->walk_cur;
    if (max > PS_MAX_DEPTH) max = PS_MAX_DEPTH;
    for (int exact = first_exact, interrupted = 0; n < max; exact = interrupted, interrupted = 0) {
        uintptr_t lookup = exact ? pc : pc - 1;
        if (reusable) {
            int reused = reuse_previous(u, &j, lookup, sp, rbp, out, n, max, complete, trust);
            if (reused) {
                u->walk_reused++;
                /* the frames after the matching one are the kept walk's (the matching frame
                 * itself may differ: an exact pc against a return address) */
                ps_thread_t *t = u->thread;
                if (u->walk_prev_seq + 1 == t->walk_seq) t->walk_same_outer = reused - 1;
                /* a match at the kept walk's first frame: all of it is this walk's outside */
                if (j == 0) u->walk_prev_seq = t->walk_seq;
                out[n] = frame_output(pc, ((const frame_rec_t *)u->walk_prev)[j].flags);
                if ((n > 2 || j > 0) && (flags & WALK_KEEP)) {
                    /* a late match: this walk (its own frames, then the previous walk's from
                     * the match on) is what the next walk should be compared with */
                    const frame_rec_t *prev = (const frame_rec_t *)u->walk_prev;
                    memcpy(&cur[n], &prev[j], sizeof *cur * (size_t)reused);
                    cur[n].rbp = rbp;
                    keep_walk(u, n + reused, *complete, t->walk_seq);
                }
                return n + reused;
            }
        }
        /* (an interrupted frame's instruction, written as the return address just after it:
         * readers look a return address up at address - 1) */
        out[n] = exact && n > 0 ? pc + 1 : pc;
        cur[n].lookup = lookup;
        cur[n].sp = sp;
        cur[n].rbp = rbp;
        cur[n].pc = pc;
        cur[n].rbp_slot = 0;
        cur[n].flags = 0;
        n++;
        const rule_entry_t *r = rule_at(u, lookup);
        uintptr_t original = r->kind == RULE_NONE ? ps_unwind_alias(pc) : 0;
        if (original) {
            /* a probe's trampoline: the rule and the path of the code it stands for */
            out[n - 1] = original;
            cur[n - 1].flags = FRAME_ALIASED;
            lookup = exact ? original : original - 1;
            r = rule_at(u, lookup);
        }
        /* (its CFI: the return address an expression, which the rules leave as RULE_NONE) */
        if (r->kind == RULE_NONE && signal_frame(lo, hi, &pc, &sp, &rbp)) {
            reusable = keepable = 0; /* (the ucontext's words are not slots reuse compares) */
            u->walk_crossed_signal = 1;
            interrupted = 1;
            continue;
        }
        uintptr_t cfa;
        switch (r->kind) {
        case RULE_RSP: cfa = sp + (uintptr_t)r->cfa_off; break;
        case RULE_RBP: cfa = rbp + (uintptr_t)r->cfa_off; cur[n - 1].flags |= FRAME_USES_RBP; break;
        case RULE_EXPR:
            reusable = keepable = 0; /* its expression may read memory we do not record */
            if (!ps_unwind_eval_cfa_expr(lookup, sp, rbp, lo, hi, &cfa)) goto end;
            break;
        case RULE_END: *complete = 1; goto end;
        case RULE_RETURNED:
            /* the frame's slot is just below sp: the call wrote it, the red zone keeps it.
             * Only an interrupted frame can be inside a thunk: the first one, or the one a
             * signal frame interrupted (exact) */
            if ((n != 1 && !exact) || sp - 8 < u->stack_lo || sp >= hi) goto end;
            cfa = sp;
            break;
        default: goto end;
        }
        if (r->kind != RULE_RETURNED && (cfa <= sp || cfa > hi || cfa - 8 < lo)) goto end;
        uintptr_t ra = *(const uintptr_t *)(cfa - 8);
        if (r->rbp_off != NO_SAVE) {
            uintptr_t at = (r->flags & RULE_RBP_FROM_RBP ? rbp : cfa) + (uintptr_t)(intptr_t)r->rbp_off;
            /* a save slot below sp was popped: in an epilogue, where compilers do not say
             * that rbp is restored, it already holds the caller's value */
            if (at >= sp) {
                if (at < lo || at + 8 > hi) goto end;
                rbp = *(const uintptr_t *)at;
                cur[n - 1].rbp_slot = at;
                if (r->flags & RULE_RBP_FROM_RBP) cur[n - 1].flags |= FRAME_USES_RBP;
            }
        }
        if (!ra) goto end;
        int ti = ps_thunk_index(ra);
        if (__builtin_expect(ti >= 0, 0)) {
            /* a slot we redirected (thunk.c): its entry holds the return address */
            const ps_thunks_t *th = &u->thunks;
            ra = slot_return_address(u, cfa - 8, ra);
            if (!ra) {
                u->thunk_errors++;
                goto end;
            }
            if (u->thunk_hit < 0) { /* the innermost thunk: new thunks go above it */
                u->thunk_hit = ti;
                u->thunk_owner = n - 1; /* the frame whose slot held it */
            }
            if ((flags & WALK_THUNK) && th->chained[ti]) {
                /* e[ti..0] are the slots of the frames outside, in order; a tail call's entry
                 * (its saved address a thunk) shares its frame's slot with the next one; a
                 * saved address may be in a trampoline (a relocated call's) */
                int from = n;
                for (int k = ti; k >= 0; k--)
                    if (ps_thunk_index(th->e[k].ra) < 0) {
                        if (n >= max) { n = from; goto end; }
                        out[n++] = frame_output(th->e[k].ra, FRAME_ALIASED);
                    }
                u->thunk_stopped = 1;
                u->thunk_copied = n - from;
                *complete = 1;
                return n;
            }
        }
        pc = ra;
        sp = cfa;
    }
end:
    /* this walk becomes the one the next walk may reuse */
    if ((flags & WALK_KEEP) && keepable && n > 1) {
        /* which frames' walks depend on the rbp they started with: a frame that uses rbp, or
         * one that passes it on unchanged to a frame that depends on it */
        int needs = 0;
        for (int k = n - 1; k >= 0; k--) {
            if (cur[k].flags & FRAME_USES_RBP) needs = 1;
            else if (cur[k].rbp_slot) needs = 0;
            if (needs) cur[k].flags |= FRAME_NEEDS_RBP;
        }
        keep_walk(u, n, *complete, u->thread->walk_seq);
    }
    return n;
}

uintptr_t ps_unwind_caller_slot(ps_thread_t *t, uintptr_t ra, uintptr_t sp, uintptr_t rbp)
{
    unwind_thread_t *u = unwind_of(t);
    if (ps_thunk_index(ra) >= 0 || sp < u->stack_lo || sp >= u->stack_hi) return 0;
    thread_caches_check(u);
    const rule_entry_t *r = rule_at(u, ra - 1);
    uintptr_t cfa;
    switch (r->kind) {
    case RULE_RSP: cfa = sp + (uintptr_t)r->cfa_off; break;
    case RULE_RBP: cfa = rbp + (uintptr_t)r->cfa_off; break;
    default: return 0; /* (a trampoline's call, an expression, no rule) */
    }
    if (cfa <= sp || cfa - 8 < u->stack_lo || cfa > u->stack_hi) return 0;
    return cfa - 8;
}

/* The thread's stack, so that no walk reads outside it; its thunk stack for the thunks. */
void ps_unwind_thread_init(unwind_thread_t *u)
{
    ps_thunk_self = &u->thunks;
    pthread_attr_t attr;
    void *addr = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstack(&attr, &addr, &size);
        pthread_attr_destroy(&attr);
    }
    u->stack_lo = (uintptr_t)addr;
    u->stack_hi = (uintptr_t)addr + size;
}
