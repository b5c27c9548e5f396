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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernel.h"
#include "kernel_thread.h"
#include "sysnames.h"
#include "../core/record.h"
#include "../unwind/unwind.h"
#include "../sample/sample.h"

#define PS_KERNEL_SIGNAL (SIGRTMAX - 2)

/* (the messages name these bounds in words) */
_Static_assert(PS_KREGISTER_MS == 10000 && PS_KSNAPSHOT_MS == 5000 && PS_KLINE_MAX == 256 &&
               PS_KSNAPSHOT_MAX == 16u << 20 && PS_KSNAPSHOT_READ_MAX == 64u << 20,
               "update the messages that name the collector's bounds");

int ps_kernel_source = PS_KSRC_OFF;
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

/* A report of syscall nr that reached no path: its calls stay off the estimates (under
 * [kernel: no call path]), as far as the thread's table can be had. [signal-safe] */
static void note_dropped(ps_thread_t *t, uintptr_t nr, uint64_t count, uint64_t ns)
{
    kernel_thread_t *kt = kernel_of(t);
    if (nr >= PS_NR_SYSCALLS) return;
    if (!kt->dropped) kt->dropped = ps_map_zeroed(PS_NR_SYSCALLS * sizeof *kt->dropped);
    if (!kt->dropped) return; /* (spread with the rest: one report's worth) */
    kt->dropped[nr].count += count;
    kt->dropped[nr].ns += ns;
}

/* Puts count calls and time on the path of `from` under the leaf key; PS_TRIM_DROP: a call
 * of pathscope's own, on no path (counted). [signal-safe, tree claimed] */
static void attribute(ps_thread_t *t, const ps_from_t *from, uintptr_t key, uint64_t count,
                      uint64_t time)
{
    uint32_t node;
    if (ps_cct_record(t, from, PS_NODE_SYSCALL, key, NULL, &node) < 0) {
        atomic_fetch_add_explicit(&own_calls, 1, memory_order_relaxed);
        if (ps_kernel_source == PS_KSRC_EBPF) note_dropped(t, key, count, time);
        return;
    }
    t->nodes[node].visits += count;
    t->nodes[node].kernel_time += time;
    atomic_fetch_add_explicit(&attributions, 1, memory_order_relaxed);
}

/* The trim of a signal's path (frames from the interrupted context).  frames[0] is the
 * instruction after the syscall, inside the function that made it (the libc function): the
 * leaf goes below that function's caller, as with the libc source; the libc wrappers' frames
 * (passing through to the C library) are not the program's.  pathscope's own system calls
 * (writing the profile, reading /proc/self/maps) are not the program's either: they stay in
 * the tables, on no path (PS_TRIM_DROP). [signal-safe] */
static int trim_signal_path(uintptr_t *frames, int n, void *arg)
{
    (void)arg;
    int drop = n > 0;
    while (drop < n && frames[drop] >= shim_start && frames[drop] < shim_end) drop++;
    if ((n > 0 && ps_unwind_in_self(frames[0])) ||
        (drop < n && ps_unwind_in_self(frames[drop]) && ps_thunk_index(frames[drop]) < 0))
        return PS_TRIM_DROP;
    if (drop) {
        memmove(frames, frames + drop, (size_t)(n - drop) * sizeof *frames);
        n -= drop;
    }
    return n;
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
    if (!t || !ps_tree_claim(t, 0)) {
        atomic_fetch_add_explicit(&lost_attributions, 1, memory_order_relaxed);
        /* (the handler is not re-entered: it masks every signal it may meet) */
        if (t && !ps_cct_frozen && PS_KVAL_NR(v) != PS_KVAL_NR_OFFCPU)
            note_dropped(t, PS_KVAL_NR(v), PS_KVAL_COUNT(v), PS_KVAL_NS(v));
        errno = saved_errno;
        return;
    }
    if (PS_KVAL_NR(v) == PS_KVAL_NR_OFFCPU) {
        /* time off the CPU, the thread back where it stopped: the sampler's (sample.c) */
        ps_sample_offcpu(t, context, PS_KVAL_NS(v));
    } else {
        ps_from_t from = {.how = PS_FROM_CONTEXT, .context = context, .trim = trim_signal_path};
        attribute(t, &from, PS_KVAL_NR(v), PS_KVAL_COUNT(v), PS_KVAL_NS(v));
    }
    ps_tree_release(t);
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
    kernel_thread_t *kt = kernel_of(t);
    if (!kt->kstat) {
        kt->kstat = ps_map_zeroed(PS_KLIBC_N * sizeof *kt->kstat);
        if (!kt->kstat) return;
    }
    ps_kstat_t *k = &kt->kstat[id];
    uint64_t d = now - t0;
    k->count++;
    k->ticks += d;
    k->pend_count++;
    k->pend_ticks += d;
    if (k->pend_ticks < period_ticks && k->count > 1) return;
    if (!ps_tree_claim(t, 0)) return;
    ps_from_t from = {.how = PS_FROM_FRAME, .ra = caller[0], .sp = caller[1], .rbp = caller[2]};
    attribute(t, &from, PS_KLIBC_KEY + (uintptr_t)id, k->pend_count, k->pend_ticks);
    k->pend_count = k->pend_ticks = 0;
    ps_tree_release(t);
}

