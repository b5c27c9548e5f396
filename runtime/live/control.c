/* The control channel (docs/format.md, "Live segment and control channel"; docs/design-
 * probes.md section 5): one thread per process, started with the real pthread_create so that
 * pathscope never registers or samples it, with every signal blocked but SIGTRAP (the probe
 * patcher may trap in it).  It sleeps in poll on its socket with the live interval as the
 * timeout, answers one request at a time and publishes the live segment (publish.c) once per
 * interval.
 *
 * Both files live in the private directory /dev/shm/pathscope-<euid>/, used only when it is a
 * real directory of ours with mode 0700 (a squatter turns the channel off, with warning
 * `control-dir`).  They are removed at every ending of the process (live_stop) and before an
 * exec (made again if it fails); a fork child closes and unmaps its copies.  The descriptors
 * are adopted (core/ownfd.c) and touched only while still ours.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "live.h"
#include "live_internal.h"
#include "source.h"

#define LINE_MAX_BYTES 4096
#define REQUEST_LINES 4096
#define REQUEST_BYTES (1u << 20)
#define REQUEST_MS 2000
#define WATCHED_PEERS 1024 /* ranks of this node watched for an early end (output/peers.c) */

static struct {
    int dirfd, listen_fd, wake_rd, wake_wr;
    ps_ownfd_t dir_own, listen_own, wake_rd_own, wake_wr_own;
    pid_t pid;             /* the process the files belong to (not a vfork child) */
    char sock_name[64], live_name[64];
    int has_sock, has_live;
    unsigned interval_ms;
    pthread_t thread;
    int thread_running;
    atomic_int stop;
} live = {.dirfd = -1, .listen_fd = -1, .wake_rd = -1, .wake_wr = -1};

static uint64_t monotonic_ms(void) { return ps_clock_monotonic_ns() / 1000000u; }

/* ---- the private directory --------------------------------------------------------------- */
/* Opens /dev/shm/pathscope-<euid>/ (made if missing) without following a link, and checks it
 * is ours and 0700.  Returns the descriptor or -1 (warning recorded). */
static int open_private_dir(void)
{
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/pathscope-%u", (unsigned)geteuid());
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        ps_warn("control-dir", "control channel and live view off: cannot create the private "
                               "directory /dev/shm/pathscope-<uid>");
        return -1;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 07777) != 0700) {
        if (fd >= 0) close(fd);
        ps_warn("control-dir", "control channel and live view off: /dev/shm/pathscope-<uid> is "
                               "not a directory of ours with mode 0700 (a link, another owner "
                               "or other permissions)");
        return -1;
    }
    return ps_fd_adopt(fd, &live.dir_own);
}

/* ---- the socket ----------------------------------------------------------------------- */
/* bind and connect take a path: ours goes through the directory's descriptor, so the socket
 * is made in (and looked up in) the directory we checked, whatever its path does meanwhile */
static struct sockaddr_un socket_address(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", live.dirfd, live.sock_name);
    return sa;
}

static int bind_in_dir(int fd)
{
    struct sockaddr_un sa = socket_address();
    return bind(fd, (struct sockaddr *)&sa, sizeof sa);
}

/* A file of our name left by this process's previous program (an exec that bypassed libc's
 * execve; pid and start time name one process): nobody listens, the connection is refused;
 * then it is removed.  1: removed. */
static int remove_stale_socket(void)
{
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0) return 0;
    struct sockaddr_un sa = socket_address();
    int refused = connect(probe, (struct sockaddr *)&sa, sizeof sa) != 0 && errno == ECONNREFUSED;
    close(probe);
    return refused && unlinkat(live.dirfd, live.sock_name, 0) == 0;
}

static int open_socket(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int rc = bind_in_dir(fd);
    if (rc != 0 && errno == EADDRINUSE && remove_stale_socket()) rc = bind_in_dir(fd);
    /* (the 0700 directory guards it already; 0600 like the segment, whatever the umask) */
    if (rc == 0) fchmodat(live.dirfd, live.sock_name, 0600, 0);
    if (rc != 0 || listen(fd, 8) != 0) {
        if (rc == 0) unlinkat(live.dirfd, live.sock_name, 0);
        close(fd);
        ps_warn("control-socket", "control channel off: its socket could not be made");
        return -1;
    }
    live.has_sock = 1;
    return ps_fd_adopt(fd, &live.listen_own);
}

