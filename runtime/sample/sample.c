/* Timer sampling of every thread outside MPI, and the threads we start.
 *
 * Each thread has its own timer: by default a perf "task-clock" software event (CPU time of
 * this thread, high-resolution: 10 Hz to 20 kHz, and a thread blocked in the kernel gets no
 * signal, so the application's sleeps and reads are never interrupted).  Where perf events
 * are not allowed (perf_event_paranoid, seccomp) a POSIX CPU-time timer of the thread is used
 * instead (the kernel runs those at its tick rate: at most CONFIG_HZ, typically 250 Hz);
 * PATHSCOPE_SAMPLE_CLOCK=wall uses a CLOCK_MONOTONIC timer (wall time, also while blocked).
 * Every sample is weighted by its effective interval (cct.h: ps_sample_weight), so the
 * choice changes only where samples fall, never the total.
 *
 * on_sample() is a signal handler: everything it reaches is async-signal-safe -- the thread's
 * own preallocated tree, the unwinder, rdtsc.  It ignores samples inside MPI (the wrappers'
 * re-entry flag), inside pathscope itself (busy) and after the trees were frozen, and counts
 * each kind.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cct.h"
#include "unwind.h"
#include "sample.h"
#include "../kernel/kernel.h"

int ps_sample_rate;               /* Hz, 0 = off */
const char *ps_sample_source = "off";
static int use_wall_clock;
static int perf_failed;           /* perf events refused once: use POSIX timers from then on */
int ps_paths_on;                  /* call paths (unwinding, trees) active in this process */
/* mpi/paths.c: the node of an untimed MPI call a sample landed in [signal-safe] */
uint32_t ps_untimed_sample_node(ps_thread_t *t, int op, void *context);

/* A sample of this thread at the interrupted context: unwound, weighted, added. */
static void sample_here(ps_thread_t *t, void *context, uint64_t now)
{
    int complete = 0;
    int n = ps_unwind_signal(context, t->scratch, PS_MAX_DEPTH, &complete);
    uint64_t weight = ps_sample_weight(t, now);
    uint32_t node = t->failed_node;
    if (n > 0) {
        uintptr_t start = ps_unwind_function_start(t, t->scratch[0]);
        int kind = start ? PS_NODE_FN : PS_NODE_PC;
        if (start) t->scratch[0] = start;
        node = ps_cct_insert_path(t, complete ? 0 : t->failed_node, t->scratch, n, kind);
        ps_unwind_commit(t);
    }
    if (!complete) t->unwind_failures++;
    t->nodes[node].sample_ticks += weight;
    t->nodes[node].samples++;
    t->samples_kept++;
}

/* The closing sample of a thread that is still running at the end of the run: the time
 * since its last sample (for a helper thread blocked in epoll_wait, most of its life) goes
 * to where it is now.  Inside MPI the time stays open: the writer closes the timeline and
 * puts it on [not unwound]. [signal-safe] */
static void close_here(ps_thread_t *t, void *context)
{
    if (!ps_in_wrapper) sample_here(t, context, ps_now());
}

static void on_sample(int sig, siginfo_t *info, void *context)
{
    int saved_errno = errno;
    ps_thread_t *t = ps_self;
    if (t && t->thunk_restore_request) {
        /* another thread cancels this one (thunk.c: pthread_cancel): return addresses back
         * first; while we update the tree the walker does it when it is done */
        t->thunks.suspended = 2;
        if (!t->busy) {
            ps_thunks_restore(t, 1);
            t->thunk_restore_request = 0;
        }
        goto out;
    }
    if (!t || t->end_ticks || !ps_sample_rate) goto out;
    int in_wrapper = ps_in_wrapper;
    if (in_wrapper && in_wrapper < PS_IN_UNTIMED && !t->close_requested) {
        t->samples_in_mpi++;
        goto out;
    }
    if (t->busy || !ps_tree_enter(t)) {
        t->samples_other++;
        goto out;
    }
    if (t->close_requested) {
        close_here(t, context);
        t->close_requested = 0;
        t->close_done = 1;
    } else if (in_wrapper) {
        /* inside an MPI call that is counted but not timed: the sample is its time */
        uint64_t now = ps_now();
        uint32_t node = ps_untimed_sample_node(t, in_wrapper - PS_IN_UNTIMED, context);
        t->nodes[node].sample_ticks += ps_sample_weight(t, now);
        t->nodes[node].samples++;
        t->samples_kept++;
    } else {
        sample_here(t, context, ps_now());
    }
    ps_tree_leave(t);
out:
    errno = saved_errno;
}