/* ---- the collector -------------------------------------------------------------------- */
/* Everything read from the collector's socket is bounded (protocol.h): lines in size, answers
 * in time by deadlines taken once, snapshots in size; and nothing is sent before the peer's
 * credentials were checked.  The code reached from ps_kernel_fetch() may run in a fatal-signal
 * handler: raw system calls, static buffers, no stdio. */

static char socket_name[128]; /* protocol.h: per user, and per batch job inside one */
static char socket_shown[160]; /* for messages: PS_KSOCK_DIR/NAME, or @NAME (abstract) */
static unsigned socket_uid;    /* the uid in the name: 0 means a filesystem socket */
static ps_ownfd_t ksock = {.fd = -1}; /* the connection to the collector, once registered */
static struct ucred collector_cred;   /* the listener's credentials */
static int ebpf_usable;        /* ksock (or a new connection) may still give tables */
static uint64_t proc_start_boot_ns; /* this process's start (CLOCK_BOOTTIME): its age bounds numbers */

/* Why attaching failed: the collector cannot be had (a note, as ever), or something that
 * is not a working collector holds its place (a warning: someone should look). */
enum { ATTACH_OK = 0, ATTACH_UNAVAILABLE = -1, ATTACH_PEER = -2, ATTACH_ANSWER = -3 };
static void snapshot_prepare(void);

static void make_socket_name(void)
{
    static const char *const job_vars[] = {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID",
                                           "FLUX_JOB_ID", "JOB_ID"};
    socket_uid = (unsigned)getuid();
    int n = snprintf(socket_name, sizeof socket_name, PS_KSOCK_FMT, socket_uid);
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
    if (socket_uid == 0) snprintf(socket_shown, sizeof socket_shown, PS_KSOCK_DIR "/%s", socket_name);
    else snprintf(socket_shown, sizeof socket_shown, "@%s", socket_name);
}

static socklen_t collector_address(struct sockaddr_un *a)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    size_t n = strlen(socket_name);
    if (socket_uid == 0) { /* (PS_KSOCK_DIR + a 64-character job id fit: 103 of 108 bytes) */
        ps_fmt_t f = {a->sun_path, 0, sizeof a->sun_path - 1, -1, 0};
        ps_fmt_str(&f, PS_KSOCK_DIR "/");
        ps_fmt_str(&f, socket_name);
        n = f.len + 1; /* with its '\0' */
    } else {
        memcpy(a->sun_path + 1, socket_name, n + 1 < sizeof a->sun_path ? n : sizeof a->sun_path - 2);
        n += 1; /* the leading '\0' */
    }
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
}

static uint64_t ms_ns(uint64_t ms) { return ms * 1000000ull; }

/* Waits until fd is readable or the deadline (monotonic ns) has passed: 1 readable, 0 at
 * the deadline, -1 on error. [signal-safe] */
static int wait_readable(int fd, uint64_t deadline)
{
    for (;;) {
        uint64_t now = ps_clock_monotonic_ns();
        if (now >= deadline) return 0;
        uint64_t left = deadline - now;
        struct pollfd pf = {fd, POLLIN, 0};
        struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
        long r = syscall(SYS_ppoll, &pf, 1, &ts, NULL, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r > 0) return 1;
    }
}

/* One line (without its '\n') from fd into line[cap] by the deadline.  Byte by byte: nothing
 * after the line is taken from the stream.  Returns its length; -1 at end of file or on an
 * error, -2 at the deadline, -3 when the line does not fit. [signal-safe] */
