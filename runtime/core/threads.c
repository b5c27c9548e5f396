/* Threads: registration, the threads we start (the pthread_create trampoline) and exec.
 *
 * Every thread that pathscope sees is registered once, in the thread itself and never in a
 * signal handler: the main thread at load time, a thread we start in our trampoline, any other
 * at its first MPI call.  Registration maps the thread's ps_thread_t and each source's
 * per-thread state (core/source.h: thread_size) in one mapping, reached by the thread's slot,
 * and runs the sources' thread hooks in registry order.  A ps_thread_t is never freed, so the
 * end of the run can write it.
 *
 * Exec: a sample signal generated just before execve would be delivered to the new program,
 * whose handler is reset to the default action of SIGPROF: terminate.  So before any exec
 * every source's before_exec runs (sample: the calling thread's sampler stops and SIGPROF is
 * ignored for a moment, which discards a pending one); if the exec fails, exec_failed undoes
 * it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cct.h"
#include "source.h"

/* Nodes per thread: 131,072 (call paths of MPI calls and samples), or more when a source
 * needs it (tree_nodes: heap profiling).  Mapped with MAP_NORESERVE: only the nodes used cost
 * memory. */
#define PS_MAX_NODES (1u << 17)

__thread ps_thread_t *ps_self __attribute__((tls_model("initial-exec")));
ps_thread_t *ps_threads[PS_MAX_THREADS];
_Atomic int ps_nthreads;
int ps_paths_on;
int ps_membarrier_ok;

void *ps_map_zeroed(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
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

int ps_process_is_launcher(void) { return is_launcher(ps_program_name()); }

int ps_threads_init(void)
{
    if (!ps_option_on(ps_options.paths) || is_launcher(ps_program_name())) return 0;
    /* register for private expedited membarrier (Linux 4.14+): cct.h, ps_tree_fence */
    ps_membarrier_ok = syscall(SYS_membarrier, 1 << 4 /* REGISTER_PRIVATE_EXPEDITED */, 0, 0) == 0;
    return 1;
}

/* The CPU-time clock of thread tid (glibc's pthread_getcpuclockid encoding, which the kernel
 * defines: per-thread, scheduler time, user and system). */
clockid_t ps_thread_cpu_clock(int tid) { return (clockid_t)((~(unsigned)tid << 3) | 4 | 2); }

uint64_t ps_thread_cpu_ns(int tid)
{
    struct timespec ts;
    if (clock_gettime(ps_thread_cpu_clock(tid), &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- registration ---------------------------------------------------------------------- */
static size_t aligned(size_t n) { return (n + 63) & ~(size_t)63; }

ps_thread_t *ps_thread_register(void)
{
    if (ps_self) return ps_self;
    if (atomic_load(&ps_nthreads) >= PS_MAX_THREADS) return NULL;
    /* the thread and every source's state, in one mapping */
    size_t bytes = aligned(sizeof(ps_thread_t)), offset[PS_NSOURCES];
    for (int s = 0; s < PS_NSOURCES; s++) {
        offset[s] = bytes;
        bytes += aligned(ps_sources[s]->thread_size);
    }
    uint32_t max_nodes = PS_MAX_NODES;
    for (int s = 0; s < PS_NSOURCES; s++) {
        uint32_t n = ps_sources[s]->tree_nodes ? ps_sources[s]->tree_nodes() : 0;
        if (n > max_nodes) max_nodes = n;
    }
    char *base = ps_map_zeroed(bytes);
    ps_thread_t *t = (ps_thread_t *)base;
    ps_node_t *nodes = ps_map_zeroed(sizeof(ps_node_t) * max_nodes);
    uint32_t *hash = ps_map_zeroed(sizeof(uint32_t) * max_nodes * 2);
    if (!t || !nodes || !hash) {
        atomic_fetch_add(&ps_counters.alloc_failures, 1);
        return NULL;
    }
    void *state[PS_NSOURCES];
    for (int s = 0; s < PS_NSOURCES; s++) state[s] = ps_sources[s]->thread_size ? base + offset[s] : NULL;
    t->tid = (int)syscall(SYS_gettid);
    t->pthread = (uintptr_t)pthread_self();
    t->nodes = nodes;
    t->max_nodes = max_nodes;
    t->hash = hash;
    t->hash_mask = max_nodes * 2 - 1;
    t->nnodes = 1; /* the root */
    t->start_ticks = ps_now();
    t->start_cpu_ns = ps_thread_cpu_ns(t->tid);
    ps_time_start(&t->time, t->start_ticks, t->start_cpu_ns);
    for (int s = 0; s < PS_NSOURCES; s++)
        if (ps_sources[s]->thread_init && ps_sources[s]->thread_init(t, state[s]) < 0) {
            atomic_fetch_add(&ps_counters.alloc_failures, 1);
            return NULL;
        }
    t->failed_node = ps_cct_child(t, 0, PS_NODE_FAILED, 0);
    t->not_unwound_node = ps_cct_child(t, 0, PS_NODE_NOT_UNWOUND, 0);
    int index = atomic_fetch_add(&ps_nthreads, 1);
    if (index >= PS_MAX_THREADS) {
        atomic_fetch_sub(&ps_nthreads, 1);
        return NULL;
    }
    t->index = index;
    for (int s = 0; s < PS_NSOURCES; s++) ps_thread_states[s][index] = state[s];
    ps_self = t;
    ps_threads[index] = t; /* published last: the writer reads only complete entries */
    for (int s = 0; s < PS_NSOURCES; s++)
        if (ps_sources[s]->thread_start) ps_sources[s]->thread_start(t, state[s]);
    return t;
}

/* ---- threads we start ------------------------------------------------------------------ */
typedef struct {
    void *(*fn)(void *);
    void *arg;
} thread_start_t;

/* The end of a thread we started (its start routine returned, pthread_exit, cancellation):
 * the sources' thread_exit (the sampler stops, kernel time reads the thread's rusage), then
 * its timeline closes. */
static void thread_finish(void *arg)
{
    ps_thread_t *t = arg;
    if (!t) return;
    t->exited = 1;
    for (int s = 0; s < PS_NSOURCES; s++)
        if (ps_sources[s]->thread_exit) ps_sources[s]->thread_exit(t, ps_thread_state(t, s));
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
static void exec_prepare(void)
{
    for (int s = 0; s < PS_NSOURCES; s++)
        if (ps_sources[s]->before_exec) ps_sources[s]->before_exec(ps_self);
}

static void exec_failed(void)
{
    int saved_errno = errno;
    for (int s = 0; s < PS_NSOURCES; s++)
        if (ps_sources[s]->exec_failed) ps_sources[s]->exec_failed(ps_self);
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

/* ---- pathscope's own helper threads ------------------------------------------------------ */
#define PS_OWN_TIDS 16
static _Atomic int own_tids[PS_OWN_TIDS];
static _Atomic int nown_tids;

void ps_own_thread_add(int tid)
{
    int i = atomic_fetch_add(&nown_tids, 1);
    if (i < PS_OWN_TIDS) atomic_store(&own_tids[i], tid);
}

int ps_own_thread(int tid)
{
    int n = atomic_load(&nown_tids);
    for (int i = 0; i < n && i < PS_OWN_TIDS; i++)
        if (atomic_load(&own_tids[i]) == tid) return 1;
    return 0;
}