static int start_perf(ps_thread_t *t)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.sample_period = 1000000000ull / (uint64_t)ps_sample_rate;
    attr.disabled = 1;
    attr.wakeup_events = 1;
    /* user mode only: allowed at perf_event_paranoid 2, and a system call is never
     * interrupted by a sample (the weights still cover the time spent in the kernel) */
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) return -1;
    struct f_owner_ex owner = {F_OWNER_TID, t->tid};
    if (fcntl(fd, F_SETOWN_EX, &owner) || fcntl(fd, F_SETSIG, PS_SAMPLE_SIGNAL) ||
        fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) || ioctl(fd, PERF_EVENT_IOC_REFRESH, 0) ||
        ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)) {
        close(fd);
        return -1;
    }
    t->sampler_fd = fd;
    return 0;
}

static int start_timer(ps_thread_t *t)
{
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = PS_SAMPLE_SIGNAL;
    ev._sigev_un._tid = t->tid;
    clockid_t clock = use_wall_clock ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID;
    if (timer_create(clock, &ev, &t->timer)) return -1;
    long ns = 1000000000L / ps_sample_rate;
    struct itimerspec its = {{ns / 1000000000L, ns % 1000000000L}, {ns / 1000000000L, ns % 1000000000L}};
    if (timer_settime(t->timer, 0, &its, NULL)) {
        timer_delete(t->timer);
        return -1;
    }
    t->has_timer = 1;
    return 0;
}

void ps_sample_thread_start(ps_thread_t *t)
{
    if (!ps_sample_rate) return;
    if (!use_wall_clock && !perf_failed) {
        if (start_perf(t) == 0) {
            ps_sample_source = "perf-task-clock";
            return;
        }
        perf_failed = 1;
    }
    if (start_timer(t) == 0) ps_sample_source = use_wall_clock ? "posix-wall-timer" : "posix-cpu-timer";
    else atomic_fetch_add(&ps_counters.sampler_failures, 1);
}

void ps_sample_thread_stop(ps_thread_t *t)
{
    /* claimed atomically: the thread itself (at its end) and the writer may both stop it */
    int fd = atomic_exchange(&t->sampler_fd, -1);
    if (fd >= 0) {
        ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
        close(fd);
    }
    if (atomic_exchange(&t->has_timer, 0)) timer_delete(t->timer);
}

/* Before the trees are written at a normal end (MPI_Finalize, exit): every other thread
 * still running takes a closing sample (above), so its last stretch has a location.  A
 * thread blocked in a system call that SA_RESTART does not restart (poll, epoll_wait,
 * nanosleep) sees EINTR once, at the end of the run.  Waits at most 50 ms. */
void ps_threads_close_all(void)
{
    if (!ps_sample_rate) return;
    struct sigaction current;
    if (sigaction(PS_SAMPLE_SIGNAL, NULL, &current) || !(current.sa_flags & SA_SIGINFO) ||
        current.sa_sigaction != on_sample)
        return; /* the application took the signal over: never send it ours */
    int n = atomic_load(&ps_nthreads);
    pid_t pid = getpid();
    for (int i = 0; i < n; i++) {
        ps_thread_t *t = ps_threads[i];
        if (!t || t == ps_self || t->end_ticks) continue;
        t->close_requested = 1;
        if (syscall(SYS_tgkill, pid, t->tid, PS_SAMPLE_SIGNAL) != 0) t->close_requested = 0;
    }
    struct timespec ms = {0, 1000000};
    for (int wait = 0; wait < 50; wait++) {
        int open = 0;
        for (int i = 0; i < n; i++)
            if (ps_threads[i] && ps_threads[i]->close_requested && !ps_threads[i]->close_done &&
                !ps_threads[i]->end_ticks)
                open++;
        if (!open) break;
        nanosleep(&ms, NULL);
    }
    ps_threads_stop_sampling();
}

void ps_sample_forget_after_fork(void)
{
    int n = atomic_load(&ps_nthreads);
    for (int i = 0; i < n; i++)
        if (ps_threads[i] && ps_threads[i]->sampler_fd >= 0) {
            close(ps_threads[i]->sampler_fd); /* our copy; the parent's stays open */
            ps_threads[i]->sampler_fd = -1;
        }
    ps_cct_frozen = 1;
    ps_paths_on = 0;
}