static int read_line_by(int fd, char *line, size_t cap, uint64_t deadline)
{
    size_t n = 0;
    for (;;) {
        int w = wait_readable(fd, deadline);
        if (w <= 0) return w == 0 ? -2 : -1;
        char c;
        long r = ps_sys_read(fd, &c, 1);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r <= 0) return -1;
        if (c == '\n') break;
        if (n + 1 >= cap) return -3;
        line[n++] = c;
    }
    line[n] = 0;
    return (int)n;
}

/* The collector's text in our messages: printable ASCII only, bounded. */
static void copy_printable(char *dst, size_t cap, const char *src)
{
    size_t n = 0;
    for (; src[n] && n + 1 < cap; n++) dst[n] = src[n] >= ' ' && src[n] < 127 ? src[n] : '?';
    dst[n] = 0;
}

/* Connects and checks who listens (SO_PEERCRED, recorded by the kernel when the listener
 * called listen()): root, or our own uid unless we run set-uid.  Nothing is sent before.
 * Returns a connected non-blocking descriptor; -1 when nobody listens; with err set,
 * ATTACH_PEER when the listener is not to be trusted, ATTACH_ANSWER when its listen queue
 * stayed full until the deadline. */
static int collector_connect(uint64_t deadline, char *err, size_t errlen)
{
    struct sockaddr_un a;
    socklen_t alen = collector_address(&a);
    for (;;) {
        /* non-blocking: a listener that never accepts cannot hold connect() */
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) return -1;
        if (connect(fd, (struct sockaddr *)&a, alen) == 0) {
            struct ucred cr;
            socklen_t len = sizeof cr;
            if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) || len != sizeof cr) {
                snprintf(err, errlen, "the credentials of the collector socket %s cannot be "
                         "read (%s)", socket_shown, strerror(errno));
                close(fd);
                return ATTACH_PEER;
            }
            uid_t me = getuid();
            int own_ok = me == geteuid(); /* set-uid: only root may be trusted */
            if (cr.uid != 0 && !(own_ok && cr.uid == me)) {
                char whom[48];
                if (me == 0 || !own_ok) snprintf(whom, sizeof whom, "root");
                else snprintf(whom, sizeof whom, "root or uid %u", (unsigned)me);
                snprintf(err, errlen, "the collector socket %s is held by uid %u (pid %d), not %s",
                         socket_shown, (unsigned)cr.uid, (int)cr.pid, whom);
                close(fd);
                return ATTACH_PEER;
            }
            collector_cred = cr;
            return fd;
        }
        int e = errno;
        close(fd);
        if (e != EAGAIN) return -1; /* ENOENT, ECONNREFUSED: nobody listens */
        /* the listen queue is full (many ranks at once while the collector loads) */
        if (ps_clock_monotonic_ns() >= deadline) {
            snprintf(err, errlen, "the collector socket %s accepted no connection within %d s",
                     socket_shown, PS_KREGISTER_MS / 1000);
            return ATTACH_ANSWER;
        }
        struct timespec ms = {0, 10000000};
        nanosleep(&ms, NULL);
    }
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
    char line[PS_KLINE_MAX];
    /* a collector stuck in loading (the verifier) must not hold the program for ever */
    if (read_line_by(pipefd[0], line, sizeof line, ps_clock_monotonic_ns() + ms_ns(30000)) < 0)
        line[0] = 0;
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

/* Sends a whole request without ever blocking. [signal-safe] */
static int send_request(int fd, const char *msg, size_t len)
{
    long n;
    do n = syscall(SYS_sendto, fd, msg, len, MSG_NOSIGNAL | MSG_DONTWAIT, NULL, 0);
    while (n < 0 && errno == EINTR);
    return n == (long)len ? 0 : -1;
}

/* Off-CPU reports (protocol.h) one sampling interval apart, when call paths are sampled:
 * they take the place of the wall-clock evidence at samples (sample.c). */
static uint64_t offcpu_period_ns(void)
{
    return ps_paths_on && ps_sample_rate > 0 ? 1000000000ull / (uint64_t)ps_sample_rate : 0;
}