/* ---- one request -------------------------------------------------------------------------- */
static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

void ps_reply(ps_request_t *rq, const char *line)
{
    char buf[LINE_MAX_BYTES + 1];
    if (rq->failed) return;
    size_t n = strnlen(line, LINE_MAX_BYTES);
    memcpy(buf, line, n);
    buf[n] = '\n';
    if (send_all(rq->fd, buf, n + 1) != 0) rq->failed = 1;
}

/* Reads the request (until the client's EOF) within the bounds; NULL or the error line. */
static const char *read_request(int fd, char *buf, size_t *len, uint64_t deadline_ms)
{
    *len = 0;
    for (;;) {
        uint64_t now = monotonic_ms();
        if (now >= deadline_ms) return "error request timed out";
        struct pollfd p = {fd, POLLIN, 0};
        int n = poll(&p, 1, (int)(deadline_ms - now));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return "error request timed out";
        ssize_t r = read(fd, buf + *len, REQUEST_BYTES + 1 - *len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return "error request not readable";
        if (r == 0) return NULL;
        *len += (size_t)r;
        if (*len > REQUEST_BYTES) return "error request over 1048576 bytes";
    }
}

/* Splits buf into lines in place (a last line without '\n' counts). */
static const char *split_lines(char *buf, size_t len, char **lines, int *nlines)
{
    *nlines = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && buf[i] != '\n') continue;
        if (i == len && i == start) break;
        if (i - start > LINE_MAX_BYTES) return "error line over 4096 bytes";
        if (*nlines == REQUEST_LINES) return "error request over 4096 lines";
        buf[i] = 0;
        lines[(*nlines)++] = buf + start;
        start = i + 1;
    }
    if (!*nlines) return "error empty request";
    return NULL;
}

static void answer_live(ps_request_t *rq, const char *what)
{
    char line[LINE_MAX_BYTES];
    if (strcmp(what, "info") != 0) {
        snprintf(line, sizeof line, "error unknown live request '%s'", what);
        ps_reply(rq, line);
        return;
    }
    snprintf(line, sizeof line, "pid %d", (int)getpid());
    ps_reply(rq, line);
    snprintf(line, sizeof line, "rank %d", ps_world_rank);
    ps_reply(rq, line);
    const char *outdir = ps_outdir_path();
    snprintf(line, sizeof line, "outdir %s", outdir[0] == '/' ? outdir : "-");
    ps_reply(rq, line);
    snprintf(line, sizeof line, "program %s", ps_program_name());
    ps_reply(rq, line);
}

/* To the source named by the request's first word. */
static void dispatch(ps_request_t *rq)
{
    char word[64];
    const char *first = rq->lines[0];
    size_t n = strcspn(first, " \t");
    snprintf(word, sizeof word, "%.*s", (int)(n < sizeof word ? n : sizeof word - 1), first);
    const char *rest = first + n + (first[n] ? 1 : 0);
    if (strcmp(word, "live") == 0) {
        answer_live(rq, rest);
        return;
    }
    for (int i = 0; i < PS_NSOURCES; i++) {
        if (ps_sources[i]->command && strcmp(ps_sources[i]->name, word) == 0) {
            ps_sources[i]->command(rq);
            return;
        }
    }
    char line[128];
    snprintf(line, sizeof line, "error unknown request '%s'", word);
    ps_reply(rq, line);
}

/* After the answer: what the client still sends is read and dropped (bounded, until the
 * request's deadline), so that closing does not reset the connection before it read us. */
static void drain(int fd, uint64_t deadline_ms)
{
    char scratch[4096];
    shutdown(fd, SHUT_WR);
    for (size_t total = 0; total <= REQUEST_BYTES;) {
        uint64_t now = monotonic_ms();
        struct pollfd p = {fd, POLLIN, 0};
        if (now >= deadline_ms || poll(&p, 1, (int)(deadline_ms - now)) <= 0) return;
        ssize_t r = read(fd, scratch, sizeof scratch);
        if (r <= 0) return;
        total += (size_t)r;
    }
}

