/* Thunk stacks (PATHSCOPE_TRAVERSAL=thunk), after Szebenyi et al.'s "thunk stacks".
 *
 * After a complete walk (an allocation, an MPI call, a sample) the return-address slots of the
 * application's frames are redirected to jump thunks: thunk i stands for entry
 * e[i] of the thread's thunk stack (unwind_thread.h: ps_thunks_t), which keeps the slot and the return
 * address it held.  A frame that returns runs its thunk, which pops the thunk stack to i and
 * jumps to the saved address with every register the return needs untouched (the thunk
 * clobbers only r10, r11 and the flags, which no caller expects preserved across a return).
 * The next walk stops at the first slot that still holds a thunk: that frame and every frame
 * outside it have not returned since, so the rest of the path is e[i].ra .. e[0].ra --
 * exactly, whatever the frame sizes, in as many steps as new frames.  And every thunk
 * installed marks a call that started since the last walk: its call site counts one call.
 *
 * What reads return addresses besides us, and what we do about it:
 *  - C++ (and Rust) exceptions: _Unwind_RaiseException, _Unwind_Resume_or_Rethrow,
 *    _Unwind_ForcedUnwind and _Unwind_Backtrace are interposed: the thread's slots get their
 *    return addresses back and no thunk is installed until the exception is caught
 *    (__cxa_begin_catch) -- the landing pads between may allocate.
 *  - backtrace(), pthread_exit(), swapcontext()/setcontext(): restored first; after a
 *    context switch the thread never uses thunks again (its stacks change under us).
 *  - pthread_cancel(): the target thread restores its own slots in a signal handler
 *    before the request is sent (below), and never uses thunks again.
 *  - longjmp/siglongjmp: frames vanish without running their thunks.  Harmless: a live
 *    frame's slot holds a thunk only if we wrote it while that frame was live (a call
 *    overwrites the slot), live thunked frames are always e[0..k] in stack order, and a
 *    walk checks e[i].slot == the slot before trusting e[i]; entries above the first thunk
 *    met are stale and are overwritten.
 *  - Samples install thunks too (traversal.c: ps_unwind_commit), but never on the interrupted
 *    frame, which may be about to read its own return address (setjmp does).  A sample that
 *    lands in our own code while the thread updates its tree is dropped (busy).
 *  - fork(): the child has the same stack and the same thunk stack.
 *  - CET shadow stacks (Linux 6.6+ user shadow stack): a return to a thunk would fault, so
 *    thunk mode is refused at start-up and the reuse mode used instead.
 * A thunk whose entry does not match its slot (an unforeseen stack switch) stops the walk
 * (counted); its return would then jump to the wrong place, which is why every case above
 * restores the slots before anything else looks at the stack.
 *
 * Exits of probed functions (ps_unwind_redirect) use the same stack with a second kind of
 * thunk: a hooked thunk calls the exit hook before it jumps (docs/design-probes.md, section
 * 3).  Its entries outlive the restores above -- an exception or backtrace() puts the return
 * address back, and the catch (or backtrace's return) re-arms the frames still live; frames
 * gone are reported to the hook: UNWOUND (an exception, the thread's end) or LOST (longjmp,
 * found when a later entry is pushed or popped; a stack switch). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <cpuid.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <ucontext.h>

#include "unwind_internal.h"
#include "../sample/sample.h"

__thread ps_thunks_t *ps_thunk_self __attribute__((tls_model("initial-exec")));
int ps_thunks_available; /* thunk mode may install thunks in this process */
int ps_thunks_in_use;    /* the thunk stack is used: thunk mode, or the exit hook is set */
static int redirect_ok;  /* ps_unwind_redirect may redirect in this process */
static const char *redirect_why = "call paths are off (no unwinder)";
static ps_unwind_exit_fn exit_hook;
uint32_t ps_xsave_kind, ps_xsave_size; /* unwind.h */
uint64_t ps_xsave_mask;

_Static_assert(offsetof(ps_thunks_t, top) == 0, "thunk.c assembly: top at 0");
_Static_assert(offsetof(ps_thunks_t, e) == 8, "thunk.c assembly: e[] at 8");
_Static_assert(sizeof(((ps_thunks_t *)0)->e[0]) == 16, "thunk.c assembly: 16-byte entries");
_Static_assert(PS_MAX_DEPTH == 256, "thunk.c assembly: 256 thunks");