/* Registers with the node's collector, starting it if needed: ATTACH_OK, or a failure with
 * its reason in err. */
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
        sigdelset(&sa.sa_mask, SIGTRAP); /* a probe being patched (probe/patch.c) */
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        if (sigaction(PS_KERNEL_SIGNAL, &sa, NULL) == 0)
            sig = handler_installed = PS_KERNEL_SIGNAL;
    }
    if (!sig)
        snprintf(ebpf_note, sizeof ebpf_note, "signal %d already has a handler: no call paths",
                 PS_KERNEL_SIGNAL);
    for (int attempt = 0; attempt < 6; attempt++) {
        uint64_t deadline = ps_clock_monotonic_ns() + ms_ns(PS_KREGISTER_MS);
        int fd = collector_connect(deadline, err, errlen);
        if (fd < -1) return fd;
        if (fd < 0) {
            if (collector_start(err, errlen)) return ATTACH_UNAVAILABLE;
            continue;
        }
        char msg[128], line[PS_KLINE_MAX], text[PS_KLINE_MAX];
        int len = snprintf(msg, sizeof msg, "register %d %llu %llu %llu\n", sig,
                           (unsigned long long)period_ns,
                           (unsigned long long)(sig ? (uintptr_t)on_kernel_signal : 0),
                           (unsigned long long)offcpu_period_ns());
        int n = send_request(fd, msg, (size_t)len) ? -1 : read_line_by(fd, line, sizeof line, deadline);
        if (n == -1) {
            close(fd); /* a collector that was just ending: start another */
            continue;
        }
        if (n < 0) {
            snprintf(err, errlen, "the collector (uid %u, pid %d) %s", (unsigned)collector_cred.uid,
                     (int)collector_cred.pid, n == -2 ? "did not answer the registration within "
                     "10 s" : "answered the registration with a line over 256 bytes");
            close(fd);
            return ATTACH_ANSWER;
        }
        if (strcmp(line, "ok signals") == 0 || strcmp(line, "ok nosignals") == 0) {
            ps_fd_adopt(fd, &ksock);
            ebpf_usable = 1;
            ebpf_signals = sig && strcmp(line, "ok signals") == 0;
            ps_offcpu_reported = ebpf_signals && offcpu_period_ns() != 0;
            if (sig && !ebpf_signals)
                snprintf(ebpf_note, sizeof ebpf_note, "the kernel cannot send signals with a value "
                         "(bpf_send_signal_task, Linux 6.13): no call paths");
            return ATTACH_OK;
        }
        close(fd);
        if (strncmp(line, "error ", 6) == 0) { /* the collector's own reason */
            copy_printable(text, sizeof text, line + 6);
            snprintf(err, errlen, "%s", text);
            return ATTACH_UNAVAILABLE;
        }
        copy_printable(text, 64, line);
        snprintf(err, errlen, "the collector (uid %u, pid %d) answered the registration with "
                 "'%s', not ok or error", (unsigned)collector_cred.uid, (int)collector_cred.pid,
                 text);
        return ATTACH_ANSWER;
    }
    snprintf(err, errlen, "no eBPF collector answered");
    return ATTACH_UNAVAILABLE;
}

/* A child made by fork() is not registered (its tgid is new): it must not keep the parent's
 * connection, which would keep the collector (and its node-wide tracepoints) alive. */
void ps_kernel_after_fork(void)
{
    ps_fd_release(&ksock);
    ebpf_usable = 0;
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
        snapshot_prepare();
        int attached = ebpf_attach(err, sizeof err);
        if (attached == ATTACH_OK) {
            ps_kernel_source = PS_KSRC_EBPF;
            return NULL;
        }
        /* ebpf demands eBPF: whatever stands in the way, the program does not start without
         * it (as when eBPF is not allowed) */
        if (strcmp(mode, "ebpf") == 0) {
            snprintf(msg, sizeof msg, "PATHSCOPE_KERNEL=ebpf: %s", err);
            return msg;
        }
        snprintf(ebpf_note, sizeof ebpf_note, "%.*s", (int)sizeof ebpf_note - 1, err);
        if (attached != ATTACH_UNAVAILABLE) {
            /* not a working collector where ours should be: a warning in the rank file and at
             * the end of the run, where someone will read it */
            snprintf(msg, sizeof msg, "kernel time: %s: measuring the libc wrappers in the "
                     "process instead", err);
            ps_warn(attached == ATTACH_PEER ? "kernel-collector-peer" : "kernel-collector-answer",
                    msg);
        } else {
            snprintf(msg, sizeof msg, "kernel time: eBPF not available (%s); measuring the libc "
                     "wrappers in the process instead", err);
            *note = msg;
        }
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
    kernel_of(t)->rusage = (ps_krusage_t){timeval_ns(ru.ru_utime), timeval_ns(ru.ru_stime),
                                          (uint64_t)ru.ru_minflt, (uint64_t)ru.ru_majflt,
                                          (uint64_t)ru.ru_nvcsw, (uint64_t)ru.ru_nivcsw, 1};
}