void ps_threads_stop_sampling(void)
{
    int n = atomic_load(&ps_nthreads);
    for (int i = 0; i < n; i++)
        if (ps_threads[i]) ps_sample_thread_stop(ps_threads[i]);
}

/* ---- start of the process ------------------------------------------------------------- */
/* Launchers and their daemons are not profiled (they would write profiles of their own). */
static int is_launcher(const char *name)
{
    static const char *launchers[] = {"mpirun", "mpiexec", "orterun", "prterun", "prte", "orted",
                                      "prted", "hydra_pmi_proxy", "srun", "slurmstepd", NULL};
    for (int i = 0; launchers[i]; i++) {
        size_t n = strlen(launchers[i]);
        if (strncmp(name, launchers[i], n) == 0 && (name[n] == 0 || name[n] == '.')) return 1;
    }
    return 0;
}

void ps_sample_init(void)
{
    if (!ps_option_on(ps_options.paths) || is_launcher(ps_program_name())) return;
    void ps_membarrier_init(void);
    ps_membarrier_init();
    char err[256];
    if (ps_unwind_init(err, sizeof err)) {
        atomic_fetch_add(&ps_counters.unwind_unavailable, 1);
        return;
    }
    ps_paths_on = 1;
    for (int m = 0; m < PS_TRAVERSAL_NMODES; m++)
        if (strcmp(ps_options.traversal, ps_traversal_names[m]) == 0) ps_traversal_mode = m;
    ps_traversal_check = (unsigned)atoi(ps_options.traversal_check);
    if (ps_traversal_mode == PS_TRAVERSAL_THUNK) {
        static char refused[PS_PATH_MAX + 64], module[PS_PATH_MAX];
        if (ps_thunks_shadow_stack()) { /* returns into thunks would fault */
            ps_traversal_requested = "thunk (refused: CET shadow stack)";
            ps_traversal_mode = PS_TRAVERSAL_REUSE;
        } else if (ps_unwind_own_unwinder(module, sizeof module)) {
            /* its exceptions would meet thunks we could not restore first */
            snprintf(refused, sizeof refused, "thunk (refused: %s has its own unwinder)", module);
            ps_traversal_requested = refused;
            ps_traversal_mode = PS_TRAVERSAL_REUSE;
        } else {
            ps_thunks_available = 1;
        }
    }
    ps_sample_rate = atoi(ps_options.sample_rate);
    use_wall_clock = strcmp(ps_options.sample_clock, "wall") == 0;
    if (ps_sample_rate || ps_thunks_available) { /* (thunk mode: restore requests, thunk.c) */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sample;
        /* nothing else runs inside our handler (an application handler calling MPI there
         * would meet a half-updated tree), except faults, which must stay synchronous */
        sigfillset(&sa.sa_mask);
        sigdelset(&sa.sa_mask, SIGSEGV);
        sigdelset(&sa.sa_mask, SIGBUS);
        sigdelset(&sa.sa_mask, SIGFPE);
        sigdelset(&sa.sa_mask, SIGILL);
        sigdelset(&sa.sa_mask, SIGTRAP);
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigaction(PS_SAMPLE_SIGNAL, &sa, NULL);
    }
    ps_thread_register(); /* the main thread; its sampler starts here */
}

/* ---- threads we start ------------------------------------------------------------------ */
typedef struct {
    void *(*fn)(void *);
    void *arg;
} thread_start_t;

static void thread_finish(void *arg)
{
    ps_thread_t *t = arg;
    if (!t) return;
    t->exited = 1;
    ps_sample_thread_stop(t);
    ps_kernel_thread_end(t);
    if (ps_tree_enter(t)) {
        ps_thread_close(t, ps_now());
        ps_tree_leave(t);
    }
}

static void *thread_trampoline(void *p)
{
    thread_start_t start = *(thread_start_t *)p;
    free(p);
    ps_thread_t *t = ps_thread_register();
    if (t) t->start_routine = (uintptr_t)start.fn;
    void *ret;
    pthread_cleanup_push(thread_finish, t);
    ret = start.fn(start.arg);
    pthread_cleanup_pop(1);
    return ret;
}

typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

