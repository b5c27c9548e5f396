/* Kernel time: the process's side of both sources (kernel.h says what and why).
 *
 * eBPF: at load time the process connects to the node's collector (starting it if there is
 * none, protocol.h), registers itself and keeps the connection for the snapshot the rank
 * file gets at the end.  The collector's signals (PS_KERNEL_SIGNAL, value packed as
 * PS_KVAL_*) arrive right after the syscall they report, so the interrupted context is the
 * syscall's call site: the handler unwinds from there like a sample does.
 *
 * libc: libpathscope-kernel.so (libcshim.c) times the interposed functions and hands each
 * call to pathscope_kernel_call, which keeps the thread's exact table and attributes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernel.h"
#include "sysnames.h"
#include "../unwind/unwind.h"

#define PS_KERNEL_SIGNAL (SIGRTMAX - 2)

int ps_kernel_source = PS_KSRC_OFF;
static int ksock = -1;            /* the connection to the collector */
static int ebpf_signals;          /* the collector attributes by signals */
static int handler_installed;     /* PS_KERNEL_SIGNAL's handler is ours */
static uint64_t period_ns, period_ticks;
static char ebpf_note[256];       /* why paths are missing with eBPF, or "" */
/* attributions that found the thread busy (inside pathscope) or not registered: their calls
 * and time stay in the tables, not on a path */
static _Atomic uint64_t lost_attributions;
static _Atomic uint64_t attributions;
static _Atomic uint64_t own_calls; /* reports of pathscope's own system calls: on no path */
static uintptr_t shim_start, shim_end; /* libpathscope-kernel.so's code, if loaded */

static const char *const libc_names[PS_KLIBC_N] = {
#define PS_KLIBC_NAME(id, name) name,
    PS_KLIBC_FUNCTIONS(PS_KLIBC_NAME)
#undef PS_KLIBC_NAME
};

const char *ps_kernel_key_name(uintptr_t key, char buf[24])
{
    if (key >= PS_KLIBC_KEY && key < PS_KLIBC_KEY + PS_KLIBC_N) return libc_names[key - PS_KLIBC_KEY];
    return ps_syscall_name((unsigned)key, buf);
}

/* ---- attribution (both sources) ------------------------------------------------------- */

/* Puts count calls and time below the path in t->scratch[0..n) (return addresses, innermost
 * first) under the leaf key. [signal-safe, tree claimed] */
static void attribute(ps_thread_t *t, int n, int complete, uintptr_t key, uint64_t count,
                      uint64_t time)
{
    if (!complete) t->unwind_failures++;
    uint32_t parent = complete ? 0 : t->failed_node;
    uint32_t node = n > 0 ? ps_cct_insert_path(t, parent, t->scratch, n, PS_NODE_CALL) : parent;
    ps_unwind_commit(t);
    uint32_t leaf = ps_cct_child(t, node, PS_NODE_SYSCALL, key);
    if (leaf) node = leaf; /* (tree full: on the deepest node we have) */
    t->nodes[node].visits += count;
    t->nodes[node].kernel_time += time;
    atomic_fetch_add_explicit(&attributions, 1, memory_order_relaxed);
}

/* The collector's signal: the syscall that just returned, and what its thread did not yet
 * report of that syscall number. */
static void on_kernel_signal(int sig, siginfo_t *info, void *context)
{
    (void)sig;
    if (info->si_code != SI_KERNEL) return; /* not the collector's */
    int saved_errno = errno;
    uint64_t v = (uint64_t)(uintptr_t)info->si_value.sival_ptr;
    ps_thread_t *t = ps_self;
    if (!t || t->busy || !ps_tree_enter(t)) {
        atomic_fetch_add_explicit(&lost_attributions, 1, memory_order_relaxed);
        errno = saved_errno;
        return;
    }
    int complete = 0;
    int n = ps_unwind_signal(context, t->scratch, PS_MAX_DEPTH, &complete);
    /* scratch[0] is the instruction after the syscall, inside the function that made it (the
     * libc function): the leaf goes below that function's caller, as with the libc source;
     * the libc wrappers' frames (passing through to the C library) are not the program's */
    int drop = n > 0;
    while (drop < n && t->scratch[drop] >= shim_start && t->scratch[drop] < shim_end) drop++;
    /* pathscope's own system calls (writing the profile, reading /proc/self/maps) are not
     * the program's: they stay in the tables, on no path */
    if ((n > 0 && ps_unwind_in_self(t->scratch[0])) ||
        (drop < n && ps_unwind_in_self(t->scratch[drop]) && ps_thunk_index(t->scratch[drop]) < 0)) {
        atomic_fetch_add_explicit(&own_calls, 1, memory_order_relaxed);
        ps_tree_leave(t);
        errno = saved_errno;
        return;
    }
    if (drop) {
        memmove(t->scratch, t->scratch + drop, (size_t)(n - drop) * sizeof *t->scratch);
        n -= drop;
    }
    attribute(t, n, complete, PS_KVAL_NR(v), PS_KVAL_COUNT(v), PS_KVAL_NS(v));
    ps_tree_leave(t);
    errno = saved_errno;
}