static void serve_connection(int fd)
{
    uint64_t deadline = monotonic_ms() + REQUEST_MS;
    ps_request_t rq = {.fd = fd};
    struct ucred cred;
    socklen_t clen = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 ||
        (cred.uid != geteuid() && cred.uid != 0)) {
        ps_reply(&rq, "error permission denied");
        drain(fd, deadline);
        return;
    }
    struct timeval tv = {REQUEST_MS / 1000, 0}; /* a client that stops reading */
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    char *buf = malloc(REQUEST_BYTES + 1);
    char **lines = malloc(REQUEST_LINES * sizeof *lines);
    size_t len = 0;
    const char *err = !buf || !lines ? "error out of memory" : NULL;
    if (!err) err = read_request(fd, buf, &len, deadline);
    if (!err) err = split_lines(buf, len, lines, &rq.nlines);
    rq.lines = lines;
    if (err) ps_reply(&rq, err);
    else dispatch(&rq);
    ps_reply(&rq, "end");
    free(lines);
    free(buf);
    drain(fd, deadline);
}

/* ---- the thread --------------------------------------------------------------------------- */
static void accept_one(void)
{
    if (!ps_fd_owned(&live.listen_own)) { /* the application closed it: stop listening */
        live.listen_fd = -1;
        return;
    }
    int c = accept4(live.listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0) return;
    serve_connection(c);
    close(c);
}

static void *control_main(void *arg)
{
    (void)arg;
    ps_own_thread_add((int)syscall(SYS_gettid)); /* (its system calls are this process's) */
    unsigned interval = live.interval_ms;
    uint64_t next = 0;
    while (!atomic_load(&live.stop)) {
        uint64_t now = monotonic_ms();
        if (live.has_live && now >= next) {
            interval = ps_live_publish(PS_LIVE_RUNNING);
            next = now + interval;
        }
        static struct pollfd p[2 + WATCHED_PEERS];
        static int peer_of[WATCHED_PEERS];
        p[0] = (struct pollfd){live.wake_rd, POLLIN, 0};
        p[1] = (struct pollfd){live.listen_fd, POLLIN, 0};
        /* the node's other ranks, once MPI_Init made their table (output/peers.c) */
        int npeer = ps_peers_watch(p + 2, peer_of, WATCHED_PEERS);
        /* (without a segment: wake every second -- for the peers' table, and for the stop
         * flag if a descriptor was taken from us) */
        int timeout = live.has_live ? (int)(next > now ? next - now : 0) : 1000;
        int n = poll(p, (nfds_t)(2 + npeer), timeout);
        if (n <= 0) continue;
        if (p[0].revents && atomic_load(&live.stop)) break;
        for (int i = 0; i < npeer; i++)
            if (p[2 + i].revents) ps_peers_watch_ended(peer_of[i]);
        if (p[0].revents) live.wake_rd = -1; /* closed under us: stop watching it */
        if (p[1].revents & POLLIN) accept_one();
        else if (p[1].revents & POLLNVAL) live.listen_fd = -1;
    }
    return NULL;
}

/* The real pthread_create: ours (core/threads.c) would register the thread. */
static int start_thread(void)
{
    typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    static create_fn real;
    if (!real) real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (!real) return -1;
    sigset_t all, saved;
    sigfillset(&all);
    sigdelset(&all, SIGTRAP);
    pthread_sigmask(SIG_SETMASK, &all, &saved); /* the thread starts with this mask */
    int rc = real(&live.thread, NULL, control_main, NULL);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    return rc;
}

/* The thread's wake-up: a connected pair whose writing end is shut down to stop it -- a
 * shutdown, not a write, so that the application's exact write counts (kernel time, eBPF)
 * stay its own. */
static int open_wake_pair(void)
{
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return -1;
    live.wake_rd = ps_fd_adopt(fds[0], &live.wake_rd_own);
    live.wake_wr = ps_fd_adopt(fds[1], &live.wake_wr_own);
    return 0;
}

static void close_owned(int *fd, ps_ownfd_t *own)
{
    ps_fd_release(own);
    *fd = -1;
}

