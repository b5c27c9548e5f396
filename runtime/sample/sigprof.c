/* SIGPROF belongs to the application as soon as it wants it.
 *
 * pathscope samples with SIGPROF (sample.c).  An application may install its own disposition
 * for that signal: gprof's -pg runtime, another profiler, a program that times itself with
 * setitimer(ITIMER_PROF).  From then on each signal our samplers send would reach the
 * application's handler (calls it never asked for, which change its counts), be ignored, or,
 * with SIG_DFL, kill the process.  So the functions that set a disposition are interposed
 * (sigaction, __sigaction, signal and its aliases bsd_signal and ssignal, sysv_signal,
 * __sysv_signal, sigset, sigignore; the C library calls its internal sigaction from them, not
 * ours):
 *
 *  - the application sets a SIGPROF disposition other than ours: every sampler is stopped
 *    *before* the C library installs it (no signal of ours reaches the new disposition), and
 *    the warning `sigprof-taken` records when;
 *  - it puts our handler back (a disposition saved and restored): the samplers of every
 *    thread still running start again, and `sigprof-restored` says how long sampling was off.
 *
 * The application's call goes to the C library unchanged -- arguments, return value, errno --
 * so it sees what it would see without pathscope (the previous disposition it gets back is
 * ours, as it always was).  A change made past these functions (the raw system call) is found
 * at the end of the run by asking the kernel (ps_sigprof_check_end).
 *
 * The same functions keep SIGTRAP for the probes' patcher once it has installed its handler
 * (ps_signal_keep_sigtrap): the application's disposition is handed to the patcher, which
 * chains to it, and never reaches the kernel -- a thread meeting an int3 in a patch window
 * must always find the patcher's handler.
 *
 * Everything reachable from the interposed functions is [signal-safe] once our handler is
 * installed (sigaction and signal are async-signal-safe, and applications call them from
 * handlers): system calls, atomics, ps_warn(), formatting into static storage.  A call from a
 * child made by vfork (which shares our memory until it execs) or fork passes straight
 * through: its dispositions are its own, our samplers and warnings are the parent's.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cct.h"
#include "sample.h"

#ifndef SIG_HOLD
#define SIG_HOLD ((sighandler_t)2)
#endif

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*signal_fn)(int, sighandler_t);
typedef int (*sigignore_fn)(int);

static sigaction_fn real_sigaction, real___sigaction;
static signal_fn real_signal, real_bsd_signal, real_sysv_signal, real___sysv_signal, real_sigset,
    real_ssignal;
static sigignore_fn real_sigignore;

static void *our_handler;              /* on_sample, once installed */
static int watching;                   /* our handler was installed: changes matter */
enum { OWNER_US, OWNER_APPLICATION };
static _Atomic int owner = OWNER_US;   /* whose disposition we last saw installed */
static uint64_t taken_ns;              /* when the application took it (ns since start) */

static void resolve(void)
{
    /* (at load time, from the constructor below: a fatal-signal handler calling signal()
     * must never be the first to look them up) */
    if (!real_sigaction) real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    if (!real___sigaction) real___sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "__sigaction");
    if (!real_signal) real_signal = (signal_fn)dlsym(RTLD_NEXT, "signal");
    if (!real_bsd_signal) real_bsd_signal = (signal_fn)dlsym(RTLD_NEXT, "bsd_signal");
    if (!real_sysv_signal) real_sysv_signal = (signal_fn)dlsym(RTLD_NEXT, "sysv_signal");
    if (!real___sysv_signal) real___sysv_signal = (signal_fn)dlsym(RTLD_NEXT, "__sysv_signal");
    if (!real_sigset) real_sigset = (signal_fn)dlsym(RTLD_NEXT, "sigset");
    if (!real_ssignal) real_ssignal = (signal_fn)dlsym(RTLD_NEXT, "ssignal");
    if (!real_sigignore) real_sigignore = (sigignore_fn)dlsym(RTLD_NEXT, "sigignore");
}

__attribute__((constructor)) static void sigprof_resolve_at_load(void) { resolve(); }

/* The handler the kernel has for SIGPROF now, asked directly (the C library's sigaction is
 * interposed by us, and possibly by others). [signal-safe] */
static void *current_handler(void)
{
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        unsigned long mask;
    } k;
    if (syscall(SYS_rt_sigaction, SIGPROF, NULL, &k, sizeof k.mask) != 0) return NULL;
    return k.handler;
}