/* libpathscope-kernel.so: one timed call of libc function id that started at t0 (ticks) in
 * the frame caller (return address, stack pointer, rbp: the shim's CALLER). */
void pathscope_kernel_call(int id, uint64_t t0, const uintptr_t *caller)
{
    uint64_t now = ps_now();
    ps_thread_t *t = ps_self;
    if (!t || t->busy || ps_cct_frozen || (unsigned)id >= PS_KLIBC_N) return;
    /* pathscope's own calls (the sampler's set-up, the collector connection) are not the
     * application's; a thunk is not our code */
    if (ps_unwind_in_self(caller[0]) && ps_thunk_index(caller[0]) < 0) return;
    if (!t->kstat) {
        t->kstat = ps_map_zeroed(PS_KLIBC_N * sizeof *t->kstat);
        if (!t->kstat) return;
    }
    ps_kstat_t *k = &t->kstat[id];
    uint64_t d = now - t0;
    k->count++;
    k->ticks += d;
    k->pend_count++;
    k->pend_ticks += d;
    if (k->pend_ticks < period_ticks && k->count > 1) return;
    if (!ps_tree_enter(t)) return;
    int complete = 0;
    int n = ps_unwind_from(caller[0], caller[1], caller[2], t->scratch, PS_MAX_DEPTH, &complete);
    attribute(t, n, complete, PS_KLIBC_KEY + (uintptr_t)id, k->pend_count, k->pend_ticks);
    k->pend_count = k->pend_ticks = 0;
    ps_tree_leave(t);
}

/* ---- the collector -------------------------------------------------------------------- */

static char socket_name[128]; /* protocol.h: per user, and per batch job inside one */

static void make_socket_name(void)
{
    static const char *const job_vars[] = {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID",
                                           "FLUX_JOB_ID", "JOB_ID"};
    int n = snprintf(socket_name, sizeof socket_name, PS_KSOCK_FMT, (unsigned)getuid());
    for (size_t i = 0; i < sizeof job_vars / sizeof *job_vars; i++) {
        const char *job = getenv(job_vars[i]);
        if (!job || !*job) continue;
        n += snprintf(socket_name + n, sizeof socket_name - (size_t)n, PS_KSOCK_JOB);
        for (int k = 0; job[k] && k < 64 && n + 1 < (int)sizeof socket_name; k++) {
            char c = job[k];
            int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '.' || c == '_' || c == '-';
            socket_name[n++] = ok ? c : '_';
        }
        socket_name[n] = 0;
        break;
    }
}

static int collector_connect(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "%s", socket_name);
    if (connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n))) {
        close(fd);
        return -1;
    }
    struct timeval tv = {10, 0}; /* a collector still loading its programs answers late */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* One line from fd into buf (without the newline); -1 on error or end. */
static int read_line(int fd, char *buf, size_t len)
{
    size_t n = 0;
    while (n + 1 < len) {
        char c;
        ssize_t r = read(fd, &c, 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        if (c == '\n') break;
        buf[n++] = c;
    }
    buf[n] = 0;
    return (int)n;
}

/* Starts pathscope-kcollect next to this library with a clean environment (no LD_PRELOAD:
 * it must not profile itself).  0: a collector is serving (ours or another's); -1 with the
 * reason in err. */
static int collector_start(char *err, size_t errlen)
{
    Dl_info info;
    char path[PS_PATH_MAX];
    if (!dladdr((void *)&collector_start, &info) || !info.dli_fname) {
        snprintf(err, errlen, "cannot locate libpathscope.so");
        return -1;
    }
    snprintf(path, sizeof path, "%s", info.dli_fname);
    char *slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0), "%s",
             PS_KCOLLECT_NAME);
    if (access(path, X_OK)) {
        snprintf(err, errlen, "the eBPF collector was not built (%s is missing: clang, bpftool "
                 "and libbpf-dev are needed at build time)", path);
        return -1;
    }
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC)) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
    char log_env[PS_PATH_MAX + 32] = "";
    const char *log = getenv("PS_KCOLLECT_LOG");
    if (log) snprintf(log_env, sizeof log_env, "PS_KCOLLECT_LOG=%s", log);
    char *argv[] = {path, "--serve", socket_name, NULL};
    char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", log_env[0] ? log_env : NULL, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, path, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    if (rc) {
        close(pipefd[0]);
        snprintf(err, errlen, "cannot start %s: %s", path, strerror(rc));
        return -1;
    }
    char line[256];
    struct pollfd pf = {pipefd[0], POLLIN, 0};
    /* a collector stuck in loading (the verifier) must not hold the program for ever */
    if (poll(&pf, 1, 30000) != 1 || read_line(pipefd[0], line, sizeof line) < 0) line[0] = 0;
    close(pipefd[0]);
    int status = 0;
    if (!line[0] && waitpid(pid, &status, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        snprintf(line, sizeof line, "the eBPF collector did not start within 30 s");
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == PS_KCOLLECT_EXIT_LOST))
        return 0;
    snprintf(err, errlen, "%s", line[0] ? line : "the eBPF collector failed to start");
    return -1;
}