/* 256 traversal thunks of 16 bytes (thunk i: r11 = i, then the common part), 256 hooked
 * thunks (the same, then the hooked part), then the common part: top = i; jump to e[i].ra. */
__asm__(".text\n"
        ".balign 16\n"
        ".globl ps_thunk_code\n"
        ".hidden ps_thunk_code\n"
        "ps_thunk_code:\n"
        ".set ps_thunk_i, 0\n"
        ".rept 256\n"
        ".balign 16\n"
        "movl $ps_thunk_i, %r11d\n"
        "jmp ps_thunk_common\n"
        ".set ps_thunk_i, ps_thunk_i + 1\n"
        ".endr\n"
        ".set ps_thunk_i, 0\n"
        ".rept 256\n"
        ".balign 16\n"
        "movl $ps_thunk_i, %r11d\n"
        "jmp ps_thunk_hooked_common\n"
        ".set ps_thunk_i, ps_thunk_i + 1\n"
        ".endr\n"
        ".balign 16\n"
        ".globl ps_thunk_code_end\n"
        ".hidden ps_thunk_code_end\n"
        "ps_thunk_code_end:\n"
        "ps_thunk_common:\n"
        "movq ps_thunk_self@gottpoff(%rip), %r10\n"
        "movq %fs:(%r10), %r10\n"
        ".globl ps_thunk_returned_end\n"   /* (from here on top = i: e[i] is no longer live) */
        ".hidden ps_thunk_returned_end\n"
        "ps_thunk_returned_end:\n"
        "movl %r11d, (%r10)\n"
        "shlq $4, %r11\n"
        "movq 16(%r10,%r11), %r11\n"
        "jmp *%r11\n");

/* The hooked part: the frame has returned (rsp = its slot + 8) with its result in rax:rdx,
 * xmm0:xmm1 (ymm0/zmm0 for vector types) or st0:st1.  Its first instructions put e[i].ra back
 * into the slot, so that from ps_thunk_hooked_framed on the stack is that of a function called
 * from e[i].ra, described by CFI like any: a sample here, or in the exit hook below, walks on to
 * the caller (before that, the walker reads the slot, which still holds the thunk:
 * unwind_internal.h, RULE_RETURNED).  A caller compiled with interprocedural register
 * allocation (GCC's -fipa-ra, on at -O2) may keep values in caller-saved registers across a
 * call to a function it knows does not touch them, so every register but r10, r11 and the
 * flags (which the traversal thunks clobber too) must come back as the frame left them.  The
 * C code this calls -- ps_thunk_hooked_exit, ps_thunks_close and the exit hook -- is compiled
 * for the general registers only (this file and runtime/probe/enter.c: -mgeneral-regs-only,
 * no sanitizer calls; tests/e2e/test_general_regs.py checks the machine code), so pushing the
 * caller-saved general registers is all the saving there is: no x87, SSE, AVX or AVX-512
 * state is touched (the XSAVEC/XRSTOR pair this replaced cost ~150 ns per exit here).  We use
 * the stack below the returned frame's slot: it was the callee's, and the caller's red zone
 * holds nothing live across a call (the call itself wrote below its rsp).  e[i].ra is read
 * before the hook runs: nothing changes e[i] while top > i. */
