/* pathscope-kcollect: the node's eBPF collector, one per user, serving every profiled process
 * of that user over the abstract socket of protocol.h (which is the contract: election,
 * start-up, requests and answers).
 *
 *   pathscope-kcollect --serve
 *
 * Environment (debugging only):
 *   PS_KCOLLECT_LOG=FILE       append what the daemon does, and libbpf's messages, to FILE
 *   PS_KCOLLECT_NOSIGNALS=1    load the sys_exit program without signals ("ok nosignals")
 *
 * The BPF programs are attached through links owned by this process only (nothing is pinned),
 * so whatever way it ends, even SIGKILL, the kernel detaches them: the syscall hooks never tax
 * the node for longer than the daemon lives.
 *
 * This file: small utilities (clocks, the log, growing arrays) and the start-up sequence
 * (election, load, fork, serve); kc_internal.h says which file holds the rest.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kc_internal.h"

uid_t kc_uid;
static int kc_log_fd = -1;
volatile sig_atomic_t kc_stop;

/* ---- small utilities ----------------------------------------------------------------------- */

uint64_t kc_now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000;
}

uint64_t kc_now_ms(void)
{
    return kc_now_us() / 1000;
}

static void kc_vlog(const char *fmt, va_list ap)
{
    if (kc_log_fd < 0) return;
    char *msg;
    if (vasprintf(&msg, fmt, ap) < 0) return;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    size_t len = strlen(msg);
    dprintf(kc_log_fd, "%lld.%06ld [%d] %s%s", (long long)t.tv_sec, t.tv_nsec / 1000,
            (int)getpid(), msg, len && msg[len - 1] == '\n' ? "" : "\n");
    free(msg);
}

__attribute__((format(printf, 1, 2))) void kc_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kc_vlog(fmt, ap);
    va_end(ap);
}

/* libbpf talks on stderr by default, which is the profiled job's: only the log hears it
 * (verifier logs included, which is why a failed load is worth a PS_KCOLLECT_LOG). */
static int kc_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    if (level != LIBBPF_DEBUG) kc_vlog(fmt, ap);
    return 0;
}

void *kc_grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return p;
    size_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    void *q = realloc(p, n * elem);
    if (q) *cap = n;
    return q;
}

static void kc_close_inherited(void)
{
    if (close_range(3, ~0u, 0) == 0) return;
    /* before Linux 5.9 */
    struct rlimit rl;
    long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                   ? (long)rl.rlim_cur : 65536;
    for (long fd = 3; fd < max; fd++) close((int)fd);
}

static void kc_on_signal(int sig)
{
    (void)sig;
    kc_stop = 1;
}

/* The BPF programs see the kernel's (initial namespace's) pids; SO_PEERCRED gives ours. In a
 * nested pid namespace they differ: /proc/self/status lists one NSpid per level. */
static int kc_nested_pid_namespace(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f) return 0;
    char line[256];
    int nested = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "NSpid:", 6)) {
            int fields = 0;
            for (char *tok = strtok(line + 6, " \t\n"); tok; tok = strtok(NULL, " \t\n")) fields++;
            nested = fields > 1;
        }
    fclose(f);
    return nested;
}

int main(int argc, char **argv)
{
    /* --serve NAME: the socket name the runtime computed (protocol.h); it must be ours */
    char own[64];
    snprintf(own, sizeof own, PS_KSOCK_FMT, (unsigned)getuid());
    const char *name = argc == 3 ? argv[2] : argc == 2 ? own : NULL;
    if (argc < 2 || argc > 3 || strcmp(argv[1], "--serve") || !kc_valid_name(name, own)) {
        fprintf(stderr, "usage: %s --serve [%s[-job-ID]]   (started by the pathscope runtime, "
                "see protocol.h)\n", PS_KCOLLECT_NAME, own);
        return 2;
    }
    /* Every descriptor from here on is ours; the child closes nothing it needs. */
    kc_close_inherited();
    const char *log = getenv("PS_KCOLLECT_LOG");
    if (log && *log) kc_log_fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    libbpf_set_print(kc_libbpf_print);
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* The name is the election: bind before anything costly. */
    kc_uid = getuid();
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (lfd < 0) {
        printf("creating the socket failed: %s\n", strerror(errno));
        return PS_KCOLLECT_EXIT_FAILED;
    }
    int elected = kc_uid == 0 ? kc_listen_root(lfd, name) : kc_listen_abstract(lfd, name);
    if (elected) return elected;
    kc_log("collector for uid %u starting on %s%s", (unsigned)kc_uid,
           kc_uid == 0 ? PS_KSOCK_DIR "/" : "@", name);

    if (kc_nested_pid_namespace()) {
        printf("pathscope-kcollect runs in a nested pid namespace (a container): the process "
               "ids it would be given are not the kernel's\n");
        kc_unlisten(lfd);
        return PS_KCOLLECT_EXIT_FAILED;
    }
    if (kc_load() || kc_attach()) {
        if (kc_skel) kc_shutdown();
        kc_unlisten(lfd);
        return PS_KCOLLECT_EXIT_FAILED;
    }
    /* one descriptor per client and one per process: room for every rank on a big node */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    pid_t child = fork();
    if (child < 0) {
        printf("fork failed: %s\n", strerror(errno));
        kc_shutdown();
        kc_unlisten(lfd);
        return PS_KCOLLECT_EXIT_FAILED;
    }
    if (child > 0) {
        /* the child holds the links now: our copies go with us */
        printf("ready\n");
        _exit(0);
    }

    setsid();
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        if (null > 2) close(null);
    }
    if (chdir("/")) { /* only so as not to pin the job's directory */ }

    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, NULL);
    struct sigaction sa = {.sa_handler = kc_on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    kc_log("serving (signals %s, page faults %s)", kc_signals ? "yes" : "no",
           kc_page_faults ? "yes" : "no");
    kc_serve(lfd);
    /* newcomers must start a collector of their own, not talk to a detached one */
    kc_unlisten(lfd);
    kc_shutdown();
    kc_log("exiting%s", kc_stop ? " on a signal" : ": nobody to serve");
    return 0;
}