void ps_kernel_thread_end(ps_thread_t *t)
{
    if (ps_kernel_source != PS_KSRC_OFF && t && !kernel_of(t)->rusage.valid) fill_rusage(t);
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
    if (ps_read_small(path, buf, sizeof buf) <= 0) return;
    uint64_t tick_ns = 1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK);
    ps_krusage_t *r = &kernel_of(t)->rusage;
    *r = (ps_krusage_t){stat_field(buf, 14) * tick_ns, stat_field(buf, 15) * tick_ns,
                        stat_field(buf, 10), stat_field(buf, 12), 0, 0, 1};
    p.len = base;
    ps_fmt_str(&p, "/status");
    path[p.len] = 0;
    if (ps_read_small(path, buf, sizeof buf) <= 0) return;
    r->nvcsw = status_field(buf, "\nvoluntary_ctxt_switches:");
    r->nivcsw = status_field(buf, "\nnonvoluntary_ctxt_switches:");
}


/* ---- the snapshot: fetched before the rank file's warnings, copied with the tables ------ */

/* Syscall name -> number (ksys lines carry names): open addressing over the generated table,
 * filled at start (ps_kernel_init), read in signal handlers. */
#define NAME_SLOTS 1024
static uint16_t name_slot[NAME_SLOTS]; /* number + 1; 0: empty */

static uint32_t name_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static void syscall_names_index(void)
{
    for (unsigned nr = 0; nr < PS_NR_SYSCALLS; nr++) {
        const char *name = ps_syscall_names[nr];
        if (!name) continue;
        uint32_t h = name_hash(name, strlen(name));
        while (name_slot[h % NAME_SLOTS]) h++;
        name_slot[h % NAME_SLOTS] = (uint16_t)(nr + 1);
    }
}

/* The number of the syscall named s[0..n), as ps_syscall_name() writes it; -1 if no syscall
 * has that name. [signal-safe] */
static int syscall_number(const char *s, size_t n)
{
    static const char prefix[] = "syscall_";
    if (n > 8 && memcmp(s, prefix, 8) == 0) {
        unsigned nr = 0;
        for (size_t i = 8; i < n; i++) {
            if (s[i] < '0' || s[i] > '9' || (i > 8 && nr == 0) || n - 8 > 3) return -1;
            nr = nr * 10 + (unsigned)(s[i] - '0');
        }
        return nr < PS_NR_SYSCALLS && !ps_syscall_names[nr] ? (int)nr : -1;
    }
    for (uint32_t h = name_hash(s, n);; h++) {
        unsigned slot = name_slot[h % NAME_SLOTS];
        if (!slot) return -1;
        const char *name = ps_syscall_names[slot - 1];
        if (strlen(name) == n && memcmp(name, s, n) == 0) return (int)slot - 1;
    }
}

int ps_kernel_syscall_number(const char *s, size_t n) { return syscall_number(s, n); }

static uint64_t stat_field(const char *line, int i);

/* At start: the name index, and the process's start time (its age bounds the numbers). */
static void snapshot_prepare(void)
{
    static int done;
    if (done++) return;
    syscall_names_index();
    proc_start_boot_ns = ps_proc_start_time(getpid()) * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
}

static uint64_t boottime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Is tid a thread of this process: one pathscope registered, or one alive now? The lines
 * come grouped by thread: the last answer is kept. [signal-safe] */
static uint64_t last_tid;
static int last_ok;

static int own_thread(uint64_t tid)
{
    if (tid == last_tid) return last_ok;
    last_tid = tid;
    last_ok = 0;
    int n = atomic_load(&ps_nthreads);
    for (int i = 0; i < n && !last_ok; i++)
        if (ps_threads[i] && (uint64_t)ps_threads[i]->tid == tid) last_ok = 1;
    if (!last_ok && tid <= 0x7fffffff && ps_own_thread((int)tid)) last_ok = 1;
    if (!last_ok && tid <= 0x7fffffff) {
        char path[48];
        ps_fmt_t p = {path, 0, sizeof path - 1, -1, 0};
        ps_fmt_str(&p, "/proc/self/task/");
        ps_fmt_u64(&p, tid);
        path[p.len] = 0;
        struct stat st;
        last_ok = syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) == 0;
    }
    return last_ok;
}