__asm__(".text\n"
        ".globl ps_thunk_hooked_common\n"
        ".hidden ps_thunk_hooked_common\n"
        "ps_thunk_hooked_common:\n"
        "movq ps_thunk_self@gottpoff(%rip), %r10\n"
        "movq %fs:(%r10), %r10\n"
        "shlq $4, %r11\n"
        "pushq 16(%r10,%r11)\n"            /* e[i].ra into the slot */
        ".globl ps_thunk_hooked_framed\n"
        ".hidden ps_thunk_hooked_framed\n"
        "ps_thunk_hooked_framed:\n"
        ".cfi_startproc\n"
        "shrq $4, %r11\n"
        "pushq %rbp\n"
        ".cfi_adjust_cfa_offset 8\n"
        ".cfi_rel_offset %rbp, 0\n"
        "movq %rsp, %rbp\n"
        ".cfi_def_cfa_register %rbp\n"
        "pushq %rax\n"
        "pushq %rcx\n"
        "pushq %rdx\n"
        "pushq %rsi\n"
        "pushq %rdi\n"
        "pushq %r8\n"
        "pushq %r9\n"
        "pushq %r11\n"                     /* -64(%rbp): i */
        "andq $-16, %rsp\n"
        "movl %r11d, %edi\n"
        "call ps_thunk_hooked_exit\n"
        "leaq -64(%rbp), %rsp\n"
        "popq %r11\n"
        "popq %r9\n"
        "popq %r8\n"
        "popq %rdi\n"
        "popq %rsi\n"
        "popq %rdx\n"
        "popq %rcx\n"
        "popq %rax\n"
        "popq %rbp\n"
        ".cfi_def_cfa %rsp, 8\n"
        ".cfi_restore %rbp\n"
        "ret\n"                            /* to e[i].ra */
        ".cfi_endproc\n"
        ".globl ps_thunk_hooked_end\n"
        ".hidden ps_thunk_hooked_end\n"
        "ps_thunk_hooked_end:\n");

/* The calling thread's state, NULL if it is not registered. [signal-safe] */
static inline unwind_thread_t *self_state(void)
{
    ps_thread_t *t = ps_self;
    return t ? unwind_of(t) : NULL;
}

static inline uintptr_t entry_thunk(const ps_thunks_t *th, uint32_t i)
{
    return th->hooked[i] ? ps_thunk_hooked_address((int)i) : ps_thunk_address((int)i);
}

/* (innermost first) */
void ps_thunks_close(unwind_thread_t *u, uint32_t from, int how)
{
    ps_thunks_t *th = &u->thunks;
    while (th->top > from) {
        uint32_t i = --th->top;
        if (th->hooked[i]) exit_hook(u->thread, (int)i, how);
    }
}

/* Puts the return addresses back into every slot that still holds our thunk.  Without hooked
 * entries the stack is emptied (restored_top remembers it); with them every entry stays, for
 * rearm (below). [signal-safe] */
void ps_thunks_restore(unwind_thread_t *u, int suspend)
{
    if (!u) return;
    ps_thunks_t *th = &u->thunks;
    if (suspend && !th->suspended) th->suspended = 1; /* (2, for good, stays) */
    if (!th->top) return;
    int hooked = 0;
    for (int i = (int)th->top - 1; i >= 0; i--) {
        uintptr_t *slot = (uintptr_t *)th->e[i].slot;
        hooked |= th->hooked[i];
        if (slot && *slot == entry_thunk(th, (uint32_t)i)) *slot = th->e[i].ra;
    }
    u->thunk_restores++;
    if (hooked) return;
    if (th->restored_top < th->top) th->restored_top = th->top;
    th->top = 0;
}

/* After a restore, from a frame whose stack pointer is sp: the entries below sp died (reported
 * as how), the others are outside this frame, live, and get their thunks back if their slot
 * still holds the return address (the same activation, as restored_top reasons). [signal-safe] */
static void rearm(unwind_thread_t *u, uintptr_t sp, int how)
{
    ps_thunks_t *th = &u->thunks;
    uint32_t live = th->top;
    while (live > 0 && th->e[live - 1].slot < sp) live--;
    ps_thunks_close(u, live, how);
    for (uint32_t i = 0; i < th->top; i++) {
        uintptr_t *slot = (uintptr_t *)th->e[i].slot;
        if (*slot == th->e[i].ra) *slot = entry_thunk(th, i);
    }
}

/* The thread unwinds to its end or leaves its stack: slots restored, no thunks any more, the
 * open hooked entries reported as how. [signal-safe] */
void ps_thunks_end(unwind_thread_t *u, int how)
{
    if (!u) return;
    ps_thunks_restore(u, 1);
    u->thunks.suspended = 2;
    ps_thunks_close(u, 0, how);
}

/* ---- exits of probed functions ------------------------------------------------------------ */
/* Called by the hooked part of thunk i (above) when its frame has returned: entries above i are
 * frames that vanished inside it (longjmp).  (The hooked part read e[i].ra before: from top = i
 * on, a signal handler may push e[i].) */