int ps_sigprof_free_at_start(void)
{
    void *h = current_handler();
    return h == (void *)SIG_DFL || h == (void *)SIG_IGN;
}

void ps_sigprof_install_ours(const struct sigaction *sa, void *handler)
{
    resolve();
    our_handler = handler;
    if (real_sigaction && real_sigaction(SIGPROF, sa, NULL) == 0) watching = 1;
}

int ps_sigprof_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (!real_sigaction) {
        errno = ENOSYS;
        return -1;
    }
    return real_sigaction(sig, act, old);
}

int ps_sigprof_ours_flag(void) { return atomic_load(&owner) == OWNER_US; }

int ps_sigprof_installed(void) { return our_handler && current_handler() == our_handler; }

static uint64_t since_start_ns(void) { return ps_clock_monotonic_ns() - ps_start_ns; }

/* ---- the application changes SIGPROF ------------------------------------------------------ */
enum { CHANGE_NONE, CHANGE_TAKEN, CHANGE_RESTORED };

/* Before the C library installs handler for SIGPROF. */
static int before_change(void *handler)
{
    if (!watching || !ps_sample_in_own_process()) return CHANGE_NONE;
    if (handler == our_handler) return CHANGE_RESTORED;
    int expected = OWNER_US;
    if (!atomic_compare_exchange_strong(&owner, &expected, OWNER_APPLICATION)) return CHANGE_NONE;
    taken_ns = since_start_ns();
    ps_sample_stop_all();
    return CHANGE_TAKEN;
}

static void warn_taken(void *handler)
{
    static char text[256];
    ps_fmt_t f = {text, 0, sizeof text - 1, -1, 0};
    ps_fmt_str(&f, handler == (void *)SIG_IGN   ? "the application set SIGPROF to be ignored at "
                   : handler == (void *)SIG_DFL ? "the application set SIGPROF to its default action at "
                                                : "the application installed its own SIGPROF handler at ");
    ps_fmt_seconds(&f, taken_ns);
    ps_fmt_str(&f, ": pathscope stopped sampling there, so its call paths are incomplete from then on");
    text[f.len] = 0;
    ps_warn("sigprof-taken", text);
}

/* After the C library's call; ok: it succeeded. */
static void after_change(int change, void *handler, int ok)
{
    if (change == CHANGE_TAKEN) {
        if (ok) {
            if (ps_sample_rate) warn_taken(handler);
        } else { /* nothing changed: ours is still installed */
            atomic_store(&owner, OWNER_US);
            ps_sample_restart_all();
        }
    } else if (change == CHANGE_RESTORED && ok) {
        int expected = OWNER_APPLICATION;
        if (!atomic_compare_exchange_strong(&owner, &expected, OWNER_US)) return;
        ps_sample_restart_all();
        if (!ps_sample_rate) return;
        uint64_t now = since_start_ns();
        static char text[256];
        ps_fmt_t f = {text, 0, sizeof text - 1, -1, 0};
        ps_fmt_str(&f, "the application put pathscope's SIGPROF handler back at ");
        ps_fmt_seconds(&f, now);
        ps_fmt_str(&f, ": sampling resumed after ");
        ps_fmt_seconds(&f, now - taken_ns);
        ps_fmt_str(&f, " without samples");
        text[f.len] = 0;
        ps_warn("sigprof-restored", text);
    }
}

void ps_sigprof_check_end(void)
{
    if (!watching || !ps_sample_rate || !ps_sample_in_own_process()) return;
    if (atomic_load(&owner) != OWNER_US || ps_sigprof_installed()) return;
    atomic_store(&owner, OWNER_APPLICATION);
    ps_warn("sigprof-taken", "the application replaced pathscope's SIGPROF handler without "
            "sigaction or signal (seen at the end of the run): samples after that went to it, so "
            "pathscope's call paths are incomplete");
}

/* ---- SIGTRAP, kept ---------------------------------------------------------------------- */
static _Atomic(ps_sigtrap_keeper_fn) trap_keeper;

void ps_signal_keep_sigtrap(ps_sigtrap_keeper_fn keeper) { atomic_store(&trap_keeper, keeper); }