typedef struct {
    char *buf;             /* the checked lines (PS_KSNAPSHOT_MAX, mapped once) */
    size_t len;
    int complete;          /* its kend line arrived: copy it */
    char kend[PS_KLINE_MAX];
    uint64_t limit;        /* numbers of this process: at most its age + 1 s, in ns */
    int phase;             /* 0: ksys lines, 1: kthread lines, 2: after kend */
    uint64_t last_ksys, last_kthread; /* (tid, nr) and tid of the last line taken */
    uint64_t invalid, over; /* lines dropped: not valid, beyond PS_KSNAPSHOT_MAX */
    const char *first_invalid;
} snapshot_t;

static snapshot_t snap;

/* Finds the tab-separated fields of line (no '\n'; left unchanged); returns their count, or
 * max + 1 when there are more than max. */
static int split_tabs(char *line, char **field, size_t *flen, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        char *tab = strchr(p, '\t');
        if (n == max) return max + 1;
        field[n] = p;
        flen[n] = tab ? (size_t)(tab - p) : strlen(p);
        n++;
        if (!tab) return n;
        p = tab + 1;
    }
}

/* An unsigned decimal of at most 15 digits (no sign, no leading zero), <= max. */
static int parse_number(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    if (n == 0 || n > 15 || (n > 1 && s[0] == '0')) return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > max) return -1;
    *out = v;
    return 0;
}

#define PS_KTID_MAX 4194304u /* PID_MAX_LIMIT */
#define PS_KEND_MAX ((1ull << 53) - 1)

/* Checks one line of the snapshot (without its '\n'); NULL if it is taken, else why not.
 * [signal-safe] */
static const char *snapshot_check(char *line)
{
    char *field[7];
    size_t flen[7];
    uint64_t v[4], tid;
    if (strncmp(line, "ksys\t", 5) == 0) {
        if (split_tabs(line, field, flen, 6) != 5) return "a ksys line without 5 fields";
        if (snap.phase != 0) return "a ksys line after the kthread lines";
        if (parse_number(field[1], flen[1], PS_KTID_MAX, &tid) || tid == 0)
            return "a thread id out of range";
        int nr = syscall_number(field[2], flen[2]);
        if (nr < 0) return "an unknown system call name";
        if (parse_number(field[3], flen[3], snap.limit, &v[0]) || v[0] == 0 ||
            parse_number(field[4], flen[4], snap.limit, &v[1]))
            return "a count or time out of range";
        uint64_t key = tid << 10 | (uint64_t)nr;
        if (key <= snap.last_ksys) return "a ksys line out of order or repeated";
        if (!own_thread(tid)) return "a thread that is not one of this process's";
        snap.last_ksys = key;
    } else if (strncmp(line, "kthread\t", 8) == 0) {
        if (split_tabs(line, field, flen, 7) != 6) return "a kthread line without 6 fields";
        if (snap.phase > 1) return "a kthread line after kend";
        if (parse_number(field[1], flen[1], PS_KTID_MAX, &tid) || tid == 0)
            return "a thread id out of range";
        for (int i = 0; i < 4; i++)
            if (parse_number(field[2 + i], flen[2 + i], snap.limit, &v[i]))
                return "a time or count out of range";
        if (tid <= snap.last_kthread) return "a kthread line out of order or repeated";
        if (!own_thread(tid)) return "a thread that is not one of this process's";
        snap.last_kthread = tid;
        snap.phase = 1;
    } else if (strncmp(line, "kend\t", 5) == 0) {
        if (split_tabs(line, field, flen, 3) != 3 ||
            parse_number(field[1], flen[1], PS_KEND_MAX, &v[0]) ||
            parse_number(field[2], flen[2], PS_KEND_MAX, &v[1]))
            return "a malformed kend line";
        snap.phase = 2;
    } else {
        return "a line of no known kind";
    }
    return NULL;
}

/* Takes a checked line into the buffer, or counts it when the buffer is full. */
static void snapshot_take(const char *line, size_t n)
{
    if (snap.len + n + 1 > PS_KSNAPSHOT_MAX) {
        snap.over++;
        return;
    }
    memcpy(snap.buf + snap.len, line, n);
    snap.buf[snap.len + n] = '\n';
    snap.len += n + 1;
}