__attribute__((used, visibility("hidden"))) void ps_thunk_hooked_exit(uint32_t i)
{
    ps_thread_t *t = ps_self;
    unwind_thread_t *u = unwind_of(t);
    ps_thunks_close(u, i + 1, PS_EXIT_LOST);
    exit_hook(t, (int)i, PS_EXIT_RETURN);
    u->thunks.top = i;
}

/* Entry k's frame is live from the point of view of a frame whose return slot is s and holds
 * ra: its slot is outside s, or is s itself holding k's thunk (a tail call through k). */
static inline int entry_live(const ps_thunks_t *th, uint32_t k, uintptr_t s, uintptr_t ra)
{
    return th->e[k].slot > s || (th->e[k].slot == s && ra == entry_thunk(th, k));
}

int ps_unwind_redirect(ps_thread_t *t, uintptr_t *slot)
{
    if (!redirect_ok || !exit_hook || !t || t != ps_self) return -1; /* (thunks use ps_self's) */
    unwind_thread_t *u = unwind_of(t);
    ps_thunks_t *th = &u->thunks;
    uintptr_t s = (uintptr_t)slot;
    if (th->suspended == 2 || s < u->stack_lo || s + 8 > u->stack_hi) return -1;
    uintptr_t ra = *slot;
    uint32_t live = th->top;
    while (live > 0 && !entry_live(th, live - 1, s, ra)) live--;
    ps_thunks_close(u, live, th->suspended == 1 ? PS_EXIT_UNWOUND : PS_EXIT_LOST);
    uint32_t i = th->top;
    if (i >= PS_MAX_DEPTH) return -1;
    int tail = i > 0 && th->e[i - 1].slot == s;
    th->e[i].slot = s;
    th->e[i].ra = ra;
    th->hooked[i] = 1;
    /* the probed function's caller is the innermost frame of the walk committed just before */
    th->chained[i] = tail ? th->chained[i - 1] : s == th->chain_next && i == th->chain_top;
    th->seq[i] = ++th->pushes;
    th->top = i + 1;
    atomic_signal_fence(memory_order_seq_cst); /* the entry before the slot */
    *slot = ps_thunk_hooked_address((int)i);
    return (int)i;
}

/* ---- the probes' entry fast path ----------------------------------------------------------- */
int ps_unwind_anchor(ps_thread_t *t, uintptr_t *slot, uintptr_t aslot, uint64_t *seq)
{
    if (!redirect_ok || !exit_hook || !t || t != ps_self) return -1;
    unwind_thread_t *u = unwind_of(t);
    ps_thunks_t *th = &u->thunks;
    uintptr_t s = (uintptr_t)slot, ra = *slot;
    if (th->suspended || ps_thunk_index(ra) >= 0 || aslot <= s || aslot < u->stack_lo ||
        aslot + 8 > u->stack_hi)
        return -1;
    /* dead entries are reported first: as in ps_unwind_redirect, and also those whose slot is
     * inside the caller's frame, or is the caller's slot without its thunk (a frame left by
     * longjmp at the caller's place: the slot now holds the new call's return address) */
    uintptr_t held = *(const uintptr_t *)aslot;
    uint32_t live = th->top;
    while (live > 0 && (!entry_live(th, live - 1, s, ra) || th->e[live - 1].slot < aslot ||
                        (th->e[live - 1].slot == aslot && held != entry_thunk(th, live - 1))))
        live--;
    ps_thunks_close(u, live, PS_EXIT_LOST);
    uint32_t k = th->top;
    if (k > 0 && th->e[k - 1].slot == aslot && held == entry_thunk(th, k - 1)) {
        *seq = th->seq[k - 1]; /* the caller's slot has its thunk already (thunk mode, or the
                                * caller is itself a probed function) */
        return (int)k - 1;
    }
    /* a new entry for a slot that holds a return address (not another entry's thunk) */
    if (k + 2 > PS_MAX_DEPTH || !held || ps_thunk_index(held) >= 0) return -1;
    th->e[k].slot = aslot;
    th->e[k].ra = held;
    th->hooked[k] = 0;
    th->chained[k] = 0; /* (a thunk-mode walk goes through it, never stops at it) */
    th->seq[k] = *seq = ++th->pushes;
    th->top = k + 1;
    atomic_signal_fence(memory_order_seq_cst); /* the entry before the slot */
    *(uintptr_t *)aslot = ps_thunk_address((int)k);
    return (int)k;
}