/* Registers with the node's collector, starting it if needed.  0, or -1 with err. */
static int ebpf_attach(char *err, size_t errlen)
{
    make_socket_name();
    struct sigaction sa, cur;
    sigaction(PS_KERNEL_SIGNAL, NULL, &cur);
    int sig = 0;
    if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL) {
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_kernel_signal;
        sigfillset(&sa.sa_mask); /* (a sample landing in our update finds the thread busy anyway) */
        sigdelset(&sa.sa_mask, SIGSEGV); /* a fault stays a fault (the rank file is written) */
        sigdelset(&sa.sa_mask, SIGBUS);
        sigdelset(&sa.sa_mask, SIGFPE);
        sigdelset(&sa.sa_mask, SIGILL);
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        if (sigaction(PS_KERNEL_SIGNAL, &sa, NULL) == 0)
            sig = handler_installed = PS_KERNEL_SIGNAL;
    }
    if (!sig)
        snprintf(ebpf_note, sizeof ebpf_note, "signal %d already has a handler: no call paths",
                 PS_KERNEL_SIGNAL);
    for (int attempt = 0; attempt < 6; attempt++) {
        int fd = collector_connect();
        if (fd < 0) {
            if (collector_start(err, errlen)) return -1;
            continue;
        }
        char msg[96], line[256];
        int len = snprintf(msg, sizeof msg, "register %d %llu %llu\n", sig,
                           (unsigned long long)period_ns,
                           (unsigned long long)(sig ? (uintptr_t)on_kernel_signal : 0));
        if (send(fd, msg, (size_t)len, MSG_NOSIGNAL) != len || read_line(fd, line, sizeof line) < 0) {
            close(fd); /* a collector that was just ending: start another */
            continue;
        }
        if (strncmp(line, "ok", 2) == 0) {
            ksock = fd;
            ebpf_signals = sig && strcmp(line, "ok signals") == 0;
            if (sig && !ebpf_signals)
                snprintf(ebpf_note, sizeof ebpf_note, "the kernel cannot send signals with a value "
                         "(bpf_send_signal_task, Linux 6.13): no call paths");
            return 0;
        }
        close(fd);
        snprintf(err, errlen, "%s", strncmp(line, "error ", 6) == 0 ? line + 6 : line);
        return -1;
    }
    snprintf(err, errlen, "no eBPF collector answered");
    return -1;
}

/* A child made by fork() is not registered (its tgid is new): it must not keep the parent's
 * connection, which would keep the collector (and its node-wide tracepoints) alive. */
void ps_kernel_after_fork(void)
{
    if (ksock >= 0) ps_sys_close(ksock);
    ksock = -1;
    ps_kernel_source = PS_KSRC_OFF;
}

/* ---- start and end --------------------------------------------------------------------- */