/* ps_warn with "kernel time: " + a, b, c (stack only). [signal-safe] */
static void warn3(const char *key, const char *a, const char *b, const char *c)
{
    char text[320];
    ps_fmt_t f = {text, 0, sizeof text - 1, -1, 0};
    ps_fmt_str(&f, "kernel time: ");
    ps_fmt_str(&f, a);
    if (b) ps_fmt_str(&f, b);
    if (c) ps_fmt_str(&f, c);
    text[f.len] = 0;
    ps_warn(key, text);
}

/* The snapshot could not be had: no tables in this or any later rank file, no later wait. */
static void snapshot_failed(const char *why)
{
    warn3("kernel-snapshot-failed", "the collector's tables did not arrive (", why,
          "): no per-thread system-call tables");
    ps_fd_release(&ksock);
    ebpf_usable = 0;
}

/* Reads the snapshot's answer by the deadline into snap. [signal-safe] */
static void snapshot_read(uint64_t deadline)
{
    static char chunk[16384];
    static char line[PS_KLINE_MAX];
    size_t ln = 0, total = 0;
    int overlong = 0;
    for (;;) {
        /* (poll only looks; the descriptor is checked again right before it is read) */
        int w = ps_fd_owned(&ksock) ? wait_readable(ksock.fd, deadline) : -1;
        if (w == 0) {
            snapshot_failed("no complete answer within 5 s");
            return;
        }
        if (w < 0 || !ps_fd_owned(&ksock)) {
            snapshot_failed(w < 0 && ps_fd_owned(&ksock) ? "the connection failed" :
                            "the application closed pathscope's connection meanwhile");
            return;
        }
        long n = ps_sys_read(ksock.fd, chunk, sizeof chunk);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) {
            snapshot_failed("the collector closed the connection");
            return;
        }
        total += (size_t)n;
        if (total > PS_KSNAPSHOT_READ_MAX) {
            snapshot_failed("more than 64 MiB without an end");
            return;
        }
        for (long i = 0; i < n; i++) {
            char c = chunk[i];
            if (c != '\n') {
                if (ln + 1 < sizeof line) line[ln++] = c;
                else overlong = 1;
                continue;
            }
            line[ln] = 0;
            size_t len = ln;
            ln = 0;
            if (overlong) {
                overlong = 0;
                if (!snap.invalid++) snap.first_invalid = "a line over 256 bytes";
                continue;
            }
            if (strncmp(line, "error ", 6) == 0) { /* no tables will follow */
                snapshot_failed("the collector answered with an error");
                return;
            }
            const char *why = snapshot_check(line);
            if (why) {
                if (!snap.invalid++) snap.first_invalid = why;
                continue;
            }
            if (snap.phase == 2) { /* kend: kept apart, so that a full buffer never loses it */
                memcpy(snap.kend, line, len + 1);
                snap.complete = 1;
                return;
            }
            snapshot_take(line, len);
        }
    }
}

void ps_kernel_fetch(void)
{
    if (ps_kernel_source != PS_KSRC_EBPF) return;
    snap.complete = 0;
    snap.len = 0;
    snap.phase = 0;
    snap.last_ksys = snap.last_kthread = 0;
    snap.invalid = snap.over = 0;
    snap.first_invalid = NULL;
    last_tid = 0;
    if (!ebpf_usable) return;
    if (!snap.buf && !(snap.buf = ps_map_zeroed(PS_KSNAPSHOT_MAX))) {
        snapshot_failed("no memory for it");
        return;
    }
    if (!ps_fd_owned(&ksock)) {
        /* the application closed (or replaced) our descriptor: never touch that number
         * again; the collector still tracks this process, a new connection can ask */
        char err[256], fdnum[24];
        ps_fmt_t d = {fdnum, 0, sizeof fdnum - 1, -1, 0};
        ps_fmt_i64(&d, ksock.fd);
        fdnum[d.len] = 0;
        ksock.fd = -1;
        int fd = collector_connect(ps_clock_monotonic_ns() + ms_ns(PS_KREGISTER_MS), err, sizeof err);
        if (fd < 0) {
            warn3("kernel-socket-lost", "the application closed pathscope's connection to the "
                  "collector (descriptor ", fdnum, ")");
            snapshot_failed(fd < -1 ? err : "no collector to reconnect to");
            return;
        }
        warn3("kernel-socket-lost", "the application closed pathscope's connection to the "
              "collector (descriptor ", fdnum, "): the tables came over a new one");
        ps_fd_adopt(fd, &ksock);
    }
    uint64_t age = boottime_ns() - proc_start_boot_ns;
    snap.limit = age + 1000000000ull;
    static const char req[] = "snapshot\n";
    if (send_request(ksock.fd, req, sizeof req - 1)) {
        snapshot_failed("the request could not be sent");
        return;
    }
    snapshot_read(ps_clock_monotonic_ns() + ms_ns(PS_KSNAPSHOT_MS));
    if (!snap.complete) return; /* (said: no tables at all) */
    char count[24];
    if (snap.invalid) {
        ps_fmt_t c = {count, 0, sizeof count - 1, -1, 0};
        ps_fmt_u64(&c, snap.invalid);
        count[c.len] = 0;
        char why[160];
        ps_fmt_t w = {why, 0, sizeof why - 1, -1, 0};
        ps_fmt_str(&w, " lines of the collector's snapshot were invalid and dropped (the first: ");
        ps_fmt_str(&w, snap.first_invalid);
        ps_fmt_str(&w, ")");
        why[w.len] = 0;
        warn3("kernel-snapshot-invalid", count, why, NULL);
    }
    if (snap.over) {
        ps_fmt_t c = {count, 0, sizeof count - 1, -1, 0};
        ps_fmt_u64(&c, snap.over);
        count[c.len] = 0;
        warn3("kernel-snapshot-truncated", "the collector's snapshot exceeded 16 MiB: ", count,
              " lines beyond it were dropped");
    }
}