int ps_unwind_redirect_fast(ps_thread_t *t, uintptr_t *slot, uint32_t anchor, uintptr_t aslot,
                            uint64_t seq)
{
    unwind_thread_t *u = unwind_of(t);
    ps_thunks_t *th = &u->thunks;
    if (th->top != anchor + 1 || th->e[anchor].slot != aslot || th->seq[anchor] != seq ||
        th->suspended || *(const uintptr_t *)aslot != entry_thunk(th, anchor))
        return -1;
    uint32_t i = anchor + 1;
    if (i >= PS_MAX_DEPTH) return -1;
    uintptr_t s = (uintptr_t)slot;
    th->e[i].slot = s;
    th->e[i].ra = *slot;
    th->hooked[i] = 1;
    th->chained[i] = s == th->chain_next && i == th->chain_top;
    th->seq[i] = ++th->pushes;
    th->top = i + 1;
    atomic_signal_fence(memory_order_seq_cst); /* the entry before the slot */
    *slot = ps_thunk_hooked_address((int)i);
    return (int)i;
}

void ps_unwind_set_exit_hook(ps_unwind_exit_fn fn)
{
    exit_hook = fn;
    if (redirect_ok) ps_thunks_in_use = 1;
}

int ps_unwind_redirect_available(void) { return redirect_ok; }
const char *ps_unwind_redirect_why(void) { return redirect_ok ? NULL : redirect_why; }

/* The components saved: all the kernel enabled (XCR0) but the AMX tile configuration and data
 * (bits 17, 18: 8 KB, and no ABI keeps a tile live across a call).  XSAVEC (CPUID 0xd.1:EAX
 * bit 1) writes the compacted format and skips components in their initial state -- a third
 * of XSAVE's cost here; XSAVEOPT is not used for the fallback: its modified optimization
 * trusts that the area still holds what the last XRSTOR from that address read, which a
 * stack area reused by other frames does not. */
void ps_xsave_choose(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) {
        ps_xsave_kind = 0;
        ps_xsave_size = 512;
        return;
    }
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    uint64_t mask = ((uint64_t)hi << 32 | lo) & ~(UINT64_C(3) << 17);
    __cpuid_count(0xd, 1, a, b, c, d);
    if (!(a & 2)) { /* the standard format: every component at its fixed offset */
        __cpuid_count(0xd, 0, a, b, c, d);
        ps_xsave_size = b;
        ps_xsave_mask = mask;
        ps_xsave_kind = 1;
        return;
    }
    uint32_t size = 576; /* the legacy region (x87, SSE) and the header */
    for (unsigned i = 2; i < 63; i++) {
        if (!(mask >> i & 1)) continue;
        __cpuid_count(0xd, i, a, b, c, d);
        if (c & 2) size = (size + 63) & ~63u; /* this component starts 64-aligned */
        size += a;
    }
    ps_xsave_size = (size + 63) & ~63u;
    ps_xsave_mask = mask;
    ps_xsave_kind = 2;
}

const char *ps_unwind_redirect_setup(void)
{
    static char why[PS_PATH_MAX + 64], module[PS_PATH_MAX];
    if (ps_thunks_shadow_stack()) { /* returns into thunks would fault */
        redirect_why = "CET shadow stack";
    } else if (ps_unwind_own_unwinder(module, sizeof module)) {
        /* its exceptions would meet thunks we could not restore first */
        snprintf(why, sizeof why, "%s has its own unwinder", module);
        redirect_why = why;
    } else if (!ps_sigprof_free_at_start()) {
        /* (another profiler's library, started before us): restores for pthread_cancel need
         * the signal */
        redirect_why = "SIGPROF has another handler";
    } else {
        redirect_why = NULL;
    }
    ps_xsave_choose();
    redirect_ok = !redirect_why;
    return redirect_why;
}

int ps_thunks_cancel_requested(ps_thread_t *t)
{
    if (!t) return 0;
    unwind_thread_t *u = unwind_of(t);
    if (!u->thunk_restore_request) return 0;
    u->thunks.suspended = 2;
    if (!t->busy) {
        ps_thunks_end(u, PS_EXIT_UNWOUND);
        u->thunk_restore_request = 0;
    }
    return 1;
}