/* [signal-safe] */
static void remove_files(void)
{
    if (!ps_fd_owned(&live.dir_own)) return;
    if (live.has_sock) unlinkat(live.dirfd, live.sock_name, 0);
    if (live.has_live) unlinkat(live.dirfd, live.live_name, 0);
    live.has_sock = live.has_live = 0;
}

static void close_all(void)
{
    close_owned(&live.listen_fd, &live.listen_own);
    close_owned(&live.wake_rd, &live.wake_rd_own);
    close_owned(&live.wake_wr, &live.wake_wr_own);
    close_owned(&live.dirfd, &live.dir_own);
}

/* pathscope's own work on an application thread (start, stop, exec): its tree is marked busy,
 * so that a sample or a kernel-time signal landing in our system calls is dropped as
 * pathscope's instead of going on the application's paths. */
static ps_thread_t *own_work_begin(void)
{
    ps_thread_t *t = ps_self;
    if (!t || t->busy) return NULL;
    t->busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    return t;
}

static void own_work_end(ps_thread_t *t)
{
    if (!t) return;
    atomic_signal_fence(memory_order_seq_cst);
    t->busy = 0;
}

static void live_start(void)
{
    int control = ps_option_on(ps_options.control);
    unsigned interval = (unsigned)atoi(ps_options.live);
    if (live.thread_running || (!control && !interval)) return;
    live.pid = getpid();
    if ((live.dirfd = open_private_dir()) < 0) return;
    uint64_t start_time = ps_proc_start_time(live.pid);
    snprintf(live.sock_name, sizeof live.sock_name, "%d-%llu.sock", (int)live.pid,
             (unsigned long long)start_time);
    snprintf(live.live_name, sizeof live.live_name, "%d-%llu.live", (int)live.pid,
             (unsigned long long)start_time);
    if (control) live.listen_fd = open_socket();
    if (interval) {
        int error = ps_live_segment_create(live.dirfd, live.live_name,
                                           live.has_sock ? live.sock_name : "", start_time, interval);
        if (error) ps_warn("live-segment", "live view off: its segment could not be made");
        live.has_live = !error;
    }
    live.interval_ms = interval;
    atomic_store(&live.stop, 0);
    if ((live.has_sock || live.has_live) && open_wake_pair() == 0 && start_thread() == 0) {
        live.thread_running = 1;
        return;
    }
    remove_files();
    ps_live_segment_unmap();
    close_all();
}

/* Stops the thread (waiting at most 3 s), removes the files and, once the thread is gone,
 * writes the segment's last header (state ended) and closes everything. */
static void live_stop(void)
{
    atomic_store(&live.stop, 1);
    if (ps_fd_owned(&live.wake_wr_own)) shutdown(live.wake_wr, SHUT_WR);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 3;
    int joined = pthread_timedjoin_np(live.thread, NULL, &until) == 0;
    remove_files();
    if (!joined) return; /* stuck in a request: leave it its descriptors and its mapping */
    live.thread_running = 0;
    ps_live_publish(PS_LIVE_ENDED);
    ps_live_segment_unmap();
    close_all();
}

void ps_live_start(void)
{
    ps_thread_t *t = own_work_begin();
    live_start();
    own_work_end(t);
}

int ps_live_stop(void)
{
    if (!live.thread_running || getpid() != live.pid) return 0; /* (a vfork child: the parent's) */
    ps_thread_t *t = own_work_begin();
    live_stop();
    own_work_end(t);
    return 1;
}

/* A fatal signal or a peer's request: the files go and the thread stops (the process is
 * about to end; a later ending joins the thread). [signal-safe] */
void ps_live_stop_signal(void)
{
    if (!live.thread_running || getpid() != live.pid) return;
    atomic_store(&live.stop, 1);
    remove_files();
}

/* A fork child: no thread here; its copies of the descriptors and of the mapping go, the
 * parent's files stay. [signal-safe] */
void ps_live_fork_child(void)
{
    if (!live.thread_running) return;
    live.thread_running = 0;
    live.has_sock = live.has_live = 0;
    ps_live_segment_unmap();
    close_all();
}

__attribute__((destructor)) static void live_fini(void) { (void)ps_live_stop(); }