__attribute__((visibility("default"))) int pthread_create(pthread_t *thread,
    const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    static pthread_create_fn real;
    if (!real) real = (pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (!real) return EAGAIN;
    if (!ps_paths_on) return real(thread, attr, fn, arg);
    thread_start_t *start = malloc(sizeof *start);
    if (!start) return real(thread, attr, fn, arg);
    start->fn = fn;
    start->arg = arg;
    int rc = real(thread, attr, thread_trampoline, start);
    if (rc) free(start);
    return rc;
}

/* ---- exec ------------------------------------------------------------------------------ */
/* A sample signal generated just before execve would be delivered to the new program, whose
 * handler is reset to the default action of SIGPROF: terminate.  So before any exec the
 * calling thread's sampler stops and SIGPROF is ignored for a moment, which discards a
 * pending one; if the exec fails, both come back. */
static struct sigaction exec_saved_action;

static void exec_prepare(void)
{
    ps_thread_t *t = ps_self;
    if (!ps_sample_rate) return;
    if (t) ps_sample_thread_stop(t);
    struct sigaction ignore;
    memset(&ignore, 0, sizeof ignore);
    ignore.sa_handler = SIG_IGN;
    sigaction(PS_SAMPLE_SIGNAL, &ignore, &exec_saved_action);
}

static void exec_failed(void)
{
    int saved_errno = errno;
    ps_thread_t *t = ps_self;
    if (ps_sample_rate) {
        sigaction(PS_SAMPLE_SIGNAL, &exec_saved_action, NULL);
        if (t && !t->end_ticks) ps_sample_thread_start(t);
    }
    errno = saved_errno;
}

#define PS_EXEC_REAL(name, type)                                                       \
    static type real;                                                                  \
    if (!real) real = (type)dlsym(RTLD_NEXT, name);                                    \
    if (!real) {                                                                       \
        errno = ENOSYS;                                                                \
        return -1;                                                                     \
    }

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execvpe_fn)(const char *, char *const[], char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
extern char **environ;

__attribute__((visibility("default"))) int execve(const char *path, char *const argv[], char *const envp[])
{
    PS_EXEC_REAL("execve", execve_fn);
    exec_prepare();
    int rc = real(path, argv, envp);
    exec_failed();
    return rc;
}

__attribute__((visibility("default"))) int execvpe(const char *file, char *const argv[], char *const envp[])
{
    PS_EXEC_REAL("execvpe", execvpe_fn);
    exec_prepare();
    int rc = real(file, argv, envp);
    exec_failed();
    return rc;
}

__attribute__((visibility("default"))) int fexecve(int fd, char *const argv[], char *const envp[])
{
    PS_EXEC_REAL("fexecve", fexecve_fn);
    exec_prepare();
    int rc = real(fd, argv, envp);
    exec_failed();
    return rc;
}

__attribute__((visibility("default"))) int execv(const char *path, char *const argv[])
{
    return execve(path, argv, environ);
}

__attribute__((visibility("default"))) int execvp(const char *file, char *const argv[])
{
    return execvpe(file, argv, environ);
}

/* execl, execlp, execle: the argument list into an array (on the stack), then the above. */
#define PS_EXEC_MAX_ARGS 4096
#define PS_COLLECT_ARGS(first, ap, argv, n)                                            \
    do {                                                                               \
        argv[0] = (char *)(first);                                                     \
        n = 1;                                                                         \
        while (argv[n - 1] && n < PS_EXEC_MAX_ARGS) argv[n++] = va_arg(ap, char *);   \
        if (argv[n - 1]) {                                                             \
            errno = E2BIG;                                                             \
            va_end(ap);                                                                \
            return -1;                                                                 \
        }                                                                              \
    } while (0)

__attribute__((visibility("default"))) int execl(const char *path, const char *arg, ...)
{
    char *argv[PS_EXEC_MAX_ARGS];
    int n;
    va_list ap;
    va_start(ap, arg);
    PS_COLLECT_ARGS(arg, ap, argv, n);
    va_end(ap);
    return execve(path, argv, environ);
}

__attribute__((visibility("default"))) int execlp(const char *file, const char *arg, ...)
{
    char *argv[PS_EXEC_MAX_ARGS];
    int n;
    va_list ap;
    va_start(ap, arg);
    PS_COLLECT_ARGS(arg, ap, argv, n);
    va_end(ap);
    return execvpe(file, argv, environ);
}

__attribute__((visibility("default"))) int execle(const char *path, const char *arg, ...)
{
    char *argv[PS_EXEC_MAX_ARGS];
    int n;
    va_list ap;
    va_start(ap, arg);
    PS_COLLECT_ARGS(arg, ap, argv, n);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}