int ps_thunks_shadow_stack(void)
{
    /* ARCH_SHSTK_STATUS (Linux 6.6+): bit 0 = shadow stack enabled for this thread */
    unsigned long features = 0;
    if (syscall(SYS_arch_prctl, 0x5005, &features) == 0 && (features & 1)) return 1;
    return 0;
}

/* ---- the interposers -------------------------------------------------------------------- */
#define PS_EXPORT __attribute__((visibility("default")))

/* The definition we stand in front of.  RTLD_NEXT searches the global scope only: a C++
 * library that a C program (Python) opened with RTLD_LOCAL has its libgcc_s and libstdc++
 * outside it, yet its calls bind to us (the global scope comes first) -- so those libraries
 * are also looked up where they are loaded.  Not found: said once, and the process aborts
 * rather than jump to nowhere. */
static void *next_symbol(const char *name)
{
    static const char *const libraries[] = {"libgcc_s.so.1", "libstdc++.so.6", "libc.so.6",
                                            "libunwind.so.8", "libunwind.so.1", NULL};
    void *f = dlsym(RTLD_NEXT, name);
    for (int i = 0; !f && libraries[i]; i++) {
        void *h = dlopen(libraries[i], RTLD_LAZY | RTLD_NOLOAD);
        if (h) f = dlsym(h, name); /* (the handle stays: the library is loaded anyway) */
    }
    if (!f) {
        static const char msg[] = "pathscope: cannot find the definition of an unwinder "
                                  "function it interposes; aborting\n";
        syscall(SYS_write, 2, msg, sizeof msg - 1);
        abort();
    }
    return f;
}

static inline void before_unwinding(void)
{
    if (ps_thunks_in_use) ps_thunks_restore(self_state(), 1);
}

/* The thread unwinds to its end (pthread_exit, cancellation): no thunks any more, even if a
 * destructor on the way catches an exception of its own (its catch does not end this
 * unwinding, which libstdc++ does not count as an uncaught exception). */
static inline void before_ending(void)
{
    if (ps_thunks_in_use && ps_self) ps_thunks_end(self_state(), PS_EXIT_UNWOUND);
}

typedef int (*unwind_fn)(void *);
PS_EXPORT int _Unwind_RaiseException(void *exc)
{
    static unwind_fn real;
    if (!real) real = (unwind_fn)next_symbol("_Unwind_RaiseException");
    before_unwinding();
    return real(exc);
}

PS_EXPORT int _Unwind_Resume_or_Rethrow(void *exc)
{
    static unwind_fn real;
    if (!real) real = (unwind_fn)next_symbol("_Unwind_Resume_or_Rethrow");
    before_unwinding();
    return real(exc);
}

typedef int (*forced_fn)(void *, void *, void *);
PS_EXPORT int _Unwind_ForcedUnwind(void *exc, void *stop, void *arg)
{
    static forced_fn real;
    if (!real) real = (forced_fn)next_symbol("_Unwind_ForcedUnwind");
    before_ending(); /* a forced unwind ends the thread */
    return real(exc, stop, arg);
}

typedef int (*trace_fn)(void *, void *);
PS_EXPORT int _Unwind_Backtrace(void *fn, void *arg)
{
    static trace_fn real;
    if (!real) real = (trace_fn)next_symbol("_Unwind_Backtrace");
    ps_thread_t *t = ps_self;
    if (!ps_thunks_in_use || !t) return real(fn, arg);
    unwind_thread_t *u = unwind_of(t);
    uint32_t was = u->thunks.suspended; /* (its callback may allocate) */
    ps_thunks_restore(u, 1);
    int r = real(fn, arg);
    u->thunks.suspended = was;
    rearm(u, 0, PS_EXIT_LOST); /* (every frame is still there) */
    return r;
}