const char *ps_kernel_snapshot(size_t *len)
{
    if (ps_kernel_source != PS_KSRC_EBPF || !snap.complete) return NULL;
    *len = snap.len;
    return snap.buf;
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
        else if (!kernel_of(t)->rusage.valid) proc_rusage(t);
    }
    int snapshot_ok = 1;
    /* kernel source period_ns paths attributions lost own note */
    ps_fmt_str(f, "kernel\t");
    ps_fmt_str(f, ebpf ? "ebpf" : "libc"); ps_fmt_tab(f);
    ps_fmt_u64(f, period_ns); ps_fmt_tab(f);
    ps_fmt_str(f, ebpf ? (ebpf_signals ? "signals" : "none") : "wrappers"); ps_fmt_tab(f);
    ps_fmt_u64(f, atomic_load(&attributions)); ps_fmt_tab(f);
    ps_fmt_u64(f, atomic_load(&lost_attributions)); ps_fmt_tab(f);
    ps_fmt_u64(f, atomic_load(&own_calls)); ps_fmt_tab(f);
    ps_fmt_tsv(f, ebpf_note[0] ? ebpf_note : "-"); ps_fmt_char(f, '\n');
    for (int i = 0; i < nthreads; i++) {
        ps_thread_t *t = ps_threads[i];
        ps_krusage_t *r = t ? &kernel_of(t)->rusage : NULL;
        if (!r || !r->valid) continue;
        ps_fmt_line_u64(f, "kos", (const uint64_t[]){(uint64_t)t->tid, r->utime_ns, r->stime_ns,
                                                     r->minflt, r->majflt, r->nvcsw, r->nivcsw}, 7);
    }
    if (ebpf) {
        /* (ps_kernel_fetch() ran before the rank file's warnings) */
        snapshot_ok = snap.complete;
        for (size_t i = 0; snapshot_ok && i < snap.len; i++) ps_fmt_char(f, snap.buf[i]);
        if (snapshot_ok) {
            ps_fmt_str(f, snap.kend);
            ps_fmt_char(f, '\n');
        }
    } else {
        char name[24];
        for (int i = 0; i < nthreads; i++) {
            ps_thread_t *t = ps_threads[i];
            ps_kstat_t *kstat = t ? kernel_of(t)->kstat : NULL;
            if (!kstat) continue;
            for (int id = 0; id < PS_KLIBC_N; id++) {
                if (!kstat[id].count) continue;
                ps_fmt_str(f, "ksys\t");
                ps_fmt_u64(f, (uint64_t)t->tid); ps_fmt_tab(f);
                ps_fmt_str(f, ps_kernel_key_name(PS_KLIBC_KEY + (uintptr_t)id, name)); ps_fmt_tab(f);
                ps_fmt_u64(f, kstat[id].count); ps_fmt_tab(f);
                ps_fmt_u64(f, ps_ticks_to_ns(kstat[id].ticks)); ps_fmt_char(f, '\n');
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