const char *ps_kernel_init(int target, int shim_loaded, const char **note)
{
    static char msg[PS_PATH_MAX + 256];
    *note = NULL;
    const char *mode = ps_options.kernel;
    if (strcmp(mode, "off") == 0 || !target) return NULL;
    period_ns = (uint64_t)atoll(ps_options.kernel_period) * 1000;
    void *shim = shim_loaded ? dlsym(RTLD_DEFAULT, "pathscope_kernel_shim_init") : NULL;
    if (shim) ps_unwind_code_range((uintptr_t)shim, &shim_start, &shim_end);
    if (strcmp(mode, "libc") != 0) {
        char err[PS_PATH_MAX + 128];
        if (ebpf_attach(err, sizeof err) == 0) {
            ps_kernel_source = PS_KSRC_EBPF;
            return NULL;
        }
        if (strcmp(mode, "ebpf") == 0) {
            snprintf(msg, sizeof msg, "PATHSCOPE_KERNEL=ebpf: %s", err);
            return msg;
        }
        snprintf(msg, sizeof msg, "kernel time: eBPF not available (%s); measuring the libc "
                 "wrappers in the process instead", err);
        snprintf(ebpf_note, sizeof ebpf_note, "%.*s", (int)sizeof ebpf_note - 1, err);
        *note = msg;
        if (handler_installed) signal(PS_KERNEL_SIGNAL, SIG_DFL); /* (ours, unused now) */
    }
    if (!shim) {
        snprintf(msg, sizeof msg, "PATHSCOPE_KERNEL=%s: libpathscope-kernel.so is loaded but "
                 "has no pathscope_kernel_shim_init (a library from another build?)", mode);
        return msg;
    }
    ps_kernel_source = PS_KSRC_LIBC;
    period_ticks = (uint64_t)((double)period_ns * ps_ticks_per_ns()); /* (calibrates: 2 ms) */
    void (*shim_init)(void (*)(int, uint64_t, const uintptr_t *), int) =
        (void (*)(void (*)(int, uint64_t, const uintptr_t *), int))shim;
    shim_init(pathscope_kernel_call, ps_clock_uses_tsc);
    return NULL;
}

static uint64_t timeval_ns(struct timeval tv)
{
    return (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000ull;
}

static void fill_rusage(ps_thread_t *t)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru)) return;
    t->krusage = (struct ps_krusage){timeval_ns(ru.ru_utime), timeval_ns(ru.ru_stime),
                                     (uint64_t)ru.ru_minflt, (uint64_t)ru.ru_majflt,
                                     (uint64_t)ru.ru_nvcsw, (uint64_t)ru.ru_nivcsw, 1};
}

void ps_kernel_thread_end(ps_thread_t *t)
{
    if (ps_kernel_source != PS_KSRC_OFF && t && !t->krusage.valid) fill_rusage(t);
}

/* Field i (1-based, after "pid (comm)") of a /proc stat line, as a number. */
static uint64_t stat_field(const char *line, int i)
{
    const char *p = strrchr(line, ')');
    if (!p) return 0;
    for (int field = 2; field < i; field++) {
        p = strchr(p + 1, ' ');
        if (!p) return 0;
    }
    uint64_t v = 0;
    for (p++; *p >= '0' && *p <= '9'; p++) v = v * 10 + (uint64_t)(*p - '0');
    return v;
}

/* The number after key ("\nname:") in a /proc status file, 0 if absent. [signal-safe] */
static uint64_t status_field(const char *status, const char *key)
{
    const char *p = strstr(status, key);
    uint64_t v = 0;
    for (p = p ? p + strlen(key) : ""; *p && *p != '\n'; p++)
        if (*p >= '0' && *p <= '9') v = v * 10 + (uint64_t)(*p - '0');
    return v;
}

/* What the OS says of a thread that is still running (another thread writes): utime and
 * stime in clock ticks from /proc, context switches from its status file. [signal-safe] */
static void proc_rusage(ps_thread_t *t)
{
    static char path[64], buf[4096];
    ps_fmt_t p = {path, 0, sizeof path - 1, -1, 0};
    ps_fmt_str(&p, "/proc/self/task/");
    ps_fmt_u64(&p, (uint64_t)t->tid);
    size_t base = p.len;
    ps_fmt_str(&p, "/stat");
    path[p.len] = 0;
    int fd = ps_sys_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return;
    long n = ps_sys_read(fd, buf, sizeof buf - 1);
    ps_sys_close(fd);
    if (n <= 0) return;
    buf[n] = 0;
    uint64_t tick_ns = 1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK);
    t->krusage = (struct ps_krusage){stat_field(buf, 14) * tick_ns, stat_field(buf, 15) * tick_ns,
                                     stat_field(buf, 10), stat_field(buf, 12), 0, 0, 1};
    p.len = base;
    ps_fmt_str(&p, "/status");
    path[p.len] = 0;
    fd = ps_sys_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return;
    n = ps_sys_read(fd, buf, sizeof buf - 1);
    ps_sys_close(fd);
    if (n <= 0) return;
    buf[n] = 0;
    t->krusage.nvcsw = status_field(buf, "\nvoluntary_ctxt_switches:");
    t->krusage.nivcsw = status_field(buf, "\nnonvoluntary_ctxt_switches:");
}

static void tab(ps_fmt_t *f) { ps_fmt_char(f, '\t'); }

