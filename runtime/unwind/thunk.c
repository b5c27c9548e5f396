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
 * restores the slots before anything else looks at the stack. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
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

_Static_assert(offsetof(ps_thunks_t, top) == 0, "thunk.c assembly: top at 0");
_Static_assert(offsetof(ps_thunks_t, e) == 8, "thunk.c assembly: e[] at 8");
_Static_assert(sizeof(((ps_thunks_t *)0)->e[0]) == 16, "thunk.c assembly: 16-byte entries");
_Static_assert(PS_MAX_DEPTH == 256, "thunk.c assembly: 256 thunks");

/* 256 thunks of 16 bytes (thunk i: r11 = i, then the common part), then the common part:
 * top = i; jump to e[i].ra. */
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
        ".balign 16\n"
        ".globl ps_thunk_code_end\n"
        ".hidden ps_thunk_code_end\n"
        "ps_thunk_code_end:\n"
        "ps_thunk_common:\n"
        "movq ps_thunk_self@gottpoff(%rip), %r10\n"
        "movq %fs:(%r10), %r10\n"
        "movl %r11d, (%r10)\n"
        "shlq $4, %r11\n"
        "movq 16(%r10,%r11), %r11\n"
        "jmp *%r11\n");

/* The calling thread's state, NULL if it is not registered. [signal-safe] */
static inline unwind_thread_t *self_state(void)
{
    ps_thread_t *t = ps_self;
    return t ? unwind_of(t) : NULL;
}

/* Puts the return addresses back into every slot that still holds our thunk. [signal-safe] */
void ps_thunks_restore(unwind_thread_t *u, int suspend)
{
    if (!u) return;
    ps_thunks_t *th = &u->thunks;
    if (suspend && !th->suspended) th->suspended = 1; /* (2, for good, stays) */
    if (!th->top) return;
    for (int i = (int)th->top - 1; i >= 0; i--) {
        uintptr_t *slot = (uintptr_t *)th->e[i].slot;
        if (slot && *slot == ps_thunk_address(i)) *slot = th->e[i].ra;
    }
    if (th->restored_top < th->top) th->restored_top = th->top;
    th->top = 0;
    u->thunk_restores++;
}

int ps_thunks_cancel_requested(ps_thread_t *t)
{
    if (!t) return 0;
    unwind_thread_t *u = unwind_of(t);
    if (!u->thunk_restore_request) return 0;
    u->thunks.suspended = 2;
    if (!t->busy) {
        ps_thunks_restore(u, 1);
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
    if (ps_thunks_available) ps_thunks_restore(self_state(), 1);
}

/* The thread unwinds to its end (pthread_exit, cancellation): no thunks any more, even if a
 * destructor on the way catches an exception of its own (its catch does not end this
 * unwinding, which libstdc++ does not count as an uncaught exception). */
static inline void before_ending(void)
{
    if (!ps_thunks_available || !ps_self) return;
    unwind_thread_t *u = self_state();
    ps_thunks_restore(u, 1);
    u->thunks.suspended = 2;
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
    if (!ps_thunks_available || !t) return real(fn, arg);
    unwind_thread_t *u = unwind_of(t);
    uint32_t was = u->thunks.suspended; /* (its callback may allocate) */
    ps_thunks_restore(u, 1);
    int r = real(fn, arg);
    u->thunks.suspended = was;
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
    ps_thunks_t *th = t && ps_thunks_available ? &unwind_of(t)->thunks : NULL;
    /* caught: the unwinding is over -- unless this catch is inside a destructor that runs
     * while another exception is still unwinding */
    if (th && th->suspended == 1 && globals && globals()->uncaught == 0) th->suspended = 0;
    return r;
}

typedef int (*backtrace_fn)(void **, int);
PS_EXPORT int backtrace(void **buffer, int size)
{
    static backtrace_fn real;
    if (!real) real = (backtrace_fn)next_symbol("backtrace");
    ps_thread_t *t = ps_self;
    if (!ps_thunks_available || !t) return real(buffer, size);
    /* no new thunks meanwhile: the first call loads libgcc_s, which allocates */
    unwind_thread_t *u = unwind_of(t);
    uint32_t was = u->thunks.suspended;
    ps_thunks_restore(u, 1);
    int n = real(buffer, size);
    u->thunks.suspended = was;
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
    if (ps_thunks_available) {
        ps_thread_t *target = NULL;
        int n = atomic_load(&ps_nthreads);
        for (int i = 0; i < n; i++)
            if (ps_threads[i] && ps_threads[i]->pthread == (uintptr_t)thread &&
                !ps_threads[i]->exited) /* (end_ticks: closed when a rank file is written) */
                target = ps_threads[i];
        unwind_thread_t *u = target ? unwind_of(target) : NULL;
        if (target && target == ps_self) {
            ps_thunks_restore(u, 1);
            u->thunks.suspended = 2;
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
    if (!ps_thunks_available || !ps_self) return;
    unwind_thread_t *u = self_state();
    ps_thunks_restore(u, 1);
    u->thunks.suspended = 2;
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