/* signal() and friends for a kept SIGTRAP, with the C library's semantics of each: BSD
 * (signal, bsd_signal, ssignal, sigset: the signal blocked in its handler, calls restarted;
 * sigset also unblocks it), System V (sysv_signal: reset to the default at delivery, not
 * blocked in the handler). */
static sighandler_t keep_signal(ps_sigtrap_keeper_fn keeper, const char *name, sighandler_t handler)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    if (strstr(name, "sysv")) {
        sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    } else {
        sa.sa_flags = SA_RESTART;
        sigaddset(&sa.sa_mask, SIGTRAP);
    }
    if (keeper(&sa, &old) != 0) return SIG_ERR;
    if (strcmp(name, "sigset") == 0) {
        sigset_t trap;
        sigemptyset(&trap);
        sigaddset(&trap, SIGTRAP);
        pthread_sigmask(SIG_UNBLOCK, &trap, NULL);
    }
    return old.sa_handler;
}

/* ---- the interposed functions ------------------------------------------------------------ */
static int wrap_sigaction(sigaction_fn real, int sig, const struct sigaction *act, struct sigaction *old)
{
    ps_sigtrap_keeper_fn keeper = atomic_load(&trap_keeper);
    if (sig == SIGTRAP && keeper) return keeper(act, old);
    if (!real) {
        resolve();
        real = real_sigaction;
        if (!real) {
            errno = ENOSYS;
            return -1;
        }
    }
    if (sig != SIGPROF || !act) return real(sig, act, old);
    /* (act is read as the C library reads it: an invalid pointer faults there too) */
    void *handler = (void *)act->sa_handler;
    int change = before_change(handler);
    int rc = real(sig, act, old);
    int saved_errno = errno;
    after_change(change, handler, rc == 0);
    errno = saved_errno;
    return rc;
}

static sighandler_t wrap_signal(signal_fn real, const char *name, int sig, sighandler_t handler)
{
    ps_sigtrap_keeper_fn keeper = atomic_load(&trap_keeper);
    if (sig == SIGTRAP && keeper && handler != SIG_HOLD) return keep_signal(keeper, name, handler);
    if (!real) {
        real = (signal_fn)dlsym(RTLD_NEXT, name);
        if (!real) {
            errno = ENOSYS;
            return SIG_ERR;
        }
    }
    if (sig != SIGPROF || handler == SIG_HOLD) return real(sig, handler);
    int change = before_change((void *)handler);
    sighandler_t previous = real(sig, handler);
    int saved_errno = errno;
    after_change(change, (void *)handler, previous != SIG_ERR);
    errno = saved_errno;
    return previous;
}

#define PS_EXPORT __attribute__((visibility("default")))

PS_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    return wrap_sigaction(real_sigaction, sig, act, old);
}

PS_EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    return wrap_sigaction(real___sigaction, sig, act, old);
}

PS_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
    return wrap_signal(real_signal, "signal", sig, handler);
}

PS_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler)
{
    return wrap_signal(real_bsd_signal, "bsd_signal", sig, handler);
}

PS_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler)
{
    return wrap_signal(real_sysv_signal, "sysv_signal", sig, handler);
}

PS_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler)
{
    return wrap_signal(real___sysv_signal, "__sysv_signal", sig, handler);
}

PS_EXPORT sighandler_t sigset(int sig, sighandler_t handler)
{
    return wrap_signal(real_sigset, "sigset", sig, handler);
}

PS_EXPORT sighandler_t ssignal(int sig, sighandler_t handler)
{
    return wrap_signal(real_ssignal, "ssignal", sig, handler);
}

PS_EXPORT int sigignore(int sig)
{
    if (!real_sigignore) real_sigignore = (sigignore_fn)dlsym(RTLD_NEXT, "sigignore");
    if (!real_sigignore) {
        errno = ENOSYS;
        return -1;
    }
    ps_sigtrap_keeper_fn keeper = atomic_load(&trap_keeper);
    if (sig == SIGTRAP && keeper) return keep_signal(keeper, "sigignore", SIG_IGN) == SIG_ERR ? -1 : 0;
    if (sig != SIGPROF) return real_sigignore(sig);
    int change = before_change((void *)SIG_IGN);
    int rc = real_sigignore(sig);
    int saved_errno = errno;
    after_change(change, (void *)SIG_IGN, rc == 0);
    errno = saved_errno;
    return rc;
}