/* The collector's snapshot, copied line by line; 0 when its last line (kend) arrived. */
static int copy_snapshot(ps_fmt_t *f)
{
    static const char req[] = "snapshot\n";
    /* raw system calls: the libc wrappers' library may be in front of libc (and this may run
     * in a fatal-signal handler); sendto, not write: a collector gone must not raise SIGPIPE */
    if (ksock < 0 || syscall(SYS_sendto, ksock, req, sizeof req - 1, MSG_NOSIGNAL, NULL, 0) !=
                         (long)(sizeof req - 1))
        return -1;
    static char buf[16384];
    static char line[512];
    size_t ln = 0;
    for (;;) {
        long n = ps_sys_read(ksock, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        for (long i = 0; i < n; i++) {
            if (ln < sizeof line - 1) line[ln++] = buf[i];
            if (buf[i] != '\n') continue;
            line[ln] = 0;
            if (strncmp(line, "ksys\t", 5) == 0 || strncmp(line, "kthread\t", 8) == 0 ||
                strncmp(line, "kend\t", 5) == 0)
                ps_fmt_str(f, line);
            if (strncmp(line, "kend\t", 5) == 0) return 0;
            if (strncmp(line, "error ", 6) == 0) return -1; /* no tables will follow */
            ln = 0;
        }
    }
}

void ps_kernel_write(ps_fmt_t *f)
{
    if (ps_kernel_source == PS_KSRC_OFF) return;
    int ebpf = ps_kernel_source == PS_KSRC_EBPF;
    int nthreads = atomic_load(&ps_nthreads);
    /* the threads' OS view; the writing thread's own is current */
    pid_t self = (pid_t)gettid();
    for (int i = 0; i < nthreads; i++) {
        ps_thread_t *t = ps_threads[i];
        if (!t) continue;
        if (t->tid == self) fill_rusage(t);
        else if (!t->krusage.valid) proc_rusage(t);
    }
    int snapshot_ok = 1;
    /* kernel source period_ns paths attributions lost own note */
    ps_fmt_str(f, "kernel\t");
    ps_fmt_str(f, ebpf ? "ebpf" : "libc"); tab(f);
    ps_fmt_u64(f, period_ns); tab(f);
    ps_fmt_str(f, ebpf ? (ebpf_signals ? "signals" : "none") : "wrappers"); tab(f);
    ps_fmt_u64(f, atomic_load(&attributions)); tab(f);
    ps_fmt_u64(f, atomic_load(&lost_attributions)); tab(f);
    ps_fmt_u64(f, atomic_load(&own_calls)); tab(f);
    ps_fmt_tsv(f, ebpf_note[0] ? ebpf_note : "-"); ps_fmt_char(f, '\n');
    for (int i = 0; i < nthreads; i++) {
        ps_thread_t *t = ps_threads[i];
        if (!t || !t->krusage.valid) continue;
        struct ps_krusage *r = &t->krusage;
        ps_fmt_str(f, "kos\t");
        ps_fmt_u64(f, (uint64_t)t->tid); tab(f);
        ps_fmt_u64(f, r->utime_ns); tab(f);
        ps_fmt_u64(f, r->stime_ns); tab(f);
        ps_fmt_u64(f, r->minflt); tab(f);
        ps_fmt_u64(f, r->majflt); tab(f);
        ps_fmt_u64(f, r->nvcsw); tab(f);
        ps_fmt_u64(f, r->nivcsw); ps_fmt_char(f, '\n');
    }
    if (ebpf) {
        snapshot_ok = copy_snapshot(f) == 0;
    } else {
        char name[24];
        for (int i = 0; i < nthreads; i++) {
            ps_thread_t *t = ps_threads[i];
            if (!t || !t->kstat) continue;
            for (int id = 0; id < PS_KLIBC_N; id++) {
                if (!t->kstat[id].count) continue;
                ps_fmt_str(f, "ksys\t");
                ps_fmt_u64(f, (uint64_t)t->tid); tab(f);
                ps_fmt_str(f, ps_kernel_key_name(PS_KLIBC_KEY + (uintptr_t)id, name)); tab(f);
                ps_fmt_u64(f, t->kstat[id].count); tab(f);
                ps_fmt_u64(f, ps_ticks_to_ns(t->kstat[id].ticks)); ps_fmt_char(f, '\n');
            }
        }
        ps_fmt_str(f, "kend\t0\t0\n");
    }
    if (!snapshot_ok) ps_fmt_str(f, "kend\t-\t-\n"); /* the collector did not answer: no tables */
}

/* Node time as written (ns) */
uint64_t ps_kernel_node_ns(const ps_node_t *n)
{
    return ps_kernel_source == PS_KSRC_LIBC ? ps_ticks_to_ns(n->kernel_time) : n->kernel_time;
}