/* libstdc++'s per-thread exception state (cxxabi.h: __cxa_eh_globals) */
typedef struct {
    void *caught;
    unsigned int uncaught;
} eh_globals_t;
typedef eh_globals_t *(*globals_fn)(void);
typedef void *(*catch_fn)(void *);
PS_EXPORT void *__cxa_begin_catch(void *exc)
{
    static catch_fn real;
    static globals_fn globals;
    if (!real) real = (catch_fn)next_symbol("__cxa_begin_catch");
    if (!globals) globals = (globals_fn)next_symbol("__cxa_get_globals");
    void *r = real(exc);
    ps_thread_t *t = ps_self;
    unwind_thread_t *u = t && ps_thunks_in_use ? unwind_of(t) : NULL;
    /* caught: the unwinding is over -- unless this catch is inside a destructor that runs
     * while another exception is still unwinding.  The catching frame's stack pointer is our
     * CFA: the frames below it are gone. */
    if (u && u->thunks.suspended == 1 && globals && globals()->uncaught == 0) {
        u->thunks.suspended = 0;
        rearm(u, (uintptr_t)__builtin_dwarf_cfa(), PS_EXIT_UNWOUND);
    }
    return r;
}

typedef int (*backtrace_fn)(void **, int);
PS_EXPORT int backtrace(void **buffer, int size)
{
    static backtrace_fn real;
    if (!real) real = (backtrace_fn)next_symbol("backtrace");
    ps_thread_t *t = ps_self;
    if (!ps_thunks_in_use || !t) return real(buffer, size);
    /* no new thunks meanwhile: the first call loads libgcc_s, which allocates */
    unwind_thread_t *u = unwind_of(t);
    uint32_t was = u->thunks.suspended;
    ps_thunks_restore(u, 1);
    int n = real(buffer, size);
    u->thunks.suspended = was;
    rearm(u, 0, PS_EXIT_LOST);
    return n;
}

/* Cancellation unwinds the target thread from inside the C library (which calls libgcc's
 * _Unwind_ForcedUnwind through its own pointer, past our interposer), so the target must
 * put its return addresses back before the request is sent: it is asked with a signal
 * (SIGPROF, sample/sample.c) and confirms by clearing its request; we wait up to 200 ms (a
 * thread that blocks SIGPROF cannot answer, and while the application has its own SIGPROF
 * handler (sample/sigprof.c) none is sent: then its destructors outside the first thunk are
 * skipped, as the user guide says). */
typedef int (*cancel_fn)(pthread_t);
PS_EXPORT int pthread_cancel(pthread_t thread)
{
    static cancel_fn real;
    if (!real) real = (cancel_fn)next_symbol("pthread_cancel");
    if (ps_thunks_in_use) {
        ps_thread_t *target = NULL;
        int n = atomic_load(&ps_nthreads);
        for (int i = 0; i < n; i++)
            if (ps_threads[i] && ps_threads[i]->pthread == (uintptr_t)thread &&
                !ps_threads[i]->exited) /* (end_ticks: closed when a rank file is written) */
                target = ps_threads[i];
        unwind_thread_t *u = target ? unwind_of(target) : NULL;
        if (target && target == ps_self) {
            ps_thunks_end(u, PS_EXIT_UNWOUND);
        } else if (target && ps_sigprof_installed()) {
            /* (not when the application has taken SIGPROF: the signal would be its) */
            u->thunk_restore_request = 1;
            if (syscall(SYS_tgkill, getpid(), target->tid, SIGPROF) == 0) {
                for (int i = 0; i < 2000 && u->thunk_restore_request; i++) {
                    struct timespec ts = {0, 100000};
                    nanosleep(&ts, NULL);
                }
            }
        }
    }
    return real(thread);
}

typedef void (*exit_fn)(void *);
PS_EXPORT void pthread_exit(void *value)
{
    static exit_fn real;
    if (!real) real = (exit_fn)next_symbol("pthread_exit");
    before_ending();
    real(value);
    __builtin_unreachable();
}

/* A thread that switches stacks never gets thunks again. */
static inline void before_switching(void)
{
    if (ps_thunks_in_use && ps_self) ps_thunks_end(self_state(), PS_EXIT_LOST);
}

typedef int (*swap_fn)(ucontext_t *, const ucontext_t *);
PS_EXPORT int swapcontext(ucontext_t *from, const ucontext_t *to)
{
    static swap_fn real;
    if (!real) real = (swap_fn)next_symbol("swapcontext");
    before_switching();
    return real(from, to);
}

typedef int (*set_fn)(const ucontext_t *);
PS_EXPORT int setcontext(const ucontext_t *to)
{
    static set_fn real;
    if (!real) real = (set_fn)next_symbol("setcontext");
    before_switching();
    return real(to);
}
